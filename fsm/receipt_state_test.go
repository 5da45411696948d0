package fsm

import (
	"errors"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
)

func TestReceiptStateQueuedDeliveredRead(t *testing.T) {
	b := newMbox(t)
	b.register("alice", "reviewer")
	m := b.msg("codex", "hi", "alice")
	b.send(m)
	state := func(want string) api.Receipt {
		t.Helper()
		r := b.receipts(m.ID)["alice"]
		if r.State != want {
			t.Errorf("state = %q, want %q (%+v)", r.State, want, r)
		}
		return r
	}
	r := state(api.ReceiptDelivered)
	if !r.Reached(api.ReceiptDelivered) || !r.QueuedAt.IsZero() || !r.TypedAt.IsZero() {
		t.Errorf("stored receipt = %+v: in the inbox, nothing reported", r)
	}

	got := b.ok(api.OpReceiptState, api.ReceiptStateCommand{ID: m.ID, Agent: "alice", State: api.ReceiptQueued}).(*api.Receipt)
	if got.State != api.ReceiptQueued || got.QueuedAt.IsZero() {
		t.Errorf("queued answered %+v", got)
	}
	r = state(api.ReceiptQueued)
	if r.Reached(api.ReceiptDelivered) {
		t.Errorf("a queued receipt reached delivered: %+v", r)
	}
	queuedAt := r.QueuedAt
	// Queued again: the first time stays.
	b.ok(api.OpReceiptState, api.ReceiptStateCommand{ID: m.ID, Agent: "alice", State: api.ReceiptQueued})
	if r = state(api.ReceiptQueued); !r.QueuedAt.Equal(queuedAt) {
		t.Errorf("queued again moved queued_at %v → %v", queuedAt, r.QueuedAt)
	}

	b.ok(api.OpReceiptState, api.ReceiptStateCommand{ID: m.ID, Agent: "alice", State: api.ReceiptDelivered})
	r = state(api.ReceiptDelivered)
	if !r.Reached(api.ReceiptDelivered) || r.TypedAt.IsZero() || !r.TypedAt.After(queuedAt) || !r.QueuedAt.Equal(queuedAt) {
		t.Errorf("delivered receipt = %+v", r)
	}
	typedAt := r.TypedAt
	// Neither queued nor interrupted moves a delivered receipt back, nor
	// a second delivered its time.
	before := dataDump(t, b.f)
	for _, s := range []string{api.ReceiptQueued, api.ReceiptInterrupted, api.ReceiptDelivered} {
		b.ok(api.OpReceiptState, api.ReceiptStateCommand{ID: m.ID, Agent: "alice", State: s})
	}
	if dataDump(t, b.f) != before {
		t.Errorf("reports after delivered changed the state")
	}
	// Read wins over what the watcher reports, and a late report keeps it.
	b.ok(api.OpMarkRead, api.MarkReadCommand{Agent: "alice", ID: m.ID})
	b.ok(api.OpReceiptState, api.ReceiptStateCommand{ID: m.ID, Agent: "alice", State: api.ReceiptQueued})
	if r = state(api.ReceiptRead); !r.TypedAt.Equal(typedAt) || r.ReadAt.IsZero() {
		t.Errorf("read receipt = %+v", r)
	}
}

func TestReceiptStateInterrupted(t *testing.T) {
	b := newMbox(t)
	b.register("alice", "reviewer")
	m := b.msg("codex", "stop", "alice")
	b.send(m)
	b.ok(api.OpReceiptState, api.ReceiptStateCommand{ID: m.ID, Agent: "alice", State: api.ReceiptQueued})
	b.ok(api.OpReceiptState, api.ReceiptStateCommand{ID: m.ID, Agent: "alice", State: api.ReceiptInterrupted})
	r := b.receipts(m.ID)["alice"]
	if r.State != api.ReceiptInterrupted || r.InterruptedAt.IsZero() || !r.TypedAt.Equal(r.InterruptedAt) || !r.Reached(api.ReceiptDelivered) {
		t.Errorf("interrupted receipt = %+v", r)
	}
	// A delivered report after it changes nothing.
	b.ok(api.OpReceiptState, api.ReceiptStateCommand{ID: m.ID, Agent: "alice", State: api.ReceiptDelivered})
	if got := b.receipts(m.ID)["alice"]; got.State != api.ReceiptInterrupted || !got.TypedAt.Equal(r.TypedAt) {
		t.Errorf("after delivered: %+v", got)
	}
	// Answered is the furthest.
	b.send(func() api.Message { a := b.msg("alice", "done", "codex"); a.InReplyTo = m.ID; return a }())
	if got := b.receipts(m.ID)["alice"]; got.State != api.ReceiptAnswered || got.InterruptedAt.IsZero() {
		t.Errorf("after the answer: %+v", got)
	}
}

func TestReceiptStateRefusals(t *testing.T) {
	b := newMbox(t)
	b.register("tina", "tester")
	b.register("rex", "reviewer")
	b.register("dev", "developer")
	b.ok(api.OpSetRules, rulesTesterReviewer)
	m := b.msg("tina", "results", "rex", "dev")
	b.send(m)
	tests := []struct {
		name   string
		cmd    api.ReceiptStateCommand
		is     error
		field  string
		substr string
	}{
		{"bad id", api.ReceiptStateCommand{ID: "no spaces", Agent: "dev", State: api.ReceiptQueued}, api.ErrInvalid, "id", "must be a message id"},
		{"bad agent", api.ReceiptStateCommand{ID: m.ID, Agent: "Dev", State: api.ReceiptQueued}, api.ErrInvalid, "agent", "must match"},
		{"bad state", api.ReceiptStateCommand{ID: m.ID, Agent: "dev", State: "read"}, api.ErrInvalid, "state", `"read": want queued, delivered or interrupted`},
		{"unknown message", api.ReceiptStateCommand{ID: "msg-nope", Agent: "dev", State: api.ReceiptQueued}, api.ErrNotFound, "", "message msg-nope is not in dev's inbox"},
		{"not a recipient", api.ReceiptStateCommand{ID: m.ID, Agent: "tina", State: api.ReceiptQueued}, api.ErrNotFound, "", "is not in tina's inbox"},
		{"blocked", api.ReceiptStateCommand{ID: m.ID, Agent: "rex", State: api.ReceiptDelivered}, api.ErrConflict, "", "was blocked for rex"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := dataDump(t, b.f)
			err := mustError(t, b.apply(api.OpReceiptState, tt.cmd))
			if !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.substr) {
				t.Errorf("error = %v, want %v containing %q", err, tt.is, tt.substr)
			}
			var fe *api.FieldError
			if tt.field != "" && (!errors.As(err, &fe) || fe.Field != tt.field) {
				t.Errorf("error = %v, want a FieldError on %s", err, tt.field)
			}
			if dataDump(t, b.f) != before {
				t.Errorf("a refused report changed the state")
			}
		})
	}
}
