package maosctl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

// newService is the fake node the maosctl tests talk to. Its state
// machine applies its first entry at index 1001, so an index in the output
// cannot pass for a count; agents, those the test addresses (a send may
// name only agents someone answers to), are registered before it.
func newService(t testing.TB, agents ...string) *transporttest.Service {
	return transporttest.New(t, transporttest.FirstIndex(1001), transporttest.Agents(agents...))
}

// testEnv is a fake node behind a loopback HTTP server.
type testEnv struct {
	t    *testing.T
	svc  *transporttest.Service
	addr string
}

func newTestEnv(t *testing.T, agents ...string) *testEnv {
	t.Helper()
	// The flags read these; keep the caller's environment out of the tests.
	for _, k := range []string{envAddr, envAgent, envChannel, envTimeout, envGateFile} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	svc := newService(t, agents...)
	srv := httptest.NewServer(transport.NewServer(svc, transport.ServerOptions{Blobs: svc}))
	t.Cleanup(srv.Close)
	return &testEnv{t: t, svc: svc, addr: srv.Listener.Addr().String()}
}

type runResult struct {
	out, errOut string
	err         error
}

// run runs maosctl --addr <fake> args... with stdin as its input.
func (e *testEnv) run(stdin string, args ...string) runResult {
	return runApp(e.addr, stdin, args...)
}

func runApp(addr, stdin string, args ...string) runResult {
	var out, errOut bytes.Buffer
	app := App()
	app.Writer = &out
	app.ErrWriter = &errOut
	app.Reader = strings.NewReader(stdin)
	release := parseSerially(app.Commands)
	defer release()
	err := app.Run(append([]string{"maosctl", "--addr", addr}, args...))
	return runResult{out: out.String(), errOut: errOut.String(), err: err}
}

// parsing is held from an app's Run until its command's action starts.
// urfave/cli v2 keeps HelpFlag and the help command as package variables
// that every Run writes while it parses, so two apps of one process (a
// test's background wait and the command that ends it) must not parse at
// once; their actions may run together.
var parsing sync.Mutex

// parseSerially takes parsing and wraps every action of cmds to give it
// back when the action starts; the returned func gives it back if no
// action ran (a parse error, --help). Both are safe to call twice.
func parseSerially(cmds []*cli.Command) (release func()) {
	parsing.Lock()
	var once sync.Once
	release = func() { once.Do(parsing.Unlock) }
	var wrap func([]*cli.Command)
	wrap = func(cmds []*cli.Command) {
		for _, cmd := range cmds {
			if action := cmd.Action; action != nil {
				cmd.Action = func(c *cli.Context) error { release(); return action(c) }
			}
			wrap(cmd.Subcommands)
		}
	}
	wrap(cmds)
	return release
}

// ok runs args and fails the test unless the command succeeded.
func (e *testEnv) ok(args ...string) string {
	e.t.Helper()
	r := e.run("", args...)
	if r.err != nil || r.errOut != "" {
		e.t.Fatalf("maosctl %s: err=%v stderr=%q", strings.Join(args, " "), r.err, r.errOut)
	}
	return r.out
}

// send posts a message and returns its id.
func (e *testEnv) send(channel, from, to, text string, extra ...string) string {
	e.t.Helper()
	args := append([]string{"--json", "send", "--channel", channel, "--from", from, "--to", to, "--text", text}, extra...)
	var res api.SendResponse
	if err := json.Unmarshal([]byte(e.ok(args...)), &res); err != nil {
		e.t.Fatalf("send: %v", err)
	}
	return res.ID
}

var sendLineRE = regexp.MustCompile(`^(msg-\d{8}-\d{6}-codex-[0-9a-f]{8}) seq=(\d+)\n$`)

func TestSendPrintsIDAndSeq(t *testing.T) {
	e := newTestEnv(t, "claude")
	out := e.ok("send", "--from", "codex", "--to", "claude", "--channel", "review", "--text", "@claude please review")
	m := sendLineRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("send printed %q, want \"msg-... seq=N\"", out)
	}
	if m[2] != "1001" {
		t.Errorf("seq = %s, want 1001", m[2])
	}
	got := e.svc.Stored(m[1])
	if got == nil {
		t.Fatalf("message %s not stored", m[1])
	}
	if got.Content.Text != "@claude please review" || got.From != "codex" || got.Channel != "review" ||
		!reflect.DeepEqual([]string(got.To), []string{"claude"}) {
		t.Errorf("stored %+v", got)
	}
}

