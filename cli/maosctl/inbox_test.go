package maosctl

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/testing/testenv"
	"github.com/maos-project/maos/transport"
)

// unread is agent's unread count in the fake node's state.
func (e *testEnv) unread(agent string) uint64 {
	e.t.Helper()
	counts, err := e.svc.State().InboxCounts(agent)
	if err != nil {
		e.t.Fatalf("inbox counts of %s: %v", agent, err)
	}
	return counts.Unread
}

// nothing runs args, which must exit 2 with stderr "maosctl: <want>\n"
// and nothing on stdout.
func (e *testEnv) nothing(want string, args ...string) {
	e.t.Helper()
	r := e.run("", args...)
	if ExitCode(r.err) != nothingUnread || r.out != "" || r.errOut != "maosctl: "+want+"\n" {
		e.t.Errorf("maosctl %s: exit %d, stdout %q, stderr %q; want exit 2, nothing, %q",
			strings.Join(args, " "), ExitCode(r.err), r.out, r.errOut, want)
	}
}

func TestInboxNext(t *testing.T) {
	e := newTestEnv(t)
	e.reviewers()
	id1 := e.send("review", "codex", "alice", "first line\nsecond line", "--title", "Retry", "--priority", "urgent")
	id2 := e.send("review", "claude", "role:reviewer", "to both")
	id3 := e.send("review", "codex", "alice", "third")

	// The oldest unread, whole, and marked read with the read mark.
	out := e.ok("inbox", "next", "--agent", "alice")
	for _, want := range []string{`(?m)^id: +` + id1 + `$`, `(?m)^from: +codex$`, `(?m)^priority: +urgent$`,
		`(?m)^title: +Retry$`, `\n\nfirst line\nsecond line\n$`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("next printed %q, lacks %s", out, want)
		}
	}
	if n := e.unread("alice"); n != 2 {
		t.Errorf("alice has %d unread after next, want 2", n)
	}
	rc, _ := e.svc.State().Receipts(id1)
	if len(rc.Receipts) != 1 || rc.Receipts[0].State != "read" {
		t.Errorf("receipts of %s after next = %+v, want read by alice", id1, rc)
	}

	// --json: the message object; read marks are alice's alone.
	var m api.Message
	if err := json.Unmarshal([]byte(e.ok("--json", "inbox", "next", "--agent", "alice")), &m); err != nil || m.ID != id2 || m.Content.Text != "to both" {
		t.Errorf("next --json = %+v, %v; want %s", m, err, id2)
	}
	if n := e.unread("bob"); n != 1 {
		t.Errorf("bob has %d unread, want 1: read marks are per agent", n)
	}

	// A message marked read by other means is not taken again.
	e.ok("read-mark", "--agent", "alice", id3)
	e.nothing("no unread mail for alice", "inbox", "next", "--agent", "alice")
	t.Setenv(envAgent, "bob")
	if out := e.ok("inbox", "next"); !strings.Contains(out, id2) {
		t.Errorf("next with MAOS_AGENT_ID=bob printed %q, want %s", out, id2)
	}
	e.nothing("no unread mail for bob", "inbox", "next", "--json")

	e.fail([]string{"inbox", "next", "--agent", "zed"}, "agent zed", "404")
	// inbox itself still lists, and takes no verb it does not know.
	if out := e.ok("inbox", "--agent", "alice"); strings.Count(out, "  #") != 3 || strings.Contains(out, "* #") {
		t.Errorf("inbox after next printed %q, want 3 read lines", out)
	}
	e.fail([]string{"inbox", "--agent", "alice", "nope"}, `unexpected argument "nope"`)
	e.fail([]string{"inbox", "next", "--agent", "alice", "extra"}, `unexpected argument "extra"`)
	t.Setenv(envAgent, "")
	e.fail([]string{"inbox", "next"}, "--agent", "MAOS_AGENT_ID")
}

