package maosctl

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/rules"
	"github.com/maos-project/maos/testing/testenv"
)

// fail runs args, which must fail with exit 1, one "maosctl: " line on
// stderr containing every want, and nothing on stdout.
func (e *testEnv) fail(args []string, want ...string) {
	e.t.Helper()
	r := e.run("", args...)
	if r.err == nil || ExitCode(r.err) != 1 {
		e.t.Fatalf("maosctl %s: err = %v, want a failure; stdout %q", strings.Join(args, " "), r.err, r.out)
	}
	if !strings.HasPrefix(r.errOut, "maosctl: ") {
		e.t.Errorf("maosctl %s: stderr %q does not start with \"maosctl: \"", strings.Join(args, " "), r.errOut)
	}
	for _, w := range want {
		if !strings.Contains(r.errOut, w) {
			e.t.Errorf("maosctl %s: stderr %q lacks %q", strings.Join(args, " "), r.errOut, w)
		}
	}
	if r.out != "" {
		e.t.Errorf("maosctl %s: stdout %q, want nothing", strings.Join(args, " "), r.out)
	}
}

func (e *testEnv) apply(op api.Op, body any) {
	e.t.Helper()
	if _, err := e.svc.Apply(context.Background(), op, body); err != nil {
		e.t.Fatalf("apply %s: %v", op, err)
	}
}

func (e *testEnv) reviewers() {
	e.t.Helper()
	e.ok("agents", "register", "alice", "--role", "reviewer", "--capability", "go,review")
	e.ok("agents", "register", "bob", "--role", "reviewer")
}

