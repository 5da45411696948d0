package transport

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/maos-project/maos/api"
)

// The one pass of a write whose body is a command. ServeHTTP and the
// route's pass (routes.go) have matched the route, resolved the caller and
// applied the route's rule; write then visits each remaining concern once,
// in this order:
//
//  1. decode: one JSON object into the command, at most the route's body
//     ceiling, unknown fields refused (decodeRouteBody);
//  2. bind: the path's values into the command (a body may repeat them,
//     never contradict them);
//  3. the command's own rules: Normalize where it has one, then Validate;
//  4. identity and authorization: the token must act as the agent the
//     command acts as (its actor; a route whose path names the agent has
//     that in its rule instead), and hold any authority the command asks
//     beyond that (authorize);
//  5. limits: the route's per-agent limit, charged only now, so a refused
//     request costs no token (4 and 5 are admit);
//  6. commit (commit.go): the free text the command declares checked, the
//     secret guard, names flagged, proposed;
//  7. answer: the state machine's result as the route answers it.
//
// Validation comes before the limits (the order put them the other
// way round) so that bad input never spends a sender's budget.

// command is what the pipeline needs of a command body type C: a pointer
// to it that checks itself.
type command[C any] interface {
	*C
	Validate() error
}

// writeSpec is a write route's command: the op it proposes and the few
// things that differ between commands. Zero fields mean "nothing".
type writeSpec[C any, P command[C]] struct {
	op api.Op
	// bind puts the path's values into the command (pathID, pathAgent).
	bind func(r *http.Request, c P) error
	// limits checks what the node allows one request (a send's
	// recipients), after the defaults and before the command's own rules.
	limits func(s *Server, r *http.Request, c P) error
	// actor is the body field naming the agent the command acts as, and
	// that agent; nil for routes whose rule checks the path's agent.
	actor func(c P) (field, agent string)
	// authorize asks for more than acting as the actor: "" allows, else
	// what it would need (403). Only with auth on.
	authorize func(id *Identity, c P) string
	// answer writes the result; nil answers the result as it is.
	answer func(s *Server, w http.ResponseWriter, r *http.Request, op api.Op, raw json.RawMessage)
}

// write is the handler of a route whose body is the command C (see the
// steps above).
func write[C any, P command[C]](s *Server, spec writeSpec[C, P]) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var c C
		if err := s.decodeRouteBody(w, r, P(&c)); err != nil {
			s.writeError(w, r, err)
			return
		}
		spec.serve(s, w, r, &c)
	}
}

// serve runs steps 2 to 7 on a decoded command: for write, and for
// POST /v1/messages, whose body the seed dialects decode into a task or an
// approval command (server.go).
func (spec writeSpec[C, P]) serve(s *Server, w http.ResponseWriter, r *http.Request, cmd P) {
	if spec.bind != nil {
		if err := spec.bind(r, cmd); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	normalize(cmd, s.opts.Now())
	if spec.limits != nil {
		if err := spec.limits(s, r, cmd); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	if err := cmd.Validate(); err != nil {
		s.writeError(w, r, err)
		return
	}
	if spec.actor != nil {
		if field, agent := spec.actor(cmd); !s.admit(w, r, field, agent) {
			return
		}
	}
	if spec.authorize != nil && s.auth != nil {
		id := IdentityFrom(r.Context())
		if need := spec.authorize(id, cmd); need != "" {
			s.auth.forbid(w, r, id, need)
			return
		}
	}
	raw, err := s.commit(r, spec.op, cmd)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if spec.answer == nil {
		writeRawJSON(w, raw)
		return
	}
	spec.answer(s, w, r, spec.op, raw)
}

// normalize applies a command's defaults, with the node's clock where it
// needs one.
func normalize(cmd any, now time.Time) {
	switch n := cmd.(type) {
	case interface{ Normalize(time.Time) }:
		n.Normalize(now)
	case interface{ Normalize() }:
		n.Normalize()
	}
}

// pathID binds POST /v1/{things}/{id}/VERB's id into the command's id
// field; noun names the thing in the 400.
func pathID[P any](noun string, field func(P) *string) func(*http.Request, P) error {
	return func(r *http.Request, c P) error {
		id, path := field(c), r.PathValue("id")
		if *id != "" && *id != path {
			return &api.FieldError{Field: "id", Reason: fmt.Sprintf("%q differs from the %s in the path, %q; leave it out", *id, noun, path)}
		}
		*id = path
		return nil
	}
}

// pathAgentInto binds /v1/agents/{id}/…'s agent into the command's agent
// field.
func pathAgentInto[P any](field func(P) *string) func(*http.Request, P) error {
	return func(r *http.Request, c P) error {
		a, path := field(c), r.PathValue("id")
		if *a != "" && *a != path {
			return &api.FieldError{Field: "agent", Reason: "differs from the agent in the path"}
		}
		*a = path
		return nil
	}
}

// answerAs answers the result decoded as a T and checked by ok (an id
// set), as body makes it (nil: the result itself): the task and approval
// routes' answer, and the seed messages' on POST /v1/messages.
func answerAs[T any](ok func(T) bool, body func(T) any) func(*Server, http.ResponseWriter, *http.Request, api.Op, json.RawMessage) {
	return func(s *Server, w http.ResponseWriter, r *http.Request, op api.Op, raw json.RawMessage) {
		var res T
		if err := json.Unmarshal(raw, &res); err != nil || !ok(res) {
			s.writeError(w, r, fmt.Errorf("transport: unexpected %s result %.200s (%v)", op, raw, err))
			return
		}
		if body == nil {
			writeJSON(w, http.StatusOK, res)
			return
		}
		writeJSON(w, http.StatusOK, body(res))
	}
}

// The checks of the task and approval routes' results.
var (
	taskDone     = func(r api.TaskResult) bool { return r.ID != "" }
	approvalDone = func(r api.ApprovalResult) bool { return r.ID != "" }
)

// The answers of the task and approval routes: their result, checked.
var (
	answerTask     = answerAs(taskDone, nil)
	answerApproval = answerAs(approvalDone, nil)
)
