package harness

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/maos-project/maos/testing/testenv"
)

// Namespace mode (Options.Netns): every node is a host of its own, a Linux
// network namespace with one veth into a private bridge in the test's
// (root) namespace, on a test-only /24 subnet. The bridge holds .1 (the
// test process: a client on another host); node n<k> holds .(10+k).
//
// Every name the harness makes (namespaces, the bridge, veths) is
//
//	maos<pid base 36>-<cluster number base 36><suffix>
//
// so it fits the kernel's 15 bytes for an interface name, two clusters of
// one process or of two test binaries never collide, and a leftover of a
// run that died before Close (SIGKILLed by `go test -timeout`) names the
// PID that made it: the next cluster removes it when that PID is dead.
const (
	netnsPrefix = "maos"
	// netnsMaxNodes bounds the node count so that suffixes fit (h99) and
	// addresses stay below .255.
	netnsMaxNodes = 99
	// nodeHostByte + k is the last byte of n<k>'s address; bridgeHostByte
	// is the bridge's.
	nodeHostByte   = 10
	bridgeHostByte = 1
	// Subnets are 10.A.B.0/24 with A in [subnetFirst, subnetLast]: a
	// private range the harness reserves for itself.
	subnetFirst = 200
	subnetLast  = 250
	// subnetTries bounds the random search for a free subnet.
	subnetTries = 64
)

// netnsName matches every name the harness makes; group 1 is the PID in
// base 36.
var netnsName = regexp.MustCompile(`^` + netnsPrefix + `([0-9a-z]{1,6})-[0-9a-z]{1,2}(br|[hpn][0-9]{1,2})$`)

// clusterSeq numbers the namespace-mode clusters of this process.
var clusterSeq atomic.Uint32

// netnsLock is the file every harness process locks (flock) while it
// removes stale leftovers and picks a subnet, so two test binaries never
// pick the same one. It is in /run, where ip keeps /run/netns, rather
// than in a temporary directory that TMPDIR could make differ between
// two test binaries.
const netnsLock = "/run/maos-harness-netns.lock"

// hostNet is the network of a namespace-mode cluster: the bridge and one
// namespace per node.
type hostNet struct {
	ipBin  string
	tag    string // maos<pid36>-<seq36>
	bridge string
	subnet [3]byte // 10.A.B

	mu    sync.Mutex
	hosts []*nsHost
	byID  map[string]*nsHost
	drops map[link]bool // the routes in force: From's namespace blackholes To's address
}

// nsHost is one node's namespace.
type nsHost struct {
	k    int
	ns   string // namespace name
	veth string // the host (bridge) end of its veth
	ip   string
}

// link is the direction from one node to another, by id.
type link struct{ from, to string }

// NetnsAvailable reports, with the reason when it is not, whether this
// process can make network namespaces: it must run as root on Linux with
// iproute2's ip on the PATH. Tests that need namespaces call
// RequireNetns.
func NetnsAvailable() error {
	if _, err := os.Stat("/proc/self/ns/net"); err != nil {
		return fmt.Errorf("harness: namespace mode needs Linux network namespaces (no /proc/self/ns/net: %v)", err)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("harness: namespace mode needs root (ip netns add, veth, bridge); running as uid %d", os.Geteuid())
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("harness: namespace mode needs iproute2's ip (apt-get install iproute2): %w", err)
	}
	return nil
}

// RequireNetns is for a test that runs nodes in network namespaces. The
// -short tier (testing/testenv) skips it, with or without root: it needs
// root and is slow. The full run fails it, rather than skip it, where
// namespaces cannot be made (NetnsAvailable says why): CI runs the tests
// as root with iproute2.
func RequireNetns(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs root for network namespaces: " + testenv.FullRun)
	}
	if err := NetnsAvailable(); err != nil {
		t.Fatalf("%v\nthis test runs nodes in network namespaces: it needs root and `ip netns` (CI has both)", err)
	}
}

