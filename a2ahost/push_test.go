package a2ahost_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/maos-project/maos/a2ahost"
	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
)

// pushed is one push a receiver took.
type pushed struct {
	kind, state, id string // status or artifact; the A2A state; MetaEventID
	token, auth     string // the A2A-Notification-Token and Authorization headers
}

// receiver is an httptest server on loopback that records the pushes it
// takes; the first fail requests (all when fail < 0) are answered 500.
type receiver struct {
	*httptest.Server
	mu    sync.Mutex
	got   []pushed
	tries int
	fail  int
}

func newReceiver(t *testing.T, fail int) *receiver {
	rc := &receiver{fail: fail}
	rc.Server = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.tries++
	if rc.fail < 0 || rc.tries <= rc.fail {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	var sr a2a.StreamResponse
	if err := json.Unmarshal(body, &sr); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	p := pushed{token: r.Header.Get("A2A-Notification-Token"), auth: r.Header.Get("Authorization")}
	switch e := sr.Event.(type) {
	case *a2a.TaskStatusUpdateEvent:
		p.kind, p.state, p.id = "status", string(e.Status.State), fmt.Sprint(e.Metadata[a2ahost.MetaEventID])
	case *a2a.TaskArtifactUpdateEvent:
		p.kind, p.id = "artifact", fmt.Sprint(e.Metadata[a2ahost.MetaEventID])
	}
	rc.got = append(rc.got, p)
}

// pushes is what rc took so far, and its tries.
func (rc *receiver) pushes() ([]pushed, int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got), rc.tries
}

// waitFor polls rc until ok holds of its pushes (bounded: 60 s).
func (rc *receiver) waitFor(t *testing.T, what string, ok func([]pushed) bool) []pushed {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, _ := rc.pushes()
		if ok(got) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s at the receiver; it took %+v", what, got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func completed(got []pushed) bool {
	return slices.ContainsFunc(got, func(p pushed) bool { return p.state == string(a2a.TaskStateCompleted) })
}

// deliverer runs a Deliverer against n until the test ends or stop is
// called; leader says whether it leads.
func (n *node) deliverer(t *testing.T, allow []string, leader *atomic.Bool) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	d := &a2ahost.Deliverer{Client: client.NewClient(n.url, nil).WithToken(adminSecret), Allow: allow, IsLeader: leader.Load,
		Retry: a2ahost.Retry{Tries: 3, First: 10 * time.Millisecond, Max: 40 * time.Millisecond}, CursorEvery: 20 * time.Millisecond,
		Poll: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
	go func() { defer close(done); d.Run(ctx) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

// work has bob claim task id, report progress with each of steps, and
// complete it with result.
func (n *node) work(t *testing.T, id string, steps ...string) (bob *client.Client, fence uint64) {
	t.Helper()
	bob = client.NewClient(n.url, nil).WithToken(n.bob)
	claim, err := bob.ClaimTask(t.Context(), id, "bob")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		if _, err := bob.TaskProgress(t.Context(), api.TaskProgressCommand{ID: id, Agent: "bob", Fence: claim.Fence, Message: s}); err != nil {
			t.Fatal(err)
		}
	}
	return bob, claim.Fence
}

func complete(t *testing.T, bob *client.Client, id string, fence uint64) {
	t.Helper()
	if _, err := bob.CompleteTask(t.Context(), api.TaskCompleteCommand{ID: id, Agent: "bob", Fence: fence,
		Completion: api.TaskCompletion{Status: api.TaskStatusSuccess, Result: "done"}}); err != nil {
		t.Fatal(err)
	}
}

// TestPushConfigMethods: with an allowlist the card says
// pushNotifications; a send carrying a config sets it; the creator
// creates, lists, gets and deletes configs through the SDK's client,
// reads never carry credentials; bob (not the creator) is refused, and so
// is a host off the allowlist. Without an allowlist the card says no and
// the methods are PUSH_NOTIFICATION_NOT_SUPPORTED.
func TestPushConfigMethods(t *testing.T) {
	n := startWith(t, []string{"127.0.0.1"})
	card, c := n.a2aFor(t, n.alice)
	if !card.Capabilities.PushNotifications {
		t.Error("the card of a node with an allowlist says no push notifications")
	}
	ctx := t.Context()
	res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("call me back")),
		Config: &a2a.SendMessageConfig{ReturnImmediately: true, PushConfig: &a2a.PushConfig{URL: "http://127.0.0.1:9/hook", Token: "tok-1"}}})
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	if e, ok := task.Metadata[a2ahost.MetaPushError]; ok {
		t.Fatalf("the send's push config was refused: %v", e)
	}
	const secret = "cred-0123456789"
	_, err = c.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: task.ID, ID: "second", URL: "http://127.0.0.1:9/two",
		Auth: &a2a.PushAuthInfo{Scheme: "Bearer", Credentials: secret}})
	if err != nil {
		t.Fatal(err)
	}
	list, err := c.ListTaskPushConfigs(ctx, &a2a.ListTaskPushConfigRequest{TaskID: task.ID})
	data, _ := json.Marshal(list)
	if err != nil || len(list) != 2 || list[0].ID != a2ahost.DefaultPushConfigID || list[0].Token != "tok-1" || strings.Contains(string(data), secret) {
		t.Fatalf("list %s, %v: want the send's config (default, tok-1) and second, no credentials", data, err)
	}
	if got, err := c.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigRequest{TaskID: task.ID, ID: "second"}); err != nil || got.Auth == nil || got.Auth.Scheme != "Bearer" || got.Auth.Credentials != "" {
		t.Errorf("get second: %+v, %v: want the scheme and no credentials", got, err)
	}
	_, err = c.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: task.ID, ID: "far", URL: "http://127.0.0.2:9/"})
	if !errors.Is(err, a2a.ErrInvalidParams) || !strings.Contains(err.Error(), "not one this node may call") {
		t.Errorf("a host off the allowlist: %v, want invalid params", err)
	}
	_, asBob := n.a2aFor(t, n.bob)
	if _, err = asBob.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: task.ID, ID: "bobs", URL: "http://127.0.0.1:9/"}); !errors.Is(err, a2a.ErrUnauthorized) {
		t.Errorf("bob sets a config of alice's task: %v, want unauthorized", err)
	}
	if err := c.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigRequest{TaskID: task.ID, ID: "second"}); err != nil {
		t.Fatal(err)
	}
	if list, err := c.ListTaskPushConfigs(ctx, &a2a.ListTaskPushConfigRequest{TaskID: task.ID}); err != nil || len(list) != 1 {
		t.Errorf("after delete: %d configs, %v", len(list), err)
	}

	off := start(t)
	card, c = off.a2aFor(t, off.alice)
	sent := sendText(t, c, a2a.NewTextPart("x"))
	_, err = c.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: sent.ID, URL: "http://127.0.0.1:9/"})
	if card.Capabilities.PushNotifications || !errors.Is(err, a2a.ErrPushNotificationNotSupported) {
		t.Errorf("no allowlist: card push %t, create %v; want false and not supported", card.Capabilities.PushNotifications, err)
	}
}

