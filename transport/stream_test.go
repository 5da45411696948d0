package transport_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

// streamState feeds the fake's state machine by hand.
type streamState struct {
	t    *testing.T
	fake *transporttest.Service
	n    int
}

func newStreamState(t *testing.T, fake *transporttest.Service) *streamState {
	return &streamState{t: t, fake: fake}
}

func (s *streamState) send(from, channel string, to ...string) uint64 {
	s.t.Helper()
	s.n++
	m := api.Message{ID: fmt.Sprintf("msg-%d", s.n), From: from, To: to, Channel: channel, Content: api.Content{Text: "hi"}}
	m.Normalize(time.Now())
	res, err := s.fake.ApplyCommand(api.OpSend, api.SendCommand{Message: m})
	r, ok := res.(*fsm.SendResult)
	if err != nil || !ok {
		s.t.Fatalf("send: %v, %v", res, err)
	}
	return r.Seq
}

// collect streams q and returns the seqs of the messages it carried: the
// backlog, and then (when n > 0) n more pushed after the ready event, for
// which after is called once the stream caught up.
func collect(t *testing.T, c *client.Client, q api.StreamQuery, after func(), n int) []uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var seqs []uint64
	caughtUp, live := false, 0
	errDone := errors.New("done")
	err := c.Stream(ctx, q, func(ev api.StreamEvent) error {
		if ev.Ready {
			if n == 0 {
				return errDone
			}
			caughtUp = true
			if after != nil {
				after()
			}
			return nil
		}
		if ev.Message == nil || ev.Message.Seq != ev.Seq {
			t.Errorf("event %d carries message %+v", ev.Seq, ev.Message)
		}
		seqs = append(seqs, ev.Seq)
		if caughtUp {
			if live++; live == n {
				return errDone
			}
		}
		return nil
	})
	if !errors.Is(err, errDone) {
		t.Fatalf("stream ended with %v after %v", err, seqs)
	}
	return seqs
}

func TestStreamBacklogLiveAndResume(t *testing.T) {
	fake := transporttest.New(t)
	st := newStreamState(t, fake)
	srv := serve(t, fake, transport.ServerOptions{})
	c := client.NewClient(srv.URL, nil)
	st.send("codex", "ops", "claude")
	st.send("claude", "ops", "codex")
	st.send("codex", "dev", "claude")

	// Backlog of everything, then a message applied after the stream
	// caught up is pushed.
	got := collect(t, c, api.StreamQuery{}, func() { st.send("codex", "ops", "claude") }, 1)
	if fmt.Sprint(got) != "[1 2 3 4]" {
		t.Fatalf("stream = %v, want [1 2 3 4]", got)
	}
	// Resume after seq 2 (Last-Event-ID): no gap, no repeat.
	if got := collect(t, c, api.StreamQuery{After: 2}, nil, 0); fmt.Sprint(got) != "[3 4]" {
		t.Fatalf("resumed stream = %v, want [3 4]", got)
	}
	// Filters: one channel; one agent's inbox; both.
	if got := collect(t, c, api.StreamQuery{Channel: "ops"}, nil, 0); fmt.Sprint(got) != "[1 2 4]" {
		t.Fatalf("channel ops = %v", got)
	}
	if got := collect(t, c, api.StreamQuery{Agent: "claude"}, nil, 0); fmt.Sprint(got) != "[1 3 4]" {
		t.Fatalf("claude's inbox = %v", got)
	}
	if got := collect(t, c, api.StreamQuery{Agent: "claude", Channel: "dev"}, nil, 0); fmt.Sprint(got) != "[3]" {
		t.Fatalf("claude's inbox in dev = %v", got)
	}
	// An agent with no inbox yet: an empty backlog, then its first message.
	got = collect(t, c, api.StreamQuery{Agent: "gemini"}, func() { st.send("codex", "ops", "gemini") }, 1)
	if fmt.Sprint(got) != "[5]" {
		t.Fatalf("new agent's stream = %v, want [5]", got)
	}
}

func TestStreamKeepAliveAndBadInput(t *testing.T) {
	fake := transporttest.New(t)
	newStreamState(t, fake)
	srv := serve(t, fake, transport.ServerOptions{KeepAlive: 20 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v1/stream", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	buf := make([]byte, 0, 256)
	for !strings.Contains(string(buf), ": keep-alive") {
		chunk := make([]byte, 64)
		n, err := resp.Body.Read(chunk)
		if err != nil && err != io.EOF {
			t.Fatalf("read: %v (got %q)", err, buf)
		}
		buf = append(buf, chunk[:n]...)
	}
	if !strings.HasPrefix(string(buf), "event: ready\ndata: {\"seq\":0}") {
		t.Fatalf("stream began %q, want the ready event first", buf)
	}

	for _, tt := range []struct{ query, header, want string }{
		{"?agent=Bad%20Agent", "", "agent"},
		{"?channel=..", "", "channel"},
		{"?after=abc", "", "after"},
		{"", "nonsense", "Last-Event-ID"},
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/stream"+tt.query, nil)
		if tt.header != "" {
			req.Header.Set("Last-Event-ID", tt.header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), tt.want) {
			t.Errorf("stream%s (Last-Event-ID %q) = %d %s, want 400 naming %s", tt.query, tt.header, resp.StatusCode, body, tt.want)
		}
	}
}
