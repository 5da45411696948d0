package transporttest_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

// msg is a normalized message from alice to bob on general.
func msg(id, text string) *fsm.Message {
	m := &fsm.Message{ID: id, From: "alice", To: fsm.Recipients{"bob"}, Channel: "general", Content: fsm.Content{Text: text}}
	m.Normalize(time.Now())
	return m
}

func TestSendIsIdempotentByID(t *testing.T) {
	s := transporttest.New()
	ctx := context.Background()
	first, err := s.Send(ctx, msg("m1", "hi"))
	if err != nil || first.Seq != 1 || first.Duplicate || !first.Timestamp.Equal(transporttest.Epoch.Add(time.Second)) {
		t.Fatalf("first send = %+v, %v", first, err)
	}
	again, err := s.Send(ctx, msg("m1", "hi"))
	if err != nil || again.Seq != 1 || !again.Duplicate || !again.Timestamp.Equal(first.Timestamp) {
		t.Errorf("resend = %+v, %v; want seq 1, duplicate", again, err)
	}
	if _, err := s.Send(ctx, msg("m1", "other")); !errors.Is(err, fsm.ErrConflict) {
		t.Errorf("resend with other content: %v, want conflict", err)
	}
	given := msg("m2", "stamped")
	given.Timestamp = time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	if res, err := s.Send(ctx, given); err != nil || res.Seq != 2 || !res.Timestamp.Equal(given.Timestamp) {
		t.Errorf("send with a timestamp = %+v, %v; want seq 2 keeping it", res, err)
	}
	if n := s.NumStored(); n != 2 {
		t.Errorf("%d stored, want 2", n)
	}
	if m := s.StoredSeq(2); m == nil || m.ID != "m2" {
		t.Errorf("StoredSeq(2) = %+v", m)
	}
	if s.Stored("m3") != nil || s.StoredSeq(3) != nil || s.StoredSeq(0) != nil {
		t.Error("a message that was never sent is stored")
	}
	if _, err := s.Message(ctx, "m3", transport.Local); !errors.Is(err, fsm.ErrNotFound) {
		t.Errorf("unknown message: %v, want not found", err)
	}
}

func TestFailAndCalls(t *testing.T) {
	s := transporttest.New()
	boom := errors.New("boom")
	s.Fail("Send", boom)
	if _, err := s.Send(transport.WithForwarded(context.Background()), msg("m1", "hi")); !errors.Is(err, boom) {
		t.Fatalf("send: %v, want the injected error", err)
	}
	if s.NumStored() != 0 {
		t.Error("a failed send stored its message")
	}
	s.Fail("Send", nil)
	if _, err := s.Send(context.Background(), msg("m1", "hi")); err != nil {
		t.Fatalf("send after Fail(nil): %v", err)
	}
	calls := s.CallsTo("Send")
	if len(calls) != 2 || !calls[0].Forwarded || calls[1].Forwarded || calls[0].Arg != "m1" {
		t.Errorf("calls %+v, want a forwarded then a direct send of m1", calls)
	}
	if s.Count() != 2 {
		t.Errorf("Count = %d, want 2", s.Count())
	}
}

func TestApplyWithoutState(t *testing.T) {
	s := transporttest.New()
	ctx := context.Background()
	raw, err := s.Apply(ctx, fsm.OpSetCursor, map[string]any{"agent": "alice"})
	if err != nil || string(raw) != `{"op":"set_cursor"}` {
		t.Errorf("Apply = %s, %v; want the op echoed", raw, err)
	}
	if a := s.Applied(); len(a) != 1 || a[0].Op != fsm.OpSetCursor || string(a[0].Body) != `{"agent":"alice"}` {
		t.Errorf("Applied = %+v", a)
	}
	s.OnApply(func(op fsm.Op, body json.RawMessage) (any, error) { return nil, errors.New("refused " + string(op)) })
	if _, err := s.Apply(ctx, fsm.OpSetCursor, struct{}{}); err == nil || err.Error() != "refused set_cursor" {
		t.Errorf("Apply with OnApply: %v", err)
	}
	if _, err := s.ApplyCommand(fsm.OpSetCursor, struct{}{}); err == nil || !strings.Contains(err.Error(), "call WithState") {
		t.Errorf("ApplyCommand without state: %v", err)
	}
	if s.State() != nil {
		t.Error("State without WithState is not nil")
	}
	m := transporttest.New(transporttest.MessagesOnState())
	if _, err := m.Send(ctx, msg("m1", "hi")); err == nil || !strings.Contains(err.Error(), "WithState") {
		t.Errorf("MessagesOnState send without state: %v", err)
	}
	if _, err := m.Channels(ctx, transport.Local); err == nil || !strings.Contains(err.Error(), "WithState") {
		t.Errorf("MessagesOnState channels without state: %v", err)
	}
}