// Two takers of one inbox: the one whose mark changed the message gets
// it; the other moves on to the next unread, or has nothing.
func TestInboxNextLostRace(t *testing.T) {
	e := newTestEnv(t)
	e.reviewers()
	id1 := e.send("review", "codex", "alice", "one")
	id2 := e.send("review", "codex", "alice", "two")

	// The first mark of each message is beaten by a rival's, applied just
	// before it, as a second 'next' (or a watcher) would.
	var mu sync.Mutex
	rivalTook := map[string]bool{}
	e.svc.OnApply(func(op api.Op, body json.RawMessage) (any, error) {
		var cmd api.MarkReadCommand
		if op == api.OpMarkRead && json.Unmarshal(body, &cmd) == nil && cmd.ID != "" {
			mu.Lock()
			first := !rivalTook[cmd.ID]
			rivalTook[cmd.ID] = true
			mu.Unlock()
			if first {
				if _, err := e.svc.ApplyCommand(op, body); err != nil {
					return nil, err
				}
			}
		}
		return e.svc.ApplyCommand(op, body)
	})
	// One lost race, and it takes the next message.
	mu.Lock()
	rivalTook[id2] = true // the rival goes for id1 only
	mu.Unlock()
	if out := e.ok("inbox", "next", "--agent", "alice"); !strings.Contains(out, id2) || strings.Contains(out, id1) {
		t.Errorf("after losing %s, next printed %q, want %s", id1, out, id2)
	}
	// Losing the last one: nothing unread.
	id3 := e.send("review", "codex", "alice", "three")
	e.nothing("no unread mail for alice", "inbox", "next", "--agent", "alice")
	if n := e.unread("alice"); n != 0 || !rivalTook[id3] {
		t.Errorf("alice has %d unread, rival took %s: %t", n, id3, rivalTook[id3])
	}
}

// Many takers at once: every message goes to exactly one of them.
func TestInboxNextConcurrent(t *testing.T) {
	e := newTestEnv(t)
	e.reviewers()
	var ids []string
	for _, text := range []string{"a", "b", "c"} {
		ids = append(ids, e.send("review", "codex", "alice", text))
	}
	const takers = 5
	results := make(chan runResult, takers)
	for range takers {
		go func() { results <- e.run("", "--json", "inbox", "next", "--agent", "alice") }()
	}
	var got []string
	for range takers {
		r := <-results
		switch ExitCode(r.err) {
		case 0:
			var m api.Message
			if err := json.Unmarshal([]byte(r.out), &m); err != nil {
				t.Fatalf("next printed %q: %v", r.out, err)
			}
			got = append(got, m.ID)
		case nothingUnread:
		default:
			t.Errorf("next failed: %v %s", r.err, r.errOut)
		}
	}
	slices.Sort(got)
	slices.Sort(ids)
	if !slices.Equal(got, ids) {
		t.Errorf("%d takers got %v, want each of %v once", takers, got, ids)
	}
}

// streamWatch serves e's fake node behind a handler that reports each
// GET /v1/stream on the returned channel and calls before (if not nil)
// with every request first, and points e at it.
func (e *testEnv) streamWatch(before func(*http.Request)) <-chan struct{} {
	e.t.Helper()
	opened := make(chan struct{}, 16)
	h := transport.NewServer(e.svc, transport.ServerOptions{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if before != nil {
			before(r)
		}
		if r.URL.Path == "/v1/stream" {
			if r.URL.Query().Get("agent") != "alice" {
				e.t.Errorf("stream opened with %s, want agent=alice", r.URL.RawQuery)
			}
			opened <- struct{}{}
		}
		h.ServeHTTP(w, r)
	}))
	e.t.Cleanup(srv.Close)
	e.addr = srv.Listener.Addr().String()
	return opened
}

var unreadLineRE = regexp.MustCompile(`^\* #\d+ \S+ codex → alice \[chat/normal\] `)

