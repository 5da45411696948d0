package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/maos-project/maos/api"
)

// SetPushConfig sets (adds or replaces) a push notification config of
// task cmd.Config.TaskID as cmd.From, its creator (POST
// /v1/tasks/{id}/push): the config as stored, without credentials.
// Errors: api.ErrInvalid (a field, the per-task limit, or a URL not on the
// node's --a2a-push-allow), api.ErrForbidden (not the creator),
// api.ErrNotFound (no such task), a cluster below version 3 (409).
func (c *Client) SetPushConfig(ctx context.Context, cmd api.PushConfigSetCommand) (api.PushConfig, error) {
	return request[api.PushConfig](ctx, c, http.MethodPost, taskPath(cmd.Config.TaskID, "push"), nil, cmd)
}

// PushConfigs returns task's push notification configs without
// credentials (GET /v1/tasks/{id}/push): for its creator or a
// moderator; api.ErrNotFound for anyone else.
func (c *Client) PushConfigs(ctx context.Context, task string, cons api.Consistency) (api.PushConfigPage, error) {
	return request[api.PushConfigPage](ctx, c, http.MethodGet, taskPath(task, "push"), consQuery(cons), nil)
}

// DeletePushConfig deletes config id of task as from, its creator
// (DELETE /v1/tasks/{id}/push/{config}?from=): the deleted config.
func (c *Client) DeletePushConfig(ctx context.Context, task, id, from string) (api.PushConfig, error) {
	return request[api.PushConfig](ctx, c, http.MethodDelete, taskPath(task, "push/"+url.PathEscape(id)), url.Values{"from": {from}}, nil)
}

// PushConfigsWithCredentials returns task's push configs with their
// credentials (GET /v1/push/tasks/{id}): admin tokens only, the
// deliverer's read. Its Index is the applied index the node read at.
func (c *Client) PushConfigsWithCredentials(ctx context.Context, task string) (api.PushConfigPage, error) {
	return request[api.PushConfigPage](ctx, c, http.MethodGet, "/v1/push/tasks/"+url.PathEscape(task), nil, nil)
}

// PushCursor returns the push deliverer's replicated cursor (GET
// /v1/push/cursor, admin only).
func (c *Client) PushCursor(ctx context.Context, cons api.Consistency) (api.PushCursor, error) {
	return request[api.PushCursor](ctx, c, http.MethodGet, "/v1/push/cursor", consQuery(cons), nil)
}

// SetPushCursor moves the cursor to index (PUT /v1/push/cursor, admin
// only); a lower index changes nothing. The cursor as stored.
func (c *Client) SetPushCursor(ctx context.Context, index uint64) (api.PushCursor, error) {
	return request[api.PushCursor](ctx, c, http.MethodPut, "/v1/push/cursor", nil, api.PushCursorCommand{Index: index})
}