func TestAgents(t *testing.T) {
	e := newTestEnv(t)
	out := e.ok("agents", "register", "alice", "--role", "reviewer", "--capability", "go, review", "--node", "n1", "--description", "reads diffs\nsecond line")
	if out != "registered alice (role reviewer, capabilities go,review, node n1)\n" {
		t.Errorf("register printed %q", out)
	}
	e.ok("agents", "register", "--role", "reviewer", "bob")
	e.ok("agents", "register", "carol", "--capability", "go")

	lines := strings.Split(strings.TrimSpace(e.ok("agents", "list")), "\n")
	want := [][]string{
		{"ID", "ROLE", "CAPABILITIES", "NODE", "A2A", "DESCRIPTION"},
		{"alice", "reviewer", "go,review", "n1", "-", "reads", "diffs"},
		{"bob", "reviewer", "-", "-", "-", "-"},
		{"carol", "agent", "go", "-", "-", "-"},
	}
	if len(lines) != len(want) {
		t.Fatalf("agents list printed %d lines:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	for i := range want {
		if got := strings.Fields(lines[i]); !slices.Equal(got, want[i]) {
			t.Errorf("line %d = %q, want %q", i, got, want[i])
		}
	}

	var agents []api.Agent
	if err := json.Unmarshal([]byte(e.ok("--json", "agents", "find", "--capability", "go")), &agents); err != nil {
		t.Fatal(err)
	}
	if len(agents) != 2 || agents[0].ID != "alice" || agents[1].ID != "carol" {
		t.Errorf("find --capability go = %+v", agents)
	}
	out = e.ok("agents", "find", "--role", "reviewer", "--capability", "go")
	if !strings.Contains(out, "alice") || strings.Contains(out, "bob") || strings.Contains(out, "carol") {
		t.Errorf("find --role reviewer --capability go printed:\n%s", out)
	}
	if out := e.ok("agents", "find", "--role", "nobody"); out != "" {
		t.Errorf("find with no match printed %q", out)
	}
	if out := strings.TrimSpace(e.ok("--json", "agents", "list", "--role", "nobody")); out != "[]" {
		t.Errorf("empty --json list = %q", out)
	}

	out = e.ok("agents", "roles")
	if !regexp.MustCompile(`(?m)^agent\s+1$`).MatchString(out) || !regexp.MustCompile(`(?m)^reviewer\s+2$`).MatchString(out) {
		t.Errorf("roles printed:\n%s", out)
	}
	var roles map[string]uint64
	if err := json.Unmarshal([]byte(e.ok("--json", "agents", "roles")), &roles); err != nil || roles["reviewer"] != 2 {
		t.Errorf("roles --json = %v, %v", roles, err)
	}

	if out := e.ok("agents", "unregister", "bob"); out != "unregistered bob (role reviewer)\n" {
		t.Errorf("unregister printed %q", out)
	}
	e.fail([]string{"agents", "unregister", "bob"}, "agent bob", "404")
	e.fail([]string{"agents", "find"}, "--role or --capability")
	e.fail([]string{"agents", "register"}, "missing ID")
	e.fail([]string{"agents", "register", "Bad"}, "id: must match", "400")
	e.fail([]string{"agents", "register", "x", "--capability", "C++"}, "capabilities[0]", "400")
	e.fail([]string{"agents", "list", "--role", "Bad Role"}, "role: must match", "400")
}

func TestInboxAndReadMark(t *testing.T) {
	e := newTestEnv(t)
	e.reviewers()
	id1 := e.send("review", "codex", "role:reviewer", "first review", "--priority", "urgent", "--title", "Retry")
	id2 := e.send("review", "claude", "alice", "second", "--type", "status")
	id3 := e.send("review", "codex", "[ab]*", "third")

	out := e.ok("inbox", "--agent", "alice")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "* #") || !strings.Contains(lines[0], "codex → role:reviewer [chat/urgent] Retry: first review") ||
		!strings.Contains(lines[1], "claude → alice [status/normal] second") {
		t.Errorf("inbox printed:\n%s", out)
	}
	for args, wantN := range map[string]int{"--unread": 3, "--priority=urgent": 1, "--from=claude": 1, "--type=status": 1} {
		out := e.ok("inbox", "--agent", "alice", args)
		if n := strings.Count(out, "\n"); n != wantN {
			t.Errorf("inbox %s printed %d lines, want %d:\n%s", args, n, wantN, out)
		}
	}
	if out := e.ok("inbox", "--agent", "bob"); strings.Count(out, "\n") != 2 {
		t.Errorf("bob's inbox:\n%s", out)
	}

	out = e.ok("inbox", "--agent", "alice", "--counts")
	if out != "alice: 3 messages, 3 unread (urgent 1, high 0, normal 2, low 0)\n" {
		t.Errorf("counts printed %q", out)
	}

	if out := e.ok("read-mark", "--agent", "alice", id1); out != "marked 1 read; alice has 2 unread\n" {
		t.Errorf("read-mark printed %q", out)
	}
	// Flags after the id work too; a second mark changes nothing.
	if out := e.ok("read-mark", id1, "--agent", "alice"); out != "marked 0 read; alice has 2 unread\n" {
		t.Errorf("read-mark again printed %q", out)
	}
	m2, _ := e.svc.State().Message(id2)
	var res api.MarkReadResult
	if err := json.Unmarshal([]byte(e.ok("--json", "read-mark", "--agent", "alice", "--upto", strconv.FormatUint(m2.Seq, 10))), &res); err != nil {
		t.Fatal(err)
	}
	if res.Marked != 1 || res.Counts.Unread != 1 || res.Counts.ReadUpto != m2.Seq {
		t.Errorf("read-mark --upto = %+v", res)
	}
	out = e.ok("inbox", "--agent", "alice")
	if !strings.HasPrefix(out, "  #") || strings.Count(out, "* #") != 1 {
		t.Errorf("inbox after marks:\n%s", out)
	}
	var entries []api.InboxEntry
	if err := json.Unmarshal([]byte(e.ok("--json", "inbox", "--agent", "alice", "--unread")), &entries); err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].ID != id3 || entries[0].Read {
		t.Errorf("inbox --unread --json = %+v", entries)
	}
	if c := e.svc.State(); c != nil {
		if counts, _ := c.InboxCounts("bob"); counts.Unread != 2 {
			t.Errorf("bob's unread = %d, want 2: read marks are per agent", counts.Unread)
		}
	}

	// Paging: --limit messages and a hint, or every page with --all.
	r := e.run("", "inbox", "--agent", "alice", "--limit", "2")
	if strings.Count(r.out, "\n") != 2 || !strings.Contains(r.errOut, "--after") {
		t.Errorf("one page: stdout %q stderr %q", r.out, r.errOut)
	}
	r = e.run("", "inbox", "--agent", "alice", "--limit", "2", "--page-size", "1")
	if strings.Count(r.out, "\n") != 2 || !strings.Contains(r.errOut, "--after") {
		t.Errorf("--limit 2 over pages of 1: stdout %q stderr %q", r.out, r.errOut)
	}
	if out := e.ok("inbox", "--agent", "alice", "--page-size", "1", "--all"); strings.Count(out, "\n") != 3 {
		t.Errorf("--all printed:\n%s", out)
	}

	// The agent from the environment.
	t.Setenv(envAgent, "bob")
	if out := e.ok("inbox", "--counts"); !strings.HasPrefix(out, "bob: 2 messages") {
		t.Errorf("inbox with MAOS_AGENT_ID printed %q", out)
	}
	os.Unsetenv(envAgent)

	e.fail([]string{"inbox"}, "--agent", "MAOS_AGENT_ID")
	e.fail([]string{"inbox", "--agent", "zed"}, "agent zed", "404")
	e.fail([]string{"inbox", "--agent", "alice", "--priority", "asap"}, "priority", "400")
	e.fail([]string{"inbox", "--agent", "alice", "--limit", "0"}, "--limit")
	e.fail([]string{"read-mark", "--agent", "alice"}, "missing ID (or --upto SEQ)")
	e.fail([]string{"read-mark", "--agent", "alice", id1, "--upto", "3"}, "not both")
	e.fail([]string{"read-mark", "--agent", "alice", "--upto", "soon"}, `--upto "soon"`)
	e.fail([]string{"read-mark", id1}, "--agent")
	e.fail([]string{"read-mark", "--agent", "alice", "msg-nope"}, "msg-nope", "404")
	e.fail([]string{"read-mark", "--agent", "zed", "--upto", "9"}, "agent zed", "404")
}

