package transport

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/maos-project/maos/fsm"
)

// DefaultKeepAlive is how often an idle stream sends an SSE comment, so
// proxies and clients can tell a quiet stream from a dead one.
const DefaultKeepAlive = 15 * time.Second

// Stream event names. A "message" event's id is the message's seq (N) and
// its data the message JSON; a "task" event's id is N:task, N the index of
// the entry that made it, and its data fsm.TaskUpdate {"event","task"};
// "ready" (data {"seq":N}) is sent once, when the stream has sent every
// event stored when it opened.
const (
	EventMessage = "message"
	EventTask    = "task"
	EventReady   = "ready"
)

// The stream's ?tasks= values: task events interleaved with messages (the
// default), task events alone, or messages alone.
const (
	StreamTasksAll  = "all"
	StreamTasksOnly = "only"
	StreamTasksNone = "none"
)

// streamPage is how many messages (or task updates) one read of the state
// hands the stream.
const streamPage = 256

// streamPos is where a stream is: index is the last entry it passed, and
// taskDone whether it passed that entry's task events too (a message goes
// before its entry's task events).
type streamPos struct {
	index    uint64
	taskDone bool
}

// msgAfter and taskAfter are the reads' "after" for the position.
func (p streamPos) msgAfter() uint64 { return p.index }
func (p streamPos) taskAfter() uint64 {
	if p.taskDone || p.index == 0 {
		return p.index
	}
	return p.index - 1
}

// parseStreamPos reads a Last-Event-ID or ?after=: "N" (after N's
// message: N's task events are still to come) or "N:task" (after all of N).
func parseStreamPos(s string) (streamPos, error) {
	n, task := strings.CutSuffix(s, ":task")
	v, err := uintParam(n, "after (or Last-Event-ID)", 0, 1<<63)
	if err != nil {
		return streamPos{}, fmt.Errorf("%w (want N or N:task)", err)
	}
	return streamPos{index: v, taskDone: task}, nil
}

