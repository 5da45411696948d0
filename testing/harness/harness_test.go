package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as a fake maosd (see fakeMaosd) when this
// variable is set, so the lifecycle of Node is tested without building or
// running the real one.
const fakeEnv = "HARNESS_FAKE_MAOSD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeEnv); mode != "" {
		os.Exit(fakeMaosd(mode, os.Args[1:]))
	}
	if addr := os.Getenv(dialEnv); addr != "" {
		os.Exit(dialOnce(addr))
	}
	os.Exit(m.Run())
}

// fakeMaosd behaves like maosd as far as the harness can tell: it binds
// --http-addr (port 0 picks one), logs the JSON ready line on stderr and
// exits 0 on SIGTERM. Given --raft-advertise it also binds --raft-addr,
// logs the open line with the bound address, advertises the other one and
// echoes what it receives on the Raft port. mode "fail" exits 1 before the
// ready line; "crash" exits 2 a moment after it.
func fakeMaosd(mode string, args []string) int {
	flags := map[string]string{}
	for i := 0; i+1 < len(args); i++ {
		if strings.HasPrefix(args[i], "--") {
			flags[args[i][2:]] = args[i+1]
		}
	}
	if mode == "fail" {
		fmt.Fprintln(os.Stderr, "fake maosd: boom")
		return 1
	}
	ln, err := net.Listen("tcp", flags["http-addr"])
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake maosd: --http-addr:", err)
		return 1
	}
	defer ln.Close()
	raft := flags["raft-addr"]
	if adv := flags["raft-advertise"]; adv != "" {
		rln, err := net.Listen("tcp", raft)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fake maosd: --raft-addr:", err)
			return 1
		}
		defer rln.Close()
		go func() {
			for {
				c, err := rln.Accept()
				if err != nil {
					return
				}
				go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
			}
		}()
		open, _ := json.Marshal(map[string]string{"level": "INFO", "msg": OpenMessage, "node": flags["node-id"],
			"raft_addr": adv, "raft_bind": rln.Addr().String()})
		fmt.Fprintln(os.Stderr, string(open))
		raft = adv
	} else if strings.HasSuffix(raft, ":0") {
		raft = "127.0.0.1:1" // fixed: nothing dials it
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	line, _ := json.Marshal(map[string]string{"level": "INFO", "msg": ReadyMessage,
		"node_id": flags["node-id"], "api_addr": ln.Addr().String(), "raft_addr": raft})
	// Written in two pieces, as a pipe may deliver it.
	os.Stderr.Write(line[:10])
	os.Stderr.Write(append(line[10:], '\n'))
	if mode == "crash" {
		time.Sleep(50 * time.Millisecond)
		return 2
	}
	<-sig
	fmt.Fprintln(os.Stderr, "fake maosd: SIGTERM")
	return 0
}

func fakeNode(t *testing.T, mode string) *Node {
	t.Helper()
	exe, err := os.Executable()
	NoErr(t, err)
	n, err := NewNode(NodeConfig{ID: "n1", Dir: filepath.Join(t.TempDir(), "n1"), Maosd: exe,
		Join: []string{"127.0.0.1:9"}, Env: []string{fakeEnv + "=" + mode},
		StartTimeout: 20 * time.Second, StopTimeout: 10 * time.Second})
	NoErr(t, err)
	t.Cleanup(func() {
		if n.Running() {
			_ = n.Kill()
		}
	})
	return n
}

