package system

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/testing/harness"
	"github.com/maos-project/maos/testing/testenv"
)

// Trust at the edges of membership (issue 26; docs/TRUST.md, "Membership
// and nodes"): one cluster of the built maosd with --auth (no TLS, no
// gossip key, on loopback: what a rogue gossip member reaches), shared by
// the subtests, which run in order: each leaves the cluster whole.
func TestMembersAndNodes(t *testing.T) {
	c := harness.NewCluster(t, harness.Options{Maosd: maosdBin, Nodes: 3, AuthOnly: true,
		ExtraArgs: []string{"--max-conns-per-client", fmt.Sprint(connsPerClient), "--http-idle-timeout", "1s", "--http-body-timeout", "1s"}})
	t.Run("ConnectionsBounded", func(t *testing.T) { testConnectionsBounded(t, c) })
	t.Run("RogueGossipMemberGetsNoToken", func(t *testing.T) { testRogueGossipMember(t, c) })
	t.Run("AuthNeedsGossipKey", testAuthNeedsGossipKey)
	t.Run("DuplicateNodeIDRefused", func(t *testing.T) { testDuplicateNodeID(t, c) })
	t.Run("MembershipAudited", func(t *testing.T) { testMembershipAudited(t, c) })
	// After MembershipAudited: it uses the data dir n4 left.
	t.Run("DataDirOfAnotherNodeOrCluster", func(t *testing.T) { testDataDirOfAnother(t, c) })
	t.Run("JoinAtRaftPort", func(t *testing.T) { testJoinAtRaftPort(t, c) })
	t.Run("JoinWithTLSMismatch", func(t *testing.T) { testJoinTLSMismatch(t, c) })
}

// outsider is a maosd the cluster does not manage: a fresh data dir in
// the cluster's directory, joining through join, with the cluster's admin
// token. It is killed (by its PID) when the test ends.
func outsider(t *testing.T, c *harness.Cluster, id, dir string, join []string, extra ...string) *harness.Node {
	t.Helper()
	sec := c.Security()
	n, err := harness.NewNode(harness.NodeConfig{ID: id, Dir: filepath.Join(c.Dir, dir), Maosd: maosdBin, Join: join,
		ExtraArgs: extra, StartTimeout: 30 * time.Second,
		Security: &harness.NodeSecurity{NoTLS: true, AdminTokenFile: sec.AdminTokenFile, AdminToken: sec.AdminToken}})
	harness.NoErr(t, err)
	t.Cleanup(func() {
		if n.Running() {
			_ = n.Kill()
		}
	})
	return n
}

// voterAddr is the Raft address the cluster's status (through n) gives
// voter id, "" when it is not a voter.
func voterAddr(t *testing.T, n *harness.Node, id string) string {
	t.Helper()
	st, err := n.Status(5 * time.Second)
	harness.NoErr(t, err)
	for _, v := range st.Voters {
		if v.ID == id {
			return v.RaftAddr
		}
	}
	return ""
}

// testDuplicateNodeID: a fresh node started with a live voter's --node-id
// (a new data dir, --join any member) is refused, naming the voter, its
// address and --replace, and exits; with --replace it is still refused,
// because the voter answers. The voter keeps its address and the cluster
// its leader.
func testDuplicateNodeID(t *testing.T, c *harness.Cluster) {
	n1, n2 := c.Node("n1"), c.Node("n2")
	before := voterAddr(t, n1, "n2")
	if before == "" {
		t.Fatal("n2 is not a voter before the test")
	}
	for _, tc := range []struct {
		name  string
		extra []string
		want  []string
	}{
		{"plain", nil, []string{"node id n2 is already a voter at raft address " + before, "--replace"}},
		{"replace", []string{"--replace"}, []string{"node id n2 is already a voter at raft address " + before, "still answers"}},
	} {
		dup := outsider(t, c, "n2", "dup-n2-"+tc.name, []string{n1.APIAddr()}, tc.extra...)
		err := dup.Start()
		if err == nil {
			t.Fatalf("%s: a second n2 (%s) started and joined; want it refused", tc.name, dup.APIAddr())
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("%s: the refused start does not say %q:\n%v", tc.name, w, err)
			}
		}
		if got := voterAddr(t, n1, "n2"); got != before {
			t.Fatalf("%s: n2's raft address is %q after the refused join, want %q", tc.name, got, before)
		}
	}
	leader, err := c.WaitLeader(10 * time.Second)
	harness.NoErr(t, err)
	st, err := n2.Status(5 * time.Second)
	harness.NoErr(t, err)
	if st.LeaderID != leader.ID {
		t.Fatalf("n2 sees leader %q, want %s", st.LeaderID, leader.ID)
	}
	if lines := auditLines(t, n1, "NODE_REPLACE"); len(lines) != 0 {
		t.Fatalf("refused joins were audited as replacements: %q", lines)
	}
}

