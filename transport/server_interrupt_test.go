package transport_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/rules"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

// paneHook is a node's Interrupt hook that records each ESC with how many
// messages the node's state held at that moment.
type paneHook struct {
	fake *transporttest.Service
	err  error // what the hook answers

	mu      sync.Mutex
	pressed []string
	stored  []int
}

func (h *paneHook) press(_ context.Context, agent string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pressed = append(h.pressed, agent)
	h.stored = append(h.stored, h.fake.NumStored())
	return h.err
}

func (h *paneHook) presses() ([]string, []int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.pressed...), append([]int(nil), h.stored...)
}

// interruptNode is one node (n1) holding the agents master, boss
// (orchestrator), worker and claude, with claude's presence on n1 in
// channel dev, and its pane hook, which answers paneErr.
func interruptNode(t *testing.T, paneErr error) (*transporttest.Service, *client.Client, *paneHook) {
	t.Helper()
	fake := transporttest.New(t)
	for id, role := range map[string]string{"master": "master", "boss": "orchestrator", "worker": "worker", "claude": "developer"} {
		if _, err := fake.ApplyCommand(api.OpRegisterAgent, api.RegisterAgentCommand{ID: id, Role: role}); err != nil {
			t.Fatal(err)
		}
	}
	fake.SetPresence(api.Presence{AgentID: "claude", Node: "n1", State: "AWAKE", Channel: "dev"})
	hook := &paneHook{fake: fake, err: paneErr}
	srv := serve(t, fake, transport.ServerOptions{Interrupt: hook.press})
	return fake, client.NewClient(srv.URL, nil), hook
}

// An interrupt is one call: the alert is committed first, then ESC; a
// retry with the same id stores nothing more and presses again.
func TestInterruptCommitsTheAlertThenPressesESC(t *testing.T) {
	fake, c, hook := interruptNode(t, nil)
	ctx := context.Background()
	before := fake.NumStored()
	req := api.InterruptRequest{From: "master", Reason: "stop:\nthe spec changed", ID: "msg-20261121-103000-master-00c0ffee"}
	res, err := c.InterruptAgent(ctx, "claude", req)
	if err != nil || res.Agent != "claude" || res.Node != "n1" || res.ID != req.ID || res.Seq == 0 || !res.Escape || res.NoEscape != "" {
		t.Fatalf("interrupt = %+v, %v", res, err)
	}
	m := fake.Stored(req.ID)
	if m == nil || m.From != "master" || len(m.Recipients) != 1 || m.Recipients[0] != "claude" || m.Channel != "dev" ||
		m.Type != "alert" || m.Priority != api.PriorityUrgent || m.Content.Text != "[INTERRUPT] stop:\nthe spec changed" ||
		m.Title != "[INTERRUPT] stop: the spec changed" || m.Seq != res.Seq {
		t.Fatalf("stored alert %+v", m)
	}
	pressed, stored := hook.presses()
	if len(pressed) != 1 || pressed[0] != "claude" || stored[0] != before+1 {
		t.Fatalf("ESC %v with %v messages stored, want one ESC for claude after the alert (%d)", pressed, stored, before+1)
	}

	again, err := c.InterruptAgent(ctx, "claude", req)
	if err != nil || again.Seq != res.Seq || again.ID != res.ID || !again.Escape {
		t.Fatalf("retried interrupt = %+v, %v; want seq %d again", again, err, res.Seq)
	}
	if n := fake.NumStored(); n != before+1 {
		t.Errorf("%d messages after the retry, want %d", n, before+1)
	}
	if pressed, _ := hook.presses(); len(pressed) != 2 {
		t.Errorf("the retry pressed ESC %d times in all, want 2", len(pressed))
	}

	// A caller with its own pane gets the alert only; an explicit channel
	// wins over presence.
	local, err := c.InterruptAgent(ctx, "claude", api.InterruptRequest{From: "boss", Reason: "wait", Channel: "ops", LocalPane: true})
	if err != nil || local.Escape || !strings.Contains(local.NoEscape, "own pane") || fake.Stored(local.ID).Channel != "ops" {
		t.Errorf("local-pane interrupt = %+v, %v", local, err)
	}
	if pressed, _ := hook.presses(); len(pressed) != 2 {
		t.Errorf("a local-pane interrupt pressed ESC on the node")
	}
}

