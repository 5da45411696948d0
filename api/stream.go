package api

// Stream event names. A "message" event's id is the message's seq (N) and
// its data the message JSON. Object events carry what an entry did to a
// task or an approval: a "task" event's data is TaskUpdate
// {"event","task"}, an "approval" event's ApprovalUpdate
// {"event","approval"}; the last object event of entry N a stream sends
// has the id N:task or N:approval (after its kind), which both mean
// "after all of N". "ready" (data {"seq":N}) is sent once, when the
// stream has sent every event stored when it opened.
const (
	EventMessage  = "message"
	EventTask     = "task"
	EventApproval = "approval"
	EventReady    = "ready"
)

// The stream's older ?tasks= values, from before approvals: task events
// interleaved with messages, task events alone, or messages alone (as
// ?events=message,task, ?events=task and ?events=message).
const (
	StreamTasksAll  = "all"
	StreamTasksOnly = "only"
	StreamTasksNone = "none"
)

// StreamQuery selects what a stream carries; see GET /v1/stream.
type StreamQuery struct {
	Agent   string // the agent's inbox, tasks and approvals ("" for none)
	Channel string // one channel ("" for all)
	After   uint64 // start after this seq; sent as Last-Event-ID
	// Resume, if set, is the Last-Event-ID to start after, winning over
	// After: the last non-empty StreamEvent.ID seen ("N", "N:task" or
	// "N:approval").
	Resume string
	// Events lists the kinds of event that come (EventMessage, EventTask,
	// EventApproval); when empty, Tasks says.
	Events []string
	// Tasks is the older form of Events: "" for messages alone (what a
	// stream carried before tasks), StreamTasksAll for task events
	// interleaved with messages, StreamTasksOnly for task events alone.
	Tasks string
}

// StreamEvent is one event of a stream: a message, a task update, an
// approval update, or Ready (with Seq the last index of the backlog) once
// the stream caught up.
type StreamEvent struct {
	Ready    bool
	Seq      uint64 // the message's seq, or the index of the update's entry
	Message  *Message
	Task     *TaskUpdate
	Approval *ApprovalUpdate
	// ID is the event's SSE id: "N" for a message, "N:task" or
	// "N:approval" for the last object update of entry N, "" for one that
	// is not its entry's last (resume from the last non-empty ID: no gap,
	// no repeat).
	ID string
}
