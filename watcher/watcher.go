package watcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
)

// Options configure Run.
type Options struct {
	// Client talks to any node of the cluster.
	Client *client.Client
	// Addr is passed to the CLI as MAOS_ADDR; default Client.Addr().
	Addr string
	// Logger gets one line per handled, skipped or failed message.
	Logger *slog.Logger
	// BackoffBase is the first retry delay; retries wait base×1, 2, 4, 8,
	// 16 (default 1s, so 1, 2, 4, 8, 16 s).
	BackoffBase time.Duration
	// Heartbeat is how often presence is refreshed (default 10s).
	Heartbeat time.Duration
	// PanePoll is how often the watcher of a tmux agent reads its pane to
	// tell idle from working (default DefaultPanePoll).
	PanePoll time.Duration
	// DryRun, when set, makes the watchers only report which local agent
	// would take each incoming message and with which policy: nothing is
	// registered, run, posted or acknowledged. It is called from one
	// goroutine per agent.
	DryRun func(Decision)
	// Dir is the watcher's directory: agents' shared-context folders
	// default to Dir/<agent>/context (AgentConfig.SharedContext); default
	// $TMPDIR/maos-watcher.
	Dir string
	// Tmux types the messages of delivery: tmux agents; the zero value
	// uses the user's default tmux server (set Socket or Name to use
	// another, as tests do with a private server).
	Tmux Tmux
	// Node names the node this watcher runs beside in its agents' leases
	// (agentlease.go): maosd passes its node id; default the host's name
	// in the id alphabet.
	Node string
	// Instance names this watcher process in its agents' leases; default
	// 16 random hex digits, new on every Run.
	Instance string
	// Metrics, if set, is told of every run of an agent's command (each
	// retry is a run). maosd passes its node's metrics; maosctl watch,
	// which runs beside no node, passes none.
	Metrics Recorder
}

// Recorder records the runs of agents' commands; maos's metrics
// implement it (maos_watcher_invocations_total and _seconds).
type Recorder interface {
	// WatcherRun is one run of agent's command: its outcome (RunOK,
	// RunError, RunTimeout or RunCancelled) and how long it took.
	WatcherRun(agent, outcome string, took time.Duration)
}

// The outcomes of a run, as a Recorder is told them.
const (
	RunOK        = "ok"        // the command answered
	RunError     = "error"     // non-zero exit, empty output, refused answer, could not start
	RunTimeout   = "timeout"   // killed at its timeout
	RunCancelled = "cancelled" // the watcher stopped while it ran
)

// runOutcome is res's outcome for a Recorder; ctx is the run's context.
func runOutcome(ctx context.Context, res Result) string {
	switch {
	case res.Err == nil:
		return RunOK
	case res.TimedOut:
		return RunTimeout
	case ctx.Err() != nil:
		return RunCancelled
	default:
		return RunError
	}
}

// Decision is what a dry run reports for one message and one agent.
type Decision struct {
	Seq    uint64 `json:"seq"`
	ID     string `json:"id"`
	From   string `json:"from"`
	Agent  string `json:"agent"`
	Take   bool   `json:"take"`
	Policy string `json:"policy,omitempty"` // when Take
	Reason string `json:"reason"`           // why taken or skipped
}

// String is the dry run's text line.
func (d Decision) String() string {
	if d.Take {
		return fmt.Sprintf("seq=%d id=%s from=%s -> %s policy=%s (%s)", d.Seq, d.ID, d.From, d.Agent, d.Policy, d.Reason)
	}
	return fmt.Sprintf("seq=%d id=%s from=%s -> %s skip (%s)", d.Seq, d.ID, d.From, d.Agent, d.Reason)
}

// ReplyID is the id of the reply (answer or incident) agent posts to m, in
// the seed format: api.DerivedID of agent, m's stored timestamp (the date
// and time part) and agent and m's id (the hex part). It depends only on
// agent and what the log stored for m, so it is the same on every host,
// every attempt and after a restart, and a re-post is stored once.
func ReplyID(agent string, m *api.Message) string {
	return api.DerivedID(agent, m.Timestamp, agent+"\x00"+m.ID)
}

