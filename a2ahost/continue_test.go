package a2ahost_test

import (
	"errors"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
)

// A message with the taskId of a task in progress is no new task: it is a
// maos message in the task's thread to its claimant, its file an artifact.
func TestContinueTaskIsAMessageToTheClaimant(t *testing.T) {
	n := start(t)
	_, c := n.a2aFor(t, n.alice)
	ctx := t.Context()
	sent := sendText(t, c, a2a.NewTextPart("Write the release notes"))
	bob := client.NewClient(n.url, nil).WithToken(n.bob)
	if _, err := bob.ClaimTask(ctx, string(sent.ID), "bob"); err != nil {
		t.Fatal(err)
	}
	file := a2a.NewRawPart([]byte("v1.2: faster"))
	file.Filename, file.MediaType = "changes.txt", "text/plain"
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("Also mention the speed-up"), file)
	m.TaskID, m.ContextID = sent.ID, sent.ContextID
	got := sendMessage(t, c, m)
	if got.ID != sent.ID || got.Status.State != a2a.TaskStateWorking {
		t.Errorf("answer %s in %s, want task %s in WORKING", got.ID, got.Status.State, sent.ID)
	}
	list, err := c.ListTasks(ctx, &a2a.ListTasksRequest{})
	if err != nil || len(list.Tasks) != 1 {
		t.Errorf("tasks after the continuation: %v (%v), want the one", list, err)
	}
	mt, err := n.admin.Task(ctx, string(sent.ID))
	if err != nil {
		t.Fatal(err)
	}
	page, err := bob.Inbox(ctx, "bob", api.InboxQuery{From: "alice"}, api.Strong)
	if err != nil {
		t.Fatal(err)
	}
	var note *api.Message
	for _, msg := range page.Messages {
		if msg.CorrelationID == mt.ID && msg.Content.Text == "Also mention the speed-up" {
			note = &msg.Message
		}
	}
	if note == nil {
		t.Fatalf("no message about task %s in bob's inbox: %+v", mt.ID, page.Messages)
	}
	if note.InReplyTo != mt.MessageID || note.Channel != mt.Channel || len(note.Content.Artifacts) != 1 || note.Content.Artifacts[0].Name != "changes.txt" {
		t.Errorf("message %+v: want in reply to %s in %s, naming changes.txt", note, mt.MessageID, mt.Channel)
	}
}

// A final task takes no more messages; a contextId not the task's is
// refused; an unknown task is not found.
func TestContinueTaskRefusals(t *testing.T) {
	n := start(t)
	_, c := n.a2aFor(t, n.alice)
	ctx := t.Context()
	sent := sendText(t, c, a2a.NewTextPart("Tidy the docs"))
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("more"))
	m.TaskID, m.ContextID = sent.ID, "another-context"
	if _, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: m}); !errors.Is(err, a2a.ErrInvalidParams) {
		t.Errorf("another contextId: %v, want ErrInvalidParams", err)
	}
	claimAndComplete(t, n, string(sent.ID), "", "tidied")
	m.ContextID = ""
	if _, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: m}); !errors.Is(err, a2a.ErrUnsupportedOperation) {
		t.Errorf("a final task: %v, want ErrUnsupportedOperation", err)
	}
	m.TaskID = "task-20260101-000000-alice-00000000"
	if _, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: m}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("no such task: %v, want ErrTaskNotFound", err)
	}
}
