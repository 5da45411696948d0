package fsm

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// AuditDenied is the audit kind of a refused request.
const AuditDenied = "denied"

// applyAuditDenial appends one DENIED line and returns the command.
func applyAuditDenial(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	var cmd api.AuditDenialCommand
	if err := decodeCommand(api.OpAuditDenial, body, &cmd); err != nil {
		return nil, err
	}
	audit(tx, index, ts, api.AuditEvent{Kind: AuditDenied, From: cmd.Agent, Label: "DENIED", Text: denialText(&cmd)})
	return &cmd, nil
}

// denialText renders the audit line's text: "POST /v1/messages: <reason>
// (token t1, node n1, 3 times)". The client's path has its control
// characters replaced and is cut, so a line stays one short line.
func denialText(c *api.AuditDenialCommand) string {
	p := strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return '?'
		}
		return r
	}, c.Path)
	if len(p) > api.MaxDenialPathShown {
		cut := api.MaxDenialPathShown
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
