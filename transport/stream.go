package transport

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/fsm"
)

// DefaultKeepAlive is how often an idle stream sends an SSE comment, so
// proxies and clients can tell a quiet stream from a dead one.
const DefaultKeepAlive = 15 * time.Second

// StreamKinds are the kinds of event a stream carries, what ?events=
// lists: all of them by default.
var StreamKinds = []string{api.EventMessage, api.EventTask, api.EventApproval}

// streamPage is how many messages (or object updates) one read of the
// state hands the stream.
const streamPage = 256

// streamPos is where a stream is: index is the last entry it passed, and
// objectsDone whether it passed that entry's object events too (a message
// goes before its entry's object events).
type streamPos struct {
	index       uint64
	objectsDone bool
}

// msgAfter and objectsAfter are the reads' "after" for the position.
func (p streamPos) msgAfter() uint64 { return p.index }
func (p streamPos) objectsAfter() uint64 {
	if p.objectsDone || p.index == 0 {
		return p.index
	}
	return p.index - 1
}

// parseStreamPos reads a Last-Event-ID or ?after=: "N" (after N's
// message: N's object events are still to come) or "N:task" /
// "N:approval" (after all of N).
func parseStreamPos(s string) (streamPos, error) {
	n, kind, objects := strings.Cut(s, ":")
	if objects && kind != api.EventTask && kind != api.EventApproval {
		return streamPos{}, fmt.Errorf("%w: after (or Last-Event-ID): %q is not N, N:task or N:approval", api.ErrBadRequest, s)
	}
	v, err := uintParam(n, "after (or Last-Event-ID)", 0, 1<<63)
	if err != nil {
		return streamPos{}, fmt.Errorf("%w (want N, N:task or N:approval)", err)
	}
	return streamPos{index: v, objectsDone: objects}, nil
}

// streamFilter is what a stream carries: the kinds of event, and with
// agent or channel set only those of that agent or channel.
type streamFilter struct {
	agent, channel string
	kinds          map[string]bool
}

// objects reports whether the filter wants any object event.
func (f streamFilter) objects() bool { return f.kinds[api.EventTask] || f.kinds[api.EventApproval] }

// streamKinds reads ?events= (a comma-separated list of StreamKinds; all
// when absent) or the older ?tasks= (all, only, none); not both.
func streamKinds(q url.Values) (map[string]bool, error) {
	events, tasks := q.Get("events"), q.Get("tasks")
	kinds := map[string]bool{}
	switch {
	case events != "" && tasks != "":
		return nil, fmt.Errorf("%w: events and tasks: give one (tasks= is the older form of events=)", api.ErrBadRequest)
	case events != "":
		for _, k := range strings.Split(events, ",") {
			k = strings.TrimSpace(k)
			if !slices.Contains(StreamKinds, k) {
				return nil, fmt.Errorf("%w: events: %q is not one of %s", api.ErrBadRequest, k, strings.Join(StreamKinds, ", "))
			}
			kinds[k] = true
		}
	case tasks == "":
		for _, k := range StreamKinds {
			kinds[k] = true
		}
	case tasks == api.StreamTasksAll:
		kinds[api.EventMessage], kinds[api.EventTask] = true, true
	case tasks == api.StreamTasksOnly:
		kinds[api.EventTask] = true
	case tasks == api.StreamTasksNone:
		kinds[api.EventMessage] = true
	default:
		return nil, fmt.Errorf("%w: tasks: %q is not %s, %s or %s", api.ErrBadRequest, tasks, api.StreamTasksAll, api.StreamTasksOnly, api.StreamTasksNone)
	}
	return kinds, nil
}