func TestShowReplyThreadReceipts(t *testing.T) {
	e := newTestEnv(t)
	e.reviewers()
	root := e.send("review", "codex", "role:reviewer", "please review @carol", "--title", "Retry logic")

	out := e.ok("show", root)
	for _, want := range []string{"to:", "role:reviewer → alice, bob", "title:", "Retry logic", "\n\nplease review @carol\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	var m api.Message
	if err := json.Unmarshal([]byte(e.ok("--json", "show", root)), &m); err != nil || !slices.Equal(m.Recipients, []string{"alice", "bob"}) {
		t.Errorf("show --json recipients = %q, %v", m.Recipients, err)
	}
	// A plain id shows as written.
	plain := e.send("review", "codex", "alice", "hi")
	if out := e.ok("show", plain); !regexp.MustCompile(`(?m)^to:\s+alice$`).MatchString(out) {
		t.Errorf("show of a plain send:\n%s", out)
	}

	out = e.ok("reply", root, "--from", "alice", "--text", "looks good")
	rm := sendIDRE.FindStringSubmatch(out)
	if rm == nil {
		t.Fatalf("reply printed %q", out)
	}
	reply, err := e.svc.State().Message(rm[1])
	if err != nil {
		t.Fatal(err)
	}
	if reply.InReplyTo != root || reply.ThreadID != root || reply.Channel != "review" || !slices.Equal(reply.To, []string{"codex"}) ||
		reply.Type != "response" || reply.Title != "Re: Retry logic" || reply.Priority != api.PriorityNormal || reply.Visibility != api.VisibilityPublic {
		t.Errorf("reply = %+v", reply)
	}
	// A reply to the reply stays in the root's thread; text from stdin.
	r := e.run("second thoughts\n", "reply", rm[1], "--from", "codex", "--text", "-", "--type", "question")
	if r.err != nil {
		t.Fatalf("reply to reply: %v %s", r.err, r.errOut)
	}
	r2 := sendIDRE.FindStringSubmatch(r.out)
	if r2 == nil {
		t.Fatalf("reply printed %q", r.out)
	}
	if m, _ := e.svc.State().Message(r2[1]); m.ThreadID != root || m.Content.Text != "second thoughts" || !slices.Equal(m.To, []string{"alice"}) ||
		m.Type != "question" || m.Title != "Re: Retry logic" {
		t.Errorf("reply to reply = %+v", m)
	}
	// The flags given override the built reply; a task_assign is answered
	// with a task_result.
	task := e.send("review", "codex", "alice", "do it", "--type", "task_assign", "--title", "Job")
	r3 := sendIDRE.FindStringSubmatch(e.ok("reply", task, "--from", "alice", "--text", "done"))
	if r3 == nil {
		t.Fatal("reply to a task printed no id")
	}
	if m, _ := e.svc.State().Message(r3[1]); m.Type != "task_result" || m.Title != "Re: Job" || m.Priority != api.PriorityNormal {
		t.Errorf("reply to a task_assign = %+v", m)
	}
	r4 := sendIDRE.FindStringSubmatch(e.ok("reply", task, "--from", "alice", "--text", "more", "--title", "Status",
		"--type", "status", "--priority", "high", "--id", "msg-reply-4"))
	if r4 == nil || r4[1] != "msg-reply-4" {
		t.Fatalf("reply --id printed %v", r4)
	}
	if m, _ := e.svc.State().Message(r4[1]); m.Type != "status" || m.Title != "Status" || m.Priority != api.PriorityHigh || m.InReplyTo != task {
		t.Errorf("reply with --title --type --priority = %+v", m)
	}
	r5 := sendIDRE.FindStringSubmatch(e.ok("reply", task, "--from", "alice", "--text", "untitled", "--title", ""))
	if r5 == nil {
		t.Fatal("reply --title '' printed no id")
	}
	if m, _ := e.svc.State().Message(r5[1]); m.Title != "" {
		t.Errorf("reply --title '' has title %q, want none", m.Title)
	}

	lines := strings.Split(strings.TrimSuffix(e.ok("thread", r2[1]), "\n"), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "Retry logic: please review") || !strings.Contains(lines[1], "alice → codex [response/normal] Re: Retry logic: looks good") ||
		!strings.Contains(lines[2], "codex → alice [question/normal] Re: Retry logic: second thoughts") {
		t.Errorf("thread printed:\n%s", strings.Join(lines, "\n"))
	}
	var msgs []api.Message
	if err := json.Unmarshal([]byte(e.ok("--json", "thread", root)), &msgs); err != nil || len(msgs) != 3 {
		t.Errorf("thread --json: %d messages, %v", len(msgs), err)
	}

	// bob's watcher typed it into bob's pane.
	e.apply(api.OpReceiptState, api.ReceiptStateCommand{ID: root, Agent: "bob", State: api.ReceiptDelivered})
	out = e.ok("receipts", root)
	for _, re := range []string{`(?m)^AGENT\s+STATE\s+DELIVERED\s+TYPED\s+READ\s+ANSWERED\s+NOTE$`,
		`(?m)^alice\s+answered\s+\S+Z\s+-\s+-\s+\S+Z\s+` + regexp.QuoteMeta(rm[1]) + `$`, `(?m)^bob\s+delivered\s+\S+Z\s+\S+Z\s+-\s+-\s+-$`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("receipts lacks %s:\n%s", re, out)
		}
	}
	var rc api.Receipts
	if err := json.Unmarshal([]byte(e.ok("--json", "receipts", root)), &rc); err != nil || len(rc.Receipts) != 2 || rc.Receipts[0].State != api.ReceiptAnswered {
		t.Errorf("receipts --json = %+v, %v", rc, err)
	}

	e.fail([]string{"show", "msg-nope"}, "msg-nope", "404")
	e.fail([]string{"reply", "msg-nope", "--from", "alice", "--text", "x"}, "msg-nope", "404")
	e.fail([]string{"reply", root, "--text", "x"}, "--from")
	e.fail([]string{"reply", root, "--from", "alice"}, "--text")
	e.fail([]string{"thread", "msg-nope"}, "msg-nope", "404")
	e.fail([]string{"receipts", "msg-nope"}, "msg-nope", "404")
	e.fail([]string{"receipts"}, "missing ID")
}

