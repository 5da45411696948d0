package transport

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/rules"
)

// The oversight endpoints: the communication rules, the audit trail and
// the supervisor's overview.
//
//	GET    /v1/rules                 → api.RulesState {"rules","default","index","updated_at"}
//	PUT    /v1/rules                 body: the rules document, JSON or YAML (Content-Type
//	                                 application/yaml or text/yaml) → api.RulesState
//	DELETE /v1/rules                 remove the document (everyone may message everyone) → api.RulesState
//	POST   /v1/rules/check           {"from","to","from_role","to_role"} or {"from","interrupt":true} → api.RulesCheck {"allowed","reason",...}
//	GET    /v1/audit?after=&limit=   → AuditResponse {"events":[{...,"line"}],"has_more"}
//	GET    /v1/overview?channel=&after=&limit= → api.OverviewPage {"messages":[...],"has_more"}
//
// A rules document is read by rules.Decode and checked whole before it is
// proposed: one that does not parse is 400 bad_request, one that breaks a
// rule 400 invalid naming the field ("agents[2].can_send_to[0]: bad glob
// ..."), one over rules.MaxBytes 413, and nothing changes. The format and
// the precedence of the rules are documented in package rules.

// RedactAudit hides what an event says about a private message: its text
// becomes fsm.PrivateText. It is what a reader on a node without
// authentication sees; an authenticated reader sees the whole event if it
// may read the message, else fsm.RedactEvent's line.
func RedactAudit(e api.AuditEvent) api.AuditEvent {
	if e.Private {
		e.Text = fsm.PrivateText
	}
	return e
}

func (s *Server) rulesGet(w http.ResponseWriter, r *http.Request) {
	s.query(w, r, func(st Reader) (any, error) { return st.Rules() })
}

func (s *Server) rulesPut(w http.ResponseWriter, r *http.Request) {
	format, err := rulesFormat(r.Header.Get("Content-Type"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, rules.MaxBytes))
	if err != nil {
		if errors.As(err, new(*http.MaxBytesError)) {
			err = &api.APIError{Status: http.StatusRequestEntityTooLarge, Code: api.CodeTooLarge,
				Message: fmt.Sprintf("rules document over the limit of %d bytes (256 KiB)", rules.MaxBytes)}
		} else {
			err = fmt.Errorf("%w: read the body: %v", api.ErrBadRequest, err)
		}
		s.writeError(w, r, err)
		return
	}
	doc, err := rules.Decode(data, format)
	if errors.Is(err, rules.ErrMalformed) {
		err = fmt.Errorf("%w: %w", api.ErrBadRequest, err)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	cmd := api.SetRulesCommand{Rules: doc}
	if err := cmd.Validate(); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.propose(w, r, api.OpSetRules, cmd)
}

func (s *Server) rulesDelete(w http.ResponseWriter, r *http.Request) {
	s.propose(w, r, api.OpSetRules, api.SetRulesCommand{Clear: true})
}

func (s *Server) rulesCheck(w http.ResponseWriter, r *http.Request) {
	var req api.RulesCheckRequest
	if err := decodeBody(w, r, maxControlBytes, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := req.Validate(); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.query(w, r, func(st Reader) (any, error) {
		if req.Interrupt {
			return st.CheckInterrupt(req.From, req.FromRole)
		}
		return st.CheckRules(req.From, req.FromRole, req.To, req.ToRole)
	})
}

func (s *Server) auditTrail(w http.ResponseWriter, r *http.Request) {
	after, limit, err := pageParams(r.URL.Query())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.query(w, r, func(st Reader) (any, error) {
		page, err := st.Audit(after, limit)
		if err != nil {
			return nil, err
		}
		out := api.AuditResponse{Events: make([]api.AuditEntry, len(page.Events)), HasMore: page.HasMore}
		v := viewerFrom(r.Context())
		for i, e := range page.Events {
			e = auditFor(v, e)
			out.Events[i] = api.AuditEntry{AuditEvent: e, Line: e.Line()}
		}
		return out, nil
	})
}

func (s *Server) overviewPage(w http.ResponseWriter, r *http.Request) {
	after, limit, err := pageParams(r.URL.Query())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	channel := r.URL.Query().Get("channel")
	if channel != "" && !api.ValidName(channel) {
		s.writeError(w, r, fmt.Errorf("%w: channel: %s", api.ErrBadRequest, api.NameRule(channel)))
		return
	}
	s.query(w, r, func(st Reader) (any, error) { return st.OverviewFor(viewerFrom(r.Context()), channel, after, limit) })
}

// rulesFormat tells from a Content-Type how a rules document is written:
// application/json (or none) is JSON; application/yaml, text/yaml and
// their x- forms are YAML; anything else is refused with 415.
func rulesFormat(contentType string) (rules.Format, error) {
	if contentType == "" {
		return rules.JSON, nil
	}
	mt, _, perr := mime.ParseMediaType(contentType)
	switch {
	case perr != nil:
	case mt == "application/json":
		return rules.JSON, nil
	case mt == "application/yaml" || mt == "application/x-yaml" || mt == "text/yaml" || mt == "text/x-yaml":
		return rules.YAML, nil
	}
	return rules.JSON, &api.APIError{Status: http.StatusUnsupportedMediaType, Code: api.CodeBadRequest,
		Message: fmt.Sprintf("Content-Type %q: send the rules as application/json, application/yaml or text/yaml", contentType)}
}
