package system

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/cluster/clustertest"
)

// Every view and object of the console by its own URL, on one 3-node
// cluster: each subtest loads the page afresh at its #/... URL and checks
// the view shows what the API holds. MAOS_CONSOLE_SHOTS=dir writes one
// picture per view there (make console-png: docs/console-*.png).

// viewData is what the cluster holds for the views to show.
type viewData struct {
	root, other, reply, needle string // message ids
	approvalHash               string
}

const (
	rationale   = "staging's schema is corrupt; a fresh one is faster than a repair"
	replyText   = "Plan: canary first, then 10% steps."
	needleTitle = "needle-7c1 in the haystack"
)

// presenceOutlivesTheTest keeps the one presence setupViews writes
// (worker1 WORKING on t-ship) live for the whole test: with the default
// 30 s ttl it lapsed to OFFLINE while the bulk subtest ran on a loaded
// machine, and the agent subtest then waited for WORKING until the
// binary's deadline. No view here is about a lapse.
func presenceOutlivesTheTest(s *clustertest.Setup) { s.Config.PresenceTTL = time.Hour }

func setupViews(t *testing.T, cl *client.Client) viewData {
	t.Helper()
	bg := context.Background()
	for _, a := range []api.RegisterAgentCommand{{ID: "worker1", Role: "worker"}, {ID: "reviewer", Role: "reviewer"}, {ID: "operator", Role: "agent"}, {ID: "supervisor", Role: "agent"}} {
		if _, err := cl.RegisterAgent(bg, a); err != nil {
			t.Fatal(err)
		}
	}
	var d viewData
	d.root = send(t, cl, "supervisor", "worker1", "ops", "request", "normal", "Plan the rollout", "How do we roll out the backoff?")
	d.other = send(t, cl, "operator", "supervisor", "ops", "chat", "normal", "Unrelated ops note", "disk at 70%")
	r, err := cl.Send(bg, &api.Message{From: "worker1", To: api.Recipients{"supervisor"}, Channel: "ops", Type: "response", Priority: "normal",
		Title: "Rollout plan", InReplyTo: d.root, Content: api.Content{Text: replyText}})
	if err != nil {
		t.Fatal(err)
	}
	d.reply = r.ID
	d.needle = send(t, cl, "reviewer", "supervisor", "chat", "chat", "low", needleTitle, "found it")

	for _, c := range []api.TaskCreateCommand{
		{ID: "t-build", From: "supervisor", To: "worker1", Title: "Build the release", Channel: "build"},
		{ID: "t-ship", From: "supervisor", To: "worker1", Title: "Ship the release", Channel: "build", DependsOn: []string{"t-build"}},
	} {
		if _, err := cl.CreateTask(bg, c); err != nil {
			t.Fatal(err)
		}
	}
	claim, err := cl.ClaimTask(bg, "t-build", "worker1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CompleteTask(bg, api.TaskCompleteCommand{ID: "t-build", Agent: "worker1", Fence: claim.Fence,
		Completion: api.TaskCompletion{Status: api.TaskStatusSuccess, Result: "built v1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.PutPresence(bg, "worker1", api.PresenceUpdate{State: api.PresenceAwake, Substate: api.SubstateWorking, Task: "t-ship", Source: "watcher"}); err != nil {
		t.Fatal(err)
	}

	ar, err := cl.RequestApproval(bg, api.ApprovalRequestCommand{ID: "appr-db", From: "supervisor", Approvers: []string{"operator", "reviewer"}, Quorum: 2,
		Title: "Drop the staging database", Rationale: rationale, Action: json.RawMessage(`{"cmd":"dropdb staging"}`)})
	if err != nil {
		t.Fatal(err)
	}
	a, err := cl.DecideApproval(bg, api.ApprovalDecideCommand{ID: "appr-db", Approver: "reviewer", Decision: api.DecisionModify, ActionHash: ar.ActionHash,
		Comment: "keep a backup", Action: json.RawMessage(`{"backup":true,"cmd":"dropdb staging"}`)})
	if err != nil {
		t.Fatal(err)
	}
	d.approvalHash = a.ActionHash
	return d
}

// bulkAgents and bulkTasks are more than a page of the agents board (100
// cards) and of a task column (50): the views must show a page, not all.
const bulkAgents, bulkTasks = 150, 60

// bulk registers zz-bulk-NNN agents (after the others by id) and
// creates load-NN tasks (ready, after t-ship), 16 at a time.
func bulk(t *testing.T, cl *client.Client) {
	t.Helper()
	bg := context.Background()
	work := make(chan func() error)
	errs := make(chan error, bulkAgents+bulkTasks)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for f := range work {
				errs <- f()
			}
		})
	}
	for i := range bulkAgents {
		work <- func() error {
			_, err := cl.RegisterAgent(bg, api.RegisterAgentCommand{ID: fmt.Sprintf("zz-bulk-%03d", i), Role: "worker"})
			return err
		}
	}
	for i := range bulkTasks {
		work <- func() error {
			_, err := cl.CreateTask(bg, api.TaskCreateCommand{ID: fmt.Sprintf("load-%02d", i), From: "supervisor", To: "role:worker", Title: "Load test", Channel: "load"})
			return err
		}
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// open loads the console afresh at url's hash route and waits for sel.
func open(t *testing.T, ctx context.Context, base, route, sel string) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(c, chromedp.Navigate("about:blank"), chromedp.Navigate(base+"/ui/"+route), chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
		t.Fatalf("open %s, wait for %s: %v; the page says: %.600s", route, sel, err, text(ctx, "main"))
	}
}