func TestSendJSON(t *testing.T) {
	e := newTestEnv(t, "claude")
	e.send("review", "codex", "claude", "first")
	for _, args := range [][]string{
		{"--json", "send", "--from", "codex", "--to", "claude", "--channel", "review", "--text", "hi"},
		{"send", "--json", "--from", "codex", "--to", "claude", "--channel", "review", "--text", "hi"},
	} {
		out := e.ok(args...)
		var res api.SendResponse
		dec := json.NewDecoder(strings.NewReader(out))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&res); err != nil {
			t.Fatalf("%v: output %q is not a SendResponse: %v", args, out, err)
		}
		if res.ID == "" || res.Seq < 2 || res.Timestamp.IsZero() {
			t.Errorf("%v: response %+v", args, res)
		}
	}
}

func TestSendFields(t *testing.T) {
	e := newTestEnv(t, "claude", "gemini")
	e.apply(api.OpRegisterAgent, api.RegisterAgentCommand{ID: "rita", Role: "reviewer"}) // at 1001
	e.ok("send", "--from", "codex", "--to", "claude, gemini", "--to", "role:reviewer", "--channel", "review",
		"--text", "look", "--title", "Retry logic", "--type", "request", "--priority", "high",
		"--reply-to", "msg-1", "--id", "msg-fixed-1")
	m := e.svc.Stored("msg-fixed-1")
	if m == nil {
		t.Fatal("--id not used")
	}
	want := []string{"claude", "gemini", "role:reviewer"}
	if !reflect.DeepEqual([]string(m.To), want) {
		t.Errorf("to = %q, want %q", m.To, want)
	}
	if m.Title != "Retry logic" || m.Type != "request" || m.Priority != "high" || m.InReplyTo != "msg-1" {
		t.Errorf("stored %+v", m)
	}
	// Resending the same id and content is idempotent: same seq.
	out := e.ok("send", "--from", "codex", "--to", "claude,gemini,role:reviewer", "--channel", "review",
		"--text", "look", "--title", "Retry logic", "--type", "request", "--priority", "high",
		"--reply-to", "msg-1", "--id", "msg-fixed-1")
	if out != "msg-fixed-1 seq=1002\n" {
		t.Errorf("resend printed %q", out)
	}
}

func TestSendEnvDefaults(t *testing.T) {
	e := newTestEnv(t, "claude")
	t.Setenv(envAgent, "codex")
	t.Setenv(envChannel, "ops")
	out := e.ok("send", "--to", "claude", "--text", "from env")
	m := sendLineRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("send printed %q", out)
	}
	if got := e.svc.Stored(m[1]); got.Channel != "ops" || got.From != "codex" {
		t.Errorf("stored %+v", got)
	}
	// Without --channel or $MAOS_CHANNEL (unset, or set empty): the
	// default channel.
	for _, set := range []bool{false, true} {
		os.Unsetenv(envChannel)
		if set {
			t.Setenv(envChannel, "")
		}
		m := sendLineRE.FindStringSubmatch(e.ok("send", "--to", "claude", "--text", "no channel"))
		if m == nil {
			t.Fatal("send without a channel printed no id")
		}
		if got := e.svc.Stored(m[1]); got.Channel != api.DefaultChannel || api.DefaultChannel != "general" {
			t.Errorf("$MAOS_CHANNEL set=%t: stored in %q, want general", set, got.Channel)
		}
	}
}

func TestSendTextFromStdin(t *testing.T) {
	e := newTestEnv(t, "claude")
	r := e.run("line one\nline two\n", "send", "--from", "codex", "--to", "claude", "--channel", "review", "--text", "-")
	if r.err != nil {
		t.Fatalf("send: %v: %s", r.err, r.errOut)
	}
	m := sendLineRE.FindStringSubmatch(r.out)
	if m == nil {
		t.Fatalf("send printed %q", r.out)
	}
	if got := e.svc.Stored(m[1]).Content.Text; got != "line one\nline two" {
		t.Errorf("text = %q", got)
	}
}

