package system

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/testing/harness"
)

// relayRemote is an A2A agent served by the SDK's server in the test's
// process, on loopback: each task it is sent works until the test
// releases it, then completes with "reviewed: " and the task's text. It
// counts the messages it executes and the reads of a task (GetTask,
// SubscribeToTask) it is asked, and wants a bearer token.
type relayRemote struct {
	url, token string
	release    chan struct{}

	mu       sync.Mutex
	messages []string
	reads    int
}

func newRelayRemote(t *testing.T, token string) *relayRemote {
	r := &relayRemote{token: token, release: make(chan struct{})}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	r.url = srv.URL + "/reviewer"
	card := &a2a.AgentCard{Name: "reviewer", Description: "the system test's remote reviewer", Version: "1",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(r.url, a2a.TransportProtocolJSONRPC)},
		Capabilities:        a2a.AgentCapabilities{Streaming: true},
		DefaultInputModes:   []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"}, Skills: []a2a.AgentSkill{}}
	mux.Handle("/reviewer/.well-known/agent-card.json", r.guard(a2asrv.NewStaticAgentCardHandler(card)))
	mux.Handle("/reviewer", r.guard(a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(r))))
	return r
}

// guard refuses a request without the token and counts task reads.
func (r *relayRemote) guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Authorization") != "Bearer "+r.token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if req.Body != nil {
			body, _ := io.ReadAll(req.Body)
			req.Body = io.NopCloser(bytes.NewReader(body))
			var call struct {
				Method string `json:"method"`
			}
			if json.Unmarshal(body, &call) == nil && (strings.Contains(call.Method, "GetTask") || strings.Contains(call.Method, "SubscribeToTask")) {
				r.mu.Lock()
				r.reads++
				r.mu.Unlock()
			}
		}
		h.ServeHTTP(w, req)
	})
}

func (r *relayRemote) counts() (messages []string, reads int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.messages...), r.reads
}

func (r *relayRemote) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	var text []string
	for _, p := range ec.Message.Parts {
		if s := p.Text(); s != "" {
			text = append(text, s)
		}
	}
	r.mu.Lock()
	r.messages = append(r.messages, strings.Join(text, "\n"))
	r.mu.Unlock()
	words := func(s string) *a2a.Message {
		return a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(s))
	}
	return func(yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) ||
			!yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, words("reading the diff")), nil) {
			return
		}
		select {
		case <-r.release:
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, words("reviewed: "+strings.Join(text, " "))), nil)
		case <-ctx.Done():
		}
	}
}

func (r *relayRemote) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// TestA2ARelayFailover: a maos task to an agent registered with --a2a (a
// remote A2A agent served by the test, on loopback) is relayed by the
// node holding the agent's lease; that node is SIGKILLed while the
// remote works; another node takes the lease and resumes the remote task
// (by the id the first relay recorded in the task's progress) rather
// than send it again; once released, the maos task completes once, with
// the remote's words, and the remote did the work once. The cluster runs
// with --auth; the credential is the remote's bearer token, which no read
// of the agent shows.
func TestA2ARelayFailover(t *testing.T) {
	const agent, secret = "reviewer-ext", "remote-bearer-0123456789"
	remote := newRelayRemote(t, secret)
	c := harness.NewCluster(t, harness.Options{Maosd: maosdBin, Nodes: 3, AuthOnly: true})
	ctx := context.Background()
	admin := c.Node("n1").Client()
	a, err := admin.RegisterAgent(ctx, api.RegisterAgentCommand{ID: agent, Role: "reviewer", A2A: &api.A2ARemote{URL: remote.url, Credential: secret}})
	harness.NoErr(t, err)
	if a.A2A == nil || !a.A2A.Credential {
		t.Fatalf("registered %+v, want an A2A remote with a credential", a)
	}
	_, err = admin.CreateTask(ctx, api.TaskCreateCommand{ID: "task-review", From: "lead", To: agent, Title: "review retry.go",
		Description: "look for races"})
	harness.NoErr(t, err)

	// The remote works on it, and a node relays it.
	var holder *harness.Node
	harness.NoErr(t, harness.WaitFor(watcherWait, "the remote works on the task and a node relays it", func() error {
		sent, _ := remote.counts()
		task, err := admin.Task(ctx, "task-review")
		if err != nil {
			return err
		}
		l, err := agentLeaseOn(admin, agent)
		if err != nil {
			return err
		}
		if len(sent) != 1 || !strings.HasPrefix(task.ProgressMessage, "a2a task ") || !strings.Contains(task.ProgressMessage, "working") || l.Expired {
			return fmt.Errorf("remote got %d messages, task progress %q, lease %+v", len(sent), task.ProgressMessage, l)
		}
		holder = c.Node(l.Holder.Node)
		return nil
	}))
	first, err := agentLeaseOn(admin, agent)
	harness.NoErr(t, err)
	_, readsBefore := remote.counts()
	t.Logf("%s relays %s; killing it", holder.ID, agent)
	harness.NoErr(t, holder.Kill())

	// Another node takes the lease and resumes the remote task.
	var live *harness.Node
	for _, n := range c.Nodes() {
		if n != holder {
			live = n
		}
	}
	cl := live.Client()
	harness.NoErr(t, harness.WaitFor(watcherWait, "another node takes the lease and reads the remote task", func() error {
		l, err := agentLeaseOn(cl, agent)
		if err != nil {
			return err
		}
		if _, reads := remote.counts(); l.Holder.Node == holder.ID || l.Expired || l.Fence <= first.Fence || reads == readsBefore {
			return fmt.Errorf("lease %+v, remote reads %d (before the kill %d)", l, reads, readsBefore)
		}
		return nil
	}))
	close(remote.release)

	var task *api.Task
	harness.NoErr(t, harness.WaitFor(watcherWait, "the task completes", func() error {
		rctx, cancel := context.WithTimeout(ctx, readTimeout)
		defer cancel()
		task, err = cl.Task(rctx, "task-review")
		if err != nil {
			return err
		}
		if task.State != api.TaskSucceeded && task.State != api.TaskFailed {
			return fmt.Errorf("task %s: %s", task.ID, task.ProgressMessage)
		}
		return nil
	}))
	if task.State != api.TaskSucceeded || task.Completion.Result != "reviewed: review retry.go\n\nlook for races" {
		t.Errorf("task %s, completion %+v; want success with the remote's words", task.State, task.Completion)
	}
	completions := 0
	for _, e := range task.History {
		if e.Event == "completed" {
			completions++
		}
	}
	if completions != 1 {
		t.Errorf("%d completion events in the history %+v, want 1", completions, task.History)
	}
	if sent, _ := remote.counts(); len(sent) != 1 {
		t.Errorf("the remote was sent the work %d times (%q), want once: the new relay resumes", len(sent), sent)
	}
	got, err := cl.Agent(ctx, agent, api.Strong)
	harness.NoErr(t, err)
	if raw, _ := json.Marshal(got); strings.Contains(string(raw), secret) || got.A2A == nil || got.A2A.URL != remote.url {
		t.Errorf("agent read %s: want the URL, never the credential", raw)
	}
}
