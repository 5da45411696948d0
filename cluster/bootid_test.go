package cluster_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/cluster"
	"github.com/maos-project/maos/cluster/clustertest"
)

// boots is the boot id each test node reads (Config.BootID): a test
// simulates a reboot by changing a node's, or makes it unreadable.
type boots struct {
	mu  sync.Mutex
	ids map[string]string // node id → boot id; "" is unreadable
}

func newBoots() *boots { return &boots{ids: map[string]string{}} }

func (b *boots) set(node, boot string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ids[node] = boot
}

func (b *boots) option() clustertest.Option {
	return clustertest.WithConfig(func(c *cluster.Config) {
		node := c.NodeID
		c.BootID = func() (string, error) {
			b.mu.Lock()
			defer b.mu.Unlock()
			id, ok := b.ids[node]
			if !ok {
				return "boot-1", nil
			}
			if id == "" {
				return "", errors.New("boot id unreadable (test)")
			}
			return id, nil
		}
	})
}

// asides lists the state files the node in dir moved aside to rebuild.
func asides(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, kind := range []string{"untrusted", "damaged"} {
		m, err := filepath.Glob(filepath.Join(dir, "state.db."+kind+"-*"))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m...)
	}
	return out
}

// sendSome sends n acknowledged messages to channel through the leader
// and returns their ids.
func sendSome(t *testing.T, c *clustertest.Cluster, channel string, n int) []string {
	t.Helper()
	ctx := clustertest.Context(t)
	var ids []string
	for i := range n {
		res, err := c.Leader().Client.Send(ctx, clustertest.Msg("codex", channel, fmt.Sprintf("%s %d", channel, i)))
		if err != nil {
			t.Fatalf("send %d to %s: %v", i, channel, err)
		}
		ids = append(ids, res.ID)
	}
	return ids
}

// dumpOf is the node's whole state in canonical form.
func dumpOf(t *testing.T, n *clustertest.Node) string {
	t.Helper()
	var b bytes.Buffer
	if err := n.FSM().Dump(&b); err != nil {
		t.Fatalf("dump %s: %v", n.ID(), err)
	}
	return b.String()
}

// waitIdentical polls until every running node holds the same state,
// byte for byte, as the leader.
func waitIdentical(t *testing.T, c *clustertest.Cluster) {
	t.Helper()
	leader := c.Leader()
	clustertest.WaitFor(t, 30*time.Second, "every node's state identical to the leader's", func() bool {
		want := dumpOf(t, leader)
		for _, n := range c.Running() {
			if n.FSM().AppliedIndex() != leader.FSM().AppliedIndex() || dumpOf(t, n) != want {
				return false
			}
		}
		return true
	})
}

// hasAll fails the test unless node stores every id on channel (a local
// read: what the node itself holds).
func hasAll(t *testing.T, n *clustertest.Node, channel string, ids []string) {
	t.Helper()
	p, err := n.FSM().ChannelPage(channel, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]bool{}
	for _, m := range p.Messages {
		stored[m.ID] = true
	}
	for _, id := range ids {
		if !stored[id] {
			t.Fatalf("%s lost acknowledged message %s of %s (holds %d)", n.ID(), id, channel, len(p.Messages))
		}
	}
}

// restart starts the node again from its data dir (no join), in c's place.
func restart(t *testing.T, c *clustertest.Cluster, old *clustertest.Node, b *boots) *clustertest.Node {
	t.Helper()
	nw := clustertest.Start(t, old.ID(), old.Dir, old.Addr, nil, b.option(), clustertest.SameRaftAddr(old))
	c.Replace(old, nw)
	return nw
}

