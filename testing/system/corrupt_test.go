package system

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/testing/harness"
	"github.com/maos-project/maos/testing/testenv"
)

// outcome is what a node restarted on a damaged data dir may do.
type outcome int

const (
	// refuses: exits non-zero before serving, with an error naming the
	// file and saying how to bring the node back.
	refuses outcome = 1 << iota
	// serves: starts and serves exactly the log the others serve.
	serves
	// rebuilds: serves, having moved state.db aside and rebuilt it from
	// the snapshots and the Raft log.
	rebuilds
)

// corruptCase damages one file of a stopped follower's data dir.
type corruptCase struct {
	name     string
	file     string // "raft.db" or "state.db"
	kill     bool   // SIGKILL the follower (else SIGTERM)
	snapshot bool   // the follower snapshots before the second batch
	damage   func(t *testing.T, path string) string
	want     outcome // the outcomes accepted (a bit set)
}

// TestCorruptDataDir stops a follower of a 3-node cluster, damages its
// raft.db or its state.db the way a disk or a crash in the middle of a
// write does, sends more messages, and restarts it. The node must either
// refuse to start -- exit non-zero with an error naming the damaged file,
// and then the documented way back (remove it, delete the data dir, join
// again) must work -- or start and serve exactly the log the other nodes
// serve. Never a panic or fault with a stack trace as its only
// explanation, never a hang, never wrong or missing data. Which outcome
// each damage gets is fixed where it is deterministic: a damaged raft.db
// is refused (a node cannot rebuild its own log, term and vote), a damaged
// state.db is rebuilt from the snapshots and the log.
func TestCorruptDataDir(t *testing.T) {
	cases := []corruptCase{
		{
			name: "raft.db last 16KiB of its pages overwritten after SIGKILL", file: "raft.db", kill: true,
			damage: overwriteUsedTail(16 << 10),
			// The last pages in use may be free pages: nothing is lost then.
			want: refuses | serves,
		},
		{
			name: "raft.db truncated mid-page after SIGTERM", file: "raft.db",
			damage: truncateMidPage("logs"),
			want:   refuses,
		},
		{
			name: "state.db last 16KiB of its pages overwritten after SIGKILL", file: "state.db", kill: true,
			damage: overwriteUsedTail(16 << 10),
			want:   serves | rebuilds,
		},
		{
			name: "state.db truncated mid-page after SIGTERM with a snapshot", file: "state.db", snapshot: true,
			damage: truncateMidPage("messages"),
			want:   rebuilds,
		},
		{
			name: "state.db both meta pages overwritten after SIGKILL", file: "state.db", kill: true,
			damage: overwriteMetaPages,
			want:   rebuilds,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { runCorruptCase(t, tc) })
	}
}

