package maosctl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/transport"
)

// newHookEnv is a CLI env on a real state machine with alice registered.
func newHookEnv(t *testing.T) *testEnv {
	t.Helper()
	e := newTestEnv(t)
	e.apply(api.OpRegisterAgent, api.RegisterAgentCommand{ID: "alice", Role: "reviewer"})
	return e
}

// mail stores a message to alice and returns its id.
func (e *testEnv) mail(id, from string, prio api.Priority, title, replyTo string) string {
	e.t.Helper()
	m := api.Message{
		ID: id, Channel: "work", Type: "request", From: from, To: api.Recipients{"alice"}, Priority: prio,
		Title: title, InReplyTo: replyTo, Content: api.Content{Text: "body of " + title},
	}
	m.Normalize(time.Now())
	e.apply(api.OpSend, api.SendCommand{Message: m})
	return id
}

func TestDigestOrderAndFolding(t *testing.T) {
	msgs := []api.Message{
		{ID: "m1", Seq: 1, From: "bob", Priority: "normal", Title: "old"},
		{ID: "m2", Seq: 2, From: "carol", Priority: "urgent", Title: "fire"},
		{ID: "m3", Seq: 3, From: "bob", Priority: "low", Title: "re: old", ThreadID: "m1"},
		{ID: "m4", Seq: 4, From: "dave", Priority: "high", Title: "new\nline"},
		{ID: "m5", Seq: 5, From: "erin", Priority: "urgent", Title: "fire 2"},
		{ID: "m6", Seq: 6, From: "bob", Priority: "normal", Title: "re: re: old", ThreadID: "m1"},
	}
	got := digest(digestInput{Agent: "alice", Messages: msgs, TotalUnread: 6}, DigestMaxChars)
	want := `6 unread messages for alice (2 urgent), urgent first, then newest first:
- m5 from erin [urgent] fire 2
- m2 from carol [urgent] fire
- m6 from bob [normal] re: re: old (+2 more unread in thread m1)
- m4 from dave [high] new line
0 left out. Read: maosctl inbox --agent alice --unread; one message: maosctl show ID; a thread: maosctl thread ID; then: maosctl read-mark --agent alice ID
`
	if got != want {
		t.Errorf("digest:\n%s\nwant:\n%s", got, want)
	}
	if d := digest(digestInput{Agent: "alice"}, DigestMaxChars); d != "" {
		t.Errorf("empty digest = %q", d)
	}
	// Messages never fetched count as left out.
	got = digest(digestInput{Agent: "alice", Messages: msgs[:1], TotalUnread: 9}, DigestMaxChars)
	if !strings.Contains(got, "9 unread messages") || !strings.Contains(got, "\n8 left out.") {
		t.Errorf("partial digest:\n%s", got)
	}
}

func TestDigestTruncatesExactlyAtCap(t *testing.T) {
	var msgs []api.Message
	for i := range 400 {
		msgs = append(msgs, api.Message{ID: fmt.Sprintf("msg-%04d", i), Seq: uint64(i + 1), From: "bob",
			Priority: "normal", Title: strings.Repeat("t", 30) + fmt.Sprint(i)})
	}
	in := digestInput{Agent: "alice", Messages: msgs, TotalUnread: len(msgs)}
	full := digest(in, 1<<20)
	if !strings.HasSuffix(strings.SplitAfterN(full, "\n", 402)[401], "0 left out. Read: maosctl inbox --agent alice --unread; one message: maosctl show ID; a thread: maosctl thread ID; then: maosctl read-mark --agent alice ID\n") {
		t.Fatalf("full digest does not end with the footer")
	}
	if len(full) <= DigestMaxChars {
		t.Fatalf("fixture too small: %d chars", len(full))
	}
	capped := digest(in, DigestMaxChars)
	if len(capped) > DigestMaxChars {
		t.Fatalf("digest is %d chars, over the cap %d", len(capped), DigestMaxChars)
	}
	lines := strings.Split(strings.TrimSuffix(capped, "\n"), "\n")
	shown := len(lines) - 2
	if want := fmt.Sprintf("%d left out. Read: maosctl inbox --agent alice --unread;", 400-shown); !strings.HasPrefix(lines[len(lines)-1], want) {
		t.Errorf("footer %q, want prefix %q", lines[len(lines)-1], want)
	}
	// Newest first: the first line is the last message.
	if !strings.HasPrefix(lines[1], "- msg-0399 ") {
		t.Errorf("first line %q", lines[1])
	}
	// Exactly at the cap: a cap of the digest's own length keeps every
	// line; one byte less drops one.
	n := len(capped)
	if got := digest(in, n); got != capped {
		t.Errorf("cap %d changed the digest", n)
	}
	one := digest(in, n-1)
	if len(one) > n-1 || strings.Count(one, "\n") != strings.Count(capped, "\n")-1 {
		t.Errorf("cap %d: %d chars, %d lines; want one line fewer than %d", n-1, len(one), strings.Count(one, "\n"), strings.Count(capped, "\n"))
	}
	// A single line that would overflow by one byte is left out.
	m := []api.Message{msgs[0]}
	all := digest(digestInput{Agent: "alice", Messages: m, TotalUnread: 1}, 1<<20)
	if got := digest(digestInput{Agent: "alice", Messages: m, TotalUnread: 1}, len(all)); got != all {
		t.Errorf("at cap: %q", got)
	}
	if got := digest(digestInput{Agent: "alice", Messages: m, TotalUnread: 1}, len(all)-1); strings.Contains(got, "msg-0000") || !strings.Contains(got, "\n1 left out.") {
		t.Errorf("one under cap: %q", got)
	}
	// Huge titles are shortened so one message cannot fill the digest.
	long := digestLine(api.Message{ID: "x", From: "y", Title: strings.Repeat("é", 5000)}, 1)
	if len([]rune(long)) > digestTitleMax+40 {
		t.Errorf("long title line is %d runes", len([]rune(long)))
	}
}