// A sender who may not interrupt gets 403 in the rule's words; nothing is
// stored, nothing pressed, and the audit has the BLOCKED line. A document
// that forbids only one pair gives nobody ESC power; its interrupt list
// decides when it has one.
func TestInterruptRefusedStoresNothing(t *testing.T) {
	fake, c, hook := interruptNode(t, nil)
	ctx := context.Background()
	refused := func(from, want string) {
		t.Helper()
		before, auditBefore := fake.NumStored(), auditLen(t, fake)
		_, err := c.InterruptAgent(ctx, "claude", api.InterruptRequest{From: from, Reason: "stop"})
		var apiErr *api.APIError
		if !errors.As(err, &apiErr) || apiErr.Status != http.StatusForbidden || apiErr.Code != api.CodeForbidden || apiErr.Message != want {
			t.Fatalf("interrupt from %s = %v, want 403 %q", from, err, want)
		}
		if n := fake.NumStored(); n != before {
			t.Errorf("a refused interrupt from %s stored %d messages", from, n-before)
		}
		if pressed, _ := hook.presses(); len(pressed) != 0 {
			t.Errorf("a refused interrupt from %s pressed ESC", from)
		}
		ev, err := fake.FSM().Audit(0, api.MaxPageLimit)
		if err != nil || len(ev.Events) != auditBefore+1 {
			t.Fatalf("audit after the refusal: %d events (%v), want %d", len(ev.Events), err, auditBefore+1)
		}
		if line, wantLine := ev.Events[auditBefore].Line(), "["+from+"→claude] BLOCKED: "+want; !strings.HasSuffix(line, wantLine) {
			t.Errorf("audit line %q, want it to end %q", line, wantLine)
		}
	}
	refused("worker", rules.DefaultInterruptReason)
	refused("stranger", rules.DefaultInterruptReason)

	setRules := func(d *rules.Document) {
		t.Helper()
		if _, err := fake.ApplyCommand(api.OpSetRules, api.SetRulesCommand{Rules: d}); err != nil {
			t.Fatal(err)
		}
	}
	setRules(&rules.Document{Forbidden: []rules.ForbiddenRule{{From: "role:tester", To: "role:reviewer", Reason: "no"}}})
	refused("worker", rules.DefaultInterruptReason)

	setRules(&rules.Document{Interrupt: []string{"role:worker"}})
	refused("master", "interrupt: only role:worker may interrupt")
	if res, err := c.InterruptAgent(ctx, "claude", api.InterruptRequest{From: "worker", Reason: "stop"}); err != nil || !res.Escape {
		t.Errorf("interrupt by the document's list = %+v, %v", res, err)
	}
}

func auditLen(t *testing.T, fake *transporttest.Service) int {
	t.Helper()
	ev, err := fake.FSM().Audit(0, api.MaxPageLimit)
	if err != nil {
		t.Fatal(err)
	}
	return len(ev.Events)
}

// With --auth a moderator's (or admin's) token may always interrupt; an
// agent's token by its agent's role.
func TestInterruptModeratorMay(t *testing.T) {
	e := newAuthEnv(t, &transport.AuthConfig{AdminToken: adminSecret})
	ctx := context.Background()
	req := func(from string) api.InterruptRequest {
		return api.InterruptRequest{From: from, Reason: "stop", Channel: "dev"}
	}
	_, err := e.client(aliceSecret).InterruptAgent(ctx, "carol", req("alice"))
	if !errors.Is(err, api.ErrForbidden) || !strings.Contains(err.Error(), rules.DefaultInterruptReason) {
		t.Fatalf("alice (engineer) interrupting carol = %v, want 403 %q", err, rules.DefaultInterruptReason)
	}
	for _, who := range []struct{ secret, from string }{{rexSecret, "rex"}, {opsSecret, "ops"}} {
		res, err := e.client(who.secret).InterruptAgent(ctx, "carol", req(who.from))
		if err != nil || res.Seq == 0 || res.Escape || !strings.Contains(res.NoEscape, "no presence") {
			t.Errorf("%s's token interrupting carol = %+v, %v; want the alert stored and no pane", who.from, res, err)
		}
	}
}