func runCorruptCase(t *testing.T, tc corruptCase) {
	c := harness.NewCluster(t, harness.Options{Maosd: maosdBin, Nodes: 3})
	const ch = "corrupt"
	batch := func(tag string, n int) []*api.Message { return taggedBatch("msg", ch, "alice", "bob", tag, n) }
	merge := func(dst, src map[string]*sent) {
		for id, s := range src {
			dst[id] = s
		}
	}
	leader, err := c.Leader()
	harness.NoErr(t, err)
	follower := c.Others(leader)[0]

	sends := sendAll(t, c, batch("before", 40), 30*time.Second, harness.SendOptions{})
	if tc.snapshot {
		ctx, cancel := testenv.Context(t)
		snap, err := follower.Client().Snapshot(ctx)
		cancel()
		harness.NoErr(t, err)
		t.Logf("%s took snapshot %s at index %d", follower.ID, snap.ID, snap.Index)
		merge(sends, sendAll(t, c, batch("after-snapshot", 20), 30*time.Second, harness.SendOptions{}))
	}
	_, err = c.WaitConverged()
	harness.NoErr(t, err)

	if tc.kill {
		harness.NoErr(t, follower.Kill())
	} else {
		harness.NoErr(t, follower.Stop())
	}
	path := filepath.Join(follower.DataDir, tc.file)
	t.Logf("%s: %s", path, tc.damage(t, path))
	merge(sends, sendAll(t, c, batch("while-down", 10), 30*time.Second, harness.SendOptions{Nodes: c.Live()}))

	start := time.Now()
	startErr := follower.Start()
	log := follower.LogTail(80)
	checkNoCrash(t, follower.ID, log)
	if startErr != nil {
		t.Logf("%s refused to start after %s: %s", follower.ID, time.Since(start).Round(time.Millisecond), lastErrorLine(log))
		if tc.want&refuses == 0 {
			t.Fatalf("%s did not start on a damaged %s; want it to start (outcomes %b): %v", follower.ID, tc.file, tc.want, startErr)
		}
		checkRefusal(t, follower, path, startErr, log)
		rejoinFresh(t, c, leader, follower, sends, batch("after-rejoin", 10))
		return
	}

	rebuilt := strings.Contains(log, "state file is damaged")
	aside, _ := filepath.Glob(filepath.Join(follower.DataDir, "state.db.damaged-*"))
	got := serves
	if rebuilt {
		got = rebuilds
		if len(aside) != 1 {
			t.Errorf("%s says it rebuilt its state, but the data dir holds %d damaged state files %v", follower.ID, len(aside), aside)
		}
	}
	t.Logf("%s started after %s (%s)", follower.ID, time.Since(start).Round(time.Millisecond), map[outcome]string{serves: "the damage touched no page in use", rebuilds: "state rebuilt"}[got])
	if tc.want&got == 0 {
		t.Fatalf("%s: outcome %b, want one of %b; log:\n%s", follower.ID, got, tc.want, log)
	}
	harness.NoErr(t, c.WaitReady())
	_, err = c.WaitConverged()
	harness.NoErr(t, err)
	checkStored(t, c, []string{ch}, sends)
	merge(sends, sendAll(t, c, batch("after-restart", 10), 30*time.Second, harness.SendOptions{}))
	index, err := c.WaitConverged()
	harness.NoErr(t, err)
	rep := checkStored(t, c, []string{ch}, sends)
	checkNoCrash(t, follower.ID, follower.LogTail(200))
	t.Logf("%d messages stored identically on 3 nodes; applied index %d", rep.perChannel[ch], index)
}

// crashSigns are what a Go crash prints; a node must explain itself in
// words instead.
var crashSigns = regexp.MustCompile(`(?m)^(panic: |fatal error: |goroutine \d+ \[)|SIGBUS|SIGSEGV|unexpected fault address`)

func checkNoCrash(t *testing.T, id, log string) {
	t.Helper()
	if loc := crashSigns.FindStringIndex(log); loc != nil {
		t.Fatalf("%s crashed with a Go panic or fault (%q); log:\n%s", id, log[loc[0]:loc[1]], log)
	}
}

// checkRefusal checks a refused start: a non-zero exit before serving,
// with an error that names the damaged file and says how to recover.
func checkRefusal(t *testing.T, n *harness.Node, path string, startErr error, log string) {
	t.Helper()
	msg := startErr.Error()
	if !strings.Contains(msg, "exited before it was ready") || !regexp.MustCompile(`exit status [1-9]`).MatchString(msg) {
		t.Errorf("%s: want a non-zero exit before serving, got: %v", n.ID, startErr)
	}
	line := lastErrorLine(log)
	for _, want := range []string{path, "damaged", "maosctl cluster remove " + n.ID, "--join"} {
		if !strings.Contains(line, want) {
			t.Errorf("%s: the error %q does not mention %q", n.ID, line, want)
		}
	}
	if n.Running() {
		t.Errorf("%s still runs after refusing to start", n.ID)
	}
}

// lastErrorLine is maosd's last "maosd: ..." line (its fatal error).
func lastErrorLine(log string) string {
	lines := strings.Split(strings.TrimSpace(log), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "maosd: ") {
			return lines[i]
		}
	}
	return "(no maosd: line) " + lastLine(log)
}

// rejoinFresh follows the advice of a refused start: remove the node from
// the cluster, delete its data dir and start it again with --join. The
// node must catch up and serve the same log as the others.
func rejoinFresh(t *testing.T, c *harness.Cluster, leader, old *harness.Node, sends map[string]*sent, more []*api.Message) {
	t.Helper()
	ctx, cancel := testenv.Context(t)
	defer cancel()
	harness.NoErr(t, leader.Client().Remove(ctx, old.ID))
	harness.NoErr(t, os.RemoveAll(old.DataDir))
	fresh, err := harness.NewNode(harness.NodeConfig{ID: old.ID, Dir: old.Dir, Maosd: maosdBin, Join: []string{leader.APIAddr()}})
	harness.NoErr(t, err)
	t.Cleanup(func() {
		if fresh.Running() {
			_ = fresh.Kill()
		}
	})
	harness.NoErr(t, fresh.Start())
	harness.NoErr(t, fresh.WaitReady(30*time.Second))
	nodes := append(c.Live(), fresh)
	for id, s := range sendAll(t, c, more, 30*time.Second, harness.SendOptions{Nodes: c.Live()}) {
		sends[id] = s
	}
	index := waitSameApplied(t, nodes)
	rep := checkStoredOn(t, nodes, []string{"corrupt"}, sends)
	checkNoCrash(t, fresh.ID, fresh.LogTail(200))
	t.Logf("after remove, delete and --join, %s serves the same %d messages as the others; applied index %d",
		fresh.ID, rep.perChannel["corrupt"], index)
}