func TestWithState(t *testing.T) {
	var stamped []uint64
	var s *transporttest.Service
	t.Run("open", func(t *testing.T) {
		s = transporttest.New(transporttest.FirstIndex(101), transporttest.MessagesOnState(),
			transporttest.Clock(func(i uint64) time.Time {
				stamped = append(stamped, i)
				return transporttest.Epoch.Add(time.Duration(i) * time.Minute)
			})).WithState(t)
		ctx := context.Background()
		if _, err := s.ApplyCommand(fsm.OpRegisterAgent, fsm.RegisterAgentCommand{ID: "bob", Role: "dev"}); err != nil {
			t.Fatal(err)
		}
		res, err := s.Send(ctx, msg("m1", "hi"))
		if err != nil || res.Seq != 102 || !res.Timestamp.Equal(transporttest.Epoch.Add(102*time.Minute)) {
			t.Fatalf("send = %+v, %v; want seq 102 stamped by the clock", res, err)
		}
		if m, err := s.Message(ctx, "m1", transport.Strong); err != nil || m.Seq != 102 {
			t.Errorf("message = %+v, %v", m, err)
		}
		if p, err := s.ChannelPage(ctx, "general", 0, 10, transport.Local); err != nil || len(p.Messages) != 1 {
			t.Errorf("page = %+v, %v", p, err)
		}
		if _, err := s.Apply(ctx, fsm.OpRegisterAgent, fsm.RegisterAgentCommand{ID: "Bad Name"}); !errors.Is(err, fsm.ErrInvalid) {
			t.Errorf("a refused command: %v, want invalid", err)
		}
		if s.State() == nil || s.NumStored() != 0 {
			t.Errorf("state %v, %d in the in-memory store", s.State(), s.NumStored())
		}
	})
	if len(stamped) < 2 || stamped[0] != 101 || stamped[1] != 102 {
		t.Errorf("clock saw indexes %v, want 101, 102...", stamped)
	}
	// The test that opened it is over: detached, writes refused.
	if s.State() != nil {
		t.Error("State after the test is not nil")
	}
	if _, err := s.Apply(context.Background(), fsm.OpRegisterAgent, fsm.RegisterAgentCommand{ID: "carol", Role: "dev"}); err == nil ||
		!strings.Contains(err.Error(), "test is over") {
		t.Errorf("Apply after the test: %v, want it refused", err)
	}
}

func TestPresence(t *testing.T) {
	s := transporttest.New()
	ctx := context.Background()
	p, err := s.PutPresence(ctx, "codex", transport.PresenceUpdate{State: "AWAKE", Substate: "IDLE"})
	if err != nil || p.Version != 1 || p.Node != "n1" || !p.Timestamp.Equal(transporttest.Epoch.Add(time.Second)) {
		t.Errorf("put = %+v, %v", p, err)
	}
	s.SetPresence(transport.Presence{AgentID: "alice", State: "OFFLINE"})
	list, err := s.Presence(ctx)
	if err != nil || len(list) != 2 || list[0].AgentID != "alice" || list[1].AgentID != "codex" {
		t.Errorf("list = %+v, %v", list, err)
	}
	if _, err := s.AgentPresence(ctx, "nobody"); !errors.Is(err, fsm.ErrNotFound) {
		t.Errorf("unknown agent: %v, want not found", err)
	}
	if u := s.PresenceUpdates(); len(u) != 1 || u[0].Substate != "IDLE" {
		t.Errorf("updates %+v", u)
	}
	s.EditMembers(func(m *transport.MembersResponse) { m.Encrypted = true })
	if m, err := s.Members(ctx); err != nil || !m.Encrypted || len(m.Members) != len(transporttest.DefaultMembers().Members) {
		t.Errorf("members = %+v, %v", m, err)
	}
}
