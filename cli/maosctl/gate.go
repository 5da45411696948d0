package maosctl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/maos-project/maos/api"
)

// The gate policy: which of a coding agent's tool calls need a human
// approval before they run (docs/TASKS.md, "The gate"). A YAML file named by
// --gate or $MAOS_GATE_FILE:
//
//	gates:
//	  - tool: Bash                # the tool's name: a regexp, anchored
//	    match: 'git push|rm -rf'  # a regexp over the tool input's JSON (absent: every call)
//	    approvers: [alice, role:lead]
//	    quorum: 1                 # default 1
//	    timeout: 10m              # how long the hook waits (default 5m)
//	    expires: 1h               # how long the approval stays pending (default: the longer of 1h and timeout)
//
// The first gate that matches a call applies.

// envGateFile names the gate policy when --gate does not.
const envGateFile = "MAOS_GATE_FILE"

// Gate policy limits and defaults.
const (
	// gateDefaultTimeout is how long the hook waits for a decision when a
	// gate gives no timeout: under the 10 minutes Claude Code and Codex
	// give a command hook by default, so the hook answers before it is
	// killed.
	gateDefaultTimeout = 5 * time.Minute
	// gateMaxPolicyBytes bounds the policy file.
	gateMaxPolicyBytes = 1 << 20
)

// gatePolicy is a parsed gate policy.
type gatePolicy struct {
	File  string
	Gates []*gate
}

// gate is one entry of a policy.
type gate struct {
	Index     int    // position in the file, from 0
	ToolExpr  string // as written
	MatchExpr string // as written; "" matches every call of the tool
	tool      *regexp.Regexp
	match     *regexp.Regexp
	Approvers []string
	Quorum    int
	// Timeout is how long the hook waits for the decision; Expires how
	// long the approval stays pending on the cluster (at least Timeout),
	// so a retried call can still wait on it after the hook gave up.
	Timeout time.Duration
	Expires time.Duration
}

// gateYAML is one gate as the file writes it.
type gateYAML struct {
	Tool      string   `yaml:"tool"`
	Match     string   `yaml:"match"`
	Approvers []string `yaml:"approvers"`
	Quorum    int      `yaml:"quorum"`
	Timeout   string   `yaml:"timeout"`
	Expires   string   `yaml:"expires"`
}

type gateFileYAML struct {
	Gates []gateYAML `yaml:"gates"`
}

// loadGatePolicy reads and parses the policy at path. Every error names
// the file and, for a gate, the field: "gate policy FILE: gates[1].match:
// ...".
func loadGatePolicy(path string) (*gatePolicy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gate policy: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, gateMaxPolicyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("gate policy %s: %w", path, err)
	}
	if len(data) > gateMaxPolicyBytes {
		return nil, fmt.Errorf("gate policy %s: over %d bytes", path, gateMaxPolicyBytes)
	}
	p, err := parseGatePolicy(data)
	if err != nil {
		return nil, fmt.Errorf("gate policy %s: %w", path, err)
	}
	p.File = path
	return p, nil
}

// parseGatePolicy parses a policy document. Unknown keys are refused (a
// misspelt "approver" must not leave a gate without approvers), and so is
// a policy without gates.
func parseGatePolicy(data []byte) (*gatePolicy, error) {
	var doc gateFileYAML
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty: want gates: [{tool, match, approvers, quorum, timeout, expires}]")
		}
		// yaml.v3 names the Go type of an unknown field; say what is known.
		msg := strings.ReplaceAll(err.Error(), "\n", "")
		msg = strings.ReplaceAll(msg, " in type maosctl.gateYAML", " (want tool, match, approvers, quorum, timeout, expires)")
		msg = strings.ReplaceAll(msg, " in type maosctl.gateFileYAML", " (want gates)")
		msg = strings.ReplaceAll(msg, "[]maosctl.gateYAML", "a list of gates")
		msg = strings.ReplaceAll(msg, "maosctl.gateYAML", "a gate {tool, match, approvers, ...}")
		msg = strings.ReplaceAll(msg, "maosctl.gateFileYAML", "a policy {gates: [...]}")
		return nil, errors.New(msg)
	}
	if len(doc.Gates) == 0 {
		return nil, errors.New("gates: none: want at least one {tool, match, approvers}")
	}
	p := &gatePolicy{}
	for i, gy := range doc.Gates {
		g, err := gy.parse(i)
		if err != nil {
			return nil, err
		}
		p.Gates = append(p.Gates, g)
	}
	return p, nil
}

