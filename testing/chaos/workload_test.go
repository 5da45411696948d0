package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/testing/harness"
)

// maosdBin is the maosd binary built by TestMain, stubmodelBin the stub
// model CLI the watcher agents run.
var maosdBin, stubmodelBin string

// idPattern is the API's rule for message ids.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "maos-chaos-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos tests:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	maosdBin, _, err = harness.BuildBinaries(dir)
	if err == nil {
		stubmodelBin, err = harness.BuildStubModel(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos tests:", err)
		return 1
	}
	return m.Run()
}

func TestClassify(t *testing.T) {
	apiError := func(status int, code string) error {
		return fmt.Errorf("via n1: %w", &api.APIError{Status: status, Code: code, Message: "m"})
	}
	dial := &url.Error{Op: "Post", URL: "http://127.0.0.1:1/v1/messages",
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
	reset := &url.Error{Op: "Post", URL: "http://127.0.0.1:1/v1/messages",
		Err: &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}}
	tests := []struct {
		name    string
		err     error
		outcome Outcome
		retry   bool
	}{
		{"nil", nil, OK, false},
		{"no leader", apiError(503, api.CodeNoLeader), Fail, true},
		{"not leader", apiError(503, api.CodeNotLeader), Fail, true},
		{"not ready", apiError(503, api.CodeNotReady), Fail, true},
		{"outcome unknown", apiError(503, api.CodeOutcomeUnknown), Unknown, true},
		{"internal", apiError(500, api.CodeInternal), Unknown, true},
		{"conflict", apiError(409, api.CodeConflict), Fail, false},
		{"invalid", apiError(400, api.CodeInvalid), Fail, false},
		{"connection refused", dial, Fail, true},
		{"connection reset", reset, Unknown, true},
		{"timeout", &url.Error{Op: "Post", URL: "x", Err: context.DeadlineExceeded}, Unknown, true},
		{"other", errors.New("something"), Unknown, true},
	}
	for _, tc := range tests {
		o, retry := classify(tc.err)
		if o != tc.outcome || retry != tc.retry {
			t.Errorf("%s: classify = %s, %v; want %s, %v", tc.name, o, retry, tc.outcome, tc.retry)
		}
	}
}

func TestWorkloadConfig(t *testing.T) {
	if got := (WorkloadConfig{}).ChannelNames(); !slices.Equal(got, []string{"chaos-0", "chaos-1", "chaos-2", "chaos-3"}) {
		t.Errorf("default channels %v", got)
	}
	if got := (WorkloadConfig{Channels: 2, Prefix: "run7"}).ChannelNames(); !slices.Equal(got, []string{"run7-0", "run7-1"}) {
		t.Errorf("channels %v", got)
	}
	ctx := context.Background()
	nodes := func() []*harness.Node { return nil }
	if err := RunWorkload(ctx, WorkloadConfig{}, NewHistory()); err == nil {
		t.Error("no Nodes: no error")
	}
	if err := RunWorkload(ctx, WorkloadConfig{Nodes: nodes}, nil); err == nil {
		t.Error("nil history: no error")
	}
	if err := RunWorkload(ctx, WorkloadConfig{Nodes: nodes, Prefix: "Bad Prefix"}, NewHistory()); err == nil {
		t.Error("bad prefix: no error")
	}
}

// TestWorkloadNoNodes: with no node to pick, nothing is recorded and the
// workload stops when ctx ends, within RetryFor.
func TestWorkloadNoNodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	h := NewHistory()
	err := RunWorkload(ctx, WorkloadConfig{Clients: 2, Readers: 1, RetryFor: 200 * time.Millisecond,
		Nodes: func() []*harness.Node { return nil }}, h)
	if err != nil {
		t.Fatal(err)
	}
	if h.Len() != 0 {
		t.Errorf("%d ops recorded with no nodes", h.Len())
	}
}

// TestWorkloadAgainstCluster runs the workload for a few seconds against a
// healthy 3-node cluster and checks the result: it must pass.
func TestWorkloadAgainstCluster(t *testing.T) {
	c := harness.NewCluster(t, harness.Options{Maosd: maosdBin, Nodes: 3})
	cfg := WorkloadConfig{Nodes: c.Live, Seed: 1, RetryFor: 10 * time.Second}
	h := NewHistory()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := RunWorkload(ctx, cfg, h); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitConverged(); err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer ccancel()
	dir := t.TempDir()
	res, err := Check(cctx, c.Nodes(), h, cfg.ChannelNames(), dir)
	if err != nil {
		t.Fatal(err)
	}
	rep := &Report{Scenario: "no faults", Nodes: 3, Seed: cfg.Seed, Duration: h.Since(), Ops: CountOps(h.Ops()), Check: res, Pass: res.OK()}
	t.Logf("\n%s", rep.Text())
	if !res.OK() {
		t.Fatalf("a fault-free run fails the check:\n%s", rep.Text())
	}
	if rep.Ops.SendOK == 0 || rep.Ops.ReadOK == 0 || res.Acked == 0 {
		t.Fatalf("the workload did nothing: %+v", rep.Ops)
	}
	for _, n := range c.Nodes() {
		if res.Stored[n.ID] < res.Acked {
			t.Errorf("%s stores %d messages, %d were acknowledged", n.ID, res.Stored[n.ID], res.Acked)
		}
	}
	// Every id follows the format, and every retry carried the same id.
	for _, op := range h.Ops() {
		if op.Kind == KindSend && !idPattern.MatchString(op.ID) {
			t.Fatalf("id %q", op.ID)
		}
	}
}
