package a2ahost_test

import (
	"errors"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/maos-project/maos/api"
)

// ListTasks lists every task to the agent, oldest first, in pages whose
// token leads to the next; a task to another agent is not listed.
func TestListTasksPages(t *testing.T) {
	n := start(t)
	_, c := n.a2aFor(t, n.alice)
	ctx := t.Context()
	var want []a2a.TaskID
	for _, s := range []string{"one", "two"} {
		want = append(want, sendText(t, c, a2a.NewTextPart(s)).ID)
	}
	if _, err := n.admin.CreateTask(ctx, api.TaskCreateCommand{From: "bob", To: "alice", Title: "for alice"}); err != nil {
		t.Fatal(err)
	}
	direct, err := n.admin.CreateTask(ctx, api.TaskCreateCommand{From: "alice", To: "bob", Title: "made without A2A"})
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, a2a.TaskID(direct.ID))
	first, err := c.ListTasks(ctx, &a2a.ListTasksRequest{PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Tasks) != 2 || first.Tasks[0].ID != want[0] || first.Tasks[1].ID != want[1] || first.NextPageToken == "" {
		t.Fatalf("first page %v (next %q), want %v and a token", ids(first.Tasks), first.NextPageToken, want[:2])
	}
	second, err := c.ListTasks(ctx, &a2a.ListTasksRequest{PageSize: 2, PageToken: first.NextPageToken})
	if err != nil {
		t.Fatal(err)
	}
	if len(second.Tasks) != 1 || second.Tasks[0].ID != want[2] || second.NextPageToken != "" {
		t.Errorf("second page %v (next %q), want [%s] and no token", ids(second.Tasks), second.NextPageToken, want[2])
	}
}

// The filters apply to the A2A view: contextId, status; artifacts only
// when asked for.
func TestListTasksFilters(t *testing.T) {
	n := start(t)
	_, c := n.a2aFor(t, n.alice)
	ctx := t.Context()
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("in a context"))
	m.ContextID = "ctx-release"
	inCtx := sendMessage(t, c, m).ID
	done := sendText(t, c, a2a.NewTextPart("to be done")).ID
	claimAndComplete(t, n, string(done), "", "done it")
	got, err := c.ListTasks(ctx, &a2a.ListTasksRequest{ContextID: "ctx-release"})
	if err != nil || len(got.Tasks) != 1 || got.Tasks[0].ID != inCtx {
		t.Errorf("contextId filter: %v, %v; want [%s]", got, err, inCtx)
	}
	got, err = c.ListTasks(ctx, &a2a.ListTasksRequest{Status: a2a.TaskStateCompleted})
	if err != nil || len(got.Tasks) != 1 || got.Tasks[0].ID != done || got.Tasks[0].Artifacts != nil {
		t.Errorf("status filter: %v, %v; want [%s] without artifacts", got, err, done)
	}
	got, err = c.ListTasks(ctx, &a2a.ListTasksRequest{Status: a2a.TaskStateCompleted, IncludeArtifacts: true})
	if err != nil || len(got.Tasks) != 1 || len(got.Tasks[0].Artifacts) != 1 {
		t.Errorf("includeArtifacts: %v, %v; want the result artifact", got, err)
	}
	for _, req := range []*a2a.ListTasksRequest{{PageSize: 101}, {PageToken: "not-a-token"}} {
		if _, err := c.ListTasks(ctx, req); !errors.Is(err, a2a.ErrInvalidParams) {
			t.Errorf("ListTasks(%+v): %v, want ErrInvalidParams", req, err)
		}
	}
}

func ids(ts []*a2a.Task) []a2a.TaskID {
	var out []a2a.TaskID
	for _, t := range ts {
		out = append(out, t.ID)
	}
	return out
}
