package maosd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/testing/testenv"
	"github.com/maos-project/maos/watcher"
)

// socketWait bounds the waits of these tests: a start, an agent's answer.
const socketWait = 60 * time.Second

// shortDataDir is a data dir whose api.sock fits a Unix socket's path
// (t.TempDir's can be long under a long test name).
func shortDataDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "maosd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return filepath.Join(dir, "data")
}

// The node's own watchers do not count against --max-conns-per-client:
// with a bound of 2 and 4 agents in --agents (each holding a stream),
// every agent answers a message sent to it. Over TCP their streams were
// closed at accept, and the agents failed with EOF.
func TestOwnWatchersNotBoundedPerClient(t *testing.T) {
	agents := filepath.Join(t.TempDir(), "agents.yaml")
	var b strings.Builder
	b.WriteString("agents:\n")
	names := []string{"echo1", "echo2", "echo3", "echo4"}
	for _, a := range names {
		fmt.Fprintf(&b, "  - id: %s\n    role: worker\n    command: [\"cat\"]\n    timeout: 30s\n    retries: 0\n    context_messages: 0\n", a)
	}
	if err := os.WriteFile(agents, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ready, _, _ := startMaosdIn(t, shortDataDir(t), nil, "--max-conns-per-client", "2", "--agents", agents)
	// The test's own client, from 127.0.0.1 like the node's watchers were,
	// keeps one connection alive between its calls.
	cl := client.NewClient(ready["api_addr"].(string), nil)
	for _, a := range names {
		q := &api.Message{ID: "msg-to-" + a, Channel: "socket", From: "alice", To: api.Recipients{a},
			Content: api.Content{Text: "question for " + a}}
		waitFor(t, "send "+q.ID, func(ctx context.Context) error {
			_, err := cl.Send(ctx, q)
			return err
		})
		var stored *api.Message
		waitFor(t, "read "+q.ID, func(ctx context.Context) (err error) {
			stored, err = cl.Message(ctx, q.ID, api.Strong)
			return err
		})
		id := watcher.ReplyID(a, stored)
		var r *api.Message
		waitFor(t, a+"'s reply "+id, func(ctx context.Context) (err error) {
			r, err = cl.Message(ctx, id, api.Strong)
			return err
		})
		if r.InReplyTo != q.ID || r.From != a || !strings.Contains(r.Content.Text, "question for "+a) {
			t.Errorf("reply %s: in_reply_to %q from %q text %q; want %s's echo of %s", id, r.InReplyTo, r.From, r.Content.Text, a, q.ID)
		}
	}
}

// waitFor retries f (each try bounded by 10 s) until it succeeds, failing
// t after socketWait or the test's deadline.
func waitFor(t *testing.T, what string, f func(context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(socketWait)
	if d := testenv.Deadline(t); d.Before(deadline) {
		deadline = d
	}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := f(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %v: %v", what, socketWait, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// maosd serves its API on <data dir>/api.sock, mode 0600, the artifact
// routes included; the socket is removed at shutdown, and a stale one (a
// killed process's) does not stop the next start.
func TestAPISocket(t *testing.T) {
	dir := shortDataDir(t)
	path := filepath.Join(dir, apiSocketName)
	ready, _, stop := startMaosdIn(t, dir, nil, "--a2a-relay=false")
	if got, _ := ready["api_socket"].(string); got != path {
		t.Errorf("ready line's api_socket %q, want %q", got, path)
	}
	if relay, ok := ready["a2a_relay"].(bool); !ok || relay {
		t.Errorf("ready line's a2a_relay %v with --a2a-relay=false, want false", ready["a2a_relay"])
	}
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatalf("no API socket in the data dir: %v", err)
	}
	if fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: mode %v, want a socket with 0600", path, fi.Mode())
	}
	cl := unixClient(path)
	ctx, cancel := context.WithTimeout(context.Background(), socketWait)
	defer cancel()
	if _, err := cl.Status(ctx); err != nil {
		t.Fatalf("status over the socket: %v", err)
	}
	body := []byte("bytes through the socket")
	art, err := cl.PutArtifact(ctx, bytes.NewReader(body), int64(len(body)), api.ArtifactUpload{Name: "s.txt", From: "alice"})
	if err != nil {
		t.Fatalf("put artifact over the socket: %v", err)
	}
	var got bytes.Buffer
	if _, err := cl.GetArtifact(ctx, art.ID, &got); err != nil || !bytes.Equal(got.Bytes(), body) {
		t.Errorf("get artifact %s over the socket: %q, %v; want %q", art.ID, got.Bytes(), err, body)
	}
	if err := stop(); err != nil {
		t.Fatalf("maosd: %v", err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after shutdown %s is still there (lstat: %v)", path, err)
	}

	// A socket file nobody listens on, as a SIGKILLed node leaves it.
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	_ = ln.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("stale socket not left: %v", err)
	}
	_, log, _ := startMaosdIn(t, dir, nil)
	if strings.Contains(log, "cannot serve the API on the data dir's socket") {
		t.Errorf("restart over a stale socket warned:\n%s", log)
	}
	if _, err := cl.Status(ctx); err != nil {
		t.Fatalf("status over the socket after a restart over a stale one: %v", err)
	}
}

// A data dir whose api.sock is too long for a Unix socket: one warning,
// and the node serves over TCP as before.
func TestAPISocketPathTooLong(t *testing.T) {
	dir := filepath.Join(shortDataDir(t), strings.Repeat("d", maxSocketPath))
	ready, log, _ := startMaosdIn(t, dir, nil)
	if !strings.Contains(log, "cannot serve the API on the data dir's socket") || !strings.Contains(log, "a Unix socket's at most 107") {
		t.Errorf("no warning about the socket path's length:\n%s", log)
	}
	if sock, ok := ready["api_socket"].(string); !ok || sock != "" {
		t.Errorf("ready line's api_socket %v, want \"\": the node's clients use TCP", ready["api_socket"])
	}
	if relay, ok := ready["a2a_relay"].(bool); !ok || !relay {
		t.Errorf("ready line's a2a_relay %v by default, want true", ready["a2a_relay"])
	}
	ctx, cancel := context.WithTimeout(context.Background(), socketWait)
	defer cancel()
	if _, err := client.NewClient(ready["api_addr"].(string), nil).Status(ctx); err != nil {
		t.Errorf("status over TCP: %v", err)
	}
}
