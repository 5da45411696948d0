// Package mcpserver is maos as a Model Context Protocol server: a handful of
// small tools (send or reply, list, read a message or an artifact, who,
// lock, create, list and complete tasks, share artifacts) bound to one agent
// identity and backed by a maos node's HTTP API, so a coding agent uses its
// mailbox through tool calls instead of shelling out to maosctl.
//
// The tool definitions are deliberately few and terse: every definition is
// sent to the model on every turn and costs context.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
)

// Config binds a server to an agent and a node.
type Config struct {
	// Agent is the identity every tool acts as (sender, inbox, lock holder).
	Agent string
	// Client talks to any node of the cluster.
	Client *client.Client
	// Channel is the default channel of send_message; "" is
	// api.DefaultChannel.
	Channel string
	// Version is reported in the server's implementation info: the
	// program's (cli/internal/version), so it says what --version does.
	Version string
	// Dir is where read saves an artifact it does not return as
	// text; default $MAOS_SHARED_CONTEXT, else $TMPDIR/maos-mcp/AGENT.
	Dir string
}

// Tool names, in the order they are registered.
const (
	ToolSend = "send_message"
	ToolList = "list_messages"
	// ToolRead reads a message or, given an artifact id, an artifact.
	ToolRead = "read"
	ToolWho  = "who"
	ToolLock = "lock"

	ToolCreateTask   = "create_task"
	ToolListTasks    = "list_tasks"
	ToolCompleteTask = "complete_task"
)

// New returns an MCP server exposing the maos tools for cfg.Agent. It
// fails if the agent id is not a valid name or no client is given.
func New(cfg Config) (*mcp.Server, error) {
	if !api.ValidName(cfg.Agent) {
		return nil, fmt.Errorf("mcpserver: agent %q is not a valid agent id", cfg.Agent)
	}
	if cfg.Client == nil {
		return nil, errors.New("mcpserver: no client")
	}
	if cfg.Channel == "" {
		cfg.Channel = api.DefaultChannel
	}
	if cfg.Version == "" {
		return nil, errors.New("mcpserver: no version (cli/internal/version's, as --version prints it)")
	}
	h := &handlers{cfg: cfg, c: cfg.Client}
	s := mcp.NewServer(&mcp.Implementation{Name: "maos", Version: cfg.Version}, &mcp.ServerOptions{
		Instructions: "maos mailbox for agent " + cfg.Agent + ": messages from other agents, presence, file locks, tasks.",
	})
	addTool(s, ToolSend, "Send a message, or reply to one (reply_to without to).", h.send)
	addTool(s, ToolList, "List your inbox: ids and titles, oldest first.", h.list)
	addTool(s, ToolRead, "Read a message (marks it read) or an artifact (sha256: id).", h.read)
	addTool(s, ToolWho, "List agents and their presence.", h.who)
	addTool(s, ToolLock, "Acquire, renew, release or check a file lock.", h.lock)
	addTool(s, ToolCreateTask, "Create a task for an agent or a queue.", h.createTask)
	addTool(s, ToolListTasks, "List tasks.", h.listTasks)
	addTool(s, ToolCompleteTask, "Finish a task with its result.", h.completeTask)
	addTool(s, ToolShareArtifact, "Upload a file or text; returns its artifact id.", h.shareArtifact)
	return s, nil
}

// addTool registers a tool whose input schema is derived from In
// (inputSchema) and that declares no output schema: its answer is still
// structured content and the same JSON as text, but the listing every
// model pays for on every turn does not describe each answer a second
// time (issue 29).
func addTool[In, Out any](s *mcp.Server, name, desc string, h mcp.ToolHandlerFor[In, Out]) {
	mcp.AddTool(s, &mcp.Tool{Name: name, Description: desc, InputSchema: inputSchema[In]()},
		func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
			res, out, err := h(ctx, req, in)
			if err != nil {
				return res, nil, err
			}
			return res, out, nil
		})
}

