package fsm

import (
	"errors"
	"strings"
	"testing"
)

func TestReceiptStateQueuedDeliveredRead(t *testing.T) {
	b := newMbox(t)
	b.register("alice", "reviewer")
	m := b.msg("codex", "hi", "alice")
	b.send(m)
	state := func(want string) Receipt {
		t.Helper()
		r := b.receipts(m.ID)["alice"]
		if r.State != want {
			t.Errorf("state = %q, want %q (%+v)", r.State, want, r)
		}
		return r
	}
	r := state(ReceiptDelivered)
	if !r.Reached(ReceiptDelivered) || !r.QueuedAt.IsZero() || !r.TypedAt.IsZero() {
		t.Errorf("stored receipt = %+v: in the inbox, nothing reported", r)
	}

	got := b.ok(OpReceiptState, ReceiptStateCommand{ID: m.ID, Agent: "alice", State: ReceiptQueued}).(*Receipt)
	if got.State != ReceiptQueued || got.QueuedAt.IsZero() {
		t.Errorf("queued answered %+v", got)
	}
	r = state(ReceiptQueued)
	if r.Reached(ReceiptDelivered) {
		t.Errorf("a queued receipt reached delivered: %+v", r)
	}
	queuedAt := r.QueuedAt
	// Queued again: the first time stays.
	b.ok(OpReceiptState, ReceiptStateCommand{ID: m.ID, Agent: "alice", State: ReceiptQueued})
	if r = state(ReceiptQueued); !r.QueuedAt.Equal(queuedAt) {
		t.Errorf("queued again moved queued_at %v → %v", queuedAt, r.QueuedAt)
	}

	b.ok(OpReceiptState, ReceiptStateCommand{ID: m.ID, Agent: "alice", State: ReceiptDelivered})
	r = state(ReceiptDelivered)
	if !r.Reached(ReceiptDelivered) || r.TypedAt.IsZero() || !r.TypedAt.After(queuedAt) || !r.QueuedAt.Equal(queuedAt) {
		t.Errorf("delivered receipt = %+v", r)
	}
	typedAt := r.TypedAt
	// Neither queued nor interrupted moves a delivered receipt back, nor
	// a second delivered its time.
	before := dataDump(t, b.f)
	for _, s := range []string{ReceiptQueued, ReceiptInterrupted, ReceiptDelivered} {
		b.ok(OpReceiptState, ReceiptStateCommand{ID: m.ID, Agent: "alice", State: s})
	}
	if dataDump(t, b.f) != before {
		t.Errorf("reports after delivered changed the state")
	}
	// Read wins over what the watcher reports, and a late report keeps it.
	b.ok(OpMarkRead, MarkReadCommand{Agent: "alice", ID: m.ID})
	b.ok(OpReceiptState, ReceiptStateCommand{ID: m.ID, Agent: "alice", State: ReceiptQueued})
	if r = state(ReceiptRead); !r.TypedAt.Equal(typedAt) || r.ReadAt.IsZero() {
		t.Errorf("read receipt = %+v", r)
	}
}

func TestReceiptStateInterrupted(t *testing.T) {
	b := newMbox(t)
	b.register("alice", "reviewer")
	m := b.msg("codex", "stop", "alice")
	b.send(m)
	b.ok(OpReceiptState, ReceiptStateCommand{ID: m.ID, Agent: "alice", State: ReceiptQueued})
	b.ok(OpReceiptState, ReceiptStateCommand{ID: m.ID, Agent: "alice", State: ReceiptInterrupted})
	r := b.receipts(m.ID)["alice"]
	if r.State != ReceiptInterrupted || r.InterruptedAt.IsZero() || !r.TypedAt.Equal(r.InterruptedAt) || !r.Reached(ReceiptDelivered) {
		t.Errorf("interrupted receipt = %+v", r)
	}
	// A delivered report after it changes nothing.
	b.ok(OpReceiptState, ReceiptStateCommand{ID: m.ID, Agent: "alice", State: ReceiptDelivered})
	if got := b.receipts(m.ID)["alice"]; got.State != ReceiptInterrupted || !got.TypedAt.Equal(r.TypedAt) {
		t.Errorf("after delivered: %+v", got)
	}
	// Answered is the furthest.
	b.send(func() Message { a := b.msg("alice", "done", "codex"); a.InReplyTo = m.ID; return a }())
	if got := b.receipts(m.ID)["alice"]; got.State != ReceiptAnswered || got.InterruptedAt.IsZero() {
		t.Errorf("after the answer: %+v", got)
	}
}

func TestReceiptStateRefusals(t *testing.T) {
	b := newMbox(t)
	b.register("tina", "tester")
	b.register("rex", "reviewer")
	b.register("dev", "developer")
	b.ok(OpSetRules, rulesTesterReviewer)
	m := b.msg("tina", "results", "rex", "dev")
	b.send(m)
	tests := []struct {
		name   string
		cmd    ReceiptStateCommand
		is     error
		field  string
		substr string
	}{
		{"bad id", ReceiptStateCommand{ID: "no spaces", Agent: "dev", State: ReceiptQueued}, ErrInvalid, "id", "must be a message id"},
		{"bad agent", ReceiptStateCommand{ID: m.ID, Agent: "Dev", State: ReceiptQueued}, ErrInvalid, "agent", "must match"},
		{"bad state", ReceiptStateCommand{ID: m.ID, Agent: "dev", State: "read"}, ErrInvalid, "state", `"read": want queued, delivered or interrupted`},
		{"unknown message", ReceiptStateCommand{ID: "msg-nope", Agent: "dev", State: ReceiptQueued}, ErrNotFound, "", "message msg-nope is not in dev's inbox"},
		{"not a recipient", ReceiptStateCommand{ID: m.ID, Agent: "tina", State: ReceiptQueued}, ErrNotFound, "", "is not in tina's inbox"},
		{"blocked", ReceiptStateCommand{ID: m.ID, Agent: "rex", State: ReceiptDelivered}, ErrConflict, "", "was blocked for rex"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := dataDump(t, b.f)
			err := mustError(t, b.apply(OpReceiptState, tt.cmd))
			if !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.substr) {
				t.Errorf("error = %v, want %v containing %q", err, tt.is, tt.substr)
			}
			var fe *FieldError
			if tt.field != "" && (!errors.As(err, &fe) || fe.Field != tt.field) {
				t.Errorf("error = %v, want a FieldError on %s", err, tt.field)
			}
			if dataDump(t, b.f) != before {
				t.Errorf("a refused report changed the state")
			}
		})
	}
}