// stream serves GET /v1/stream?agent=A&channel=C&after=N&events=K as
// Server-Sent Events from this node's own state, pushed as the node
// applies entries (it waits on fsm.Changed, never polls). Messages: with
// agent, the agent's inbox; with channel, that channel; with both, the
// agent's inbox in that channel; with neither, every message. Object
// events, in entry order with the messages (an entry's message first):
// task updates (api.TaskUpdate) and approval updates
// (api.ApprovalUpdate); with agent, the tasks A created, holds or is of
// the queue of (taskFor) and the approvals A requested or may decide
// (approvalFor); with channel, that channel's. events lists the kinds to
// send (message, task, approval; all by default; the older tasks=only is
// tasks alone, tasks=none messages alone, tasks=all both). A reconnect
// sends Last-Event-ID (the last id it got), which wins over ?after=, so
// it resumes with no gap and no repeat: after N it sends N's object
// events, after N:task (or N:approval) the next entry's. When one entry
// changed several objects, only the last of its events carries the id, so
// a stream cut between them resumes with all of them again rather than
// losing the rest.
func (s *Server) stream(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := streamFilter{agent: q.Get("agent"), channel: q.Get("channel")}
	for _, p := range []struct{ name, v string }{{"agent", f.agent}, {"channel", f.channel}} {
		if p.v != "" && !api.ValidName(p.v) {
			s.writeError(w, r, api.NameError(p.name, p.v))
			return
		}
	}
	kinds, err := streamKinds(q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	f.kinds = kinds
	afterText := q.Get("after")
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		afterText = id
	}
	pos, err := parseStreamPos(afterText)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	release, ok := s.admitStream(w, r, f.agent)
	if !ok {
		return
	}
	defer release()
	s.metrics.StreamOpened()
	defer s.metrics.StreamClosed()
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
		more, err := s.streamOnce(w, state, viewer, f, &pos)
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
			fmt.Fprintf(w, "event: %s\ndata: {\"seq\":%d}\n\n", api.EventReady, pos.index)
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

// streamState is what a stream reads: messages, the task and approval
// events, the registry entry of the agent it filters for, and the applied
// index it must not read past.
type streamState interface {
	MailboxReader
	objectEvents
	Agent(id string) (*api.Agent, error)
	AppliedWatcher
}

// objectEvents are the task and approval events a stream carries.
type objectEvents interface {
	TaskEvents(after uint64, limit int) (api.TaskUpdatePage, error)
	ApprovalEvents(after uint64, limit int) (api.ApprovalUpdatePage, error)
}

// objectUpdate is one object event: what entry index did to a task or an
// approval (exactly one set), and the kind of event it is sent as.
type objectUpdate struct {
	index    uint64
	kind     string
	task     *api.TaskUpdate
	approval *api.ApprovalUpdate
}

// streamOnce writes the events of one read of the state after pos, in
// entry order, moves pos past what it passed, and reports whether more
// are ready. Messages and object updates are two reads, so neither goes
// past the applied index taken before them (an entry applied in between
// would otherwise show its object event without its message); and a read
// that stops short (a full page of messages or of object updates) bounds
// how far the other may go, so the order holds across pages. What is left
// out is the next call's: it was applied after the caller took Changed.
func (s *Server) streamOnce(w io.Writer, state streamState, viewer *api.Viewer, f streamFilter, pos *streamPos) (bool, error) {
	var (
		msgs       []*api.Message
		ups        []objectUpdate
		msgMore    bool
		upMore     bool
		err        error
		bound      = state.AppliedIndex()
		agentEntry *api.Agent
	)
	if f.kinds[api.EventMessage] {
		if msgs, msgMore, err = streamRead(state, f.agent, f.channel, pos.msgAfter()); err != nil {
			return false, err
		}
		if msgMore && len(msgs) > 0 {
			bound = min(bound, msgs[len(msgs)-1].Seq)
		}
	}
	if f.objects() {
		if ups, upMore, err = readObjects(state, pos.objectsAfter(), f.kinds); err != nil {
			return false, err
		}
		if upMore && len(ups) > 0 {
			bound = min(bound, ups[len(ups)-1].index)
		}
		if f.agent != "" && len(ups) > 0 {
			// The agent's role and capabilities, for its queues and the
			// approvals its role may decide; nil if it is not registered.
			if agentEntry, err = state.Agent(f.agent); err != nil && !errors.Is(err, api.ErrNotFound) {
				return false, err
			}
		}
	}
	i, j := 0, 0
	for {
		hasMsg := i < len(msgs) && msgs[i].Seq <= bound
		hasUp := j < len(ups) && ups[j].index <= bound
		switch {
		case hasMsg && (!hasUp || msgs[i].Seq <= ups[j].index):
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
			fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", m.Seq, api.EventMessage, data)
		case hasUp:
			var index uint64
			j, index = writeObjectEvents(w, f, agentEntry, ups, j)
			*pos = streamPos{index: index, objectsDone: true}
		default:
			return msgMore || upMore, nil
		}
	}
}

// writeObjectEvents writes every object event of the entry of ups[j] that
// f carries to a reader who is agent (nil: not registered), the last one
// sent carrying the id, and returns the index past them and the entry's
// index.
func writeObjectEvents(w io.Writer, f streamFilter, agent *api.Agent, ups []objectUpdate, j int) (int, uint64) {
	index := ups[j].index
	type event struct {
		kind string
		data []byte
	}
	var group []event
	for ; j < len(ups) && ups[j].index == index; j++ {
		u := &ups[j]
		if !f.carries(u, agent) {
			continue
		}
		var data []byte
		var err error
		if u.task != nil {
			data, err = json.Marshal(u.task)
		} else {
			data, err = json.Marshal(u.approval)
		}
		if err == nil {
			group = append(group, event{u.kind, data})
		}
	}
	for k, ev := range group {
		if k == len(group)-1 {
			fmt.Fprintf(w, "id: %d:%s\n", index, ev.kind)
		}
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.kind, ev.data)
	}
	return j, index
}

