package a2ahost

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
)

// MaxRPCBody caps a JSON-RPC request's body: room for a task's largest
// description and context (api.MaxTaskTextBytes, api.MaxTaskJSONBytes)
// in JSON's escapes. A longer body is a JSON-RPC parse error.
const MaxRPCBody = 1 << 20

// rpc answers POST /a2a/agents/{id}: A2A JSON-RPC (the SDK's handler) for
// agent id, whose methods call the API as the request's caller.
func (h *host) rpc(w http.ResponseWriter, r *http.Request) {
	h.serveRPC(w, r, func(a *agent) http.Handler { return a2asrv.NewJSONRPCHandler(a) })
}

// rpcV03 answers POST /a2a/agents/{id}/v0.3: the same methods for A2A 0.3
// clients, through the SDK's 0.3 JSON-RPC handler.
func (h *host) rpcV03(w http.ResponseWriter, r *http.Request) {
	h.serveRPC(w, r, func(a *agent) http.Handler { return a2av0.NewJSONRPCHandler(a) })
}

// serveRPC authenticates r and serves it with the transport handler of
// agent id for this request.
func (h *host) serveRPC(w http.ResponseWriter, r *http.Request, transport func(*agent) http.Handler) {
	r.Body = http.MaxBytesReader(w, r.Body, MaxRPCBody)
	c := h.local(r)
	// Authentication is HTTP's, before JSON-RPC: a missing or bad token
	// is the API's 401 with WWW-Authenticate, as A2A asks of transports.
	me, err := c.WhoAmI(r.Context())
	if err != nil {
		writeAPIError(w, err)
		return
	}
	a := &agent{id: r.PathValue("id"), c: c, sc: h.streaming(r), me: me, base: baseURL(r), pushAllow: h.opts.PushAllow}
	transport(a).ServeHTTP(w, r)
}

// agent is the a2asrv.RequestHandler of one maos agent for one request.
// Built: SendMessage, GetTask, CancelTask, ListTasks (list.go),
// SubscribeToTask and SendStreamingMessage (subscribe.go), the push
// config methods (push.go). GetExtendedAgentCard answers
// a2a.ErrExtendedCardNotConfigured.
type agent struct {
	id string
	c  *client.Client // unary calls, answers buffered
	sc *client.Client // streams (GET /v1/stream), answers piped
	me api.WhoAmI     // who the token is
	// base is the scheme and host the caller reached this node at: the
	// file parts' URLs (artifacts) are under it.
	base string
	// pushAllow is Options.PushAllow: empty, no push notifications.
	pushAllow []string
}

var _ a2asrv.RequestHandler = (*agent)(nil)

// GetTask answers the maos task req.ID as an A2A task, if its "to" is this
// agent; a task of another agent, or none, is a2a.ErrTaskNotFound.
func (a *agent) GetTask(ctx context.Context, req *a2a.GetTaskRequest) (*a2a.Task, error) {
	t, err := a.task(ctx, string(req.ID))
	if err != nil {
		return nil, err
	}
	return a.view(ctx, t), nil
}

// CancelTask cancels the maos task req.ID as the caller (maos lets its
// creator cancel it, or an admin token) and answers it after the cancel.
// Errors: a2a.ErrTaskNotFound as GetTask; a2a.ErrTaskNotCancelable for
// a task already final; the API's refusals (forbidden, unauthorized)
// wrapped.
func (a *agent) CancelTask(ctx context.Context, req *a2a.CancelTaskRequest) (*a2a.Task, error) {
	t, err := a.task(ctx, string(req.ID))
	if err != nil {
		return nil, err
	}
	if t.State.Final() {
		return nil, fmt.Errorf("%w: task %s is %s", a2a.ErrTaskNotCancelable, t.ID, t.State)
	}
	from, err := a.caller(req.Metadata)
	if err != nil {
		return nil, err
	}
	if _, err := a.c.CancelTask(ctx, api.TaskCancelCommand{ID: t.ID, From: from, Reason: "cancelled through A2A"}); err != nil {
		return nil, fromAPI(err)
	}
	if t, err = a.task(ctx, t.ID); err != nil {
		return nil, err
	}
	return a.view(ctx, t), nil
}

// task reads maos task id, if it is this agent's.
func (a *agent) task(ctx context.Context, id string) (*api.Task, error) {
	if api.CheckTaskRef(id) != nil {
		return nil, fmt.Errorf("%w: %q is not a maos task id", a2a.ErrTaskNotFound, id)
	}
	t, err := a.c.Task(ctx, id)
	if errors.Is(err, api.ErrNotFound) || (err == nil && t.To != a.id) {
		return nil, fmt.Errorf("%w: no task %s for agent %s", a2a.ErrTaskNotFound, id, a.id)
	}
	if err != nil {
		return nil, fromAPI(err)
	}
	return t, nil
}

// caller is who the request acts as: the agent its token is bound to, or,
// for an admin token or a node without --auth, the metadata key
// "maos_from". Error: a2a.ErrInvalidParams when neither names one.
func (a *agent) caller(meta map[string]any) (string, error) {
	if a.me.Agent != "" {
		return a.me.Agent, nil
	}
	if from, ok := meta[MetaFrom].(string); ok && from != "" {
		return from, nil
	}
	return "", fmt.Errorf("%w: this token speaks for no agent: name the sender in metadata %q", a2a.ErrInvalidParams, MetaFrom)
}

// MetaFrom is the metadata key (of the message or the request) naming the
// sender when the token is not an agent's (an admin token, or no --auth).
const MetaFrom = "maos_from"

// fromAPI maps an API error to the A2A error it is: unauthorized →
// a2a.ErrUnauthenticated, forbidden → a2a.ErrUnauthorized, invalid or
// bad request → a2a.ErrInvalidParams, not found → a2a.ErrTaskNotFound;
// anything else is returned as it is (INTERNAL_ERROR). The API's words
// are kept.
func fromAPI(err error) error {
	for _, m := range []struct{ maos, a2a error }{
		{api.ErrUnauthorized, a2a.ErrUnauthenticated},
		{api.ErrForbidden, a2a.ErrUnauthorized},
		{api.ErrSecretFound, a2a.ErrInvalidParams},
		{api.ErrInvalid, a2a.ErrInvalidParams},
		{api.ErrBadRequest, a2a.ErrInvalidParams},
		{api.ErrNotFound, a2a.ErrTaskNotFound},
	} {
		if errors.Is(err, m.maos) {
			return fmt.Errorf("%w: %w", m.a2a, err)
		}
	}
	return err
}

// GetExtendedAgentCard: the card is the same for every caller.
func (a *agent) GetExtendedAgentCard(context.Context, *a2a.GetExtendedAgentCardRequest) (*a2a.AgentCard, error) {
	return nil, a2a.ErrExtendedCardNotConfigured
}
