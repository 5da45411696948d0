package maosctl

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// What the task and approval tests check alike, one copy.

// timedWait runs args (a wait) with --timeout 300ms and returns its
// result; it must wait out the 300ms (what it returns, the caller checks).
func (e *testEnv) timedWait(args ...string) runResult {
	e.t.Helper()
	start := time.Now()
	r := e.run("", append(args, "--timeout", "300ms")...)
	if d := time.Since(start); d < 300*time.Millisecond {
		e.t.Errorf("the 300ms wait returned after %s", d)
	}
	return r
}

// testDeadline fires shortly before the test binary's -timeout, so a hang
// fails the test by name instead of killing the run.
func testDeadline(t *testing.T) <-chan time.Time {
	d, ok := t.Deadline()
	if !ok {
		return nil
	}
	return time.After(time.Until(d) - 5*time.Second)
}

// startWait runs args (a wait) with --timeout 20s in the background; the
// channel gives its result.
func (e *testEnv) startWait(args ...string) <-chan runResult {
	done := make(chan runResult, 1)
	go func() { done <- e.run("", append(args, "--timeout", "20s")...) }()
	return done
}

// wantStillWaiting fails t at once when the wait done returns within d:
// it must still be waiting for what.
func wantStillWaiting(t *testing.T, done <-chan runResult, d time.Duration, what string) {
	t.Helper()
	select {
	case r := <-done:
		t.Fatalf("wait returned before %s: %v %q", what, r.err, r.out)
	case <-time.After(d):
	}
}

// waitEnded is the result of the wait done, after what, the end it waits
// for (a wait that misses it ends at its own --timeout, which the caller's
// check of the result catches).
func waitEnded(t *testing.T, done <-chan runResult, what string) runResult {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-testDeadline(t):
		t.Fatalf("wait did not see %s", what)
		return runResult{}
	}
}

// runHookApprovals runs the hook at UserPromptSubmit: its digest must
// name the approvals waiting for alice at marker. Each approval command
// it prints from there runs as printed (ID: appr-a to approve, appr-r to
// reject), against the node it names, which must be the hook's: each
// must succeed, and list, approve and reject must be among them.
func (e *testEnv) runHookApprovals(marker string) {
	e.t.Helper()
	var out struct {
		HookSpecificOutput struct{ AdditionalContext string } `json:"hookSpecificOutput"`
	}
	r := e.hook("claude-code", `{"hook_event_name":"UserPromptSubmit"}`)
	if err := json.Unmarshal([]byte(r.out), &out); err != nil || r.err != nil {
		e.t.Fatalf("hook: %v %v %q stderr %q", err, r.err, r.out, r.errOut)
	}
	text := out.HookSpecificOutput.AdditionalContext
	at := strings.Index(text, marker)
	if at < 0 {
		e.t.Fatalf("the digest does not name the approvals:\n%s", text)
	}
	ran := map[string]bool{}
	for _, cmd := range printedCommandRE.FindAllString(text[at:], -1) {
		words := strings.Fields(strings.TrimSpace(cmd)) // maosctl [--addr A] approval VERB ...
		k := slices.Index(words, "approval")
		if k < 0 || k+1 >= len(words) {
			continue
		}
		verb := words[k+1]
		for i, w := range words {
			if w == "ID" {
				words[i] = map[string]string{"approve": "appr-a", "reject": "appr-r"}[verb]
			}
		}
		// The node it names is the one the hook asked.
		if k == 3 && (words[1] != "--addr" || words[2] != e.addr) {
			e.t.Errorf("printed %q: not the hook's node %s", cmd, e.addr)
		}
		if r := e.run("", words[k:]...); r.err != nil || r.errOut != "" {
			e.t.Errorf("printed %q, ran %q: err=%v stderr %q", cmd, words, r.err, r.errOut)
		}
		ran[verb] = true
	}
	if !ran["list"] || !ran["approve"] || !ran["reject"] {
		e.t.Errorf("ran %v, want list, approve and reject", ran)
	}
}

// failRequests runs the approval requests that are refused, by maosctl
// (a missing flag, an action that is not JSON, a quorum under 1) or by
// the node (a quorum over the approvers, a timeout under the minimum):
// each must fail, its error holding the words that name the cause.
func (e *testEnv) failRequests() {
	e.t.Helper()
	for _, tc := range []struct {
		args  []string
		words string
	}{
		{[]string{"--title", "x", "--action", "1"}, "missing required flag --approver"},
		{[]string{"--approver", "alice", "--title", "x"}, "missing required flag --action"},
		{[]string{"--approver", "alice", "--title", "x", "--action", "{cmd:1}"}, "--action: not one JSON value"},
		{[]string{"--approver", "alice", "--title", "x", "--action", "1", "--quorum", "0"}, "--quorum 0"},
		{[]string{"--approver", "alice", "--title", "x", "--action", "1", "--quorum", "2"}, "quorum"},
		{[]string{"--approver", "alice", "--title", "x", "--action", "1", "--timeout", "1ms"}, "timeout"},
	} {
		e.fail(append([]string{"approval", "request", "--from", "lead"}, tc.args...), tc.words)
	}
}

// wantApprovalsStatus checks the status line of agents for whom 2
// (alice), 0 (carol) and 1 (bob, read with --json) approvals wait.
func (e *testEnv) wantApprovalsStatus() {
	e.t.Helper()
	if out := e.ok("status-line", "--agent", "alice"); !strings.Contains(out, " | 🔐 2 to approve") {
		e.t.Errorf("status line %q", out)
	}
	if out := e.ok("status-line", "--agent", "carol"); strings.Contains(out, "🔐") {
		e.t.Errorf("status line of an agent with nothing to approve: %q", out)
	}
	var st status
	if err := json.Unmarshal([]byte(e.ok("status-line", "--agent", "bob", "--json")), &st); err != nil || st.ToApprove != 1 {
		e.t.Errorf("status --json %+v, %v", st, err)
	}
}