func TestGet(t *testing.T) {
	e := newTestEnv(t, "claude", "gemini")
	id := e.send("review", "codex", "claude,gemini", "@claude please review\nsecond line",
		"--title", "Retry logic", "--type", "request", "--priority", "high")

	out := e.ok("get", id)
	for _, want := range []string{
		"id:", id, "seq:", "1001", "time:", e.svc.Stored(id).Timestamp.UTC().Format("2006-01-02T15:04:05.000Z"), "channel:", "review",
		"from:", "codex", "to:", "claude, gemini", "type:", "request", "priority:", "high",
		"title:", "Retry logic", "\n\n@claude please review\nsecond line\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("get output lacks %q:\n%s", want, out)
		}
	}

	// Flags after the id work too, and --json prints the message object.
	out = e.ok("get", id, "--strong", "--json")
	var m api.Message
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("get --json: %v\n%s", err, out)
	}
	if m.ID != id || m.Seq != 1001 || m.Title != "Retry logic" || m.Content.Text != "@claude please review\nsecond line" {
		t.Errorf("get --json = %+v", m)
	}

	r := e.run("", "get", "msg-nope")
	if r.err == nil || !strings.Contains(r.errOut, "maosctl: ") || !strings.Contains(r.errOut, "msg-nope") ||
		!strings.Contains(r.errOut, "404") {
		t.Errorf("get unknown: err=%v stderr=%q", r.err, r.errOut)
	}
}

func TestRead(t *testing.T) {
	e := newTestEnv(t, "claude", "gemini")
	id1 := e.send("review", "codex", "claude", "first line\nmore", "--title", "Plan")
	e.send("other", "codex", "claude", "elsewhere")
	id3 := e.send("review", "claude", "codex,gemini", "reply", "--type", "response")

	out := e.ok("read", "--channel", "review")
	at := func(id string) string { return e.svc.Stored(id).Timestamp.UTC().Format(time.RFC3339) }
	want := "#1001 " + at(id1) + " codex → claude [chat/normal] Plan: first line\n" +
		"#1003 " + at(id3) + " claude → codex,gemini [response/normal] reply\n"
	if out != want {
		t.Errorf("read printed\n%s\nwant\n%s", out, want)
	}

	out = e.ok("read", "--channel", "review", "--after", "1001")
	if !strings.HasPrefix(out, "#1003 ") || strings.Count(out, "\n") != 1 {
		t.Errorf("read --after 1001 printed %q", out)
	}

	out = e.ok("--json", "read", "--channel", "review")
	var msgs []api.Message
	if err := json.Unmarshal([]byte(out), &msgs); err != nil {
		t.Fatalf("read --json: %v\n%s", err, out)
	}
	if len(msgs) != 2 || msgs[0].ID != id1 || msgs[1].Seq != 1003 {
		t.Errorf("read --json = %+v", msgs)
	}

	for _, args := range [][]string{
		{"--json", "read", "--channel", "empty"},
		{"read", "--json", "--channel", "review", "--after", "1003"},
	} {
		if out := e.ok(args...); strings.TrimSpace(out) != "[]" {
			t.Errorf("%v printed %q, want []", args, out)
		}
	}
	if out := e.ok("read", "--channel", "empty"); out != "" {
		t.Errorf("read of an empty channel printed %q", out)
	}
}

func TestReadAllPages(t *testing.T) {
	e := newTestEnv(t, "claude")
	for i := range 7 {
		e.send("big", "codex", "claude", fmt.Sprintf("message %d", i))
	}

	// Without --all: one page and a hint on stderr.
	r := e.run("", "read", "--channel", "big", "--limit", "3")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if n := strings.Count(r.out, "\n"); n != 3 {
		t.Errorf("one page printed %d lines:\n%s", n, r.out)
	}
	if !strings.Contains(r.errOut, "--after 1003") {
		t.Errorf("no hint at the next page on stderr: %q", r.errOut)
	}

	// --limit counts messages, not pages: five, in three pages of two at
	// most, and the hint at the sixth.
	before := len(e.svc.CallsTo("Linearize"))
	r = e.run("", "read", "--channel", "big", "--limit", "5", "--page-size", "2")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := strings.Split(strings.TrimSuffix(r.out, "\n"), "\n"); len(got) != 5 || !strings.HasPrefix(got[0], "#1001 ") || !strings.HasPrefix(got[4], "#1005 ") {
		t.Errorf("--limit 5 --page-size 2 printed:\n%s", r.out)
	}
	if !strings.Contains(r.errOut, "--after 1005") {
		t.Errorf("--limit 5: no hint at the next message on stderr: %q", r.errOut)
	}
	if after := len(e.svc.CallsTo("Linearize")); after-before != 3 {
		t.Errorf("--limit 5 --page-size 2 fetched %d pages, want 3", after-before)
	}

	before = len(e.svc.CallsTo("Linearize"))
	out := e.ok("read", "--channel", "big", "--page-size", "3", "--all")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 7 {
		t.Fatalf("--all printed %d lines:\n%s", len(lines), out)
	}
	for i, l := range lines {
		if !strings.HasPrefix(l, fmt.Sprintf("#%d ", i+1001)) || !strings.HasSuffix(l, fmt.Sprintf("message %d", i)) {
			t.Errorf("line %d = %q", i, l)
		}
	}
	if after := len(e.svc.CallsTo("Linearize")); after-before != 3 {
		t.Errorf("--all fetched %d pages, want 3", after-before)
	}

	out = e.ok("--json", "read", "--channel", "big", "--page-size", "2", "--all", "--after", "1001")
	var msgs []api.Message
	if err := json.Unmarshal([]byte(out), &msgs); err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 6 || msgs[0].Seq != 1002 || msgs[5].Seq != 1007 {
		t.Errorf("--json --all returned %d messages: %+v", len(msgs), msgs)
	}
}

