package harness

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/maos-project/maos/testing/testenv"
)

// The test binary doubles as a TCP dialer run inside a namespace (ip netns
// exec) when this variable holds an address: it exits 0 if it connects
// within dialTimeout, 1 otherwise.
const (
	dialEnv     = "HARNESS_DIAL"
	dialTimeout = 1500 * time.Millisecond
)

func dialOnce(addr string) int {
	c, err := net.DialTimeout("tcp", addr, dialTimeout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dial:", err)
		return 1
	}
	c.Close()
	return 0
}

// fakeNetnsCluster is a namespace-mode cluster of k fake maosd nodes, not
// started; its network and nodes are removed at the test's end.
func fakeNetnsCluster(t *testing.T, k int) *Cluster {
	t.Helper()
	RequireNetns(t)
	h, err := newHostNet()
	NoErr(t, err)
	exe, err := os.Executable()
	NoErr(t, err)
	c := &Cluster{Dir: t.TempDir(), net: h, opts: Options{Netns: true}}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			if n.Running() {
				_ = n.Kill()
			}
		}
		if err := h.close(); err != nil {
			t.Error(err)
		}
	})
	for i := 1; i <= k; i++ {
		id := fmt.Sprintf("n%d", i)
		host, err := h.addHost(id, i)
		NoErr(t, err)
		n, err := NewNode(NodeConfig{ID: id, Dir: filepath.Join(c.Dir, id), Maosd: exe, IP: host.ip, Netns: host.ns,
			Env: []string{fakeEnv + "=run"}, StartTimeout: 20 * time.Second, StopTimeout: 10 * time.Second})
		NoErr(t, err)
		c.nodes = append(c.nodes, n)
	}
	return c
}

// reaches reports whether a TCP connection from node from's namespace to
// addr succeeds.
func reaches(t *testing.T, from *Node, addr string) bool {
	t.Helper()
	exe, err := os.Executable()
	NoErr(t, err)
	ctx, cancel := testenv.Context(t)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", from.Netns(), exe)
	cmd.Env = append(os.Environ(), dialEnv+"="+addr)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("the dialer in %s did not return: %s", from.Netns(), out)
	}
	return err == nil
}

// netnsInode is the inode of a network namespace file (/proc/PID/ns/net
// or /run/netns/NAME): equal inodes, same namespace.
func netnsInode(t *testing.T, path string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	NoErr(t, syscall.Stat(path, &st))
	return st.Ino
}

func TestNetnsNodeRunsInItsNamespace(t *testing.T) {
	c := fakeNetnsCluster(t, 1)
	n := c.nodes[0]
	exe, err := os.Executable()
	NoErr(t, err)
	check := func(when string) int {
		t.Helper()
		pid := n.PID()
		if pid == 0 {
			t.Fatalf("%s: no pid", when)
		}
		// ip netns exec execs: the PID the harness signals is the fake
		// maosd's own, in the node's namespace, not ip's.
		if got, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); got != exe {
			t.Fatalf("%s: pid %d runs %q, want the fake maosd %q", when, pid, got, exe)
		}
		if got, want := netnsInode(t, fmt.Sprintf("/proc/%d/ns/net", pid)), netnsInode(t, "/run/netns/"+n.Netns()); got != want {
			t.Fatalf("%s: pid %d is in network namespace %d, want %s's %d", when, pid, got, n.Netns(), want)
		}
		host, _, err := net.SplitHostPort(n.APIAddr())
		NoErr(t, err)
		if host != n.IP() || !strings.HasPrefix(host, "10.") {
			t.Fatalf("%s: api %s, want one on the node's address %s", when, n.APIAddr(), n.IP())
		}
		conn, err := net.DialTimeout("tcp", n.APIAddr(), 5*time.Second)
		if err != nil {
			t.Fatalf("%s: the test (the bridge, %s) cannot reach the node's API: %v", when, c.net.BridgeIP(), err)
		}
		conn.Close()
		return pid
	}
	NoErr(t, n.Start())
	first := check("first start")
	NoErr(t, n.Kill())
	if processAlive(first) {
		t.Fatalf("pid %d still exists after Kill", first)
	}
	NoErr(t, n.Start())
	second := check("restart after Kill")
	if second == first {
		t.Fatalf("the restart has the killed pid %d", first)
	}
	NoErr(t, n.Stop()) // the fake exits 0 on SIGTERM: the signal reached it
}

