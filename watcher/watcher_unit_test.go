package watcher

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/testing/testenv"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

var (
	stubOnce sync.Once
	stubPath string
	stubErr  error
)

// buildStub builds testing/stubmodel once per test binary.
// apiNode is one node's API over a real state machine (transporttest)
// and a client of it, with agents registered: those the test addresses
// before their watcher runs (a watcher registers its agent as it starts).
func apiNode(t *testing.T, agents ...string) (*transporttest.Service, *client.Client) {
	svc := transporttest.New(t)
	svc.Register(t, agents...)
	srv := httptest.NewServer(transport.NewServer(svc, transport.ServerOptions{Blobs: svc}))
	t.Cleanup(srv.Close)
	return svc, client.NewClient(srv.URL, nil)
}

func buildStub(t *testing.T) string {
	t.Helper()
	stubOnce.Do(func() {
		dir, err := os.MkdirTemp("", "stubmodel")
		if err != nil {
			stubErr = err
			return
		}
		stubPath = filepath.Join(dir, "stubmodel")
		out, err := exec.Command("go", "build", "-o", stubPath, "../testing/stubmodel").CombinedOutput()
		if err != nil {
			stubErr = errors.New(string(out))
		}
	})
	if stubErr != nil {
		t.Fatalf("build stub model: %v", stubErr)
	}
	return stubPath
}

func agent(t *testing.T, yml string) *AgentConfig {
	t.Helper()
	f, err := Parse([]byte(yml))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return &f.Agents[0]
}

func TestForUs(t *testing.T) {
	a := agent(t, `
agents:
  - id: bob
    role: reviewer
    command: ["x"]
`)
	filtered := agent(t, `
agents:
  - id: bob
    command: ["x"]
    channels: [dev]
    match: {types: [task_assign], priorities: [urgent, high], from: ["lead*"]}
`)
	tmuxBob := agent(t, `
agents:
  - id: bob
    delivery: tmux
    tmux_target: "s:0.0"
`)
	msg := func(f func(m *api.Message)) *api.Message {
		m := &api.Message{ID: "m1", Seq: 5, Channel: "dev", From: "lead1", Type: "task_assign", Priority: "high"}
		f(m)
		return m
	}
	cases := []struct {
		name   string
		a      *AgentConfig
		m      *api.Message
		want   bool
		reason string
	}{
		{"addressed by id/role/all/glob (resolved)", a, msg(func(m *api.Message) { m.Recipients = []string{"amy", "bob"} }), true, ReasonAddressed},
		{"mention", a, msg(func(m *api.Message) { m.Content.Text = "ping @bob please" }), true, ReasonMention},
		{"mention at end with period", a, msg(func(m *api.Message) { m.Content.Text = "thanks @bob." }), true, ReasonMention},
		{"mention of a longer id", a, msg(func(m *api.Message) { m.Content.Text = "ping @bobby" }), false, ReasonNotForUs},
		{"mention of a dotted longer id", a, msg(func(m *api.Message) { m.Content.Text = "ping @bob.x" }), false, ReasonNotForUs},
		{"leading id", a, msg(func(m *api.Message) { m.Content.Text = "  bob: look at this" }), true, ReasonLeading},
		{"leading longer id", a, msg(func(m *api.Message) { m.Content.Text = "bobby: look" }), false, ReasonNotForUs},
		{"not addressed", a, msg(func(m *api.Message) { m.Recipients = []string{"amy"}; m.Content.Text = "hi" }), false, ReasonNotForUs},
		{"own message", a, msg(func(m *api.Message) { m.From = "bob"; m.Recipients = []string{"bob"} }), false, ReasonOwn},
		{"own fork's note", a, msg(func(m *api.Message) { m.From = "bob-fork-2"; m.Recipients = []string{"bob"} }), false, ReasonOwnFork},
		{"another's fork", a, msg(func(m *api.Message) { m.From = "amy-fork-1"; m.Recipients = []string{"bob"} }), true, ReasonAddressed},
		{"own fork's note to a tmux agent (its session reads it)", tmuxBob, msg(func(m *api.Message) { m.From = "bob-fork-1"; m.Recipients = []string{"bob"} }), true, ReasonAddressed},
		{"filters pass", filtered, msg(func(m *api.Message) { m.Recipients = []string{"bob"} }), true, ReasonAddressed},
		{"other channel", filtered, msg(func(m *api.Message) { m.Recipients = []string{"bob"}; m.Channel = "ops" }), false, ReasonChannel},
		{"type filtered", filtered, msg(func(m *api.Message) { m.Recipients = []string{"bob"}; m.Type = "chat" }), false, ReasonType},
		{"priority filtered", filtered, msg(func(m *api.Message) { m.Recipients = []string{"bob"}; m.Priority = "low" }), false, ReasonPriority},
		{"sender filtered", filtered, msg(func(m *api.Message) { m.Recipients = []string{"bob"}; m.From = "intern" }), false, ReasonFrom},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, reason := c.a.ForUs(c.m)
			if got != c.want || reason != c.reason {
				t.Fatalf("ForUs = %v, %q; want %v, %q", got, reason, c.want, c.reason)
			}
		})
	}
}