// Run runs one watcher per agent of f against opts.Client until ctx ends,
// then sets the agents OFFLINE and returns nil. A watcher never stops on a
// bad message or a failing CLI; network errors are retried. An agent whose
// token the cluster refuses (revoked or unknown) for refusalGrace is
// stopped, with one log line (tokenguard.go); Run returns when every agent
// has stopped.
func Run(ctx context.Context, f *File, opts Options) error {
	if opts.Client == nil {
		return errors.New("watcher: run: no client")
	}
	if opts.Addr == "" {
		opts.Addr = opts.Client.Addr()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if opts.BackoffBase <= 0 {
		opts.BackoffBase = time.Second
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = 10 * time.Second
	}
	if opts.PanePoll <= 0 {
		opts.PanePoll = DefaultPanePoll
	}
	if opts.Node == "" {
		opts.Node = hostNode()
	}
	if opts.Instance == "" {
		opts.Instance = newInstanceID()
	}
	if err := (api.LeaseHolder{Node: opts.Node, Instance: opts.Instance}).Validate(); err != nil {
		return fmt.Errorf("watcher: run: %w", err)
	}
	// Every token is read before any watcher starts: a bad file stops the
	// run rather than leave some agents unwatched.
	tokens := make([]string, len(f.Agents))
	for i, a := range f.Agents {
		if a.TokenFile == "" {
			continue
		}
		tok, err := readTokenFile(a.TokenFile)
		if err != nil {
			return &ConfigError{Field: fmt.Sprintf("agents[%d].token_file", i), Reason: err.Error()}
		}
		tokens[i] = tok
	}
	var wg sync.WaitGroup
	var out sync.Mutex // serialises dry-run lines of several agents
	rn := newRenewals(ctx)
	for i := range f.Agents {
		c := opts.Client
		if tokens[i] != "" {
			c = c.WithToken(tokens[i])
		}
		actx, stop := context.WithCancel(ctx)
		defer stop()
		guard := &tokenGuard{log: opts.Logger.With("agent", f.Agents[i].ID), stop: stop}
		c = c.WithTokenWatch(guard.answer)
		w := &agentWatcher{cfg: &f.Agents[i], opts: opts, c: c, token: tokens[i], dryMu: &out, renewals: rn,
			log: opts.Logger.With("agent", f.Agents[i].ID), busyChanged: make(chan struct{}, 1), interruptedFor: map[uint64]bool{},
			tasks: c, taskOffers: make(chan taskOffer), quit: stop}
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.serve(actx)
		}()
	}
	wg.Wait()
	return nil
}

type agentWatcher struct {
	cfg   *AgentConfig
	opts  Options
	c     *client.Client
	token string // the agent's own token (token_file), "" for none
	// renewals renews the leases of the process's agents together
	// (renewals.go); nil for a watcher not started by Run.
	renewals *renewals
	log      *slog.Logger
	dryMu    *sync.Mutex

	// What runs now, in the order it started ("answering ID", "doing task
	// ID"): presence says WORKING on the first while there is one, IDLE
	// after the last one ended. Only heartbeat publishes it, with the task
	// counters and what the pane shows; busyChanged (one slot) wakes it
	// when any changes.
	mu        sync.Mutex
	working   []string
	pane      string // a tmux agent's pane: IDLE, WORKING or "" (unknown); paneLoop writes it
	hook      string // what its hook reported, per the node's record ("" when not from a hook); paneLoop writes it
	hookStale bool   // the agent was interrupted since the hook said WORKING (queue.go)
	reads     uint64 // paneLoop's finished rounds of reading pane and hook
	started   uint64 // paneLoop's rounds begun: a round numbered above this at a message's arrival read after it
	// interruptedFor holds the seqs of a tmux agent's messages the
	// interrupt key went to the pane for, until they are typed (queue.go).
	interruptedFor map[uint64]bool
	stats          taskStats
	busyChanged    chan struct{}

	// The agent's lease (agentlease.go), under mu: the fence this
	// watcher's writes carry (0 while it does not serve), the cancel of
	// its serving context, and whether that ended with the lease lost.
	fence uint64
	lose  context.CancelFunc
	lost  bool

	// quit stops this agent for good (Run's context for it): a refusal no
	// retry will change (tokenguard.go, a registration refused).
	quit context.CancelFunc

	// tasks is the task API (the client); taskOffers feeds taskLoop.
	tasks      taskAPI
	taskOffers chan taskOffer
}

// item is one inbox message the watcher tracks until the cursor passes it.
type item struct {
	m         *api.Message
	mode      string
	forUs     bool
	running   bool
	done      bool
	preempted bool
	cancel    context.CancelFunc
	// fork is the slot of the fork that runs it (fork.go), 0 for none.
	fork int
	// A tmux agent's (queue.go): reported queued; the interrupt key was
	// asked for it (agentWatcher.interruptedFor says whether it went).
	queued         bool
	interruptAsked bool
	// readFrom is how many rounds of reading pane and hook had begun when
	// it arrived: it is judged only on a round that began after it.
	readFrom uint64
}

