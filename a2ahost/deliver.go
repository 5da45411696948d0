package a2ahost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"
	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
)

// Deliverer POSTs the updates of tasks with push configs to their URLs:
// at least once, by one node at a time, the Raft leader (its leadership is
// the lease: IsLeader). It follows the node's task events (GET
// /v1/stream?events=task, the store SubscribeToTask reads) after the
// replicated cursor (GET /v1/push/cursor), maps each task's updates to
// A2A events as a stream does (follower.emit: a status update when the
// state or the status words change, the result artifact before the final
// status), and sends each, as a StreamResponse, to every config of the
// task set by an earlier entry, as the a2a-go SDK's push sender does
// (Authorization from the config's authentication, A2A-Notification-Token
// its token) but following no redirect (httpSender). Every event names its entry (MetaEventID): a receiver drops
// a repeat by it. Each try failing is retried with exponential backoff
// (Retry); after the budget the push is logged and skipped, and the
// config gets one try per later push until one succeeds, so a dead URL
// cannot hold the others for long. The cursor is written after
// deliveries, batched (at most one entry each CursorEvery, only when it
// moved); a new leader resumes there, so a push may come twice, and none
// is lost while its retries last.
type Deliverer struct {
	// Client is the node's own API with an admin token (the configs'
	// credentials and the cursor are admin reads).
	Client *client.Client
	// Allow is the operator's allowlist (maosd --a2a-push-allow), checked
	// again at each push: a URL whose host is not on it is skipped.
	Allow []string
	// IsLeader reports whether this node is the Raft leader.
	IsLeader func() bool
	// Sender sends one push; nil: httpSender (10 s a try, no redirects).
	Sender push.Sender
	// Retry bounds the tries of one push; zero: DefaultRetry.
	Retry Retry
	// CursorEvery is how often the cursor is written at most; 0: 1 s.
	CursorEvery time.Duration
	// Poll is how often leadership is checked; 0: 250 ms.
	Poll   time.Duration
	Logger *slog.Logger
}

// Retry is a push's budget: Tries tries, the wait after the first First,
// doubling up to Max.
type Retry struct {
	Tries      int
	First, Max time.Duration
}

// DefaultRetry is 6 tries over about a minute (waits of 2, 4, 8, 16 and
// 30 s, plus up to 10 s a try).
var DefaultRetry = Retry{Tries: 6, First: 2 * time.Second, Max: 30 * time.Second}

func (d *Deliverer) defaults() {
	if d.Sender == nil {
		d.Sender = newHTTPSender(10 * time.Second)
	}
	if d.Retry.Tries <= 0 {
		d.Retry = DefaultRetry
	}
	if d.CursorEvery <= 0 {
		d.CursorEvery = time.Second
	}
	if d.Poll <= 0 {
		d.Poll = 250 * time.Millisecond
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
}

// Run delivers while this node leads, until ctx ends.
func (d *Deliverer) Run(ctx context.Context) {
	d.defaults()
	for ctx.Err() == nil {
		if d.IsLeader() {
			d.term(ctx)
		}
		sleep(ctx, d.Poll)
	}
}

// sleep waits for d or ctx's end.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// term delivers from the cursor until the node stops leading or ctx ends.
func (d *Deliverer) term(parent context.Context) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	go func() {
		for ctx.Err() == nil && d.IsLeader() {
			sleep(ctx, d.Poll)
		}
		cancel()
	}()
	cur, err := d.Client.PushCursor(ctx, api.Strong)
	if err != nil || cur.Since == 0 {
		if err != nil && ctx.Err() == nil {
			d.Logger.Warn("push: cannot read the cursor", "err", err)
		}
		sleep(ctx, 8*d.Poll) // nothing configured yet (or no answer): look again later
		return
	}
	s := &session{d: d, ctx: ctx, followers: map[string]*follower{}, configs: map[string]api.PushConfigPage{}, dead: map[string]bool{}}
	s.done.Store(max(cur.Index, cur.Since-1))
	written := make(chan struct{})
	go func() { defer close(written); s.writeCursor(cur.Index) }()
	d.Logger.Info("push: delivering", "after", s.done.Load())
	for ctx.Err() == nil {
		q := api.StreamQuery{Events: []string{api.EventTask}, Resume: eventID(s.done.Load())}
		if err := d.Client.Stream(ctx, q, s.event); err != nil && ctx.Err() == nil {
			d.Logger.Warn("push: the event stream ended", "err", err)
		}
		sleep(ctx, d.Poll)
	}
	<-written
}