// newHostNet removes stale leftovers of dead harness processes, picks a
// free subnet and makes the bridge with the test's own address on it.
func newHostNet() (*hostNet, error) {
	if err := NetnsAvailable(); err != nil {
		return nil, err
	}
	ipBin, _ := exec.LookPath("ip")
	seq := clusterSeq.Add(1) % (36 * 36)
	h := &hostNet{ipBin: ipBin, tag: netnsTag(os.Getpid(), seq), byID: map[string]*nsHost{}, drops: map[link]bool{}}
	h.bridge = h.tag + "br"

	unlock, err := lockFile(netnsLock)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := h.removeStale(); err != nil {
		return nil, err
	}
	if err := h.pickSubnet(); err != nil {
		return nil, err
	}
	if err := h.run("link", "add", h.bridge, "type", "bridge"); err != nil {
		return nil, fmt.Errorf("harness: make the bridge %s: %w", h.bridge, err)
	}
	if err := h.setup(
		[]string{"addr", "add", h.addr(bridgeHostByte) + "/24", "dev", h.bridge},
		[]string{"link", "set", h.bridge, "up"},
	); err != nil {
		_ = h.run("link", "del", h.bridge)
		return nil, fmt.Errorf("harness: bring up the bridge %s: %w", h.bridge, err)
	}
	return h, nil
}

// netnsTag is the name prefix of cluster seq of process pid.
func netnsTag(pid int, seq uint32) string {
	return netnsPrefix + strconv.FormatInt(int64(pid), 36) + "-" + strconv.FormatInt(int64(seq), 36)
}

// addr is the address with last byte b on the cluster's subnet.
func (h *hostNet) addr(b int) string {
	return fmt.Sprintf("%d.%d.%d.%d", h.subnet[0], h.subnet[1], h.subnet[2], b)
}

// BridgeIP is the test process's own address on the bridge.
func (h *hostNet) BridgeIP() string { return h.addr(bridgeHostByte) }

// run runs ip with args; the error quotes its output.
func (h *hostNet) run(args ...string) error { return h.runIn("", args...) }