func TestChannels(t *testing.T) {
	e := newTestEnv(t, "claude")
	if out := strings.TrimSpace(e.ok("--json", "channels")); out != "[]" {
		t.Errorf("channels --json with none = %q", out)
	}
	e.send("review", "codex", "claude", "a")
	e.send("ops", "codex", "claude", "b")
	e.send("review", "codex", "claude", "c")

	out := e.ok("channels")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("channels printed:\n%s", out)
	}
	for i, want := range [][]string{{"NAME", "COUNT", "FIRST", "LAST"}, {"ops", "1", "1002", "1002"}, {"review", "2", "1001", "1003"}} {
		if got := strings.Fields(lines[i]); !reflect.DeepEqual(got, want) {
			t.Errorf("line %d = %q, want %q", i, got, want)
		}
	}

	var list []api.ChannelInfo
	if err := json.Unmarshal([]byte(e.ok("--json", "channels")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[1] != (api.ChannelInfo{Name: "review", Count: 2, FirstSeq: 1001, LastSeq: 1003}) {
		t.Errorf("channels --json = %+v", list)
	}
}

func TestClusterStatus(t *testing.T) {
	e := newTestEnv(t)
	out := e.ok("cluster", "status")
	for _, re := range []string{
		`(?m)^node:\s+n1$`, `(?m)^state:\s+leader$`, `(?m)^leader:\s+n1 \(api 127\.0\.0\.1:7070\)$`,
		`(?m)^term:\s+3$`, `(?m)^commit index:\s+42$`, `(?m)^applied index:\s+41$`,
		`(?m)^cluster version:\s+1 \(this node's build applies up to 2; ops of a higher version are refused until every voter is upgraded\)$`,
		`(?m)^\s+ID\s+RAFT ADDR\s+API ADDR`,
		`(?m)^\* n1\s+127\.0\.0\.1:7000\s+127\.0\.0\.1:7070\s+voter\s+-$`,
		`(?m)^  n2\s+127\.0\.0\.1:7001\s+127\.0\.0\.1:7071\s+nonvoter\s+-$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("cluster status lacks %s:\n%s", re, out)
		}
	}

	var st api.Status
	if err := json.Unmarshal([]byte(e.ok("--json", "cluster", "status")), &st); err != nil {
		t.Fatal(err)
	}
	if want := transporttest.DefaultStatus(); !reflect.DeepEqual(st, want) {
		t.Errorf("cluster status --json = %+v, want %+v", st, want)
	}
}

// A follower's status: the leader it no longer hears from is flagged on
// the leader line and in REACH, with when it last heard from it; a voter
// seen through gossip says so.
func TestClusterStatusReach(t *testing.T) {
	e := newTestEnv(t)
	last := time.Date(2026, 11, 29, 9, 30, 1, 0, time.UTC)
	e.svc.EditStatus(func(st *api.Status) {
		st.NodeID, st.State, st.Version = "n2", "follower", "v1.2.3"
		st.Voters = []api.Voter{
			{ID: "n1", RaftAddr: "127.0.0.1:7000", Suffrage: "voter", Reach: api.ReachUnreachable, Via: api.ViaRaft, LastContact: last},
			{ID: "n2", RaftAddr: "127.0.0.1:7001", Suffrage: "voter", Reach: api.ReachSelf},
			{ID: "n3", RaftAddr: "127.0.0.1:7002", Suffrage: "voter", Reach: api.ReachReachable, Via: api.ViaGossip},
		}
	})
	out := e.ok("cluster", "status")
	for _, re := range []string{
		`(?m)^version:\s+v1\.2\.3$`,
		`(?m)^leader:\s+n1 \(api 127\.0\.0\.1:7070\); unreachable since 09:30:01Z, \S+ ago \(raft\) from this node$`,
		`(?m)^\s+ID\s+RAFT ADDR\s+API ADDR\s+SUFFRAGE\s+REACH$`,
		`(?m)^\* n1\s+127\.0\.0\.1:7000\s+-\s+voter\s+unreachable since 09:30:01Z, \S+ ago \(raft\)$`,
		`(?m)^  n2\s+.*\s+self$`,
		`(?m)^  n3\s+.*\s+reachable \(gossip\)$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("cluster status lacks %s:\n%s", re, out)
		}
	}
}

