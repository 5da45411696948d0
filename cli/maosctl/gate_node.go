package maosctl

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
)

// approvalFiler is the part of the node's API client the gate uses, with
// *transport.Client's signatures (README "Approvals": POST /v1/approvals,
// GET /v1/approvals/{id}, GET /v1/approvals).
type approvalFiler interface {
	RequestApproval(ctx context.Context, cmd fsm.ApprovalRequestCommand) (fsm.ApprovalResult, error)
	Approval(ctx context.Context, id string) (*fsm.Approval, error)
	Approvals(ctx context.Context, q fsm.ApprovalQuery) (fsm.ApprovalPage, error)
}

// How often the gate reads a pending approval while it waits: first
// after gatePollFirst, then twice as long each time up to gatePollMax, so
// a decision lets the call through within gatePollMax. Variables so a
// test can make them small.
var (
	gatePollFirst = 250 * time.Millisecond
	gatePollMax   = 2 * time.Second
)

// gateNodeFor is the node the hook's gate asks, through client. A
// variable so a test can put a fake node behind the hook's command line.
var gateNodeFor = func(client *transport.Client, maxTime time.Duration) (gateNode, error) {
	f, ok := any(client).(approvalFiler)
	if !ok {
		return nil, errors.New("this maosctl has no approval API client (build it from a tree with transport's approval calls)")
	}
	return newGateNode(f, maxTime), nil
}

// newGateNode is the gateNode of an API client: its calls, and a wait
// that reads the approval until it is final, each read bounded by
// maxTime (0: no bound).
func newGateNode(f approvalFiler, maxTime time.Duration) gateNode {
	return clientGateNode{approvalFiler: f, maxTime: maxTime}
}

type clientGateNode struct {
	approvalFiler
	maxTime time.Duration
}

// WaitApproval reads a until it is final. A read the node refuses (4xx
// but 429: gone, forbidden) ends the wait with its error; one that fails
// otherwise (no node, 5xx, 429, a read over maxTime) is tried again at
// the next turn, so a node restarting or a leader election does not deny
// the call while the gate still has time.
func (n clientGateNode) WaitApproval(ctx context.Context, a *fsm.Approval) (*fsm.Approval, error) {
	delay := gatePollFirst
	for !a.State.Final() {
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return a, ctx.Err()
		case <-t.C:
		}
		delay = min(2*delay, gatePollMax)
		rctx, cancel := within(ctx, n.maxTime)
		fresh, err := n.Approval(rctx, a.ID)
		cancel()
		var api *transport.APIError
		switch {
		case err == nil:
			a = fresh
		case ctx.Err() != nil:
			return a, ctx.Err()
		case errors.As(err, &api) && api.Status < http.StatusInternalServerError && api.Status != http.StatusTooManyRequests:
			return a, err
		}
	}
	return a, nil
}
