package fsm

// Communication rules: who may message whom.
//
// The rules document is replicated like everything else: set_rules replaces
// it (or removes it) through the log, and apply checks every resolved
// recipient of a send against the document stored at that point of the
// log, so every node refuses the same sends.
//
// # The document
//
// JSON, or YAML through the API (PUT /v1/rules with Content-Type
// application/yaml); the YAML keys are the JSON names:
//
//	preset: hierarchical            # optional; the only preset so far
//	orchestrator_role: orchestrator # optional, with the preset; default "orchestrator"
//	default: deny                   # optional: allow | deny, for pairs no list speaks about
//	agents:                         # per subject: who it may send to, hear from
//	  - agent: developer_agent
//	    can_send_to: [master_agent, reviewer_agent, "role:tester"]
//	    can_receive_from: ["*"]
//	  - agent: "engineer_*"
//	    can_send_to: ["role:orchestrator"]
//	allowed_interactions:           # the seed format: the same, keyed by subject
//	  master_agent: {can_send_to: ["*"], can_receive_from: ["*"]}
//	forbidden:                      # {from, to, reason}; override every allow
//	  - {from: tester_agent, to: reviewer_agent, reason: Should go through developer first}
//
// forbidden_interactions is accepted as another name for forbidden, as in
// the seed file communication_rules.yaml. A list may be given as one string
// ("*"); null or a missing list says nothing, [] allows nobody.
//
// Selectors (subjects, list entries, from and to of forbidden entries):
// an agent id ("codex"), "role:NAME" (every agent registered with that
// role), a glob matched against agent ids with path.Match ("engineer_*",
// "qa-?", "[ab]*"), or "*" (also "all") for every agent. An agent that is
// not registered has no role, so role selectors never match it.
//
// # Precedence
//
// For a send from F (role FR) to one recipient T (role TR):
//
//  1. No document: allowed.
//  2. A forbidden entry whose from matches F and whose to matches T refuses
//     the send, whatever any list allows. Its reason is the answer (the
//     first matching entry in document order; forbidden before
//     forbidden_interactions); an entry without one gets "forbidden by
//     forbidden[i]: F → T".
//  3. The sender's can_send_to: among the entries whose subject matches F
//     and that give can_send_to, only those of the most specific kind count:
//     an agent id over role:NAME over a glob over "*". Several entries of
//     that kind count together (any of their lists may admit T). If such
//     entries exist and none admits T, the send is refused.
//  4. The recipient's can_receive_from, chosen the same way for T, must
//     admit F.
//  5. If neither 3 nor 4 found a list (the document says nothing about
//     this pair), the default decides: "default" if the document sets it;
//     otherwise deny when the document has any allow list or a preset (it is
//     an allowlist: what it does not allow is refused), allow when it has
//     only forbidden entries (a denylist: what it does not forbid is
//     allowed).
//
// A more specific entry replaces a less specific one only for the list it
// gives: an agent entry with only can_receive_from keeps the can_send_to of
// its role or glob entry.
//
// The hierarchical preset adds two entries as if listed first in agents:
// subject "*" with can_send_to ["role:ORCH"], and subject "role:ORCH"
// with can_send_to ["*"], ORCH being orchestrator_role. So a worker (any
// agent not of that role, registered or not) may send only to
// orchestrators, an orchestrator to anyone; a more specific entry (a role,
// a glob, an id) refines that for its subjects, and forbidden entries
// still override.
//
// Limits: MaxRulesBytes for the document, MaxRuleEntries entries in agents
// plus allowed_interactions and as many in forbidden plus
// forbidden_interactions, MaxRuleSelectors per list, MaxSelectorLen per
// selector, MaxReasonLen per reason. A refused document names the field:
// "agents[2].can_send_to[0]: bad glob ...".

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"

	"go.etcd.io/bbolt"
)

// OpSetRules replaces or removes the rules document (body: SetRulesCommand).
const OpSetRules Op = "set_rules"