func TestNetnsCutsLinks(t *testing.T) {
	c := fakeNetnsCluster(t, 3)
	for _, n := range c.nodes {
		NoErr(t, n.Start())
	}
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	// want lists, for each ordered pair, whether from reaches to's API.
	expect := func(what string, cut map[[2]*Node]bool) {
		t.Helper()
		for _, from := range c.nodes {
			for _, to := range c.nodes {
				if from == to {
					continue
				}
				if got := reaches(t, from, to.APIAddr()); got == cut[[2]*Node{from, to}] {
					t.Errorf("%s: %s reaches %s: %v, want %v", what, from.ID, to.ID, got, !got)
				}
			}
			// The test process is another host: never cut.
			conn, err := net.DialTimeout("tcp", from.APIAddr(), 5*time.Second)
			if err != nil {
				t.Errorf("%s: the test cannot reach %s: %v", what, from.ID, err)
			} else {
				conn.Close()
			}
		}
	}
	holes := func(n *Node) []string {
		ips, err := c.net.blackholes(n.ID)
		NoErr(t, err)
		slices.Sort(ips)
		return ips
	}
	expect("whole", nil)

	NoErr(t, c.Partition([]*Node{n1}, []*Node{n2, n3}))
	if got, want := holes(n1), []string{n2.IP(), n3.IP()}; !slices.Equal(got, want) {
		t.Errorf("n1 blackholes %v, want %v", got, want)
	}
	expect("n1 isolated", map[[2]*Node]bool{{n1, n2}: true, {n1, n3}: true, {n2, n1}: true, {n3, n1}: true})
	if !c.Cut(n1, n2) || c.Cut(n2, n3) || !strings.Contains(c.describe(), "every plane partitioned: [n1] | [n2 n3]") {
		t.Errorf("Cut n1-n2 %v n2-n3 %v; describe %q", c.Cut(n1, n2), c.Cut(n2, n3), c.describe())
	}

	// n2 bridges n1 and n3, which do not see each other; the routes of
	// the partition before are replaced, not added to.
	NoErr(t, c.CutBetween([]*Node{n1}, []*Node{n3}))
	if got, want := holes(n1), []string{n3.IP()}; !slices.Equal(got, want) {
		t.Errorf("n1 blackholes %v, want %v", got, want)
	}
	if got := holes(n2); len(got) != 0 {
		t.Errorf("the bridge n2 blackholes %v", got)
	}
	expect("n2 bridges n1 and n3", map[[2]*Node]bool{{n1, n3}: true, {n3, n1}: true})
	if c.Partitions() != nil || !c.Cut(n3, n1) || c.Cut(n1, n2) {
		t.Errorf("Partitions %v, Cut n3-n1 %v n1-n2 %v", c.Partitions(), c.Cut(n3, n1), c.Cut(n1, n2))
	}

	// One way: n1's packets to n2 are dropped, n2's reach n1 -- but a TCP
	// handshake needs both, so neither connects.
	NoErr(t, c.CutOneWay([]*Node{n1}, []*Node{n2}))
	if got, want := holes(n1), []string{n2.IP()}; !slices.Equal(got, want) {
		t.Errorf("n1 blackholes %v, want %v", got, want)
	}
	if got := holes(n2); len(got) != 0 {
		t.Errorf("n2 blackholes %v; a one-way cut leaves its routes alone", got)
	}
	expect("n1 -> n2 dropped", map[[2]*Node]bool{{n1, n2}: true, {n2, n1}: true})

	NoErr(t, c.Heal())
	for _, n := range c.nodes {
		if got := holes(n); len(got) != 0 {
			t.Errorf("after Heal %s blackholes %v", n.ID, got)
		}
	}
	expect("healed", nil)
	if c.Cut(n1, n2) || c.describe() != strings.TrimSuffix(c.describe(), "cut") {
		t.Errorf("after Heal: %s", c.describe())
	}
	if err := c.CutOneWay([]*Node{n1}, []*Node{n1}); err == nil {
		t.Error("a one-way cut of n1 to itself was accepted")
	}
}

// netnsNames lists the namespaces and links whose names start with tag.
func netnsNames(t *testing.T, tag string) []string {
	t.Helper()
	var out []string
	// The name is the first field of `ip netns list`, the second of `ip
	// -o link show` ("7: NAME@peer: ...").
	for i, args := range [][]string{{"netns", "list"}, {"-o", "link", "show"}} {
		b, err := exec.Command("ip", args...).Output()
		NoErr(t, err)
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > i {
				name, _, _ := strings.Cut(strings.TrimSuffix(f[i], ":"), "@")
				if strings.HasPrefix(name, tag) {
					out = append(out, name)
				}
			}
		}
	}
	return out
}

