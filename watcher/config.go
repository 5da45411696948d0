// Package watcher hands each local agent's mail to its model CLI and posts
// the answer back into the cluster. A watcher streams its agent's inbox
// (GET /v1/stream?agent=A) after the agent's replicated cursor, decides per
// message whether it is meant for the agent, runs the configured command
// with a rendered prompt on stdin, posts the reply with an id derived from
// (agent, message id) so a re-post after a crash is harmless, and then
// moves the cursor past the message. It also claims and does the tasks of
// the agent's queues (task.go): the CLI runs under a renewed lease and
// its stdout, plain or seed 002 §6 JSON lines, is the completion.
package watcher

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"text/template"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/maos-project/maos/api"
)

// Defaults of an agent's configuration.
const (
	DefaultContextMessages = 10
	DefaultTimeout         = 5 * time.Minute
	DefaultRetries         = 3
	DefaultMaxThreadDepth  = 8
	DefaultMaxForks        = 4
)

// Delivery policies (the names a run-time policy uses too, fsm/policy_set.go;
// quiet has no YAML form) and delivery kinds.
const (
	PolicyQueue     = api.PolicyQueue
	PolicyInterrupt = api.PolicyInterrupt
	PolicyFork      = api.PolicyFork

	DeliveryCommand = "command"
	DeliveryTmux    = "tmux"
)

// File is a watcher configuration file: a top-level "agents:" list.
type File struct {
	Agents []AgentConfig `yaml:"agents"`
}

// AgentConfig configures one watched agent.
type AgentConfig struct {
	ID       string   `yaml:"id"`
	Role     string   `yaml:"role"`
	Channels []string `yaml:"channels"` // only these channels ("" / empty: all)
	// Command is the argv of the model CLI, e.g. ["claude","--print"]; the
	// prompt goes to its stdin.
	Command []string `yaml:"command"`
	// Prompt is a Go text/template over PromptData; DefaultPrompt if empty.
	Prompt          string            `yaml:"prompt"`
	ContextMessages *int              `yaml:"context_messages"` // default 10; 0 for none
	Timeout         Duration          `yaml:"timeout"`          // default 5m
	Retries         *int              `yaml:"retries"`          // default 3; attempts = 1 + retries
	Workdir         string            `yaml:"workdir"`
	Env             map[string]string `yaml:"env"`
	Match           Match             `yaml:"match"`
	Policy          Policy            `yaml:"policy"`
	Delivery        string            `yaml:"delivery"` // command (default) or tmux
	TmuxTarget      string            `yaml:"tmux_target"`
	// IdlePrompt and WorkingPrompt are the regexps (Go syntax) by which
	// the watcher of a tmux agent tells from its pane's last lines whether
	// it waits for input or works (PaneDetector); DefaultIdlePrompt and
	// DefaultWorkingPrompt if empty.
	IdlePrompt    string `yaml:"idle_prompt"`
	WorkingPrompt string `yaml:"working_prompt"`
	// InterruptKey is the tmux key (send-keys name: Escape, C-c, …) that
	// interrupts a tmux agent before an urgent message is typed
	// (queue.go); DefaultInterruptKey if empty.
	InterruptKey   string `yaml:"interrupt_key"`
	MaxThreadDepth int    `yaml:"max_thread_depth"` // default 8
	Guardrails     string `yaml:"guardrails"`       // text the default prompt includes
	// TokenFile holds the agent's own bearer token (maosctl token create
	// --agent ID) for a cluster run with --auth: the watcher's requests
	// for this agent carry it, and so does the model CLI (MAOS_TOKEN).
	// Without it the agent uses the watcher's client as given.
	TokenFile string `yaml:"token_file"`
	// Claim lists the task queues the agent takes work from besides the
	// tasks addressed to it: "role:NAME" (its own role) and
	// "capability:NAME" (registered as the agent's capabilities).
	Claim []string `yaml:"claim"`
	// SharedContextDir is the folder the artifacts a message or task
	// references are fetched into (SharedContext says the default).
	SharedContextDir string `yaml:"shared_context"`
	// LeaseTTL is the agent lease's ttl (lease.go): the same agent may be
	// configured on watchers of several nodes, one serves it and the
	// others take over within about this long after it stops renewing.
	// Default api.DefaultAgentLeaseTTL (10s), api.MinAgentLeaseTTL to
	// api.MaxAgentLeaseTTL.
	LeaseTTL Duration `yaml:"lease_ttl"`

	// Runner, set by a program (never in YAML), runs the agent's
	// invocations in process in place of Command (run.go's Runner): the
	// A2A relay's agents (package a2arelay). Command is then not needed.
	Runner Runner `yaml:"-"`
	// KeepRecord, set by a program, makes the watcher leave the agent's
	// registry record as it is rather than register the agent at start:
	// for an agent registered by someone else with what a watcher's
	// registration would erase (an A2A remote, api.RegisterAgentCommand.A2A).
	KeepRecord bool `yaml:"-"`
	// Skip, set by a program, is asked of each message after the for-us
	// test passed: a non-empty reason leaves the message unanswered (the
	// cursor passes it), as the match filters do. The A2A relay skips the
	// talk in its tasks' threads, which its runs read themselves.
	Skip func(m *api.Message) (reason string) `yaml:"-"`

	tmpl *template.Template
	pane PaneDetector
}

