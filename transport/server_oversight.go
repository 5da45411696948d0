package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"

	"github.com/maos-project/maos/fsm"
	"gopkg.in/yaml.v3"
)

// The oversight endpoints: the communication rules, the audit trail and
// the supervisor's overview.
//
//	GET    /v1/rules                 → fsm.RulesState {"rules","default","index","updated_at"}
//	PUT    /v1/rules                 body: the rules document, JSON or YAML (Content-Type
//	                                 application/yaml or text/yaml) → fsm.RulesState
//	DELETE /v1/rules                 remove the document (everyone may message everyone) → fsm.RulesState
//	POST   /v1/rules/check           {"from","to","from_role","to_role"} → fsm.RulesCheck {"allowed","reason",...}
//	GET    /v1/audit?after=&limit=   → AuditResponse {"events":[{...,"line"}],"has_more"}
//	GET    /v1/overview?channel=&after=&limit= → fsm.OverviewPage {"messages":[...],"has_more"}
//
// A rules document is checked whole before it is proposed: a bad one is
// 400 naming the field ("agents[2].can_send_to[0]: bad glob ..."), one over
// fsm.MaxRulesBytes 413, and nothing changes. The format and the precedence
// of the rules are documented in fsm/rules.go.

// AuditEntry is one event of the audit trail with its line in the seed
// format: "[2025-10-20T14:30:00Z] [orchestrator→triage] TASK_ASSIGN: Triage new issue #123".
type AuditEntry struct {
	fsm.AuditEvent
	Line string `json:"line"`
}

// AuditResponse is the body of GET /v1/audit: events with seq > after,
// oldest first.
type AuditResponse struct {
	Events  []AuditEntry `json:"events"`
	HasMore bool         `json:"has_more"`
}

// RulesCheckRequest is the body of POST /v1/rules/check. FromRole and
// ToRole, when given, replace the registered roles ("what if").
type RulesCheckRequest struct {
	From     string `json:"from"`
	To       string `json:"to"`
	FromRole string `json:"from_role,omitempty"`
	ToRole   string `json:"to_role,omitempty"`
}

// Validate checks the ids and roles are names.
func (q *RulesCheckRequest) Validate() error {
	for _, f := range []struct {
		name, v  string
		required bool
	}{{"from", q.From, true}, {"to", q.To, true}, {"from_role", q.FromRole, false}, {"to_role", q.ToRole, false}} {
		switch {
		case f.v == "" && f.required:
			return &fsm.FieldError{Field: f.name, Reason: "required: an agent id"}
		case f.v != "" && !fsm.ValidName(f.v):
			return &fsm.FieldError{Field: f.name, Reason: "must match ^[a-z0-9][a-z0-9._-]{0,63}$"}
		}
	}
	return nil
}

// RedactAudit hides what an event says about a private message: its text
// becomes fsm.PrivateText. It is what a reader on a node without
// authentication sees; an authenticated reader sees the whole event if it
// may read the message, else fsm.RedactEvent's line.
func RedactAudit(e fsm.AuditEvent) fsm.AuditEvent {
	if e.Private {
		e.Text = fsm.PrivateText
	}
	return e
}

func (s *Server) rulesGet(w http.ResponseWriter, r *http.Request) {
	s.query(w, r, func(st Reader) (any, error) { return st.Rules() })
}

func (s *Server) rulesPut(w http.ResponseWriter, r *http.Request) {
	asYAML, err := rulesFormat(r.Header.Get("Content-Type"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, fsm.MaxRulesBytes))
	if err != nil {
		if errors.As(err, new(*http.MaxBytesError)) {
			err = &APIError{Status: http.StatusRequestEntityTooLarge, Code: CodeTooLarge,
				Message: fmt.Sprintf("rules document over the limit of %d bytes (256 KiB)", fsm.MaxRulesBytes)}
		} else {
			err = fmt.Errorf("%w: read the body: %v", ErrBadRequest, err)
		}
		s.writeError(w, r, err)
		return
	}
	doc, err := ParseRules(data, asYAML)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	cmd := fsm.SetRulesCommand{Rules: doc}
	if err := cmd.Validate(); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.propose(w, r, fsm.OpSetRules, cmd)
}

func (s *Server) rulesDelete(w http.ResponseWriter, r *http.Request) {
	s.propose(w, r, fsm.OpSetRules, fsm.SetRulesCommand{Clear: true})
}

