package transport

import (
	"bytes"
	_ "embed"
	"net/http"
)

// openAPIDoc is the OpenAPI 3.1 description of this API: every route of
// the table with its parameters, bodies, answers, errors and access. It is
// generated (openapi_gen_test.go: go test ./transport -run
// TestOpenAPIDocument -update, which also writes docs/openapi.json), and
// TestOpenAPIMatchesRoutes holds it to the route table both ways.
//
//go:embed openapi.json
var openAPIDoc []byte

// OpenAPI returns the OpenAPI 3.1 document (JSON) that GET
// /v1/openapi.json serves.
func OpenAPI() []byte { return bytes.Clone(openAPIDoc) }

// openAPI serves GET /v1/openapi.json. It is public: the document holds
// nothing a caller could not learn from docs/API.md, and a client reads it
// to learn that the API wants a bearer token.
func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(openAPIDoc)
}