// The marker is the server's: POST /v1/messages has no field for it.
func TestInterruptMarkerNotSettableBySend(t *testing.T) {
	fake, c, _ := interruptNode(t, nil)
	before := fake.NumStored()
	r := do(t, "POST", c.Addr()+"/v1/messages",
		`{"from":"worker","channel":"dev","to":["claude"],"content":{"text":"[INTERRUPT] x"},"interrupt":{"moderator":true}}`, nil)
	if msg := wantError(t, r, http.StatusBadRequest, api.CodeUnknownField); !strings.Contains(msg, "interrupt") {
		t.Errorf("message %q does not name the field", msg)
	}
	if fake.NumStored() != before {
		t.Errorf("the refused send stored a message")
	}
}

func TestInterruptBadInput(t *testing.T) {
	fake, c, hook := interruptNode(t, nil)
	fake.SetPresence(api.Presence{AgentID: "quiet", Node: "n1", State: "AWAKE"})
	before := fake.NumStored()
	for _, tt := range []struct {
		agent string
		req   api.InterruptRequest
		want  string
	}{
		{"claude", api.InterruptRequest{Reason: "x"}, "from: required"},
		{"claude", api.InterruptRequest{From: "master", Reason: "  "}, "reason: required"},
		{"claude", api.InterruptRequest{From: "claude", Reason: "x"}, "cannot interrupt itself"},
		{"claude", api.InterruptRequest{From: "master", Reason: "x", Channel: "Dev"}, `channel: must match`},
		{"claude", api.InterruptRequest{From: "master", Reason: "x", ID: "bad id"}, "id: must match"},
		{"quiet", api.InterruptRequest{From: "master", Reason: "x"}, "channel: required: the presence of quiet names no channel"},
		{"nobody", api.InterruptRequest{From: "master", Reason: "x"}, "channel: required: the presence of nobody"},
	} {
		_, err := c.InterruptAgent(context.Background(), tt.agent, tt.req)
		if !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("interrupt %s %+v = %v, want invalid saying %q", tt.agent, tt.req, err, tt.want)
		}
	}
	if fake.NumStored() != before {
		t.Errorf("refused requests stored %d messages", fake.NumStored()-before)
	}
	if pressed, _ := hook.presses(); len(pressed) != 0 {
		t.Errorf("refused requests pressed ESC %v", pressed)
	}
}

// A pane that fails is an error naming the stored alert; a retry with the
// same id is safe.
func TestInterruptPaneFailureNamesTheAlert(t *testing.T) {
	_, c, _ := interruptNode(t, errors.New("tmux: can't find pane agents:0.1"))
	_, err := c.InterruptAgent(context.Background(), "claude", api.InterruptRequest{From: "master", Reason: "x", ID: "msg-20261121-103000-master-0000beef"})
	if err == nil || !strings.Contains(err.Error(), "alert msg-20261121-103000-master-0000beef stored (seq ") ||
		!strings.Contains(err.Error(), "but no ESC") || !strings.Contains(err.Error(), "can't find pane agents:0.1") {
		t.Fatalf("interrupt with a failing pane = %v", err)
	}
}