func TestNetnsCloseRemovesEverything(t *testing.T) {
	RequireNetns(t)
	h, err := newHostNet()
	NoErr(t, err)
	for i := 1; i <= 2; i++ {
		_, err := h.addHost(fmt.Sprintf("n%d", i), i)
		NoErr(t, err)
	}
	got := netnsNames(t, h.tag)
	slices.Sort(got)
	want := []string{h.tag + "br", h.tag + "h1", h.tag + "h2", h.tag + "n1", h.tag + "n2"}
	if !slices.Equal(got, want) {
		t.Fatalf("made %v, want %v", got, want)
	}
	NoErr(t, h.close())
	if left := netnsNames(t, h.tag); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}

func TestNetnsRemovesStaleLeftovers(t *testing.T) {
	RequireNetns(t)
	// A PID that is gone: a child that ran and was reaped.
	done := exec.Command("true")
	NoErr(t, done.Run())
	dead := done.ProcessState.Pid()
	stale := netnsTag(dead, 7)
	alive := netnsTag(1, 7) // init never exits
	for _, tag := range []string{stale, alive} {
		NoErr(t, exec.Command("ip", "netns", "add", tag+"n1").Run())
		NoErr(t, exec.Command("ip", "link", "add", tag+"br", "type", "bridge").Run())
	}
	t.Cleanup(func() {
		_ = exec.Command("ip", "netns", "del", alive+"n1").Run()
		_ = exec.Command("ip", "link", "del", alive+"br").Run()
	})
	h, err := newHostNet()
	NoErr(t, err)
	NoErr(t, h.close())
	if left := netnsNames(t, stale); len(left) != 0 {
		t.Errorf("the leftovers of dead pid %d are still there: %v", dead, left)
	}
	if kept := netnsNames(t, alive); len(kept) != 2 {
		t.Errorf("the names of live pid 1 were touched: %v left, want 2", kept)
	}
}

func TestNetnsNames(t *testing.T) {
	maxTag := netnsTag(1<<22, 36*36-1) // the largest PID and cluster number
	for _, name := range []string{maxTag + "br", maxTag + "h99", maxTag + "p99", maxTag + "n99"} {
		if len(name) > 15 {
			t.Errorf("%q is longer than an interface name may be (15 bytes)", name)
		}
		if !netnsName.MatchString(name) {
			t.Errorf("%q does not match the pattern stale leftovers are found by", name)
		}
	}
	for _, name := range []string{"maosd", "maos12-3", "maos12-3x1", "xmaos12-3br", "maos12-3br0", "eth0"} {
		if netnsName.MatchString(name) || staleName(name) {
			t.Errorf("%q would be taken for a harness name", name)
		}
	}
	if staleName(netnsTag(os.Getpid(), 1) + "br") {
		t.Error("this process's own names are taken for stale")
	}
}

func TestNetnsUnavailableSaysWhy(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no ip
	want := "iproute2"
	if os.Geteuid() != 0 {
		want = "needs root" // said first: the -short tier runs without root
	}
	err := NetnsAvailable()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("NetnsAvailable without ip = %v, want it to say %q", err, want)
	}
	_, err = StartCluster(Options{Maosd: "maosd", Netns: true})
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("StartCluster(Netns) without ip = %v, want it to say %q", err, want)
	}
	_, err = StartCluster(Options{Maosd: "maosd", Netns: true, Nodes: netnsMaxNodes + 1})
	if err == nil || !strings.Contains(err.Error(), "at most 99 nodes") {
		t.Fatalf("StartCluster(Netns, 100 nodes) = %v", err)
	}
}

// A cut that cannot be made in one namespace says which, and the cuts
// that were made elsewhere are in force and reported.
func TestNetnsCutFailureSaysWhich(t *testing.T) {
	c := fakeNetnsCluster(t, 2)
	n1, n2 := c.nodes[0], c.nodes[1]
	NoErr(t, exec.Command("ip", "netns", "del", n2.Netns()).Run())
	err := c.Partition([]*Node{n1})
	if err == nil || !strings.Contains(err.Error(), "n2: ip -n "+n2.Netns()) {
		t.Fatalf("Partition with n2's namespace gone = %v, want an error naming n2 and its namespace", err)
	}
	holes, herr := c.net.blackholes(n1.ID)
	NoErr(t, herr)
	if !slices.Equal(holes, []string{n2.IP()}) || !c.net.drops[link{"n1", "n2"}] || c.net.drops[link{"n2", "n1"}] {
		t.Fatalf("after the failed cut n1 blackholes %v, drops %v; want n1 -> n2 only", holes, c.net.drops)
	}
	if !c.Cut(n1, n2) || c.Partitions() != nil || !strings.Contains(c.describe(), "every plane cut: n1->n2") {
		t.Fatalf("after the failed cut: Cut %v, Partitions %v, %s", c.Cut(n1, n2), c.Partitions(), c.describe())
	}
}
