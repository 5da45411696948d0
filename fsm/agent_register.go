package fsm

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

func applyRegisterAgent(tx *bbolt.Tx, index uint64, ts int64, body []byte) (any, error) {
	var cmd api.RegisterAgentCommand
	if err := json.Unmarshal(body, &cmd); err != nil {
		return nil, fmt.Errorf("fsm: apply register_agent: decode: %w", err)
	}
	cmd.Normalize()
	if err := cmd.Validate(); err != nil {
		return nil, fmt.Errorf("fsm: apply register_agent: %w", err)
	}
	prev, err := loadAgent(tx, cmd.ID)
	if err != nil {
		return nil, fmt.Errorf("fsm: apply register_agent: %w", err)
	}
	a := api.Agent{
		ID: cmd.ID, Role: cmd.Role, Capabilities: cmd.Capabilities, Description: cmd.Description, Node: cmd.Node,
		RegisteredAt: time.Unix(0, ts).UTC(), UpdatedAt: time.Unix(0, ts).UTC(), Index: index, A2A: cmd.A2A.View(),
	}
	if prev != nil {
		a.RegisteredAt = prev.RegisteredAt
	}
	putAgent(tx, prev, &a)
	putAgentA2A(tx, a.ID, cmd.A2A)
	text := "role " + a.Role
	if len(a.Capabilities) > 0 {
		text += ", capabilities " + strings.Join(a.Capabilities, ",")
	}
	if a.Node != "" {
		text += ", node " + a.Node
	}
	if a.A2A != nil {
		text += ", a2a " + a.A2A.URL // never the credential
	}
	audit(tx, index, ts, api.AuditEvent{Kind: AuditAgent, From: a.ID, Label: "REGISTER", Text: text})
	return &a, nil
}

// registerAgentVersion is the state version a register_agent body needs:
// 3 with an A2A remote (a build of 2 would drop it), else 1.
func registerAgentVersion(body any) int {
	var c *api.RegisterAgentCommand
	switch b := body.(type) {
	case *api.RegisterAgentCommand:
		c = b
	case api.RegisterAgentCommand:
		c = &b
	}
	if c != nil && c.A2A != nil {
		return 3
	}
	return 1
}