// inputSchema is In's JSON schema as the SDK would derive it, but with
// "to" a string or a list (as the HTTP API takes it) and lists not
// nullable, which says nothing a model needs.
func inputSchema[In any]() *jsonschema.Schema {
	str := &jsonschema.Schema{Type: "string"}
	sc, err := jsonschema.For[In](&jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[api.Recipients](): {Types: []string{"string", "array"}, Items: str},
		reflect.TypeFor[[]string]():       {Type: "array", Items: str},
	}})
	if err != nil {
		panic(fmt.Sprintf("mcpserver: input schema of %T: %v", *new(In), err))
	}
	return sc
}

type handlers struct {
	cfg Config
	c   *client.Client
}

// SendInput is the argument of send_message. With ReplyTo and no To it
// answers the parent's sender in the parent's channel and thread.
type SendInput struct {
	To       api.Recipients `json:"to,omitempty" jsonschema:"agent ids, all or role:NAME"`
	Text     string         `json:"text"`
	Title    string         `json:"title,omitempty"`
	Priority api.Priority   `json:"priority,omitempty" jsonschema:"urgent|high|normal|low"`
	Type     string         `json:"type,omitempty" jsonschema:"chat|request|review|status…"`
	ReplyTo  string         `json:"reply_to,omitempty" jsonschema:"id of the message answered"`
	Channel  string         `json:"channel,omitempty"`
	Private  bool           `json:"private,omitempty" jsonschema:"only recipients and moderators may read it"`
	// Artifacts are artifact ids (share_artifact's) or paths to reference.
	Artifacts []string `json:"artifacts,omitempty" jsonschema:"artifact ids"`
}

// SendOutput is where a message was stored; Blocked lists the recipients
// the communication rules kept it from, as "id: reason".
type SendOutput struct {
	ID      string   `json:"id"`
	Seq     uint64   `json:"seq"`
	Blocked []string `json:"blocked,omitempty"`
}

func (h *handlers) send(ctx context.Context, _ *mcp.CallToolRequest, in SendInput) (*mcp.CallToolResult, SendOutput, error) {
	if len(in.To) == 0 {
		if in.ReplyTo == "" {
			return nil, SendOutput{}, errors.New(ToolSend + ": give to (the recipients), or reply_to to answer a message's sender")
		}
		return h.reply(ctx, in)
	}
	ch := strings.TrimSpace(in.Channel)
	if ch == "" && in.ReplyTo != "" {
		// A reply stays in its parent's conversation unless told otherwise.
		if p, err := h.c.Message(ctx, in.ReplyTo, api.Strong); err == nil {
			ch = p.Channel
		}
	}
	if ch == "" {
		ch = h.cfg.Channel
	}
	m := &api.Message{
		Channel:   ch,
		To:        in.To,
		Title:     in.Title,
		Content:   api.Content{Text: in.Text},
		Priority:  in.Priority,
		Type:      in.Type,
		InReplyTo: in.ReplyTo,
	}
	h.finish(m, in)
	out, err := h.post(ctx, m)
	return nil, out, err
}

// reply answers the message in.ReplyTo: to its sender, in its channel
// and thread, titled "Re: …" (api.NewReply); a title, type, priority or
// private given override what the reply takes of its parent.
func (h *handlers) reply(ctx context.Context, in SendInput) (*mcp.CallToolResult, SendOutput, error) {
	p, err := h.c.Message(ctx, in.ReplyTo, api.Strong)
	if err != nil {
		return nil, SendOutput{}, toolErr(ToolSend+": reply_to", err)
	}
	r := api.NewReply(p, h.cfg.Agent, in.Text)
	if in.Title != "" {
		r.Title = in.Title
	}
	if in.Type != "" {
		r.Type = in.Type
	}
	if in.Priority != "" {
		r.Priority = in.Priority
	}
	h.finish(r, in)
	out, err := h.post(ctx, r)
	return nil, out, err
}