// Limits and names of the rules document.
const (
	MaxRulesBytes    = 256 << 10 // the document, as sent and as stored (JSON)
	MaxRuleEntries   = 1000      // agents + allowed_interactions; forbidden + forbidden_interactions
	MaxRuleSelectors = 1000      // entries of one can_send_to or can_receive_from list
	MaxSelectorLen   = 128       // bytes of one selector
	MaxReasonLen     = 1024      // bytes of a forbidden entry's reason

	PresetHierarchical      = "hierarchical"
	DefaultOrchestratorRole = "orchestrator"
	RulesAllow              = "allow"
	RulesDeny               = "deny"
)

// RulesDocument is the communication-rules document as the operator
// writes it (see the package documentation of rules.go above for the
// format and the precedence). It is stored as its JSON form.
type RulesDocument struct {
	// Preset is "" or "hierarchical".
	Preset string `json:"preset,omitempty"`
	// OrchestratorRole is the role the hierarchical preset routes through;
	// "" means DefaultOrchestratorRole. Only with the preset.
	OrchestratorRole string `json:"orchestrator_role,omitempty"`
	// Default is "allow", "deny" or "" (deny for an allowlist document,
	// allow for a document with forbidden entries only).
	Default string `json:"default,omitempty"`
	// Agents lists per-subject allow lists.
	Agents []AgentRule `json:"agents,omitempty"`
	// AllowedInteractions is the seed form of Agents: subject → lists (the
	// entries' Agent is empty).
	AllowedInteractions map[string]AgentRule `json:"allowed_interactions,omitempty"`
	// Forbidden entries refuse a pair whatever the lists allow.
	Forbidden []ForbiddenRule `json:"forbidden,omitempty"`
	// ForbiddenInteractions is the seed name of Forbidden; both count.
	ForbiddenInteractions []ForbiddenRule `json:"forbidden_interactions,omitempty"`
}

// AgentRule gives the allow lists of the agents its subject selects. A nil
// list says nothing; an empty one allows nobody.
type AgentRule struct {
	// Agent is the subject: an agent id, role:NAME, a glob or "*".
	Agent          string   `json:"agent,omitempty"`
	CanSendTo      []string `json:"can_send_to,omitzero"`
	CanReceiveFrom []string `json:"can_receive_from,omitzero"`
}

// ForbiddenRule refuses sends from the agents From selects to the agents
// To selects, with Reason as the sender's error and the audit line.
type ForbiddenRule struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Reason string `json:"reason,omitempty"`
}

// EffectiveDefault is what a pair the document says nothing about gets:
// RulesAllow or RulesDeny.
func (d *RulesDocument) EffectiveDefault() string {
	switch {
	case d == nil:
		return RulesAllow
	case d.Default != "":
		return d.Default
	case d.Preset != "" || len(d.Agents) > 0 || len(d.AllowedInteractions) > 0:
		return RulesDeny
	default:
		return RulesAllow
	}
}

// Summary is a one-line description for audit lines and the CLI:
// "preset hierarchical, 2 agent entries, 1 forbidden, default deny".
func (d *RulesDocument) Summary() string {
	var parts []string
	if d.Preset != "" {
		p := "preset " + d.Preset
		if d.OrchestratorRole != "" {
			p += " (orchestrator_role " + d.OrchestratorRole + ")"
		}
		parts = append(parts, p)
	}
	parts = append(parts,
		rulesPlural(len(d.Agents)+len(d.AllowedInteractions), "agent entry", "agent entries"),
		fmt.Sprintf("%d forbidden", len(d.Forbidden)+len(d.ForbiddenInteractions)),
		"default "+d.EffectiveDefault())
	return strings.Join(parts, ", ")
}

func rulesPlural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// Validate checks the document: every field, selector and limit. The
// error is a *FieldError naming the field by its path in the document.
func (d *RulesDocument) Validate() error {
	_, err := compileRules(d)
	return err
}

// --- decoding user input ---