func TestClusterAdmin(t *testing.T) {
	e := newTestEnv(t)
	out := e.ok("cluster", "join", "--node-id", "n3", "--raft-addr", "127.0.0.1:7002", "--api-addr", "127.0.0.1:7072")
	if !strings.Contains(out, "joined n3") {
		t.Errorf("join printed %q", out)
	}
	want := []api.JoinRequest{{NodeID: "n3", RaftAddr: "127.0.0.1:7002", APIAddr: "127.0.0.1:7072"}}
	if joins := e.svc.Joined(); !reflect.DeepEqual(joins, want) {
		t.Errorf("joins = %+v", joins)
	}
	if out := e.ok("cluster", "remove", "n2"); out != "removed n2\n" {
		t.Errorf("remove printed %q", out)
	}
	if out := e.ok("cluster", "snapshot"); !strings.Contains(out, "3-42-1700000000") || !strings.Contains(out, "index 42") {
		t.Errorf("snapshot printed %q", out)
	}
	if out := e.ok("cluster", "transfer-leadership", "--to", "n2"); out != "leader is now n2\n" {
		t.Errorf("transfer printed %q", out)
	}
	var tr api.TransferResponse
	if err := json.Unmarshal([]byte(e.ok("--json", "cluster", "transfer-leadership")), &tr); err != nil || tr.LeaderID != "n2" {
		t.Errorf("transfer --json: %+v, %v", tr, err)
	}
}

