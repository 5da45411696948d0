package rules

import (
	"bytes"
	"fmt"

	"gopkg.in/yaml.v3"
)

// yamlAgent, yamlForbidden and yamlDocument give the YAML form its field
// order; a list is a pointer so that an empty list ([]: nobody) is kept
// and a missing one (nothing said) is left out.
type yamlAgent struct {
	Agent          string    `yaml:"agent,omitempty"`
	CanSendTo      *[]string `yaml:"can_send_to,omitempty,flow"`
	CanReceiveFrom *[]string `yaml:"can_receive_from,omitempty,flow"`
}

type yamlForbidden struct {
	From   string `yaml:"from"`
	To     string `yaml:"to"`
	Reason string `yaml:"reason,omitempty"`
}

type yamlDocument struct {
	Preset                string               `yaml:"preset,omitempty"`
	OrchestratorRole      string               `yaml:"orchestrator_role,omitempty"`
	Default               string               `yaml:"default,omitempty"`
	RerouteBlockedTo      string               `yaml:"reroute_blocked_to,omitempty"`
	Interrupt             *[]string            `yaml:"interrupt,omitempty,flow"`
	Agents                []yamlAgent          `yaml:"agents,omitempty"`
	AllowedInteractions   map[string]yamlAgent `yaml:"allowed_interactions,omitempty"`
	Forbidden             []yamlForbidden      `yaml:"forbidden,omitempty"`
	ForbiddenInteractions []yamlForbidden      `yaml:"forbidden_interactions,omitempty"`
}

// EncodeYAML renders d as the YAML `maosctl rules get` prints, which
// Decode(…, YAML) reads back to the same document: the fields in the
// order of the package documentation, lists of selectors on one line,
// allowed_interactions by sorted subject. An empty document is "{}" with
// a comment, and a document without an interrupt list ends with a comment
// saying who may interrupt then.
func EncodeYAML(d *Document) ([]byte, error) {
	if d == nil {
		return nil, fieldErr("rules", "required")
	}
	list := func(l []string) *[]string {
		if l == nil {
			return nil
		}
		return &l
	}
	agent := func(a AgentRule) yamlAgent {
		return yamlAgent{Agent: a.Agent, CanSendTo: list(a.CanSendTo), CanReceiveFrom: list(a.CanReceiveFrom)}
	}
	forbidden := func(l []ForbiddenRule) []yamlForbidden {
		var out []yamlForbidden
		for _, f := range l {
			out = append(out, yamlForbidden(f))
		}
		return out
	}
	y := yamlDocument{Preset: d.Preset, OrchestratorRole: d.OrchestratorRole, Default: d.Default,
		Interrupt: list(d.Interrupt), Forbidden: forbidden(d.Forbidden), ForbiddenInteractions: forbidden(d.ForbiddenInteractions),
		RerouteBlockedTo: d.RerouteBlockedTo}
	for _, a := range d.Agents {
		y.Agents = append(y.Agents, agent(a))
	}
	if len(d.AllowedInteractions) > 0 {
		y.AllowedInteractions = map[string]yamlAgent{}
		for k, a := range d.AllowedInteractions {
			y.AllowedInteractions[k] = agent(a)
		}
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(y); err != nil {
		return nil, fmt.Errorf("rules: render as YAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("rules: render as YAML: %w", err)
	}
	out := buf.Bytes()
	if bytes.Equal(bytes.TrimSpace(out), []byte("{}")) {
		out = []byte("{}  # an empty document: everyone may message everyone\n")
	}
	if d.Interrupt == nil {
		out = append(out, "# no interrupt list: "+defaultInterruptWho+"\n"...)
	}
	return out, nil
}
