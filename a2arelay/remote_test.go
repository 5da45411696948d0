package a2arelay_test

import (
	"context"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// remoteSecret is the bearer token the test's remote agent wants.
const remoteSecret = "remote-secret-0123456789"

// fakeRemote is an A2A agent served by the SDK's server (a2asrv) on
// loopback, its executor the test's: what it does depends on the first
// word of a new task's text —
//
//	done:  working, a text and a file artifact, completed "all done"
//	fail:  failed "remote broke"
//	ask:   input-required "which colour?"; the reply completes it with
//	       "colour " and the reply's text
//	block: working, then waits for release, then completed "released"
//	echo:  answers with a Message "echo: " and the text (no task)
//
// It counts the messages it was sent, and refuses a request without the
// bearer token (401).
type fakeRemote struct {
	URL string // the agent's base URL (its card under /.well-known/)

	mu       sync.Mutex
	messages []string // the text of each message executed, in order
	release  chan struct{}
	srv      *httptest.Server
}

func newFakeRemote(t *testing.T, streaming bool) *fakeRemote {
	t.Helper()
	f := &fakeRemote{release: make(chan struct{})}
	mux := http.NewServeMux()
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	f.URL = f.srv.URL + "/agent"
	card := &a2a.AgentCard{Name: "fake", Description: "the test's remote", Version: "1",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(f.URL, a2a.TransportProtocolJSONRPC)},
		Capabilities:        a2a.AgentCapabilities{Streaming: streaming},
		DefaultInputModes:   []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"}, Skills: []a2a.AgentSkill{}}
	mux.Handle("/agent/.well-known/agent-card.json", authorized(a2asrv.NewStaticAgentCardHandler(card)))
	mux.Handle("/agent", authorized(a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(f))))
	return f
}

func authorized(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+remoteSecret {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// sent is the text of the messages executed so far.
func (f *fakeRemote) sent() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.messages...)
}

// Release lets every blocked task complete.
func (f *fakeRemote) Release() { close(f.release) }

func textOf(m *a2a.Message) string {
	var b []string
	for _, p := range m.Parts {
		if s := p.Text(); s != "" {
			b = append(b, s)
		}
	}
	return strings.Join(b, "\n")
}

func (f *fakeRemote) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	text := textOf(ec.Message)
	f.mu.Lock()
	f.messages = append(f.messages, text)
	f.mu.Unlock()
	status := func(s a2a.TaskState, words string) a2a.Event {
		var m *a2a.Message
		if words != "" {
			m = a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(words))
		}
		return a2a.NewStatusUpdateEvent(ec, s, m)
	}
	return func(yield func(a2a.Event, error) bool) {
		if ec.StoredTask != nil { // the reply to "ask"
			yield(status(a2a.TaskStateCompleted, "colour "+text), nil)
			return
		}
		word, _, _ := strings.Cut(text, " ")
		if word == "echo" {
			yield(a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("echo: "+text)), nil)
			return
		}
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) || !yield(status(a2a.TaskStateWorking, "on it"), nil) {
			return
		}
		switch word {
		case "done":
			file := a2a.NewRawPart([]byte("file bytes"))
			file.Filename = "report.txt"
			if !yield(a2a.NewArtifactEvent(ec, a2a.NewTextPart("the text artifact"), file), nil) {
				return
			}
			yield(status(a2a.TaskStateCompleted, "all done"), nil)
		case "fail":
			yield(status(a2a.TaskStateFailed, "remote broke"), nil)
		case "ask":
			yield(status(a2a.TaskStateInputRequired, "which colour?"), nil)
		case "block":
			select {
			case <-f.release:
				yield(status(a2a.TaskStateCompleted, "released"), nil)
			case <-ctx.Done():
			}
		default:
			yield(status(a2a.TaskStateRejected, "unknown work"), nil)
		}
	}
}

func (f *fakeRemote) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}
