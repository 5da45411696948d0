package maosd

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maos-project/maos/testing/testenv"
)

// maosd refuses bad gossip flags before touching the data dir, naming the
// flag and saying what it wants.
func TestRefusesBadGossipFlags(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	short := base64.StdEncoding.EncodeToString([]byte("0123456789"))
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"--gossip-addr", "localhost:7072"}, []string{"--gossip-addr", "not a host name"}},
		{[]string{"--gossip-addr", "127.0.0.1"}, []string{"--gossip-addr", "IP:port"}},
		{[]string{"--gossip-addr", "0.0.0.0:7072"}, []string{"--gossip-advertise"}},
		{[]string{"--gossip-addr", "0.0.0.0:7072", "--gossip-advertise", "host:7072"}, []string{"--gossip-advertise", "want an IP address"}},
		{[]string{"--gossip-key", "not base64!"}, []string{"--gossip-key", "not base64"}},
		{[]string{"--gossip-key", short}, []string{"--gossip-key", "10 bytes", "16, 24 or 32"}},
		{[]string{"--gossip-key-file", writeTokenFile(t, short+"\n", 0o600)}, []string{"--gossip-key-file", "10 bytes", "16, 24 or 32"}},
		{[]string{"--gossip-key-file", writeTokenFile(t, "", 0o600)}, []string{"--gossip-key-file", "is empty"}},
		{[]string{"--gossip-key-file", filepath.Join(t.TempDir(), "missing")}, []string{"--gossip-key-file", "no such file"}},
		{[]string{"--gossip-key", short, "--gossip-key-file", writeTokenFile(t, short, 0o600)}, []string{"both given"}},
		{[]string{"--presence-ttl", "0s"}, []string{"--presence-ttl", "positive"}},
		{[]string{"--raft-addr", "localhost:7071"}, []string{"--gossip-addr", "no IP"}},
	}
	for _, tt := range tests {
		err := startRefused(dir, tt.args...)
		checkSays(t, fmt.Sprintf("maosd %v", tt.args), err, tt.want...)
		checkStatus(t, fmt.Sprintf("maosd %v", tt.args), err, 2)
	}
	checkNoDataDir(t, dir)
}

// lockedBuffer is an io.Writer a test can read while maosd writes to it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// runMaosdUntilReady starts maosd with args, waits for its ready line and
// returns it decoded, with the whole log so far; the node is stopped when
// the test ends.
func runMaosdUntilReady(t *testing.T, env []string, args ...string) (map[string]any, string) {
	t.Helper()
	ready, log, _ := startMaosdIn(t, filepath.Join(t.TempDir(), "data"), env, args...)
	return ready, log
}

// startMaosdIn is runMaosdUntilReady on the data dir dir; stop ends the
// node and returns what its run returned (also called when the test ends).
func startMaosdIn(t *testing.T, dir string, env []string, args ...string) (ready map[string]any, log string, stop func() error) {
	t.Helper()
	for i := 0; i+1 < len(env); i += 2 {
		t.Setenv(env[i], env[i+1])
	}
	var buf lockedBuffer
	app := App()
	app.ErrWriter = &buf
	app.Writer = &buf
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- app.RunContext(ctx, append([]string{"maosd", "--data-dir", dir,
			"--http-addr", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0", "--log-format", "json"}, args...))
	}()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(time.Until(testenv.Deadline(t))):
				t.Errorf("maosd did not stop by the test's deadline after its context ended")
			}
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	deadline := testenv.Deadline(t)
	for {
		for _, line := range strings.Split(buf.String(), "\n") {
			if strings.Contains(line, "maosd ready to serve") {
				var m map[string]any
				if err := json.Unmarshal([]byte(line), &m); err != nil {
					t.Fatalf("ready line %q: %v", line, err)
				}
				return m, buf.String(), stop
			}
		}
		select {
		case err := <-done:
			done <- err // for stop
			t.Fatalf("maosd exited before it was ready: %v; log:\n%s", err, buf.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("maosd not ready by the test's deadline; log:\n%s", buf.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestDefaultGossipAddr(t *testing.T) {
	for _, tc := range []struct{ raft, want, err string }{
		{"127.0.0.1:7071", "127.0.0.1:7072", ""},
		{"10.0.0.5:7081", "10.0.0.5:7082", ""},
		{"127.0.0.1:0", "127.0.0.1:0", ""},
		{"[::1]:7071", "[::1]:7072", ""},
		{"0.0.0.0:7071", "0.0.0.0:7072", ""}, // then --gossip-advertise is required
		{"localhost:7071", "", "no IP"},
		{"127.0.0.1:65535", "", "cannot derive"},
		{"nonsense", "", "cannot derive"},
	} {
		got, err := defaultGossipAddr(tc.raft)
		if got != tc.want || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("defaultGossipAddr(%q) = %q, %v; want %q, %q", tc.raft, got, err, tc.want, tc.err)
		}
	}
}

// Gossip on port 0 (derived from --raft-addr 127.0.0.1:0): the ready line
// carries the bound gossip address, and without a key the log warns that
// gossip is not encrypted.
func TestGossipWarnsWhenUnencrypted(t *testing.T) {
	ready, log := runMaosdUntilReady(t, nil)
	addr, _ := ready["gossip_addr"].(string)
	if !strings.HasPrefix(addr, "127.0.0.1:") || strings.HasSuffix(addr, ":0") {
		t.Errorf("ready line gossip_addr = %q, want the bound 127.0.0.1 port", addr)
	}
	if !strings.Contains(log, "gossip is not encrypted") || !strings.Contains(log, "--gossip-key") {
		t.Errorf("no warning about unencrypted gossip in the log:\n%s", log)
	}
}

// A key from the environment encrypts gossip, and there is no warning.
func TestGossipKeyFromEnv(t *testing.T) {
	key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{5}, 32))
	ready, log := runMaosdUntilReady(t, []string{"MAOS_GOSSIP_KEY", key}, "--gossip-addr", "127.0.0.1:0")
	if addr, _ := ready["gossip_addr"].(string); addr == "" {
		t.Errorf("ready line without gossip_addr: %v", ready)
	}
	if strings.Contains(log, "gossip is not encrypted") {
		t.Errorf("warned about unencrypted gossip with a key set:\n%s", log)
	}
	if !strings.Contains(log, `"gossip_encrypted":true`) {
		t.Errorf("the node open line does not say gossip is encrypted:\n%s", log)
	}
}

// A key from --gossip-key-file encrypts gossip like --gossip-key.
func TestGossipKeyFromFile(t *testing.T) {
	key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	_, log := runMaosdUntilReady(t, nil, "--gossip-addr", "127.0.0.1:0", "--gossip-key-file", writeTokenFile(t, key+"\n", 0o600))
	if strings.Contains(log, "gossip is not encrypted") || !strings.Contains(log, `"gossip_encrypted":true`) {
		t.Errorf("--gossip-key-file did not encrypt gossip:\n%s", log)
	}
}
