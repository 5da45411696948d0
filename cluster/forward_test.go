package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/testing/testenv"
)

func TestIsFinal(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		final bool
	}{
		{"conflict from the leader", &api.APIError{Status: 409, Code: api.CodeConflict}, true},
		{"invalid from the leader", &api.APIError{Status: 400, Code: api.CodeInvalid}, true},
		{"not found", &api.APIError{Status: 404, Code: api.CodeNotFound}, true},
		{"leader says not leader", &api.APIError{Status: 503, Code: api.CodeNotLeader}, false},
		{"leader says no leader", &api.APIError{Status: 503, Code: api.CodeNoLeader}, false},
		{"leader says outcome unknown", &api.APIError{Status: 503, Code: api.CodeOutcomeUnknown}, false},
		{"leader 500", &api.APIError{Status: 500, Code: api.CodeInternal}, false},
		{"raft not leader", raft.ErrNotLeader, false},
		{"raft leadership lost", fmt.Errorf("apply: %w", raft.ErrLeadershipLost), false},
		{"raft transfer in progress", raft.ErrLeadershipTransferInProgress, false},
		{"raft shutdown", raft.ErrRaftShutdown, false},
		{"no leader known", api.ErrNoLeader, false},
		{"network", fmt.Errorf("transport: %w", &url.Error{Op: "Post", URL: "http://x", Err: errors.New("connection refused")}), false},
		{"hop deadline", context.DeadlineExceeded, false},
		{"apply refusal", &applyError{err: fmt.Errorf("x: %w", api.ErrConflict)}, true},
		{"caller gone", context.Canceled, true},
	}
	for _, tt := range tests {
		if got := isFinal(tt.err); got != tt.final {
			t.Errorf("%s: isFinal(%v) = %v, want %v", tt.name, tt.err, got, tt.final)
		}
	}
}

// A forwarded call stuck at a leader is abandoned when the leader changes.
func TestForwardHopAbandonsOnLeaderChange(t *testing.T) {
	changed := make(chan struct{})
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := forwardHop(context.Background(), changed, func(ctx context.Context) (int, error) {
			close(started)
			<-ctx.Done()
			return 0, ctx.Err()
		})
		done <- err
	}()
	<-started
	close(changed)
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("hop ended with %v, want context.Canceled", err)
		}
	case <-time.After(time.Until(testenv.Deadline(t))):
		t.Fatal("hop not abandoned after the leader changed")
	}
	// Without a change the call's own answer comes back.
	v, err := forwardHop(context.Background(), make(chan struct{}), func(context.Context) (int, error) { return 7, nil })
	if v != 7 || err != nil {
		t.Fatalf("forwardHop = %d, %v; want 7, nil", v, err)
	}
}

func TestBackoffGrowsToCapAndStops(t *testing.T) {
	b := newBackoff()
	var prevStep time.Duration
	for i := range 10 {
		cur := b.next
		d := b.step()
		if d < cur/2 || d > cur {
			t.Fatalf("step %d: delay %v outside [%v, %v]", i, d, cur/2, cur)
		}
		if cur < prevStep {
			t.Fatalf("step %d: backoff shrank from %v to %v", i, prevStep, cur)
		}
		prevStep = cur
	}
	if b.next != time.Second {
		t.Fatalf("backoff step = %v after 10 steps, want the 1 s cap", b.next)
	}
	stop := make(chan struct{})
	close(stop)
	if err := newBackoff().wait(context.Background(), stop); err == nil {
		t.Fatal("wait returned nil on a closed stop channel")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := newBackoff().wait(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait on a cancelled context = %v", err)
	}
}