var sendIDRE = regexp.MustCompile(`^(msg-\S+) seq=\d+\n`)

func TestSendWait(t *testing.T) {
	e := newTestEnv(t)
	e.reviewers()

	// Another agent reads while the sender waits.
	done := make(chan runResult, 1)
	go func() {
		done <- e.run("", "send", "--from", "codex", "--to", "role:reviewer", "--channel", "review", "--text", "read me",
			"--id", "msg-wait-1", "--wait", "read", "--timeout", "30s")
	}()
	deadline := testenv.Deadline(t)
	for {
		if _, err := e.svc.State().Message("msg-wait-1"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the send never arrived")
		}
		time.Sleep(5 * time.Millisecond)
	}
	e.apply(api.OpMarkRead, api.MarkReadCommand{Agent: "alice", ID: "msg-wait-1"})
	reply := &api.Message{ID: "msg-wait-2", From: "bob", To: api.Recipients{"codex"}, Channel: "review", Content: api.Content{Text: "answered"},
		InReplyTo: "msg-wait-1", Type: "response", Priority: "normal", Visibility: "public"}
	e.apply(api.OpSend, api.SendCommand{Message: *reply})
	r := <-done
	if r.err != nil {
		t.Fatalf("send --wait read: %v %s", r.err, r.errOut)
	}
	if !regexp.MustCompile(`^msg-wait-1 seq=\d+\nread by alice, bob\n$`).MatchString(r.out) {
		t.Errorf("send --wait read printed %q", r.out)
	}

	// Nobody answers: exit 1 naming who did not, after the send line.
	r = e.run("", "send", "--from", "codex", "--to", "alice,bob", "--channel", "review", "--text", "answer me",
		"--id", "msg-wait-3", "--wait", "answered", "--timeout", "300ms")
	if r.err == nil || !strings.HasPrefix(r.out, "msg-wait-3 seq=") ||
		!strings.Contains(r.errOut, "maosctl: not answered within 300ms by alice, bob") || !strings.Contains(r.errOut, "maosctl receipts msg-wait-3") {
		t.Errorf("timed-out wait: err %v stdout %q stderr %q", r.err, r.out, r.errOut)
	}

	// --json: one object with the receipts.
	e.apply(api.OpMarkRead, api.MarkReadCommand{Agent: "alice", ID: "msg-wait-3"})
	r = e.run("", "--json", "send", "--from", "codex", "--to", "alice", "--channel", "review", "--text", "again",
		"--id", "msg-wait-4", "--wait", "read", "--timeout", "200ms")
	var out sendWait
	if err := json.Unmarshal([]byte(r.out), &out); err != nil {
		t.Fatalf("--json wait printed %q: %v", r.out, err)
	}
	if r.err == nil || out.ID != "msg-wait-4" || out.Wait.State != "read" || !slices.Equal(out.Wait.Pending, []string{"alice"}) || len(out.Wait.Receipts) != 1 {
		t.Errorf("--json wait = %+v, err %v", out, r.err)
	}

	// Bad flags are refused before anything is sent.
	before := e.svc.FSM().AppliedIndex()
	e.fail([]string{"send", "--from", "codex", "--to", "alice", "--channel", "review", "--text", "x", "--wait", "delivered"}, `--wait "delivered"`, "read or answered")
	e.fail([]string{"send", "--from", "codex", "--to", "alice", "--channel", "review", "--text", "x", "--timeout", "5s"}, "--timeout goes with --wait")
	e.fail([]string{"send", "--from", "codex", "--to", "alice", "--channel", "review", "--text", "x", "--wait", "read", "--timeout", "0s"}, "positive duration")
	if after := e.svc.FSM().AppliedIndex(); after != before {
		t.Errorf("refused sends applied entries: %d → %d", before, after)
	}
}

