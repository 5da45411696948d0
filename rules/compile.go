package rules

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"unicode"
)

// selKind orders selectors from the least to the most specific.
type selKind uint8

const (
	selStar selKind = iota // "*", "all"
	selGlob                // a path.Match pattern over agent ids
	selRole                // role:NAME
	selID                  // an agent id
)

type selector struct {
	kind  selKind
	value string // the id, the role name or the pattern
}

// globChars are the characters a glob may use: those of agent ids and the
// pattern syntax of path.Match (no backslash: ids have nothing to escape).
const globChars = "abcdefghijklmnopqrstuvwxyz0123456789._-*?[]^"

func parseSelector(s, p string) (selector, error) {
	switch {
	case s == "":
		return selector{}, fieldErr(p, "empty; want an agent id, role:NAME, a glob or *")
	case len(s) > MaxSelectorLen:
		return selector{}, fieldErr(p, "%d bytes, at most %d", len(s), MaxSelectorLen)
	case s == "*" || s == "all":
		return selector{kind: selStar}, nil
	case strings.HasPrefix(s, "role:"):
		name := s[len("role:"):]
		if !ValidName(name) {
			return selector{}, fieldErr(p, "role %q must match %s", name, NamePattern)
		}
		return selector{kind: selRole, value: name}, nil
	case strings.ContainsAny(s, "*?["):
		if i := strings.IndexFunc(s, func(r rune) bool { return !strings.ContainsRune(globChars, r) }); i >= 0 {
			return selector{}, fieldErr(p, "bad glob %q: character %q; globs use a-z 0-9 . _ - and * ? [ ] ^", s, s[i:i+1])
		}
		if _, err := path.Match(s, ""); err != nil {
			return selector{}, fieldErr(p, "bad glob %q: %v", s, err)
		}
		return selector{kind: selGlob, value: s}, nil
	case !ValidName(s):
		return selector{}, fieldErr(p, "%q is not an agent id (%s), role:NAME, a glob or *", s, NamePattern)
	default:
		return selector{kind: selID, value: s}, nil
	}
}

func (s selector) matches(id, role string) bool {
	switch s.kind {
	case selStar:
		return true
	case selID:
		return id == s.value
	case selRole:
		return role != "" && role == s.value
	default:
		ok, _ := path.Match(s.value, id) // validated when compiled
		return ok
	}
}

// ruleSet is the union of selector lists: does it admit (id, role)?
type ruleSet struct {
	star  bool
	ids   map[string]struct{}
	roles map[string]struct{}
	globs []string
	shown []string // the selectors as written, in document order, once each
	srcs  []string // the fields the lists come from
}

func (s *ruleSet) add(sel selector, raw string) {
	if !slices.Contains(s.shown, raw) {
		s.shown = append(s.shown, raw)
	}
	switch sel.kind {
	case selStar:
		s.star = true
	case selID:
		if s.ids == nil {
			s.ids = map[string]struct{}{}
		}
		s.ids[sel.value] = struct{}{}
	case selRole:
		if s.roles == nil {
			s.roles = map[string]struct{}{}
		}
		s.roles[sel.value] = struct{}{}
	case selGlob:
		if !slices.Contains(s.globs, sel.value) {
			s.globs = append(s.globs, sel.value)
		}
	}
}

func (s *ruleSet) admits(id, role string) bool {
	if s.star {
		return true
	}
	if _, ok := s.ids[id]; ok {
		return true
	}
	if role != "" {
		if _, ok := s.roles[role]; ok {
			return true
		}
	}
	for _, g := range s.globs {
		if ok, _ := path.Match(g, id); ok {
			return true
		}
	}
	return false
}

// subjects finds the lists that govern an agent: those of the most
// specific kind of subject that selects it. Subjects of one kind and value
// are merged into one set at compile time.
type subjects struct {
	ids      map[string]*ruleSet
	roles    map[string]*ruleSet
	globs    []string // patterns, document order
	globSets []*ruleSet
	star     *ruleSet
}