// DecodeRules builds a document from its decoded JSON or YAML form: a tree
// of map[string]any, []any, string, bool, numbers and nil, as
// encoding/json or gopkg.in/yaml.v3 produce it. Unknown keys and values of
// the wrong type are refused with a *FieldError naming their path; a
// single string is accepted where a list of selectors is expected. The
// result is validated.
func DecodeRules(v any) (*RulesDocument, error) {
	top, ok := v.(map[string]any)
	if !ok {
		return nil, fieldErr("rules", "want an object (a mapping) with agents, forbidden, preset, ..., got %s", rulesDescribe(v))
	}
	var d RulesDocument
	err := rulesWalkKeys(top, "", []string{"agents", "allowed_interactions", "default", "forbidden",
		"forbidden_interactions", "orchestrator_role", "preset"}, func(k string, v any, p string) error {
		var err error
		switch k {
		case "preset":
			d.Preset, err = rulesString(v, p)
		case "orchestrator_role":
			d.OrchestratorRole, err = rulesString(v, p)
		case "default":
			d.Default, err = rulesString(v, p)
		case "agents":
			d.Agents, err = rulesList(v, p, func(v any, p string) (AgentRule, error) {
				return decodeAgentRule(v, p, true)
			})
		case "allowed_interactions":
			m, ok := v.(map[string]any)
			if !ok && v != nil {
				return fieldErr(p, "want an object of subject: {can_send_to, can_receive_from}, got %s", rulesDescribe(v))
			}
			if len(m) > 0 {
				d.AllowedInteractions = make(map[string]AgentRule, len(m))
			}
			for _, key := range rulesSortedKeys(m) {
				r, err := decodeAgentRule(m[key], rulesSubjectPath(key), false)
				if err != nil {
					return err
				}
				d.AllowedInteractions[key] = r
			}
		case "forbidden", "forbidden_interactions":
			var list []ForbiddenRule
			list, err = rulesList(v, p, decodeForbiddenRule)
			if k == "forbidden" {
				d.Forbidden = list
			} else {
				d.ForbiddenInteractions = list
			}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return &d, nil
}

func decodeAgentRule(v any, p string, withAgent bool) (AgentRule, error) {
	var r AgentRule
	m, ok := v.(map[string]any)
	if !ok {
		return r, fieldErr(p, "want an object with can_send_to and/or can_receive_from, got %s", rulesDescribe(v))
	}
	known := []string{"can_receive_from", "can_send_to"}
	if withAgent {
		known = append([]string{"agent"}, known...)
	}
	err := rulesWalkKeys(m, p, known, func(k string, v any, p string) error {
		var err error
		switch k {
		case "agent":
			r.Agent, err = rulesString(v, p)
		case "can_send_to":
			r.CanSendTo, err = rulesSelectors(v, p)
		case "can_receive_from":
			r.CanReceiveFrom, err = rulesSelectors(v, p)
		}
		return err
	})
	return r, err
}

func decodeForbiddenRule(v any, p string) (ForbiddenRule, error) {
	var r ForbiddenRule
	m, ok := v.(map[string]any)
	if !ok {
		return r, fieldErr(p, "want an object {from, to, reason}, got %s", rulesDescribe(v))
	}
	err := rulesWalkKeys(m, p, []string{"from", "reason", "to"}, func(k string, v any, p string) error {
		var err error
		switch k {
		case "from":
			r.From, err = rulesString(v, p)
		case "to":
			r.To, err = rulesString(v, p)
		case "reason":
			r.Reason, err = rulesString(v, p)
		}
		return err
	})
	return r, err
}

// rulesWalkKeys calls fn for each key of m in sorted order (so the first error
// is the same every time), refusing keys not in known.
func rulesWalkKeys(m map[string]any, prefix string, known []string, fn func(k string, v any, path string) error) error {
	for _, k := range rulesSortedKeys(m) {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		if !slices.Contains(known, k) {
			return fieldErr(p, "unknown field; known here: %s", strings.Join(known, ", "))
		}
		if err := fn(k, m[k], p); err != nil {
			return err
		}
	}
	return nil
}

func rulesSortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func rulesString(v any, p string) (string, error) {
	switch s := v.(type) {
	case string:
		return s, nil
	case nil:
		return "", nil
	default:
		return "", fieldErr(p, "want a string, got %s (quote it)", rulesDescribe(v))
	}
}

func rulesList[T any](v any, p string, elem func(any, string) (T, error)) ([]T, error) {
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fieldErr(p, "want a list, got %s", rulesDescribe(v))
	}
	out := make([]T, 0, len(list))
	for i, e := range list {
		x, err := elem(e, fmt.Sprintf("%s[%d]", p, i))
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, nil
}

// rulesSelectors reads a list of selectors; one string is a list of one.
func rulesSelectors(v any, p string) ([]string, error) {
	if s, ok := v.(string); ok {
		return []string{s}, nil
	}
	return rulesList(v, p, rulesString)
}

func rulesDescribe(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	case time.Time:
		return "a timestamp"
	default:
		return fmt.Sprintf("a number (%v)", v)
	}
}

// rulesSubjectPath names an allowed_interactions entry: allowed_interactions.KEY,
// or allowed_interactions["KEY"] when KEY would not read as a path.
func rulesSubjectPath(key string) string {
	if key != "" && strings.IndexFunc(key, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune("._-*?:", r))
	}) < 0 {
		return "allowed_interactions." + key
	}
	return fmt.Sprintf("allowed_interactions[%q]", key)
}