// carries reports whether the filter's agent (entry: its registration, or
// nil) and channel take u: a task the agent created, holds, or is of the
// queue of (fsm.InQueue); an approval the agent requested or may decide
// (listed by id or by its role); with channel, one of that channel.
func (f streamFilter) carries(u *objectUpdate, entry *api.Agent) bool {
	if u.task != nil {
		t := u.task.Task
		if f.channel != "" && t.Channel != f.channel {
			return false
		}
		return f.agent == "" || t.From == f.agent || t.ClaimedBy == f.agent || fsm.InQueue(f.agent, entry, t.To)
	}
	a := u.approval.Approval
	if f.channel != "" && a.Channel != f.channel {
		return false
	}
	return f.agent == "" || a.From == f.agent || slices.ContainsFunc(a.Approvers, func(x string) bool { return fsm.InQueue(f.agent, entry, x) })
}

// streamRead returns the next messages after seq for the stream's filter
// and whether more are ready. An agent with no inbox yet has nothing to
// send (its inbox starts with its first message).
func streamRead(state MailboxReader, agent, channel string, after uint64) ([]*api.Message, bool, error) {
	if agent == "" {
		var page api.Page
		var err error
		if channel != "" {
			page, err = state.ChannelPage(channel, after, streamPage)
		} else {
			page, err = state.MessagesAfter(after, streamPage)
		}
		return page.Messages, page.HasMore, err
	}
	for {
		page, err := state.Inbox(agent, api.InboxQuery{After: after, Limit: streamPage})
		if errors.Is(err, api.ErrNotFound) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		var out []*api.Message
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

// readObjects is the next page of object updates after index after, in
// entry order (whole entries; an entry's task updates before its approval
// updates), and whether more are ready. Each kind is read a page at a
// time; where one stops short the merge stops too, at that page's last
// entry (which it holds whole), so neither kind runs ahead of the other.
// A kind the stream does not carry is not read.
func readObjects(state objectEvents, after uint64, kinds map[string]bool) ([]objectUpdate, bool, error) {
	var (
		tasks     api.TaskUpdatePage
		approvals api.ApprovalUpdatePage
		err       error
	)
	if kinds[api.EventTask] {
		if tasks, err = state.TaskEvents(after, streamPage); err != nil {
			return nil, false, err
		}
	}
	if kinds[api.EventApproval] {
		if approvals, err = state.ApprovalEvents(after, streamPage); err != nil {
			return nil, false, err
		}
	}
	bound := uint64(math.MaxUint64)
	if n := len(tasks.Updates); tasks.HasMore && n > 0 {
		bound = tasks.Updates[n-1].Event.Seq
	}
	if n := len(approvals.Updates); approvals.HasMore && n > 0 {
		bound = min(bound, approvals.Updates[n-1].Event.Seq)
	}
	out := make([]objectUpdate, 0, len(tasks.Updates)+len(approvals.Updates))
	i, j := 0, 0
	for {
		hasTask := i < len(tasks.Updates) && tasks.Updates[i].Event.Seq <= bound
		hasAppr := j < len(approvals.Updates) && approvals.Updates[j].Event.Seq <= bound
		switch {
		case hasTask && (!hasAppr || tasks.Updates[i].Event.Seq <= approvals.Updates[j].Event.Seq):
			u := &tasks.Updates[i]
			out = append(out, objectUpdate{index: u.Event.Seq, kind: api.EventTask, task: u})
			i++
		case hasAppr:
			u := &approvals.Updates[j]
			out = append(out, objectUpdate{index: u.Event.Seq, kind: api.EventApproval, approval: u})
			j++
		default:
			return out, tasks.HasMore || approvals.HasMore, nil
		}
	}
}
