package fsm

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"go.etcd.io/bbolt"
)

// OpAuditDenial records refused API requests in the audit trail (body:
// AuditDenialCommand). A node proposes it after answering 401 (a bad
// token) or 403 (a token not allowed to do that); it writes nothing but
// the audit line. Nodes fold repeats into Count and bound how many they
// propose, so a flood of refused requests cannot flood the log.
const OpAuditDenial Op = "audit_denial"

// AuditDenied is the audit kind of a refused request.
const AuditDenied = "denied"

// Limits of an AuditDenialCommand: field lengths in bytes, and Count.
const (
	MaxDenialIDLen     = 128           // node, agent, token_id
	MaxDenialMethodLen = 16            // method
	MaxDenialPathLen   = 512           // path
	MaxDenialReasonLen = 512           // reason
	MaxDenialCount     = 1_000_000_000 // count
	MaxDenialPathShown = 200           // path bytes on the audit line
)

// AuditDenialCommand describes Count refused requests alike: who (the
// token's agent and id, when the token was known), what (method, path),
// why, and the node that refused them.
type AuditDenialCommand struct {
	Node    string `json:"node"`
	Agent   string `json:"agent,omitempty"`
	TokenID string `json:"token_id,omitempty"`
	Method  string `json:"method"`
	Path    string `json:"path"`
	Reason  string `json:"reason"`
	Count   int    `json:"count"` // ≥ 1: requests folded into this entry
}

// Validate bounds every field, naming the one at fault. Text fields must
// be valid UTF-8; the proposer cuts what a client sent to fit.
func (c *AuditDenialCommand) Validate() error {
	for _, f := range []struct {
		name, v string
		max     int
	}{
		{"node", c.Node, MaxDenialIDLen},
		{"agent", c.Agent, MaxDenialIDLen},
		{"token_id", c.TokenID, MaxDenialIDLen},
		{"method", c.Method, MaxDenialMethodLen},
		{"path", c.Path, MaxDenialPathLen},
		{"reason", c.Reason, MaxDenialReasonLen},
	} {
		if len(f.v) > f.max {
			return FieldErrorf(f.name, "%d bytes, at most %d", len(f.v), f.max)
		}
		if !utf8.ValidString(f.v) {
			return FieldErrorf(f.name, "not valid UTF-8")
		}
	}
	if c.Reason == "" {
		return FieldErrorf("reason", "required: why the request was refused")
	}
	if c.Count < 1 || c.Count > MaxDenialCount {
		return FieldErrorf("count", "%d is outside 1..%d", c.Count, MaxDenialCount)
	}
	return nil
}

// applyAuditDenial appends one DENIED line and returns the command.
func applyAuditDenial(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	var cmd AuditDenialCommand
	if err := decodeCommand(OpAuditDenial, body, &cmd); err != nil {
		return nil, err
	}
	audit(tx, index, ts, AuditEvent{Kind: AuditDenied, From: cmd.Agent, Label: "DENIED", Text: denialText(&cmd)})
	return &cmd, nil
}

// denialText renders the audit line's text: "POST /v1/messages: <reason>
// (token t1, node n1, 3 times)". The client's path has its control
// characters replaced and is cut, so a line stays one short line.
func denialText(c *AuditDenialCommand) string {
	p := strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return '?'
		}
		return r
	}, c.Path)
	if len(p) > MaxDenialPathShown {
		cut := MaxDenialPathShown
		for cut > 0 && !utf8.RuneStart(p[cut]) {
			cut--
		}
		p = p[:cut] + "…"
	}
	var b strings.Builder
	b.WriteString(strings.TrimSpace(c.Method + " " + p))
	b.WriteString(": " + c.Reason)
	var notes []string
	if c.TokenID != "" {
		notes = append(notes, "token "+c.TokenID)
	}
	if c.Node != "" {
		notes = append(notes, "node "+c.Node)
	}
	if c.Count > 1 {
		notes = append(notes, fmt.Sprintf("%d times", c.Count))
	}
	if len(notes) > 0 {
		b.WriteString(" (" + strings.Join(notes, ", ") + ")")
	}
	return b.String()
}