// hook runs `maosctl hook DIALECT --agent alice` with stdin and returns stdout.
func (e *testEnv) hook(dialect, stdin string) runResult {
	e.t.Helper()
	return e.run(stdin, "hook", dialect, "--agent", "alice")
}

func TestHookGolden(t *testing.T) {
	e := newHookEnv(t)
	// The agent's shell has $MAOS_ADDR too: the commands need no --addr.
	t.Setenv(envAddr, e.addr)
	identity := fmt.Sprintf("You are maos agent alice (mailbox at http://%s). Send: maosctl send --from alice --to B --text T; reply: maosctl reply ID --from alice --text T.\\n", e.addr)
	footer := "0 left out. Read: maosctl inbox --agent alice --unread; one message: maosctl show ID; a thread: maosctl thread ID; then: maosctl read-mark --agent alice ID\\n"

	for _, dialect := range []string{"claude-code", "codex"} {
		// No mail: SessionStart still tells the identity; the others are silent.
		if r := e.hook(dialect, `{"hook_event_name":"SessionStart","source":"startup"}`); r.err != nil ||
			r.out != `{"hookSpecificOutput":{"hookEventName":"SessionStart","additionalContext":"`+identity+`No unread mail.\n"}}`+"\n" {
			t.Errorf("%s SessionStart, no mail: err=%v out=%q", dialect, r.err, r.out)
		}
		for _, ev := range []string{`{"hook_event_name":"UserPromptSubmit","prompt":"hi"}`, `{"hook_event_name":"Stop","stop_hook_active":false}`} {
			if r := e.hook(dialect, ev); r.err != nil || r.out != "" {
				t.Errorf("%s %s, no mail: err=%v out=%q", dialect, ev, r.err, r.out)
			}
		}
	}

	e.mail("msg-1", "bob", "normal", "please review", "")
	for _, dialect := range []string{"claude-code", "codex"} {
		digest := "1 unread message for alice, urgent first, then newest first:\\n- msg-1 from bob [normal] please review\\n" + footer
		for _, ev := range []string{"SessionStart", "UserPromptSubmit"} {
			want := `{"hookSpecificOutput":{"hookEventName":"` + ev + `","additionalContext":"` + identity + digest + `"}}` + "\n"
			if r := e.hook(dialect, `{"session_id":"s","hook_event_name":"`+ev+`"}`); r.err != nil || r.out != want {
				t.Errorf("%s %s:\n got %q\nwant %q (err %v)", dialect, ev, r.out, want, r.err)
			}
		}
		// Stop without urgent mail: the agent may stop.
		if r := e.hook(dialect, `{"hook_event_name":"Stop","stop_hook_active":false}`); r.err != nil || r.out != "" {
			t.Errorf("%s Stop without urgent mail: err=%v out=%q", dialect, r.err, r.out)
		}
	}

	e.mail("msg-2", "carol", "urgent", "prod is down", "")
	e.mail("msg-3", "carol", "urgent", "still down", "msg-2")
	for _, dialect := range []string{"claude-code", "codex"} {
		want := `{"decision":"block","reason":"Urgent unread mail waits for maos agent alice: read it (maosctl show ID), act or answer (maosctl reply ID --from alice --text T), mark it read (maosctl read-mark --agent alice ID), then stop.\n` +
			`2 unread messages for alice (2 urgent), urgent first, then newest first:\n- msg-3 from carol [urgent] still down (+1 more unread in thread msg-2)\n` + footer + `"}` + "\n"
		if r := e.hook(dialect, `{"hook_event_name":"Stop","stop_hook_active":false}`); r.err != nil || r.out != want {
			t.Errorf("%s Stop with urgent mail:\n got %q\nwant %q (err %v)", dialect, r.out, want, r.err)
		}
		// Already continuing because of a Stop hook: never block again.
		if r := e.hook(dialect, `{"hook_event_name":"Stop","stop_hook_active":true}`); r.err != nil || r.out != "" {
			t.Errorf("%s Stop with stop_hook_active: err=%v out=%q", dialect, r.err, r.out)
		}
		// Events the hook does not handle: nothing, exit 0.
		for _, ev := range []string{"PreToolUse", "Notification", "SomethingNew"} {
			if r := e.hook(dialect, `{"hook_event_name":"`+ev+`"}`); r.err != nil || r.out != "" || r.errOut != "" {
				t.Errorf("%s %s: err=%v out=%q stderr=%q", dialect, ev, r.err, r.out, r.errOut)
			}
		}
	}

	// The answers are the documented JSON shapes, nothing more.
	var got map[string]map[string]string
	if err := json.Unmarshal([]byte(e.hook("codex", `{"hook_event_name":"UserPromptSubmit"}`).out), &got); err != nil ||
		len(got) != 1 || len(got["hookSpecificOutput"]) != 2 || !strings.Contains(got["hookSpecificOutput"]["additionalContext"], "- msg-3 from carol [urgent] still down (+1 more unread in thread msg-2)\n- msg-1 from bob [normal] please review\n") {
		t.Errorf("codex UserPromptSubmit: %v %v", got, err)
	}
}