func TestNodeLifecycle(t *testing.T) {
	n := fakeNode(t, "run")
	NoErr(t, n.Start())
	apiAddr, raft := n.APIAddr(), n.RaftAddr()
	if apiAddr == "" || strings.HasSuffix(apiAddr, ":0") || raft != "127.0.0.1:1" || n.Client() == nil {
		t.Fatalf("after the first start: api %q raft %q client %v", apiAddr, raft, n.Client())
	}
	if !n.Running() || !n.Live() || n.PID() == 0 {
		t.Fatalf("after start: running %v live %v pid %d", n.Running(), n.Live(), n.PID())
	}
	if err := n.Start(); err == nil {
		t.Fatal("a second Start of a running node succeeded")
	}

	NoErr(t, n.Pause())
	if !n.Paused() || n.Live() {
		t.Fatalf("after pause: paused %v live %v", n.Paused(), n.Live())
	}
	if st, err := procState(n.PID()); err == nil && st != "T" && st != "t" {
		t.Fatalf("after pause the process is in state %s", st)
	}
	NoErr(t, n.Resume())
	if n.Paused() || !n.Live() {
		t.Fatalf("after resume: paused %v live %v", n.Paused(), n.Live())
	}

	NoErr(t, n.Kill())
	if n.Running() || n.PID() != 0 || n.Live() {
		t.Fatalf("after Kill: running %v pid %d live %v", n.Running(), n.PID(), n.Live())
	}
	if err := n.Kill(); err == nil {
		t.Fatal("Kill of a dead node succeeded")
	}

	// A restart reuses the addresses and does not join.
	NoErr(t, n.Restart())
	if n.APIAddr() != apiAddr || n.RaftAddr() != raft {
		t.Fatalf("restart moved the node: api %s raft %s, was %s %s", n.APIAddr(), n.RaftAddr(), apiAddr, raft)
	}
	log := n.LogTail(1000)
	starts := strings.Split(log, "=== harness: start #")
	if len(starts) != 3 {
		t.Fatalf("want 2 start headers in the log, got %d:\n%s", len(starts)-1, log)
	}
	if !strings.Contains(starts[1], "--http-addr 127.0.0.1:0") || !strings.Contains(starts[1], "--join 127.0.0.1:9") {
		t.Errorf("first start: want port 0 and --join:\n%s", starts[1])
	}
	if !strings.Contains(starts[2], "--http-addr "+apiAddr) || !strings.Contains(starts[2], "--raft-addr "+raft) ||
		strings.Contains(starts[2], "--join") {
		t.Errorf("restart: want the same addresses and no --join:\n%s", starts[2])
	}

	// Stop of a paused node resumes it so it can act on SIGTERM.
	NoErr(t, n.Pause())
	NoErr(t, n.Stop())
	if n.Running() {
		t.Fatal("still running after Stop")
	}
	if !strings.Contains(n.LogTail(5), "fake maosd: SIGTERM") {
		t.Errorf("the node did not see SIGTERM:\n%s", n.LogTail(5))
	}
	if u := n.UnexpectedExits(); len(u) != 0 {
		t.Errorf("exits the harness caused were reported as unexpected: %q", u)
	}
	if n.Starts() != 2 {
		t.Errorf("Starts() = %d, want 2", n.Starts())
	}
}

func TestNodeStartFailure(t *testing.T) {
	n := fakeNode(t, "fail")
	err := n.Start()
	if err == nil || !strings.Contains(err.Error(), "exited before it was ready") || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("Start of a failing maosd: %v", err)
	}
	if n.Running() || len(n.UnexpectedExits()) != 0 {
		t.Errorf("after a failed start: running %v, unexpected exits %q", n.Running(), n.UnexpectedExits())
	}
}

func TestNodeCrashIsReported(t *testing.T) {
	n := fakeNode(t, "crash")
	NoErr(t, n.Start())
	NoErr(t, WaitFor(10*time.Second, "the crash to be recorded", func() error {
		if len(n.UnexpectedExits()) == 0 {
			return errors.New("no unexpected exit yet")
		}
		return nil
	}))
	if u := n.UnexpectedExits()[0]; !strings.Contains(u, "exit status 2") {
		t.Errorf("unexpected exit report: %s", u)
	}
}

func TestParseReady(t *testing.T) {
	for _, tc := range []struct {
		line string
		ok   bool
	}{
		{`{"time":"x","level":"INFO","msg":"maosd ready to serve","node_id":"n1","api_addr":"127.0.0.1:5","raft_addr":"127.0.0.1:6"}`, true},
		{`{"msg":"maosd ready to serve","api_addr":"127.0.0.1:5"}`, false},
		{`{"msg":"not maosd ready to serve","api_addr":"a:1","raft_addr":"b:2"}`, false},
		{`time=x level=INFO msg="maosd ready to serve" api_addr=127.0.0.1:5`, false},
		{`{"msg":"node open","api_addr":"127.0.0.1:5","raft_addr":"127.0.0.1:6"}`, false},
	} {
		r, ok := parseReady([]byte(tc.line))
		if ok != tc.ok || ok && (r.APIAddr != "127.0.0.1:5" || r.RaftAddr != "127.0.0.1:6" || r.NodeID != "n1") {
			t.Errorf("parseReady(%s) = %+v, %v; want ok=%v", tc.line, r, ok, tc.ok)
		}
	}
}