func (x *subjects) set(sub selector) *ruleSet {
	get := func(m *map[string]*ruleSet) *ruleSet {
		if *m == nil {
			*m = map[string]*ruleSet{}
		}
		s := (*m)[sub.value]
		if s == nil {
			s = &ruleSet{}
			(*m)[sub.value] = s
		}
		return s
	}
	switch sub.kind {
	case selID:
		return get(&x.ids)
	case selRole:
		return get(&x.roles)
	case selGlob:
		if i := slices.Index(x.globs, sub.value); i >= 0 {
			return x.globSets[i]
		}
		x.globs = append(x.globs, sub.value)
		x.globSets = append(x.globSets, &ruleSet{})
		return x.globSets[len(x.globSets)-1]
	default:
		if x.star == nil {
			x.star = &ruleSet{}
		}
		return x.star
	}
}

// check reports whether any list governs (id, role) and, if so, whether
// one of them admits (oid, orole). It allocates nothing: it runs for every
// recipient of every send.
func (x *subjects) check(id, role, oid, orole string) (governed, admitted bool) {
	if s := x.ids[id]; s != nil {
		return true, s.admits(oid, orole)
	}
	if role != "" {
		if s := x.roles[role]; s != nil {
			return true, s.admits(oid, orole)
		}
	}
	for i, g := range x.globs {
		if ok, _ := path.Match(g, id); ok {
			governed = true
			if x.globSets[i].admits(oid, orole) {
				return true, true
			}
		}
	}
	if governed {
		return true, false
	}
	if x.star != nil {
		return true, x.star.admits(oid, orole)
	}
	return false, false
}

// governing lists the sets check consulted for (id, role), to explain a
// refusal.
func (x *subjects) governing(id, role string) []*ruleSet {
	if s := x.ids[id]; s != nil {
		return []*ruleSet{s}
	}
	if s := x.roles[role]; role != "" && s != nil {
		return []*ruleSet{s}
	}
	var out []*ruleSet
	for i, g := range x.globs {
		if ok, _ := path.Match(g, id); ok {
			out = append(out, x.globSets[i])
		}
	}
	if len(out) == 0 && x.star != nil {
		out = append(out, x.star)
	}
	return out
}

type compiledForbidden struct {
	from, to selector
	reason   string
}

// Compiled is a compiled rules document: immutable, safe for concurrent
// use. A nil *Compiled is "no document": everyone may message everyone,
// and the default interrupt rule holds.
type Compiled struct {
	doc            *Document
	allowByDefault bool
	send, recv     subjects
	forbidden      []compiledForbidden
	// forbidden entries by the kind of their from selector, as indexes
	// into forbidden in document order.
	fromID, fromRole map[string][]int
	fromOther        []int // globs and "*"
	// interrupt is the document's interrupt list; nil when it gives none
	// (then defaultInterrupt decides).
	interrupt *interruptRule
}

// RerouteBlockedTo is the agent that receives the copies the rules block
// (the document's reroute_blocked_to), "" when blocked copies are dropped
// or for a nil r.
func (r *Compiled) RerouteBlockedTo() string {
	if r == nil {
		return ""
	}
	return r.doc.RerouteBlockedTo
}

// ruleEntry is one agent rule with where it comes from.
type ruleEntry struct {
	rule AgentRule
	path string
}

// Compile validates d and builds its compiled form, which keeps d (do not
// change it afterwards). A refusal is a *FieldError naming the first field
// that breaks a rule, in a fixed order (preset, orchestrator_role,
// default, reroute_blocked_to, the entry counts, agents,
// allowed_interactions by sorted key, forbidden, forbidden_interactions,
// interrupt); a nil d is one on "rules".
// Compiling costs in proportion to the document; callers that check many
// sends against one document compile it once (fsm caches it by hash).
func Compile(d *Document) (*Compiled, error) {
	if d == nil {
		return nil, fieldErr("rules", "required")
	}
	orch, err := checkDocument(d)
	if err != nil {
		return nil, err
	}
	r := &Compiled{doc: d, allowByDefault: d.EffectiveDefault() == Allow}
	entries, err := allowEntries(d, orch)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if err := r.addAllow(e); err != nil {
			return nil, err
		}
	}
	if err := r.addForbidden(d); err != nil {
		return nil, err
	}
	interrupt, err := compileInterrupt(d.Interrupt, "interrupt")
	if err != nil {
		return nil, err
	}
	r.interrupt = interrupt
	return r, nil
}

