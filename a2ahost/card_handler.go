package a2ahost

import (
	"encoding/json"
	"net/http"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/maos-project/maos/api"
)

// card answers GET /a2a/agents/{id}/.well-known/agent-card.json: the
// card of the registered agent id, read through the API with the
// caller's token (so the API's auth decides who may read it). Errors are
// the API's: 401 without a valid token, 404 for an agent not registered.
func (h *host) card(w http.ResponseWriter, r *http.Request) {
	if card, ok := h.cardOf(w, r); ok {
		a2asrv.NewStaticAgentCardHandler(card).ServeHTTP(w, r)
	}
}

// cardV03 answers GET /a2a/agents/{id}/v0.3/.well-known/agent-card.json:
// the same card in the SDK's union of the 1.0 and 0.3 shapes (url,
// protocolVersion, preferredTransport, 0.3 security schemes), whose url
// is V03Path(id), for A2A 0.3 clients given the base URL V03Path(id). It
// is not the 1.0 card: the SDK's 1.0 parser refuses the 0.3 security
// schemes the union carries.
func (h *host) cardV03(w http.ResponseWriter, r *http.Request) {
	if card, ok := h.cardOf(w, r); ok {
		a2asrv.NewAgentCardHandler(a2av0.NewStaticAgentCardProducer(card)).ServeHTTP(w, r)
	}
}

// cardOf is the card of agent {id} as r's caller may read it, or false
// once the API's refusal is answered.
func (h *host) cardOf(w http.ResponseWriter, r *http.Request) (*a2a.AgentCard, bool) {
	id := r.PathValue("id")
	ag, err := h.local(r).Agent(r.Context(), id, api.Local)
	if err != nil {
		writeAPIError(w, err)
		return nil, false
	}
	card := Card(ag, baseURL(r)+AgentPath(id), h.opts.Version)
	card.Capabilities.PushNotifications = len(h.opts.PushAllow) > 0
	return card, true
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