// Match holds the optional filters applied after the for-us test; an empty
// list admits everything.
type Match struct {
	Types      []string       `yaml:"types"`
	Priorities []api.Priority `yaml:"priorities"`
	From       []string       `yaml:"from"` // sender globs (path.Match syntax)
}

// Policy is how an agent's messages are delivered.
type Policy struct {
	Mode      string   `yaml:"mode"`       // queue (default), interrupt or fork
	IdleAfter Duration `yaml:"idle_after"` // queue: wait until no message arrived for this long
	MaxForks  int      `yaml:"max_forks"`  // fork: concurrent forks (A-fork-1..N), default 4
	// ForkDir holds the forks' working directories (fork.go); default
	// $TMPDIR/maos-forks/ID. Each fork's is emptied when it starts.
	ForkDir   string     `yaml:"fork_dir"`
	Overrides []Override `yaml:"overrides"`
}

// Override picks another mode for messages that match all its non-empty
// fields; the first matching override wins.
type Override struct {
	From     string       `yaml:"from"` // sender glob
	Priority api.Priority `yaml:"priority"`
	Tag      string       `yaml:"tag"`
	Mode     string       `yaml:"mode"`
}

// Duration is a time.Duration written as "90s", "5m" in YAML.
type Duration time.Duration

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return fmt.Errorf("want a duration such as \"90s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration such as \"90s\": %w", err)
	}
	*d = Duration(v)
	return nil
}

// ConfigError names the invalid field: "agents[1].policy.mode".
type ConfigError struct {
	Field  string
	Reason string
}

func (e *ConfigError) Error() string { return "watcher: config: " + e.Field + ": " + e.Reason }

// LoadFile reads and validates a configuration file.
func LoadFile(name string) (*File, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("watcher: config: %w", err)
	}
	return Parse(data)
}

// Parse decodes YAML (unknown fields are refused), fills the defaults and
// validates every agent; the error is a *ConfigError naming the field.
func Parse(data []byte) (*File, error) {
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("watcher: config: %w", err)
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return &f, nil
}

// Validate fills the defaults and checks every agent.
func (f *File) Validate() error {
	if len(f.Agents) == 0 {
		return &ConfigError{Field: "agents", Reason: "must list at least one agent"}
	}
	seen := map[string]bool{}
	for i := range f.Agents {
		a := &f.Agents[i]
		if err := a.validate(fmt.Sprintf("agents[%d]", i)); err != nil {
			return err
		}
		if seen[a.ID] {
			return &ConfigError{Field: fmt.Sprintf("agents[%d].id", i), Reason: fmt.Sprintf("%q is listed twice", a.ID)}
		}
		seen[a.ID] = true
	}
	return nil
}

func (a *AgentConfig) validate(p string) error {
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Field: p + "." + field, Reason: fmt.Sprintf(format, args...)}
	}
	for _, step := range []func(func(field, format string, args ...any) error) error{
		a.validateIdentity, a.validateDelivery, a.compilePane, a.validateLimits, a.validateMatch,
		a.validatePolicy, a.validateFork, a.validateOverrides, a.validateClaim, a.compilePrompt,
	} {
		if err := step(bad); err != nil {
			return err
		}
	}
	return nil
}