func TestConfigDefaultsAndOverrides(t *testing.T) {
	a := agent(t, `
agents:
  - id: w1
    command: ["stub"]
    policy:
      mode: fork
      overrides:
        - {from: "boss*", mode: queue}
        - {priority: urgent, mode: interrupt}
        - {tag: solo, mode: queue}
`)
	if a.Role != api.DefaultRole || *a.ContextMessages != DefaultContextMessages || time.Duration(a.Timeout) != DefaultTimeout ||
		*a.Retries != DefaultRetries || a.MaxThreadDepth != DefaultMaxThreadDepth || a.Delivery != DeliveryCommand || a.Policy.MaxForks != DefaultMaxForks {
		t.Fatalf("defaults not filled: %+v", a)
	}
	for _, c := range []struct {
		m    api.Message
		want string
	}{
		{api.Message{From: "boss1"}, PolicyQueue},
		{api.Message{From: "x", Priority: "urgent"}, PolicyInterrupt},
		{api.Message{From: "x", Tags: []string{"solo"}}, PolicyQueue},
		{api.Message{From: "x", Priority: "high"}, PolicyFork},
	} {
		if got := a.ModeFor(&c.m); got != c.want {
			t.Errorf("ModeFor(%+v) = %s, want %s", c.m, got, c.want)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	cases := []struct{ yml, field string }{
		{`agents: []`, "agents"},
		{`agents: [{id: "Bad Id", command: [x]}]`, "agents[0].id"},
		{`agents: [{id: a, command: []}]`, "agents[0].command"},
		{`agents: [{id: a, command: [x]}, {id: a, command: [x]}]`, "agents[1].id"},
		{`agents: [{id: a, command: [x], role: "R!"}]`, "agents[0].role"},
		{`agents: [{id: a, command: [x], channels: ["A B"]}]`, "agents[0].channels[0]"},
		{`agents: [{id: a, command: [x], retries: -1}]`, "agents[0].retries"},
		{`agents: [{id: a, command: [x], context_messages: 1000}]`, "agents[0].context_messages"},
		{`agents: [{id: a, command: [x], timeout: "-1s"}]`, "agents[0].timeout"},
		{`agents: [{id: a, command: [x], policy: {mode: sometimes}}]`, "agents[0].policy.mode"},
		{`agents: [{id: a, command: [x], policy: {max_forks: 100}}]`, "agents[0].policy.max_forks"},
		{`agents: [{id: a, command: [x], policy: {overrides: [{from: "x*"}]}}]`, "agents[0].policy.overrides[0].mode"},
		{`agents: [{id: a, command: [x], policy: {overrides: [{mode: queue}]}}]`, "agents[0].policy.overrides[0]"},
		{`agents: [{id: a, command: [x], policy: {overrides: [{priority: asap, mode: queue}]}}]`, "agents[0].policy.overrides[0].priority"},
		{`agents: [{id: a, command: [x], match: {priorities: [asap]}}]`, "agents[0].match.priorities[0]"},
		{`agents: [{id: a, command: [x], match: {from: ["[a"]}}]`, "agents[0].match.from[0]"},
		{`agents: [{id: a, delivery: tmux}]`, "agents[0].tmux_target"},
		{`agents: [{id: a, delivery: tmux, tmux_target: "s:0.0", idle_prompt: "(unclosed"}]`, "agents[0].idle_prompt"},
		{`agents: [{id: a, delivery: tmux, tmux_target: "s:0.0", working_prompt: "[z-a]"}]`, "agents[0].working_prompt"},
		{`agents: [{id: a, command: [x], idle_prompt: "> "}]`, "agents[0].idle_prompt"},
		{`agents: [{id: a, command: [x], working_prompt: "busy"}]`, "agents[0].working_prompt"},
		{`agents: [{id: a, command: [x], interrupt_key: Escape}]`, "agents[0].interrupt_key"},
		{`agents: [{id: a, delivery: tmux, tmux_target: "s:0.0", interrupt_key: "hello world"}]`, "agents[0].interrupt_key"},
		{`agents: [{id: a, delivery: tmux, tmux_target: "s:0.0", interrupt_key: "-t"}]`, "agents[0].interrupt_key"},
		{`agents: [{id: a, delivery: carrier-pigeon, command: [x]}]`, "agents[0].delivery"},
		{`agents: [{id: a, command: [x], prompt: "{{.Nope"}]`, "agents[0].prompt"},
		{`agents: [{id: a, command: [x], max_thread_depth: -2}]`, "agents[0].max_thread_depth"},
		{`agents: [{id: a, command: [x], claim: ["role:Bad"]}]`, "agents[0].claim[0]"},
		{`agents: [{id: a, command: [x], claim: ["capability:go", "capability:"]}]`, "agents[0].claim[1]"},
		{`agents: [{id: a, delivery: tmux, tmux_target: "s:0.0", policy: {mode: fork}}]`, "agents[0].policy.mode"},
		{`agents: [{id: a, delivery: tmux, tmux_target: "s:0.0", policy: {overrides: [{tag: x, mode: fork}]}}]`, "agents[0].policy.overrides[0].mode"},
		{`agents: [{id: ` + strings.Repeat("a", 60) + `, command: [x], policy: {mode: fork}}]`, "agents[0].policy.mode"},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.yml))
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("Parse(%s) = %v; want a ConfigError on %s", c.yml, err, c.field)
		}
	}
	if _, err := Parse([]byte("agents: [{id: a, command: [x], colour: red}]")); err == nil || !strings.Contains(err.Error(), "colour") {
		t.Errorf("unknown field: err = %v", err)
	}
	if _, err := Parse([]byte("agents: [{id: a, command: [x], timeout: soon}]")); err == nil || !strings.Contains(err.Error(), "duration") {
		t.Errorf("bad duration: err = %v", err)
	}
}

