package maosctl

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
)

// scriptedFiler answers each Approval read with the next of its answers
// (the last one again once they run out) and records when it was read.
type scriptedFiler struct {
	mu      sync.Mutex
	answers []scriptedAnswer
	reads   []time.Time
}

type scriptedAnswer struct {
	state fsm.ApprovalState
	err   error
}

func (s *scriptedFiler) RequestApproval(context.Context, fsm.ApprovalRequestCommand) (fsm.ApprovalResult, error) {
	return fsm.ApprovalResult{}, errors.New("not used")
}

func (s *scriptedFiler) Approvals(context.Context, fsm.ApprovalQuery) (fsm.ApprovalPage, error) {
	return fsm.ApprovalPage{}, errors.New("not used")
}

func (s *scriptedFiler) Approval(_ context.Context, id string) (*fsm.Approval, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads = append(s.reads, time.Now())
	ans := s.answers[min(len(s.reads), len(s.answers))-1]
	if ans.err != nil {
		return nil, ans.err
	}
	return &fsm.Approval{ID: id, State: ans.state, Approvals: len(s.reads)}, nil
}

func fastGatePoll(t *testing.T, first, most time.Duration) {
	t.Helper()
	f, m := gatePollFirst, gatePollMax
	gatePollFirst, gatePollMax = first, most
	t.Cleanup(func() { gatePollFirst, gatePollMax = f, m })
}

// The wait reads the approval until it is final, through a node that is
// briefly away (no node, 503, 429): those are tried again.
func TestGateNodeWaitRetriesTransientErrors(t *testing.T) {
	fastGatePoll(t, time.Millisecond, 4*time.Millisecond)
	f := &scriptedFiler{answers: []scriptedAnswer{
		{state: fsm.ApprovalPending},
		{err: &transport.UnreachableError{}},
		{err: &transport.APIError{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "no leader"}},
		{err: &transport.APIError{Status: http.StatusTooManyRequests, Code: "rate_limited", Message: "slow down"}},
		{state: fsm.ApprovalPending},
		{state: fsm.ApprovalApproved},
	}}
	a, err := newGateNode(f, time.Second).WaitApproval(context.Background(), &fsm.Approval{ID: "appr-1", State: fsm.ApprovalPending})
	if err != nil || a.State != fsm.ApprovalApproved || a.Approvals != 6 || len(f.reads) != 6 {
		t.Fatalf("wait: %+v %v after %d reads, want approved after 6", a, err, len(f.reads))
	}
	// The interval doubles up to its bound: 1, 2, 4, 4, 4 ms.
	for i := 1; i < len(f.reads); i++ {
		if gap, want := f.reads[i].Sub(f.reads[i-1]), min(time.Millisecond<<i, 4*time.Millisecond); gap < want {
			t.Errorf("read %d came %s after the one before, want at least %s", i, gap, want)
		}
	}
	// An approval already final is not read.
	f = &scriptedFiler{answers: []scriptedAnswer{{state: fsm.ApprovalPending}}}
	if a, err := newGateNode(f, time.Second).WaitApproval(context.Background(), &fsm.Approval{ID: "appr-1", State: fsm.ApprovalRejected}); err != nil ||
		a.State != fsm.ApprovalRejected || len(f.reads) != 0 {
		t.Errorf("final approval: %+v %v, %d reads", a, err, len(f.reads))
	}
}

// A read the node refuses ends the wait with its error, the approval as
// last seen; so does the end of the caller's time.
func TestGateNodeWaitEnds(t *testing.T) {
	fastGatePoll(t, time.Millisecond, time.Millisecond)
	gone := &transport.APIError{Status: http.StatusNotFound, Code: "not_found", Message: "approval appr-1 not found"}
	f := &scriptedFiler{answers: []scriptedAnswer{{state: fsm.ApprovalPending}, {err: gone}}}
	a, err := newGateNode(f, time.Second).WaitApproval(context.Background(), &fsm.Approval{ID: "appr-1", State: fsm.ApprovalPending})
	if !errors.Is(err, gone) || a == nil || a.Approvals != 1 || len(f.reads) != 2 {
		t.Errorf("refused read: %+v %v after %d reads", a, err, len(f.reads))
	}

	f = &scriptedFiler{answers: []scriptedAnswer{{state: fsm.ApprovalPending}}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	start := &fsm.Approval{ID: "appr-1", State: fsm.ApprovalPending}
	a, err = newGateNode(f, time.Second).WaitApproval(ctx, start)
	if !errors.Is(err, context.DeadlineExceeded) || a == nil || a.State != fsm.ApprovalPending || len(f.reads) == 0 {
		t.Errorf("time up: %+v %v after %d reads", a, err, len(f.reads))
	}
	// With no time left it returns at once what it was given.
	f = &scriptedFiler{answers: []scriptedAnswer{{state: fsm.ApprovalApproved}}}
	gatePollFirst = time.Hour
	if a, err := newGateNode(f, time.Second).WaitApproval(ctx, start); a != start || !errors.Is(err, context.DeadlineExceeded) || len(f.reads) != 0 {
		t.Errorf("no time: %+v %v after %d reads", a, err, len(f.reads))
	}
}
