package a2ahost_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/maos-project/maos/a2ahost"
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

// note is the text of the messages in bob's inbox about task id, from
// alice, in order.
func notes(t *testing.T, n *node, id string) []string {
	t.Helper()
	bob := client.NewClient(n.url, nil).WithToken(n.bob)
	page, err := bob.Inbox(t.Context(), "bob", api.InboxQuery{From: "alice"}, api.Strong)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range page.Messages {
		if m.CorrelationID == id && slices.Contains(m.Tags, "a2a") {
			out = append(out, m.Content.Text)
		}
	}
	return out
}

// count is how many tasks bob has.
func count(t *testing.T, c *a2aclient.Client) int {
	t.Helper()
	list, err := c.ListTasks(t.Context(), &a2a.ListTasksRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return len(list.Tasks)
}

// referenceTaskIds naming one open task of the agent continue it (a
// message in its thread); naming two open ones is refused; naming only
// final ones makes a new task in the first one's context, which shows
// the references; an open one beside final ones is continued.
func TestContinueByReferenceTaskIDs(t *testing.T) {
	n := start(t)
	_, c := n.a2aFor(t, n.alice)
	a := sendText(t, c, a2a.NewTextPart("Write the release notes"))
	ref := func(text string, ids ...a2a.TaskID) *a2a.Message {
		m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
		m.ReferenceTasks = ids
		return m
	}
	if got := sendMessage(t, c, ref("mention the speed-up", a.ID)); got.ID != a.ID || count(t, c) != 1 {
		t.Errorf("referencing open %s: answered %s with %d tasks, want %s and no new task", a.ID, got.ID, count(t, c), a.ID)
	}
	if got := notes(t, n, string(a.ID)); !slices.Equal(got, []string{"mention the speed-up"}) {
		t.Errorf("notes about %s: %q", a.ID, got)
	}
	b := sendText(t, c, a2a.NewTextPart("Bump the version"))
	if _, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: ref("both", a.ID, b.ID)}); !errors.Is(err, a2a.ErrInvalidParams) {
		t.Errorf("referencing two open tasks: %v, want ErrInvalidParams", err)
	}
	claimAndComplete(t, n, string(a.ID), "", "written")
	if got := sendMessage(t, c, ref("and the date", a.ID, b.ID)); got.ID != b.ID {
		t.Errorf("referencing final %s and open %s: answered %s, want %s", a.ID, b.ID, got.ID, b.ID)
	}
	refined := sendMessage(t, c, ref("Now translate the notes", a.ID))
	if refined.ID == a.ID || refined.ContextID != a.ContextID || count(t, c) != 3 {
		t.Errorf("referencing final %s: task %s in context %s (%d tasks), want a new task in %s", a.ID, refined.ID, refined.ContextID, count(t, c), a.ContextID)
	}
	if h := refined.History; len(h) != 1 || !slices.Equal(h[0].ReferenceTasks, []a2a.TaskID{a.ID}) {
		t.Errorf("the refinement's request %+v, want it to reference %s", h, a.ID)
	}
}

// A contextId continues the newest open task of the agent from the same
// sender in that context (a task made without one has its id as
// context); another sender's message in it, or one after the task ended,
// makes a new task in that context.
func TestContinueByContextID(t *testing.T) {
	n := start(t)
	_, c := n.a2aFor(t, n.alice)
	inCtx := func(ctxID, text string) *a2a.Message {
		m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
		m.ContextID = ctxID
		return m
	}
	a := sendMessage(t, c, inCtx("ctx-notes", "Write the release notes"))
	if got := sendMessage(t, c, inCtx("ctx-notes", "mention the speed-up")); got.ID != a.ID || count(t, c) != 1 {
		t.Errorf("same context: answered %s with %d tasks, want %s", got.ID, count(t, c), a.ID)
	}
	if got := notes(t, n, string(a.ID)); !slices.Equal(got, []string{"mention the speed-up"}) {
		t.Errorf("notes about %s: %q", a.ID, got)
	}
	plain := sendText(t, c, a2a.NewTextPart("Bump the version"))
	if got := sendMessage(t, c, inCtx(string(plain.ID), "to 1.3")); got.ID != plain.ID {
		t.Errorf("the context of a task made without one (its id): answered %s, want %s", got.ID, plain.ID)
	}
	_, admin := n.a2aFor(t, adminSecret)
	other := inCtx("ctx-notes", "carol's own notes")
	other.Metadata = map[string]any{a2ahost.MetaFrom: "carol"}
	if got := sendMessage(t, admin, other); got.ID == a.ID || got.ContextID != "ctx-notes" {
		t.Errorf("another sender in ctx-notes: answered %s in %s, want a new task there", got.ID, got.ContextID)
	}
	claimAndComplete(t, n, string(a.ID), "", "written")
	if got := sendMessage(t, c, inCtx("ctx-notes", "Now translate them")); got.ID == a.ID || got.ContextID != "ctx-notes" || got.Status.State != a2a.TaskStateSubmitted {
		t.Errorf("after %s ended: answered %s in %s (%s), want a new task in ctx-notes", a.ID, got.ID, got.ContextID, got.Status.State)
	}
}
