package transport

import (
	"net/http"

	"github.com/maos-project/maos/api"
)

// The A2A push notification endpoints (docs/A2A.md "Push notifications";
// the ops need cluster state version 3):
//
//	POST   /v1/tasks/{id}/push                 api.PushConfigSetCommand {from, config} → api.PushConfig (no credentials)
//	GET    /v1/tasks/{id}/push                 → api.PushConfigPage (no credentials; the creator or a moderator, else 404)
//	DELETE /v1/tasks/{id}/push/{config}?from=  → the deleted api.PushConfig
//	GET    /v1/push/tasks/{id}                 → api.PushConfigPage with credentials (admin: the deliverer's read)
//	GET    /v1/push/cursor                     → api.PushCursor (admin)
//	PUT    /v1/push/cursor                     api.PushCursorCommand → api.PushCursor (admin)
//
// A config's URL must be on this node's allowlist (ServerOptions.PushAllow,
// maosd --a2a-push-allow): else 400 naming config.url and the hosts
// allowed; with none, push notifications are off and every set is
// refused. Who may set or delete: the token acting as from (admit), and
// from must be the task's creator (fsm: 403 otherwise).

var (
	pushConfigSet = writeSpec[api.PushConfigSetCommand, *api.PushConfigSetCommand]{op: api.OpPushConfigSet,
		bind: pathID("task", func(c *api.PushConfigSetCommand) *string { return &c.Config.TaskID }),
		limits: func(s *Server, _ *http.Request, c *api.PushConfigSetCommand) error {
			return api.CheckPushURL(s.opts.PushAllow, c.Config.URL)
		},
		actor: func(c *api.PushConfigSetCommand) (string, string) { return "from", c.From }}
	pushCursorSet = writeSpec[api.PushCursorCommand, *api.PushCursorCommand]{op: api.OpPushCursor}
)

func (s *Server) listPushConfigs(w http.ResponseWriter, r *http.Request) {
	id, v := r.PathValue("id"), viewerFrom(r.Context())
	s.query(w, r, func(st Reader) (any, error) { return st.PushConfigs(id, v) })
}

// pushConfigsWithCredentials serves a task's configs with their
// credentials to an admin token (the route's rule): what the deliverer
// (a2ahost.Deliverer) needs. No other read carries them.
func (s *Server) pushConfigsWithCredentials(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.query(w, r, func(st Reader) (any, error) { return st.PushConfigsWithCredentials(id) })
}

func (s *Server) getPushCursor(w http.ResponseWriter, r *http.Request) {
	s.query(w, r, func(st Reader) (any, error) { return st.PushCursor() })
}

// deletePushConfig deletes config {config} of task {id} as ?from= (the
// route's rule let the token act as it).
func (s *Server) deletePushConfig(w http.ResponseWriter, r *http.Request) {
	if err := checkParams(r.URL.Query(), "from"); err != nil {
		s.writeError(w, r, err)
		return
	}
	cmd := api.PushConfigDeleteCommand{From: r.URL.Query().Get("from"), TaskID: r.PathValue("id"), ID: r.PathValue("config")}
	if err := cmd.Validate(); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.propose(w, r, api.OpPushConfigDelete, cmd)
}