// --- the compiled form ---

// ruleSelKind orders selectors from the least to the most specific.
type ruleSelKind uint8

const (
	ruleStar ruleSelKind = iota // "*", "all"
	ruleGlob                    // a path.Match pattern over agent ids
	ruleRole                    // role:NAME
	ruleID                      // an agent id
)

type ruleSelector struct {
	kind  ruleSelKind
	value string // the id, the role name or the pattern
}

// ruleGlobChars are the characters a glob may use: those of agent ids and the
// pattern syntax of path.Match (no backslash: ids have nothing to escape).
const ruleGlobChars = "abcdefghijklmnopqrstuvwxyz0123456789._-*?[]^"

func parseRuleSelector(s, p string) (ruleSelector, error) {
	switch {
	case s == "":
		return ruleSelector{}, fieldErr(p, "empty; want an agent id, role:NAME, a glob or *")
	case len(s) > MaxSelectorLen:
		return ruleSelector{}, fieldErr(p, "%d bytes, at most %d", len(s), MaxSelectorLen)
	case s == "*" || s == "all":
		return ruleSelector{kind: ruleStar}, nil
	case strings.HasPrefix(s, "role:"):
		name := s[len("role:"):]
		if !ValidName(name) {
			return ruleSelector{}, fieldErr(p, "role %q must match %s", name, nameRE)
		}
		return ruleSelector{kind: ruleRole, value: name}, nil
	case strings.ContainsAny(s, "*?["):
		if i := strings.IndexFunc(s, func(r rune) bool { return !strings.ContainsRune(ruleGlobChars, r) }); i >= 0 {
			return ruleSelector{}, fieldErr(p, "bad glob %q: character %q; globs use a-z 0-9 . _ - and * ? [ ] ^", s, s[i:i+1])
		}
		if _, err := path.Match(s, ""); err != nil {
			return ruleSelector{}, fieldErr(p, "bad glob %q: %v", s, err)
		}
		return ruleSelector{kind: ruleGlob, value: s}, nil
	case !ValidName(s):
		return ruleSelector{}, fieldErr(p, "%q is not an agent id (%s), role:NAME, a glob or *", s, nameRE)
	default:
		return ruleSelector{kind: ruleID, value: s}, nil
	}
}