// finished is a worker's report: again when the message must be handled
// again (its invocation was cancelled before the reply was posted).
type finished struct {
	it    *item
	again bool
}

// urgentInterrupt reports whether it preempts a command agent's running
// invocation: urgent, in mode interrupt, and from a sender that may
// interrupt, as apply decided and the message carries
// (api.Message.MayInterrupt): the watcher never decides authority itself.
func (it *item) urgentInterrupt() bool {
	return it.mode == PolicyInterrupt && it.m.Priority == api.PriorityUrgent && it.m.MayInterrupt
}

// retry calls fn until it succeeds or ctx ends, backing off up to 5s.
func (w *agentWatcher) retry(ctx context.Context, what string, fn func() error) bool {
	delay := 100 * time.Millisecond
	for {
		err := fn()
		if err == nil {
			return true
		}
		w.log.Warn("watcher: "+what+" failed; retrying", "err", err)
		if !sleepCtx(ctx, delay) {
			return false
		}
		delay = min(2*delay, 5*time.Second)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (w *agentWatcher) run(ctx context.Context) {
	id := w.cfg.ID
	var cursor uint64
	if w.opts.DryRun == nil {
		if !w.cfg.KeepRecord && !w.retry(ctx, "register agent", func() error {
			_, err := w.c.RegisterAgent(ctx, api.RegisterAgentCommand{ID: id, Role: w.cfg.Role, Capabilities: w.cfg.Capabilities(),
				Description: "watched by maos watcher (" + w.cfg.Delivery + ")"})
			if errors.Is(err, api.ErrForbidden) {
				// The token may not register this agent so (a role or
				// capability it is not granted): no retry will change that.
				w.log.Error("watcher: the cluster refuses to register this agent as configured; stopping this agent: "+
					"fix its role/capabilities or its token's grant, and start the watcher again", "err", err)
				w.quit()
				return nil
			}
			return err
		}) || ctx.Err() != nil {
			return
		}
		w.presence(ctx, api.PresenceAwake, api.SubstateIdle, api.SourceWatcher, "")
		beating := make(chan struct{})
		go func() {
			defer close(beating)
			if w.cfg.Delivery == DeliveryTmux {
				paneDone := make(chan struct{})
				go func() {
					defer close(paneDone)
					w.paneLoop(ctx, PaneProbe{Tmux: w.opts.Tmux, Target: w.cfg.TmuxTarget, Detector: w.cfg.PaneDetector()})
				}()
				defer func() { <-paneDone }()
			}
			w.heartbeat(ctx)
		}()
		defer func() {
			// After the heartbeat's last update, so OFFLINE is the last word;
			// none when the lease was lost: the agent is served elsewhere.
			<-beating
			if w.leaseWasLost() {
				return
			}
			octx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			w.presence(octx, api.PresenceOffline, "", "", "")
		}()
		if !w.retry(ctx, "read cursor", func() error {
			cur, err := w.c.Cursor(ctx, id, api.Strong)
			cursor = cur.Seq
			return err
		}) {
			return
		}
	}
	w.log.Info("watcher: started", "after", cursor, "mode", w.cfg.Policy.Mode, "queues", w.cfg.Queues())
	if w.doesTasks() {
		tasksDone := make(chan struct{})
		go func() {
			defer close(tasksDone)
			w.taskLoop(ctx)
		}()
		defer func() { <-tasksDone }() // its runs end (and hand back) before OFFLINE
		go w.listTasks(ctx)
	}
	msgs := make(chan *api.Message)
	go w.stream(ctx, cursor, msgs)
	w.newScheduler(cursor).run(ctx, msgs)
	w.log.Info("watcher: stopped")
}

// doesTasks reports whether this watcher claims and runs tasks: not in
// a dry run, not for a tmux agent.
func (w *agentWatcher) doesTasks() bool { return w.opts.DryRun == nil && w.cfg.DoesTasks() }

// stream feeds msgs from the agent's inbox after after and, when it does
// tasks, offers the task loop the updates of the agent's tasks (the
// stream's ?agent= carries those of its queues and those it claimed),
// reconnecting after the last event it passed on.
func (w *agentWatcher) stream(ctx context.Context, after uint64, msgs chan<- *api.Message) {
	q := api.StreamQuery{Agent: w.cfg.ID, After: after, Tasks: api.StreamTasksNone}
	if w.doesTasks() {
		q.Tasks = api.StreamTasksAll
	}
	delay := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := w.c.Stream(ctx, q, func(ev api.StreamEvent) error {
			switch {
			case ev.Message != nil:
				select {
				case msgs <- ev.Message:
				case <-ctx.Done():
					return ctx.Err()
				}
			case ev.Task != nil && ev.Task.Task != nil:
				t := ev.Task.Task
				if !w.offerTask(ctx, taskOffer{id: t.ID, task: t}) {
					return ctx.Err()
				}
			default:
				return nil
			}
			if ev.ID != "" {
				q.Resume = ev.ID
			}
			delay = 100 * time.Millisecond
			return nil
		})
		if ctx.Err() != nil {
			return
		}
		w.log.Warn("watcher: stream ended; reconnecting", "after", q.Resume, "err", err)
		if !sleepCtx(ctx, delay) {
			return
		}
		delay = min(2*delay, 5*time.Second)
	}
}

func malformed(m *api.Message) error {
	switch {
	case m.ID == "":
		return errors.New("no id")
	case m.From == "":
		return errors.New("no sender")
	case m.Channel == "":
		return errors.New("no channel")
	case m.Seq == 0:
		return errors.New("no seq")
	}
	return nil
}

func (w *agentWatcher) dryRun(it *item) {
	d := Decision{Seq: it.m.Seq, ID: it.m.ID, From: it.m.From, Agent: w.cfg.ID}
	if err := malformed(it.m); err != nil {
		d.Reason = "malformed: " + err.Error()
	} else if id := taskMessageID(it.m); id != "" && w.cfg.DoesTasks() {
		d.Reason = ReasonTask + " " + id
	} else if d.Take, d.Reason = w.cfg.ForUs(it.m); d.Take {
		d.Policy = it.mode
	}
	w.dryMu.Lock()
	defer w.dryMu.Unlock()
	w.opts.DryRun(d)
}

// handle answers one message; it returns an error only when ctx ended
// before the reply was posted (the message must be handled again).
func (w *agentWatcher) handle(ctx context.Context, m *api.Message) error {
	if r, answer, err := w.needsAnswer(ctx, m); err != nil || !answer {
		if r != nil {
			w.log.Info("watcher: already answered", "id", m.ID, "reply", r.ID)
		}
		return err
	}
	var ctxMsgs []*api.Message
	if n := *w.cfg.ContextMessages; n > 0 {
		var err error
		if ctxMsgs, err = recentContext(ctx, w.c, m, n); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			w.log.Warn("watcher: no channel context", "id", m.ID, "err", err)
		}
	}
	label := "answering " + m.ID
	w.setWorking(label, true)
	defer w.setWorking(label, false)
	files := w.fetchAttachments(ctx, m.ID, m.Content.Artifacts)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	prompt, err := w.cfg.Render(PromptData{Agent: w.cfg.ID, Role: w.cfg.Role, Guardrails: w.cfg.Guardrails, Context: ctxMsgs, Message: m, Artifacts: files})
	if err != nil {
		w.log.Warn("watcher: skipping message: prompt does not render", "id", m.ID, "err", err)
		return nil
	}
	inv := w.invocation(prompt, "MAOS_SESSION_ID="+m.Channel, "MAOS_MESSAGE_ID="+m.ID)
	res, attempts := w.invoke(ctx, inv, m.ID, nil)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if res.Err != nil {
		w.log.Warn("watcher: giving up; posting an incident", "id", m.ID, "attempts", attempts, "err", res.Err)
		return w.post(ctx, incident(m, w.cfg.ID, "could not answer", incidentText(w.cfg.ID, m.ID, attempts, res)))
	}
	r := answer(m, w.cfg.ID, res.Output)
	w.attachOutputs(ctx, r, res.Stdout, inv.Workdir, w.cfg.ID)
	return w.post(ctx, r)
}