// A hook never fails the agent's turn: input it cannot use, no agent, a
// malformed address are one line on stderr, nothing on stdout, exit 0.
// Only a command line that does not parse (here: an unknown dialect)
// exits 1, so setting the hook up shows the mistake.
func TestHookBadInput(t *testing.T) {
	e := newHookEnv(t)
	for _, tc := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"", []string{"--agent", "alice"}, "maosctl: hook: stdin is not the hook's JSON object: unexpected end of JSON input\n"},
		{`[1]`, []string{"--agent", "alice"}, "maosctl: hook: stdin is not the hook's JSON object: json: cannot unmarshal array into Go value of type maosctl.hookInput\n"},
		{`{"hook_event_name":`, []string{"--agent", "alice"}, "maosctl: hook: stdin is not the hook's JSON object: unexpected end of JSON input\n"},
		{`{"session_id":"s"}`, []string{"--agent", "alice"}, "maosctl: hook: stdin JSON has no hook_event_name\n"},
		{`{"hook_event_name":"Stop"}`, nil, "maosctl: hook: --agent is required: give it, set $MAOS_AGENT_ID, or use an agent's token (see 'maosctl hook claude-code --help')\n"},
		{strings.Repeat(" ", hookMaxInput+1), []string{"--agent", "alice"}, fmt.Sprintf("maosctl: hook: stdin is over %d bytes\n", hookMaxInput)},
	} {
		for _, dialect := range []string{"claude-code", "codex", "gemini"} {
			r := e.run(tc.stdin, append([]string{"hook", dialect}, tc.args...)...)
			want := strings.ReplaceAll(tc.want, "claude-code", dialect)
			if r.err != nil || r.out != "" || r.errOut != want {
				t.Errorf("hook %s %v, stdin %.40q: err=%v stdout %q stderr %q, want exit 0, no output, stderr %q",
					dialect, tc.args, tc.stdin, r.err, r.out, r.errOut, want)
			}
		}
	}
	// A malformed address (a flag or $MAOS_ADDR) is noted the same way.
	r := runApp("127.0.0.1:notaport", `{"hook_event_name":"SessionStart"}`, "hook", "claude-code", "--agent", "alice")
	if want := `maosctl: hook: --addr (or $MAOS_ADDR): "127.0.0.1:notaport": port must be 1..65535; want HOST:PORT (e.g. 127.0.0.1:7070) or http(s)://HOST:PORT` + "\n"; r.err != nil || r.out != "" || r.errOut != want {
		t.Errorf("hook with a malformed --addr: err=%v stdout %q stderr %q, want %q", r.err, r.out, r.errOut, want)
	}
	e.fails(`{}`, []string{"hook", "cursor", "--agent", "alice"}, `unknown command "cursor"`)
	e.fails(`{}`, []string{"hook", "codex", "--agent", "alice", "extra"}, `unexpected argument "extra"`)
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// With no node answering, the hook exits 0 with one line on stderr; at
// SessionStart it still tells the agent who it is and that the mailbox did
// not answer (as docs/agents/claude-code.md says), other events print nothing.
func TestHookOffline(t *testing.T) {
	newTestEnv(t) // clears the environment
	addr := closedAddr(t)
	t.Setenv(envAddr, addr)
	unreachable := "cannot reach a maos node at http://" + addr + " (connection refused): is maosd running there?"
	r := runApp(addr, `{"hook_event_name":"SessionStart"}`, "hook", "claude-code", "--agent", "alice")
	want := `{"hookSpecificOutput":{"hookEventName":"SessionStart","additionalContext":"You are maos agent alice (mailbox at http://` + addr +
		`). Send: maosctl send --from alice --to B --text T; reply: maosctl reply ID --from alice --text T.\n` +
		`The maos mailbox did not answer (read inbox of alice: ` + unreachable + `); check mail later with: maosctl inbox --agent alice --unread\n"}}` + "\n"
	if r.err != nil || r.out != want || r.errOut != "maosctl: hook SessionStart: "+unreachable+" Set --addr or MAOS_ADDR to a node's API address\n" {
		t.Errorf("offline SessionStart: err=%v\n out=%q\nwant %q\nstderr=%q", r.err, r.out, want, r.errOut)
	}
	for _, ev := range []string{"UserPromptSubmit", "Stop"} {
		r := runApp(addr, `{"hook_event_name":"`+ev+`"}`, "hook", "codex", "--agent", "alice")
		if r.err != nil || r.out != "" || r.errOut != "maosctl: hook "+ev+": "+unreachable+" Set --addr or MAOS_ADDR to a node's API address\n" {
			t.Errorf("offline %s: err=%v out=%q stderr=%q", ev, r.err, r.out, r.errOut)
		}
	}
	// Gemini CLI: the same identity at SessionStart, nothing on
	// BeforeAgent; AfterAgent asks nothing but its IDLE report, whose
	// failure is the one line.
	r = runApp(addr, `{"hook_event_name":"SessionStart","source":"startup"}`, "hook", "gemini", "--agent", "alice")
	if r.err != nil || r.out != want {
		t.Errorf("gemini offline SessionStart: err=%v\n out=%q\nwant %q", r.err, r.out, want)
	}
	r = runApp(addr, `{"hook_event_name":"BeforeAgent","prompt":"hi"}`, "hook", "gemini", "--agent", "alice")
	if r.err != nil || r.out != "" || r.errOut != "maosctl: hook BeforeAgent: "+unreachable+" Set --addr or MAOS_ADDR to a node's API address\n" {
		t.Errorf("gemini offline BeforeAgent: err=%v out=%q stderr=%q", r.err, r.out, r.errOut)
	}
	r = runApp(addr, `{"hook_event_name":"AfterAgent","stop_hook_active":false}`, "hook", "gemini", "--agent", "alice")
	if r.err != nil || r.out != "" || !strings.HasPrefix(r.errOut, "maosctl: hook AfterAgent: report alice IDLE: ") || strings.Count(r.errOut, "\n") != 1 {
		t.Errorf("gemini offline AfterAgent: err=%v out=%q stderr=%q", r.err, r.out, r.errOut)
	}
}