func TestInboxWait(t *testing.T) {
	e := newTestEnv(t)
	e.reviewers()
	opened := e.streamWatch(nil)
	old := e.send("review", "codex", "alice", "old news")
	e.ok("read-mark", "--agent", "alice", old)

	// Nothing unread: exit 2 when --timeout passes, after following the stream.
	start := time.Now()
	e.nothing("no unread mail for alice within 1s", "inbox", "wait", "--agent", "alice", "--timeout", "1s")
	if d := time.Since(start); d < time.Second {
		t.Errorf("wait gave up after %s, before its --timeout", d)
	}
	select {
	case <-opened:
	default:
		t.Error("wait timed out without opening the stream")
	}

	// Mail arriving while it waits: it returns with it, marking nothing.
	done := make(chan runResult, 1)
	go func() { done <- e.run("", "inbox", "wait", "--agent", "alice", "--timeout", "30s") }()
	select {
	case <-opened:
	case r := <-done:
		t.Fatalf("wait returned before mail came: %v %q %q", r.err, r.out, r.errOut)
	case <-testDeadline(t):
		t.Fatal("wait never opened the stream")
	}
	e.send("review", "codex", "bob", "not alice's")
	id := e.send("review", "codex", "alice", "news\nmore")
	r := <-done
	if r.err != nil || r.errOut != "" || !unreadLineRE.MatchString(r.out) || !strings.HasSuffix(r.out, " news\n") || strings.Count(r.out, "\n") != 1 {
		t.Errorf("wait: err %v stdout %q stderr %q; want one unread line of %s", r.err, r.out, r.errOut, id)
	}
	if n := e.unread("alice"); n != 1 {
		t.Errorf("alice has %d unread after wait, want 1: wait marks nothing", n)
	}

	// Mail already unread: at once, every unread message, no stream.
	id2 := e.send("review", "codex", "alice", "second")
	r = e.run("", "inbox", "wait", "--agent", "alice", "--timeout", "5s") // a wait that streams fails, not hangs
	lines := strings.Split(strings.TrimSuffix(r.out, "\n"), "\n")
	if r.err != nil || len(lines) != 2 || !unreadLineRE.MatchString(lines[0]) || !strings.HasSuffix(lines[1], " second") {
		t.Errorf("wait with unread mail: err %v stdout %q stderr %q", r.err, r.out, r.errOut)
	}
	select {
	case <-opened: // returning at once means answering from the inbox, never following the stream
		t.Error("wait with unread mail opened the stream")
	default:
	}
	var entries []api.InboxEntry
	if err := json.Unmarshal([]byte(e.ok("inbox", "wait", "--agent", "alice", "--json", "--timeout", "5s")), &entries); err != nil ||
		len(entries) != 2 || entries[0].ID != id || entries[1].ID != id2 || entries[0].Read || entries[1].Read {
		t.Errorf("wait --json = %+v, %v; want %s and %s unread", entries, err, id, id2)
	}

	e.fail([]string{"inbox", "wait", "--agent", "alice", "--timeout", "0s"}, "--timeout 0s", "positive duration")
	e.fail([]string{"inbox", "wait", "--agent", "zed", "--timeout", "5s"}, "agent zed", "404")
	e.fail([]string{"inbox", "wait", "--agent", "alice", "now"}, `unexpected argument "now"`)
	e.fail([]string{"inbox", "wait"}, "--agent", "MAOS_AGENT_ID")
}

// A message another reader takes before wait reads it does not end the
// wait: it goes on until mail is unread.
func TestInboxWaitTakenByAnother(t *testing.T) {
	e := newTestEnv(t)
	e.reviewers()
	var mu sync.Mutex
	var take string // marked read by "another reader" before wait's next unread read
	opened := e.streamWatch(func(r *http.Request) {
		if r.URL.Path != "/v1/agents/alice/inbox" || r.URL.Query().Get("unread") != "true" {
			return
		}
		mu.Lock()
		id := take
		take = ""
		mu.Unlock()
		if id != "" {
			e.apply(api.OpMarkRead, api.MarkReadCommand{Agent: "alice", ID: id})
		}
	})
	done := make(chan runResult, 1)
	go func() { done <- e.run("", "inbox", "wait", "--agent", "alice", "--timeout", "30s") }()
	select {
	case <-opened:
	case <-testDeadline(t):
		t.Fatal("wait never opened the stream")
	}
	mu.Lock()
	take = "msg-20261125-030000-codex-0000aaaa"
	mu.Unlock()
	e.send("review", "codex", "alice", "taken", "--id", "msg-20261125-030000-codex-0000aaaa")
	// The message event makes wait read the unread mail, which finds it taken.
	for deadline := testenv.Deadline(t); ; time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		read := take == ""
		mu.Unlock()
		if read {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("wait did not read the inbox after the message event")
		}
	}
	select {
	case r := <-done:
		t.Fatalf("wait returned on mail another reader took: %v %q %q", r.err, r.out, r.errOut)
	case <-time.After(300 * time.Millisecond):
	}
	id := e.send("review", "codex", "alice", "for you")
	r := <-done
	if r.err != nil || strings.Count(r.out, "\n") != 1 || !strings.HasSuffix(r.out, " for you\n") {
		t.Errorf("wait: err %v stdout %q stderr %q; want %s alone", r.err, r.out, r.errOut, id)
	}
}
