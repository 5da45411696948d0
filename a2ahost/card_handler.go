package a2ahost

import (
	"encoding/json"
	"net/http"

	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/maos-project/maos/api"
)

// card answers GET /a2a/agents/{id}/.well-known/agent-card.json: the
// card of the registered agent id, read through the API with the
// caller's token (so the API's auth decides who may read it). Errors are
// the API's: 401 without a valid token, 404 for an agent not registered.
func (h *host) card(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ag, err := h.local(r).Agent(r.Context(), id, api.Local)
	if err != nil {
		writeAPIError(w, err)
		return
	}
	card := Card(ag, baseURL(r)+AgentPath(id), h.opts.Version)
	card.Capabilities.PushNotifications = len(h.opts.PushAllow) > 0
	a2asrv.NewStaticAgentCardHandler(card).ServeHTTP(w, r)
}

// writeAPIError answers err as the API would have: its status and body.
func writeAPIError(w http.ResponseWriter, err error) {
	ae := api.ToAPIError(err)
	if ae.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", "Bearer")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(ae.Status)
	_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: ae})
}
