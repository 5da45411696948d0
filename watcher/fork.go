package watcher

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
)

// Forks (seed 003, "fork - Fork Me"). A message the fork mode takes is
// handled by a temporary agent A-fork-N (api.ForkName; N the lowest free
// of max_forks slots): registered with A's role, AWAKE and WORKING while
// it runs and OFFLINE when done, in a working directory of its own made
// empty for it, with the message's thread as its context. It answers the
// sender under its own name and then leaves A a private note of what it
// did (send_to_parent). A's pane and A's presence are never touched: the
// parent goes on uninterrupted. The answer's id is A's (ReplyID(A, m)),
// whichever slot ran it, so a message is answered once across restarts
// and mode changes; the note's id is derived from A and m too.

// ForkNoteType is the type of the note a fork leaves its parent.
const ForkNoteType = "notification"

// ForkNoteTextLen bounds how much of the fork's answer its note quotes, in
// bytes.
const ForkNoteTextLen = 2000

// CanFork reports whether the agent's messages can be forked: it has a
// command for a fork to run (a tmux agent may name one; a fork never types
// into the pane) and every fork name up to max_forks is a valid agent id.
// Without, the fork mode delivers as queue (modeOf).
func (a *AgentConfig) CanFork() bool {
	return len(a.Command) > 0 && api.ValidName(api.ForkName(a.ID, a.Policy.MaxForks))
}

// forkSlots are the scheduler's fork slots: slot n (1-based) is taken while
// fork n runs.
type forkSlots []bool

// take returns the lowest free slot, marked taken, or 0 when all are.
func (s forkSlots) take() int {
	for i, busy := range s {
		if !busy {
			s[i] = true
			return i + 1
		}
	}
	return 0
}

func (s forkSlots) free(n int) { s[n-1] = false }

// ForkDir is where fork slot n of the agent works: <fork_dir>/A-fork-N,
// fork_dir defaulting to $TMPDIR/maos-forks/A.
func (a *AgentConfig) ForkDir(n int) string {
	root := a.Policy.ForkDir
	if root == "" {
		root = filepath.Join(os.TempDir(), "maos-forks", a.ID)
	}
	return filepath.Join(root, api.ForkName(a.ID, n))
}

// handleFork answers m as the agent's fork in slot n, then leaves the
// parent its note. Like handle, it returns an error only when ctx ended
// before the answer was posted.
func (w *agentWatcher) handleFork(ctx context.Context, m *api.Message, n int) error {
	name := api.ForkName(w.cfg.ID, n)
	replyID := ReplyID(w.cfg.ID, m)
	stored, todo, err := w.needsAnswer(ctx, m)
	switch {
	case err != nil:
		return err
	case stored != nil && api.IsForkOf(stored.From, w.cfg.ID):
		// Answered already. A crash may have come between a fork's
		// answer and its note: post the note again (stored once).
		return w.post(ctx, forkNote(m, stored, w.cfg.ID))
	case stored != nil:
		w.log.Info("watcher: already answered", "id", m.ID, "reply", replyID)
		return nil
	case !todo:
		return nil
	}
	if !w.retry(ctx, "register fork "+name, func() error {
		_, err := w.c.RegisterAgent(ctx, api.RegisterAgentCommand{ID: name, Role: w.cfg.Role,
			Description: fmt.Sprintf("fork %d of %s: a temporary agent that answers one message at a time for it", n, w.cfg.ID)})
		return err
	}) {
		return ctx.Err()
	}
	stop := w.forkPresence(ctx, name, "answering "+m.ID)
	defer stop()

	dir := w.cfg.ForkDir(n)
	if err := freshDir(dir); err != nil {
		w.log.Warn("watcher: fork has no working directory; posting an incident", "fork", name, "id", m.ID, "err", err)
		r := incident(m, name, "could not answer", fmt.Sprintf("%s could not answer %s: its working directory: %v", name, m.ID, err))
		r.ID = replyID
		return w.postForked(ctx, m, r)
	}
	var thread []*api.Message
	if limit := *w.cfg.ContextMessages; limit > 0 {
		var err error
		if thread, err = threadContext(ctx, w.c, m, limit); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			w.log.Warn("watcher: fork has no thread context", "fork", name, "id", m.ID, "err", err)
		}
	}
	files := w.fetchAttachments(ctx, m.ID, m.Content.Artifacts)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	prompt, err := w.cfg.Render(PromptData{Agent: name, Parent: w.cfg.ID, Role: w.cfg.Role, Guardrails: w.cfg.Guardrails, Context: thread, Message: m, Artifacts: files})
	if err != nil {
		w.log.Warn("watcher: skipping message: prompt does not render", "id", m.ID, "err", err)
		return nil
	}
	inv := w.invocation(prompt, "MAOS_SESSION_ID="+m.Channel, "MAOS_MESSAGE_ID="+m.ID,
		"MAOS_AGENT_ID="+name, "MAOS_PARENT_AGENT="+w.cfg.ID, "MAOS_PARENT_WORKDIR="+w.cfg.Workdir, "MAOS_FORK_SLOT="+strconv.Itoa(n))
	inv.Workdir = dir
	w.log.Info("watcher: forked", "id", m.ID, "fork", name, "workdir", dir)
	res, attempts := w.invoke(ctx, inv, m.ID, nil)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var r *api.Message
	if res.Err != nil {
		w.log.Warn("watcher: fork giving up; posting an incident", "fork", name, "id", m.ID, "attempts", attempts, "err", res.Err)
		r = incident(m, name, "could not answer", incidentText(name, m.ID, attempts, res))
	} else {
		r = answer(m, name, res.Output)
		w.attachOutputs(ctx, r, res.Stdout, dir, name)
	}
	r.ID = replyID
	return w.postForked(ctx, m, r)
}