// printedCommandRE finds the maosctl commands in a hook's answer: each
// ends at ";", ")", a line's end or a sentence's final ".".
var printedCommandRE = regexp.MustCompile(`maosctl [^;()\n]*`)

// Every command a hook or its digest prints runs as printed: each is taken
// from the answers (with mail, urgent mail, and with the mailbox failing),
// its placeholders given real values (ID a message of alice's, B an agent,
// T a text), and run through maosctl against the node with nothing added:
// once with the address in $MAOS_ADDR (shared with the agent's shell), once
// with it on the hook's command line (so the commands carry --addr).
func TestHookCommandsRunAsPrinted(t *testing.T) {
	e := newTestEnv(t)
	e.apply(api.OpRegisterAgent, api.RegisterAgentCommand{ID: "alice", Role: "reviewer"})
	e.mail("msg-1", "bob", api.PriorityNormal, "please review", "")
	e.mail("msg-2", "carol", api.PriorityUrgent, "prod is down", "")
	e.mail("msg-3", "carol", api.PriorityUrgent, "still down", "msg-2")

	run := func(stdin string, args ...string) runResult {
		var out, errOut bytes.Buffer
		app := App()
		app.Writer, app.ErrWriter, app.Reader = &out, &errOut, strings.NewReader(stdin)
		err := app.Run(append([]string{"maosctl"}, args...))
		return runResult{out: out.String(), errOut: errOut.String(), err: err}
	}
	for _, viaEnv := range []bool{true, false} {
		os.Unsetenv(envAddr)
		hookArgs := []string{"--addr", e.addr, "hook", "claude-code", "--agent", "alice"}
		if viaEnv {
			t.Setenv(envAddr, e.addr)
			hookArgs = hookArgs[2:]
		}
		answer := func(event string) string {
			t.Helper()
			r := run(`{"hook_event_name":"`+event+`"}`, hookArgs...)
			var out struct {
				HookSpecificOutput struct{ AdditionalContext string } `json:"hookSpecificOutput"`
				Reason             string                             `json:"reason"`
			}
			if err := json.Unmarshal([]byte(r.out), &out); err != nil || r.err != nil {
				t.Fatalf("hook %s: %v %v stderr %q", event, err, r.err, r.errOut)
			}
			return out.HookSpecificOutput.AdditionalContext + out.Reason
		}
		texts := []string{answer("SessionStart"), answer("Stop")}
		e.svc.Fail("Linearize", errors.New("the disk is slow"))
		texts = append(texts, answer("SessionStart"))
		e.svc.Fail("Linearize", nil)
		if !strings.Contains(texts[2], "did not answer") {
			t.Fatalf("the failing mailbox was answered: %s", texts[2])
		}

		seen := map[string]bool{}
		for _, text := range texts {
			for _, cmd := range printedCommandRE.FindAllString(text, -1) {
				words := strings.Fields(strings.TrimSuffix(strings.TrimSpace(cmd), "."))
				if !viaEnv && (len(words) < 3 || words[1] != "--addr" || words[2] != e.addr) {
					t.Errorf("%q: the hook got --addr on its command line, the command does not carry it", cmd)
				}
				for i, w := range words {
					words[i] = map[string]string{"ID": "msg-1", "B": "bob", "T": "hello"}[w]
					if words[i] == "" {
						words[i] = w
					}
				}
				verb := words[1]
				if !viaEnv {
					verb = words[3]
				}
				seen[verb] = true
				if r := run("", words[1:]...); r.err != nil || r.errOut != "" {
					t.Errorf("printed %q, ran %q: err=%v stderr %q", cmd, words, r.err, r.errOut)
				}
			}
		}
		for _, verb := range []string{"send", "reply", "inbox", "show", "thread", "read-mark"} {
			if !seen[verb] {
				t.Errorf("$MAOS_ADDR=%t: no printed %q command was found (saw %v)", viaEnv, verb, seen)
			}
		}
	}
}

