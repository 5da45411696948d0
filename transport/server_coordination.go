package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/maos-project/maos/api"
)

// The coordination endpoints: the global bulletin and advisory locks.
//
//	GET   /v1/bulletin          → api.Bulletin {"version","updated_at","updated_by","as_of","bulletin":{...}}
//	PUT   /v1/bulletin?by=ID    body: the whole document → api.BulletinResult
//	PATCH /v1/bulletin?by=ID    body: a JSON merge patch (RFC 7396) → api.BulletinResult
//	POST  /v1/locks             {"path","holder","ttl"} → api.LockResult (granted or extended)
//	POST  /v1/locks/renew       {"path","holder","token","ttl"} → api.LockResult
//	POST  /v1/locks/release     {"path","holder","token"} or {"path","force":true,"by"} → api.LockResult
//	GET   /v1/locks?prefix=&holder=&after=&limit= → api.LockPage
//	POST  /v1/locks/check       {"path","token"} → api.LockCheck
//
// Compare-and-set: a PUT or PATCH with "if_version": N in the body (a
// reserved key, not stored) or an If-Match: "N" header applies only if the
// bulletin is still at version N (0: never written); otherwise 409 with
// BulletinConflictBody, which carries the current version.
//
// A refused lock command (held by another, lease expired, stale token,
// not the holder) answers 409 with LockConflictBody: the error, the
// outcome and the lock as it stands. Invalid input is 400 naming the field
// and the limit; a renew or release of a path with no lock is 404.

// maxBulletinBody caps a PUT or PATCH body: the document limit plus room
// for formatting and if_version.
const maxBulletinBody = api.MaxBulletinBytes + 4<<10

// maxLockBody caps a lock request: a path of MaxLockPathLen bytes written
// entirely in \u escapes, and the other fields.
const maxLockBody = 16 << 10

func (s *Server) getBulletin(w http.ResponseWriter, r *http.Request) {
	s.query(w, r, func(st Reader) (any, error) { return st.Bulletin() })
}

func (s *Server) putBulletin(w http.ResponseWriter, r *http.Request)   { s.setBulletin(w, r, false) }
func (s *Server) patchBulletin(w http.ResponseWriter, r *http.Request) { s.setBulletin(w, r, true) }