// checkDocument checks d's top-level settings (preset, orchestrator_role,
// default, reroute_blocked_to) and sizes, and returns the orchestrator
// role.
func checkDocument(d *Document) (string, error) {
	switch d.Preset {
	case "", PresetHierarchical:
	default:
		return "", fieldErr("preset", "unknown preset %q; known: %s", d.Preset, PresetHierarchical)
	}
	orch := d.OrchestratorRole
	if orch != "" {
		if d.Preset == "" {
			return "", fieldErr("orchestrator_role", "only with preset %s", PresetHierarchical)
		}
		if !ValidName(orch) {
			return "", fieldErr("orchestrator_role", "must match %s", NamePattern)
		}
	} else {
		orch = DefaultOrchestratorRole
	}
	switch d.Default {
	case "", Allow, Deny:
	default:
		return "", fieldErr("default", "%q: want allow or deny", d.Default)
	}
	if to := d.RerouteBlockedTo; to != "" && !ValidName(to) {
		return "", fieldErr("reroute_blocked_to", "%q is not an agent id (%s)", to, NamePattern)
	}
	if n := len(d.Agents) + len(d.AllowedInteractions); n > MaxEntries {
		return "", fieldErr("agents", "%d entries with allowed_interactions, at most %d", n, MaxEntries)
	}
	if n := len(d.Forbidden) + len(d.ForbiddenInteractions); n > MaxEntries {
		return "", fieldErr("forbidden", "%d entries with forbidden_interactions, at most %d", n, MaxEntries)
	}
	return orch, nil
}

// allowEntries are d's allow rules in order: the preset's, agents, then
// allowed_interactions by key, each with its path.
func allowEntries(d *Document, orch string) ([]ruleEntry, error) {
	var entries []ruleEntry
	if d.Preset == PresetHierarchical {
		src := "preset " + PresetHierarchical
		entries = append(entries,
			ruleEntry{AgentRule{Agent: "*", CanSendTo: []string{"role:" + orch}}, src},
			ruleEntry{AgentRule{Agent: "role:" + orch, CanSendTo: []string{"*"}}, src})
	}
	for i, a := range d.Agents {
		p := fmt.Sprintf("agents[%d]", i)
		if a.Agent == "" {
			return nil, fieldErr(p+".agent", "required: an agent id, role:NAME, a glob or *")
		}
		entries = append(entries, ruleEntry{a, p})
	}
	keys := make([]string, 0, len(d.AllowedInteractions))
	for k := range d.AllowedInteractions {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		a := d.AllowedInteractions[k]
		p := subjectPath(k)
		if a.Agent != "" {
			return nil, fieldErr(p+".agent", "not here: the key names the subject")
		}
		a.Agent = k
		entries = append(entries, ruleEntry{a, p})
	}
	return entries, nil
}

// addAllow indexes one allow rule: its subject's can_send_to and
// can_receive_from selectors.
func (r *Compiled) addAllow(e ruleEntry) error {
	subjPath := e.path + ".agent"
	if strings.HasPrefix(e.path, "allowed_interactions") {
		subjPath = e.path
	}
	sub, err := parseSelector(e.rule.Agent, subjPath)
	if err != nil {
		return err
	}
	if e.rule.CanSendTo == nil && e.rule.CanReceiveFrom == nil {
		return fieldErr(e.path, "give can_send_to or can_receive_from (or both)")
	}
	for _, l := range []struct {
		name string
		list []string
		idx  *subjects
	}{{"can_send_to", e.rule.CanSendTo, &r.send}, {"can_receive_from", e.rule.CanReceiveFrom, &r.recv}} {
		if l.list == nil {
			continue
		}
		lp := e.path + "." + l.name
		if len(l.list) > MaxSelectors {
			return fieldErr(lp, "%d entries, at most %d", len(l.list), MaxSelectors)
		}
		set := l.idx.set(sub)
		if e.path != "preset "+PresetHierarchical {
			set.srcs = append(set.srcs, lp)
		} else if !slices.Contains(set.srcs, e.path) {
			set.srcs = append(set.srcs, e.path)
		}
		for j, raw := range l.list {
			sel, err := parseSelector(raw, fmt.Sprintf("%s[%d]", lp, j))
			if err != nil {
				return err
			}
			set.add(sel, raw)
		}
	}
	return nil
}

