package a2ahost_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/maos-project/maos/a2ahost"
	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
)

// seen is one stream event: describe's words and its MetaEventID.
type seen struct{ what, id string }

// subscribe subscribes to id, resuming after lastID unless it is "",
// and sends each event on the channel, closed at the stream's end.
func subscribe(ctx context.Context, c *a2aclient.Client, id a2a.TaskID, lastID string) <-chan seen {
	if lastID != "" {
		ctx = a2aclient.AttachServiceParams(ctx, a2aclient.ServiceParams{a2ahost.HeaderLastEventID: {lastID}})
	}
	out := make(chan seen, 16)
	go func() {
		defer close(out)
		for ev, err := range c.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: id}) {
			if err != nil {
				out <- seen{what: "error: " + err.Error()}
				return
			}
			out <- seen{what: describe(ev), id: a2ahost.EventID(ev)}
		}
	}()
	return out
}

// drain reads ch to its end.
func drain(ch <-chan seen) []seen {
	var got []seen
	for s := range ch {
		got = append(got, s)
	}
	return got
}

// whats is the words of each event.
func whats(ss []seen) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.what
	}
	return out
}

// indexOf is N of an "N:task" event id (0 if it is not one).
func indexOf(id string) uint64 {
	n, _ := strconv.ParseUint(strings.TrimSuffix(id, ":task"), 10, 64)
	return n
}

// A subscription cut after some updates resumes, by the last event id it
// got (Last-Event-ID), with the task as that entry left it and then every
// update after it, none lost or repeated, though the task moved on while
// nobody listened; every event names its entry, in increasing order.
func TestSubscribeResumesByLastEventID(t *testing.T) {
	n := start(t)
	_, c := n.a2aFor(t, n.alice)
	sent := sendText(t, c, a2a.NewTextPart("Port the parser"))
	bob := client.NewClient(n.url, nil).WithToken(n.bob)
	ctx, cut := context.WithCancel(t.Context())
	ch := subscribe(ctx, c, sent.ID, "")
	first := <-ch
	claim, err := bob.ClaimTask(t.Context(), string(sent.ID), "bob")
	if err != nil {
		t.Fatal(err)
	}
	progress := func(words string) {
		t.Helper()
		if _, err := bob.TaskProgress(t.Context(), api.TaskProgressCommand{ID: string(sent.ID), Agent: "bob", Fence: claim.Fence, Message: words}); err != nil {
			t.Fatal(err)
		}
	}
	progress("read the grammar")
	working := <-ch
	words := <-ch
	cut()
	drain(ch)
	if first.what != "task SUBMITTED" || working.what != "status WORKING" || words.what != "status WORKING: read the grammar" {
		t.Fatalf("before the cut: %q %q %q", first.what, working.what, words.what)
	}
	// While nobody listens: a new note, the same note again (a renewal,
	// no update), and the completion.
	progress("ported the lexer")
	progress("ported the lexer")
	if _, err := bob.CompleteTask(t.Context(), api.TaskCompleteCommand{ID: string(sent.ID), Agent: "bob", Fence: claim.Fence,
		Completion: api.TaskCompletion{Status: api.TaskStatusSuccess, Result: "ported"}}); err != nil {
		t.Fatal(err)
	}
	got := drain(subscribe(t.Context(), c, sent.ID, words.id))
	want := []string{"task WORKING: read the grammar", "status WORKING: ported the lexer", "artifact result: ported", "status COMPLETED: ported the lexer"}
	if strings.Join(whats(got), "|") != strings.Join(want, "|") {
		t.Fatalf("resumed after %s:\n got %q\nwant %q", words.id, whats(got), want)
	}
	all := append([]seen{first, working, words}, got...)
	for i := 1; i < len(all); i++ {
		prev, cur := indexOf(all[i-1].id), indexOf(all[i].id)
		same := all[i-1].what == "artifact result: ported" || i == 3 // the artifact and its status; the resumed task
		if cur == 0 || cur < prev || (cur == prev && !same) {
			t.Errorf("event %d %q has id %q after %q", i, all[i].what, all[i].id, all[i-1].id)
		}
	}
	if got[0].id != words.id {
		t.Errorf("the resumed stream's task has id %q, want the last one got, %q", got[0].id, words.id)
	}
	// An id past the task's last update: the task as it is, final, alone.
	if got := whats(drain(subscribe(t.Context(), c, sent.ID, "1000000:task"))); strings.Join(got, "|") != "task COMPLETED: ported the lexer" {
		t.Errorf("resumed after an id past the task: %q, want the final task alone", got)
	}
	// An id from before the task: the whole task from its creation.
	fromStart := drain(subscribe(t.Context(), c, sent.ID, "1:task"))
	want = []string{"task SUBMITTED", "status WORKING", "status WORKING: read the grammar", "status WORKING: ported the lexer",
		"artifact result: ported", "status COMPLETED: ported the lexer"}
	if strings.Join(whats(fromStart), "|") != strings.Join(want, "|") {
		t.Errorf("resumed after 1:task:\n got %q\nwant %q", whats(fromStart), want)
	}
}