// Claim entries are queues in fsm's assignee forms: a role only the
// agent's own, capabilities registered with it; every refusal names the
// agent and the entry.
func TestConfigClaim(t *testing.T) {
	a := agent(t, `
agents:
  - id: bob
    role: reviewer
    command: [x]
    claim: ["role:reviewer", "capability:go", "capability:sql"]
`)
	if got, want := a.Queues(), []string{"bob", "role:reviewer", "capability:go", "capability:sql"}; !slices.Equal(got, want) {
		t.Errorf("Queues = %v, want %v", got, want)
	}
	if got, want := a.Capabilities(), []string{"go", "sql"}; !slices.Equal(got, want) {
		t.Errorf("Capabilities = %v, want %v", got, want)
	}
	if none := agent(t, "agents: [{id: amy, command: [x]}]"); !slices.Equal(none.Queues(), []string{"amy"}) || none.Capabilities() != nil {
		t.Errorf("no claim: queues %v capabilities %v, want [amy] and none", none.Queues(), none.Capabilities())
	}
	var many []string
	for i := range api.MaxCapabilities + 1 {
		many = append(many, fmt.Sprintf("%q", fmt.Sprintf("capability:c%d", i)))
	}
	cases := []struct{ yml, field, words string }{
		{`agents: [{id: bob, role: reviewer, command: [x], claim: ["role:writer"]}]`, "agents[0].claim[0]",
			`agent bob: "role:writer" is not its role ("reviewer")`},
		{`agents: [{id: bob, command: [x], claim: ["role:agent", "capability:Go"]}]`, "agents[0].claim[1]",
			`agent bob: "capability:Go": the capability must match`},
		{`agents: [{id: bob, command: [x], claim: ["role:"]}]`, "agents[0].claim[0]", `agent bob: "role:": the role must match`},
		{`agents: [{id: bob, command: [x], claim: ["amy"]}]`, "agents[0].claim[0]", `agent bob: "amy": want role:NAME or capability:NAME`},
		{`agents: [{id: bob, command: [x], claim: ["capability:go", "capability:go"]}]`, "agents[0].claim[1]",
			`agent bob: "capability:go" is listed twice`},
		{`agents: [{id: bob, delivery: tmux, tmux_target: "s:0.0", claim: ["capability:go"]}]`, "agents[0].claim",
			`agent bob: a tmux agent's watcher runs no tasks`},
		{`agents: [{id: bob, command: [x], claim: [` + strings.Join(many, ", ") + `]}]`, "agents[0].claim",
			fmt.Sprintf("agent bob: %d capability queues, at most %d", api.MaxCapabilities+1, api.MaxCapabilities)},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.yml))
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field || !strings.Contains(ce.Reason, c.words) {
			t.Errorf("Parse(%.80s) = %v; want a ConfigError on %s saying %q", c.yml, err, c.field, c.words)
		}
	}
}

