package rules

import (
	"fmt"
	"strings"
)

// Limits and names of the rules document.
const (
	MaxBytes       = 256 << 10 // the document, as sent and as stored (JSON)
	MaxEntries     = 1000      // agents + allowed_interactions; forbidden + forbidden_interactions
	MaxSelectors   = 1000      // entries of one can_send_to, can_receive_from or interrupt list
	MaxSelectorLen = 128       // bytes of one selector
	MaxReasonLen   = 1024      // bytes of a forbidden entry's reason

	PresetHierarchical      = "hierarchical"
	DefaultOrchestratorRole = "orchestrator"
	Allow                   = "allow"
	Deny                    = "deny"
)

// Document is the communication-rules document as the operator writes it
// (see the package documentation for the format and the precedence). Its
// JSON form is what fsm stores and the API carries; Decode reads it from
// JSON or YAML, EncodeYAML writes it back.
type Document struct {
	// Preset is "" or "hierarchical".
	Preset string `json:"preset,omitempty"`
	// OrchestratorRole is the role the hierarchical preset routes through;
	// "" means DefaultOrchestratorRole. Only with the preset.
	OrchestratorRole string `json:"orchestrator_role,omitempty"`
	// Default is "allow", "deny" or "" (deny for an allowlist document,
	// allow for a document with forbidden entries only).
	Default string `json:"default,omitempty"`
	// Interrupt lists who may interrupt an agent (selectors, as in the
	// allow lists). nil says nothing: the roles master, orchestrator and
	// supervisor may (see MayInterrupt); an empty list lets nobody.
	Interrupt []string `json:"interrupt,omitzero"`
	// Agents lists per-subject allow lists.
	Agents []AgentRule `json:"agents,omitempty"`
	// AllowedInteractions is the seed form of Agents: subject → lists (the
	// entries' Agent is empty).
	AllowedInteractions map[string]AgentRule `json:"allowed_interactions,omitempty"`
	// Forbidden entries refuse a pair whatever the lists allow.
	Forbidden []ForbiddenRule `json:"forbidden,omitempty"`
	// ForbiddenInteractions is the seed name of Forbidden; both count.
	ForbiddenInteractions []ForbiddenRule `json:"forbidden_interactions,omitempty"`
	// RerouteBlockedTo, an agent id, receives the copy of a message the
	// rules block for a recipient instead of dropping it (seed 004's hub:
	// "reroute_blocked_to: orchestrator"). "" drops blocked copies.
	RerouteBlockedTo string `json:"reroute_blocked_to,omitempty"`
}

// AgentRule gives the allow lists of the agents its subject selects. A nil
// list says nothing; an empty one allows nobody.
type AgentRule struct {
	// Agent is the subject: an agent id, role:NAME, a glob or "*".
	Agent          string   `json:"agent,omitempty"`
	CanSendTo      []string `json:"can_send_to,omitzero"`
	CanReceiveFrom []string `json:"can_receive_from,omitzero"`
}

// ForbiddenRule refuses sends from the agents From selects to the agents
// To selects, with Reason as the sender's error and the audit line.
type ForbiddenRule struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Reason string `json:"reason,omitempty"`
}

// EffectiveDefault is what a pair the document says nothing about gets:
// Allow or Deny. A nil document allows.
func (d *Document) EffectiveDefault() string {
	switch {
	case d == nil:
		return Allow
	case d.Default != "":
		return d.Default
	case d.Preset != "" || len(d.Agents) > 0 || len(d.AllowedInteractions) > 0:
		return Deny
	default:
		return Allow
	}
}

// Summary is a one-line description for audit lines and the CLI:
// "preset hierarchical, 2 agent entries, 1 forbidden, default deny"; a
// document with an interrupt list adds "N interrupt entries", one with
// reroute_blocked_to "blocked rerouted to ID", before the default.
func (d *Document) Summary() string {
	var parts []string
	if d.Preset != "" {
		p := "preset " + d.Preset
		if d.OrchestratorRole != "" {
			p += " (orchestrator_role " + d.OrchestratorRole + ")"
		}
		parts = append(parts, p)
	}
	parts = append(parts,
		plural(len(d.Agents)+len(d.AllowedInteractions), "agent entry", "agent entries"),
		fmt.Sprintf("%d forbidden", len(d.Forbidden)+len(d.ForbiddenInteractions)))
	if d.Interrupt != nil {
		parts = append(parts, plural(len(d.Interrupt), "interrupt entry", "interrupt entries"))
	}
	if d.RerouteBlockedTo != "" {
		parts = append(parts, "blocked rerouted to "+d.RerouteBlockedTo)
	}
	parts = append(parts, "default "+d.EffectiveDefault())
	return strings.Join(parts, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// Validate checks the document: every field, selector and limit but the
// size of its JSON form (MaxBytes, the storer's to check). The error is a
// *FieldError naming the field by its path in the document.
func (d *Document) Validate() error {
	_, err := Compile(d)
	return err
}