// sendWithPush sends a task to bob as alice with a push config to url.
func sendWithPush(t *testing.T, n *node, cfg *a2a.PushConfig) string {
	t.Helper()
	_, c := n.a2aFor(t, n.alice)
	res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("push it")),
		Config: &a2a.SendMessageConfig{ReturnImmediately: true, PushConfig: cfg}})
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	if e, ok := task.Metadata[a2ahost.MetaPushError]; ok {
		t.Fatalf("push config refused: %v", e)
	}
	return string(task.ID)
}

// entry is N of event id "N:task" (0 for another).
func entry(id string) uint64 {
	var n uint64
	fmt.Sscanf(id, "%d:task", &n)
	return n
}

// eventIDs is the event ids of got, each once, in the order first taken.
func eventIDs(got []pushed) []string {
	var out []string
	for _, p := range got {
		if !slices.Contains(out, p.id) {
			out = append(out, p.id)
		}
	}
	return out
}

// TestDelivererInOrderRetriedAndSkipped: the leader's deliverer POSTs
// each update of a task with configs, in order, with the config's token
// and authentication: WORKING (the claim), WORKING with each progress
// message, the result artifact, COMPLETED. A receiver that fails its
// first two requests gets them all (retried); a dead one gets its retry
// budget for the first push, then one try a push, and holds nothing
// back. A node that does not lead delivers nothing.
func TestDelivererInOrderRetriedAndSkipped(t *testing.T) {
	n := startWith(t, []string{"127.0.0.1"})
	good, dead := newReceiver(t, 2), newReceiver(t, -1)
	id := sendWithPush(t, n, &a2a.PushConfig{ID: "good", URL: good.URL + "/hook", Token: "tok-good",
		Auth: &a2a.PushAuthInfo{Scheme: "Bearer", Credentials: "cred-good"}})
	if _, err := client.NewClient(n.url, nil).WithToken(n.alice).SetPushConfig(t.Context(), api.PushConfigSetCommand{From: "alice",
		Config: api.PushConfig{TaskID: id, ID: "zdead", URL: dead.URL}}); err != nil {
		t.Fatal(err)
	}
	var leader, follower atomic.Bool
	leader.Store(true)
	n.deliverer(t, []string{"127.0.0.1"}, &leader)
	n.deliverer(t, []string{"127.0.0.1"}, &follower) // never leads: must send nothing
	bob, fence := n.work(t, id, "step 1", "step 2")
	complete(t, bob, id, fence)
	got := good.waitFor(t, "COMPLETED", completed)
	var seq []string
	for _, p := range got {
		if p.token != "tok-good" || p.auth != "Bearer cred-good" {
			t.Errorf("push %+v: want the config's token and Bearer credentials", p)
		}
		seq = append(seq, p.kind+" "+strings.TrimPrefix(p.state, "TASK_STATE_"))
	}
	want := []string{"status WORKING", "status WORKING", "status WORKING", "artifact ", "status COMPLETED"}
	if !slices.Equal(seq, want) {
		t.Errorf("pushes %v, want %v", seq, want)
	}
	evIDs := eventIDs(got)
	if len(evIDs) != 4 || !slices.IsSortedFunc(evIDs, func(a, b string) int { return int(entry(a)) - int(entry(b)) }) || entry(evIDs[0]) == 0 {
		t.Errorf("event ids %v: want 4 (claim, two progress, completion), increasing", evIDs)
	}
	if _, tries := good.pushes(); tries != len(got)+2 {
		t.Errorf("the flaky receiver was tried %d times for %d pushes, want two retries more", tries, len(got))
	}
	// The dead config comes after the good one: its last try may follow
	// the good one's COMPLETED.
	want3 := 3 + len(got) - 1
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, tries := dead.pushes()
		if tries >= want3 || time.Now().After(deadline) {
			break
		}
	}
	if _, tries := dead.pushes(); tries != want3 {
		t.Errorf("the dead receiver was tried %d times, want 3 (the budget) for the first push and 1 for each of the %d others", tries, len(got)-1)
	}
}

