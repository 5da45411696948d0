package a2ahost

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
)

// A stream cut after an event is resumed from that event's id: the next
// connection asks for what follows it, and nothing is sent twice; the
// states go WORKING, INPUT_REQUIRED, COMPLETED. The event stream is a fake
// that ends its first connection after one event.
func TestFollowResumesAfterACut(t *testing.T) {
	task := func(state api.TaskState) string {
		b, _ := json.Marshal(api.TaskUpdate{Event: api.TaskEvent{Seq: 1}, Task: &api.Task{ID: "task-1", To: "bob", State: state}})
		return string(b)
	}
	var mu sync.Mutex
	var asked []string // each connection's Last-Event-ID
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.Header.Get("Last-Event-ID"))
		n := len(asked)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		switch n {
		case 1: // one event of another task, one of ours, then the cut
			fmt.Fprintf(w, "id: 4:task\nevent: task\ndata: %s\n\n", `{"event":{"seq":4},"task":{"id":"task-2","state":"succeeded"}}`)
			fmt.Fprintf(w, "id: 5:task\nevent: task\ndata: %s\n\n", task(api.TaskAwaitingApproval))
		default:
			fmt.Fprintf(w, "id: 6:task\nevent: task\ndata: %s\n\n", task(api.TaskSucceeded))
			w.(http.Flusher).Flush()
			<-r.Context().Done() // the follower ends the stream
		}
	}))
	t.Cleanup(srv.Close)
	a := &agent{id: "bob", sc: client.NewClient(srv.URL, nil), base: srv.URL}
	var got []string
	start := &api.Task{ID: "task-1", To: "bob", State: api.TaskRunning, History: []api.TaskEvent{{Seq: 3}}}
	a.follow(t.Context(), start, func(ev a2a.Event, err error) bool {
		if err != nil {
			t.Fatalf("error event: %v", err)
		}
		switch e := ev.(type) {
		case *a2a.Task:
			got = append(got, "task "+string(e.Status.State))
		case *a2a.TaskStatusUpdateEvent:
			got = append(got, "status "+string(e.Status.State))
		}
		return true
	})
	want := []string{"task TASK_STATE_WORKING", "status TASK_STATE_INPUT_REQUIRED", "status TASK_STATE_COMPLETED"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events %q, want %q", got, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(asked) != fmt.Sprint([]string{"3:task", "5:task"}) {
		t.Errorf("connections asked after %q, want [3:task 5:task]", asked)
	}
}

// A blocking send whose request ends before the task settles answers the
// task as it is then, read once more (not an error: the task exists).
// The API is a fake whose stream stays silent.
func TestAwaitAnswersTheTaskWhenTheRequestEnds(t *testing.T) {
	const id = "task-20260101-000000-alice-00000000"
	streaming := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/tasks/" + id:
			_ = json.NewEncoder(w).Encode(api.Task{ID: id, To: "bob", State: api.TaskRunning, ProgressMessage: "half way",
				History: []api.TaskEvent{{Seq: 3}}})
		case "/v1/stream":
			w.Header().Set("Content-Type", "text/event-stream")
			w.(http.Flusher).Flush()
			streaming <- struct{}{}
			<-r.Context().Done()
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	a := &agent{id: "bob", c: client.NewClient(srv.URL, nil), sc: client.NewClient(srv.URL, nil), base: srv.URL}
	ctx, cancel := context.WithCancel(t.Context())
	got := make(chan *a2a.Task, 1)
	go func() { got <- a.await(ctx, &a2a.Task{ID: id, Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}) }()
	<-streaming
	cancel()
	task := <-got
	if task.Status.State != a2a.TaskStateWorking || task.Status.Message == nil || task.Status.Message.Parts[0].Text() != "half way" {
		t.Errorf("answer after the request ended: %+v, want the task as read then (WORKING, half way)", task.Status)
	}
}