func TestStatusLine(t *testing.T) {
	e := newHookEnv(t)
	// No bulletin written: the default system_status, no phase.
	if out := e.ok("status-line", "--agent", "alice"); out != "📬 0 new | 🌐 normal\n" {
		t.Errorf("empty: %q", out)
	}
	e.mail("msg-1", "bob", "normal", "a", "")
	e.mail("msg-2", "bob", "urgent", "b", "")
	e.mail("msg-3", "bob", "low", "c", "")
	e.ok("bulletin", "set", "current_phase", "implementation", "--by", "lead")
	if out := e.ok("status-line", "--agent", "alice"); out != "📬 3 new (1 urgent) | 🌐 normal | phase: implementation\n" {
		t.Errorf("with mail: %q", out)
	}
	e.ok("bulletin", "set", "system_status", "degraded", "--by", "lead")
	var st status
	if err := json.Unmarshal([]byte(e.ok("--json", "status-line", "--agent", "alice")), &st); err != nil ||
		st != (status{Online: true, Agent: "alice", Unread: 3, Urgent: 1, SystemStatus: "degraded", CurrentPhase: "implementation"}) {
		t.Errorf("--json: %+v %v", st, err)
	}
	// An agent without an inbox has no mail, not an error.
	if out := e.ok("status-line", "--agent", "nobody"); out != "📬 0 new | 🌐 degraded | phase: implementation\n" {
		t.Errorf("unknown agent: %q", out)
	}
	e.fails("", []string{"status-line"}, "--agent is required: give it, set $MAOS_AGENT_ID, or use an agent's token")
}

