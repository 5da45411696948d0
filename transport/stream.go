package transport

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/maos-project/maos/fsm"
)

// DefaultKeepAlive is how often an idle stream sends an SSE comment, so
// proxies and clients can tell a quiet stream from a dead one.
const DefaultKeepAlive = 15 * time.Second

// Stream event names. A "message" event's id is the message's seq and its
// data the message JSON; "ready" (data {"seq":N}) is sent once, when the
// stream has sent every message stored when it opened.
const (
	EventMessage = "message"
	EventReady   = "ready"
)

// streamPage is how many messages one read of the state hands the stream.
const streamPage = 256

// stream serves GET /v1/stream?agent=A&channel=C&after=SEQ as Server-Sent
// Events from this node's own state, pushed as the node applies entries
// (it waits on fsm.Changed, never polls). With agent, the agent's inbox;
// with channel, that channel; with both, the agent's inbox in that channel;
// with neither, every message. A reconnect sends Last-Event-ID (the last
// seq it got), which wins over ?after=, so it resumes with no gap and no
// repeat.
func (s *Server) stream(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	agent, channel := q.Get("agent"), q.Get("channel")
	for _, f := range []struct{ name, v string }{{"agent", agent}, {"channel", channel}} {
		if f.v != "" && !fsm.ValidName(f.v) {
			s.writeError(w, r, fsm.NameError(f.name, f.v))
			return
		}
	}
	afterText := q.Get("after")
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		afterText = id
	}
	after, err := uintParam(afterText, "after (or Last-Event-ID)", 0, 1<<63)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	release, ok := s.admitStream(w, r, agent)
	if !ok {
		return
	}
	defer release()
	flusher, ok := w.(http.Flusher)
	if !ok {
		s.writeError(w, r, errors.New("streaming is not supported by this connection"))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()

	keepAlive := time.NewTicker(s.opts.KeepAlive)
	defer keepAlive.Stop()
	viewer := viewerFrom(r.Context())
	ready := false
	for {
		state := s.state
		changed := state.Changed() // before reading, so nothing applied in between is missed
		msgs, more, err := streamRead(state, agent, channel, after)
		if err != nil {
			// The stream is already open: say why in a comment and end it;
			// the client reconnects with Last-Event-ID.
			fmt.Fprintf(w, ": error: %s\n\n", strings.ReplaceAll(err.Error(), "\n", " "))
			flusher.Flush()
			return
		}
		for _, m := range msgs {
			// A private message the reader may not read is passed over, not
			// sent: after still moves past it, and a resume from the last id
			// sent passes over it again.
			if !viewer.CanRead(m) {
				after = m.Seq
				continue
			}
			data, err := json.Marshal(m)
			if err != nil {
				continue
			}
			fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", m.Seq, EventMessage, data)
			after = m.Seq
		}
		if more {
			flusher.Flush()
			continue
		}
		if !ready {
			fmt.Fprintf(w, "event: %s\ndata: {\"seq\":%d}\n\n", EventReady, after)
			ready = true
		}
		flusher.Flush()
		select {
		case <-changed:
		case <-keepAlive.C:
			fmt.Fprint(w, ": keep-alive\n\n")
			flusher.Flush()
		case <-r.Context().Done():
			return
		}
	}
}

// streamRead returns the next messages after seq for the stream's filter
// and whether more are ready. An agent with no inbox yet has nothing to
// send (its inbox starts with its first message).
func streamRead(state Reader, agent, channel string, after uint64) ([]*fsm.Message, bool, error) {
	if agent == "" {
		var page fsm.Page
		var err error
		if channel != "" {
			page, err = state.ChannelPage(channel, after, streamPage)
		} else {
			page, err = state.MessagesAfter(after, streamPage)
		}
		return page.Messages, page.HasMore, err
	}
	for {
		page, err := state.Inbox(agent, fsm.InboxQuery{After: after, Limit: streamPage})
		if errors.Is(err, fsm.ErrNotFound) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		var out []*fsm.Message
		for i := range page.Messages {
			if channel == "" || page.Messages[i].Channel == channel {
				m := page.Messages[i].Message
				out = append(out, &m)
			}
		}
		// A page of only other channels' entries: read on past it.
		if len(out) > 0 || !page.HasMore || page.NextAfter <= after {
			return out, page.HasMore, nil
		}
		after = page.NextAfter
	}
}
