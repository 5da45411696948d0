package maosctl

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
)

// createTask runs task create with args and returns the task's id.
func (e *testEnv) createTask(args ...string) string {
	e.t.Helper()
	var res api.TaskResult
	if err := json.Unmarshal([]byte(e.ok(append([]string{"--json", "task", "create"}, args...)...)), &res); err != nil {
		e.t.Fatal(err)
	}
	return res.ID
}

// claimTask claims id as agent and returns the fence.
func (e *testEnv) claimTask(id, agent string) string {
	e.t.Helper()
	var res api.TaskResult
	if err := json.Unmarshal([]byte(e.ok("--json", "task", "claim", id, "--agent", agent)), &res); err != nil {
		e.t.Fatal(err)
	}
	return strconv.FormatUint(res.Fence, 10)
}

func TestTaskCreateListShow(t *testing.T) {
	e := newTestEnv(t)
	e.reviewers()
	r := e.run("the diff is in #review\n", "task", "create", "--from", "lead", "--to", "role:reviewer", "--title", "review PR 12",
		"--description", "-", "--timeout", "5m", "--max-attempts", "3", "--context", `{"pr": 12}`, "--priority", "high")
	if r.err != nil {
		t.Fatalf("create: %v %s", r.err, r.errOut)
	}
	m := regexp.MustCompile(`^created (task-\d{8}-\d{6}-lead-[0-9a-f]{8}): ready \(seq (\d+)\)\n$`).FindStringSubmatch(r.out)
	if m == nil {
		t.Fatalf("create printed %q", r.out)
	}
	id := m[1]
	got, err := e.svc.State().Task(id)
	if err != nil {
		t.Fatal(err)
	}
	if got.Description != "the diff is in #review" || got.TimeoutSeconds != 300 || got.MaxAttempts != 3 || string(got.Context) != `{"pr":12}` ||
		got.Priority != api.PriorityHigh || got.Channel != api.DefaultChannel || got.From != "lead" {
		t.Errorf("stored %+v", got)
	}
	other := e.createTask("--from", "lead", "--to", "alice", "--title", "write the notes", "--id", "t-notes", "--channel", "docs")
	dep := e.createTask("--from", "lead", "--to", "capability:go", "--title", "merge", "--depends-on", id+",t-notes")
	if d, _ := e.svc.State().Task(dep); d.State != api.TaskWaiting || len(d.DependsOn) != 2 || other != "t-notes" {
		t.Errorf("dependent %+v", d)
	}

	out := e.ok("task", "list")
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 4 || !regexp.MustCompile(`^ID\s+STATE\s+TO\s+CLAIMED BY\s+ATTEMPTS\s+LAPSED\s+TITLE$`).MatchString(lines[0]) ||
		!regexp.MustCompile(`^`+id+`\s+ready\s+role:reviewer\s+-\s+0\s+0/3\s+review PR 12$`).MatchString(lines[1]) ||
		!regexp.MustCompile(`^`+dep+`\s+waiting\s+capability:go\s+-\s+0\s+0/5\s+merge$`).MatchString(lines[3]) {
		t.Errorf("task list printed:\n%s", out)
	}
	if out := e.ok("task", "list", "--state", "waiting"); strings.Count(out, "\n") != 2 || !strings.Contains(out, dep) {
		t.Errorf("list --state waiting:\n%s", out)
	}
	if out := e.ok("task", "list", "--limit", "1"); !strings.Contains(out, "more: maosctl task list --after "+m[2]) {
		t.Errorf("list --limit 1:\n%s", out)
	}
	// --limit counts tasks, not pages: two of the three, a page of one at a
	// time, then the command that goes on; all three over two pages of two.
	if out := e.ok("task", "list", "--limit", "2", "--page-size", "1"); strings.Count(out, "\n") != 4 || !strings.Contains(out, id) ||
		!strings.Contains(out, other) || strings.Contains(out, dep) || !strings.Contains(out, "more: maosctl task list --after ") {
		t.Errorf("list --limit 2 --page-size 1:\n%s", out)
	}
	if out := e.ok("task", "list", "--limit", "3", "--page-size", "2"); strings.Count(out, "\n") != 4 || !strings.Contains(out, dep) || strings.Contains(out, "more:") {
		t.Errorf("list --limit 3 --page-size 2:\n%s", out)
	}
	var two api.TaskPage
	if err := json.Unmarshal([]byte(e.ok("--json", "task", "list", "--limit", "2", "--page-size", "1")), &two); err != nil ||
		len(two.Tasks) != 2 || two.Tasks[0].ID != id || two.Tasks[1].ID != other || !two.HasMore {
		t.Errorf("list --json --limit 2 --page-size 1: %+v, %v", two, err)
	}
	if out := e.ok("task", "list", "--claimed-by", "bob"); out != "no tasks\n" {
		t.Errorf("list --claimed-by bob: %q", out)
	}
	var page api.TaskPage
	if err := json.Unmarshal([]byte(e.ok("task", "list", "--to", "alice", "--json")), &page); err != nil || len(page.Tasks) != 1 || page.Tasks[0].ID != "t-notes" {
		t.Errorf("list --json --to alice: %+v, %v", page, err)
	}

	out = e.ok("task", "show", id)
	for _, want := range []string{id + " ready", "title: review PR 12", "from: lead → role:reviewer, channel general, priority high",
		"lease: 5m0s per claim, attempts 0, leases lapsed 0 of 3", `context: {"pr":12}`, "\nthe diff is in #review\n", "\nhistory:\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`(?m)^  \S+Z\s+#\d+\s+lead\s+created\s+ready\s+for role:reviewer$`).MatchString(out) {
		t.Errorf("show's history:\n%s", out)
	}
	if out := e.ok("task", "show", dep); !strings.Contains(out, "depends on: "+id+", t-notes") || !strings.Contains(out, dep+" waiting") {
		t.Errorf("show of the dependent:\n%s", out)
	}
	var one api.Task
	if err := json.Unmarshal([]byte(e.ok("--json", "task", "show", id)), &one); err != nil || one.ID != id || len(one.History) != 1 {
		t.Errorf("show --json: %+v, %v", one, err)
	}

	e.fail([]string{"task", "create", "--from", "lead", "--title", "x"}, "missing required flag --to")
	e.fail([]string{"task", "create", "--from", "lead", "--to", "alice", "--title", "x", "--timeout", "1500ms"}, "--timeout 1.5s: want whole seconds")
	e.fail([]string{"task", "create", "--from", "lead", "--to", "alice", "--title", "x", "--max-attempts", "0"}, "--max-attempts 0")
	e.fail([]string{"task", "create", "--from", "lead", "--to", "alice", "--title", "x", "--context", "{pr:12}"}, "--context: not valid JSON")
	e.fail([]string{"task", "create", "--from", "lead", "--to", "alice", "--title", "x", "--depends-on", "t-ghost"}, "task t-ghost (depends_on[0]): not found")
	e.fail([]string{"task", "create", "--from", "lead", "--to", "role:", "--title", "x"}, "to:")
	e.fail([]string{"task", "show"}, "missing ID")
	e.fail([]string{"task", "show", "t-ghost"}, "task t-ghost: not found")
	e.fail([]string{"task", "list", "--state", "done"}, "state")
}