// validateIdentity checks the id, role (default api.DefaultRole) and channels.
func (a *AgentConfig) validateIdentity(bad func(field, format string, args ...any) error) error {
	if !api.ValidName(a.ID) {
		return bad("id", "%s", api.NameRule(a.ID))
	}
	if a.Role == "" {
		a.Role = api.DefaultRole
	}
	if !api.ValidName(a.Role) {
		return bad("role", "%s", api.NameRule(a.Role))
	}
	for j, c := range a.Channels {
		if !api.ValidName(c) {
			return bad(fmt.Sprintf("channels[%d]", j), "%s", api.NameRule(c))
		}
	}
	return nil
}

// validateDelivery checks the delivery (default command) and what it needs: a command, or a tmux target.
func (a *AgentConfig) validateDelivery(bad func(field, format string, args ...any) error) error {
	if a.Delivery == "" {
		a.Delivery = DeliveryCommand
	}
	switch a.Delivery {
	case DeliveryCommand:
		if a.Runner == nil && (len(a.Command) == 0 || a.Command[0] == "") {
			return bad("command", "is required (argv, e.g. [\"claude\", \"--print\"]) when delivery is command")
		}
	case DeliveryTmux:
		if a.TmuxTarget == "" {
			return bad("tmux_target", "is required (SESSION:WINDOW.PANE) when delivery is tmux")
		}
	default:
		return bad("delivery", "must be command or tmux (got %q)", a.Delivery)
	}
	return nil
}

// validateLimits defaults and checks context_messages, timeout, lease_ttl, retries and max_thread_depth.
func (a *AgentConfig) validateLimits(bad func(field, format string, args ...any) error) error {
	if a.ContextMessages == nil {
		n := DefaultContextMessages
		a.ContextMessages = &n
	}
	if *a.ContextMessages < 0 || *a.ContextMessages > 100 {
		return bad("context_messages", "must be 0..100 (got %d)", *a.ContextMessages)
	}
	if a.Timeout == 0 {
		a.Timeout = Duration(DefaultTimeout)
	}
	if a.Timeout < 0 {
		return bad("timeout", "must be positive (got %s)", time.Duration(a.Timeout))
	}
	if a.LeaseTTL == 0 {
		a.LeaseTTL = Duration(api.DefaultAgentLeaseTTL)
	}
	if d := time.Duration(a.LeaseTTL); d < api.MinAgentLeaseTTL || d > api.MaxAgentLeaseTTL {
		return bad("lease_ttl", "must be %s to %s (got %s)", api.MinAgentLeaseTTL, api.MaxAgentLeaseTTL, d)
	}
	if a.Retries == nil {
		n := DefaultRetries
		a.Retries = &n
	}
	if *a.Retries < 0 || *a.Retries > 10 {
		return bad("retries", "must be 0..10 (got %d)", *a.Retries)
	}
	if a.MaxThreadDepth == 0 {
		a.MaxThreadDepth = DefaultMaxThreadDepth
	}
	if a.MaxThreadDepth < 0 || a.MaxThreadDepth > 1000 {
		return bad("max_thread_depth", "must be 1..1000 (got %d)", a.MaxThreadDepth)
	}
	return nil
}

// validateMatch checks the match filters' priorities and sender globs.
func (a *AgentConfig) validateMatch(bad func(field, format string, args ...any) error) error {
	for j, pr := range a.Match.Priorities {
		if !api.ValidPriority(pr) {
			return bad(fmt.Sprintf("match.priorities[%d]", j), "must be one of %v (got %q)", api.Priorities, pr)
		}
	}
	for j, g := range a.Match.From {
		if _, err := path.Match(g, ""); err != nil {
			return bad(fmt.Sprintf("match.from[%d]", j), "bad glob %q: %v", g, err)
		}
	}
	return nil
}

// validatePolicy checks the policy's mode, idle_after and max_forks (defaulted).
func (a *AgentConfig) validatePolicy(bad func(field, format string, args ...any) error) error {
	if err := validMode(&a.Policy.Mode, true); err != nil {
		return bad("policy.mode", "%v", err)
	}
	if a.Policy.IdleAfter < 0 {
		return bad("policy.idle_after", "must not be negative")
	}
	if a.Policy.MaxForks == 0 {
		a.Policy.MaxForks = DefaultMaxForks
	}
	if a.Policy.MaxForks < 1 || a.Policy.MaxForks > 64 {
		return bad("policy.max_forks", "must be 1..64 (got %d)", a.Policy.MaxForks)
	}
	return nil
}