// finish sets what a send and a reply take alike of in: the artifacts
// referenced and private visibility.
func (h *handlers) finish(m *api.Message, in SendInput) {
	if len(in.Artifacts) > 0 {
		m.Content.Artifacts = api.ArtifactRefs(in.Artifacts...)
	}
	if in.Private {
		m.Visibility = api.VisibilityPrivate
	}
}

// post sends m as the bound agent with an id fixed before the call, so a
// retry after a lost answer is never stored twice.
func (h *handlers) post(ctx context.Context, m *api.Message) (SendOutput, error) {
	m.From = h.cfg.Agent
	m.ID = api.NewID(m.From, time.Now())
	res, err := h.c.Send(ctx, m)
	if err != nil {
		return SendOutput{}, toolErr("send", err)
	}
	out := SendOutput{ID: res.ID, Seq: res.Seq}
	for _, b := range res.Blocked {
		out.Blocked = append(out.Blocked, b.ID+": "+b.Reason)
	}
	return out, nil
}

// ListInput filters list_messages. Channel and Thread are matched on the
// page the inbox endpoint returns.
type ListInput struct {
	Unread   bool         `json:"unread,omitempty"`
	From     string       `json:"from,omitempty"`
	Priority api.Priority `json:"priority,omitempty"`
	Channel  string       `json:"channel,omitempty"`
	Thread   string       `json:"thread,omitempty"`
	After    uint64       `json:"after,omitempty" jsonschema:"next_after of the last page"`
	Limit    int          `json:"limit,omitempty" jsonschema:"max 100"`
}

// ListItem is one inbox entry without its body.
type ListItem struct {
	ID       string       `json:"id"`
	From     string       `json:"from"`
	Title    string       `json:"title"`
	Priority api.Priority `json:"priority,omitempty"`
	Type     string       `json:"type,omitempty"`
	Channel  string       `json:"channel"`
	Thread   string       `json:"thread,omitempty"`
	Time     string       `json:"time"`
	Read     bool         `json:"read"`
}

// ListOutput is a page of the inbox; NextAfter continues it when HasMore.
type ListOutput struct {
	Messages  []ListItem `json:"messages"`
	HasMore   bool       `json:"has_more"`
	NextAfter uint64     `json:"next_after,omitempty"`
}

const (
	listDefault = 20
	listMax     = 100
	// listScanPages bounds how many inbox pages a channel/thread filter
	// reads before answering with has_more.
	listScanPages = 10
)

func (h *handlers) list(ctx context.Context, _ *mcp.CallToolRequest, in ListInput) (*mcp.CallToolResult, ListOutput, error) {
	limit, err := listLimit("list_messages", in.Limit)
	if err != nil {
		return nil, ListOutput{}, err
	}
	q := api.InboxQuery{Unread: in.Unread, From: in.From, Priority: in.Priority, After: in.After, Limit: limit}
	out := ListOutput{Messages: []ListItem{}}
	for range listScanPages {
		page, err := h.c.Inbox(ctx, h.cfg.Agent, q, api.Strong)
		if err != nil {
			return nil, ListOutput{}, toolErr("list_messages", err)
		}
		for _, e := range page.Messages {
			thread := e.ThreadID
			if thread == "" {
				thread = e.ID
			}
			if (in.Channel != "" && e.Channel != in.Channel) || (in.Thread != "" && thread != in.Thread) {
				continue
			}
			out.Messages = append(out.Messages, ListItem{
				ID: e.ID, From: e.From, Title: titleOf(&e.Message), Priority: e.Priority, Type: e.Type,
				Channel: e.Channel, Thread: thread, Time: e.Timestamp.UTC().Format(time.RFC3339), Read: e.Read,
			})
			if len(out.Messages) == limit {
				out.HasMore, out.NextAfter = true, e.Seq
				return nil, out, nil
			}
		}
		out.HasMore, out.NextAfter = page.HasMore, page.NextAfter
		if !page.HasMore {
			break
		}
		q.After = page.NextAfter
	}
	return nil, out, nil
}