// stream serves GET /v1/stream?agent=A&channel=C&after=N&tasks=T as
// Server-Sent Events from this node's own state, pushed as the node
// applies entries (it waits on fsm.Changed, never polls). Messages: with
// agent, the agent's inbox; with channel, that channel; with both, the
// agent's inbox in that channel; with neither, every message. Task events
// (fsm.TaskUpdate), in entry order with the messages (an entry's message
// first): with agent, the tasks A created, holds or is of the queue of
// (taskFor); with channel, that channel's tasks. tasks=only sends task
// events alone, tasks=none messages alone. A reconnect sends
// Last-Event-ID (the last id it got), which wins over ?after=, so it
// resumes with no gap and no repeat: after N it sends N's task events,
// after N:task the next entry's. When one entry changed several tasks,
// only the last of its events carries the id, so a stream cut between
// them resumes with all of them again rather than losing the rest.
func (s *Server) stream(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	agent, channel, tasks := q.Get("agent"), q.Get("channel"), q.Get("tasks")
	for _, f := range []struct{ name, v string }{{"agent", agent}, {"channel", channel}} {
		if f.v != "" && !fsm.ValidName(f.v) {
			s.writeError(w, r, fsm.NameError(f.name, f.v))
			return
		}
	}
	switch tasks {
	case "":
		tasks = StreamTasksAll
	case StreamTasksAll, StreamTasksOnly, StreamTasksNone:
	default:
		s.writeError(w, r, fmt.Errorf("%w: tasks: %q is not %s, %s or %s", ErrBadRequest, tasks, StreamTasksAll, StreamTasksOnly, StreamTasksNone))
		return
	}
	afterText := q.Get("after")
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		afterText = id
	}
	pos, err := parseStreamPos(afterText)
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
		more, err := s.streamOnce(w, state, viewer, agent, channel, tasks, &pos)
		if err != nil {
			// The stream is already open: say why in a comment and end it;
			// the client reconnects with Last-Event-ID.
			fmt.Fprintf(w, ": error: %s\n\n", strings.ReplaceAll(err.Error(), "\n", " "))
			flusher.Flush()
			return
		}
		if more {
			flusher.Flush()
			continue
		}
		if !ready {
			fmt.Fprintf(w, "event: %s\ndata: {\"seq\":%d}\n\n", EventReady, pos.index)
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

// streamOnce writes the events of one read of the state after pos, in
// entry order, moves pos past what it passed, and reports whether more
// are ready. Messages and task updates are two reads, so neither goes past
// the applied index taken before them (an entry applied in between would
// otherwise show its task event without its message); and a read that
// stops short (a full page of messages or of task updates) bounds how far
// the other may go, so the order holds across pages. What is left out is
// the next call's: it was applied after the caller took Changed.
func (s *Server) streamOnce(w io.Writer, state Reader, viewer *fsm.Viewer, agent, channel, tasks string, pos *streamPos) (bool, error) {
	var (
		msgs       []*fsm.Message
		ups        []fsm.TaskUpdate
		msgMore    bool
		upMore     bool
		err        error
		bound      = state.AppliedIndex()
		agentEntry *fsm.Agent
	)
	if tasks != StreamTasksOnly {
		if msgs, msgMore, err = streamRead(state, agent, channel, pos.msgAfter()); err != nil {
			return false, err
		}
		if msgMore && len(msgs) > 0 {
			bound = min(bound, msgs[len(msgs)-1].Seq)
		}
	}
	if tasks != StreamTasksNone {
		page, err := state.TaskEvents(pos.taskAfter(), streamPage)
		if err != nil {
			return false, err
		}
		ups, upMore = page.Updates, page.HasMore
		if upMore && len(ups) > 0 {
			bound = min(bound, ups[len(ups)-1].Event.Seq)
		}
		if agent != "" && len(ups) > 0 {
			// The agent's role and capabilities, for its queues; nil if it
			// is not registered (it is then of no role or capability queue).
			if agentEntry, err = state.Agent(agent); err != nil && !errors.Is(err, fsm.ErrNotFound) {
				return false, err
			}
		}
	}
	i, j := 0, 0
	for {
		hasMsg := i < len(msgs) && msgs[i].Seq <= bound
		hasUp := j < len(ups) && ups[j].Event.Seq <= bound
		switch {
		case hasMsg && (!hasUp || msgs[i].Seq <= ups[j].Event.Seq):
			m := msgs[i]
			i++
			// A private message the reader may not read is passed over, not
			// sent: the position still moves past it, and a resume from the
			// last id sent passes over it again.
			*pos = streamPos{index: m.Seq}
			if !viewer.CanRead(m) {
				continue
			}
			data, err := json.Marshal(m)
			if err != nil {
				continue
			}
			fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", m.Seq, EventMessage, data)
		case hasUp:
			// Every task event of this entry, the last one sent carrying the id.
			index := ups[j].Event.Seq
			var group [][]byte
			for ; j < len(ups) && ups[j].Event.Seq == index; j++ {
				if !taskFor(&ups[j], agent, agentEntry, channel) {
					continue
				}
				if data, err := json.Marshal(ups[j]); err == nil {
					group = append(group, data)
				}
			}
			for k, data := range group {
				if k == len(group)-1 {
					fmt.Fprintf(w, "id: %d:task\n", index)
				}
				fmt.Fprintf(w, "event: %s\ndata: %s\n\n", EventTask, data)
			}
			*pos = streamPos{index: index, taskDone: true}
		default:
			return msgMore || upMore, nil
		}
	}
}

// taskFor reports whether a stream for agent (entry: its registration, or
// nil) and channel carries u: with agent, a task the agent created, holds,
// or is of the queue of (fsm.InQueue); with channel, one of that channel.
func taskFor(u *fsm.TaskUpdate, agent string, entry *fsm.Agent, channel string) bool {
	t := u.Task
	if channel != "" && t.Channel != channel {
		return false
	}
	return agent == "" || t.From == agent || t.ClaimedBy == agent || fsm.InQueue(agent, entry, t.To)
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