// needsAnswer says whether m is still to be answered: not when its reply
// (ReplyID: the agent's, whoever of it posted it) is stored, which it
// returns, nor when its reply chain is deeper than max_thread_depth. err
// only when ctx ended (m must be handled again).
func (w *agentWatcher) needsAnswer(ctx context.Context, m *api.Message) (*api.Message, bool, error) {
	if r, err := w.c.Message(ctx, ReplyID(w.cfg.ID, m), api.Local); err == nil {
		return r, false, nil
	} else if ctx.Err() != nil {
		return nil, false, ctx.Err()
	}
	if depth := w.threadDepth(ctx, m); depth > w.cfg.MaxThreadDepth {
		w.log.Warn("watcher: not answering: reply chain too deep", "id", m.ID, "depth", depth, "max_thread_depth", w.cfg.MaxThreadDepth)
		return nil, false, nil
	}
	return nil, true, nil
}

// answer is agent's reply to m with the model's output: api.NewReply
// (response, task_result for a task_assign; private when m is) with the
// id ReplyID derives, so a re-post after a crash is stored once.
func answer(m *api.Message, agent, output string) *api.Message {
	r := api.NewReply(m, agent, output)
	r.ID = ReplyID(agent, m)
	return r
}

// incident is agent's report to m's sender that it could not do what
// (answer, deliver) m: an answer of type incident, priority high, titled
// "incident: AGENT WHAT ID", in place of the answer (same id).
func incident(m *api.Message, agent, what, text string) *api.Message {
	r := answer(m, agent, text)
	r.Type, r.Priority = "incident", api.PriorityHigh
	r.Title = truncate("incident: "+agent+" "+what+" "+m.ID, api.MaxTitleLen)
	return r
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}

