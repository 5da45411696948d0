package transporttest_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

// send is a normalized send command from alice to bob on general.
func send(id, text string) api.SendCommand {
	m := api.Message{ID: id, From: "alice", To: api.Recipients{"bob"}, Channel: "general", Content: api.Content{Text: text}}
	m.Normalize(time.Now())
	return api.SendCommand{Message: m}
}

// result returns the function that decodes a send's answer, failing t on
// an error.
func result(t *testing.T) func(json.RawMessage, error) fsm.SendResult {
	return func(raw json.RawMessage, err error) fsm.SendResult {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		var r fsm.SendResult
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		return r
	}
}

func TestApplySendsThroughTheStateMachine(t *testing.T) {
	s := transporttest.New(t)
	ctx := context.Background()
	first := result(t)(s.Apply(ctx, api.OpSend, send("m1", "hi")))
	if first.Seq != 1 || first.ID != "m1" {
		t.Fatalf("first send = %+v", first)
	}
	// A retry is a new entry that answers the stored seq.
	if again := result(t)(s.Apply(ctx, api.OpSend, send("m1", "hi"))); again.Seq != 1 || !again.Timestamp.Equal(first.Timestamp) {
		t.Errorf("resend = %+v; want seq 1", again)
	}
	if _, err := s.Apply(ctx, api.OpSend, send("m1", "other")); !errors.Is(err, api.ErrConflict) {
		t.Errorf("resend with other content: %v, want conflict", err)
	}
	if second := result(t)(s.Apply(ctx, api.OpSend, send("m2", "two"))); second.Seq != 4 {
		t.Errorf("second message at seq %d, want 4 (the log's index)", second.Seq)
	}
	if n := s.NumStored(); n != 2 {
		t.Errorf("%d stored, want 2", n)
	}
	if m := s.StoredSeq(4); m == nil || m.ID != "m2" {
		t.Errorf("StoredSeq(4) = %+v", m)
	}
	if m := s.Stored("m1"); m == nil || m.Seq != 1 || m.Content.Text != "hi" {
		t.Errorf("Stored(m1) = %+v", m)
	}
	if s.Stored("m3") != nil || s.StoredSeq(2) != nil || s.StoredSeq(0) != nil {
		t.Error("a message that was never stored is found")
	}
	// What the server reads is the same state.
	if m, err := s.State().Message("m2"); err != nil || m.Seq != 4 {
		t.Errorf("State().Message = %+v, %v", m, err)
	}
	if a := s.Applied(); len(a) != 4 || a[0].Op != api.OpSend {
		t.Errorf("Applied = %+v, want the 4 sends", a)
	}
}

func TestFailAndCalls(t *testing.T) {
	s := transporttest.New(t)
	boom := errors.New("boom")
	s.Fail("Apply", boom)
	if _, err := s.Apply(transport.WithForwarded(context.Background()), api.OpSend, send("m1", "hi")); !errors.Is(err, boom) {
		t.Fatalf("apply: %v, want the injected error", err)
	}
	if s.NumStored() != 0 || len(s.Applied()) != 0 {
		t.Error("a failed apply stored its message")
	}
	s.Fail("Apply", nil)
	if _, err := s.Apply(context.Background(), api.OpSend, send("m1", "hi")); err != nil {
		t.Fatalf("apply after Fail(nil): %v", err)
	}
	calls := s.CallsTo("Apply")
	if len(calls) != 2 || !calls[0].Forwarded || calls[1].Forwarded || calls[0].Arg != string(api.OpSend) {
		t.Errorf("calls %+v, want a forwarded then a direct send", calls)
	}
	if err := s.Linearize(context.Background(), api.Strong); err != nil {
		t.Fatal(err)
	}
	if c := s.CallsTo("Linearize"); len(c) != 1 || c[0].Cons != api.Strong {
		t.Errorf("Linearize calls %+v", c)
	}
	if s.Count() != 3 {
		t.Errorf("Count = %d, want 3", s.Count())
	}
	// Setup is not a call.
	if _, err := s.ApplyCommand(api.OpRegisterAgent, api.RegisterAgentCommand{ID: "bob", Role: "dev"}); err != nil || s.Count() != 3 {
		t.Errorf("ApplyCommand: %v, Count %d", err, s.Count())
	}
}

func TestOnApply(t *testing.T) {
	s := transporttest.New(t)
	ctx := context.Background()
	s.OnApply(func(op api.Op, body json.RawMessage) (any, error) {
		if string(body) != `{"agent":"alice"}` {
			return nil, errors.New("body " + string(body))
		}
		return map[string]string{"seen": string(op)}, nil
	})
	raw, err := s.Apply(ctx, api.OpSetCursor, map[string]any{"agent": "alice"})
	if err != nil || string(raw) != `{"seen":"set_cursor"}` {
		t.Errorf("Apply = %s, %v; want OnApply's answer", raw, err)
	}
	if a := s.Applied(); len(a) != 1 || a[0].Op != api.OpSetCursor || string(a[0].Body) != `{"agent":"alice"}` {
		t.Errorf("Applied = %+v", a)
	}
	if s.FSM().AppliedIndex() != 0 {
		t.Error("OnApply's command reached the state machine")
	}
}

