package system

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/maos-project/maos/a2ahost"
	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/testing/harness"
)

// pushToken is the A2A-Notification-Token of the suite's push configs.
const pushToken = "push-tok-0123"

// pushReceiver is the test's push notification endpoint, on loopback
// (the nodes run with --a2a-push-allow 127.0.0.1): it records every push
// it takes, by task, repeats included.
type pushReceiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got map[string][]got // by task id
	bad []string         // pushes that did not carry the token or parse
}

func newPushReceiver(t *testing.T) *pushReceiver {
	p := &pushReceiver{got: map[string][]got{}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *pushReceiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	p.mu.Lock()
	defer p.mu.Unlock()
	var sr a2a.StreamResponse
	if err := json.Unmarshal(body, &sr); err != nil || r.Header.Get("A2A-Notification-Token") != pushToken {
		p.bad = append(p.bad, fmt.Sprintf("%v token %q: %s", err, r.Header.Get("A2A-Notification-Token"), body))
		return // 200 all the same: a retry would not fix it
	}
	g := gotOf(sr.Event)
	task := ""
	switch e := sr.Event.(type) {
	case *a2a.TaskStatusUpdateEvent:
		task = string(e.TaskID)
	case *a2a.TaskArtifactUpdateEvent:
		task = string(e.TaskID)
	}
	p.got[task] = append(p.got[task], g)
}

// config is a push config to the receiver.
func (p *pushReceiver) config() *a2a.PushConfig {
	return &a2a.PushConfig{URL: p.srv.URL + "/push", Token: pushToken}
}

// of is what the receiver took of task id so far, and its bad pushes.
func (p *pushReceiver) of(id string) ([]got, []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.got[id]), slices.Clone(p.bad)
}

// waitFinal waits (a2aWait) until task id's final status was pushed.
func (p *pushReceiver) waitFinal(t *testing.T, id string) []got {
	t.Helper()
	var evs []got
	harness.NoErr(t, harness.WaitFor(a2aWait, "the final push of "+id, func() error {
		var bad []string
		evs, bad = p.of(id)
		if len(bad) > 0 {
			t.Fatalf("bad pushes: %v", bad)
		}
		if !slices.ContainsFunc(evs, func(g got) bool { return g.kind == "status" && g.state.Terminal() }) {
			return fmt.Errorf("pushed so far: %v", evs)
		}
		return nil
	}))
	return evs
}

// waitVersion3 waits until the cluster runs state version 3 (the push
// ops need it; the leader raises it once every node reports this build).
func (s *a2aSuite) waitVersion3(t *testing.T) {
	t.Helper()
	harness.NoErr(t, harness.WaitFor(a2aWait, "cluster state version 3", func() error {
		st, err := s.c.Node("n1").Client().Status(t.Context())
		if err == nil && st.ClusterVersion < 3 {
			err = fmt.Errorf("cluster version %d", st.ClusterVersion)
		}
		return err
	}))
}

// A task sent with a push config (lead's plain token, through n3) is
// pushed by the leader to the receiver: WORKING with the stub's words,
// the result artifact, COMPLETED, each naming its entry; the card says
// pushNotifications.
func (s *a2aSuite) testPush(t *testing.T) {
	s.waitVersion3(t)
	s = &a2aSuite{c: s.c, token: s.agentToken, agentToken: s.agentToken, push: s.push}
	n3 := s.c.Node("n3")
	cl := s.client(t, n3, "a2a-quick")
	res, err := cl.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("Push me the answer")),
		Config: &a2a.SendMessageConfig{ReturnImmediately: true, PushConfig: s.push.config()}})
	harness.NoErr(t, err)
	task := res.(*a2a.Task)
	if e, ok := task.Metadata[a2ahost.MetaPushError]; ok {
		t.Fatalf("the push config was refused: %v", e)
	}
	evs := s.push.waitFinal(t, string(task.ID))
	t.Logf("pushed: %v", evs)
	var seq []string
	for _, g := range evs {
		if indexOfID(g.id) == 0 {
			t.Errorf("push %v names no entry (%s)", g, a2ahost.MetaEventID)
		}
		if len(seq) == 0 || seq[len(seq)-1] != g.kind+" "+string(g.state) {
			seq = append(seq, g.kind+" "+string(g.state))
		}
	}
	want := []string{"status " + string(a2a.TaskStateWorking), "artifact ", "status " + string(a2a.TaskStateCompleted)}
	if !slices.Equal(seq, want) || !slices.ContainsFunc(evs, func(g got) bool { return strings.HasPrefix(g.words, "step ") }) {
		t.Errorf("pushes %v: want WORKING (with the stub's steps), the artifact, COMPLETED", evs)
	}
}

// checkPushed checks that every update the client saw of task id after
// its push config's entry was pushed too (repeats allowed: dropped by
// event id), across the failover's kill of the leader.
func (s *a2aSuite) checkPushed(t *testing.T, id string, seen []got) {
	t.Helper()
	evs := s.push.waitFinal(t, id)
	page, err := s.c.Node("n3").Client().PushConfigs(t.Context(), id, api.Strong)
	harness.NoErr(t, err)
	if len(page.Configs) != 1 {
		t.Fatalf("push configs of %s: %+v", id, page.Configs)
	}
	pushed := map[string]bool{}
	for _, g := range evs {
		pushed[g.kind+" "+g.id] = true
	}
	for _, g := range seen {
		if g.kind != "task" && indexOfID(g.id) > page.Configs[0].Index && !pushed[g.kind+" "+g.id] {
			t.Errorf("the client saw %v, never pushed (pushed: %v)", g, evs)
		}
	}
	t.Logf("pushed through the failover: %v", evs)
}
