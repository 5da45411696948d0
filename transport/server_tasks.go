package transport

import (
	"fmt"
	"net/http"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/dialect"
)

// The task endpoints (fsm/task.go has the lifecycle and the fields):
//
//	POST /v1/tasks                    api.TaskCreateCommand → api.TaskResult {id, seq, state}
//	GET  /v1/tasks?state=&to=&from=&claimed_by=&after=&limit= → api.TaskPage {tasks, has_more}
//	GET  /v1/tasks/{id}               api.Task, with its history
//	POST /v1/tasks/{id}/claim         {agent} → api.TaskResult {state:"running", attempt, fence, lease_expires}
//	POST /v1/tasks/{id}/progress      {agent, fence, message, progress} → api.TaskResult (the lease renewed)
//	POST /v1/tasks/{id}/complete      {agent, fence, completion} → api.TaskResult
//	POST /v1/tasks/{id}/handoff       {agent, fence, to, reason} → api.TaskResult (ready, for the new assignee)
//	POST /v1/tasks/{id}/cancel        {from, reason} → api.TaskResult
//
// A body may repeat the path's id as "id"; another id is 400. Every write
// is validated (the command's Validate: 400 naming the field and the
// limit), admitted for the agent it acts as (agent, or from for create
// and cancel: a token acts only for its own agent, an admin for anyone),
// its text scanned for secrets (a create's title and description, a
// completion's result and rationale) and proposed. The state machine
// decides the rest: 409 for a claim another agent holds, a stale fence, a
// lapsed lease or a task that ended; 403 for a claimant outside the
// task's queue or a cancel by another than the creator; 404 for an
// unknown task or dependency.

// maxTaskBody caps a task request: a description or result and a context
// at their 64 KiB limits, with room for the other fields; small enough
// that the entry a follower forwards stays under the forwarded ceiling.
const maxTaskBody = 256 << 10

// taskBodyWhy ends a task request's 413.
const taskBodyWhy = " (a task's text and JSON fields are at most 64 KiB each)"

// The task writes, each one command through the one pipeline
// (pipeline.go): the path's id bound, the command validated, the agent it
// acts as admitted, the text guarded, the result answered.
var (
	taskCreate = writeSpec[api.TaskCreateCommand, *api.TaskCreateCommand]{op: api.OpTaskCreate,
		actor:  func(c *api.TaskCreateCommand) (string, string) { return "from", c.From },
		answer: answerTask}
	taskClaim = writeSpec[api.TaskClaimCommand, *api.TaskClaimCommand]{op: api.OpTaskClaim,
		bind:   pathID("task", func(c *api.TaskClaimCommand) *string { return &c.ID }),
		actor:  func(c *api.TaskClaimCommand) (string, string) { return "agent", c.Agent },
		answer: answerTask}
	taskProgress = writeSpec[api.TaskProgressCommand, *api.TaskProgressCommand]{op: api.OpTaskProgress,
		bind:   pathID("task", func(c *api.TaskProgressCommand) *string { return &c.ID }),
		actor:  func(c *api.TaskProgressCommand) (string, string) { return "agent", c.Agent },
		answer: answerTask}
	taskComplete = writeSpec[api.TaskCompleteCommand, *api.TaskCompleteCommand]{op: api.OpTaskComplete,
		bind:   pathID("task", func(c *api.TaskCompleteCommand) *string { return &c.ID }),
		actor:  func(c *api.TaskCompleteCommand) (string, string) { return "agent", c.Agent },
		answer: answerTask}
	taskHandoff = writeSpec[api.TaskHandoffCommand, *api.TaskHandoffCommand]{op: api.OpTaskHandoff,
		bind:   pathID("task", func(c *api.TaskHandoffCommand) *string { return &c.ID }),
		actor:  func(c *api.TaskHandoffCommand) (string, string) { return "agent", c.Agent },
		answer: answerTask}
	taskCancel = writeSpec[api.TaskCancelCommand, *api.TaskCancelCommand]{op: api.OpTaskCancel,
		bind:   pathID("task", func(c *api.TaskCancelCommand) *string { return &c.ID }),
		actor:  func(c *api.TaskCancelCommand) (string, string) { return "from", c.From },
		answer: answerTask}
)

func (s *Server) getTask(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.query(w, r, func(st Reader) (any, error) { return st.Task(id) })
}

func (s *Server) listTasks(w http.ResponseWriter, r *http.Request) {
	q, err := taskQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.query(w, r, func(st Reader) (any, error) {
		page, err := st.Tasks(q)
		if err == nil && page.Tasks == nil {
			page.Tasks = []*api.Task{}
		}
		return page, err
	})
}

// taskQuery reads GET /v1/tasks' parameters; a bad one is 400 naming it.
func taskQuery(r *http.Request) (api.TaskQuery, error) {
	v := r.URL.Query()
	q := api.TaskQuery{State: api.TaskState(v.Get("state")), To: v.Get("to"), From: v.Get("from"), ClaimedBy: v.Get("claimed_by")}
	var err error
	if q.After, q.Limit, err = pageParams(v); err != nil {
		return q, err
	}
	return q, q.Validate()
}

// Seed 004's task messages on POST /v1/messages (dialect.MapTask).

// TaskMessageResponse answers a seed 004 task_delegation or
// task_completion posted to POST /v1/messages: what it did to which task
// (Action "created" or "completed") and the task's state after it.
type TaskMessageResponse struct {
	Action string `json:"action"`
	api.TaskResult
}

// Actions of a TaskMessageResponse.
const (
	TaskActionCreated   = "created"
	TaskActionCompleted = "completed"
)

// sendTask serves a seed 004 task message: a delegation creates the task
// as POST /v1/tasks does; a completion, which carries no fence, completes
// it as POST /v1/tasks/{id}/complete does under the current claim's fence,
// and only when its sender (admitted first, as any sender) is the current
// claimant (409 otherwise): a strong read finds the claim, and the state
// machine still refuses it if the claim moved on before the entry.
func (s *Server) sendTask(w http.ResponseWriter, r *http.Request, tm *dialect.TaskMessage) {
	if tm.Create != nil {
		spec := taskCreate
		spec.answer = answerAs(taskDone, func(res api.TaskResult) any {
			return TaskMessageResponse{Action: TaskActionCreated, TaskResult: res}
		})
		spec.serve(s, w, r, tm.Create)
		return
	}
	cmd := *tm.Complete
	if !s.admit(w, r, "from_agent", cmd.Agent) {
		return
	}
	if err := s.prop.Linearize(r.Context(), api.Strong); err != nil {
		s.writeError(w, r, err)
		return
	}
	t, err := s.state.Task(cmd.ID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if t.State != api.TaskRunning || t.ClaimedBy != cmd.Agent {
		how := string(t.State)
		if t.ClaimedBy != "" {
			how += ", claimed by " + t.ClaimedBy
		}
		s.writeError(w, r, &api.APIError{Status: http.StatusConflict, Code: api.CodeConflict, Message: fmt.Sprintf(
			"task %s is %s: a task_completion without a fence is taken from the task's current claimant only (%s is not)",
			t.ID, how, cmd.Agent)})
		return
	}
	cmd.Fence = t.Fence
	res, ok := proposeResult(s, w, r, api.OpTaskComplete, cmd, taskDone)
	if ok {
		writeJSON(w, http.StatusOK, TaskMessageResponse{Action: TaskActionCompleted, TaskResult: res})
	}
}