// setBulletin serves PUT (merge false) and PATCH (merge true).
func (s *Server) setBulletin(w http.ResponseWriter, r *http.Request, merge bool) {
	cmd, err := bulletinRequest(w, r, merge)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// Every write names its author: ?by= (which the route's rule holds to
	// the token), else the token's agent.
	if cmd.By = author(IdentityFrom(r.Context()), cmd.By); cmd.By == "" {
		s.writeError(w, r, &api.FieldError{Field: "by", Reason: "required: name the agent writing the bulletin (?by=ID; maosctl bulletin --by ID or $MAOS_AGENT_ID); " +
			"a token of an agent names it by itself"})
		return
	}
	raw, err := s.commit(r, api.OpSetBulletin, cmd)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var res api.BulletinResult
	if err := json.Unmarshal(raw, &res); err != nil || len(res.Doc) == 0 {
		s.writeError(w, r, fmt.Errorf("transport: unexpected %s result %.200s (%v)", api.OpSetBulletin, raw, err))
		return
	}
	if res.Conflict {
		ifv := uint64(0)
		if cmd.IfVersion != nil {
			ifv = *cmd.IfVersion
		}
		writeJSON(w, http.StatusConflict, api.BulletinConflictBody{
			Error: &api.APIError{Code: api.CodeConflict, Message: fmt.Sprintf(
				"bulletin: if_version %d, but the bulletin is at version %d; read it again and retry", ifv, res.Version)},
			Version: res.Version,
		})
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// bulletinRequest reads a PUT or PATCH: the body is the document (or
// patch) itself, with the reserved key if_version taken out; If-Match and
// ?by= complete it.
func bulletinRequest(w http.ResponseWriter, r *http.Request, merge bool) (api.BulletinCommand, error) {
	cmd := api.BulletinCommand{Merge: merge, By: r.URL.Query().Get("by")}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBulletinBody))
	if errors.As(err, new(*http.MaxBytesError)) {
		return cmd, &api.APIError{Status: http.StatusRequestEntityTooLarge, Code: api.CodeTooLarge, Message: fmt.Sprintf(
			"request body over the limit of %d bytes (the bulletin is capped at %d bytes)", maxBulletinBody, api.MaxBulletinBytes)}
	}
	if err != nil {
		return cmd, fmt.Errorf("%w: read body: %v", api.ErrBadRequest, err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return cmd, fmt.Errorf("%w: empty body: want the bulletin as a JSON object", api.ErrBadRequest)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil || top == nil {
		return cmd, &api.FieldError{Field: "bulletin", Reason: "want one JSON object: " + jsonProblem(data, err)}
	}
	if v, ok := top[api.BulletinIfVersionKey]; ok {
		var n uint64
		if err := json.Unmarshal(v, &n); err != nil {
			return cmd, &api.FieldError{Field: api.BulletinIfVersionKey, Reason: fmt.Sprintf("%s is not a version (a whole number ≥ 0)", v)}
		}
		cmd.IfVersion = &n
		delete(top, api.BulletinIfVersionKey)
	}
	if h := r.Header.Get("If-Match"); h != "" {
		n, err := strconv.ParseUint(strings.Trim(strings.TrimPrefix(strings.TrimSpace(h), "W/"), `"`), 10, 64)
		if err != nil {
			return cmd, fmt.Errorf("%w: If-Match: %q is not a bulletin version like \"12\"", api.ErrBadRequest, h)
		}
		if cmd.IfVersion != nil && *cmd.IfVersion != n {
			return cmd, fmt.Errorf("%w: If-Match %d and if_version %d disagree", api.ErrBadRequest, n, *cmd.IfVersion)
		}
		cmd.IfVersion = &n
	}
	doc, err := json.Marshal(top)
	if err != nil {
		return cmd, fmt.Errorf("%w: %v", api.ErrBadRequest, err)
	}
	cmd.Doc = doc
	return cmd, cmd.Validate()
}

// jsonProblem says why data is not one JSON object.
func jsonProblem(data []byte, err error) string {
	var v any
	if json.Unmarshal(data, &v) != nil {
		if err == nil {
			return "malformed JSON"
		}
		return "malformed JSON: " + strings.TrimPrefix(err.Error(), "json: ")
	}
	switch v.(type) {
	case nil:
		return "got null"
	case []any:
		return "got an array"
	case string:
		return "got a string"
	case float64:
		return "got a number"
	case bool:
		return "got a boolean"
	}
	return "got something else"
}

// decodeLockBody decodes a lock request and validates it.
func decodeLockBody(w http.ResponseWriter, r *http.Request, v interface{ Validate() error }) error {
	if err := decodeBody(w, r, maxLockBody, v); err != nil {
		var apiErr *api.APIError
		if errors.As(err, &apiErr) && apiErr.Code == api.CodeTooLarge {
			apiErr.Message = fmt.Sprintf("request body over the limit of %d bytes (a lock path is at most %d bytes)", maxLockBody, api.MaxLockPathLen)
		}
		return err
	}
	return v.Validate()
}

// The lock writes, each one command through the one pipeline
// (pipeline.go): the holder (or, forcing a release, the one who forces)
// admitted; forcing needs a moderator or an admin.
var (
	lockAcquire = writeSpec[api.LockAcquireCommand, *api.LockAcquireCommand]{op: api.OpLockAcquire,
		actor:  func(c *api.LockAcquireCommand) (string, string) { return "holder", c.Holder },
		answer: answerLock}
	lockRenew = writeSpec[api.LockRenewCommand, *api.LockRenewCommand]{op: api.OpLockRenew,
		actor:  func(c *api.LockRenewCommand) (string, string) { return "holder", c.Holder },
		answer: answerLock}
	lockRelease = writeSpec[api.LockReleaseCommand, *api.LockReleaseCommand]{op: api.OpLockRelease,
		actor: func(c *api.LockReleaseCommand) (string, string) { return releaseActor(*c) },
		authorize: func(id *Identity, c *api.LockReleaseCommand) string {
			if c.Force {
				return mayOverride(id, "force-releases lock "+strconv.Quote(clip(c.Path, 64)))
			}
			return ""
		},
		answer: answerLock}
)

// answerLock answers a lock command's result: 200, or 409 with
// LockConflictBody when the state machine refused it.
func answerLock(s *Server, w http.ResponseWriter, r *http.Request, op api.Op, raw json.RawMessage) {
	var res api.LockResult
	if err := json.Unmarshal(raw, &res); err != nil || res.Outcome == "" {
		s.writeError(w, r, fmt.Errorf("transport: unexpected %s result %.200s (%v)", op, raw, err))
		return
	}
	if res.Refused() {
		writeJSON(w, http.StatusConflict, api.LockConflictBody{
			Error:   &api.APIError{Code: api.CodeConflict, Message: res.Message},
			Outcome: res.Outcome,
			Lock:    res.Lock,
		})
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) listLocks(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	lq := api.LockQuery{Prefix: q.Get("prefix"), Holder: q.Get("holder"), After: q.Get("after")}
	if lq.Holder != "" && !api.ValidName(lq.Holder) {
		s.writeError(w, r, fmt.Errorf("%w: holder: %q is not an agent id", api.ErrBadRequest, lq.Holder))
		return
	}
	for name, v := range map[string]string{"prefix": lq.Prefix, "after": lq.After} {
		if len(v) > api.MaxLockPathLen {
			s.writeError(w, r, fmt.Errorf("%w: %s: %d bytes, at most %d", api.ErrBadRequest, name, len(v), api.MaxLockPathLen))
			return
		}
	}
	limit, err := uintParam(q.Get("limit"), "limit", api.DefaultPageLimit, api.MaxPageLimit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	lq.Limit = int(limit)
	s.query(w, r, func(st Reader) (any, error) { return st.Locks(lq) })
}

func (s *Server) checkLock(w http.ResponseWriter, r *http.Request) {
	var cmd api.LockCheckCommand
	if err := decodeLockBody(w, r, &cmd); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.query(w, r, func(st Reader) (any, error) { return st.CheckLock(cmd.Path, cmd.Token) })
}