func (gy gateYAML) parse(i int) (*gate, error) {
	field := func(name string) string { return fmt.Sprintf("gates[%d].%s", i, name) }
	g := &gate{Index: i, ToolExpr: gy.Tool, MatchExpr: gy.Match, Approvers: gy.Approvers, Quorum: gy.Quorum}
	if strings.TrimSpace(gy.Tool) == "" {
		return nil, fmt.Errorf("%s: required: the tool's name, a regexp (e.g. Bash, or Edit|Write)", field("tool"))
	}
	var err error
	if g.tool, err = regexp.Compile(`^(?:` + gy.Tool + `)$`); err != nil {
		return nil, fmt.Errorf("%s: %q: %w", field("tool"), gy.Tool, err)
	}
	if gy.Match != "" {
		if g.match, err = regexp.Compile(gy.Match); err != nil {
			return nil, fmt.Errorf("%s: %q: %w", field("match"), gy.Match, err)
		}
	}
	if g.Quorum == 0 {
		g.Quorum = 1
	}
	g.Timeout = gateDefaultTimeout
	if gy.Timeout != "" {
		if g.Timeout, err = time.ParseDuration(gy.Timeout); err != nil || g.Timeout <= 0 {
			return nil, fmt.Errorf("%s: %q: want a positive duration such as 90s or 10m", field("timeout"), gy.Timeout)
		}
	}
	g.Expires = max(api.DefaultApprovalTimeout, g.Timeout)
	if gy.Expires != "" {
		if g.Expires, err = time.ParseDuration(gy.Expires); err != nil || g.Expires <= 0 {
			return nil, fmt.Errorf("%s: %q: want a positive duration such as 1h or 24h", field("expires"), gy.Expires)
		}
		if g.Expires < g.Timeout {
			return nil, fmt.Errorf("%s: %s is shorter than timeout %s: the approval would expire while the hook waits", field("expires"), g.Expires, g.Timeout)
		}
	}
	// The approvers, the quorum and the expiry are checked by the rules
	// the cluster applies to every approval request, so that a policy the
	// cluster would refuse is refused when it is read.
	probe := api.ApprovalRequestCommand{
		ID: "gate-policy-check", From: "gate", Approvers: g.Approvers, Quorum: g.Quorum,
		Title: "gate policy check", Action: json.RawMessage(`{}`), Timeout: api.ApprovalTimeout(g.Expires),
	}
	probe.Normalize(time.Time{})
	if err := probe.Validate(); err != nil {
		var fe *api.FieldError
		if errors.As(err, &fe) {
			name, _, _ := strings.Cut(fe.Field, "[")
			if name == "timeout" {
				return nil, fmt.Errorf("%s: %s", field("expires"), fe.Reason)
			}
			return nil, fmt.Errorf("%s: %s", field(fe.Field), fe.Reason)
		}
		return nil, fmt.Errorf("gates[%d]: %w", i, err)
	}
	return g, nil
}

// match returns the first gate that applies to a call of tool with input
// (the tool input's JSON; matched in canonical form), or nil.
func (p *gatePolicy) match(tool string, input json.RawMessage) *gate {
	text := gateInputText(input)
	for _, g := range p.Gates {
		if g.tool.MatchString(tool) && (g.match == nil || g.match.MatchString(text)) {
			return g
		}
	}
	return nil
}

// gateInputText is the text a gate's match runs over: the tool input's
// canonical JSON (keys sorted, no spaces, "<" and ">" as written), so a
// policy sees the same text whatever spacing the coding agent sent;
// "null" for no input.
func gateInputText(input json.RawMessage) string {
	if len(bytes.TrimSpace(input)) == 0 {
		return "null"
	}
	if canon, err := api.CanonicalJSON(input); err == nil {
		return string(canon)
	}
	return string(input)
}

// describe is the gate in words: "gate 1 (tool Bash, match git push)".
func (g *gate) describe() string {
	s := fmt.Sprintf("gate %d (tool %s", g.Index+1, g.ToolExpr)
	if g.MatchExpr != "" {
		s += ", match " + g.MatchExpr
	}
	return s + ")"
}
