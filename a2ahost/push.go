package a2ahost

import (
	"context"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/maos-project/maos/api"
)

// The four push config methods map onto the API's push routes (POST,
// GET, DELETE /v1/tasks/{id}/push): the configs are replicated maos
// state, set and deleted by the task's creator (or an admin token, acting
// as the creator), read without credentials; the URL's host must be on
// the node's allowlist (Options.PushAllow). The Raft leader delivers
// (Deliverer). On a node without an allowlist every method, and a send
// carrying a push config, is a2a.ErrPushNotificationNotSupported.

// DefaultPushConfigID is the id of a push config that names none: setting
// another such config replaces it (a retried create does not add one).
const DefaultPushConfigID = "default"

// pushOn reports whether this node sends push notifications; else the
// error to answer.
func (a *agent) pushOn() error {
	if len(a.pushAllow) == 0 {
		return fmt.Errorf("%w: this node sends no push notifications (maosd --a2a-push-allow is not set); stream the task (SubscribeToTask)", a2a.ErrPushNotificationNotSupported)
	}
	return nil
}

// toPushConfig is A2A's config as maos's, for task.
func toPushConfig(task string, p *a2a.PushConfig) api.PushConfig {
	out := api.PushConfig{TaskID: task, ID: p.ID, URL: p.URL, Token: p.Token}
	if out.ID == "" {
		out.ID = DefaultPushConfigID
	}
	if p.Auth != nil && (p.Auth.Scheme != "" || p.Auth.Credentials != "") {
		out.Authentication = &api.PushAuthentication{Scheme: p.Auth.Scheme, Credentials: p.Auth.Credentials}
	}
	return out
}

// fromPushConfig is maos's config as A2A's (credentials as the read
// gave them: none).
func fromPushConfig(p api.PushConfig) *a2a.PushConfig {
	out := &a2a.PushConfig{TaskID: a2a.TaskID(p.TaskID), ID: p.ID, URL: p.URL, Token: p.Token}
	if p.Authentication != nil {
		out.Auth = &a2a.PushAuthInfo{Scheme: p.Authentication.Scheme, Credentials: p.Authentication.Credentials}
	}
	return out
}

// checkPush checks a config before anything is written: its fields and
// the allowlist. Error: a2a.ErrInvalidParams naming the field.
func (a *agent) checkPush(task string, p *a2a.PushConfig) (api.PushConfig, error) {
	if err := a.pushOn(); err != nil {
		return api.PushConfig{}, err
	}
	c := toPushConfig(task, p)
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("%w: %w", a2a.ErrInvalidParams, err)
	}
	if err := api.CheckPushURL(a.pushAllow, c.URL); err != nil {
		return c, fmt.Errorf("%w: %w", a2a.ErrInvalidParams, err)
	}
	return c, nil
}

// creator is who sets t's configs: the caller's agent, or for an admin
// token (or no auth) the task's creator, whom it may act as.
func (a *agent) creator(t *api.Task) string {
	if a.me.Agent != "" {
		return a.me.Agent
	}
	return t.From
}

// setPush sets c (checked) on task t as its creator.
func (a *agent) setPush(ctx context.Context, t *api.Task, c api.PushConfig) (*a2a.PushConfig, error) {
	c.TaskID = t.ID
	got, err := a.c.SetPushConfig(ctx, api.PushConfigSetCommand{From: a.creator(t), Config: c})
	if err != nil {
		return nil, fromAPI(err)
	}
	return fromPushConfig(got), nil
}

// CreateTaskPushConfig sets a push config of task req.TaskID (this
// agent's): its id, or DefaultPushConfigID, replaces one of the same id.
// Errors: a2a.ErrPushNotificationNotSupported without an allowlist;
// a2a.ErrInvalidParams for a bad field, a host not allowed or the
// per-task limit; a2a.ErrUnauthorized for a caller not the creator;
// a2a.ErrTaskNotFound.
func (a *agent) CreateTaskPushConfig(ctx context.Context, req *a2a.PushConfig) (*a2a.PushConfig, error) {
	c, err := a.checkPush(string(req.TaskID), req)
	if err != nil {
		return nil, err
	}
	t, err := a.task(ctx, string(req.TaskID))
	if err != nil {
		return nil, err
	}
	return a.setPush(ctx, t, c)
}

// GetTaskPushConfig answers config req.ID of task req.TaskID, without
// credentials (its creator or a moderator reads it; anyone else gets
// a2a.ErrTaskNotFound, as for a config not set).
func (a *agent) GetTaskPushConfig(ctx context.Context, req *a2a.GetTaskPushConfigRequest) (*a2a.PushConfig, error) {
	list, err := a.ListTaskPushConfigs(ctx, &a2a.ListTaskPushConfigRequest{TaskID: req.TaskID})
	if err != nil {
		return nil, err
	}
	id := req.ID
	if id == "" {
		id = DefaultPushConfigID
	}
	for _, c := range list.Configs {
		if c.ID == id {
			return c, nil
		}
	}
	return nil, fmt.Errorf("%w: task %s has no push config %q", a2a.ErrTaskNotFound, req.TaskID, id)
}

// ListTaskPushConfigs answers task req.TaskID's push configs (at most
// api.MaxPushConfigsPerTask: one page), without credentials.
func (a *agent) ListTaskPushConfigs(ctx context.Context, req *a2a.ListTaskPushConfigRequest) (*a2a.ListTaskPushConfigResponse, error) {
	if err := a.pushOn(); err != nil {
		return nil, err
	}
	if _, err := a.task(ctx, string(req.TaskID)); err != nil {
		return nil, err
	}
	page, err := a.c.PushConfigs(ctx, string(req.TaskID), api.Strong)
	if err != nil {
		return nil, fromAPI(err)
	}
	out := &a2a.ListTaskPushConfigResponse{Configs: []*a2a.PushConfig{}}
	for _, c := range page.Configs {
		out.Configs = append(out.Configs, fromPushConfig(c))
	}
	return out, nil
}

// DeleteTaskPushConfig deletes config req.ID of task req.TaskID as its
// creator. Errors as CreateTaskPushConfig's; a config not set is
// a2a.ErrTaskNotFound.
func (a *agent) DeleteTaskPushConfig(ctx context.Context, req *a2a.DeleteTaskPushConfigRequest) error {
	if err := a.pushOn(); err != nil {
		return err
	}
	t, err := a.task(ctx, string(req.TaskID))
	if err != nil {
		return err
	}
	if _, err := a.c.DeletePushConfig(ctx, t.ID, req.ID, a.creator(t)); err != nil {
		return fromAPI(err)
	}
	return nil
}