func TestApplyEntry(t *testing.T) {
	s := transporttest.New(t, transporttest.FirstIndex(7))
	entry, err := fsm.Encode(api.OpSend, time.Now().UnixNano(), send("m1", "hi"))
	if err != nil {
		t.Fatal(err)
	}
	if r := result(t)(s.ApplyEntry(context.Background(), entry)); r.Seq != 7 {
		t.Errorf("entry applied at %d, want 7", r.Seq)
	}
	if _, err := s.ApplyEntry(context.Background(), []byte{2}); err == nil {
		t.Error("a malformed entry was applied")
	}
	if c := s.CallsTo("ApplyEntry"); len(c) != 2 || len(s.Applied()) != 0 {
		t.Errorf("calls %+v, applied %+v: want two ApplyEntry calls, no Apply", c, s.Applied())
	}
}

func TestIndexesAndClock(t *testing.T) {
	var stamped []uint64
	var s *transporttest.Service
	t.Run("open", func(t *testing.T) {
		s = transporttest.New(t, transporttest.FirstIndex(101),
			transporttest.Clock(func(i uint64) time.Time {
				stamped = append(stamped, i)
				return transporttest.Epoch.Add(time.Duration(i) * time.Minute)
			}))
		ctx := context.Background()
		if _, err := s.ApplyCommand(api.OpRegisterAgent, api.RegisterAgentCommand{ID: "bob", Role: "dev"}); err != nil {
			t.Fatal(err)
		}
		res := result(t)(s.Apply(ctx, api.OpSend, send("m1", "hi")))
		if res.Seq != 102 || !res.Timestamp.Equal(transporttest.Epoch.Add(102*time.Minute)) {
			t.Fatalf("send = %+v; want seq 102 stamped by the clock", res)
		}
		if _, err := s.Apply(ctx, api.OpRegisterAgent, api.RegisterAgentCommand{ID: "Bad Name"}); !errors.Is(err, api.ErrInvalid) {
			t.Errorf("a refused command: %v, want invalid", err)
		}
	})
	if len(stamped) < 2 || stamped[0] != 101 || stamped[1] != 102 {
		t.Errorf("clock saw indexes %v, want 101, 102...", stamped)
	}
	// The test that opened it is over: writes refused, not applied to a
	// closed file.
	if _, err := s.Apply(context.Background(), api.OpRegisterAgent, api.RegisterAgentCommand{ID: "carol", Role: "dev"}); err == nil ||
		!strings.Contains(err.Error(), "test is over") {
		t.Errorf("Apply after the test: %v, want it refused", err)
	}
}

func TestMembership(t *testing.T) {
	s := transporttest.New(t)
	ctx := context.Background()
	if st, err := s.Status(ctx); err != nil || st.NodeID != "n1" || len(st.Voters) != 2 {
		t.Errorf("status = %+v, %v", st, err)
	}
	join := api.JoinRequest{NodeID: "n4", RaftAddr: "a:1", APIAddr: "a:2"}
	if err := s.Join(ctx, join); err != nil || len(s.Joined()) != 1 || s.Joined()[0] != join {
		t.Errorf("join: %v, joined %+v", err, s.Joined())
	}
	if err := s.Remove(ctx, "n4"); err != nil || len(s.Removed()) != 1 {
		t.Errorf("remove: %v, removed %v", err, s.Removed())
	}
	if tr, err := s.TransferLeadership(ctx, ""); err != nil || tr.LeaderID != "n2" || len(s.Transfers()) != 1 {
		t.Errorf("transfer = %+v, %v", tr, err)
	}
	if idx, err := s.ReadIndex(ctx); err != nil || idx != transporttest.DefaultStatus().CommitIndex {
		t.Errorf("read index = %d, %v", idx, err)
	}
}

func TestPresence(t *testing.T) {
	s := transporttest.New(t)
	ctx := context.Background()
	p, err := s.PutPresence(ctx, "codex", api.PresenceUpdate{State: "AWAKE", Substate: "IDLE"})
	if err != nil || p.Version != 1 || p.Node != "n1" || !p.Timestamp.Equal(transporttest.Epoch.Add(time.Second)) {
		t.Errorf("put = %+v, %v", p, err)
	}
	s.SetPresence(api.Presence{AgentID: "alice", State: "OFFLINE"})
	list, err := s.Presence(ctx)
	if err != nil || len(list) != 2 || list[0].AgentID != "alice" || list[1].AgentID != "codex" {
		t.Errorf("list = %+v, %v", list, err)
	}
	if _, err := s.AgentPresence(ctx, "nobody"); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("unknown agent: %v, want not found", err)
	}
	if u := s.PresenceUpdates(); len(u) != 1 || u[0].Substate != "IDLE" {
		t.Errorf("updates %+v", u)
	}
	s.EditMembers(func(m *api.MembersResponse) { m.Encrypted = true })
	if m, err := s.Members(ctx); err != nil || !m.Encrypted || len(m.Members) != len(transporttest.DefaultMembers().Members) {
		t.Errorf("members = %+v, %v", m, err)
	}
}
