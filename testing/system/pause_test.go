package system

import (
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/testing/harness"
)

// TestPausedFollowerAndGracefulLeaderStop hangs a follower (SIGSTOP) while
// the other two keep taking sends, resumes it, then stops the leader
// gracefully (SIGTERM, which must exit 0 and hand leadership over) and
// restarts it: every node ends with the same log holding every
// acknowledged message.
func TestPausedFollowerAndGracefulLeaderStop(t *testing.T) {
	c := harness.NewCluster(t, harness.Options{Maosd: maosdBin, Nodes: 3})
	const ch = "pause"
	batch := func(tag string, n int) []*api.Message { return taggedBatch("msg", ch, "alice", "bob", tag, n) }
	leader, err := c.Leader()
	harness.NoErr(t, err)
	follower := c.Others(leader)[0]

	harness.NoErr(t, follower.Pause())
	if got, err := c.Leader(); err != nil || got != leader {
		t.Fatalf("with %s paused: leader %v, %v; want %s", follower.ID, got, err, leader.ID)
	}
	sends := sendAll(t, c, batch("paused", 30), 30*time.Second, harness.SendOptions{Nodes: c.Live()})
	harness.NoErr(t, follower.Resume())
	harness.NoErr(t, follower.WaitReady(30*time.Second))

	start := time.Now()
	harness.NoErr(t, leader.Stop())
	t.Logf("graceful stop of leader %s took %s", leader.ID, time.Since(start).Round(time.Millisecond))
	next, err := c.Leader()
	harness.NoErr(t, err)
	if next == leader {
		t.Fatalf("%s still leads after it stopped", leader.ID)
	}
	for id, s := range sendAll(t, c, batch("stopped", 30), 30*time.Second, harness.SendOptions{}) {
		sends[id] = s
	}
	harness.NoErr(t, leader.Restart())
	harness.NoErr(t, c.WaitReady())
	index, err := c.WaitConverged()
	harness.NoErr(t, err)
	checkUniqueSeqs(t, sends)
	rep := checkStored(t, c, []string{ch}, sends)
	t.Logf("%d messages stored identically on 3 nodes after a pause of %s and a graceful stop of %s; new leader %s; applied index %d",
		rep.perChannel[ch], follower.ID, leader.ID, next.ID, index)
}
