package fsm

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/rules"
)

// The document's format and decisions are tested in package rules; these
// tests are the state machine's: the command, its apply, the stored
// document, its compiled form per FSM, and sends checked at apply.

// parseRulesJSON decodes a document written as JSON, as the API does.
func parseRulesJSON(tb testing.TB, doc string) (*rules.Document, error) {
	tb.Helper()
	return rules.Decode([]byte(doc), rules.JSON)
}

// precedenceDoc is a document with refusals of every kind (see
// rules.TestRulesPrecedence for what it decides).
const precedenceDoc = `{
  "agents": [
    {"agent": "*",             "can_send_to": ["role:lead"]},
    {"agent": "engineer_*",    "can_send_to": ["engineer_*", "role:lead"]},
    {"agent": "role:lead",     "can_send_to": ["*"]}
  ],
  "forbidden": [{"from": "*", "to": "vault", "reason": "vault is read-only"}]
}`

// seedRules is the seed's communication_rules.yaml, decoded: the one copy
// of the file, which package rules keeps in its testdata.
func seedRules(tb testing.TB) *rules.Document {
	tb.Helper()
	b, err := os.ReadFile("../rules/testdata/communication_rules.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	doc, err := rules.Decode(b, rules.YAML)
	if err != nil {
		tb.Fatal(err)
	}
	return doc
}

func TestSetRulesCommandValidate(t *testing.T) {
	doc, err := parseRulesJSON(t, `{"preset": "hierarchical"}`)
	if err != nil {
		t.Fatal(err)
	}
	// A document over rules.MaxBytes as JSON, with every entry in its limits.
	var agents []string
	for i := range 3 {
		var sels []string
		for j := range rules.MaxSelectors {
			sels = append(sels, fmt.Sprintf(`"%c*%098d"`, 'a'+i, j))
		}
		agents = append(agents, fmt.Sprintf(`{"agent": "a%d", "can_send_to": [%s]}`, i, strings.Join(sels, ",")))
	}
	big, err := parseRulesJSON(t, `{"agents": [`+strings.Join(agents, ",")+`]}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cmd          api.SetRulesCommand
		field, cause string
	}{
		{api.SetRulesCommand{}, "rules", "required"},
		{api.SetRulesCommand{Rules: doc, Clear: true}, "clear", "not both"},
		{api.SetRulesCommand{Rules: &rules.Document{Preset: "flat"}}, "preset", "unknown preset"},
		{api.SetRulesCommand{Rules: &rules.Document{Agents: []rules.AgentRule{{Agent: "role:Boss", CanSendTo: []string{}}}}}, "agents[0].agent", `role "Boss" must match`},
		{api.SetRulesCommand{Rules: &rules.Document{Interrupt: []string{"role:Boss"}}}, "interrupt[0]", `role "Boss" must match`},
		{api.SetRulesCommand{Rules: big}, "rules", fmt.Sprintf("at most %d", rules.MaxBytes)},
	} {
		// The document's errors too are fsm's: a *FieldError wrapping
		// ErrInvalid, as every refused command's.
		err := c.cmd.Validate()
		var fe *api.FieldError
		if !errors.As(err, &fe) || !errors.Is(err, api.ErrInvalid) || fe.Field != c.field || !strings.Contains(fe.Reason, c.cause) {
			t.Errorf("Validate(%+v) = %v, want %s: ...%s", c.cmd.Clear, err, c.field, c.cause)
		}
	}
	for _, ok := range []api.SetRulesCommand{{Rules: doc}, {Clear: true}} {
		if err := ok.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v", ok, err)
		}
	}
}

// --- through the state machine ---

func rulesEntry(tb testing.TB, index uint64, ts int64, c api.SetRulesCommand) *raft.Log {
	tb.Helper()
	data, err := Encode(api.OpSetRules, ts, c)
	if err != nil {
		tb.Fatalf("Encode set_rules: %v", err)
	}
	return &raft.Log{Type: raft.LogCommand, Index: index, Term: 1, Data: data}
}

func agentEntry(tb testing.TB, index uint64, ts int64, id, role string) *raft.Log {
	tb.Helper()
	data, err := Encode(api.OpRegisterAgent, ts, api.RegisterAgentCommand{ID: id, Role: role})
	if err != nil {
		tb.Fatalf("Encode register_agent: %v", err)
	}
	return &raft.Log{Type: raft.LogCommand, Index: index, Term: 1, Data: data}
}

func mustRulesState(tb testing.TB, res any) *api.RulesState {
	tb.Helper()
	st, ok := res.(*api.RulesState)
	if !ok {
		tb.Fatalf("result = %T (%v), want *RulesState", res, res)
	}
	return st
}

// auditLines renders the whole trail.
func auditLines(tb testing.TB, f *FSM) []string {
	tb.Helper()
	page, err := f.Audit(0, api.MaxPageLimit)
	if err != nil {
		tb.Fatalf("Audit: %v", err)
	}
	var out []string
	for _, e := range page.Events {
		out = append(out, e.Line())
	}
	return out
}

func TestApplySetRules(t *testing.T) {
	f, _ := openTemp(t)
	if st, err := f.Rules(); err != nil || st.Rules != nil || st.Default != rules.Allow || st.Index != 0 || !st.UpdatedAt.IsZero() {
		t.Fatalf("Rules before any = %+v, %v", st, err)
	}
	doc, err := parseRulesJSON(t, `{"preset": "hierarchical", "forbidden": [{"from": "*", "to": "vault", "reason": "read-only"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	st := mustRulesState(t, applyOne(f, rulesEntry(t, 1, baseTS, api.SetRulesCommand{Rules: doc})))
	if st.Index != 1 || st.Default != rules.Deny || st.UpdatedAt.UnixNano() != baseTS || st.Rules == nil || st.Rules.Preset != rules.PresetHierarchical {
		t.Errorf("set_rules result %+v", st)
	}
	got, err := f.Rules()
	if err != nil || got.Index != 1 || got.Rules == nil || len(got.Rules.Forbidden) != 1 || got.Rules.Forbidden[0].Reason != "read-only" {
		t.Errorf("Rules() = %+v, %v", got, err)
	}
	// The stored form: the document's JSON and its SHA-256.
	if stored := storedRules(t, f); stored != `{"preset":"hierarchical","forbidden":[{"from":"*","to":"vault","reason":"read-only"}]}` {
		t.Errorf("stored %s", stored)
	}

	// A refused document changes nothing, not even the audit trail.
	before := dataDump(t, f)
	bad := rawEntry(t, 2, Command{V: 1, Op: api.OpSetRules, TS: baseTS + 1,
		Body: json.RawMessage(`{"rules": {"agents": [{"agent": "a", "can_send_to": ["b["]}]}}`)})
	err = mustError(t, applyOne(f, bad))
	if !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), "agents[0].can_send_to[0]: bad glob") {
		t.Errorf("bad document: %v", err)
	}
	if after := dataDump(t, f); after != before {
		t.Errorf("a refused set_rules changed the state:\n%s\nwant\n%s", after, before)
	}

	// Clear: no document, and the time of the change is kept.
	st = mustRulesState(t, applyOne(f, rulesEntry(t, 3, baseTS+2, api.SetRulesCommand{Clear: true})))
	if st.Rules != nil || st.Default != rules.Allow || st.Index != 3 {
		t.Errorf("clear result %+v", st)
	}
	if chk, err := f.CheckRules("w1", "", "w2", ""); err != nil || !chk.Allowed {
		t.Errorf("after clear: %+v, %v", chk, err)
	}
	if stored := storedRules(t, f); stored != "" {
		t.Errorf("stored after clear: %s", stored)
	}

	// An interrupt list is stored with the document and counted in the audit.
	doc, err = parseRulesJSON(t, `{"interrupt": ["role:lead"], "forbidden": [{"from": "a", "to": "b"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	st = mustRulesState(t, applyOne(f, rulesEntry(t, 4, baseTS+3, api.SetRulesCommand{Rules: doc})))
	if st.Rules == nil || strings.Join(st.Rules.Interrupt, ",") != "role:lead" || st.Default != rules.Allow {
		t.Errorf("set_rules with interrupt: %+v", st)
	}
	if stored := storedRules(t, f); stored != `{"interrupt":["role:lead"],"forbidden":[{"from":"a","to":"b"}]}` {
		t.Errorf("stored %s", stored)
	}

	want := []string{
		"[2026-11-21T10:30:00Z] RULES: replaced: preset hierarchical, 0 agent entries, 1 forbidden, default deny",
		"[2026-11-21T10:30:00Z] RULES: removed: everyone may message everyone",
		"[2026-11-21T10:30:00Z] RULES: replaced: 0 agent entries, 1 forbidden, 1 interrupt entry, default allow",
	}
	if got := auditLines(t, f); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("audit:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	page, _ := f.Audit(0, 10)
	for _, e := range page.Events {
		if e.Kind != AuditRules || e.Label != "RULES" {
			t.Errorf("event %+v, want kind rules, label RULES", e)
		}
	}
}

// storedRules is the stored document's JSON ("" for none), checked
// against its stored SHA-256.
func storedRules(tb testing.TB, f *FSM) string {
	tb.Helper()
	var out string
	if err := f.view(func(tx *bbolt.Tx) error {
		data, sum := rulesBucketOf(tx).document()
		if data != nil && sum != sha256.Sum256(data) {
			tb.Errorf("stored sum %x, want the SHA-256 of %s", sum, data)
		}
		out = string(data)
		return nil
	}); err != nil {
		tb.Fatal(err)
	}
	return out
}

func TestCheckRulesUsesRegisteredRoles(t *testing.T) {
	f, _ := openTemp(t)
	doc, err := parseRulesJSON(t, `{"preset": "hierarchical"}`)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range []*raft.Log{
		agentEntry(t, 1, baseTS, "boss", "orchestrator"),
		agentEntry(t, 2, baseTS, "w1", "engineer"),
		rulesEntry(t, 3, baseTS, api.SetRulesCommand{Rules: doc}),
	} {
		if err, ok := applyOne(f, l).(error); ok {
			t.Fatalf("entry %d: %v", i+1, err)
		}
	}
	for _, c := range []struct {
		from, fromRole, to, toRole string
		want                       api.RulesCheck
	}{
		{"w1", "", "boss", "", api.RulesCheck{From: "w1", FromRole: "engineer", To: "boss", ToRole: "orchestrator", Allowed: true}},
		{"boss", "", "w1", "", api.RulesCheck{From: "boss", FromRole: "orchestrator", To: "w1", ToRole: "engineer", Allowed: true}},
		{"w1", "", "ghost", "", api.RulesCheck{From: "w1", FromRole: "engineer", To: "ghost", ToRole: "",
			Reason: "w1 (role engineer) may send only to role:orchestrator (preset hierarchical)"}},
		// An unregistered sender gets the role a send would register it with.
		{"ghost", "", "w1", "", api.RulesCheck{From: "ghost", FromRole: api.DefaultRole, To: "w1", ToRole: "engineer",
			Reason: "ghost (role agent) may send only to role:orchestrator (preset hierarchical)"}},
		// What if: roles given replace the registered ones.
		{"w1", "orchestrator", "ghost", "", api.RulesCheck{From: "w1", FromRole: "orchestrator", To: "ghost", Allowed: true}},
		{"ghost", "", "w1", "orchestrator", api.RulesCheck{From: "ghost", FromRole: api.DefaultRole, To: "w1", ToRole: "orchestrator", Allowed: true}},
	} {
		got, err := f.CheckRules(c.from, c.fromRole, c.to, c.toRole)
		if err != nil || got != c.want {
			t.Errorf("CheckRules(%s, %q, %s, %q) = %+v, %v\nwant %+v", c.from, c.fromRole, c.to, c.toRole, got, err, c.want)
		}
	}
}

// loadCompiled reads f's compiled rules as an apply or a query does.
func loadCompiled(tb testing.TB, f *FSM) *rules.Compiled {
	tb.Helper()
	var r *rules.Compiled
	if err := f.view(func(tx *bbolt.Tx) error {
		var err error
		r, err = f.rules.load(tx)
		return err
	}); err != nil {
		tb.Fatal(err)
	}
	return r
}

func TestLoadRulesCachesByContent(t *testing.T) {
	f, _ := openTemp(t)
	doc, _ := parseRulesJSON(t, `{"forbidden": [{"from": "a", "to": "b", "reason": "cache test"}]}`)
	applyOne(f, rulesEntry(t, 1, baseTS, api.SetRulesCommand{Rules: doc}))
	load := func() *rules.Compiled { return loadCompiled(t, f) }
	r1, r2 := load(), load()
	if r1 == nil || r1 != r2 {
		t.Fatalf("load twice: %p %p, want the same cached value", r1, r2)
	}
	// Not in the cache (a restart): compiled again from the stored bytes,
	// to an equal answer.
	f.rules.last.Store(nil)
	r3 := load()
	if r3 == r1 {
		t.Fatal("the cache was cleared, yet the same value came back")
	}
	if load() != r3 {
		t.Error("a recompiled document is not cached")
	}
	if ok, reason := r3.Allows("a", "", "b", ""); ok || reason != "cache test" {
		t.Errorf("recompiled rules: %t %q", ok, reason)
	}
	// A new document replaces the old one at once.
	doc2, _ := parseRulesJSON(t, `{"forbidden": [{"from": "a", "to": "c", "reason": "second"}]}`)
	applyOne(f, rulesEntry(t, 2, baseTS, api.SetRulesCommand{Rules: doc2}))
	if ok, _ := load().Allows("a", "", "b", ""); !ok {
		t.Error("the replaced document still refuses a → b")
	}
	// Removed: no rules, whatever the cache holds.
	applyOne(f, rulesEntry(t, 3, baseTS, api.SetRulesCommand{Clear: true}))
	if r := load(); r != nil {
		t.Errorf("after clear: %p, want no rules", r)
	}
}

// The cache belongs to its FSM: two state machines in one process (the
// nodes of a test cluster) holding the same document compile it each, and
// one's document never answers for the other.
func TestRulesCachePerFSM(t *testing.T) {
	one, _ := openTemp(t)
	two, _ := openTemp(t)
	doc, _ := parseRulesJSON(t, `{"forbidden": [{"from": "a", "to": "b", "reason": "shared?"}]}`)
	applyOne(one, rulesEntry(t, 1, baseTS, api.SetRulesCommand{Rules: doc}))
	applyOne(two, rulesEntry(t, 1, baseTS, api.SetRulesCommand{Rules: doc}))
	r1, r2 := loadCompiled(t, one), loadCompiled(t, two)
	if r1 == nil || r2 == nil || r1 == r2 {
		t.Fatalf("compiled rules %p and %p: want one value per FSM", r1, r2)
	}
	other, _ := parseRulesJSON(t, `{"forbidden": [{"from": "a", "to": "c", "reason": "two's own"}]}`)
	applyOne(two, rulesEntry(t, 2, baseTS, api.SetRulesCommand{Rules: other}))
	if loadCompiled(t, one) != r1 {
		t.Error("a set_rules on another FSM evicted this one's compiled rules")
	}
	if ok, reason := loadCompiled(t, two).Allows("a", "", "c", ""); ok || reason != "two's own" {
		t.Errorf("two: %t %q", ok, reason)
	}
}

// A stored document that no longer decodes or compiles (a damaged state
// file) fails every read and send that needs it, naming the cause; it is
// never taken for "no rules".
func TestLoadRulesDamagedDocument(t *testing.T) {
	for _, c := range []struct{ stored, want string }{
		{`{"agents": [`, "fsm: rules: decode the stored document: "},
		{`{"preset": "flat"}`, `fsm: rules: the stored document: preset: unknown preset "flat"`},
	} {
		f, _ := openTemp(t)
		if err := f.db.Update(func(tx *bbolt.Tx) error {
			rulesBucketOf(tx).put([]byte(c.stored))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Rules(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Rules() = %v, want %q", c.stored, err, c.want)
		}
		if _, err := f.CheckRules("a", "", "b", ""); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: CheckRules = %v, want %q", c.stored, err, c.want)
		}
		m := testMessage(msgID(1), "general", "hello")
		err := mustError(t, applyOne(f, sendEntry(t, 1, baseTS, m)))
		if !strings.Contains(err.Error(), "fsm: apply send: rules: "+c.want) {
			t.Errorf("%s: send = %v, want %q", c.stored, err, c.want)
		}
		if n := channelCount(t, f, "general"); n != 0 {
			t.Errorf("%s: the send stored %d messages", c.stored, n)
		}
	}
}

func TestRulesConcurrentReaders(t *testing.T) {
	f, _ := openTemp(t)
	doc, _ := parseRulesJSON(t, precedenceDoc)
	applyOne(f, rulesEntry(t, 1, baseTS, api.SetRulesCommand{Rules: doc}))
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				if i%50 == 0 && g%2 == 0 {
					f.rules.last.Store(nil)
				}
				c, err := f.CheckRules("engineer_2", "agent", "dev", "agent")
				if err != nil || c.Allowed || !strings.Contains(c.Reason, "agents[1].can_send_to") {
					errs <- fmt.Sprintf("%+v %v", c, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// Two state machines fed the same rule changes and sends in different
// batch splits hold the same state.
func TestRulesApplyDeterministicAcrossBatches(t *testing.T) {
	var logs []*raft.Log
	idx := uint64(0)
	next := func() uint64 { idx++; return idx }
	doc1 := seedRules(t)
	doc2, _ := parseRulesJSON(t, `{"preset": "hierarchical"}`)
	logs = append(logs,
		agentEntry(t, next(), baseTS, "master_agent", "orchestrator"),
		agentEntry(t, next(), baseTS, "tester_agent", "qa"),
		agentEntry(t, next(), baseTS, "reviewer_agent", "reviewer"),
		rulesEntry(t, next(), baseTS, api.SetRulesCommand{Rules: doc1}))
	for i := range 12 {
		m := testMessage(msgID(i), "review", fmt.Sprintf("text %d", i))
		m.From, m.To = []string{"tester_agent", "master_agent", "reviewer_agent"}[i%3], api.Recipients{"reviewer_agent", "master_agent"}
		if i == 6 {
			logs = append(logs, rulesEntry(t, next(), baseTS, api.SetRulesCommand{Rules: doc2}))
		}
		if i == 9 {
			logs = append(logs, rulesEntry(t, next(), baseTS, api.SetRulesCommand{Clear: true}))
		}
		logs = append(logs, sendEntry(t, next(), baseTS+int64(i), m))
	}
	one, _ := openTemp(t)
	var res1 []string
	for _, l := range logs {
		res1 = append(res1, rulesResult(t, applyOne(one, l)))
	}
	all, _ := openTemp(t)
	var res2 []string
	for _, r := range all.ApplyBatch(logs) {
		res2 = append(res2, rulesResult(t, r))
	}
	if strings.Join(res1, "\n") != strings.Join(res2, "\n") {
		t.Errorf("results differ:\n%s\n---\n%s", strings.Join(res1, "\n"), strings.Join(res2, "\n"))
	}
	if dump(t, one) != dump(t, all) {
		t.Error("the state differs between single entries and one batch")
	}
}

// rulesResult renders an apply result by value (JSON), an error by its text.
func rulesResult(tb testing.TB, r any) string {
	tb.Helper()
	if err, ok := r.(error); ok {
		return "error " + err.Error()
	}
	b, err := json.Marshal(r)
	if err != nil {
		tb.Fatalf("marshal %T: %v", r, err)
	}
	return string(b)
}

// End to end: a send checked against the rules at apply time.
func TestSendHonoursRules(t *testing.T) {
	f, _ := openTemp(t)
	doc := seedRules(t)
	for i, l := range []*raft.Log{
		agentEntry(t, 1, baseTS, "master_agent", "orchestrator"),
		agentEntry(t, 2, baseTS, "tester_agent", "qa"),
		agentEntry(t, 3, baseTS, "reviewer_agent", "reviewer"),
		rulesEntry(t, 4, baseTS, api.SetRulesCommand{Rules: doc}),
	} {
		if err, ok := applyOne(f, l).(error); ok {
			t.Fatalf("entry %d: %v", i+1, err)
		}
	}
	m := testMessage(msgID(1), "review", "please look")
	m.From, m.To = "tester_agent", api.Recipients{"reviewer_agent"}
	err := mustError(t, applyOne(f, sendEntry(t, 5, baseTS+1, m)))
	if !errors.Is(err, api.ErrForbidden) || !strings.Contains(err.Error(), "Should go through developer first") {
		t.Errorf("forbidden send: %v", err)
	}
	if n := channelCount(t, f, "review"); n != 0 {
		t.Errorf("a blocked send stored %d messages", n)
	}
	lines := auditLines(t, f)
	if last := lines[len(lines)-1]; !strings.Contains(last, "[tester_agent→reviewer_agent] BLOCKED: Should go through developer first") {
		t.Errorf("last audit line %q, want the BLOCKED send", last)
	}

	// Several recipients: the allowed one gets it, the blocked one is named.
	m = testMessage(msgID(2), "review", "status")
	m.From, m.To = "tester_agent", api.Recipients{"reviewer_agent", "master_agent"}
	res := mustSendResult(t, applyOne(f, sendEntry(t, 6, baseTS+2, m)))
	if len(res.Blocked) != 1 || res.Blocked[0].ID != "reviewer_agent" || res.Blocked[0].Reason != "Should go through developer first" {
		t.Errorf("blocked = %+v", res.Blocked)
	}
	stored, err := f.Message(m.ID)
	if err != nil || strings.Join(stored.Recipients, ",") != "master_agent" {
		t.Errorf("stored recipients %v, %v; want master_agent", stored, err)
	}
}