func TestLastLines(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"a\nb\nc\n", 2, "b\nc"},
		{"a\nb\nc", 5, "a\nb\nc"},
		{"a\nb\nc\n", 0, ""},
		{"", 3, ""},
	} {
		if got := lastLines(tc.in, tc.n); got != tc.want {
			t.Errorf("lastLines(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

func TestWaitFor(t *testing.T) {
	calls := 0
	err := WaitFor(100*time.Millisecond, "the impossible", func() error {
		calls++
		return fmt.Errorf("still %d", calls)
	})
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "the impossible") ||
		!strings.Contains(err.Error(), fmt.Sprintf("still %d", calls)) || calls < 2 {
		t.Errorf("WaitFor timeout after %d calls: %v", calls, err)
	}
	calls = 0
	sentinel := errors.New("cannot happen any more")
	err = WaitFor(10*time.Second, "x", func() error { calls++; return Permanent(sentinel) })
	if !errors.Is(err, sentinel) || calls != 1 {
		t.Errorf("WaitFor with a permanent error: %v after %d calls", err, calls)
	}
	n := 0
	NoErr(t, WaitFor(10*time.Second, "third call", func() error {
		if n++; n < 3 {
			return errors.New("not yet")
		}
		return nil
	}))
}

func TestModuleRoot(t *testing.T) {
	root, err := ModuleRoot()
	NoErr(t, err)
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	NoErr(t, err)
	if !strings.Contains(string(b), "module github.com/maos-project/maos") {
		t.Errorf("ModuleRoot found %s, not maos's go.mod", root)
	}
}

// A node with a Raft IP and proxy binds Raft on that IP, advertises the
// proxy, points the proxy at its real Raft port as soon as it logs it, and
// keeps all three across a restart.
func TestProxiedNodeAddresses(t *testing.T) {
	const ip = "127.0.0.51"
	needLoopbackIPs(t, ip)
	p, err := NewProxy("127.0.0.1:0")
	NoErr(t, err)
	t.Cleanup(func() { p.Close() })
	exe, err := os.Executable()
	NoErr(t, err)
	n, err := NewNode(NodeConfig{ID: "n1", Dir: filepath.Join(t.TempDir(), "n1"), Maosd: exe,
		Env: []string{fakeEnv + "=run"}, RaftIP: ip, RaftProxy: p})
	NoErr(t, err)
	t.Cleanup(func() {
		if n.Running() {
			_ = n.Kill()
		}
	})
	NoErr(t, n.Start())
	bind := n.RaftBindAddr()
	if host, port, _ := net.SplitHostPort(bind); host != ip || port == "0" || n.RaftAddr() != p.Addr() || p.Target() != bind {
		t.Fatalf("raft advertised %s bound %s, proxy %s -> %s; want bound on %s, advertising the proxy", n.RaftAddr(), bind, p.Addr(), p.Target(), ip)
	}
	dialFrom(t, "127.0.0.1", p.Addr()).mustEcho("through the proxy")

	NoErr(t, n.Restart())
	if n.RaftBindAddr() != bind || n.RaftAddr() != p.Addr() || p.Target() != bind {
		t.Fatalf("after restart: raft %s bound %s, proxy target %s; want %s bound %s", n.RaftAddr(), n.RaftBindAddr(), p.Target(), p.Addr(), bind)
	}
	starts := strings.Split(n.LogTail(1000), "=== harness: start #")
	if len(starts) != 3 || !strings.Contains(starts[1], "--raft-addr "+ip+":0 --raft-advertise "+p.Addr()) ||
		!strings.Contains(starts[2], "--raft-addr "+bind+" --raft-advertise "+p.Addr()) {
		t.Errorf("command lines: want port 0 on %s first, then %s, both advertising %s:\n%s", ip, bind, p.Addr(), n.LogTail(1000))
	}
	dialFrom(t, "127.0.0.1", p.Addr()).mustEcho("after restart")
}

func TestParseOpen(t *testing.T) {
	for _, tc := range []struct {
		line string
		want string
	}{
		{`{"level":"INFO","msg":"node open","node":"n1","raft_addr":"127.0.0.1:5","raft_bind":"127.0.0.12:6"}`, "127.0.0.12:6"},
		{`{"level":"INFO","msg":"node open","node":"n1","raft_addr":"127.0.0.1:5"}`, ""},
		{`{"msg":"maosd ready to serve","raft_bind":"127.0.0.12:6"}`, ""},
		{`time=x msg="node open" raft_bind=127.0.0.12:6`, ""},
	} {
		got, ok := parseOpen([]byte(tc.line))
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("parseOpen(%s) = %q, %v; want %q", tc.line, got, ok, tc.want)
		}
	}
}