// listLimit is a list tool's page size: listDefault for none, an error
// naming the tool and the limit above listMax.
func listLimit(tool string, limit int) (int, error) {
	switch {
	case limit <= 0:
		return listDefault, nil
	case limit > listMax:
		return 0, fmt.Errorf("%s: limit %d, at most %d", tool, limit, listMax)
	}
	return limit, nil
}

// titleOf is the title, or the start of the text for untitled messages.
func titleOf(m *api.Message) string {
	if m.Title != "" {
		return m.Title
	}
	t := strings.Join(strings.Fields(m.Content.Text), " ")
	if r := []rune(t); len(r) > 60 {
		return string(r[:60]) + "…"
	}
	return t
}

// ReadInput names a message, or an artifact by its id ("sha256:…").
type ReadInput struct {
	ID string `json:"id" jsonschema:"message or artifact id"`
}

// MessageOutput is a full message. Read is true when the message is in
// the agent's inbox (and is now marked read there).
type MessageOutput struct {
	ID         string       `json:"id"`
	Seq        uint64       `json:"seq"`
	Time       string       `json:"time"`
	Channel    string       `json:"channel"`
	From       string       `json:"from"`
	To         []string     `json:"to"`
	Type       string       `json:"type,omitempty"`
	Title      string       `json:"title,omitempty"`
	Priority   api.Priority `json:"priority,omitempty"`
	Text       string       `json:"text"`
	Code       string       `json:"code,omitempty"`
	Artifacts  []string     `json:"artifacts,omitempty"`
	InReplyTo  string       `json:"in_reply_to,omitempty"`
	Thread     string       `json:"thread,omitempty"`
	NeedsReply bool         `json:"requires_response,omitempty"`
	Metadata   string       `json:"metadata,omitempty"`
	Read       bool         `json:"read"`
}

// read answers a MessageOutput for a message id, an ArtifactOutput for
// an artifact id (readArtifact): ids of the two never look alike.
func (h *handlers) read(ctx context.Context, _ *mcp.CallToolRequest, in ReadInput) (*mcp.CallToolResult, any, error) {
	if strings.HasPrefix(in.ID, api.ArtifactIDPrefix) {
		out, err := h.readArtifact(ctx, in.ID)
		return nil, out, err
	}
	out, err := h.readMessage(ctx, in.ID)
	return nil, out, err
}

func (h *handlers) readMessage(ctx context.Context, id string) (MessageOutput, error) {
	m, err := h.c.Message(ctx, id, api.Strong)
	if err != nil {
		return MessageOutput{}, toolErr(ToolRead, err)
	}
	out := MessageOutput{
		ID: m.ID, Seq: m.Seq, Time: m.Timestamp.UTC().Format(time.RFC3339), Channel: m.Channel, From: m.From,
		To: m.To, Type: m.Type, Title: m.Title, Priority: m.Priority, Text: m.Content.Text, Code: m.Content.Code,
		Artifacts: api.ArtifactStrings(m.Content.Artifacts), InReplyTo: m.InReplyTo, Thread: m.ThreadID, NeedsReply: m.RequiresResponse,
		Metadata: string(m.Metadata),
	}
	if out.To == nil {
		out.To = []string{}
	}
	if out.Thread == "" {
		out.Thread = m.ID
	}
	switch _, err := h.c.MarkRead(ctx, h.cfg.Agent, m.ID, 0); {
	case err == nil:
		out.Read = true
	case errors.Is(err, api.ErrNotFound):
		// Not addressed to this agent (a channel message it looked up):
		// there is nothing to mark, and the message is still worth showing.
	default:
		return MessageOutput{}, toolErr(ToolRead+": mark read", err)
	}
	return out, nil
}

// WhoInput is the (empty) argument of who.
type WhoInput struct{}