func TestErrors(t *testing.T) {
	e := newTestEnv(t, "claude")
	e.ok("send", "--from", "codex", "--to", "claude", "--channel", "review", "--text", "one", "--id", "msg-dup-1")
	e.svc.Fail("Remove", fmt.Errorf("node n9: %w", api.ErrNotFound))

	tests := []struct {
		name  string
		stdin string
		args  []string
		want  []string // substrings of stderr
	}{
		{"missing from", "", []string{"send", "--to", "claude", "--channel", "review", "--text", "x"},
			[]string{"--from", "MAOS_AGENT_ID"}},
		{"missing text", "", []string{"send", "--from", "codex", "--to", "claude", "--channel", "review"},
			[]string{"--text"}},
		{"missing to", "", []string{"send", "--from", "codex", "--to", " , ", "--channel", "review", "--text", "x"},
			[]string{"--to"}},
		{"empty stdin", "\n", []string{"send", "--from", "codex", "--to", "claude", "--channel", "review", "--text", "-"},
			[]string{"--text -", "standard input was empty"}},
		{"conflict", "", []string{"send", "--from", "codex", "--to", "claude", "--channel", "review", "--text", "two", "--id", "msg-dup-1"},
			[]string{"id msg-dup-1 is already stored with other content", "409"}},
		{"invalid", "", []string{"send", "--from", "codex", "--to", "claude", "--channel", "Bad Channel", "--text", "x"},
			[]string{"channel: must match", "400"}},
		{"missing channel", "", []string{"read"}, []string{"--channel", "MAOS_CHANNEL"}},
		{"unknown flag", "", []string{"read", "--bogus"}, []string{"bogus", "maosctl read --help"}},
		{"extra arg", "", []string{"channels", "extra"}, []string{`"extra"`}},
		{"get without id", "", []string{"get"}, []string{"ID"}},
		{"join without raft addr", "", []string{"cluster", "join", "--node-id", "n3", "--api-addr", "127.0.0.1:1"},
			[]string{"--raft-addr"}},
		{"remove unknown", "", []string{"cluster", "remove", "n9"}, []string{"node n9", "404"}},
		{"unknown command", "", []string{"frobnicate"}, []string{`"frobnicate"`}},
		{"mistyped command", "", []string{"sned"}, []string{`unknown command "sned"; did you mean send?`}},
		{"mistyped subcommand", "", []string{"cluster", "stauts"}, []string{`unknown command "stauts"; did you mean status?`}},
		{"global flag after command", "", []string{"cluster", "status", "--timeout", "1s"},
			[]string{"-timeout", "goes before the command", "maosctl --timeout ... cluster status"}},
		{"bad limit", "", []string{"read", "--channel", "x", "--limit", "-1"}, []string{"--limit"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.run(tt.stdin, tt.args...)
			if r.err == nil {
				t.Fatalf("succeeded: stdout %q", r.out)
			}
			if code := ExitCode(r.err); code != 1 {
				t.Errorf("exit code %d, want 1", code)
			}
			if !strings.HasPrefix(r.errOut, "maosctl: ") || strings.Count(r.errOut, "maosctl: ") != 1 {
				t.Errorf("stderr %q: want one line starting with \"maosctl: \"", r.errOut)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.errOut, w) {
					t.Errorf("stderr %q lacks %q", r.errOut, w)
				}
			}
			if r.out != "" {
				t.Errorf("stdout %q, want nothing", r.out)
			}
		})
	}
	if n := e.svc.NumStored(); n != 1 {
		t.Errorf("%d messages stored, want 1", n)
	}
	if c := e.svc.CallsTo("Remove"); len(c) != 1 || c[0].Arg != "n9" {
		t.Errorf("remove calls %+v, want one for n9", c)
	}
}

func TestUnreachable(t *testing.T) {
	newTestEnv(t) // clears the environment
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now

	r := runApp(addr, "", "cluster", "status")
	if r.err == nil || ExitCode(r.err) != 1 {
		t.Fatalf("err = %v", r.err)
	}
	want := "maosctl: cannot reach a maos node at http://" + addr + " (connection refused): is maosd running there? " +
		"Set --addr or MAOS_ADDR to a node's API address\n"
	if r.errOut != want {
		t.Errorf("stderr %q, want %q", r.errOut, want)
	}
}

func TestAddrFromEnv(t *testing.T) {
	e := newTestEnv(t)
	t.Setenv(envAddr, e.addr)
	var out, errOut bytes.Buffer
	app := App()
	app.Writer, app.ErrWriter = &out, &errOut
	if err := app.Run([]string{"maosctl", "cluster", "status"}); err != nil {
		t.Fatalf("%v: %s", err, errOut.String())
	}
	if !strings.Contains(out.String(), "node:") {
		t.Errorf("status printed %q", out.String())
	}
}

func TestHelpTeaches(t *testing.T) {
	var all []*cli.Command
	var walk func(cmds []*cli.Command)
	walk = func(cmds []*cli.Command) {
		for _, c := range cmds {
			all = append(all, c)
			walk(c.Subcommands)
		}
	}
	walk(App().Commands)
	// Every top-level command the docs name is there.
	have := map[string]bool{}
	for _, c := range App().Commands {
		have[c.Name] = true
	}
	for _, name := range []string{"send", "get", "read", "channels", "cluster", "agents", "inbox", "show",
		"read-mark", "reply", "thread", "receipts", "rules", "audit", "overview", "bulletin", "lock"} {
		if !have[name] {
			t.Errorf("maosctl has no %q command", name)
		}
	}
	for _, cmd := range all {
		if cmd.Usage == "" || cmd.UsageText == "" || cmd.Description == "" {
			t.Errorf("command %s lacks Usage, UsageText or Description", cmd.Name)
		}
		if !strings.Contains(cmd.UsageText, "\n   maosctl ") && !strings.Contains(cmd.UsageText, "| maosctl ") {
			t.Errorf("command %s has no example line in UsageText", cmd.Name)
		}
	}
}

