package transport_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/rules"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

// oversightEnv is the API in front of a fake whose Apply and reads use a
// real state machine: entry i is stamped oversightT0 + (i-1)·15s.
type oversightEnv struct {
	t     *testing.T
	fake  *transporttest.Service
	srv   *httptest.Server
	state *fsm.FSM
}

var oversightT0 = time.Date(2025, 10, 20, 14, 30, 0, 0, time.UTC)

func newOversightEnv(t *testing.T) *oversightEnv {
	t.Helper()
	fake := transporttest.New(t, transporttest.Clock(func(i uint64) time.Time {
		return oversightT0.Add(time.Duration(i-1) * 15 * time.Second)
	}))
	return &oversightEnv{t: t, fake: fake, srv: serve(t, fake, transport.ServerOptions{}), state: fake.FSM()}
}

// apply applies a command directly and fails the test if it is refused.
func (e *oversightEnv) apply(op api.Op, body any) any {
	e.t.Helper()
	res, err := e.fake.ApplyCommand(op, body)
	if err != nil {
		e.t.Fatalf("apply %s: %v", op, err)
	}
	return res
}

func (e *oversightEnv) send(id, from, channel, typ, title, visibility string, to ...string) {
	e.t.Helper()
	m := api.Message{ID: id, From: from, Channel: channel, To: to, Type: typ, Title: title,
		Visibility: visibility, Content: api.Content{Text: "the content of " + id}}
	m.Normalize(oversightT0)
	e.apply(api.OpSend, api.SendCommand{Message: m})
}

func (e *oversightEnv) do(method, path, body string, header http.Header) reply {
	e.t.Helper()
	return do(e.t, method, e.srv.URL+path, body, header)
}

// rulesState reads GET /v1/rules.
func (e *oversightEnv) rulesState() api.RulesState {
	e.t.Helper()
	r := e.do("GET", "/v1/rules", "", nil)
	if r.status != 200 {
		e.t.Fatalf("GET /v1/rules: %d %s", r.status, r.body)
	}
	var st api.RulesState
	if err := json.Unmarshal(r.body, &st); err != nil {
		e.t.Fatalf("GET /v1/rules: %v: %s", err, r.body)
	}
	return st
}

func yamlHeader(ct string) http.Header { return http.Header{"Content-Type": {ct}} }