func TestSendGlobalTimeoutStillBoundsTheCall(t *testing.T) {
	newTestEnv(t)
	app := App()
	var global, local time.Duration
	for _, cmd := range app.Commands {
		if cmd.Name == "send" {
			cmd.Action = func(c *cli.Context) error {
				global, local = rootContext(c).Duration("timeout"), c.Duration("timeout")
				return nil
			}
		}
	}
	if err := app.Run([]string{"maosctl", "--timeout", "7s", "send", "--wait", "read", "--timeout", "2m"}); err != nil {
		t.Fatal(err)
	}
	if global != 7*time.Second || local != 2*time.Minute {
		t.Errorf("global %s local %s, want 7s and 2m", global, local)
	}
}

func TestSendBlockedAndStrict(t *testing.T) {
	e := newTestEnv(t)
	e.ok("agents", "register", "tina", "--role", "tester")
	e.ok("agents", "register", "rex", "--role", "reviewer")
	e.ok("agents", "register", "dev", "--role", "developer")
	e.apply(api.OpSetRules, api.SetRulesCommand{Rules: &rules.Document{
		Forbidden: []rules.ForbiddenRule{{From: "tina", To: "rex", Reason: "testers go through the developer"}},
	}})
	out := e.ok("send", "--from", "tina", "--to", "rex,dev", "--channel", "qa", "--text", "results")
	if !regexp.MustCompile(`^msg-\S+ seq=\d+\nblocked rex: testers go through the developer\n$`).MatchString(out) {
		t.Errorf("partly blocked send printed %q", out)
	}
	var res api.SendResponse
	if err := json.Unmarshal([]byte(e.ok("--json", "send", "--from", "tina", "--to", "rex,dev", "--channel", "qa", "--text", "again")), &res); err != nil ||
		len(res.Blocked) != 1 || res.Blocked[0].ID != "rex" {
		t.Errorf("--json blocked = %+v, %v", res, err)
	}
	e.fail([]string{"send", "--from", "tina", "--to", "rex", "--channel", "qa", "--text", "x"}, "testers go through the developer", "403")

	// strict_senders through the config command.
	if out := e.ok("cluster", "config", "get"); out != "artifact_quota_bytes: 1073741824\nartifact_retention_seconds: 604800\nauth_required: false\nescalation_target: \"\"\nsecret_guard: \"refuse\"\nstrict_senders: false\nunknown_recipients: \"refuse\"\n" {
		t.Errorf("config get printed %q", out)
	}
	if out := e.ok("cluster", "config", "set", "strict_senders", "true"); out != "artifact_quota_bytes: 1073741824\nartifact_retention_seconds: 604800\nauth_required: false\nescalation_target: \"\"\nsecret_guard: \"refuse\"\nstrict_senders: true\nunknown_recipients: \"refuse\"\n" {
		t.Errorf("config set printed %q", out)
	}
	if out := e.ok("cluster", "config", "get", "strict_senders"); out != "true\n" {
		t.Errorf("config get strict_senders printed %q", out)
	}
	var cfg api.ClusterConfig
	if err := json.Unmarshal([]byte(e.ok("--json", "cluster", "config", "get")), &cfg); err != nil || !cfg.StrictSenders {
		t.Errorf("config get --json = %+v, %v", cfg, err)
	}
	e.fail([]string{"send", "--from", "mallory", "--to", "dev", "--channel", "qa", "--text", "x"}, "mallory", "strict_senders", "403")
	e.fail([]string{"cluster", "config", "set", "strict_senders", "maybe"}, "value", "want true or false", "400")
	e.fail([]string{"cluster", "config", "set", "loose", "1"}, `unknown setting "loose"`, "strict_senders")
	e.fail([]string{"cluster", "config", "get", "loose"}, `unknown setting "loose"`)
	e.fail([]string{"cluster", "config", "set", "strict_senders"}, "missing VALUE")
	if cfg, _ := e.svc.State().Config(); !cfg.StrictSenders {
		t.Errorf("a refused set changed the setting")
	}
}