func (s ruleSelector) matches(id, role string) bool {
	switch s.kind {
	case ruleStar:
		return true
	case ruleID:
		return id == s.value
	case ruleRole:
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

func (s *ruleSet) add(sel ruleSelector, raw string) {
	if !slices.Contains(s.shown, raw) {
		s.shown = append(s.shown, raw)
	}
	switch sel.kind {
	case ruleStar:
		s.star = true
	case ruleID:
		if s.ids == nil {
			s.ids = map[string]struct{}{}
		}
		s.ids[sel.value] = struct{}{}
	case ruleRole:
		if s.roles == nil {
			s.roles = map[string]struct{}{}
		}
		s.roles[sel.value] = struct{}{}
	case ruleGlob:
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

// ruleSubjects finds the lists that govern an agent: those of the most
// specific kind of subject that selects it. Subjects of one kind and value
// are merged into one set at compile time.
type ruleSubjects struct {
	ids      map[string]*ruleSet
	roles    map[string]*ruleSet
	globs    []string // patterns, document order
	globSets []*ruleSet
	star     *ruleSet
}

func (x *ruleSubjects) set(sub ruleSelector) *ruleSet {
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
	case ruleID:
		return get(&x.ids)
	case ruleRole:
		return get(&x.roles)
	case ruleGlob:
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
func (x *ruleSubjects) check(id, role, oid, orole string) (governed, admitted bool) {
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
func (x *ruleSubjects) governing(id, role string) []*ruleSet {
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
	from, to ruleSelector
	reason   string
}

// Rules is a compiled rules document: immutable, safe for concurrent use.
// A nil *Rules is "no document": everyone may message everyone.
type Rules struct {
	doc            *RulesDocument
	allowByDefault bool
	send, recv     ruleSubjects
	forbidden      []compiledForbidden
	// forbidden entries by the kind of their from selector, as indexes
	// into forbidden in document order.
	fromID, fromRole map[string][]int
	fromOther        []int // globs and "*"
}

// ruleEntry is one agent rule with where it comes from.
type ruleEntry struct {
	rule AgentRule
	path string
}

// compileRules validates d and builds its compiled form.
func compileRules(d *RulesDocument) (*Rules, error) {
	if d == nil {
		return nil, fieldErr("rules", "required")
	}
	r := &Rules{doc: d}
	switch d.Preset {
	case "", PresetHierarchical:
	default:
		return nil, fieldErr("preset", "unknown preset %q; known: %s", d.Preset, PresetHierarchical)
	}
	orch := d.OrchestratorRole
	if orch != "" {
		if d.Preset == "" {
			return nil, fieldErr("orchestrator_role", "only with preset %s", PresetHierarchical)
		}
		if !ValidName(orch) {
			return nil, fieldErr("orchestrator_role", "must match %s", nameRE)
		}
	} else {
		orch = DefaultOrchestratorRole
	}
	switch d.Default {
	case "", RulesAllow, RulesDeny:
	default:
		return nil, fieldErr("default", "%q: want allow or deny", d.Default)
	}
	r.allowByDefault = d.EffectiveDefault() == RulesAllow

	if n := len(d.Agents) + len(d.AllowedInteractions); n > MaxRuleEntries {
		return nil, fieldErr("agents", "%d entries with allowed_interactions, at most %d", n, MaxRuleEntries)
	}
	if n := len(d.Forbidden) + len(d.ForbiddenInteractions); n > MaxRuleEntries {
		return nil, fieldErr("forbidden", "%d entries with forbidden_interactions, at most %d", n, MaxRuleEntries)
	}

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
		p := rulesSubjectPath(k)
		if a.Agent != "" {
			return nil, fieldErr(p+".agent", "not here: the key names the subject")
		}
		a.Agent = k
		entries = append(entries, ruleEntry{a, p})
	}
	for _, e := range entries {
		subjPath := e.path + ".agent"
		if strings.HasPrefix(e.path, "allowed_interactions") {
			subjPath = e.path
		}
		sub, err := parseRuleSelector(e.rule.Agent, subjPath)
		if err != nil {
			return nil, err
		}
		if e.rule.CanSendTo == nil && e.rule.CanReceiveFrom == nil {
			return nil, fieldErr(e.path, "give can_send_to or can_receive_from (or both)")
		}
		for _, l := range []struct {
			name string
			list []string
			idx  *ruleSubjects
		}{{"can_send_to", e.rule.CanSendTo, &r.send}, {"can_receive_from", e.rule.CanReceiveFrom, &r.recv}} {
			if l.list == nil {
				continue
			}
			lp := e.path + "." + l.name
			if len(l.list) > MaxRuleSelectors {
				return nil, fieldErr(lp, "%d entries, at most %d", len(l.list), MaxRuleSelectors)
			}
			set := l.idx.set(sub)
			if e.path != "preset "+PresetHierarchical {
				set.srcs = append(set.srcs, lp)
			} else if !slices.Contains(set.srcs, e.path) {
				set.srcs = append(set.srcs, e.path)
			}
			for j, raw := range l.list {
				sel, err := parseRuleSelector(raw, fmt.Sprintf("%s[%d]", lp, j))
				if err != nil {
					return nil, err
				}
				set.add(sel, raw)
			}
		}
	}

	r.fromID, r.fromRole = map[string][]int{}, map[string][]int{}
	for _, l := range []struct {
		name string
		list []ForbiddenRule
	}{{"forbidden", d.Forbidden}, {"forbidden_interactions", d.ForbiddenInteractions}} {
		for i, f := range l.list {
			p := fmt.Sprintf("%s[%d]", l.name, i)
			from, err := parseRuleSelector(f.From, p+".from")
			if err != nil {
				return nil, err
			}
			to, err := parseRuleSelector(f.To, p+".to")
			if err != nil {
				return nil, err
			}
			if len(f.Reason) > MaxReasonLen {
				return nil, fieldErr(p+".reason", "%d bytes, at most %d", len(f.Reason), MaxReasonLen)
			}
			if strings.IndexFunc(f.Reason, unicode.IsControl) >= 0 {
				return nil, fieldErr(p+".reason", "must be one line without control characters")
			}
			reason := f.Reason
			if strings.TrimSpace(reason) == "" {
				reason = fmt.Sprintf("forbidden by %s: %s → %s", p, f.From, f.To)
			}
			n := len(r.forbidden)
			r.forbidden = append(r.forbidden, compiledForbidden{from: from, to: to, reason: reason})
			switch from.kind {
			case ruleID:
				r.fromID[from.value] = append(r.fromID[from.value], n)
			case ruleRole:
				r.fromRole[from.value] = append(r.fromRole[from.value], n)
			default:
				r.fromOther = append(r.fromOther, n)
			}
		}
	}
	return r, nil
}

// Allows reports whether from (of role fromRole; "" when not registered)
// may send to to (of role toRole), and if not, why: the forbidden entry's
// reason, or which list refuses. It is a pure function of the document
// (the same answer on every node) and allocates nothing when it allows.
// A nil *Rules allows everything.
func (r *Rules) Allows(from, fromRole, to, toRole string) (bool, string) {
	if r == nil {
		return true, ""
	}
	if i := r.firstForbidden(from, fromRole, to, toRole); i >= 0 {
		return false, r.forbidden[i].reason
	}
	sendGoverned, sendOK := r.send.check(from, fromRole, to, toRole)
	if sendGoverned && !sendOK {
		return false, rulesExplain(from, fromRole, "may send only to", r.send.governing(from, fromRole))
	}
	recvGoverned, recvOK := r.recv.check(to, toRole, from, fromRole)
	if recvGoverned && !recvOK {
		return false, rulesExplain(to, toRole, "accepts messages only from", r.recv.governing(to, toRole))
	}
	if !sendGoverned && !recvGoverned && !r.allowByDefault {
		return false, fmt.Sprintf("no rule allows %s → %s, and the rules' default is deny", from, to)
	}
	return true, ""
}

// firstForbidden is the index of the first forbidden entry (in document
// order) that refuses the pair, or -1.
func (r *Rules) firstForbidden(from, fromRole, to, toRole string) int {
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
func rulesExplain(id, role, verb string, sets []*ruleSet) string {
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
func (r *Rules) Document() *RulesDocument {
	if r == nil {
		return nil
	}
	return r.doc
}

// --- storage ---

// bucketRules: "document" → the document's JSON (absent: no rules),
// "sum" → its SHA-256, "index" → u64 Raft index and "ts" → u64 Unix ns of
// the last set_rules (also kept after a removal).
var (
	keyRulesDoc   = []byte("document")
	keyRulesSum   = []byte("sum")
	keyRulesIndex = []byte("index")
	keyRulesTS    = []byte("ts")
)

// rulesCache holds compiled documents by the SHA-256 of their stored
// bytes, so a send compiles the document once, not once per send. A
// compiled document depends only on those bytes, so a hit is the same
// value a fresh compile would give, on every node; Rules values are
// immutable and shared between goroutines.
var rulesCache = struct {
	sync.Mutex
	m map[[32]byte]*Rules
}{m: map[[32]byte]*Rules{}}

// rulesCacheMax bounds the cache; when full it starts over (it only ever
// holds the few documents a process's state files use).
const rulesCacheMax = 64

func rulesCacheGet(sum [32]byte) *Rules {
	rulesCache.Lock()
	defer rulesCache.Unlock()
	return rulesCache.m[sum]
}

func rulesCachePut(sum [32]byte, r *Rules) {
	rulesCache.Lock()
	defer rulesCache.Unlock()
	if len(rulesCache.m) >= rulesCacheMax {
		clear(rulesCache.m)
	}
	rulesCache.m[sum] = r
}

// loadRules reads the rules document inside a transaction; nil means no
// document, and everyone may message everyone. The compiled form is
// cached by the document's hash. An error means the stored document does
// not decode or compile (a damaged state file: it was valid when set).
func loadRules(tx *bbolt.Tx) (*Rules, error) {
	b := tx.Bucket(bucketRules)
	data := b.Get(keyRulesDoc)
	if data == nil {
		return nil, nil
	}
	var sum [32]byte
	if s := b.Get(keyRulesSum); len(s) == len(sum) {
		copy(sum[:], s)
	} else {
		sum = sha256.Sum256(data)
	}
	if r := rulesCacheGet(sum); r != nil {
		return r, nil
	}
	var d RulesDocument
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("fsm: rules: decode the stored document: %w", err)
	}
	r, err := compileRules(&d)
	if err != nil {
		return nil, fmt.Errorf("fsm: rules: the stored document: %w", err)
	}
	rulesCachePut(sum, r)
	return r, nil
}

// SetRulesCommand replaces the rules document with Rules, or removes it
// (Clear): exactly one of the two.
type SetRulesCommand struct {
	Rules *RulesDocument `json:"rules,omitempty"`
	Clear bool           `json:"clear,omitempty"`
}

// Validate checks the command: the document's fields and limits
// (*FieldError naming the field), its size as JSON, and that exactly one
// of rules and clear is given.
func (c *SetRulesCommand) Validate() error {
	_, _, err := c.prepare()
	return err
}

// prepare validates c and returns the compiled document and its stored
// form (both nil for Clear).
func (c *SetRulesCommand) prepare() (*Rules, []byte, error) {
	switch {
	case c.Clear && c.Rules != nil:
		return nil, nil, fieldErr("clear", "give either rules or clear, not both")
	case c.Clear:
		return nil, nil, nil
	case c.Rules == nil:
		return nil, nil, fieldErr("rules", "required (or clear: true to remove the rules)")
	}
	r, err := compileRules(c.Rules)
	if err != nil {
		return nil, nil, err
	}
	data, err := json.Marshal(c.Rules)
	if err != nil {
		return nil, nil, fmt.Errorf("encode the document: %w", err)
	}
	if len(data) > MaxRulesBytes {
		return nil, nil, fieldErr("rules", "%d bytes as JSON, at most %d", len(data), MaxRulesBytes)
	}
	return r, data, nil
}

func applySetRules(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	var cmd SetRulesCommand
	if err := json.Unmarshal(body, &cmd); err != nil {
		return nil, fmt.Errorf("fsm: apply set_rules: decode: %w", err)
	}
	r, data, err := cmd.prepare()
	if err != nil {
		return nil, fmt.Errorf("fsm: apply set_rules: %w", err)
	}
	b := tx.Bucket(bucketRules)
	text := "removed: everyone may message everyone"
	if cmd.Clear {
		for _, k := range [][]byte{keyRulesDoc, keyRulesSum} {
			if err := b.Delete(k); err != nil {
				panic(fmt.Sprintf("fsm: apply set_rules: delete %s: %v", k, err))
			}
		}
	} else {
		sum := sha256.Sum256(data)
		for _, kv := range [][2][]byte{{keyRulesDoc, data}, {keyRulesSum, sum[:]}} {
			if err := b.Put(kv[0], kv[1]); err != nil {
				panic(fmt.Sprintf("fsm: apply set_rules: put %s: %v", kv[0], err))
			}
		}
		rulesCachePut(sum, r)
		text = "replaced: " + cmd.Rules.Summary()
	}
	for _, kv := range [][2][]byte{{keyRulesIndex, u64(index)}, {keyRulesTS, u64(uint64(ts))}} {
		if err := b.Put(kv[0], kv[1]); err != nil {
			panic(fmt.Sprintf("fsm: apply set_rules: put %s: %v", kv[0], err))
		}
	}
	audit(tx, index, ts, AuditEvent{Kind: AuditRules, Label: "RULES", Text: text})
	st, err := readRulesState(tx)
	if err != nil {
		return nil, fmt.Errorf("fsm: apply set_rules: %w", err)
	}
	return &st, nil
}

// RulesState is the answer of GET /v1/rules and of set_rules.
type RulesState struct {
	// Rules is the document; null when there is none (everyone may
	// message everyone).
	Rules *RulesDocument `json:"rules"`
	// Default is what a pair no list speaks about gets: allow or deny.
	Default string `json:"default"`
	// Index and UpdatedAt are the Raft index and time of the last
	// set_rules (a removal too); zero if rules were never set.
	Index     uint64    `json:"index,omitempty"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
}

func readRulesState(tx *bbolt.Tx) (RulesState, error) {
	r, err := loadRules(tx)
	if err != nil {
		return RulesState{}, err
	}
	b := tx.Bucket(bucketRules)
	st := RulesState{Rules: r.Document(), Default: r.Document().EffectiveDefault(), Index: getU64(b, keyRulesIndex)}
	if st.Index > 0 {
		st.UpdatedAt = time.Unix(0, int64(getU64(b, keyRulesTS))).UTC()
	}
	return st, nil
}

// Rules returns the rules document and when it was last set.
func (f *FSM) Rules() (RulesState, error) {
	var st RulesState
	err := f.view(func(tx *bbolt.Tx) error {
		var err error
		st, err = readRulesState(tx)
		return err
	})
	return st, err
}

// RulesCheck is the answer of CheckRules: may From send To a message?
type RulesCheck struct {
	From     string `json:"from"`
	FromRole string `json:"from_role"` // the role the check used ("" = none)
	To       string `json:"to"`
	ToRole   string `json:"to_role"`
	Allowed  bool   `json:"allowed"`
	Reason   string `json:"reason,omitempty"` // why not, when not allowed
}

// CheckRules answers whether a message from from to to would pass the
// rules now, with the roles a send would use: the registered role of each;
// for an unregistered sender DefaultRole (a send registers it so), for
// an unregistered recipient none. fromRole or toRole, when not "", replace
// the looked-up role ("what if" questions).
func (f *FSM) CheckRules(from, fromRole, to, toRole string) (RulesCheck, error) {
	out := RulesCheck{From: from, To: to}
	err := f.view(func(tx *bbolt.Tx) error {
		r, err := loadRules(tx)
		if err != nil {
			return err
		}
		out.FromRole, out.ToRole = fromRole, toRole
		if out.FromRole == "" {
			var ok bool
			if out.FromRole, ok = rulesAgentRole(tx, from); !ok {
				out.FromRole = DefaultRole
			}
		}
		if out.ToRole == "" {
			out.ToRole, _ = rulesAgentRole(tx, to)
		}
		out.Allowed, out.Reason = r.Allows(out.From, out.FromRole, out.To, out.ToRole)
		return nil
	})
	return out, err
}

// rulesAgentRole is the role of a registered agent, read from the agent
// registry (bucketAgents: id → the agent's JSON with a "role" field).
func rulesAgentRole(tx *bbolt.Tx, id string) (string, bool) {
	v := tx.Bucket(bucketAgents).Get([]byte(id))
	if v == nil {
		return "", false
	}
	var a struct {
		Role string `json:"role"`
	}
	if json.Unmarshal(v, &a) != nil {
		return "", true
	}
	return a.Role, true
}
