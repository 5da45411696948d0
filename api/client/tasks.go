package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/maos-project/maos/api"
)

// CreateTask creates a task (POST /v1/tasks) and returns its id, the
// entry's index and its first state (waiting, ready, or failed when a
// dependency already failed). Set cmd.ID (api.NewTaskID) before the first
// try so that a retry is stored once; without one the node picks it.
func (c *Client) CreateTask(ctx context.Context, cmd api.TaskCreateCommand) (api.TaskResult, error) {
	var out api.TaskResult
	err := c.do(ctx, http.MethodPost, "/v1/tasks", nil, cmd, &out)
	return out, err
}

// Task returns one task with its history (GET /v1/tasks/{id}), read with
// consistency=strong so it sees every write acknowledged before the call.
func (c *Client) Task(ctx context.Context, id string) (*api.Task, error) {
	var out api.Task
	if err := c.do(ctx, http.MethodGet, taskPath(id, ""), consQuery(api.Strong), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Tasks lists tasks in creation order, without their history (GET
// /v1/tasks), read with consistency=strong. Continue a page with
// q.After set to the last task's Seq while HasMore.
func (c *Client) Tasks(ctx context.Context, q api.TaskQuery) (api.TaskPage, error) {
	v := consQuery(api.Strong)
	for k, s := range map[string]string{"state": string(q.State), "to": q.To, "from": q.From, "claimed_by": q.ClaimedBy} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.After > 0 {
		v.Set("after", strconv.FormatUint(q.After, 10))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var out api.TaskPage
	err := c.do(ctx, http.MethodGet, "/v1/tasks", v, nil, &out)
	return out, err
}

// ClaimTask makes agent the task's claimant (POST /v1/tasks/{id}/claim):
// the result holds the attempt, the fence every later report names, and
// when the lease ends. A claim the agent already holds answers the same.
func (c *Client) ClaimTask(ctx context.Context, id, agent string) (api.TaskResult, error) {
	return c.ClaimTaskFenced(ctx, id, agent, 0)
}

// ClaimTaskFenced claims as ClaimTask does, under the fence of agent's
// agent lease (fsm/agent_lease.go): refused (api.ErrFenced) unless it is
// the current grant's. Fence 0 is ClaimTask.
func (c *Client) ClaimTaskFenced(ctx context.Context, id, agent string, agentFence uint64) (api.TaskResult, error) {
	return c.taskCommand(ctx, id, "claim", api.TaskClaimCommand{ID: id, Agent: agent, AgentFence: agentFence})
}

// TaskProgress reports progress under the claim's fence and renews the
// lease (POST /v1/tasks/{id}/progress).
func (c *Client) TaskProgress(ctx context.Context, cmd api.TaskProgressCommand) (api.TaskResult, error) {
	return c.taskCommand(ctx, cmd.ID, "progress", cmd)
}

// CompleteTask ends the task with the claimant's completion under its
// fence (POST /v1/tasks/{id}/complete). A retry with the same fence and
// completion answers the stored result.
func (c *Client) CompleteTask(ctx context.Context, cmd api.TaskCompleteCommand) (api.TaskResult, error) {
	return c.taskCommand(ctx, cmd.ID, "complete", cmd)
}

// HandoffTask gives the claimed task to cmd.To (POST
// /v1/tasks/{id}/handoff): it is ready again, for the new assignee.
func (c *Client) HandoffTask(ctx context.Context, cmd api.TaskHandoffCommand) (api.TaskResult, error) {
	return c.taskCommand(ctx, cmd.ID, "handoff", cmd)
}

// CancelTask cancels a task that has not ended (POST
// /v1/tasks/{id}/cancel); only its creator may (an admin token acts as
// the creator).
func (c *Client) CancelTask(ctx context.Context, cmd api.TaskCancelCommand) (api.TaskResult, error) {
	return c.taskCommand(ctx, cmd.ID, "cancel", cmd)
}

func (c *Client) taskCommand(ctx context.Context, id, verb string, body any) (api.TaskResult, error) {
	var out api.TaskResult
	err := c.do(ctx, http.MethodPost, taskPath(id, verb), nil, body, &out)
	return out, err
}

// taskPath is /v1/tasks/{id}, or /v1/tasks/{id}/{verb}.
func taskPath(id, verb string) string {
	p := "/v1/tasks/" + url.PathEscape(id)
	if verb != "" {
		p += "/" + verb
	}
	return p
}