// session is one term's delivery state.
type session struct {
	d         *Deliverer
	ctx       context.Context
	done      atomic.Uint64 // every task event of the entries up to it is delivered
	followers map[string]*follower
	configs   map[string]api.PushConfigPage // by task, as last read
	dead      map[string]bool               // configs whose last push was skipped
	current   []api.PushConfig              // the configs of the event being sent
}

// writeCursor writes done every CursorEvery while it moved past the last
// written, and once more at the term's end (if the process goes on).
func (s *session) writeCursor(written uint64) {
	write := func(ctx context.Context) {
		if n := s.done.Load(); n > written {
			if _, err := s.d.Client.SetPushCursor(ctx, n); err == nil {
				written = n
			} else if ctx.Err() == nil {
				s.d.Logger.Warn("push: cannot write the cursor", "index", n, "err", err)
			}
		}
	}
	for s.ctx.Err() == nil {
		sleep(s.ctx, s.d.CursorEvery)
		write(s.ctx)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), 2*time.Second)
	defer cancel()
	write(ctx)
}

// event takes one stream event: a task update is delivered, then an id
// (an entry's last event) moves done.
func (s *session) event(ev api.StreamEvent) error {
	if ev.Task != nil && ev.Task.Task != nil {
		index := ev.Seq
		if index == 0 {
			index = ev.Task.Event.Seq
		}
		if err := s.deliver(ev.Task.Task, index); err != nil {
			return err
		}
	}
	if n, ok := strings.CutSuffix(ev.ID, ":"+api.EventTask); ok {
		if v, err := strconv.ParseUint(n, 10, 64); err == nil {
			s.done.Store(v)
		}
	}
	return s.ctx.Err()
}

// deliver sends t's update at entry index to the task's configs set
// before it. An error (the configs unreadable) ends the stream, which
// resumes at the last complete entry.
func (s *session) deliver(t *api.Task, index uint64) error {
	page, ok := s.configs[t.ID]
	if !ok || page.Index < index {
		var err error
		if page, err = s.d.Client.PushConfigsWithCredentials(s.ctx, t.ID); err != nil {
			return fmt.Errorf("push: configs of task %s: %w", t.ID, err)
		}
		if len(page.Configs) > 0 { // kept for the task's next updates of the same entry
			s.configs[t.ID] = page
		}
	}
	s.current = s.current[:0]
	for _, c := range page.Configs {
		if c.Index < index {
			s.current = append(s.current, c)
		}
	}
	if len(s.current) == 0 {
		delete(s.configs, t.ID)
		return nil
	}
	f := s.followers[t.ID]
	if f == nil {
		f = &follower{id: t.ID, view: ToTask, yield: s.yield}
		s.followers[t.ID] = f
	}
	if errors.Is(f.emit(t, index), errEnd) {
		delete(s.followers, t.ID)
		delete(s.configs, t.ID)
	}
	return nil
}

// yield sends ev to the current configs; it never stops the follower.
func (s *session) yield(ev a2a.Event, _ error) bool {
	for _, c := range s.current {
		s.send(c, ev)
	}
	return true
}

// send pushes ev to c, retried with backoff (one try for a config whose
// last push was skipped); at the budget's end it logs and skips.
func (s *session) send(c api.PushConfig, ev a2a.Event) {
	key := c.TaskID + "/" + c.ID
	id := EventID(ev)
	if err := api.CheckPushURL(s.d.Allow, c.URL); err != nil {
		s.d.Logger.Warn("push: skipped: the URL's host is not allowed on this node", "task", c.TaskID, "config", c.ID, "event", id, "err", err)
		return
	}
	tries, wait := s.d.Retry.Tries, s.d.Retry.First
	if s.dead[key] {
		tries = 1
	}
	cfg := fromPushConfig(c)
	for try := 1; ; try++ {
		err := s.d.Sender.SendPush(s.ctx, cfg, ev)
		if err == nil {
			delete(s.dead, key)
			return
		}
		if s.ctx.Err() != nil {
			return // no longer the leader: the next one resumes at the cursor
		}
		if try >= tries {
			s.dead[key] = true
			s.d.Logger.Error("push: skipped after its retries", "task", c.TaskID, "config", c.ID, "event", id, "tries", try, "err", err)
			return
		}
		s.d.Logger.Warn("push: failed; retrying", "task", c.TaskID, "config", c.ID, "event", id, "try", try, "err", err)
		sleep(s.ctx, wait)
		wait = min(2*wait, s.d.Retry.Max)
	}
}