func TestTaskClaimantVerbs(t *testing.T) {
	e := newTestEnv(t)
	e.reviewers()
	id := e.createTask("--from", "lead", "--to", "role:reviewer", "--title", "review", "--timeout", "10m")
	e.fail([]string{"task", "claim", id, "--agent", "carol"}, "carol is not a registered agent")
	out := e.ok("task", "claim", id, "--agent", "alice")
	m := regexp.MustCompile(`^claimed ` + id + `: attempt 1, fence (\d+), lease until \S+Z\n$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("claim printed %q", out)
	}
	fence := m[1]
	e.fail([]string{"task", "claim", id, "--agent", "bob"}, "claimed by alice", "409")
	e.fail([]string{"task", "progress", id, "--agent", "alice"}, "missing required flag --fence")
	e.fail([]string{"task", "progress", id, "--agent", "alice", "--fence", "x"}, `--fence: "x" is not a fence`)
	e.fail([]string{"task", "progress", id, "--agent", "alice", "--fence", "999999"}, "409")
	// Flags after the id, of every kind.
	if out := e.ok("task", "progress", id, "--agent", "alice", "--fence", fence, "--message", "half way", "--progress", "0.5"); !strings.HasPrefix(out, "progress on "+id+": lease until ") {
		t.Errorf("progress printed %q", out)
	}
	e.fail([]string{"task", "complete", id, "--agent", "alice", "--fence", fence, "--status", "failure"}, "use 'maosctl task fail'")
	out = e.ok("task", "complete", id, "--agent", "alice", "--fence", fence, "--result", "LGTM", "--confidence", "0.9",
		"--output", "notes.md", "--output", "diff.patch", "--next-step", "merge it", "--execution-time", "2.5s", "--metrics", `{"tokens_used":12}`)
	if out != "completed "+id+": succeeded\n" {
		t.Errorf("complete printed %q", out)
	}
	got, _ := e.svc.State().Task(id)
	if tc := got.Completion; tc == nil || tc.Result != "LGTM" || *tc.ConfidenceScore != 0.9 || strings.Join(tc.Outputs, ",") != "notes.md,diff.patch" ||
		tc.NextSteps[0] != "merge it" || tc.ExecutionTimeMS != 2500 || string(tc.Metrics) != `{"tokens_used":12}` || got.ProgressMessage != "half way" {
		t.Errorf("completed %+v completion %+v", got, got.Completion)
	}
	if out := e.ok("task", "show", id); !strings.Contains(out, "completion: success (0.9)") || !strings.Contains(out, "result: LGTM") ||
		!strings.Contains(out, "output: diff.patch") || !strings.Contains(out, "progress: 50% half way") ||
		!regexp.MustCompile(`(?m)^  \S+\s+#\d+\s+alice\s+completed\s+succeeded\s+success \(0\.9\)$`).MatchString(out) {
		t.Errorf("show after completion:\n%s", out)
	}

	// fail, with seed 004's error fields.
	f := e.createTask("--from", "lead", "--to", "bob", "--title", "run CI")
	ff := e.claimTask(f, "bob")
	e.fail([]string{"task", "fail", f, "--agent", "bob", "--fence", ff}, "missing required flag --error")
	if out := e.ok("task", "fail", f, "--agent", "bob", "--fence", ff, "--error", "CI is red", "--error-type", "ci_failed",
		"--error-code", "E1", "--recoverable", "--suggested-action", "retry"); out != "failed "+f+": failed\n" {
		t.Errorf("fail printed %q", out)
	}
	if got, _ := e.svc.State().Task(f); got.Completion.Error == nil || *got.Completion.Error != (api.TaskError{ErrorType: "ci_failed",
		ErrorMessage: "CI is red", ErrorCode: "E1", IsRecoverable: true, SuggestedAction: "retry"}) {
		t.Errorf("failed %+v", got.Completion)
	}

	// handoff, then the new assignee claims; cancel by the creator only.
	h := e.createTask("--from", "lead", "--to", "alice", "--title", "design")
	hf := e.claimTask(h, "alice")
	e.fail([]string{"task", "handoff", h, "--agent", "alice", "--fence", hf}, "missing required flag --to")
	if out := e.ok("task", "handoff", h, "--agent", "alice", "--fence", hf, "--to", "bob", "--reason", "bob knows it"); out != "handed "+h+" to bob: ready\n" {
		t.Errorf("handoff printed %q", out)
	}
	var res api.TaskResult
	if err := json.Unmarshal([]byte(e.ok("--json", "task", "claim", h, "--agent", "bob")), &res); err != nil || res.Attempt != 2 || res.State != api.TaskRunning {
		t.Errorf("claim after handoff --json: %+v, %v", res, err)
	}
	e.fail([]string{"task", "cancel", h, "--from", "bob"}, "403")
	if out := e.ok("task", "cancel", h, "--from", "lead", "--reason", "not needed"); out != "cancelled "+h+"\n" {
		t.Errorf("cancel printed %q", out)
	}
	// A retried cancel answers the same; a task that ended otherwise is 409.
	if out := e.ok("task", "cancel", h, "--from", "lead"); out != "cancelled "+h+"\n" {
		t.Errorf("cancel again printed %q", out)
	}
	e.fail([]string{"task", "cancel", id, "--from", "lead"}, "has ended (succeeded", "409")

	// max_attempts bounds the leases that lapse, not the claims: a task
	// handed on runs its third attempt with at most one lapse, and says so.
	once := e.createTask("--from", "lead", "--to", "alice", "--title", "once", "--max-attempts", "1")
	e.ok("task", "handoff", once, "--agent", "alice", "--fence", e.claimTask(once, "alice"), "--to", "bob")
	e.ok("task", "handoff", once, "--agent", "bob", "--fence", e.claimTask(once, "bob"), "--to", "alice")
	of := e.claimTask(once, "alice")
	if out := e.ok("task", "show", once); !strings.HasPrefix(out, once+" running (alice, attempt 3, fence "+of+", lease until ") ||
		!strings.Contains(out, "\nlease: 5m0s per claim, attempts 3, leases lapsed 0 of 1\n") {
		t.Errorf("show of a task on its third claim:\n%s", out)
	}
}