// addForbidden indexes d's forbidden rules (forbidden, then
// forbidden_interactions) by their from selector.
func (r *Compiled) addForbidden(d *Document) error {
	r.fromID, r.fromRole = map[string][]int{}, map[string][]int{}
	for _, l := range []struct {
		name string
		list []ForbiddenRule
	}{{"forbidden", d.Forbidden}, {"forbidden_interactions", d.ForbiddenInteractions}} {
		for i, f := range l.list {
			p := fmt.Sprintf("%s[%d]", l.name, i)
			from, err := parseSelector(f.From, p+".from")
			if err != nil {
				return err
			}
			to, err := parseSelector(f.To, p+".to")
			if err != nil {
				return err
			}
			if len(f.Reason) > MaxReasonLen {
				return fieldErr(p+".reason", "%d bytes, at most %d", len(f.Reason), MaxReasonLen)
			}
			if strings.IndexFunc(f.Reason, unicode.IsControl) >= 0 {
				return fieldErr(p+".reason", "must be one line without control characters")
			}
			reason := f.Reason
			if strings.TrimSpace(reason) == "" {
				reason = fmt.Sprintf("forbidden by %s: %s → %s", p, f.From, f.To)
			}
			n := len(r.forbidden)
			r.forbidden = append(r.forbidden, compiledForbidden{from: from, to: to, reason: reason})
			switch from.kind {
			case selID:
				r.fromID[from.value] = append(r.fromID[from.value], n)
			case selRole:
				r.fromRole[from.value] = append(r.fromRole[from.value], n)
			default:
				r.fromOther = append(r.fromOther, n)
			}
		}
	}
	return nil
}

// Allows reports whether from (of role fromRole; "" when not registered)
// may send to to (of role toRole), and if not, why: the forbidden entry's
// reason, or which list refuses. It is a pure function of the document
// (the same answer on every node) and allocates nothing when it allows.
// A nil *Compiled allows everything.
func (r *Compiled) Allows(from, fromRole, to, toRole string) (bool, string) {
	if r == nil {
		return true, ""
	}
	if i := r.firstForbidden(from, fromRole, to, toRole); i >= 0 {
		return false, r.forbidden[i].reason
	}
	sendGoverned, sendOK := r.send.check(from, fromRole, to, toRole)
	if sendGoverned && !sendOK {
		return false, explain(from, fromRole, "may send only to", r.send.governing(from, fromRole))
	}
	recvGoverned, recvOK := r.recv.check(to, toRole, from, fromRole)
	if recvGoverned && !recvOK {
		return false, explain(to, toRole, "accepts messages only from", r.recv.governing(to, toRole))
	}
	if !sendGoverned && !recvGoverned && !r.allowByDefault {
		return false, fmt.Sprintf("no rule allows %s → %s, and the rules' default is deny", from, to)
	}
	return true, ""
}

// firstForbidden is the index of the first forbidden entry (in document
// order) that refuses the pair, or -1.
func (r *Compiled) firstForbidden(from, fromRole, to, toRole string) int {
	best := -1
	consider := func(idx []int) {
		for _, i := range idx {
			if best >= 0 && i >= best {
				return // idx is ascending
			}
			f := r.forbidden[i]
			if f.from.matches(from, fromRole) && f.to.matches(to, toRole) {
				best = i
				return
			}
		}
	}
	consider(r.fromID[from])
	if fromRole != "" {
		consider(r.fromRole[fromRole])
	}
	consider(r.fromOther)
	return best
}

// explain words a refusal by allow lists:
// "tester (role qa) may send only to master_agent, developer_agent (agents[3].can_send_to)".
func explain(id, role, verb string, sets []*ruleSet) string {
	var shown, srcs []string
	for _, s := range sets {
		for _, x := range s.shown {
			if !slices.Contains(shown, x) {
				shown = append(shown, x)
			}
		}
		srcs = append(srcs, s.srcs...)
	}
	who := id
	if role != "" {
		who += " (role " + role + ")"
	}
	list := strings.Join(shown, ", ")
	if len(shown) == 0 {
		list = "nobody"
	}
	return fmt.Sprintf("%s %s %s (%s)", who, verb, list, strings.Join(srcs, ", "))
}

// Document is the document r was compiled from (nil for a nil r).
func (r *Compiled) Document() *Document {
	if r == nil {
		return nil
	}
	return r.doc
}
