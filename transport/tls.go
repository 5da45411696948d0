package transport

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/maos-project/maos/api"
)

// requireNodeCert refuses, over TLS, a node-to-node request -- anything
// under /v1/internal/, POST /v1/cluster/join, or a request carrying
// HeaderForwarded -- that did not present a client certificate verified
// against the CA (the API accepts connections without one, for agents).
// Plain-HTTP requests are left alone: a node without TLS has no
// certificates to check.
func requireNodeCert(r *http.Request) error {
	if r.TLS == nil || len(r.TLS.VerifiedChains) > 0 {
		return nil
	}
	if !strings.HasPrefix(r.URL.Path, "/v1/internal/") &&
		!(r.Method == http.MethodPost && r.URL.Path == "/v1/cluster/join") &&
		r.Header.Get(api.HeaderForwarded) == "" {
		return nil
	}
	return &api.APIError{Status: http.StatusForbidden, Code: api.CodeForbidden, Message: fmt.Sprintf(
		"%s %s is a node-to-node request: over TLS it needs a client certificate signed by the cluster CA "+
			"(the calling node's --tls-cert and --tls-key), and none was presented", r.Method, r.URL.Path)}
}