// testMembershipAudited: the voters added at the cluster's start, a node
// added, replaced on purpose (--replace once it is dead), removed, and a
// leadership transfer each leave their line in the audit trail.
func testMembershipAudited(t *testing.T, c *harness.Cluster) {
	n1 := c.Node("n1")
	for _, id := range []string{"n2", "n3"} {
		waitAudit(t, n1, "NODE_JOIN", "["+id+"] NODE_JOIN: added as a voter at raft ")
	}
	n4, err := c.AddNode()
	harness.NoErr(t, err)
	// Caught up before it dies: DataDirOfAnotherNodeOrCluster reads the
	// cluster id from its data dir.
	_, err = c.WaitCaughtUp(n4, 15*time.Second)
	harness.NoErr(t, err)
	harness.NoErr(t, n4.Kill())
	// n4 rebuilt: a new data dir, the same id, --replace.
	r4 := outsider(t, c, "n4", "n4-rebuilt", []string{n1.APIAddr()}, "--replace")
	harness.NoErr(t, r4.Start())
	waitAudit(t, n1, "NODE_REPLACE", "[n4] NODE_REPLACE: replaced voter n4 at raft "+n4.RaftAddr()+" with raft "+r4.RaftAddr())
	harness.NoErr(t, c.RemoveNode(n4)) // the voter n4: the rebuilt node
	waitAudit(t, n1, "NODE_REMOVE", "[n4] NODE_REMOVE: removed from the voters (raft "+r4.RaftAddr()+")")
	harness.NoErr(t, r4.Stop())

	leader, err := c.WaitLeader(10 * time.Second)
	harness.NoErr(t, err)
	ctx, cancel := testenv.Context(t)
	defer cancel()
	res, err := n1.Client().TransferLeadership(ctx, "")
	harness.NoErr(t, err)
	waitAudit(t, n1, "LEADER_TRANSFER", fmt.Sprintf("[%s] LEADER_TRANSFER: leadership transferred from %s on request", res.LeaderID, leader.ID))
	_, err = c.WaitLeader(10 * time.Second)
	harness.NoErr(t, err)
}

// auditLines are the lines of n's audit trail with label.
func auditLines(t *testing.T, n *harness.Node, label string) []string {
	t.Helper()
	var out []string
	after := uint64(0)
	for range 100 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		page, err := n.Client().Audit(ctx, after, 500, api.Strong)
		cancel()
		harness.NoErr(t, err)
		for _, e := range page.Events {
			after = e.Seq
			if e.Label == label {
				out = append(out, e.Line)
			}
		}
		if !page.HasMore {
			return out
		}
	}
	t.Fatalf("the audit trail of %s has more than 100 pages", n.ID)
	return nil
}

// waitAudit waits until n's audit trail has a line with label that
// contains want.
func waitAudit(t *testing.T, n *harness.Node, label, want string) {
	t.Helper()
	harness.NoErr(t, harness.WaitFor(15*time.Second, "an audit line "+want, func() error {
		lines := auditLines(t, n, label)
		for _, l := range lines {
			if strings.Contains(l, want) {
				return nil
			}
		}
		return fmt.Errorf("%s lines: %q", label, lines)
	}))
}