// WhoItem is one agent's presence.
type WhoItem struct {
	Agent    string `json:"agent"`
	State    string `json:"state"`
	Substate string `json:"substate,omitempty"`
	// Source is where the substate came from: hook, pane or watcher.
	Source  string `json:"source,omitempty"`
	Channel string `json:"channel,omitempty"`
	Task    string `json:"task,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Seen    string `json:"last_seen"`
}

// WhoOutput lists every agent the node knows of, sorted by id.
type WhoOutput struct {
	Agents []WhoItem `json:"agents"`
}

func (h *handlers) who(ctx context.Context, _ *mcp.CallToolRequest, _ WhoInput) (*mcp.CallToolResult, WhoOutput, error) {
	ps, err := h.c.Presence(ctx)
	if err != nil {
		return nil, WhoOutput{}, toolErr("who", err)
	}
	out := WhoOutput{Agents: []WhoItem{}}
	for _, p := range ps {
		out.Agents = append(out.Agents, WhoItem{Agent: p.AgentID, State: p.State, Substate: p.Substate, Source: p.Source,
			Channel: p.Channel, Task: p.Task, Reason: p.Reason, Seen: p.Timestamp.UTC().Format(time.RFC3339)})
	}
	return nil, out, nil
}

// LockInput is the argument of lock.
type LockInput struct {
	Action string `json:"action" jsonschema:"acquire|renew|release|check"`
	Path   string `json:"path"`
	TTL    string `json:"ttl,omitempty" jsonschema:"e.g. 5m (default)"`
	Token  uint64 `json:"token,omitempty" jsonschema:"from acquire; renew/release/check"`
}

// LockOutput is the outcome of a lock action: Outcome is the state
// machine's (granted, extended, released) or, for check, "current" or
// "not_current"; Holder, Token and Expires describe the lease.
type LockOutput struct {
	Outcome string `json:"outcome"`
	Path    string `json:"path"`
	Holder  string `json:"holder,omitempty"`
	Token   uint64 `json:"token,omitempty"`
	Expires string `json:"expires,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// DefaultLockTTL is the lease of an acquire or renew that gives no ttl.
const DefaultLockTTL = 5 * time.Minute

func (h *handlers) lock(ctx context.Context, _ *mcp.CallToolRequest, in LockInput) (*mcp.CallToolResult, LockOutput, error) {
	ttl := DefaultLockTTL
	if in.TTL != "" {
		d, err := time.ParseDuration(in.TTL)
		if err != nil {
			return nil, LockOutput{}, fmt.Errorf("lock: ttl %q is not a duration like 30s or 5m", in.TTL)
		}
		ttl = d
	}
	var (
		res *api.LockResult
		err error
	)
	switch in.Action {
	case "acquire":
		res, err = h.c.AcquireLock(ctx, api.LockAcquireCommand{Path: in.Path, Holder: h.cfg.Agent, TTL: api.LockTTL(ttl)})
	case "renew":
		res, err = h.c.RenewLock(ctx, api.LockRenewCommand{Path: in.Path, Holder: h.cfg.Agent, Token: in.Token, TTL: api.LockTTL(ttl)})
	case "release":
		res, err = h.c.ReleaseLock(ctx, api.LockReleaseCommand{Path: in.Path, Holder: h.cfg.Agent, Token: in.Token})
	case "check":
		chk, err := h.c.CheckLock(ctx, in.Path, in.Token, api.Strong)
		if err != nil {
			return nil, LockOutput{}, toolErr("lock check", err)
		}
		out := LockOutput{Outcome: "not_current", Path: chk.Path, Holder: chk.Holder, Token: chk.Token, Reason: chk.Reason}
		if chk.Current {
			out.Outcome = "current"
		}
		if !chk.ExpiresAt.IsZero() {
			out.Expires = chk.ExpiresAt.UTC().Format(time.RFC3339)
		}
		return nil, out, nil
	default:
		return nil, LockOutput{}, fmt.Errorf("lock: action %q, want acquire, renew, release or check", in.Action)
	}
	if err != nil {
		return nil, LockOutput{}, toolErr("lock "+in.Action, err)
	}
	out := LockOutput{Outcome: res.Outcome, Path: in.Path, Reason: res.Message}
	if l := res.Lock; l != nil {
		out.Holder, out.Token, out.Expires = l.Holder, l.Token, l.ExpiresAt.UTC().Format(time.RFC3339)
	}
	return nil, out, nil
}

// CreateTaskInput is the argument of create_task.
type CreateTaskInput struct {
	To          string       `json:"to" jsonschema:"agent id, role:NAME or capability:NAME"`
	Title       string       `json:"title"`
	Description string       `json:"description,omitempty"`
	DependsOn   []string     `json:"depends_on,omitempty" jsonschema:"task ids that must succeed first"`
	Priority    api.Priority `json:"priority,omitempty"`
}

// TaskOutput is a task's id and state after a tool acted on it.
type TaskOutput struct {
	ID    string        `json:"id"`
	State api.TaskState `json:"state"`
	// ApprovalID is the approval a task awaiting_approval waits for.
	ApprovalID string `json:"approval_id,omitempty"`
}

func (h *handlers) createTask(ctx context.Context, _ *mcp.CallToolRequest, in CreateTaskInput) (*mcp.CallToolResult, TaskOutput, error) {
	cmd := api.TaskCreateCommand{ID: api.NewTaskID(h.cfg.Agent, time.Now()), From: h.cfg.Agent, To: in.To, Title: in.Title,
		Description: in.Description, DependsOn: in.DependsOn, Priority: in.Priority, Channel: h.cfg.Channel}
	res, err := h.c.CreateTask(ctx, cmd)
	if err != nil {
		return nil, TaskOutput{}, toolErr(ToolCreateTask, err)
	}
	return nil, TaskOutput{ID: res.ID, State: res.State}, nil
}

// ListTasksInput filters list_tasks; every filter given must match.
type ListTasksInput struct {
	State     api.TaskState `json:"state,omitempty" jsonschema:"waiting|ready|running|succeeded|failed|cancelled"`
	To        string        `json:"to,omitempty"`
	From      string        `json:"from,omitempty"`
	ClaimedBy string        `json:"claimed_by,omitempty"`
	After     uint64        `json:"after,omitempty"`
	Limit     int           `json:"limit,omitempty"`
}

// TaskItem is one task without its history or description; Status is its
// completion's, for an ended task.
type TaskItem struct {
	ID        string        `json:"id"`
	Title     string        `json:"title"`
	State     api.TaskState `json:"state"`
	From      string        `json:"from"`
	To        string        `json:"to"`
	ClaimedBy string        `json:"claimed_by,omitempty"`
	Attempt   int           `json:"attempt,omitempty"`
	Status    string        `json:"status,omitempty"`
	// ApprovalID is the approval the task awaits (awaiting_approval) or
	// last awaited.
	ApprovalID string `json:"approval_id,omitempty"`
}

// ListTasksOutput is a page of tasks, oldest first.
type ListTasksOutput struct {
	Tasks     []TaskItem `json:"tasks"`
	HasMore   bool       `json:"has_more"`
	NextAfter uint64     `json:"next_after,omitempty"`
}

func (h *handlers) listTasks(ctx context.Context, _ *mcp.CallToolRequest, in ListTasksInput) (*mcp.CallToolResult, ListTasksOutput, error) {
	limit, err := listLimit(ToolListTasks, in.Limit)
	if err != nil {
		return nil, ListTasksOutput{}, err
	}
	page, err := h.c.Tasks(ctx, api.TaskQuery{State: in.State, To: in.To, From: in.From, ClaimedBy: in.ClaimedBy, After: in.After, Limit: limit})
	if err != nil {
		return nil, ListTasksOutput{}, toolErr(ToolListTasks, err)
	}
	out := ListTasksOutput{Tasks: []TaskItem{}, HasMore: page.HasMore}
	for _, t := range page.Tasks {
		it := TaskItem{ID: t.ID, Title: t.Title, State: t.State, From: t.From, To: t.To, ClaimedBy: t.ClaimedBy, Attempt: t.Attempt, ApprovalID: t.ApprovalID}
		if t.Completion != nil {
			it.Status = t.Completion.Status
		}
		out.Tasks = append(out.Tasks, it)
		out.NextAfter = t.Seq
	}
	if !out.HasMore {
		out.NextAfter = 0
	}
	return nil, out, nil
}

// CompleteTaskInput is the argument of complete_task.
type CompleteTaskInput struct {
	ID         string   `json:"id"`
	Status     string   `json:"status,omitempty" jsonschema:"success (default)|partial_success|failure|requires_approval"`
	Result     string   `json:"result"`
	Confidence *float64 `json:"confidence,omitempty" jsonschema:"0..1"`
	Error      string   `json:"error,omitempty" jsonschema:"for failure"`
	// ProposedAction is any JSON value; a RawMessage would be described
	// to the model as an array of bytes.
	ProposedAction any `json:"proposed_action,omitempty" jsonschema:"for requires_approval: the action to approve, any JSON"`
}

// completeTask ends a task as the bound agent: under its claim if it runs
// the task, else after claiming it (a ready task of its queue), so a model
// finishes a task in one call; the API refuses what is not its to finish.
func (h *handlers) completeTask(ctx context.Context, _ *mcp.CallToolRequest, in CompleteTaskInput) (*mcp.CallToolResult, TaskOutput, error) {
	tc := api.TaskCompletion{Status: in.Status, Result: in.Result, ConfidenceScore: in.Confidence}
	if tc.Status == "" {
		tc.Status = api.TaskStatusSuccess
	}
	if tc.Status == api.TaskStatusFailure {
		tc.Error = &api.TaskError{ErrorType: "task_error", ErrorMessage: in.Error}
	}
	if in.ProposedAction != nil {
		raw, err := json.Marshal(in.ProposedAction)
		if err != nil {
			return nil, TaskOutput{}, toolErr(ToolCompleteTask, fmt.Errorf("proposed_action: %w", err))
		}
		tc.ProposedAction = raw
	}
	if err := tc.Validate(); err != nil {
		return nil, TaskOutput{}, toolErr(ToolCompleteTask, err)
	}
	t, err := h.c.Task(ctx, in.ID)
	if err != nil {
		return nil, TaskOutput{}, toolErr(ToolCompleteTask, err)
	}
	fence := t.Fence
	if t.State != api.TaskRunning || t.ClaimedBy != h.cfg.Agent {
		claim, err := h.c.ClaimTask(ctx, in.ID, h.cfg.Agent)
		if err != nil {
			return nil, TaskOutput{}, toolErr(ToolCompleteTask+": claim", err)
		}
		fence = claim.Fence
	}
	res, err := h.c.CompleteTask(ctx, api.TaskCompleteCommand{ID: in.ID, Agent: h.cfg.Agent, Fence: fence, Completion: tc})
	if err != nil {
		return nil, TaskOutput{}, toolErr(ToolCompleteTask, err)
	}
	out := TaskOutput{ID: res.ID, State: res.State}
	if res.State == api.TaskAwaitingApproval {
		// The approval's id is derived in apply: read it from the task.
		if t, err = h.c.Task(ctx, in.ID); err != nil {
			return nil, TaskOutput{}, toolErr(ToolCompleteTask+": the task is awaiting_approval, but reading its approval failed", err)
		}
		out.ApprovalID = t.ApprovalID
	}
	return nil, out, nil
}

// toolErr is the error a tool returns for a failed API call: the API's own
// message (which names the field or the conflict) prefixed by the tool, so
// the model can correct its call. The SDK turns it into an IsError result.
func toolErr(tool string, err error) error {
	var apiErr *api.APIError
	if errors.As(err, &apiErr) {
		return fmt.Errorf("%s: %s (%s)", tool, apiErr.Message, apiErr.Code)
	}
	return fmt.Errorf("%s: %w", tool, err)
}
