package system

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/cluster/clustertest"
	"github.com/maos-project/maos/testing/testenv"
	"github.com/maos-project/maos/watcher"
)

// logLines is a log sink a watcher writes while the test reads it.
type logLines struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logLines) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

// A run-time policy set through one node reaches a watcher attached to
// another, without a restart: quiet holds a normal message and lets an
// urgent one through; cleared through a third node, the held message is
// answered.
func TestWatcherRuntimePolicyAcrossNodes(t *testing.T) {
	c := clustertest.New(t, 3)
	logs := &logLines{}
	startWatcherOpts(t, c.Nodes[2].Client, `
agents:
  - id: calm
    command: ["`+stubmodelBin+`"]
    context_messages: 0
    policy: {mode: queue}
`, watcher.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	cl := c.Nodes[0].Client
	waitRegistered(t, cl, "calm")
	ctx, cancel := testenv.Context(t)
	defer cancel()
	if _, err := cl.SetPolicy(ctx, "calm", api.PolicyRequest{Mode: api.PolicyQuiet}); err != nil {
		t.Fatal(err)
	}
	// A watcher at rest reads the policy when the next message comes
	// (watcher/policy.go): the held one is decided under the quiet.
	held := sendTo(t, cl, "held", "calm", "normal")
	urgent := sendTo(t, cl, "loud", "calm", "urgent")
	oneReply(t, cl, "calm", urgent)
	if r := repliesTo(t, cl, held.ID); len(r) != 0 {
		t.Fatalf("quiet answered the normal message: %+v", r)
	}
	if _, err := c.Nodes[1].Client.ClearPolicy(ctx, "calm", ""); err != nil {
		t.Fatal(err)
	}
	oneReply(t, cl, "calm", held)
	waitCursor(t, cl, "calm", urgent.Seq)
	if logs.count("run-time policy changed") < 2 {
		t.Errorf("the watcher on n3 read the policy changed %d times, want the quiet and its clearing", logs.count("run-time policy changed"))
	}
}