// A Last-Event-ID that is not "N:task" is INVALID_PARAMS naming the header.
func TestSubscribeRefusesABadLastEventID(t *testing.T) {
	n := start(t)
	_, c := n.a2aFor(t, n.alice)
	sent := sendText(t, c, a2a.NewTextPart("Port the parser"))
	for _, bad := range []string{"nonsense", "12", "0:task", "3:approval"} {
		got := drain(subscribe(t.Context(), c, sent.ID, bad))
		if len(got) != 1 || !strings.Contains(got[0].what, "Last-Event-ID") || !strings.Contains(got[0].what, "invalid") {
			t.Errorf("Last-Event-ID %q: %q, want one invalid-params error naming the header", bad, whats(got))
		}
	}
}

// A completion that asks for approval is INPUT_REQUIRED, its status
// message the approval's question (the rationale, the approval, who
// decides, the action); once the creator approves, COMPLETED.
func TestAwaitingApprovalIsInputRequiredWithTheQuestion(t *testing.T) {
	n := start(t)
	_, c := n.a2aFor(t, n.alice)
	sent := sendText(t, c, a2a.NewTextPart("Ship the release"))
	bob := client.NewClient(n.url, nil).WithToken(n.bob)
	ctx := t.Context()
	claim, err := bob.ClaimTask(ctx, string(sent.ID), "bob")
	if err != nil {
		t.Fatal(err)
	}
	ch := subscribe(ctx, c, sent.ID, "")
	if got := (<-ch).what; got != "task WORKING" {
		t.Fatalf("first event %q, want the task in WORKING", got)
	}
	action := json.RawMessage(`{"tag":"v1.2.0"}`)
	if _, err := bob.CompleteTask(ctx, api.TaskCompleteCommand{ID: string(sent.ID), Agent: "bob", Fence: claim.Fence,
		Completion: api.TaskCompletion{Status: api.TaskStatusRequiresApproval, Result: "tagged", Rationale: "the tests pass", ProposedAction: action}}); err != nil {
		t.Fatal(err)
	}
	asked := (<-ch).what
	task, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: sent.ID})
	if err != nil {
		t.Fatal(err)
	}
	mt, err := n.admin.Task(ctx, string(sent.ID))
	if err != nil {
		t.Fatal(err)
	}
	ap, err := n.admin.Approval(ctx, mt.ApprovalID)
	if err != nil {
		t.Fatal(err)
	}
	question := task.Status.Message
	if task.Status.State != a2a.TaskStateInputRequired || question == nil || !strings.HasPrefix(asked, "status INPUT_REQUIRED: the tests pass") {
		t.Fatalf("awaiting approval: GetTask %s %+v, stream %q; want INPUT_REQUIRED with the question", task.Status.State, question, asked)
	}
	for _, want := range []string{"the tests pass", ap.ID, "alice", ap.ActionHash, `{"tag":"v1.2.0"}`} {
		if !strings.Contains(question.Parts[0].Text(), want) {
			t.Errorf("the question %q does not say %q", question.Parts[0].Text(), want)
		}
	}
	alice := client.NewClient(n.url, nil).WithToken(n.alice)
	if _, err := alice.DecideApproval(ctx, api.ApprovalDecideCommand{ID: ap.ID, Approver: "alice", Decision: api.DecisionApprove, ActionHash: ap.ActionHash}); err != nil {
		t.Fatal(err)
	}
	got := whats(drain(ch))
	if len(got) != 2 || got[0] != "artifact result: tagged" || !strings.HasPrefix(got[1], "status COMPLETED") {
		t.Errorf("after the approval: %q, want the result and COMPLETED", got)
	}
}