func incidentText(agent, id string, attempts int, res Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s could not answer %s after %d attempt(s): %v\nexit code: %d\n", agent, id, attempts, res.Err, res.ExitCode)
	if len(res.Stderr) > 0 {
		b.WriteString("last stderr lines:\n")
		b.WriteString(strings.Join(res.Stderr, "\n"))
	}
	return b.String()
}

// invocation is the agent's command with prompt on stdin, its workdir
// and timeout, and the environment every run gets (MAOS_AGENT_ID,
// MAOS_AGENT_ROLE, MAOS_ADDR, MAOS_TOKEN with a token file) with env
// added; the agent's env: entries come last, so they win.
func (w *agentWatcher) invocation(prompt string, env ...string) Invocation {
	inv := Invocation{Argv: w.cfg.Command, Stdin: prompt, Workdir: w.cfg.Workdir, Timeout: time.Duration(w.cfg.Timeout),
		Env: append([]string{"MAOS_AGENT_ID=" + w.cfg.ID, "MAOS_AGENT_ROLE=" + w.cfg.Role, "MAOS_ADDR=" + w.opts.Addr,
			SharedContextEnv + "=" + w.cfg.SharedContext(w.opts.Dir)}, env...)}
	if w.token != "" {
		inv.Env = append(inv.Env, "MAOS_TOKEN="+w.token)
	}
	for k, v := range w.cfg.Env {
		inv.Env = append(inv.Env, k+"="+v)
	}
	return inv
}

// invoke runs inv up to 1+retries times with exponential backoff, for
// what (a message or task id, for the log). accept, if set, sees each
// result and may set its Err, which makes the run a failed attempt.
func (w *agentWatcher) invoke(ctx context.Context, inv Invocation, what string, accept func(*Result)) (Result, int) {
	var res Result
	attempts := 0
	for i := 0; i <= *w.cfg.Retries; i++ {
		if i > 0 {
			d := w.opts.BackoffBase << min(i-1, 4) // base×1, 2, 4, 8, 16
			w.log.Info("watcher: retrying", "id", what, "attempt", i+1, "in", d, "err", res.Err)
			if !sleepCtx(ctx, d) {
				return res, attempts
			}
		}
		attempts++
		start := time.Now()
		res = runWith(ctx, w.cfg.Runner, inv)
		if accept != nil && ctx.Err() == nil {
			accept(&res)
		}
		if w.opts.Metrics != nil {
			w.opts.Metrics.WatcherRun(w.cfg.ID, runOutcome(ctx, res), time.Since(start))
		}
		if res.Err == nil || ctx.Err() != nil {
			return res, attempts
		}
	}
	return res, attempts
}

