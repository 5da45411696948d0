package a2ahost_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
)

// answer is a SendMessage's outcome.
type answer struct {
	task *a2a.Task
	err  error
}

// sendBlocking sends text without returnImmediately, in a goroutine.
func sendBlocking(ctx context.Context, c *a2aclient.Client, text string) <-chan answer {
	out := make(chan answer, 1)
	go func() {
		res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))})
		task, _ := res.(*a2a.Task)
		out <- answer{task, err}
	}()
	return out
}

// waitCreated waits until bob has a task titled title, and answers its id.
func waitCreated(t *testing.T, n *node, title string) string {
	t.Helper()
	for t.Context().Err() == nil {
		page, err := n.admin.Tasks(t.Context(), api.TaskQuery{To: "bob"})
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range page.Tasks {
			if task.Title == title {
				return task.ID
			}
		}
		waitChange(t, n)
	}
	t.Fatal("no task before the test's end")
	return ""
}

// waitChange waits for the node's next task event (or the test's end).
func waitChange(t *testing.T, n *node) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	_ = n.admin.Stream(ctx, api.StreamQuery{Events: []string{api.EventTask}}, func(ev api.StreamEvent) error {
		if ev.Ready || ev.Task != nil {
			cancel()
		}
		return nil
	})
}

// Without returnImmediately, SendMessage answers once the task is
// terminal: the claim and a progress note do not end the wait, the
// completion does, and the answer carries the result.
func TestSendMessageBlocksUntilTerminal(t *testing.T) {
	n := start(t)
	_, c := n.a2aFor(t, n.alice)
	got := sendBlocking(t.Context(), c, "Write the release notes")
	id := waitCreated(t, n, "Write the release notes")
	claimAndComplete(t, n, id, "drafting", "notes written")
	a := <-got
	if a.err != nil || a.task == nil || string(a.task.ID) != id || a.task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("blocking send: %+v, %v; want task %s COMPLETED", a.task, a.err, id)
	}
	if len(a.task.Artifacts) != 1 || a.task.Artifacts[0].Parts[0].Text() != "notes written" {
		t.Errorf("the answer's artifacts %+v, want the result", a.task.Artifacts)
	}
}

// An interrupted task ends the wait too: a completion asking approval is
// answered INPUT_REQUIRED, with the approval's question.
func TestSendMessageBlocksUntilInputRequired(t *testing.T) {
	n := start(t)
	_, c := n.a2aFor(t, n.alice)
	got := sendBlocking(t.Context(), c, "Ship the release")
	id := waitCreated(t, n, "Ship the release")
	bob := client.NewClient(n.url, nil).WithToken(n.bob)
	claim, err := bob.ClaimTask(t.Context(), id, "bob")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.CompleteTask(t.Context(), api.TaskCompleteCommand{ID: id, Agent: "bob", Fence: claim.Fence,
		Completion: api.TaskCompletion{Status: api.TaskStatusRequiresApproval, Result: "tagged", Rationale: "the tests pass",
			ProposedAction: json.RawMessage(`{"tag":"v1"}`)}}); err != nil {
		t.Fatal(err)
	}
	a := <-got
	if a.err != nil || a.task == nil || a.task.Status.State != a2a.TaskStateInputRequired || a.task.Status.Message == nil ||
		!strings.Contains(a.task.Status.Message.Parts[0].Text(), `{"tag":"v1"}`) {
		t.Fatalf("blocking send: %+v, %v; want INPUT_REQUIRED asking to approve the action", a.task, a.err)
	}
}

// With returnImmediately the answer is the task as created, SUBMITTED.
func TestSendMessageReturnImmediately(t *testing.T) {
	n := start(t)
	_, c := n.a2aFor(t, n.alice)
	task := sendText(t, c, a2a.NewTextPart("Bump the deps"))
	if task.Status.State != a2a.TaskStateSubmitted {
		t.Errorf("returnImmediately: %s, want SUBMITTED", task.Status.State)
	}
}