// postForked posts a fork's answer r to m, then its note to the parent.
func (w *agentWatcher) postForked(ctx context.Context, m, r *api.Message) error {
	if err := w.post(ctx, r); err != nil {
		return err
	}
	return w.post(ctx, forkNote(m, r, w.cfg.ID))
}

// forkNote is what a fork that answered m with r tells its parent (seed
// 003's send_to_parent): a private notification from the fork to parent,
// titled "FORK answered SENDER: TITLE", quoting up to ForkNoteTextLen
// bytes of the answer, correlation_id m's id, metadata {"fork": {parent,
// name, message, reply}}. Its id is derived from parent and m, so the
// note is stored once whichever slot posts it. Private whatever m's
// visibility: it is the parent's alone.
func forkNote(m, r *api.Message, parent string) *api.Message {
	what := m.Title
	if what == "" {
		what = m.ID
	}
	kind := "answered"
	if r.Type == "incident" {
		kind = "could not answer"
	}
	meta, _ := json.Marshal(map[string]any{"fork": map[string]string{"parent": parent, "name": r.From, "message": m.ID, "reply": r.ID}})
	return &api.Message{
		ID:            api.DerivedID(parent, m.Timestamp, parent+"\x00fork-note\x00"+m.ID),
		Channel:       m.Channel,
		From:          r.From,
		To:            api.Recipients{parent},
		Type:          ForkNoteType,
		Title:         truncate(fmt.Sprintf("%s %s %s: %s", r.From, kind, m.From, what), api.MaxTitleLen),
		Priority:      api.PriorityNormal,
		Content:       api.Content{Text: fmt.Sprintf("%s %s %s's message %s for you: %s", r.From, kind, m.From, m.ID, truncate(r.Content.Text, ForkNoteTextLen))},
		CorrelationID: m.ID,
		Visibility:    api.VisibilityPrivate,
		Metadata:      meta,
	}
}

// forkPresence keeps the fork AWAKE and WORKING on task (source watcher)
// every heartbeat until the returned stop is called, which writes OFFLINE
// before it returns. One writer per fork name, in order: stop lets an
// update under way finish (never cancels it, which could let the node
// apply it after OFFLINE) before it writes OFFLINE, and the slot is freed
// only after that.
func (w *agentWatcher) forkPresence(ctx context.Context, name, task string) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	put := func(u api.PresenceUpdate) {
		pctx, cancel := context.WithTimeout(context.Background(), forkPresenceTimeout)
		defer cancel()
		if _, err := w.c.PutPresence(pctx, name, u); err != nil && ctx.Err() == nil {
			w.log.Warn("watcher: fork presence update failed", "fork", name, "state", u.State, "err", err)
		}
	}
	go func() {
		defer close(done)
		t := time.NewTicker(w.opts.Heartbeat)
		defer t.Stop()
		for {
			put(api.PresenceUpdate{State: api.PresenceAwake, Substate: api.SubstateWorking,
				Source: api.SourceWatcher, PID: os.Getpid(), Task: truncate(task, api.MaxPresenceTask)})
			select {
			case <-quit:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		close(quit)
		<-done
		put(api.PresenceUpdate{State: api.PresenceOffline})
	}
}

// forkPresenceTimeout bounds one presence update of a fork.
const forkPresenceTimeout = 5 * time.Second

// freshDir makes dir an empty directory (0700), removing what a fork that
// ran in it before left.
func freshDir(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.MkdirAll(dir, 0o700)
}

// threadContext returns up to n messages of m's thread stored before m,
// oldest first: what a fork is given instead of the channel's recent
// messages. A thread longer than it reads in forkThreadPages pages is cut
// to its newest messages read.
func threadContext(ctx context.Context, c *client.Client, m *api.Message, n int) ([]*api.Message, error) {
	thread := m.ThreadID
	if thread == "" {
		thread = m.ID
	}
	var ring []*api.Message
	var after uint64
	for range forkThreadPages {
		p, err := c.Thread(ctx, thread, after, api.MaxPageLimit, api.Local)
		if err != nil {
			return nil, fmt.Errorf("watcher: thread of %s: %w", m.ID, err)
		}
		for _, x := range p.Messages {
			if x.Seq >= m.Seq {
				return ring, nil
			}
			if ring = append(ring, x); len(ring) > n {
				ring = ring[1:]
			}
			after = x.Seq
		}
		if !p.HasMore || len(p.Messages) == 0 {
			break
		}
	}
	return ring, nil
}

// forkThreadPages bounds the pages threadContext reads.
const forkThreadPages = 20