func TestStatusLineStoppedCluster(t *testing.T) {
	newTestEnv(t) // clears the environment
	addr := closedAddr(t)
	r := runApp(addr, "", "status-line", "--agent", "alice")
	if r.err != nil || ExitCode(r.err) != 0 || r.out != statusLineOffline+"\n" || r.errOut != "" {
		t.Errorf("stopped cluster: err=%v out=%q stderr=%q", r.err, r.out, r.errOut)
	}
	// A node that accepts but never answers: the offline marker after --max-time.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	start := time.Now()
	r = runApp(ln.Addr().String(), "", "status-line", "--agent", "alice", "--max-time", "100ms")
	if r.err != nil || r.out != statusLineOffline+"\n" {
		t.Errorf("silent node: err=%v out=%q stderr=%q (after %s)", r.err, r.out, r.errOut, time.Since(start))
	}
}

// Past the pages a digest reads it is the oldest mail that is left out,
// counted, never the newest.
func TestDigestReadsNewestFirst(t *testing.T) {
	pages, limit := hookMaxPages, hookPageLimit
	hookMaxPages, hookPageLimit = 2, 2
	t.Cleanup(func() { hookMaxPages, hookPageLimit = pages, limit })
	e := newHookEnv(t)
	for i := 1; i <= 6; i++ {
		e.mail(fmt.Sprintf("msg-%d", i), "bob", "normal", fmt.Sprintf("note %d", i), "")
	}
	in, err := fetchUnread(context.Background(), client.NewClient(e.addr, nil), "alice", "")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range in.Messages {
		ids = append(ids, m.ID)
	}
	if want := []string{"msg-6", "msg-5", "msg-4", "msg-3"}; !slices.Equal(ids, want) || in.TotalUnread != 6 {
		t.Errorf("read %v of %d unread, want %v of 6", ids, in.TotalUnread, want)
	}
}

