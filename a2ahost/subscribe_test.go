package a2ahost_test

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
)

// collect reads events in a goroutine and sends each on the channel,
// which is closed when the stream ends (an error is sent as the event
// "error: ...").
func collect(events iter.Seq2[a2a.Event, error]) <-chan string {
	out := make(chan string, 16)
	go func() {
		defer close(out)
		for ev, err := range events {
			if err != nil {
				out <- "error: " + err.Error()
				return
			}
			out <- describe(ev)
		}
	}()
	return out
}

// describe is an event in a word or two: "task SUBMITTED",
// "status WORKING: words", "artifact result: text".
func describe(ev a2a.Event) string {
	switch e := ev.(type) {
	case *a2a.Task:
		s := "task " + short(e.Status.State)
		if m := e.Status.Message; m != nil && len(m.Parts) > 0 {
			s += ": " + m.Parts[0].Text()
		}
		return s
	case *a2a.TaskStatusUpdateEvent:
		s := "status " + short(e.Status.State)
		if m := e.Status.Message; m != nil && len(m.Parts) > 0 {
			s += ": " + m.Parts[0].Text()
		}
		return s
	case *a2a.TaskArtifactUpdateEvent:
		return "artifact " + e.Artifact.Name + ": " + e.Artifact.Parts[0].Text()
	}
	return fmt.Sprintf("%T", ev)
}

// next is the stream's next event; it fails the test if the stream ended
// or the test's deadline passes first.
func next(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case s, ok := <-ch:
		if !ok {
			t.Fatal("the stream ended early")
		}
		return s
	case <-t.Context().Done():
		t.Fatal("no event before the test's end")
	}
	return ""
}

// expect reads the stream to its end and compares it with want.
func expect(t *testing.T, ch <-chan string, want ...string) {
	t.Helper()
	var got []string
	for s := range ch {
		got = append(got, s)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events\n got %q\nwant %q", got, want)
	}
}

// claimAndComplete has bob claim task id, report progress if words is
// not empty, and complete it with result.
func claimAndComplete(t *testing.T, n *node, id, words, result string) {
	t.Helper()
	ctx := context.Background()
	bob := client.NewClient(n.url, nil).WithToken(n.bob)
	claim, err := bob.ClaimTask(ctx, id, "bob")
	if err != nil {
		t.Fatal(err)
	}
	if words != "" {
		if _, err := bob.TaskProgress(ctx, api.TaskProgressCommand{ID: id, Agent: "bob", Fence: claim.Fence, Message: words}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := bob.CompleteTask(ctx, api.TaskCompleteCommand{ID: id, Agent: "bob", Fence: claim.Fence,
		Completion: api.TaskCompletion{Status: api.TaskStatusSuccess, Result: result}}); err != nil {
		t.Fatal(err)
	}
}

// A subscriber sees the task, then each state once, in order, the result
// as an artifact before the final status, and the stream ends.
func TestSubscribeSeesEachStateOnce(t *testing.T) {
	n := start(t)
	_, c := n.a2aFor(t, n.alice)
	sent := sendText(t, c, a2a.NewTextPart("Write the release notes"))
	ch := collect(c.SubscribeToTask(t.Context(), &a2a.SubscribeToTaskRequest{ID: sent.ID}))
	if got := next(t, ch); got != "task SUBMITTED" {
		t.Fatalf("first event %q, want the task in SUBMITTED", got)
	}
	claimAndComplete(t, n, string(sent.ID), "", "notes written")
	expect(t, ch, "status WORKING", "artifact result: notes written", "status COMPLETED")
}

// A streaming send creates the task and follows it: a progress note is a
// new WORKING status with its words (kept by the final status, as
// ToTask keeps the last progress message).
func TestSendStreamingFollowsTheTask(t *testing.T) {
	n := start(t)
	_, c := n.a2aFor(t, n.alice)
	ctx := t.Context()
	ch := make(chan string, 16)
	var id a2a.TaskID
	first := make(chan struct{})
	go func() {
		defer close(ch)
		for ev, err := range c.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("Fix the flaky test"))}) {
			if err != nil {
				ch <- "error: " + err.Error()
				return
			}
			if task, ok := ev.(*a2a.Task); ok && id == "" {
				id = task.ID
				close(first)
			}
			ch <- describe(ev)
		}
	}()
	if got := next(t, ch); got != "task SUBMITTED" {
		t.Fatalf("first event %q, want the task in SUBMITTED", got)
	}
	<-first
	claimAndComplete(t, n, string(id), "found the race", "fixed")
	expect(t, ch, "status WORKING", "status WORKING: found the race", "artifact result: fixed", "status COMPLETED: found the race")
}

// Subscribing to a task already final answers the task alone; to a task
// that is not the agent's, TaskNotFound.
func TestSubscribeFinalAndForeign(t *testing.T) {
	n := start(t)
	_, c := n.a2aFor(t, n.alice)
	sent := sendText(t, c, a2a.NewTextPart("Tidy the docs"))
	claimAndComplete(t, n, string(sent.ID), "", "tidied")
	expect(t, collect(c.SubscribeToTask(t.Context(), &a2a.SubscribeToTaskRequest{ID: sent.ID})), "task COMPLETED")
	res, err := n.admin.CreateTask(t.Context(), api.TaskCreateCommand{From: "bob", To: "alice", Title: "for alice"})
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for s := range collect(c.SubscribeToTask(t.Context(), &a2a.SubscribeToTaskRequest{ID: a2a.TaskID(res.ID)})) {
		got = append(got, s)
	}
	if len(got) != 1 || !strings.Contains(got[0], "not found") {
		t.Errorf("subscribing to alice's task at bob: %q, want one task-not-found error", got)
	}
}

// short is a state without its TASK_STATE_ prefix.
func short(s a2a.TaskState) string { return strings.TrimPrefix(string(s), "TASK_STATE_") }

// A subscription starts after the task as read: a task claimed before it
// is WORKING first, and its claim is not sent again.
func TestSubscribeStartsAfterTheTaskAsRead(t *testing.T) {
	n := start(t)
	_, c := n.a2aFor(t, n.alice)
	sent := sendText(t, c, a2a.NewTextPart("Bump the deps"))
	bob := client.NewClient(n.url, nil).WithToken(n.bob)
	claim, err := bob.ClaimTask(t.Context(), string(sent.ID), "bob")
	if err != nil {
		t.Fatal(err)
	}
	ch := collect(c.SubscribeToTask(t.Context(), &a2a.SubscribeToTaskRequest{ID: sent.ID}))
	if got := next(t, ch); got != "task WORKING" {
		t.Fatalf("first event %q, want the task in WORKING", got)
	}
	if _, err := bob.CompleteTask(t.Context(), api.TaskCompleteCommand{ID: string(sent.ID), Agent: "bob", Fence: claim.Fence,
		Completion: api.TaskCompletion{Status: api.TaskStatusFailure, Error: &api.TaskError{ErrorType: "blocked", ErrorMessage: "pinned upstream"}}}); err != nil {
		t.Fatal(err)
	}
	expect(t, ch, "status FAILED: pinned upstream")
}