// waitText waits until the text of sel holds every want.
func waitText(t *testing.T, ctx context.Context, sel string, want ...string) {
	t.Helper()
	var got string
	defer func() {
		if t.Failed() {
			t.Logf("%s held %q", sel, got)
		}
	}()
	clustertest.WaitFor(t, 10*time.Second, fmt.Sprintf("%s holding %q", sel, want), func() bool {
		got = text(ctx, sel)
		for _, w := range want {
			if !strings.Contains(got, w) {
				return false
			}
		}
		return true
	})
}

// shot writes the page's picture as dir/console-name.png when
// MAOS_CONSOLE_SHOTS names a directory.
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("MAOS_CONSOLE_SHOTS")
	if dir == "" {
		return
	}
	p := filepath.Join(dir, "console-"+name+".png")
	if _, err := screenshot(ctx, p); err != nil {
		t.Fatalf("write %s: %v", p, err)
	}
	t.Logf("wrote %s", p)
}

func TestConsoleViewsByURL(t *testing.T) {
	c := clustertest.New(t, 3, withConsole, gossipOn, presenceOutlivesTheTest)
	d := setupViews(t, c.Nodes[0].Client)
	ctx := browser(t)
	base := "http://" + c.Nodes[1].Addr

	t.Run("approval", func(t *testing.T) {
		open(t, ctx, base, "#/approvals/appr-db", `#approval-detail .approval-title`)
		waitText(t, ctx, `#approval-detail .rationale`, rationale)
		waitText(t, ctx, `#approval-detail`, "requested by supervisor", "Votes: 0 of 2 needed", "approvers: operator, reviewer")
		waitText(t, ctx, `#approval-detail .action`, `"backup": true`, `"cmd": "dropdb staging"`)
		waitText(t, ctx, `#approval-detail .modifies`, "reviewer", "keep a backup", "+ backup: true")
		waitText(t, ctx, `#approval-detail .votes`, "reviewer", "modify")
		if got := text(ctx, `#approval-detail .deadline`); !strings.Contains(got, "then reject") || !strings.Contains(got, " in ") {
			t.Fatalf("deadline %q", got)
		}
		if got := text(ctx, `#approval-detail code.hash`); got != d.approvalHash {
			t.Fatalf("shown hash %q, want the modified action's %q", got, d.approvalHash)
		}
		shot(t, ctx, "approval")
	})
	t.Run("approvals", func(t *testing.T) {
		open(t, ctx, base, "#/approvals", `tr[data-approval="appr-db"] td.rationale`)
		waitText(t, ctx, `tr[data-approval="appr-db"] td.rationale`, rationale)
		waitText(t, ctx, `tr[data-approval="appr-db"]`, "supervisor", "0/2")
	})
	t.Run("tasks", func(t *testing.T) {
		open(t, ctx, base, "#/tasks", `#tasks .column[data-state="ready"] .card[data-task="t-ship"]`)
		waitText(t, ctx, `#tasks .column[data-state="ready"] .card[data-task="t-ship"] .deps`, "t-build (succeeded)")
		waitText(t, ctx, `#tasks .column[data-state="succeeded"]`, "Build the release")
	})
	t.Run("task", func(t *testing.T) {
		open(t, ctx, base, "#/tasks/t-ship", `#task-detail .task-title`)
		waitText(t, ctx, `#task-detail .deps li[data-task="t-build"]`, "Build the release", "succeeded")
		waitText(t, ctx, `#task-detail .history`, "created", "ready")
		shot(t, ctx, "task")
		// A link, back, forward and reload keep the view.
		browse(t, ctx, 10*time.Second, "follow the dependency's link",
			chromedp.Click(chromedp.CSS(`#task-detail .deps a`)),
			chromedp.WaitVisible(chromedp.CSS(`#task-detail .history`)))
		waitText(t, ctx, `#task-detail .task-title`, "Build the release")
		waitText(t, ctx, `#task-detail .history`, "claimed", "worker1", "completed")
		browse(t, ctx, 10*time.Second, "back", chromedp.NavigateBack())
		waitText(t, ctx, `#task-detail .task-title`, "Ship the release")
		browse(t, ctx, 10*time.Second, "forward", chromedp.NavigateForward())
		waitText(t, ctx, `#task-detail .task-title`, "Build the release")
		browse(t, ctx, 10*time.Second, "reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#task-detail .task-title`)))
		waitText(t, ctx, `#task-detail .task-title`, "Build the release")
	})
	t.Run("agents", func(t *testing.T) {
		open(t, ctx, base, "#/agents", `#agents .card[data-agent="worker1"]`)
		waitText(t, ctx, `#agents .card[data-agent="worker1"]`, "WORKING", "on t-ship", "healthy")
		waitText(t, ctx, `#agents .card[data-agent="supervisor"]`, "unread /")
		shot(t, ctx, "agents")
	})
	t.Run("bounded", func(t *testing.T) {
		// A page of cards, "more" adds a page; a column, "more" adds 50.
		bulk(t, c.Nodes[0].Client)
		count := func(sel string) int {
			return eval[int](t, ctx, fmt.Sprintf(`document.querySelectorAll(%q).length`, sel))
		}
		open(t, ctx, base, "#/agents", `#agents .card[data-agent="worker1"]`)
		all := bulkAgents + 4
		waitText(t, ctx, `#agents-count`, fmt.Sprintf("100 of %d agents", all))
		if n := count(`#agents .card`); n != 100 {
			t.Fatalf("%d agent cards, want a page of 100", n)
		}
		browse(t, ctx, 5*time.Second, "more agents", chromedp.Click(chromedp.CSS(`#agents-more`)))
		waitText(t, ctx, `#agents-count`, fmt.Sprintf("%d of %d agents", all, all))
		clustertest.WaitFor(t, 10*time.Second, fmt.Sprintf("%d agent cards after more", all), func() bool { return count(`#agents .card`) == all })
		ready := `#tasks .column[data-state="ready"]`
		open(t, ctx, base, "#/tasks", ready+` button.more`)
		if n := count(ready + ` .card`); n != 50 {
			t.Fatalf("%d ready cards, want a page of 50", n)
		}
		waitText(t, ctx, ready+` h3`, "ready (50+)")
		browse(t, ctx, 5*time.Second, "more ready tasks", chromedp.Click(chromedp.CSS(ready+` button.more`)))
		waitText(t, ctx, ready+` h3`, fmt.Sprintf("ready (%d)", bulkTasks+1))
		clustertest.WaitFor(t, 10*time.Second, fmt.Sprintf("%d ready cards after more", bulkTasks+1), func() bool { return count(ready+` .card`) == bulkTasks+1 })
	})
	t.Run("agent", func(t *testing.T) {
		open(t, ctx, base, "#/agents/worker1", `#agent-detail .agent-title`)
		waitText(t, ctx, `#agent-detail`, "worker", "healthy", "WORKING", "Build the release", "Ship the release")
	})
	t.Run("message", func(t *testing.T) {
		open(t, ctx, base, "#/messages/"+d.reply, `#detail pre.text`)
		waitText(t, ctx, `#detail pre.text`, replyText)
		if n := eval[int](t, ctx, `document.querySelectorAll('#detail .thread li').length`); n != 2 {
			t.Fatalf("%d messages in the thread, want 2", n)
		}
	})
	t.Run("thread", func(t *testing.T) {
		open(t, ctx, base, "#/threads/"+d.root, `#detail .thread-title`)
		waitText(t, ctx, `#detail .thread-title`, "Plan the rollout")
		waitText(t, ctx, `#detail .thread`, "How do we roll out the backoff?", replyText)
		// The reply is indented under the message it answers.
		pad := func(id string) string {
			return eval[string](t, ctx, fmt.Sprintf(`getComputedStyle(document.querySelector('#detail .thread li[data-id=%q]')).paddingLeft`, id))
		}
		if root, reply := pad(d.root), pad(d.reply); root != "0px" || reply == "0px" {
			t.Fatalf("indent: root %s, reply %s; want the reply under its parent", root, reply)
		}
	})
	t.Run("feed search", func(t *testing.T) {
		open(t, ctx, base, "#/feed?q=needle-7c1", fmt.Sprintf(`#feed li[data-id=%q]`, d.needle))
		clustertest.WaitFor(t, 10*time.Second, "the root line loaded and hidden by the search", func() bool {
			return eval[bool](t, ctx, fmt.Sprintf(`(() => { const li = document.querySelector('#feed li[data-id=%q]'); return !!li && li.hidden; })()`, d.root))
		})
		if got := eval[string](t, ctx, `document.querySelector('#f-q').value`); got != "needle-7c1" {
			t.Fatalf("search box %q, want the URL's", got)
		}
	})
	t.Run("feed threaded by channel", func(t *testing.T) {
		open(t, ctx, base, "#/feed?channel=ops&threaded=1", fmt.Sprintf(`#feed li.reply[data-id=%q]`, d.reply))
		// Threaded: the reply under its root, before the note sent between
		// them; only channel ops shown.
		want := strings.Join([]string{d.root, d.reply, d.other}, ",")
		clustertest.WaitFor(t, 10*time.Second, "ops's lines threaded", func() bool {
			return eval[string](t, ctx, `[...document.querySelectorAll('#feed li:not([hidden])')].map(li => li.dataset.id).join(',')`) == want
		})
		// Unthreaded again (the box), the log's order.
		browse(t, ctx, 5*time.Second, "untick threaded", chromedp.Click(chromedp.CSS(`#f-threaded`)))
		want = strings.Join([]string{d.root, d.other, d.reply}, ",")
		clustertest.WaitFor(t, 10*time.Second, "ops's lines in log order", func() bool {
			return eval[string](t, ctx, `[...document.querySelectorAll('#feed li:not([hidden])')].map(li => li.dataset.id).join(',')`) == want
		})
		if got := eval[string](t, ctx, `location.hash`); got != "#/feed?channel=ops" {
			t.Fatalf("URL after unticking: %q", got)
		}
		browse(t, ctx, 5*time.Second, "tick threaded", chromedp.Click(chromedp.CSS(`#f-threaded`)))
		shot(t, ctx, "feed")
	})
	t.Run("cluster", func(t *testing.T) {
		open(t, ctx, base, "#/cluster", `#members tr[data-node="n3"] td.status.alive`)
		waitText(t, ctx, `#nodes tr[data-node="n2"]`, "(this)")
		shot(t, ctx, "cluster")
	})
	t.Run("audit", func(t *testing.T) {
		open(t, ctx, base, "#/audit", `#audit li`)
	})
	t.Run("unknown", func(t *testing.T) {
		open(t, ctx, base, "#/nowhere", `#notfound`)
		waitText(t, ctx, `#notfound`, "no view #/nowhere")
	})
}