// TestDelivererResumesFromTheCursor: a deliverer delivers the claim and
// writes the cursor, then stops (its node restarts); the updates made
// while none runs are delivered by a new instance, which resumes at the
// replicated cursor: every update arrives, repeats only of what the
// cursor had not covered (deduplicated by event id).
func TestDelivererResumesFromTheCursor(t *testing.T) {
	n := startWith(t, []string{"127.0.0.1"})
	rc := newReceiver(t, 0)
	id := sendWithPush(t, n, &a2a.PushConfig{URL: rc.URL})
	var leader atomic.Bool
	leader.Store(true)
	stop := n.deliverer(t, []string{"127.0.0.1"}, &leader)
	bob, fence := n.work(t, id, "step 1")
	first := rc.waitFor(t, "the claim and step 1", func(got []pushed) bool { return len(eventIDs(got)) >= 2 })
	last := eventIDs(first)[len(eventIDs(first))-1]
	deadline := time.Now().Add(60 * time.Second)
	for {
		cur, err := n.admin.PushCursor(t.Context(), api.Strong)
		if err != nil {
			t.Fatal(err)
		}
		if cur.Index >= entry(last) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cursor stays at %d, the last push was %s", cur.Index, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	if _, err := bob.TaskProgress(t.Context(), api.TaskProgressCommand{ID: id, Agent: "bob", Fence: fence, Message: "step 2"}); err != nil {
		t.Fatal(err)
	}
	complete(t, bob, id, fence)
	n.deliverer(t, []string{"127.0.0.1"}, &leader)
	got := rc.waitFor(t, "COMPLETED after the restart", completed)
	all := eventIDs(got)
	if len(all) != 4 {
		t.Errorf("event ids %v: want the claim, two progress reports and the completion, each at least once", all)
	}
	if got[len(first)].id == eventIDs(first)[0] {
		t.Errorf("the new deliverer started over from the claim (%v): want it to resume at the cursor", got)
	}
}

// TestDelivererChecksTheAllowlist: a config the API took (its node
// allows 127.0.0.1) whose host:port the deliverer's node does not allow
// gets nothing, nor does it through an allowed host that redirects there
// (a redirect is a failed try), while the task's allowed config gets
// every update.
func TestDelivererChecksTheAllowlist(t *testing.T) {
	n := startWith(t, []string{"127.0.0.1"})
	ok, barred := newReceiver(t, 0), newReceiver(t, 0)
	var redirects atomic.Int32
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		redirects.Add(1)
		http.Redirect(w, r, barred.URL, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirect.Close)
	id := sendWithPush(t, n, &a2a.PushConfig{ID: "barred", URL: barred.URL})
	// Configs go in id order: "a-redirect" before "ok", so its tries are
	// over when ok has the last push.
	for _, c := range []api.PushConfig{{TaskID: id, ID: "ok", URL: ok.URL}, {TaskID: id, ID: "a-redirect", URL: redirect.URL}} {
		if _, err := client.NewClient(n.url, nil).WithToken(n.alice).SetPushConfig(t.Context(), api.PushConfigSetCommand{From: "alice", Config: c}); err != nil {
			t.Fatal(err)
		}
	}
	var leader atomic.Bool
	leader.Store(true)
	n.deliverer(t, []string{strings.TrimPrefix(ok.URL, "http://"), strings.TrimPrefix(redirect.URL, "http://")}, &leader)
	bob, fence := n.work(t, id)
	complete(t, bob, id, fence)
	ok.waitFor(t, "COMPLETED", completed)
	if got, tries := barred.pushes(); tries != 0 {
		t.Errorf("the barred receiver was called %d times (%v)", tries, got)
	}
	if redirects.Load() == 0 {
		t.Error("the redirecting config was never tried")
	}
}