// validateOverrides checks each policy override: a mode and at least one of from, priority, tag.
func (a *AgentConfig) validateOverrides(bad func(field, format string, args ...any) error) error {
	for j := range a.Policy.Overrides {
		o := &a.Policy.Overrides[j]
		op := fmt.Sprintf("policy.overrides[%d].", j)
		if o.Mode == "" {
			return bad(op+"mode", "is required (queue, interrupt or fork)")
		}
		if err := validMode(&o.Mode, false); err != nil {
			return bad(op+"mode", "%v", err)
		}
		if o.From != "" {
			if _, err := path.Match(o.From, ""); err != nil {
				return bad(op+"from", "bad glob %q: %v", o.From, err)
			}
		}
		if o.Priority != "" && !api.ValidPriority(o.Priority) {
			return bad(op+"priority", "must be one of %v (got %q)", api.Priorities, o.Priority)
		}
		if o.From == "" && o.Priority == "" && o.Tag == "" {
			return bad(op[:len(op)-1], "needs from, priority or tag")
		}
	}
	return nil
}

// compilePrompt parses the prompt template (default DefaultPrompt).
func (a *AgentConfig) compilePrompt(bad func(field, format string, args ...any) error) error {
	src := a.Prompt
	if src == "" {
		src = DefaultPrompt
	}
	t, err := template.New(a.ID).Funcs(template.FuncMap{"join": strings.Join}).Option("missingkey=error").Parse(src)
	if err != nil {
		return bad("prompt", "%v", err)
	}
	a.tmpl = t
	return nil
}

// validateFork refuses a YAML that asks for forks the agent cannot run
// (CanFork): a tmux agent without a command, or an id too long for its
// fork names. A run-time fork policy for such an agent delivers as queue.
func (a *AgentConfig) validateFork(bad func(field, format string, args ...any) error) error {
	field := ""
	if a.Policy.Mode == PolicyFork {
		field = "policy.mode"
	}
	for j, o := range a.Policy.Overrides {
		if field == "" && o.Mode == PolicyFork {
			field = fmt.Sprintf("policy.overrides[%d].mode", j)
		}
	}
	switch {
	case field == "" || a.CanFork():
		return nil
	case len(a.Command) == 0:
		return bad(field, "agent %s: fork runs the agent's command as %s: a %s agent needs command too (a fork never types into the pane)",
			a.ID, api.ForkName(a.ID, 1), a.Delivery)
	default:
		return bad(field, "agent %s: its fork names (%s) are not valid agent ids: %s", a.ID, api.ForkName(a.ID, a.Policy.MaxForks),
			api.NameRule(api.ForkName(a.ID, a.Policy.MaxForks)))
	}
}

// validateClaim checks the claim entries: each a queue in fsm's assignee
// forms (api.RolePrefix or api.CapabilityPrefix and a valid name), a role
// only the agent's own (the API lets an agent claim no other role's
// tasks), none twice. A bare agent id is refused: an agent claims the
// tasks addressed to it anyway, and no other agent's.
func (a *AgentConfig) validateClaim(bad func(field, format string, args ...any) error) error {
	if len(a.Claim) > 0 && !a.DoesTasks() {
		return bad("claim", "agent %s: a %s agent's watcher runs no tasks (its session claims them with maosctl task claim); claim needs delivery %s",
			a.ID, a.Delivery, DeliveryCommand)
	}
	if n := len(a.Capabilities()); n > api.MaxCapabilities {
		return bad("claim", "agent %s: %d capability queues, at most %d", a.ID, n, api.MaxCapabilities)
	}
	for j, q := range a.Claim {
		field := fmt.Sprintf("claim[%d]", j)
		role, isRole := strings.CutPrefix(q, api.RolePrefix)
		capability, isCap := strings.CutPrefix(q, api.CapabilityPrefix)
		switch {
		case isRole && !api.ValidName(role):
			return bad(field, "agent %s: %q: the role %s", a.ID, q, api.NameRule(role))
		case isCap && !api.ValidName(capability):
			return bad(field, "agent %s: %q: the capability %s", a.ID, q, api.NameRule(capability))
		case isRole && role != a.Role:
			return bad(field, "agent %s: %q is not its role (%q): an agent claims only its own role's queue", a.ID, q, a.Role)
		case !isRole && !isCap:
			return bad(field, "agent %s: %q: want role:NAME or capability:NAME (tasks addressed to %s are claimed without an entry)", a.ID, q, a.ID)
		case slices.Contains(a.Claim[:j], q):
			return bad(field, "agent %s: %q is listed twice", a.ID, q)
		}
	}
	return nil
}