// Each flag's help states its default once, in every command: a default
// written into the usage of a flag that also has a value prints two
// ("(default 60s) (default: 0s)").
func TestHelpStatesEachDefaultOnce(t *testing.T) {
	newTestEnv(t) // clears the environment the defaults read
	var walk func(path []string, cmds []*cli.Command)
	helps := map[string]string{"maosctl": runApp("127.0.0.1:1", "", "--help").out}
	walk = func(path []string, cmds []*cli.Command) {
		for _, c := range cmds {
			p := append(slices.Clone(path), c.Name)
			helps["maosctl "+strings.Join(p, " ")] = runApp("127.0.0.1:1", "", append(p, "--help")...).out
			walk(p, c.Subcommands)
		}
	}
	walk(nil, App().Commands)
	flags := 0
	for cmd, help := range helps {
		for _, line := range strings.Split(help, "\n") {
			if !strings.HasPrefix(strings.TrimSpace(line), "-") {
				continue
			}
			flags++
			if strings.Count(line, "(default") > 1 {
				t.Errorf("%s --help: two defaults: %s", cmd, strings.TrimSpace(line))
			}
		}
	}
	if len(helps) < 60 || flags < 200 {
		t.Fatalf("walked %d commands, %d flag lines; did the help format change?", len(helps), flags)
	}
	for cmd, want := range map[string]string{
		"maosctl send":      "give up after DURATION and exit 1 naming who did not get there (default: 1m0s)",
		"maosctl read":      "print at most N messages in total (following pages as needed) (default: 100)",
		"maosctl lock list": "print at most N locks in total (following pages as needed) (default: all)",
	} {
		if !strings.Contains(helps[cmd], want) {
			t.Errorf("%s --help lacks %q:\n%s", cmd, want, helps[cmd])
		}
	}
}

// A malformed --addr is refused before any request, naming the flag and
// the form it wants, not as a URL parser's error.
func TestMalformedAddr(t *testing.T) {
	e := newTestEnv(t)
	const want = "; want HOST:PORT (e.g. 127.0.0.1:7070) or http(s)://HOST:PORT\n"
	for addr, why := range map[string]string{
		"http://[bad":        `"http://[bad" is not a URL (missing ']' in host)`,
		"foo bar":            `"foo bar" is not host:port`,
		"localhost":          `"localhost" is not host:port`,
		"127.0.0.1:notaport": `"127.0.0.1:notaport": port must be 1..65535`,
		"127.0.0.1:99999":    `"127.0.0.1:99999": port must be 1..65535`,
		"ftp://h:1":          `"ftp://h:1": scheme "ftp"`,
		"://h":               `"://h" is not a URL (missing protocol scheme)`,
		"http://h:0":         `"h:0": port must be 1..65535`,
		"http://u@h:1":       `"http://u@h:1": want a host, and no user, query or fragment`,
		"a:1,b:2":            `"a:1,b:2" is not host:port`,
	} {
		r := runApp(addr, "", "cluster", "status")
		if r.err == nil || r.errOut != "maosctl: --addr (or $MAOS_ADDR): "+why+want {
			t.Errorf("--addr %q: err=%v stderr %q, want %q", addr, r.err, r.errOut, why)
		}
	}
	r := e.run("", "bench", "send", "--addr", e.addr+",nonsense", "--count", "1")
	if r.err == nil || !strings.HasPrefix(r.errOut, `maosctl: bench --addr: "nonsense" is not host:port; want HOST:PORT`) {
		t.Errorf("bench --addr with a bad entry: err=%v stderr %q", r.err, r.errOut)
	}
	if n := len(e.svc.CallsTo("Send")); n != 0 {
		t.Errorf("%d sends reached the node", n)
	}
	// The forms it takes.
	for _, addr := range []string{e.addr, "http://" + e.addr, "http://" + e.addr + "/"} {
		if r := runApp(addr, "", "cluster", "status"); r.err != nil {
			t.Errorf("--addr %q: %v %s", addr, r.err, r.errOut)
		}
	}
}

// A word that is no command gets no suggestion; a typo of one does.
func TestSuggestCommand(t *testing.T) {
	cmds := App().Commands
	for name, want := range map[string]string{"sned": "send", "snd": "send", "stauts": "", "frobnicate": "", "x": "", "who": "who"} {
		if got := suggestCommand(cmds, name); got != want {
			t.Errorf("suggestCommand(%q) = %q, want %q", name, got, want)
		}
	}
}
