package system

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/testing/harness"
	"github.com/maos-project/maos/testing/testenv"
)

// TestRestartWholeCluster SIGKILLs all three nodes at once and restarts
// them from their data dirs (no --join): every acknowledged message is
// still there at its seq on every node, and the cluster takes new sends.
func TestRestartWholeCluster(t *testing.T) {
	c := harness.NewCluster(t, harness.Options{Maosd: maosdBin, Nodes: 3})
	const ch = "restart"
	msgs := taggedBatch("msg", ch, "alice", "bob", "restart", 60)
	sends := sendAll(t, c, msgs, 30*time.Second, harness.SendOptions{})
	var maxSeq uint64
	for _, s := range sends {
		maxSeq = max(maxSeq, s.seq)
	}

	for _, n := range c.Nodes() {
		harness.NoErr(t, n.Kill())
	}
	for _, n := range c.Nodes() {
		harness.NoErr(t, n.Restart())
	}
	leader, err := c.Leader()
	harness.NoErr(t, err)
	harness.NoErr(t, c.WaitReady())
	_, err = c.WaitConverged()
	harness.NoErr(t, err)
	checkStored(t, c, []string{ch}, sends)
	ids := make([]string, 0, len(msgs))
	for _, m := range msgs {
		ids = append(ids, m.ID)
	}
	checkByID(t, c, ids, sends)

	after := &api.Message{ID: "msg-restart-after", Channel: ch, From: "alice", To: api.Recipients{"bob"},
		Content: api.Content{Text: "after the restart"}}
	for id, s := range sendAll(t, c, []*api.Message{after}, 30*time.Second, harness.SendOptions{}) {
		if s.seq <= maxSeq {
			t.Errorf("%s got seq %d, not after the last seq %d from before the restart", id, s.seq, maxSeq)
		}
		sends[id] = s
	}
	index, err := c.WaitConverged()
	harness.NoErr(t, err)
	checkUniqueSeqs(t, sends)
	rep := checkStored(t, c, []string{ch}, sends)
	checkByID(t, c, []string{after.ID}, sends)
	t.Logf("%d messages survived a SIGKILL of every node; new leader %s; %d stored after one more send; applied index %d",
		len(msgs), leader.ID, rep.perChannel[ch], index)
}

// TestDataDirInUse starts a second maosd on the data dir of a running node
// (other ports): it must exit non-zero at once saying the data dir is in
// use, and the running node must be unaffected.
func TestDataDirInUse(t *testing.T) {
	c := harness.NewCluster(t, harness.Options{Maosd: maosdBin, Nodes: 1})
	n := c.Nodes()[0]

	ctx, cancel := testenv.Context(t)
	defer cancel()
	cmd := exec.CommandContext(ctx, maosdBin, "--node-id", n.ID, "--data-dir", n.DataDir,
		"--http-addr", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0", "--log-format", "json")
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("the second maosd on %s was still running at the test's deadline (killed it); output:\n%s", n.DataDir, out.String())
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("the second maosd on %s: want a non-zero exit, got %v; output:\n%s", n.DataDir, err, out.String())
	}
	if !strings.Contains(out.String(), "data dir is in use") {
		t.Errorf("the second maosd exited with %d but did not say the data dir is in use; output:\n%s", exit.ExitCode(), out.String())
	}
	t.Logf("second maosd exited with status %d: %s", exit.ExitCode(), strings.TrimSpace(lastLine(out.String())))

	// The first node still serves and still owns its data.
	if !n.Live() {
		t.Fatalf("%s is not running any more", n.ID)
	}
	m := &api.Message{ID: "msg-still-serving", Channel: "lock", From: "alice", To: api.Recipients{"bob"},
		Content: api.Content{Text: "still here"}}
	sends := sendAll(t, c, []*api.Message{m}, 30*time.Second, harness.SendOptions{})
	checkStored(t, c, []string{"lock"}, sends)
	checkByID(t, c, []string{m.ID}, sends)
	st, err := n.Status(5 * time.Second)
	harness.NoErr(t, err)
	if st.State != "leader" || st.NodeID != n.ID {
		t.Errorf("%s after the second maosd: state %s node %s", n.ID, st.State, st.NodeID)
	}
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