func TestPromptRenders(t *testing.T) {
	a := agent(t, `
agents:
  - id: bob
    role: reviewer
    guardrails: "never push to main"
    command: [x]
`)
	m := &api.Message{ID: "m-42", From: "amy", Channel: "dev", Type: "chat", Priority: "normal", Title: "review", Content: api.Content{Text: "please review"}}
	ctxm := []*api.Message{{From: "amy", Recipients: []string{"bob", "cy"}, Content: api.Content{Text: "earlier note"}}}
	out, err := a.Render(PromptData{Agent: a.ID, Role: a.Role, Guardrails: a.Guardrails, Context: ctxm, Message: m})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"You are bob", `role "reviewer"`, "never push to main", "[amy → bob, cy] earlier note", "id: m-42", "title: review", "please review"} {
		if !strings.Contains(out, want) {
			t.Errorf("prompt lacks %q:\n%s", want, out)
		}
	}
}

func TestExecAnswerJSONAndFailures(t *testing.T) {
	stub := buildStub(t)
	ctx := context.Background()
	res := Exec(ctx, Invocation{Argv: []string{stub}, Stdin: "id: m-1\n", Timeout: 30 * time.Second})
	if res.Err != nil || res.Output != "stub answer to m-1" || res.ExitCode != 0 {
		t.Fatalf("plain: %+v", res)
	}
	res = Exec(ctx, Invocation{Argv: []string{stub, "--json"}, Stdin: "id: m-2\n", Timeout: 30 * time.Second})
	if res.Err != nil || res.Output != "stub answer to m-2" {
		t.Fatalf("json: %+v", res)
	}
	res = Exec(ctx, Invocation{Argv: []string{stub, "--fail"}, Stdin: "x", Timeout: 30 * time.Second})
	if res.Err == nil || res.ExitCode != 3 || len(res.Stderr) != 1 || !strings.Contains(res.Stderr[0], "--fail") {
		t.Fatalf("fail: %+v", res)
	}
	res = Exec(ctx, Invocation{Argv: []string{stub, "--empty"}, Stdin: "x", Timeout: 30 * time.Second})
	if !errors.Is(res.Err, ErrEmptyOutput) {
		t.Fatalf("empty: %+v", res)
	}
	res = Exec(ctx, Invocation{Argv: []string{filepath.Join(t.TempDir(), "missing")}, Timeout: time.Second})
	if res.Err == nil {
		t.Fatalf("missing binary: %+v", res)
	}
	if got := extractResult(`{"other": 1}`); got != `{"other": 1}` {
		t.Errorf("a JSON object without result is kept whole: %q", got)
	}
	res = Exec(ctx, Invocation{Argv: []string{"sh", "-c", `echo "$MAOS_AGENT_ID/$X"`}, Env: []string{"MAOS_AGENT_ID=bob", "X=y"}, Timeout: 30 * time.Second})
	if res.Output != "bob/y" {
		t.Fatalf("env: %+v", res)
	}
}

// OnLine sees each stdout line while the command still runs (the second
// line is printed only once the test saw the first), and the last line
// without a newline at the end; Stdout keeps what a JSON answer's result
// replaces in Output.
func TestExecPassesLinesAsPrinted(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "gate")
	var got []string
	res := Exec(context.Background(), Invocation{
		Argv:    []string{"sh", "-c", `echo one; while [ ! -e '` + gate + `' ]; do sleep 0.01; done; printf 'two\r\n{"result": "three"}'`},
		Timeout: 30 * time.Second,
		OnLine: func(l string) {
			got = append(got, l)
			if l == "one" {
				if err := os.WriteFile(gate, nil, 0o600); err != nil {
					t.Error(err)
				}
			}
		},
	})
	if res.Err != nil || !slices.Equal(got, []string{"one", "two", `{"result": "three"}`}) {
		t.Fatalf("lines %q, result %+v", got, res)
	}
	if res.Stdout != "one\ntwo\r\n{\"result\": \"three\"}" || res.Output != res.Stdout {
		t.Errorf("Stdout %q Output %q: want both the whole output", res.Stdout, res.Output)
	}
	res = Exec(context.Background(), Invocation{Argv: []string{"sh", "-c", `echo '  {"result": "x"} '`}, Timeout: 30 * time.Second})
	if res.Output != "x" || res.Stdout != `{"result": "x"}` {
		t.Errorf("JSON answer: Output %q Stdout %q, want x and the JSON as printed", res.Output, res.Stdout)
	}
}