// The commands a hook prints carry its command line's --addr (and TLS
// and token-file paths), shell-quoted, but never a --token: a secret
// does not go into the model's context.
func TestHookCommandsCarryNoSecret(t *testing.T) {
	e := newHookEnv(t)
	r := e.run(`{"hook_event_name":"SessionStart"}`, "--token", "s3cret-token", "hook", "codex", "--agent", "alice")
	if r.err != nil || strings.Contains(r.out, "s3cret") || !strings.Contains(r.out, "Send: maosctl --addr "+e.addr+" send --from alice") {
		t.Errorf("hook with --token: err=%v out=%q", r.err, r.out)
	}
	for in, want := range map[string]string{
		"127.0.0.1:7070":      "127.0.0.1:7070",
		"https://h:7070/maos": "https://h:7070/maos",
		"/etc/maos/ca.pem":    "/etc/maos/ca.pem",
		"my ca.pem":           "'my ca.pem'",
		"it's":                `'it'\''s'`,
		"$HOME/x":             "'$HOME/x'",
		"":                    "''",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

// The hook reports its agent's substate as a heartbeat with source hook:
// WORKING on UserPromptSubmit and on a Stop it blocks (urgent mail keeps
// the agent working), IDLE on any other Stop, on Claude Code's idle_prompt
// notification and at a session's start, resume or clear; nothing on a
// compaction, a tool call or another notification.
func TestHookReportsPresence(t *testing.T) {
	e := newHookEnv(t)
	n := 0
	for _, dialect := range []string{"claude-code", "codex"} {
		for _, tc := range []struct {
			event, want string
		}{
			{`{"hook_event_name":"SessionStart","source":"startup"}`, "IDLE"},
			{`{"hook_event_name":"UserPromptSubmit","prompt":"hi"}`, "WORKING"},
			{`{"hook_event_name":"SessionStart","source":"compact"}`, ""},
			{`{"hook_event_name":"PreToolUse","tool_name":"Bash"}`, ""},
			{`{"hook_event_name":"PostToolUse","tool_name":"Bash"}`, ""},
			{`{"hook_event_name":"Notification","notification_type":"permission_prompt"}`, ""},
			{`{"hook_event_name":"Notification","notification_type":"idle_prompt","message":"Claude is waiting for your input"}`, "IDLE"},
			{`{"hook_event_name":"UserPromptSubmit","prompt":"again"}`, "WORKING"},
			{`{"hook_event_name":"Stop","stop_hook_active":false}`, "IDLE"},
			{`{"hook_event_name":"SessionStart","source":"clear"}`, "IDLE"},
			{`{"hook_event_name":"SessionStart"}`, "IDLE"},
		} {
			r := e.hook(dialect, tc.event)
			if r.err != nil || r.errOut != "" {
				t.Errorf("%s %s: err=%v stderr=%q", dialect, tc.event, r.err, r.errOut)
			}
			ups := e.svc.PresenceUpdates()
			if tc.want == "" {
				if len(ups) != n {
					t.Errorf("%s %s reported presence: %+v", dialect, tc.event, ups[n:])
				}
				continue
			}
			if len(ups) != n+1 {
				t.Fatalf("%s %s: %d heartbeats, want 1", dialect, tc.event, len(ups)-n)
			}
			n++
			if u := ups[n-1]; u.State != "AWAKE" || u.Substate != tc.want || u.Source != "hook" || u.PID != 0 || u.Task != "" {
				t.Errorf("%s %s: heartbeat %+v, want AWAKE %s from hook and nothing else", dialect, tc.event, u, tc.want)
			}
		}
	}
	// A Stop the hook blocks for urgent mail leaves the agent WORKING; the
	// Stop after it (stop_hook_active) is the real one.
	e.mail("msg-u", "carol", "urgent", "prod is down", "")
	for _, tc := range []struct{ event, want string }{
		{`{"hook_event_name":"Stop","stop_hook_active":false}`, "WORKING"},
		{`{"hook_event_name":"Stop","stop_hook_active":true}`, "IDLE"},
	} {
		if r := e.hook("claude-code", tc.event); r.err != nil || r.errOut != "" {
			t.Errorf("%s: err=%v stderr=%q", tc.event, r.err, r.errOut)
		}
		p, err := e.svc.AgentPresence(context.Background(), "alice")
		if err != nil || p.Substate != tc.want || p.Source != "hook" {
			t.Errorf("after %s: %+v %v, want %s from hook", tc.event, p, err, tc.want)
		}
	}
}

// Reporting presence keeps the hook's promises: a node that refuses the
// heartbeat, or does not answer it within --max-time, is one line on
// stderr, the answer is still printed, and the hook exits 0 within about
// one --max-time more.
func TestHookPresenceFailures(t *testing.T) {
	e := newHookEnv(t)
	e.svc.Fail("PutPresence", fmt.Errorf("disk on fire: %w", api.ErrInvalid))
	r := e.hook("codex", `{"hook_event_name":"SessionStart","source":"startup"}`)
	if r.err != nil || !strings.Contains(r.out, `"hookEventName":"SessionStart"`) ||
		!regexp.MustCompile(`^maosctl: hook SessionStart: report alice IDLE: .*disk on fire.*\n$`).MatchString(r.errOut) {
		t.Errorf("refused heartbeat: err=%v out=%q stderr=%q", r.err, r.out, r.errOut)
	}
	e.svc.Fail("PutPresence", nil)

	// A node that answers everything but the heartbeat, which it holds
	// until the test ends: the hook returns only by giving up on it, and
	// the node sees the hook abandon the request.
	release := make(chan struct{})
	abandoned := make(chan struct{}, 1)
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodPut && strings.HasPrefix(req.URL.Path, "/v1/presence/") {
			_, _ = io.Copy(io.Discard, req.Body) // the server notices a closed connection only once the body is read
			select {
			case <-req.Context().Done():
				abandoned <- struct{}{}
			case <-release:
			}
			return
		}
		transport.NewServer(e.svc, transport.ServerOptions{}).ServeHTTP(w, req)
	}))
	defer hang.Close()
	defer close(release)
	r = runApp(hang.Listener.Addr().String(), `{"hook_event_name":"Notification","notification_type":"idle_prompt"}`,
		"hook", "claude-code", "--agent", "alice", "--max-time", "300ms")
	select {
	case <-abandoned:
	case <-testDeadline(t):
		t.Error("the hook returned but the node never saw the heartbeat abandoned")
	}
	if r.err != nil || r.out != "" || !regexp.MustCompile(`^maosctl: hook Notification: report alice IDLE: [^\n]+\n$`).MatchString(r.errOut) {
		t.Errorf("hanging heartbeat: err=%v out=%q stderr=%q", r.err, r.out, r.errOut)
	}
}

