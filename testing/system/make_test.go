package system

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/testing/harness"
	"github.com/maos-project/maos/testing/testenv"
)

// makeIn runs make with the repository's Makefile in dir (so the
// repository's own bin/ is left alone), GO=true standing in for the go
// command, and the environment without PREFIX, DESTDIR or TMPDIR unless
// vars set them.
func makeIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	root, err := harness.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	mk, err := exec.LookPath("make")
	if err != nil {
		t.Fatalf("README's commands need make: %v", err)
	}
	cmd := exec.Command(mk, append([]string{"-f", filepath.Join(root, "Makefile"), "-C", dir, "GO=true"}, args...)...)
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "PREFIX=") || strings.HasPrefix(kv, "DESTDIR=") || strings.HasPrefix(kv, "TMPDIR=")
	})
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// make install puts maosd and maosctl, executable, in
// $(DESTDIR)$(PREFIX)/bin, PREFIX defaulting to /usr/local.
func TestMakeInstall(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"maosd", "maosctl"} {
		if err := os.WriteFile(filepath.Join(dir, "bin", name), []byte("#!/bin/sh\necho "+name+"\n"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		args []string
		bin  string
	}{
		{[]string{"install", "DESTDIR=" + dir + "/stage"}, dir + "/stage/usr/local/bin"},
		{[]string{"install", "DESTDIR=" + dir + "/stage2", "PREFIX=/opt/maos"}, dir + "/stage2/opt/maos/bin"},
	} {
		makeIn(t, dir, tc.args...)
		for _, name := range []string{"maosd", "maosctl"} {
			fi, err := os.Stat(filepath.Join(tc.bin, name))
			if err != nil {
				t.Errorf("make %v: %v", tc.args, err)
			} else if fi.Mode().Perm() != 0o755 {
				t.Errorf("make %v: %s/%s has mode %v, want 0755", tc.args, tc.bin, name, fi.Mode())
			}
		}
		if ents, _ := os.ReadDir(tc.bin); len(ents) != 2 {
			t.Errorf("make %v installed %d files, want maosd and maosctl", tc.args, len(ents))
		}
	}
}

// make clean removes the build and run leftovers and the demo's
// temporary directories, nothing else.
func TestMakeClean(t *testing.T) {
	dir := t.TempDir()
	tmp := filepath.Join(dir, "tmp")
	for _, d := range []string{"bin", "maos-data/n1", "chaos-out", "keep", "tmp/maos-demo.abc123/n1", "tmp/maos-demo.def456", "tmp/other"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	makeIn(t, dir, "clean", "TMPDIR="+tmp)
	for d, want := range map[string]bool{"bin": false, "maos-data": false, "chaos-out": false, "keep": true,
		"tmp/maos-demo.abc123": false, "tmp/maos-demo.def456": false, "tmp/other": true} {
		if _, err := os.Stat(filepath.Join(dir, d)); (err == nil) != want {
			t.Errorf("after make clean, %s exists: %t, want %t", d, err == nil, want)
		}
	}
}

// The demo runs (here with the binaries TestMain built, on free ports)
// and its output says its agents run a stub model and how to give a
// watcher claude -p or codex exec instead.
func TestDemo(t *testing.T) {
	testenv.Slow(t, "scripts/demo.sh runs a cluster of maosd processes with watchers")
	root, err := harness.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Dir(maosdBin)
	if filepath.Dir(stubmodelBin) != bin || filepath.Dir(maosctlBin) != bin {
		t.Fatalf("the binaries are not in one directory: %s %s %s", maosdBin, maosctlBin, stubmodelBin)
	}
	tmp := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "scripts", "demo.sh"))
	cmd.Env = append(os.Environ(), "BIN="+bin, "TMPDIR="+tmp, "DEMO_KEEP=", fmt.Sprintf("DEMO_BASE_PORT=%d", freePortBlock(t)))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"== the watcher agents answer through a stub model",
		"TASK_RESULT: Re: Retry logic",
		"created demo-review: waiting",
		"demo-review succeeded: success: stub answer to demo-review",
		"TASK_COMPLETION: success Implement the retry backoff",
		"TASK_COMPLETION: success Review the retry backoff",
		`command: ["claude", "-p"]`,
		`command: ["codex", "exec", "-"]`,
		"stopped 3 nodes; logs and data were in " + tmp + "/maos-demo.",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, out.String())
		}
	}
}

// freePortBlock is a base port for the demo: base..base+22 (each node's
// HTTP, Raft and gossip ports, ten apart) free on loopback.
func freePortBlock(t *testing.T) int {
	t.Helper()
	return freePorts(t, 0, 1, 2, 10, 11, 12, 20, 21, 22)
}

// freePorts returns a base port such that base+off, for every off, is free
// on loopback, TCP and UDP: for processes that must listen on ports fixed
// in advance (the demo's, the deploy guide's). The base is drawn below the
// kernel's ephemeral range (ip_local_port_range; Linux's default starts at
// 32768), from which every other test's ":0" listener and outgoing
// connection takes its port, so the block stays free between this check
// and the start of the processes that listen on it.
func freePorts(t *testing.T, offsets ...int) int {
	t.Helper()
	top := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if lo, err := strconv.Atoi(f[0]); err == nil && lo > 21000 {
				top = lo
			}
		}
	}
	span := slices.Max(offsets) + 1
	for range 100 {
		base := 20000 + 10*rand.IntN((top-20000-span)/10)
		free := true
		for _, off := range offsets {
			addr := fmt.Sprintf("127.0.0.1:%d", base+off)
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				free = false
				break
			}
			ln.Close()
			pc, err := net.ListenPacket("udp", addr)
			if err != nil {
				free = false
				break
			}
			pc.Close()
		}
		if free {
			return base
		}
	}
	t.Fatal("no free block of ports below the ephemeral range")
	return 0
}