// complete --status requires_approval: the task awaits an approval of
// --proposed-action by its creator, which complete, show and list name;
// a modify sends it back to its claimant with the approved action.
func TestTaskCompleteRequiresApproval(t *testing.T) {
	e := newTestEnv(t)
	e.reviewers()
	id := e.createTask("--from", "lead", "--to", "alice", "--title", "ship v2.3")
	fence := e.claimTask(id, "alice")
	complete := func(args ...string) []string {
		return append([]string{"task", "complete", id, "--agent", "alice", "--fence", fence}, args...)
	}
	e.fail(complete("--proposed-action", `{"cmd":"deploy"}`), "--proposed-action: only with --status requires_approval")
	e.fail(complete("--status", "requires_approval", "--proposed-action", "{cmd"), "--proposed-action: not one JSON value")
	r := e.run(`{ "version": "2.3", "cmd": "deploy" }`, complete("--status", "requires_approval", "--result", "ready", "--proposed-action", "-")...)
	m := regexp.MustCompile(`^completed ` + id + `: awaiting_approval, approval (appr-\S+)\n$`).FindStringSubmatch(r.out)
	if r.err != nil || r.errOut != "" || m == nil {
		t.Fatalf("complete printed %q %q (%v)", r.out, r.errOut, r.err)
	}
	appr := m[1]
	a, err := e.svc.State().Approval(appr)
	if err != nil || string(a.Action) != `{"cmd":"deploy","version":"2.3"}` || a.From != "alice" || !slices.Equal(a.Approvers, []string{"lead"}) ||
		a.TaskID != id || a.State != api.ApprovalPending {
		t.Fatalf("the task's approval: %+v, %v", a, err)
	}
	out := e.ok("task", "show", id)
	if !strings.HasPrefix(out, id+" awaiting_approval (approval "+appr+" of alice's completion)\n") ||
		!strings.Contains(out, "\napproval: "+appr+" (maosctl approval show "+appr+")\n") {
		t.Errorf("show of a task awaiting its approval:\n%s", out)
	}
	out = e.ok("task", "list", "--state", "awaiting_approval")
	if lines := strings.Split(strings.TrimRight(out, "\n"), "\n"); len(lines) != 2 ||
		!regexp.MustCompile(`^`+id+`\s+awaiting_approval \(`+appr+`\)\s+alice\s+alice\s+1\s+0/5\s+ship v2.3$`).MatchString(lines[1]) {
		t.Errorf("list --state awaiting_approval:\n%s", out)
	}
	// The creator changes the action: the task runs again for alice,
	// with the action approved.
	e.ok("approval", "modify", appr, "--approver", "lead", "--action", `{"cmd":"deploy","version":"2.3","canary":true}`)
	out = e.ok("task", "show", id)
	if !strings.HasPrefix(out, id+" running (alice, attempt ") || !strings.Contains(out, "\napproved action: {\"canary\":true,\"cmd\":\"deploy\",\"version\":\"2.3\"}\n") {
		t.Errorf("show after the modify:\n%s", out)
	}

	// --json answers the API's result alone; a task that cannot be read
	// afterwards still reports the completion, and says so.
	j := e.createTask("--from", "lead", "--to", "alice", "--title", "t")
	jf := e.claimTask(j, "alice")
	var res api.TaskResult
	if err := json.Unmarshal([]byte(e.ok("--json", "task", "complete", j, "--agent", "alice", "--fence", jf, "--status", "requires_approval")), &res); err != nil ||
		res.State != api.TaskAwaitingApproval || res.ID != j {
		t.Errorf("complete --json: %+v, %v", res, err)
	}
	k := e.createTask("--from", "lead", "--to", "alice", "--title", "t")
	kf := e.claimTask(k, "alice")
	addr := e.through(func(w http.ResponseWriter, req *http.Request, next http.Handler) {
		if req.Method == http.MethodGet && req.URL.Path == "/v1/tasks/"+k {
			refuse(w, http.StatusServiceUnavailable, "unavailable", "no leader")
			return
		}
		next.ServeHTTP(w, req)
	})
	r = runApp(addr, "", "task", "complete", k, "--agent", "alice", "--fence", kf, "--status", "requires_approval")
	if r.err != nil || r.out != "completed "+k+": awaiting_approval\n" ||
		!regexp.MustCompile(`^maosctl: `+k+` awaits an approval, which could not be read: .*no leader.*\n$`).MatchString(r.errOut) {
		t.Errorf("complete, the task unreadable: %v %q %q", r.err, r.out, r.errOut)
	}
}