// compilePane compiles the pane detector of a tmux agent: its idle_prompt
// and working_prompt, or the defaults. Another agent has no pane, so
// either is refused there.
func (a *AgentConfig) compilePane(bad func(field, format string, args ...any) error) error {
	if a.Delivery != DeliveryTmux {
		for _, f := range []struct{ field, v string }{{"idle_prompt", a.IdlePrompt}, {"working_prompt", a.WorkingPrompt}, {"interrupt_key", a.InterruptKey}} {
			if f.v != "" {
				field := f.field
				return bad(field, "agent %s: only a tmux agent has a pane to read; %s needs delivery %s", a.ID, field, DeliveryTmux)
			}
		}
		return nil
	}
	if a.InterruptKey == "" {
		a.InterruptKey = DefaultInterruptKey
	}
	if !interruptKeyRE.MatchString(a.InterruptKey) {
		return bad("interrupt_key", "agent %s: %q is not a tmux key name (want letters, digits and dashes, at most 32: Escape, C-c, F1)", a.ID, a.InterruptKey)
	}
	idle, err := regexp.Compile(cmp.Or(a.IdlePrompt, DefaultIdlePrompt))
	if err != nil {
		return bad("idle_prompt", "agent %s: not a regexp: %v", a.ID, err)
	}
	working, err := regexp.Compile(cmp.Or(a.WorkingPrompt, DefaultWorkingPrompt))
	if err != nil {
		return bad("working_prompt", "agent %s: not a regexp: %v", a.ID, err)
	}
	a.pane = PaneDetector{Idle: idle, Working: working}
	return nil
}

// DefaultInterruptKey is the interrupt_key of a tmux agent that names
// none: ESC, which both Claude Code and Codex take as "stop this turn".
const DefaultInterruptKey = "Escape"

// interruptKeyRE is what an interrupt_key may be: one tmux key name, never
// text tmux would type literally.
var interruptKeyRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,31}$`)

// PaneDetector is how the watcher of a tmux agent reads its pane (the
// zero PaneDetector for another agent). Valid after Validate.
func (a *AgentConfig) PaneDetector() PaneDetector { return a.pane }

// DoesTasks reports whether the agent's watcher claims and runs its
// tasks: with delivery command. A tmux agent's session claims its own
// (maosctl task claim), so its delegations are typed into the pane like
// any mail.
func (a *AgentConfig) DoesTasks() bool { return a.Delivery == DeliveryCommand }

// Capabilities is what the watcher registers the agent with: the names of
// its capability:NAME claim entries, so the API lets it claim those queues.
func (a *AgentConfig) Capabilities() []string {
	var out []string
	for _, q := range a.Claim {
		if c, ok := strings.CutPrefix(q, api.CapabilityPrefix); ok {
			out = append(out, c)
		}
	}
	return out
}

// Queues is every task assignee the agent claims: its id, then its claim
// entries.
func (a *AgentConfig) Queues() []string {
	return append([]string{a.ID}, a.Claim...)
}

func validMode(m *string, fill bool) error {
	if *m == "" && fill {
		*m = PolicyQueue
	}
	switch *m {
	case PolicyQueue, PolicyInterrupt, PolicyFork:
		return nil
	}
	return errors.New("must be queue, interrupt or fork (got " + fmt.Sprintf("%q", *m) + ")")
}

// ModeFor returns the delivery mode for m: the first matching override's,
// else the agent's.
func (a *AgentConfig) ModeFor(m *api.Message) string {
	for _, o := range a.Policy.Overrides {
		if o.From != "" {
			if ok, _ := path.Match(o.From, m.From); !ok {
				continue
			}
		}
		if o.Priority != "" && o.Priority != m.Priority {
			continue
		}
		if o.Tag != "" && !slices.Contains(m.Tags, o.Tag) {
			continue
		}
		return o.Mode
	}
	return a.Policy.Mode
}