// post sends the reply, retrying transient errors. A conflict means a
// reply with this id but other content is stored: an earlier run of this
// watcher (or another host) already answered.
func (w *agentWatcher) post(ctx context.Context, reply *api.Message) error {
	delay := 100 * time.Millisecond
	for {
		resp, err := w.c.SendFenced(ctx, reply, w.agentFence())
		switch {
		case errors.Is(err, api.ErrFenced):
			// Another watcher holds the agent's lease now: it answers.
			w.log.Warn("watcher: reply refused: the agent's lease was lost", "id", reply.InReplyTo, "err", err)
			w.leaseLost(err)
			return errLeaseLost
		case err == nil:
			w.log.Info("watcher: replied", "id", reply.InReplyTo, "reply", reply.ID, "seq", resp.Seq, "type", reply.Type)
			return nil
		case errors.Is(err, api.ErrConflict):
			w.log.Info("watcher: already answered (reply id taken)", "id", reply.InReplyTo, "reply", reply.ID)
			return nil
		case errors.Is(err, api.ErrInvalid), errors.Is(err, api.ErrForbidden), errors.Is(err, api.ErrNotFound):
			w.log.Warn("watcher: reply refused; moving on", "id", reply.InReplyTo, "err", err)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		w.log.Warn("watcher: posting the reply failed; retrying", "id", reply.InReplyTo, "err", err)
		if !sleepCtx(ctx, delay) {
			return ctx.Err()
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// threadDepth counts the in_reply_to hops above m, stopping one past the
// limit; a parent it cannot read ends the walk.
func (w *agentWatcher) threadDepth(ctx context.Context, m *api.Message) int {
	depth := 0
	for cur := m; cur.InReplyTo != "" && depth <= w.cfg.MaxThreadDepth; depth++ {
		p, err := w.c.Message(ctx, cur.InReplyTo, api.Local)
		if err != nil {
			return depth + 1
		}
		cur = p
	}
	return depth
}

func (w *agentWatcher) presence(ctx context.Context, state, sub, source, task string) {
	u := api.PresenceUpdate{State: state, Substate: sub, Source: source, PID: os.Getpid(), Task: task}
	if state == api.PresenceAwake {
		u.AgentHealth = w.health()
	}
	_, err := w.c.PutPresence(ctx, w.cfg.ID, u)
	if err != nil && ctx.Err() == nil {
		w.log.Warn("watcher: presence update failed", "state", state, "substate", sub, "err", err)
	}
}

// setWorking records that the run labelled label ("answering ID",
// "doing task ID") started (on) or ended (its retries included), and
// wakes the heartbeat to publish it now.
func (w *agentWatcher) setWorking(label string, on bool) {
	w.mu.Lock()
	if on {
		w.working = append(w.working, label)
	} else if i := slices.Index(w.working, label); i >= 0 {
		w.working = slices.Delete(w.working, i, i+1)
	}
	w.mu.Unlock()
	w.wakeHeartbeat()
}

// wakeHeartbeat has the heartbeat publish presence now.
func (w *agentWatcher) wakeHeartbeat() {
	select {
	case w.busyChanged <- struct{}{}:
	default: // a wake-up is pending; it publishes the latest state
	}
}

// busy is what presence says of the agent, and its source: WORKING and
// the oldest run's label (and how many more) while any runs (watcher);
// else what a tmux agent's pane shows, if the detector can tell (pane);
// else IDLE with no task (watcher).
func (w *agentWatcher) busy() (substate, source, task string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch n := len(w.working); n {
	case 0:
		if w.pane != "" {
			return w.pane, api.SourcePane, ""
		}
		return api.SubstateIdle, api.SourceWatcher, ""
	case 1:
		task = w.working[0]
	default:
		task = fmt.Sprintf("%s (and %d more)", w.working[0], n-1)
	}
	return api.SubstateWorking, api.SourceWatcher, truncate(task, api.MaxPresenceTask)
}

// heartbeat is the one writer of the agent's AWAKE presence while the
// watcher runs, with its task counters: every Heartbeat, and at once when
// an invocation starts or ends or a task's end is counted. One writer, reading the list when it writes, means the last
// update always says what runs now: an invocation that ended never shows
// as WORKING after it, whatever the order in which updates were due.
func (w *agentWatcher) heartbeat(ctx context.Context) {
	t := time.NewTicker(w.opts.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.busyChanged:
		case <-t.C:
		}
		sub, source, task := w.busy()
		w.presence(ctx, api.PresenceAwake, sub, source, task)
	}
}

// readTokenFile reads a bearer token: one line, trimmed, not empty.
func readTokenFile(name string) (string, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(data))
	switch {
	case tok == "":
		return "", fmt.Errorf("%s is empty", name)
	case strings.ContainsAny(tok, " \t\r\n"):
		return "", fmt.Errorf("%s: want one token on one line", name)
	}
	return tok, nil
}