// task wait: 0 succeeded, 1 failed or cancelled, 2 timed out, printing the
// outcome; a task that ends while it waits is seen on the stream.
func TestTaskWait(t *testing.T) {
	e := newTestEnv(t, "rita")
	wait := func(args ...string) runResult {
		t.Helper()
		return e.run("", append([]string{"task", "wait"}, args...)...)
	}
	ok := e.createTask("--from", "lead", "--to", "rita", "--title", "t")
	okf := e.claimTask(ok, "rita")
	e.ok("task", "complete", ok, "--agent", "rita", "--fence", okf, "--result", "done\nfine", "--confidence", "0.97")
	if r := wait(ok); r.err != nil || r.out != ok+" succeeded: success (0.97): done fine\n" {
		t.Errorf("wait on a succeeded task: %v %q %q", r.err, r.out, r.errOut)
	}

	bad := e.createTask("--from", "lead", "--to", "rita", "--title", "t")
	e.ok("task", "fail", bad, "--agent", "rita", "--fence", e.claimTask(bad, "rita"), "--error", "it broke", "--error-type", "crash")
	if r := wait(bad); ExitCode(r.err) != 1 || r.out != bad+" failed: failure: crash: it broke\n" || r.errOut != "" {
		t.Errorf("wait on a failed task: exit %d %q %q", ExitCode(r.err), r.out, r.errOut)
	}
	gone := e.createTask("--from", "lead", "--to", "rita", "--title", "t")
	e.ok("task", "cancel", gone, "--from", "lead")
	if r := wait(gone, "--json"); ExitCode(r.err) != 1 || !strings.Contains(r.out, `"state": "cancelled"`) {
		t.Errorf("wait --json on a cancelled task: exit %d %q %q", ExitCode(r.err), r.out, r.errOut)
	}

	slow := e.createTask("--from", "lead", "--to", "rita", "--title", "t")
	if r := e.timedWait("task", "wait", slow); ExitCode(r.err) != 2 || r.out != slow+" still ready after 300ms\n" || r.errOut != "" {
		t.Errorf("wait that timed out: exit %d %q %q", ExitCode(r.err), r.out, r.errOut)
	}

	// Live: the task ends while wait follows the stream.
	done := e.startWait("task", "wait", slow)
	time.Sleep(100 * time.Millisecond)
	sf := e.claimTask(slow, "rita")
	wantStillWaiting(t, done, 100*time.Millisecond, "the task ended")
	e.ok("task", "complete", slow, "--agent", "rita", "--fence", sf, "--status", "partial_success")
	if r := waitEnded(t, done, "the task end"); r.err != nil || r.out != slow+" succeeded: partial_success\n" {
		t.Errorf("live wait: %v %q %q", r.err, r.out, r.errOut)
	}

	e.fail([]string{"task", "wait", "t-ghost"}, "task t-ghost: not found")
	e.fail([]string{"task", "wait", slow, "--timeout", "-1s"}, "--timeout -1s: want a positive duration")
}