// Gemini CLI's events, stdin to stdout and presence: SessionStart always
// gives the identity and digest as additionalContext, BeforeAgent only
// when mail waits (under its own hookEventName), AfterAgent never blocks
// (Gemini's deny there would throw the agent's answer away) and reports
// IDLE, BeforeAgent WORKING; Notification and a BeforeTool without a
// gate print nothing and report nothing. Every event exits 0.
func TestHookGemini(t *testing.T) {
	e := newHookEnv(t)
	t.Setenv(envAddr, e.addr)
	identity := fmt.Sprintf("You are maos agent alice (mailbox at http://%s). Send: maosctl send --from alice --to B --text T; reply: maosctl reply ID --from alice --text T.\\n", e.addr)
	footer := "0 left out. Read: maosctl inbox --agent alice --unread; one message: maosctl show ID; a thread: maosctl thread ID; then: maosctl read-mark --agent alice ID\\n"
	step := func(stdin, want, presence string) {
		t.Helper()
		before := len(e.svc.PresenceUpdates())
		r := e.hook("gemini", stdin)
		if r.err != nil || r.errOut != "" || r.out != want {
			t.Errorf("%s:\n got %q\nwant %q (err %v, stderr %q)", stdin, r.out, want, r.err, r.errOut)
		}
		ups := e.svc.PresenceUpdates()[before:]
		switch {
		case presence == "" && len(ups) != 0:
			t.Errorf("%s reported presence %+v", stdin, ups)
		case presence != "" && (len(ups) != 1 || ups[0].Substate != presence || ups[0].Source != "hook"):
			t.Errorf("%s: heartbeats %+v, want one %s from hook", stdin, ups, presence)
		}
	}
	step(`{"hook_event_name":"SessionStart","source":"startup","session_id":"g"}`,
		`{"hookSpecificOutput":{"hookEventName":"SessionStart","additionalContext":"`+identity+`No unread mail.\n"}}`+"\n", "IDLE")
	step(`{"hook_event_name":"BeforeAgent","prompt":"hi"}`, "", "WORKING")
	step(`{"hook_event_name":"AfterAgent","prompt":"hi","prompt_response":"done","stop_hook_active":false}`, "", "IDLE")

	e.mail("msg-1", "bob", "normal", "please review", "")
	e.mail("msg-2", "carol", "urgent", "prod is down", "")
	digest := "2 unread messages for alice (1 urgent), urgent first, then newest first:\\n- msg-2 from carol [urgent] prod is down\\n- msg-1 from bob [normal] please review\\n" + footer
	step(`{"hook_event_name":"BeforeAgent","prompt":"next"}`,
		`{"hookSpecificOutput":{"hookEventName":"BeforeAgent","additionalContext":"`+identity+digest+`"}}`+"\n", "WORKING")
	step(`{"hook_event_name":"AfterAgent","prompt":"next","stop_hook_active":false}`, "", "IDLE")
	step(`{"hook_event_name":"SessionStart","source":"resume"}`,
		`{"hookSpecificOutput":{"hookEventName":"SessionStart","additionalContext":"`+identity+digest+`"}}`+"\n", "IDLE")
	step(`{"hook_event_name":"Notification","notification_type":"ToolPermission","message":"allow?"}`, "", "")
	step(`{"hook_event_name":"BeforeTool","tool_name":"run_shell_command","tool_input":{"command":"ls"}}`, "", "")
	// Claude Code's event names mean nothing to Gemini's dialect.
	step(`{"hook_event_name":"UserPromptSubmit","prompt":"x"}`, "", "")
	step(`{"hook_event_name":"Stop","stop_hook_active":false}`, "", "")
}