// connsPerClient is the cluster's --max-conns-per-client.
const connsPerClient = 32

// connClient is the loopback address the connection checks dial from, so
// that their client address is theirs alone (the nodes and the harness
// call from 127.0.0.1).
const connClient = "127.0.0.77"

// dialFrom opens a TCP connection to addr from connClient.
func dialFrom(t *testing.T, addr string) net.Conn {
	t.Helper()
	return dialFromHost(t, addr, connClient)
}

// closedByServer reports whether the server closed conn: a read returns
// EOF (or a reset) before the deadline, after whatever response came
// first. A read that times out means the connection is still open.
func closedByServer(conn net.Conn, within time.Duration) (bool, string) {
	_ = conn.SetReadDeadline(time.Now().Add(within))
	got, err := io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false, string(got)
	}
	return true, string(got)
}

// healthz sends GET /healthz on conn and reads the answer's status line;
// an error when the server closed conn instead.
func healthz(conn net.Conn, host string) (string, error) {
	if _, err := fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", host); err != nil {
		return "", err
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer conn.SetReadDeadline(time.Time{})
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	return res.Status, nil
}

// testConnectionsBounded: an idle keep-alive connection is closed, a
// request whose body stalls ends and its connection closes, one client
// address holds at most --max-conns-per-client connections (the next is
// closed unanswered, and a freed slot serves again), and a stream that
// outlives every timeout still delivers.
func testConnectionsBounded(t *testing.T, c *harness.Cluster) {
	n1 := c.Node("n1")
	addr := n1.APIAddr()
	// Bounds of the waits, well beyond the 1 s timeouts.
	const within = 15 * time.Second

	t.Run("IdleKeepAliveClosed", func(t *testing.T) {
		conn := dialFrom(t, addr)
		if st, err := healthz(conn, addr); err != nil || st != "200 OK" {
			t.Fatalf("GET /healthz: %q, %v", st, err)
		}
		if closed, _ := closedByServer(conn, within); !closed {
			t.Fatalf("an idle keep-alive connection is still open after %s (--http-idle-timeout 1s)", within)
		}
	})

	t.Run("StalledBodyEnds", func(t *testing.T) {
		conn := dialFrom(t, addr)
		_, err := fmt.Fprintf(conn, "POST /v1/messages HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"+
			"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"from\":", addr, c.Security().AdminToken)
		harness.NoErr(t, err)
		closed, got := closedByServer(conn, within)
		if !closed {
			t.Fatalf("a request whose body stalled still holds its connection after %s (--http-body-timeout 1s); read %q", within, got)
		}
		if !strings.Contains(got, "408") || !strings.Contains(got, "request body stalled") {
			t.Fatalf("the stalled request's answer: %q, want 408 saying the body stalled", got)
		}
	})

	t.Run("PerClientLimit", func(t *testing.T) {
		held := make([]net.Conn, connsPerClient)
		for i := range held {
			held[i] = dialFrom(t, addr)
		}
		// Every held connection is served: the server accepted them all.
		for i, conn := range held {
			if st, err := healthz(conn, addr); err != nil || st != "200 OK" {
				t.Fatalf("held connection %d: GET /healthz: %q, %v", i, st, err)
			}
		}
		over := dialFrom(t, addr)
		if st, err := healthz(over, addr); err == nil {
			t.Fatalf("connection %d of %s was served (%s); want it closed unanswered (--max-conns-per-client %d)",
				connsPerClient+1, connClient, st, connsPerClient)
		}
		// Another client address is not affected.
		if st, err := healthz(dialFromHost(t, addr, "127.0.0.78"), addr); err != nil || st != "200 OK" {
			t.Fatalf("another client's connection: GET /healthz: %q, %v", st, err)
		}
		_ = held[0].Close()
		harness.NoErr(t, harness.WaitFor(within, "a freed slot to serve "+connClient+" again", func() error {
			st, err := healthz(dialFrom(t, addr), addr)
			if err != nil {
				return err
			}
			if st != "200 OK" {
				return harness.Permanent(fmt.Errorf("GET /healthz: %s", st))
			}
			return nil
		}))
	})

	t.Run("StreamOutlivesTimeouts", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		events := make(chan api.StreamEvent, 16)
		done := make(chan error, 1)
		go func() {
			done <- n1.Client().Stream(ctx, api.StreamQuery{Channel: "conns"}, func(ev api.StreamEvent) error {
				select {
				case events <- ev:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
		}()
		select {
		case ev := <-events:
			if !ev.Ready {
				t.Fatalf("first stream event %+v, want ready", ev)
			}
		case err := <-done:
			t.Fatalf("stream ended before it was ready: %v", err)
		}
		// Longer than both timeouts: the stream only writes.
		time.Sleep(2500 * time.Millisecond)
		m := &api.Message{From: "conns-a", To: api.Recipients{"all"}, Channel: "conns", Content: api.Content{Text: "still here"}}
		m.Normalize(time.Now())
		_, err := c.Node("n2").Client().Send(ctx, m)
		harness.NoErr(t, err)
		for {
			select {
			case ev := <-events:
				if ev.Message != nil && ev.Message.ID == m.ID {
					return
				}
			case err := <-done:
				t.Fatalf("the stream ended after the timeouts passed: %v", err)
			case <-ctx.Done():
				t.Fatal("the stream did not deliver the message sent after the timeouts")
			}
		}
	})
}

// dialFromHost opens a TCP connection to addr from the loopback IP from.
func dialFromHost(t *testing.T, addr, from string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	conn, err := d.Dial("tcp", addr)
	harness.NoErr(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// rogue is a gossip member that is no node of the cluster (the cluster's
// gossip has no key, so anyone who reaches it may join): it advertises an
// API address of its own and claims to host agent victim, so that an
// interrupt of victim would be relayed to it.
type rogue struct {
	meta  []byte
	state []byte
}

func (r *rogue) NodeMeta(limit int) []byte                  { return r.meta }
func (r *rogue) NotifyMsg([]byte)                           {}
func (r *rogue) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (r *rogue) LocalState(join bool) []byte                { return r.state }
func (r *rogue) MergeRemoteState(buf []byte, join bool)     {}

// testRogueGossipMember: an interrupt of an agent a rogue gossip member
// claims to host is not relayed to the address it advertises (it is not
// in the Raft configuration), so the rogue sees no request, let alone
// the admin token; the alert is still stored and the answer says why no
// ESC was pressed.
func testRogueGossipMember(t *testing.T, c *harness.Cluster) {
	n1 := c.Node("n1")
	var mu sync.Mutex
	var seen []string // Authorization headers the rogue's API received
	trap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"agent":"victim","node":"rogue","escape":true}`)
	}))
	defer trap.Close()

	now := time.Now()
	rec := api.Presence{AgentID: "victim", Node: "rogue", State: "AWAKE", Substate: "IDLE", Channel: "dev",
		Timestamp: now.UTC(), Version: uint64(now.UnixMicro()), Origin: "rogue"}
	state, err := json.Marshal([]api.Presence{rec})
	harness.NoErr(t, err)
	meta, err := json.Marshal(map[string]string{"id": "rogue", "api": strings.TrimPrefix(trap.URL, "http://")})
	harness.NoErr(t, err)
	mc := memberlist.DefaultLocalConfig()
	mc.Name, mc.BindAddr, mc.BindPort, mc.AdvertisePort = "rogue", "127.0.0.1", 0, 0
	mc.Delegate = &rogue{meta: meta, state: append([]byte{1}, state...)} // 1: cluster's statePresence
	mc.LogOutput = io.Discard
	ml, err := memberlist.Create(mc)
	harness.NoErr(t, err)
	defer func() { _ = ml.Shutdown() }()
	_, err = ml.Join([]string{n1.GossipAddr()})
	harness.NoErr(t, err)
	harness.NoErr(t, harness.WaitFor(15*time.Second, "n1 to take victim's presence from the rogue", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p, err := n1.Client().AgentPresence(ctx, "victim")
		if err != nil {
			return err
		}
		if p.Node != "rogue" {
			return fmt.Errorf("victim's presence is on %q", p.Node)
		}
		return nil
	}))

	ctx, cancel := testenv.Context(t)
	defer cancel()
	registerNames(t, c, nil, "victim")
	res, err := n1.Client().InterruptAgent(ctx, "victim", api.InterruptRequest{From: "boss", Reason: "stop", Channel: "dev"})
	harness.NoErr(t, err)
	mu.Lock()
	got := append([]string(nil), seen...)
	mu.Unlock()
	if len(got) != 0 {
		t.Fatalf("the rogue gossip member's API received %q; want no call (the admin token is %q)", got, c.Security().AdminToken)
	}
	if res.Escape || res.ID == "" || !strings.Contains(res.NoEscape, "not in the Raft configuration") {
		t.Fatalf("interrupt of victim = %+v; want the alert stored and no ESC, saying rogue is not in the Raft configuration", res)
	}
}

// testAuthNeedsGossipKey: maosd with --auth refuses gossip in the clear
// on an address beyond loopback, naming --gossip-key-file and
// --insecure-gossip, before it opens anything.
func testAuthNeedsGossipKey(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "admin.token")
	harness.NoErr(t, os.WriteFile(tokenFile, []byte("0123456789abcdef0123456789abcdef\n"), 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, maosdBin, "--auth", "--admin-token-file", tokenFile, "--node-id", "lone",
		"--data-dir", filepath.Join(dir, "data"), "--http-addr", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0",
		"--gossip-addr", "0.0.0.0:0", "--gossip-advertise", "192.0.2.1:7946")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("maosd --auth with gossip in the clear on 0.0.0.0: %v; want exit status 2; output:\n%s", err, out)
	}
	for _, w := range []string{"--gossip-addr 0.0.0.0:0", "--gossip-key-file", "--insecure-gossip"} {
		if !strings.Contains(string(out), w) {
			t.Fatalf("the refusal does not say %q:\n%s", w, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused maosd made its data dir (%v)", err)
	}
}

// copyDir copies the regular files under src to dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	harness.NoErr(t, filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o700)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, data, 0o600)
	}))
}

// testDataDirOfAnother: a node started on another node's data dir (here
// n4's, with --node-id n9) refuses to start, naming the node id, the data
// dir's cluster and its voters; a node whose data dir holds another
// cluster (x1, bootstrapped alone) started with --join of this one
// refuses, naming both clusters' ids.
func testDataDirOfAnother(t *testing.T, c *harness.Cluster) {
	n1 := c.Node("n1")
	st, err := n1.Status(5 * time.Second)
	harness.NoErr(t, err)
	if st.ClusterID == "" {
		t.Fatal("n1's status has no cluster id")
	}
	var n4 *harness.Node
	for _, n := range c.Removed() {
		if n.ID == "n4" {
			n4 = n
		}
	}
	if n4 == nil {
		t.Fatal("no removed n4 (MembershipAudited) to take a data dir from")
	}
	n9 := outsider(t, c, "n9", "n9-on-n4s-data", nil)
	copyDir(t, n4.DataDir, n9.DataDir)
	err = n9.Start()
	if err == nil {
		t.Fatal("n9 started on n4's data dir; want it refused")
	}
	for _, w := range []string{"--node-id n9 does not match the data dir " + n9.DataDir, "cluster " + st.ClusterID, "no node n9", "n1 at "} {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("the refusal does not say %q:\n%v", w, err)
		}
	}

	x1 := outsider(t, c, "x1", "x1", nil)
	harness.NoErr(t, x1.Start())
	var other string
	harness.NoErr(t, harness.WaitFor(15*time.Second, "x1 to fix its cluster id", func() error {
		xst, err := x1.Status(5 * time.Second)
		if err != nil {
			return err
		}
		if other = xst.ClusterID; other == "" {
			return errors.New("no cluster id yet")
		}
		return nil
	}))
	if other == st.ClusterID {
		t.Fatalf("two clusters share the id %s", other)
	}
	harness.NoErr(t, x1.Stop())
	// x1's data dir, started again with --join of this cluster.
	sec := c.Security()
	again, err := harness.NewNode(harness.NodeConfig{ID: "x1", Dir: x1.Dir, Maosd: maosdBin, Join: []string{n1.APIAddr()},
		Security: &harness.NodeSecurity{NoTLS: true, AdminTokenFile: sec.AdminTokenFile, AdminToken: sec.AdminToken}})
	harness.NoErr(t, err)
	t.Cleanup(func() {
		if again.Running() {
			_ = again.Kill()
		}
	})
	err = again.Start()
	if err == nil {
		t.Fatal("x1 (another cluster's data dir) started with --join of this cluster; want it refused")
	}
	for _, w := range []string{"holds cluster " + other, "belongs to cluster " + st.ClusterID} {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("the refusal does not say %q:\n%v", w, err)
		}
	}
	// With a --join that does not answer (x1's own old address), the node
	// starts from its data dir and warns that --join is ignored.
	own, err := harness.NewNode(harness.NodeConfig{ID: "x1", Dir: x1.Dir, Maosd: maosdBin, Join: []string{x1.APIAddr()},
		Security: &harness.NodeSecurity{NoTLS: true, AdminTokenFile: sec.AdminTokenFile, AdminToken: sec.AdminToken}})
	harness.NoErr(t, err)
	t.Cleanup(func() {
		if own.Running() {
			_ = own.Kill()
		}
	})
	harness.NoErr(t, own.Start())
	if tail := own.LogTail(200); !strings.Contains(tail, `"level":"WARN","msg":"--join is ignored`) {
		t.Fatalf("a node with state started with --join does not warn that --join is ignored:\n%s", tail)
	}
	harness.NoErr(t, own.Stop())
}

// testJoinAtRaftPort: --join given a member's Raft address (not its API)
// ends the start with one line saying so, instead of retrying forever.
func testJoinAtRaftPort(t *testing.T, c *harness.Cluster) {
	n := outsider(t, c, "n10", "n10-raft-port", []string{c.Node("n1").RaftAddr()})
	err := n.Start()
	if err == nil {
		t.Fatal("a node joining through a Raft port started")
	}
	if !strings.Contains(err.Error(), "--join "+c.Node("n1").RaftAddr()+": something listens there but does not answer HTTP") ||
		!strings.Contains(err.Error(), "--http-addr") {
		t.Fatalf("the refusal does not say the address is no API:\n%v", err)
	}
}

// testJoinTLSMismatch: a node with TLS joining through a member that
// serves plain HTTP ends its start with one line saying so.
func testJoinTLSMismatch(t *testing.T, c *harness.Cluster) {
	sec, err := c.Security().Node("n11", "127.0.0.1")
	harness.NoErr(t, err)
	sec.GossipKeyFile = ""
	n, err := harness.NewNode(harness.NodeConfig{ID: "n11", Dir: filepath.Join(c.Dir, "n11-tls"), Maosd: maosdBin,
		Join: []string{c.Node("n1").APIAddr()}, Security: sec})
	harness.NoErr(t, err)
	t.Cleanup(func() {
		if n.Running() {
			_ = n.Kill()
		}
	})
	err = n.Start()
	if err == nil {
		t.Fatal("a node with TLS joined a cluster without it")
	}
	if !strings.Contains(err.Error(), "--join "+c.Node("n1").APIAddr()+": it serves plain HTTP and this node runs with TLS") {
		t.Fatalf("the refusal does not name the TLS mismatch:\n%v", err)
	}
}