// send --private stores a private message; a reply to one is private too.
func TestPrivateSendAndReply(t *testing.T) {
	e := newTestEnv(t)
	e.reviewers()
	stored := func(id string) *api.Message {
		t.Helper()
		m, err := e.svc.State().Message(id)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	public := e.send("review", "codex", "alice", "hello")
	if v := stored(public).Visibility; v != api.VisibilityPublic {
		t.Errorf("a plain send has visibility %q, want public", v)
	}
	secret := e.send("review", "codex", "alice", "the password is swordfish", "--private")
	if v := stored(secret).Visibility; v != api.VisibilityPrivate {
		t.Fatalf("send --private has visibility %q, want private", v)
	}
	rm := sendIDRE.FindStringSubmatch(e.ok("reply", secret, "--from", "alice", "--text", "noted"))
	if rm == nil {
		t.Fatal("reply printed no id")
	}
	if v := stored(rm[1]).Visibility; v != api.VisibilityPrivate {
		t.Errorf("a reply to a private message has visibility %q, want private", v)
	}
	rm = sendIDRE.FindStringSubmatch(e.ok("reply", public, "--from", "alice", "--text", "psst", "--private"))
	if rm == nil {
		t.Fatal("reply printed no id")
	}
	if v := stored(rm[1]).Visibility; v != api.VisibilityPrivate {
		t.Errorf("reply --private has visibility %q, want private", v)
	}
}

// What a node did not find is said in the user's words, whichever command
// asked: no package or operation name (the API's message, built by fsm).
func TestNotFoundSaysWhat(t *testing.T) {
	e := newTestEnv(t)
	e.reviewers()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "msg-x"}, "maosctl: message msg-x: not found (404 not_found)\n"},
		{[]string{"show", "msg-x"}, "maosctl: message msg-x: not found (404 not_found)\n"},
		{[]string{"receipts", "msg-x"}, "maosctl: message msg-x: not found (404 not_found)\n"},
		{[]string{"thread", "msg-x"}, "maosctl: thread msg-x: not found (404 not_found)\n"},
		{[]string{"reply", "msg-x", "--from", "alice", "--text", "t"}, "maosctl: message msg-x: not found (404 not_found)\n"},
		{[]string{"agents", "unregister", "zed"}, "maosctl: agent zed: not found (404 not_found)\n"},
		{[]string{"inbox", "--agent", "zed"}, "maosctl: agent zed: not registered and never sent a message: not found (404 not_found)\n"},
		{[]string{"read-mark", "--agent", "alice", "msg-x"}, "maosctl: message msg-x is not in alice's inbox: not found (404 not_found)\n"},
		{[]string{"lock", "release", "--path", "a.go", "--holder", "alice", "--token", "3"}, `maosctl: no lock on "a.go" (released, or never granted): not found (404 not_found)` + "\n"},
		{[]string{"channel", "retention", "--channel", "c"}, "maosctl: channel c has no retention policy: not found (404 not_found)\n"},
	} {
		r := e.run("", tc.args...)
		if r.err == nil || r.errOut != tc.want {
			t.Errorf("maosctl %s: err=%v stderr %q, want %q", strings.Join(tc.args, " "), r.err, r.errOut, tc.want)
		}
	}
}