// waitSameApplied waits until nodes report the same applied index, equal
// to their commit index, and returns it.
func waitSameApplied(t *testing.T, nodes []*harness.Node) uint64 {
	t.Helper()
	var index uint64
	err := harness.WaitFor(30*time.Second, "the nodes to apply the same index", func() error {
		var sts []api.Status
		for _, n := range nodes {
			st, err := n.Status(2 * time.Second)
			if err != nil {
				return fmt.Errorf("%s: %w", n.ID, err)
			}
			sts = append(sts, st)
		}
		for i, st := range sts {
			if st.AppliedIndex != sts[0].AppliedIndex || st.AppliedIndex != st.CommitIndex {
				return fmt.Errorf("%s applied %d commit %d, %s applied %d", nodes[i].ID, st.AppliedIndex, st.CommitIndex, nodes[0].ID, sts[0].AppliedIndex)
			}
		}
		index = sts[0].AppliedIndex
		return nil
	})
	harness.NoErr(t, err)
	return index
}

// boltLayout reads a closed, healthy bbolt file: its page size, the bytes
// its pages in use span (high-water mark × page size) and the root page of
// bucket.
func boltLayout(t *testing.T, path, bucket string) (pageSize, used, root int64) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	harness.NoErr(t, err)
	defer db.Close()
	pageSize = int64(db.Info().PageSize)
	harness.NoErr(t, db.View(func(tx *bbolt.Tx) error {
		used = tx.Size()
		b := tx.Bucket([]byte(bucket))
		if b == nil {
			return fmt.Errorf("%s has no bucket %q", path, bucket)
		}
		root = int64(b.Root())
		if root == 0 {
			return fmt.Errorf("bucket %q of %s is inline; write more", bucket, path)
		}
		return nil
	}))
	return pageSize, used, root
}

// overwriteUsedTail overwrites the last n bytes of the pages in use with
// random bytes: the pages bbolt wrote last (the file beyond them is
// preallocated and never read).
func overwriteUsedTail(n int64) func(t *testing.T, path string) string {
	return func(t *testing.T, path string) string {
		_, used, _ := boltLayout(t, path, bucketOf(path))
		off := max(used-n, 0)
		writeRandom(t, path, off, used-off)
		return fmt.Sprintf("overwrote bytes %d..%d (the end of its pages in use) with random bytes", off, used)
	}
}

// truncateMidPage cuts the file in the middle of the root page of bucket,
// a page every read of the bucket needs.
func truncateMidPage(bucket string) func(t *testing.T, path string) string {
	return func(t *testing.T, path string) string {
		ps, used, root := boltLayout(t, path, bucket)
		size := root*ps + ps/2
		harness.NoErr(t, os.Truncate(path, size))
		return fmt.Sprintf("truncated to %d bytes, in the middle of page %d (root of bucket %q); its pages span %d bytes", size, root, bucket, used)
	}
}

// overwriteMetaPages overwrites both meta pages (pages 0 and 1).
func overwriteMetaPages(t *testing.T, path string) string {
	ps, _, _ := boltLayout(t, path, bucketOf(path))
	writeRandom(t, path, 0, 2*ps)
	return fmt.Sprintf("overwrote both meta pages (bytes 0..%d) with random bytes", 2*ps)
}

// bucketOf names a bucket that exists in the file at path.
func bucketOf(path string) string {
	if filepath.Base(path) == "raft.db" {
		return "logs"
	}
	return "messages"
}

func writeRandom(t *testing.T, path string, off, n int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	harness.NoErr(t, err)
	defer f.Close()
	buf := make([]byte, n)
	_, _ = rand.Read(buf)
	_, err = f.WriteAt(buf, off)
	harness.NoErr(t, err)
	harness.NoErr(t, f.Sync())
}