// The state file commits without fsync, so whether a follower's state
// file is trusted at start depends on how it stopped and on the boot:
// a clean stop is trusted whatever the boot; an unclean stop in the same
// boot (a process crash: the page cache kept every commit) is trusted;
// an unclean stop across a boot (kernel crash, power loss) or with a boot
// id that cannot be read is not: the file is moved aside and rebuilt from
// the log, and the node ends identical to its peers either way.
func TestStateFileTrustAcrossStopsAndBoots(t *testing.T) {
	b := newBoots()
	c := clustertest.New(t, 3, b.option())
	f := c.Follower()
	cases := []struct {
		name    string
		crash   bool
		boot    string // the boot id at restart; "" unreadable
		rebuild bool
	}{
		{"clean stop, new boot", false, "boot-2", false},
		{"process crash, same boot", true, "boot-2", false},
		{"crash across a reboot", true, "boot-3", true},
		{"crash, boot id unreadable", true, "", true},
		{"crash after an unreadable boot id", true, "boot-4", true},
		{"process crash, same boot again", true, "boot-4", false},
	}
	var all []string
	for i, tc := range cases {
		all = append(all, sendSome(t, c, "trust", 5)...)
		before := len(asides(t, f.Dir))
		if tc.crash {
			f.Kill((*cluster.Node).Crash)
		} else {
			f.Stop()
		}
		all = append(all, sendSome(t, c, "trust", 5)...)
		b.set(f.ID(), tc.boot)
		f = restart(t, c, f, b)
		rebuilt := len(asides(t, f.Dir)) > before
		if rebuilt != tc.rebuild {
			t.Fatalf("case %d (%s): state rebuilt %t, want %t", i, tc.name, rebuilt, tc.rebuild)
		}
		waitIdentical(t, c)
		hasAll(t, f, "trust", all)
		rec, err := os.ReadFile(filepath.Join(f.Dir, "BOOT_ID"))
		want := tc.boot
		if want == "" {
			want = "unknown"
		}
		if err != nil || strings.TrimSpace(string(rec)) != want {
			t.Fatalf("case %d (%s): BOOT_ID holds %q (%v), want %q", i, tc.name, rec, err, want)
		}
	}
}

// bufSink is a raft.SnapshotSink writing to memory.
type bufSink struct{ bytes.Buffer }

func (s *bufSink) ID() string    { return "copy" }
func (s *bufSink) Cancel() error { return nil }
func (s *bufSink) Close() error  { return nil }

// copyState writes a consistent copy of the node's state file, as of now,
// to path: a snapshot, decompressed.
func copyState(t *testing.T, n *clustertest.Node, path string) {
	t.Helper()
	snap, err := n.FSM().Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	var sink bufSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	dec, err := zstd.NewReader(&sink.Buffer)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if _, err := io.Copy(out, dec); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// A power loss can leave the state file older than what it acknowledged
// (commits not yet synced). Here a follower's state file is rolled back to
// a copy taken earlier, with a Raft snapshot taken after the copy and
// more sends after both; it stops uncleanly and comes back in a new boot.
// Its state is rebuilt from the snapshot and the log, and it holds every
// acknowledged message, identical to its peers.
func TestRolledBackStateFileIsRebuilt(t *testing.T) {
	b := newBoots()
	c := clustertest.New(t, 3, b.option())
	f := c.Follower()
	ids := sendSome(t, c, "rollback", 20)
	old := filepath.Join(t.TempDir(), "state.db.old")
	copyState(t, f, old)
	ids = append(ids, sendSome(t, c, "rollback", 20)...)
	clustertest.WaitFor(t, 10*time.Second, "the follower applied the sends", func() bool {
		return f.FSM().AppliedIndex() >= c.Leader().FSM().AppliedIndex()
	})
	if _, err := f.Snapshot(clustertest.Context(t)); err != nil {
		t.Fatalf("snapshot on %s: %v", f.ID(), err)
	}
	ids = append(ids, sendSome(t, c, "rollback", 20)...)
	f.Kill((*cluster.Node).Crash)
	ids = append(ids, sendSome(t, c, "rollback", 5)...)

	in, err := os.Open(old)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(filepath.Join(f.Dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}

	b.set(f.ID(), "boot-2")
	f = restart(t, c, f, b)
	if len(asides(t, f.Dir)) != 1 {
		t.Fatalf("state files moved aside: %v, want one", asides(t, f.Dir))
	}
	waitIdentical(t, c)
	hasAll(t, f, "rollback", ids)
	// The strong read through the rebuilt node answers them too.
	p, err := f.Client.ChannelPage(clustertest.Context(t), "rollback", 0, 1000, api.Strong)
	if err != nil || len(p.Messages) != len(ids) {
		t.Fatalf("strong read through %s: %d messages (%v), want %d", f.ID(), len(p.Messages), err, len(ids))
	}
}