// agents register --a2a makes a remote A2A agent, its token read from
// --a2a-token-file and never printed; list shows the URL; a missing or
// empty token file, or a token file without --a2a, is an error naming
// the flag.
func TestAgentsRegisterA2A(t *testing.T) {
	e := newTestEnv(t)
	dir := t.TempDir()
	tokFile := filepath.Join(dir, "tok")
	if err := os.WriteFile(tokFile, []byte("  remote-token-123  \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := e.ok("agents", "register", "reviewer-ext", "--role", "reviewer", "--a2a", "https://agents.example.com/reviewer", "--a2a-token-file", tokFile)
	if out != "registered reviewer-ext (role reviewer, a2a https://agents.example.com/reviewer with a token)\n" {
		t.Errorf("register --a2a printed %q", out)
	}
	got, err := e.svc.State().AgentA2A("reviewer-ext")
	if err != nil || got.Credential != "remote-token-123" || got.URL != "https://agents.example.com/reviewer" {
		t.Fatalf("stored remote %+v, %v: want the URL and the trimmed token", got, err)
	}
	list := e.ok("agents", "list")
	if !strings.Contains(list, "https://agents.example.com/reviewer") || strings.Contains(list, "remote-token-123") {
		t.Errorf("agents list:\n%s\nwant the URL, never the token", list)
	}
	js := e.ok("--json", "agents", "list")
	if !strings.Contains(js, `"a2a":{"url":"https://agents.example.com/reviewer","credential":true}`) &&
		!strings.Contains(js, `"credential": true`) || strings.Contains(js, "remote-token-123") {
		t.Errorf("agents list --json:\n%s\nwant a2a with credential true, never the token", js)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--a2a", "https://x.example/", "--a2a-token-file", filepath.Join(dir, "missing")}, "--a2a-token-file"},
		{[]string{"--a2a", "https://x.example/", "--a2a-token-file", empty}, "--a2a-token-file"},
		{[]string{"--a2a-token-file", tokFile}, "--a2a-token-file needs --a2a"},
		{[]string{"--a2a", "ftp://x.example/"}, "a2a.url"},
	} {
		r := e.run("", append([]string{"agents", "register", "other"}, tc.args...)...)
		if r.err == nil || !strings.Contains(r.errOut, tc.want) {
			t.Errorf("register other %v: err %v, stderr %q; want an error naming %q", tc.args, r.err, r.errOut, tc.want)
		}
	}
	if _, err := e.svc.State().Agent("other"); err == nil {
		t.Errorf("a refused registration stored agent other")
	}
}