// runIn runs ip with args and stdin; the error quotes its output.
func (h *hostNet) runIn(stdin string, args ...string) error {
	cmd := exec.Command(h.ipBin, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (h *hostNet) output(args ...string) (string, error) {
	out, err := exec.Command(h.ipBin, args...).Output()
	if err != nil {
		return "", fmt.Errorf("ip %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}

// setup runs each command in turn, stopping at the first error.
func (h *hostNet) setup(cmds ...[]string) error {
	for _, c := range cmds {
		if err := h.run(c...); err != nil {
			return err
		}
	}
	return nil
}

// pickSubnet chooses a random 10.A.B.0/24 (A in 200..250) that overlaps
// no address or route of the root namespace. Call it under netnsLock, so
// the bridge's address is in place before another process looks.
func (h *hostNet) pickSubnet() error {
	used, err := h.usedPrefixes()
	if err != nil {
		return err
	}
	for range subnetTries {
		a, b := subnetFirst+rand.IntN(subnetLast-subnetFirst+1), rand.IntN(256)
		cand := &net.IPNet{IP: net.IPv4(10, byte(a), byte(b), 0).To4(), Mask: net.CIDRMask(24, 32)}
		free := true
		for _, p := range used {
			if p.Contains(cand.IP) || cand.Contains(p.IP) {
				free = false
				break
			}
		}
		if free {
			h.subnet = [3]byte{10, byte(a), byte(b)}
			return nil
		}
	}
	return fmt.Errorf("harness: no free /24 in 10.%d-%d.0-255.0 after %d tries", subnetFirst, subnetLast, subnetTries)
}

// usedPrefixes lists the IPv4 prefixes of the root namespace's addresses
// and routes (every table), the default route left out.
func (h *hostNet) usedPrefixes() ([]*net.IPNet, error) {
	var used []*net.IPNet
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("harness: list addresses: %w", err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
			used = append(used, n)
		}
	}
	routes, err := h.output("-4", "route", "show", "table", "all")
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(routes, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		dst := f[0]
		if len(f) > 1 && (dst == "broadcast" || dst == "local" || dst == "unicast" || dst == "blackhole" ||
			dst == "unreachable" || dst == "prohibit" || dst == "multicast" || dst == "anycast") {
			dst = f[1]
		}
		if dst == "default" {
			continue
		}
		if !strings.Contains(dst, "/") {
			dst += "/32"
		}
		if _, n, err := net.ParseCIDR(dst); err == nil {
			used = append(used, n)
		}
	}
	return used, nil
}

// removeStale deletes the namespaces and links (the bridge, veths) whose
// names say a harness process made them and whose process is gone. Call
// it under netnsLock.
func (h *hostNet) removeStale() error {
	nsList, err := h.output("netns", "list")
	if err != nil {
		return err
	}
	var errs []error
	for _, line := range strings.Split(nsList, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && staleName(f[0]) {
			if err := h.run("netns", "del", f[0]); err != nil {
				errs = append(errs, err)
			}
		}
	}
	links, err := h.output("-o", "link", "show")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(links, "\n") {
		// "7: maos1a2b-1br: <BROADCAST,...": the name ends at ':' or '@'.
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		if staleName(name) {
			// A veth whose namespace went first is gone with it.
			if err := h.run("link", "del", name); err != nil && !gone(err) {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("harness: remove stale namespaces and links: %w", errors.Join(errs...))
	}
	return nil
}

// gone reports whether an ip error says the device or namespace to
// delete no longer exists: what the deletion was for.
func gone(err error) bool {
	s := err.Error()
	return strings.Contains(s, "Cannot find device") || strings.Contains(s, "No such file or directory")
}

// staleName reports whether name is one the harness makes and the process
// that made it no longer runs.
func staleName(name string) bool {
	m := netnsName.FindStringSubmatch(name)
	if m == nil {
		return false
	}
	pid, err := strconv.ParseInt(m[1], 36, 64)
	if err != nil || pid <= 0 || pid > 1<<22 {
		return false
	}
	return !processAlive(int(pid))
}

// processAlive reports whether a process with pid exists (signal 0; EPERM
// means it exists and is someone else's).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// lockFile takes an exclusive flock on path (created if needed) and
// returns its release.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("harness: lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("harness: lock %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// addHost makes node id's (n<k>'s) namespace: lo up, a veth whose one end is the
// namespace's eth0 with address .(10+k)/24 and whose other end is in the
// bridge.
func (h *hostNet) addHost(id string, k int) (*nsHost, error) {
	if k < 1 || k > netnsMaxNodes {
		return nil, fmt.Errorf("harness: a namespace-mode cluster has at most %d nodes, not %d", netnsMaxNodes, k)
	}
	s := strconv.Itoa(k)
	host := &nsHost{k: k, ns: h.tag + "n" + s, veth: h.tag + "h" + s, ip: h.addr(nodeHostByte + k)}
	peer := h.tag + "p" + s
	if err := h.run("netns", "add", host.ns); err != nil {
		return nil, fmt.Errorf("harness: namespace of n%d: %w", k, err)
	}
	err := h.setup(
		[]string{"link", "add", host.veth, "type", "veth", "peer", "name", peer, "netns", host.ns},
		[]string{"link", "set", host.veth, "master", h.bridge, "up"},
		[]string{"-n", host.ns, "link", "set", peer, "name", "eth0"},
		[]string{"-n", host.ns, "addr", "add", host.ip + "/24", "dev", "eth0"},
		[]string{"-n", host.ns, "link", "set", "eth0", "up"},
		[]string{"-n", host.ns, "link", "set", "lo", "up"},
	)
	if err != nil {
		_ = h.run("netns", "del", host.ns) // takes the veth with it
		return nil, fmt.Errorf("harness: network of n%d: %w", k, err)
	}
	h.mu.Lock()
	h.hosts = append(h.hosts, host)
	h.byID[id] = host
	h.mu.Unlock()
	return host, nil
}

// close deletes every veth, namespace and the bridge. The processes in them must have exited: a namespace a process
// still holds outlives its name.
func (h *hostNet) close() error {
	h.mu.Lock()
	hosts := h.hosts
	h.hosts, h.byID, h.drops = nil, map[string]*nsHost{}, map[link]bool{}
	h.mu.Unlock()
	var errs []error
	for _, host := range hosts {
		// The veth first: deleting a namespace tears its devices down
		// asynchronously, so its veth would linger for a moment.
		if err := h.run("link", "del", host.veth); err != nil && !gone(err) {
			errs = append(errs, err)
		}
		if err := h.run("netns", "del", host.ns); err != nil && !gone(err) {
			errs = append(errs, err)
		}
	}
	if err := h.run("link", "del", h.bridge); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("harness: remove the cluster's network: %w", errors.Join(errs...))
	}
	return nil
}
