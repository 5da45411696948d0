package chaos

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/testing/harness"
)

// With no node to register the workers through, the task workload does
// not start, and says which worker it could not register.
func TestStartTasksWithoutNodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	none := func() []*harness.Node { return nil }
	tw, err := startTasks(ctx, none, none, 1, 2, NewHistory())
	if err == nil || tw != nil || !strings.Contains(err.Error(), "register task worker chaos-tw-0") {
		t.Fatalf("startTasks with no node = %v, %v", tw, err)
	}
}

// A worker's home is the member at its position, and none while that
// member is not live; the creator picks among the live nodes.
func TestTaskWorkerHome(t *testing.T) {
	down, err := harness.NewNode(harness.NodeConfig{ID: "n1", Dir: t.TempDir(), Maosd: "maosd"})
	if err != nil {
		t.Fatal(err)
	}
	tw := &taskWorkload{w: &workload{cfg: WorkloadConfig{Nodes: func() []*harness.Node { return nil }}.withDefaults()},
		members: func() []*harness.Node { return []*harness.Node{down} }}
	if n, cl := tw.home(4); n != nil || cl != nil {
		t.Errorf("home of a worker whose node never started = %v, %v", n, cl)
	}
	if n, _ := tw.node(nil, -1, ""); n != nil {
		t.Errorf("the creator found a node among none: %v", n)
	}
	tw.members = func() []*harness.Node { return nil }
	if n, _ := tw.home(0); n != nil {
		t.Errorf("home with no member = %v", n)
	}
}