func TestExecTimeoutKillsProcessGroup(t *testing.T) {
	stub := buildStub(t)
	res := Exec(context.Background(), Invocation{Argv: []string{stub, "--hang"}, Stdin: "x", Timeout: 2 * time.Second})
	if !res.TimedOut || res.Err == nil {
		t.Fatalf("want a timeout: %+v", res)
	}
	var child int
	for _, l := range res.Stderr {
		if v, ok := strings.CutPrefix(l, "stubmodel: child pid "); ok {
			child, _ = strconv.Atoi(v)
		}
	}
	if child == 0 {
		t.Fatalf("the stub did not report its child: %q", res.Stderr)
	}
	// The killed child may linger briefly as a zombie of its dead parent
	// until init reaps it; poll (bounded) until it is gone or a zombie.
	deadline := testenv.Deadline(t)
	for {
		err := syscall.Kill(child, 0)
		if errors.Is(err, syscall.ESRCH) || zombie(child) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %d of the hung stub survives the timeout", child)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// zombie reports whether pid is a dead process not yet reaped.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && s[i+2] == 'Z'
}

// A reply id has the seed format, msg-YYYYMMDD-HHMMSS-{agent}-{hex}, with
// the handled message's stored time, and is derived from the agent and the
// message alone: a retry or a restart computes the same id.
func TestReplyIDIsSeedFormatStableAndValid(t *testing.T) {
	ts := time.Date(2026, 11, 21, 10, 30, 5, 123456789, time.FixedZone("CET", 3600))
	m := &api.Message{ID: "msg-1", Timestamp: ts}
	id := ReplyID("bob", m)
	if !regexp.MustCompile(`^msg-20261121-093005-bob-[0-9a-f]{16}$`).MatchString(id) {
		t.Fatalf("ReplyID = %s, want msg-20261121-093005-bob-{16 hex digits} (the message's time in UTC)", id)
	}
	again := &api.Message{ID: "msg-1", Timestamp: ts.UTC(), Seq: 9, Content: api.Content{Text: "as streamed"}}
	if ReplyID("bob", again) != id {
		t.Errorf("the same message read again gives %s, want %s", ReplyID("bob", again), id)
	}
	for _, other := range []string{ReplyID("amy", m), ReplyID("bob", &api.Message{ID: "msg-2", Timestamp: ts})} {
		if other == id || strings.HasSuffix(other, id[len(id)-16:]) {
			t.Errorf("%s and %s share their hex part", id, other)
		}
	}
	long := &api.Message{ID: ReplyID(strings.Repeat("a", 64), &api.Message{ID: strings.Repeat("x", api.MaxIDLen), Timestamp: ts}),
		Channel: "c", From: "a", To: api.Recipients{"b"}, Content: api.Content{Text: "t"}}
	long.Normalize(time.Now())
	if err := long.Validate(); err != nil {
		t.Fatalf("reply id of the longest agent id is invalid: %v", err)
	}
}

// The watcher's answer and incident are api.NewReply with the derived id:
// an answer to a private message is private, a task_assign gets a
// task_result, an incident keeps the id, the thread and the privacy.
func TestAnswerAndIncident(t *testing.T) {
	m := &api.Message{ID: "msg-1", Channel: "dev", From: "lead1", To: api.Recipients{"bob"}, Type: "task_assign",
		Title: "the plan", ThreadID: "msg-0", Visibility: api.VisibilityPrivate, Priority: api.PriorityUrgent}
	a := answer(m, "bob", "done")
	if a.ID != ReplyID("bob", m) || a.From != "bob" || !slices.Equal(a.To, []string{"lead1"}) || a.Channel != "dev" ||
		a.InReplyTo != "msg-1" || a.ThreadID != "msg-0" || a.Type != "task_result" || a.Title != "Re: the plan" ||
		a.Visibility != api.VisibilityPrivate || a.Priority != api.PriorityNormal || a.Content.Text != "done" {
		t.Errorf("answer = %+v", a)
	}
	i := incident(m, "bob", "could not answer", "exit 1")
	if i.ID != a.ID || i.Type != "incident" || i.Priority != api.PriorityHigh || i.Title != "incident: bob could not answer msg-1" ||
		i.Visibility != api.VisibilityPrivate || i.ThreadID != "msg-0" || i.Content.Text != "exit 1" {
		t.Errorf("incident = %+v", i)
	}
	for _, r := range []*api.Message{a, i} {
		r.Normalize(time.Now())
		if err := r.Validate(); err != nil {
			t.Errorf("%s does not validate: %v", r.Type, err)
		}
	}
}
