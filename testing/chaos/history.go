package chaos

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

// Kind is what an operation of the history did.
type Kind string

// Operation kinds.
const (
	// KindSend is one attempt to send a message (POST /v1/messages).
	KindSend Kind = "send"
	// KindRead is one strong read of a channel page
	// (GET /v1/channels/{channel}/messages?consistency=strong).
	KindRead Kind = "read"
	// The task workload's kinds (workload_tasks.go), recorded in a history
	// of their own: one attempt to create a task (POST /v1/tasks), to claim
	// it, to report progress or to complete it under a fence.
	KindTaskCreate   Kind = "task_create"
	KindTaskClaim    Kind = "task_claim"
	KindTaskProgress Kind = "task_progress"
	KindTaskComplete Kind = "task_complete"
)

// Outcome is how an operation ended, as far as the client can tell.
type Outcome string

// Outcomes.
const (
	// OK: the node answered with a result (a send's seq, a read's page).
	OK Outcome = "ok"
	// Fail: the operation definitely did not take effect: a 4xx answer, a
	// 503 no_leader / not_leader / not_ready, or a connection that could
	// not be made. For a read, any error.
	Fail Outcome = "fail"
	// Unknown: a send that may or may not have been applied: a timeout, a
	// 503 outcome_unknown, a 5xx, a connection lost after the request went
	// out. An operation that never completed also counts as unknown.
	Unknown Outcome = "unknown"
)

// Entry is one message of a channel's log as the checker sees it: its seq
// (the Raft index that stored it) and its id.
type Entry struct {
	Seq uint64 `json:"seq"`
	ID  string `json:"id"`
}

func (e Entry) String() string { return fmt.Sprintf("%d:%s", e.Seq, e.ID) }

// Op is one operation of the history: one attempt of a send, or one read.
// A retried send is several Ops with the same ID.
type Op struct {
	// Client is the workload client that ran the op: senders are
	// 0..Clients-1, readers Clients..Clients+Readers-1.
	Client  int    `json:"client"`
	Kind    Kind   `json:"kind"`
	Channel string `json:"channel"`
	// ID is the message id of a send (the same for every retry).
	ID string `json:"id,omitempty"`
	// Node is the API address (host:port) the op was sent to.
	Node string `json:"node"`
	// Invoke and Return are monotonic times since the History started;
	// Return is zero while the op is in flight.
	Invoke time.Duration `json:"invoke_ns"`
	Return time.Duration `json:"return_ns"`
	// Outcome is empty while the op is in flight.
	Outcome Outcome `json:"outcome"`
	// Seq is where an OK send was stored.
	Seq uint64 `json:"seq,omitempty"`
	// After is the seq a read started after (0: the channel's first page).
	After uint64 `json:"after,omitempty"`
	// Read holds the entries an OK read returned, in seq order, and HasMore
	// its has_more flag.
	Read    []Entry `json:"read,omitempty"`
	HasMore bool    `json:"has_more,omitempty"`
	// Err is the error of a failed or unknown op, and Code its kind as
	// harness.ErrorKind names it: the API error code ("no_leader",
	// "outcome_unknown", "conflict", ...), "refused", "timeout", "reset",
	// "eof" or "other".
	Err  string `json:"err,omitempty"`
	Code string `json:"code,omitempty"`
	// Agent is the task worker of a task op; Fence the claim's fence a
	// claim was granted (OK) or a progress or completion named; Stale marks
	// a report sent on purpose after its lease ended, which must be
	// refused.
	Agent string `json:"agent,omitempty"`
	Fence uint64 `json:"fence,omitempty"`
	Stale bool   `json:"stale,omitempty"`
}

// Completed reports whether the op has returned.
func (o Op) Completed() bool { return o.Outcome != "" }

// History records the operations of a chaos run. It is safe for concurrent
// use: every client goroutine calls Invoke before an operation and Complete
// after it.
type History struct {
	start time.Time // carries the monotonic clock reading

	mu  sync.Mutex
	ops []Op
}

// NewHistory starts a history; its clock (Since) starts now.
func NewHistory() *History {
	return &History{start: time.Now()}
}

// Since is the monotonic time elapsed since the history started.
func (h *History) Since() time.Duration { return time.Since(h.start) }

// Invoke records the start of op (its Invoke time is set now; Return and
// Outcome are cleared) and returns a handle for Complete.
func (h *History) Invoke(op Op) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	op.Invoke = h.Since()
	op.Return, op.Outcome = 0, ""
	h.ops = append(h.ops, op)
	return len(h.ops) - 1
}

// Complete records the return of the op behind handle: its Return time is
// taken on entry, then fill sets the outcome and results. A fill that
// leaves the outcome empty records Unknown. An unknown handle is ignored.
func (h *History) Complete(handle int, fill func(*Op)) {
	ret := h.Since()
	h.mu.Lock()
	defer h.mu.Unlock()
	if handle < 0 || handle >= len(h.ops) {
		return
	}
	op := &h.ops[handle]
	if fill != nil {
		fill(op)
	}
	if op.Outcome == "" {
		op.Outcome = Unknown
	}
	op.Return = ret
}

// Ops returns a copy of the operations recorded so far, in invoke order.
// Ops still in flight have an empty Outcome.
func (h *History) Ops() []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Op(nil), h.ops...)
}

// Len is the number of operations recorded so far.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}

// HistoryFromOps returns a History holding ops as given, with their times
// and outcomes: for re-checking a history saved as JSON, or a synthetic one.
// Its clock starts now.
func HistoryFromOps(ops []Op) *History {
	return &History{start: time.Now(), ops: append([]Op(nil), ops...)}
}

// WriteJSON writes the operations recorded so far to path as a JSON array
// (the Op fields in snake_case, times in nanoseconds since the start), for
// a failed run to be studied or re-checked (HistoryFromOps).
func (h *History) WriteJSON(path string) error {
	b, err := json.Marshal(h.Ops())
	if err != nil {
		return fmt.Errorf("chaos: history: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("chaos: history: %w", err)
	}
	return nil
}