// Node A takes the interrupt and commits the alert; presence places the
// agent on n2, so A relays the ESC to n2, whose hook presses it.
func TestInterruptRoutesToHostingNode(t *testing.T) {
	hostFake := transporttest.New(t)
	hostHook := &paneHook{fake: hostFake}
	host := serve(t, hostFake, transport.ServerOptions{Interrupt: hostHook.press})
	hostAddr := strings.TrimPrefix(host.URL, "http://")
	hostFake.EditMembers(func(m *api.MembersResponse) { m.NodeID = "n2" })
	hostFake.SetPresence(api.Presence{AgentID: "claude", Node: "n2", State: "AWAKE"})

	entryFake := transporttest.New(t)
	entryFake.EditMembers(func(m *api.MembersResponse) {
		m.Members[1] = api.Member{NodeID: "n2", Status: "alive", APIAddr: hostAddr}
	})
	for _, p := range []api.Presence{
		{AgentID: "claude", Node: "n2", State: "AWAKE", Channel: "dev"},
		{AgentID: "ghost", Node: "n9", State: "AWAKE", Channel: "dev"},
		{AgentID: "local", Node: "n1", State: "AWAKE", Channel: "dev"},
	} {
		entryFake.SetPresence(p)
	}
	if _, err := entryFake.ApplyCommand(api.OpRegisterAgent, api.RegisterAgentCommand{ID: "master", Role: "master"}); err != nil {
		t.Fatal(err)
	}
	entryFake.Register(t, "claude", "ghost", "local") // their watchers registered them
	var peers []string
	entry := serve(t, entryFake, transport.ServerOptions{PeerClient: func(id string) (*client.Client, error) {
		peers = append(peers, id)
		if id != "n2" {
			return nil, fmt.Errorf("node %s is not in the Raft configuration", id)
		}
		return client.NewClient(hostAddr, nil), nil
	}})
	c := client.NewClient(entry.URL, nil)
	ctx := context.Background()

	res, err := c.InterruptAgent(ctx, "claude", api.InterruptRequest{From: "master", Reason: "stop"})
	if err != nil || res.Node != "n2" || res.Agent != "claude" || !res.Escape || entryFake.Stored(res.ID) == nil {
		t.Fatalf("interrupt = %+v, %v", res, err)
	}
	if pressed, _ := hostHook.presses(); len(pressed) != 1 || pressed[0] != "claude" {
		t.Fatalf("ESC pressed for %v on the host, want [claude]", pressed)
	}
	if calls := hostFake.CallsTo("Apply"); len(calls) != 0 {
		t.Errorf("the host proposed %+v: a relayed interrupt only presses ESC", calls)
	}
	if n := hostFake.NumStored(); n != 0 {
		t.Errorf("the host stored %d messages", n)
	}
	if len(peers) != 1 || peers[0] != "n2" {
		t.Fatalf("relayed through PeerClient(%q), want one call for n2", peers)
	}

	// No pane to press: the alert is the interrupt, and the answer says why.
	for _, tt := range []struct{ agent, why string }{
		{"ghost", "not an alive member"},
		{"local", "runs no watcher with a terminal pane"},
	} {
		res, err := c.InterruptAgent(ctx, tt.agent, api.InterruptRequest{From: "master", Reason: "x"})
		if err != nil || res.Escape || !strings.Contains(res.NoEscape, tt.why) || entryFake.Stored(res.ID) == nil {
			t.Errorf("interrupt %s = %+v, %v; want the alert stored and no ESC because %q", tt.agent, res, err, tt.why)
		}
	}
}

// The interrupt's reason is stored text like any message's: a secret in it
// is refused (422, secret_guard's default) before anything is stored or
// pressed.
func TestInterruptReasonIsGuardedForSecrets(t *testing.T) {
	fake, c, hook := interruptNode(t, nil)
	before := fake.NumStored()
	_, err := c.InterruptAgent(context.Background(), "claude", api.InterruptRequest{From: "master", Reason: "use " + fakeGitHubPAT})
	var apiErr *api.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusUnprocessableEntity || strings.Contains(apiErr.Message, fakeGitHubPAT) {
		t.Fatalf("interrupt with a secret = %v, want 422 not echoing it", err)
	}
	if n := fake.NumStored(); n != before {
		t.Errorf("%d messages stored, want %d", n, before)
	}
	if pressed, _ := hook.presses(); len(pressed) != 0 {
		t.Errorf("ESC pressed %v for a refused interrupt", pressed)
	}
}