func (s *Server) rulesCheck(w http.ResponseWriter, r *http.Request) {
	var req RulesCheckRequest
	if err := decodeBody(w, r, maxControlBytes, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := req.Validate(); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.query(w, r, func(st Reader) (any, error) { return st.CheckRules(req.From, req.FromRole, req.To, req.ToRole) })
}

func (s *Server) auditTrail(w http.ResponseWriter, r *http.Request) {
	after, limit, err := oversightPageParams(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.query(w, r, func(st Reader) (any, error) {
		page, err := st.Audit(after, limit)
		if err != nil {
			return nil, err
		}
		out := AuditResponse{Events: make([]AuditEntry, len(page.Events)), HasMore: page.HasMore}
		v := viewerFrom(r.Context())
		for i, e := range page.Events {
			e = auditFor(v, e)
			out.Events[i] = AuditEntry{AuditEvent: e, Line: e.Line()}
		}
		return out, nil
	})
}

func (s *Server) overviewPage(w http.ResponseWriter, r *http.Request) {
	after, limit, err := oversightPageParams(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	channel := r.URL.Query().Get("channel")
	if channel != "" && !fsm.ValidName(channel) {
		s.writeError(w, r, fmt.Errorf("%w: channel: %q is not a channel name (^[a-z0-9][a-z0-9._-]{0,63}$)", ErrBadRequest, channel))
		return
	}
	s.query(w, r, func(st Reader) (any, error) { return st.OverviewFor(viewerFrom(r.Context()), channel, after, limit) })
}

// oversightPageParams reads ?after= (a seq, default 0) and ?limit= (1 to
// fsm.MaxPageLimit, default fsm.DefaultPageLimit).
func oversightPageParams(r *http.Request) (uint64, int, error) {
	q := r.URL.Query()
	after, err := uintParam(q.Get("after"), "after", 0, 1<<63)
	if err != nil {
		return 0, 0, err
	}
	limit, err := uintParam(q.Get("limit"), "limit", fsm.DefaultPageLimit, fsm.MaxPageLimit)
	if err != nil {
		return 0, 0, err
	}
	if limit == 0 {
		return 0, 0, fmt.Errorf("%w: limit: must be 1..%d", ErrBadRequest, fsm.MaxPageLimit)
	}
	return after, int(limit), nil
}

// rulesFormat tells from a Content-Type whether a rules document is YAML:
// application/json (or none) is JSON; application/yaml, text/yaml and
// their x- forms are YAML; anything else is refused with 415.
func rulesFormat(contentType string) (yamlInput bool, err error) {
	if contentType == "" {
		return false, nil
	}
	mt, _, perr := mime.ParseMediaType(contentType)
	switch {
	case perr != nil:
	case mt == "application/json":
		return false, nil
	case mt == "application/yaml" || mt == "application/x-yaml" || mt == "text/yaml" || mt == "text/x-yaml":
		return true, nil
	}
	return false, &APIError{Status: http.StatusUnsupportedMediaType, Code: CodeBadRequest,
		Message: fmt.Sprintf("Content-Type %q: send the rules as application/json, application/yaml or text/yaml", contentType)}
}

// ParseRules reads a rules document written in JSON or (yamlInput) YAML
// and validates it (see fsm.DecodeRules). A document that does not parse,
// is empty or holds several YAML documents is an error wrapping
// ErrBadRequest; one that parses but breaks a rule is a *fsm.FieldError
// naming the field by its path. The size limit (fsm.MaxRulesBytes) is the
// caller's to enforce.
func ParseRules(data []byte, yamlInput bool) (*fsm.RulesDocument, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("%w: empty rules document (to remove the rules, DELETE /v1/rules)", ErrBadRequest)
	}
	var v any
	if yamlInput {
		dec := yaml.NewDecoder(bytes.NewReader(data))
		if err := dec.Decode(&v); err != nil {
			hint := ""
			if strings.Contains(err.Error(), "did not find expected alphabetic or numeric character") {
				hint = ` (quote "*": unquoted, it starts a YAML alias)`
			}
			return nil, fmt.Errorf("%w: malformed YAML: %v%s", ErrBadRequest, err, hint)
		}
		var extra any
		if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: several YAML documents (---): send one", ErrBadRequest)
		}
		var err error
		if v, err = yamlTree(v, ""); err != nil {
			return nil, err
		}
	} else {
		dec := json.NewDecoder(bytes.NewReader(data))
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%w: malformed JSON: %v", ErrBadRequest, err)
		}
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: trailing data after the JSON document", ErrBadRequest)
		}
	}
	return fsm.DecodeRules(v)
}

// yamlTree turns the maps yaml.v3 decodes with non-string keys into the
// map[string]any tree fsm.DecodeRules reads, refusing keys that are not
// strings.
func yamlTree(v any, path string) (any, error) {
	at := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			t, err := yamlTree(e, at(k))
			if err != nil {
				return nil, err
			}
			x[k] = t
		}
		return x, nil
	case map[any]any:
		var bad []string
		for k := range x {
			if _, ok := k.(string); !ok {
				bad = append(bad, fmt.Sprint(k))
			}
		}
		if len(bad) > 0 {
			slices.Sort(bad) // the same error every time
			if path == "" {
				path = "rules"
			}
			return nil, &fsm.FieldError{Field: path, Reason: fmt.Sprintf("key %s is not a string (quote it)", bad[0])}
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			ks := k.(string)
			t, err := yamlTree(e, at(ks))
			if err != nil {
				return nil, err
			}
			out[ks] = t
		}
		return out, nil
	case []any:
		for i, e := range x {
			t, err := yamlTree(e, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			x[i] = t
		}
		return x, nil
	default:
		return v, nil
	}
}