// seedRulesYAML is the seed's communication_rules.yaml as the seed writes
// it: the one copy, which package rules keeps in its testdata.
func seedRulesYAML(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../rules/testdata/communication_rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// {"interrupt":true} asks who may interrupt: the default roles without a
// document's list, the list with one; the sender's registered role unless
// from_role says otherwise.
func TestRulesCheckInterrupt(t *testing.T) {
	e := newOversightEnv(t)
	e.apply(api.OpRegisterAgent, api.RegisterAgentCommand{ID: "boss", Role: "master"})
	e.apply(api.OpRegisterAgent, api.RegisterAgentCommand{ID: "dev", Role: "developer"})
	check := func(body string) api.RulesCheck {
		t.Helper()
		r := e.do("POST", "/v1/rules/check", body, nil)
		if r.status != 200 {
			t.Fatalf("check %s: %d %s", body, r.status, r.body)
		}
		var c api.RulesCheck
		if err := json.Unmarshal(r.body, &c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, c := range []struct {
		body, role, reason string
		allowed            bool
	}{
		{`{"from":"boss","interrupt":true}`, "master", "", true},
		{`{"from":"dev","interrupt":true}`, "developer", rules.DefaultInterruptReason, false},
		{`{"from":"dev","from_role":"supervisor","interrupt":true}`, "supervisor", "", true},
		{`{"from":"nobody","interrupt":true}`, "", rules.DefaultInterruptReason, false},
	} {
		if got := check(c.body); got.Allowed != c.allowed || got.FromRole != c.role || got.Reason != c.reason || !got.Interrupt || got.To != "" {
			t.Errorf("check %s = %+v", c.body, got)
		}
	}
	e.apply(api.OpSetRules, api.SetRulesCommand{Rules: &rules.Document{Interrupt: []string{"dev"}}})
	if got := check(`{"from":"boss","interrupt":true}`); got.Allowed || got.Reason != "interrupt: only dev may interrupt" {
		t.Errorf("boss under interrupt: [dev] = %+v", got)
	}
	if got := check(`{"from":"dev","interrupt":true}`); !got.Allowed {
		t.Errorf("dev under interrupt: [dev] = %+v", got)
	}
}

func TestRulesPutYAMLAndJSON(t *testing.T) {
	e := newOversightEnv(t)
	if st := e.rulesState(); st.Rules != nil || st.Default != "allow" || st.Index != 0 {
		t.Fatalf("rules before any: %+v", st)
	}

	seed := seedRulesYAML(t)
	for _, ct := range []string{"application/yaml", "text/yaml; charset=utf-8", "application/x-yaml"} {
		r := e.do("PUT", "/v1/rules", seed, yamlHeader(ct))
		if r.status != 200 {
			t.Fatalf("PUT YAML (%s): %d %s", ct, r.status, r.body)
		}
	}
	st := e.rulesState()
	if st.Rules == nil || len(st.Rules.AllowedInteractions) != 4 || len(st.Rules.ForbiddenInteractions) != 1 ||
		st.Rules.ForbiddenInteractions[0].Reason != "Should go through developer first" || st.Default != "deny" || st.Index != 3 {
		t.Errorf("after the YAML: %+v", st)
	}
	check := func(from, to string) api.RulesCheck {
		t.Helper()
		r := e.do("POST", "/v1/rules/check", fmt.Sprintf(`{"from":%q,"to":%q}`, from, to), nil)
		if r.status != 200 {
			t.Fatalf("check %s → %s: %d %s", from, to, r.status, r.body)
		}
		var c api.RulesCheck
		if err := json.Unmarshal(r.body, &c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	if c := check("tester_agent", "reviewer_agent"); c.Allowed || c.Reason != "Should go through developer first" {
		t.Errorf("tester → reviewer: %+v", c)
	}
	if c := check("developer_agent", "reviewer_agent"); !c.Allowed || c.FromRole != "agent" {
		t.Errorf("developer → reviewer: %+v", c)
	}

	// The same rules in JSON (no Content-Type means JSON), and the preset.
	r := e.do("PUT", "/v1/rules", `{"preset":"hierarchical","orchestrator_role":"lead"}`, nil)
	if r.status != 200 {
		t.Fatalf("PUT preset: %d %s", r.status, r.body)
	}
	var put api.RulesState
	if err := json.Unmarshal(r.body, &put); err != nil || put.Rules == nil || put.Rules.Preset != "hierarchical" || put.Index != 4 {
		t.Errorf("PUT answer %s (%v)", r.body, err)
	}
	if c := check("tester_agent", "reviewer_agent"); c.Allowed || !strings.Contains(c.Reason, "may send only to role:lead (preset hierarchical)") {
		t.Errorf("under the preset: %+v", c)
	}
	r = e.do("PUT", "/v1/rules", `{"forbidden":[{"from":"a","to":"b"}]}`, yamlHeader("application/json"))
	if r.status != 200 {
		t.Fatalf("PUT JSON: %d %s", r.status, r.body)
	}
	if c := check("a", "b"); c.Allowed || c.Reason != "forbidden by forbidden[0]: a → b" {
		t.Errorf("a → b: %+v", c)
	}

	// DELETE removes the document.
	r = e.do("DELETE", "/v1/rules", "", nil)
	if r.status != 200 {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	if st := e.rulesState(); st.Rules != nil || st.Default != "allow" || st.Index != 6 {
		t.Errorf("after DELETE: %+v", st)
	}
	if c := check("a", "b"); !c.Allowed {
		t.Errorf("after DELETE a → b: %+v", c)
	}
}

func TestRulesPutBadInput(t *testing.T) {
	e := newOversightEnv(t)
	if r := e.do("PUT", "/v1/rules", `{"preset":"hierarchical"}`, nil); r.status != 200 {
		t.Fatalf("PUT: %d %s", r.status, r.body)
	}
	before := e.rulesState()
	applies := len(e.fake.CallsTo("Apply"))
	var dumpBefore strings.Builder
	if err := e.state.Dump(&dumpBefore); err != nil {
		t.Fatal(err)
	}

	big := `{"forbidden":[` + strings.Repeat(`{"from":"a","to":"b","reason":"padding padding padding"},`, rules.MaxBytes/50) + `{"from":"a","to":"b"}]}`
	for _, c := range []struct {
		name, ct, body string
		status         int
		code, message  string
	}{
		// What the decoder refuses is package rules' to test; here, one
		// document for each way the handler answers: malformed (YAML and
		// JSON, told apart by Content-Type) is bad_request, a field error
		// (from decoding or compiling) invalid, with the field's path.
		{"bad YAML", "text/yaml", "agents: [\n", 400, "bad_request", "malformed YAML"},
		{"YAML unknown field", "application/yaml", "agents:\n  - agent: x\n    can_send: [y]\n", 400, "invalid", "agents[0].can_send: unknown field"},
		{"JSON unknown field", "", `{"preset":"hierarchical","color":"red"}`, 400, "invalid", "color: unknown field"},
		{"bad glob", "application/json", `{"agents":[{"agent":"a","can_send_to":["b"]},{"agent":"c","can_send_to":[]},{"agent":"d","can_send_to":["x["]}]}`,
			400, "invalid", `agents[2].can_send_to[0]: bad glob "x["`},
		{"malformed JSON", "", `{"preset":`, 400, "bad_request", "malformed JSON"},
		{"over the limit", "", big, 413, "too_large", "over the limit of 262144 bytes"},
		{"other content type", "text/plain", `{"preset":"hierarchical"}`, 415, "bad_request", `Content-Type "text/plain"`},
	} {
		r := e.do("PUT", "/v1/rules", c.body, yamlHeader(c.ct))
		if c.ct == "" {
			r = e.do("PUT", "/v1/rules", c.body, nil)
		}
		if r.status != c.status {
			t.Errorf("%s: status %d, want %d: %s", c.name, r.status, c.status, r.body)
			continue
		}
		code, msg := errorOf(t, r.body)
		if code != c.code || !strings.Contains(msg, c.message) {
			t.Errorf("%s: %s %q, want %s containing %q", c.name, code, msg, c.code, c.message)
		}
	}
	if len(big) <= rules.MaxBytes {
		t.Fatalf("the oversized document is only %d bytes", len(big))
	}
	for _, c := range []struct {
		name, body, code, message string
	}{
		{"missing from", `{"to":"b"}`, "invalid", "from: required"},
		{"bad to", `{"from":"a","to":"B B"}`, "invalid", "to: must match"},
		{"bad role", `{"from":"a","to":"b","to_role":"role:x"}`, "invalid", "to_role: must match"},
		{"unknown field", `{"from":"a","to":"b","as":"c"}`, "unknown_field", `unknown field "as"`},
		{"missing to", `{"from":"a"}`, "invalid", "to: required"},
		{"interrupt and to", `{"from":"a","to":"b","interrupt":true}`, "invalid", "interrupt: asks who may interrupt any agent"},
		{"interrupt and to_role", `{"from":"a","to_role":"x","interrupt":true}`, "invalid", "leave to and to_role out"},
	} {
		r := e.do("POST", "/v1/rules/check", c.body, nil)
		if r.status != 400 {
			t.Errorf("check %s: status %d: %s", c.name, r.status, r.body)
			continue
		}
		if code, msg := errorOf(t, r.body); code != c.code || !strings.Contains(msg, c.message) {
			t.Errorf("check %s: %s %q, want %s with %q", c.name, code, msg, c.code, c.message)
		}
	}

	// Nothing was proposed, nothing changed.
	if n := len(e.fake.CallsTo("Apply")); n != applies {
		t.Errorf("%d commands proposed for bad input", n-applies)
	}
	b1, _ := json.Marshal(before)
	if b2, _ := json.Marshal(e.rulesState()); string(b2) != string(b1) {
		t.Errorf("rules changed: %s, was %s", b2, b1)
	}
	var dumpAfter strings.Builder
	if err := e.state.Dump(&dumpAfter); err != nil {
		t.Fatal(err)
	}
	if dumpAfter.String() != dumpBefore.String() {
		t.Error("the state changed")
	}
}

// A document that passes no handler but reaches apply (here: a forwarded
// entry, as a follower sends one) is refused there: 400, nothing changed.
func TestRulesRefusedAtApply(t *testing.T) {
	e := newOversightEnv(t)
	entry, err := fsm.Encode(api.OpSetRules, 1, json.RawMessage(`{"rules":{"preset":"flat"}}`))
	if err != nil {
		t.Fatal(err)
	}
	r := e.do("POST", "/v1/internal/entry", string(entry), http.Header{"Content-Type": {api.ContentTypeEntry}})
	if r.status != 400 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if code, msg := errorOf(t, r.body); code != "invalid" || !strings.Contains(msg, `preset: unknown preset "flat"`) {
		t.Errorf("%s %q", code, msg)
	}
	if st := e.rulesState(); st.Rules != nil || st.Index != 0 {
		t.Errorf("rules after a refused set: %+v", st)
	}
}

func decodeAudit(t *testing.T, r reply) api.AuditResponse {
	t.Helper()
	if r.status != 200 {
		t.Fatalf("audit: %d %s", r.status, r.body)
	}
	var a api.AuditResponse
	if err := json.Unmarshal(r.body, &a); err != nil {
		t.Fatalf("audit: %v: %s", err, r.body)
	}
	return a
}

func TestAuditEndpoint(t *testing.T) {
	e := newOversightEnv(t)
	e.apply(api.OpRegisterAgent, api.RegisterAgentCommand{ID: "orchestrator", Role: "orchestrator"}) // 14:30:00
	e.apply(api.OpRegisterAgent, api.RegisterAgentCommand{ID: "triage", Role: "triage"})             // 14:30:15
	e.send("msg-1", "orchestrator", "issues", "task_assign", "Triage new issue #123", "", "triage")  // 14:30:30
	e.send("msg-2", "triage", "issues", "chat", "secret plans", "private", "orchestrator")           // 14:30:45
	if r := e.do("PUT", "/v1/rules", "preset: hierarchical\n", yamlHeader("application/yaml")); r.status != 200 {
		t.Fatalf("PUT rules: %d %s", r.status, r.body) // 14:31:00
	}

	var all []api.AuditEntry
	after := uint64(0)
	for range 10 {
		page := decodeAudit(t, e.do("GET", fmt.Sprintf("/v1/audit?after=%d&limit=2", after), "", nil))
		if len(page.Events) > 2 {
			t.Fatalf("a page of %d events with limit 2", len(page.Events))
		}
		all = append(all, page.Events...)
		if len(page.Events) > 0 {
			after = page.Events[len(page.Events)-1].Seq
		}
		if !page.HasMore {
			break
		}
	}
	var lines []string
	for i, ev := range all {
		if ev.Seq != uint64(i+1) {
			t.Errorf("event %d has seq %d", i, ev.Seq)
		}
		lines = append(lines, ev.Line)
	}
	got := strings.Join(lines, "\n")
	for _, want := range []string{
		"[2025-10-20T14:30:30Z] [orchestrator→triage] TASK_ASSIGN: Triage new issue #123",
		"[2025-10-20T14:30:45Z] [triage→orchestrator] CHAT: (private)",
		"[2025-10-20T14:31:00Z] RULES: replaced: preset hierarchical, 0 agent entries, 0 forbidden, default deny",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("audit lines lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "secret plans") {
		t.Errorf("a private title leaked:\n%s", got)
	}
	for _, ev := range all {
		if ev.Line != ev.AuditEvent.Line() {
			t.Errorf("line %q is not the event's Line() %q", ev.Line, ev.AuditEvent.Line())
		}
		if ev.Private && ev.Text != fsm.PrivateText {
			t.Errorf("private event text %q", ev.Text)
		}
	}
	if len(all) < 5 {
		t.Errorf("only %d events: %s", len(all), got)
	}

	// The end of the trail, and bad parameters.
	if page := decodeAudit(t, e.do("GET", fmt.Sprintf("/v1/audit?after=%d", after), "", nil)); len(page.Events) != 0 || page.HasMore {
		t.Errorf("after the last: %+v", page)
	}
	for _, q := range []string{"limit=0", "limit=1001", "limit=x", "after=-1", "consistency=eventual"} {
		r := e.do("GET", "/v1/audit?"+q, "", nil)
		if r.status != 400 {
			t.Errorf("?%s: status %d", q, r.status)
			continue
		}
		if code, msg := errorOf(t, r.body); code != "bad_request" || !strings.Contains(msg, strings.SplitN(q, "=", 2)[0]) {
			t.Errorf("?%s: %s %q", q, code, msg)
		}
	}
}

func TestOverviewEndpoint(t *testing.T) {
	e := newOversightEnv(t)
	for i, ch := range []string{"a", "b", "a", "a", "b"} {
		vis := ""
		if i == 3 {
			vis = "private"
		}
		e.send(fmt.Sprintf("msg-%d", i+1), "codex", ch, "request", fmt.Sprintf("title %d", i+1), vis, "claude")
	}
	get := func(q string) api.OverviewPage {
		t.Helper()
		r := e.do("GET", "/v1/overview?"+q, "", nil)
		if r.status != 200 {
			t.Fatalf("overview?%s: %d %s", q, r.status, r.body)
		}
		if strings.Contains(string(r.body), "the content of") || strings.Contains(string(r.body), `"content"`) {
			t.Errorf("overview?%s carries content: %s", q, r.body)
		}
		var p api.OverviewPage
		if err := json.Unmarshal(r.body, &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	seqs := func(p api.OverviewPage) string {
		var s []string
		for _, m := range p.Messages {
			s = append(s, fmt.Sprint(m.Seq))
		}
		return strings.Join(s, ",") + fmt.Sprintf(" more=%t", p.HasMore)
	}
	for q, want := range map[string]string{
		"":                             "1,2,3,4,5 more=false",
		"limit=2":                      "1,2 more=true",
		"after=2&limit=2":              "3,4 more=true",
		"after=4&limit=2":              "5 more=false",
		"channel=a":                    "1,3,4 more=false",
		"channel=a&limit=2":            "1,3 more=true",
		"channel=a&after=3":            "4 more=false",
		"channel=b&consistency=strong": "2,5 more=false",
		"channel=none":                 " more=false",
	} {
		if got := seqs(get(q)); got != want {
			t.Errorf("overview?%s = %s, want %s", q, got, want)
		}
	}
	p := get("after=1&limit=1")
	m := p.Messages[0]
	if m.ID != "msg-2" || m.Channel != "b" || m.From != "codex" || strings.Join(m.To, ",") != "claude" ||
		m.Type != "request" || m.Priority != "normal" || m.Title != "title 2" || !m.Timestamp.Equal(oversightT0.Add(15*time.Second)) {
		t.Errorf("entry %+v", m)
	}
	if m := get("after=3&limit=1").Messages[0]; !m.Private || m.Title != fsm.PrivateText {
		t.Errorf("private entry %+v", m)
	}
	for _, q := range []string{"limit=0", "limit=5000", "after=x", "channel=Bad%20Name"} {
		r := e.do("GET", "/v1/overview?"+q, "", nil)
		if r.status != 400 {
			t.Errorf("?%s: status %d", q, r.status)
			continue
		}
		if code, _ := errorOf(t, r.body); code != "bad_request" {
			t.Errorf("?%s: code %s", q, code)
		}
	}
}

// The client methods against the same server.
func TestOversightClient(t *testing.T) {
	e := newOversightEnv(t)
	ctx := context.Background()
	c := client.NewClient(e.srv.URL, nil)
	doc, err := rules.Decode([]byte(seedRulesYAML(t)), rules.YAML)
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.SetRules(ctx, doc)
	if err != nil || st.Rules == nil || st.Index != 1 {
		t.Fatalf("SetRules: %+v, %v", st, err)
	}
	if got, err := c.Rules(ctx, api.Strong); err != nil || got.Index != 1 || len(got.Rules.AllowedInteractions) != 4 {
		t.Errorf("Rules: %+v, %v", got, err)
	}
	chk, err := c.CheckRules(ctx, api.RulesCheckRequest{From: "tester_agent", To: "reviewer_agent"}, api.Local)
	if err != nil || chk.Allowed || chk.Reason != "Should go through developer first" {
		t.Errorf("CheckRules: %+v, %v", chk, err)
	}
	_, err = c.SetRules(ctx, &rules.Document{Preset: "flat"})
	if !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), "preset") {
		t.Errorf("SetRules(bad) = %v", err)
	}
	if st, err := c.ClearRules(ctx); err != nil || st.Rules != nil {
		t.Errorf("ClearRules: %+v, %v", st, err)
	}
	e.send("msg-1", "codex", "a", "chat", "hello", "", "claude")
	a, err := c.Audit(ctx, 0, 2, api.Local)
	if err != nil || len(a.Events) != 2 || !a.HasMore || a.Events[0].Label != "RULES" {
		t.Errorf("Audit: %+v, %v", a, err)
	}
	a, err = c.Audit(ctx, a.Events[1].Seq, 0, api.Local)
	if err != nil || len(a.Events) == 0 || a.HasMore {
		t.Errorf("Audit after: %+v, %v", a, err)
	}
	o, err := c.Overview(ctx, "a", 0, 10, api.Local)
	if err != nil || len(o.Messages) != 1 || o.Messages[0].Title != "hello" {
		t.Errorf("Overview: %+v, %v", o, err)
	}
	if _, err := c.Overview(ctx, "Bad Name", 0, 0, api.Local); !errors.Is(err, api.ErrBadRequest) {
		t.Errorf("Overview(bad channel) = %v", err)
	}
}
