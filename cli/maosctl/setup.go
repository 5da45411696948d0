package maosctl

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
)

// setupGateMargin is how much longer than the longest gate's timeout the
// tool-call hook may run before its CLI stops it.
const setupGateMargin = time.Minute

func setupCommand() *cli.Command {
	return &cli.Command{
		Name:  "setup",
		Usage: "wire maos's hooks, MCP server and status line into Claude Code's, Codex's or Gemini CLI's own settings",
		UsageText: `maosctl setup claude-code|codex|gemini --agent A [--scope user|project] [--gate FILE] [--dry-run] [--remove]

   maosctl setup claude-code --agent claude --dry-run      # show the change as a diff
   maosctl setup claude-code --agent claude                # ~/.claude/settings.json and ~/.claude.json
   maosctl setup codex --agent codex --scope project --dir ~/src/app --addr 10.0.0.2:7070 --token-file ~/.config/maos/codex.token
   maosctl setup gemini --agent gemini --gate ~/.config/maos/gates.yaml
   maosctl setup gemini --agent gemini --remove            # take maos's entries out again`,
		Description: `Writes into the coding agent's own settings what docs/agents/*.md show
by hand: the hooks ('maosctl hook CLI --agent A' on each event that
matters), the MCP server "maos" ('maosctl mcp --agent A') and, for Claude
Code, the status line ('maosctl status-line --agent A'):

   claude-code  hooks, statusLine: ~/.claude/settings.json  (project: DIR/.claude/settings.json)
                mcpServers.maos:   ~/.claude.json           (project: DIR/.mcp.json)
   codex        hooks:             ~/.codex/hooks.json      (project: DIR/.codex/hooks.json)
                mcp_servers.maos:  ~/.codex/config.toml     (project: DIR/.codex/config.toml)
   gemini       hooks, mcpServers: ~/.gemini/settings.json  (project: DIR/.gemini/settings.json)

DIR is --dir, else the current directory. Every command written starts
with the maosctl binary (--maosctl, default this one), then --addr,
--token-file and the global --ca when given (flag or $MAOS_ADDR,
$MAOS_TOKEN_FILE, $MAOS_CA): the token's FILE, never the token. With
--gate FILE the tool-call event (PreToolUse, Gemini's BeforeTool) runs
the gate too, for every tool, with a timeout a minute above the policy's
longest gate timeout.

What is there stays: other hooks (another tool's on the same event too),
other MCP servers, every other setting, in their order (a JSON file is
written back indented by two spaces; config.toml is edited as text). A
status line of another program is left alone, with a note. maos's own
entries are recognized by their command (maosctl, then "hook" or
"status-line") and the MCP server by its name, so a second run changes
nothing and --remove takes out only those. A file that is not valid JSON
(TOML) is refused, naming the file and line, and nothing is written.
Files are replaced atomically, keeping their mode; missing directories
are made.

Codex runs hooks only with [features] hooks = true in config.toml, and
Gemini CLI only with its hooks system on (docs/agents/*.md): setup notes
it rather than changing those switches. --json prints, per file, what
was added and removed (and the diff under --dry-run).`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "agent", Usage: "agent `ID` the coding agent works as (required)", EnvVars: []string{envAgent}},
			&cli.StringFlag{Name: "scope", Usage: "`SCOPE`: user (the settings in your home directory) or project (under --dir)", Value: "user"},
			&cli.StringFlag{Name: "dir", Usage: "project `DIR` for --scope project (default: the current directory)"},
			&cli.StringFlag{Name: "addr", Usage: "node `HOST:PORT` the written commands use (default: none, so the agent's $MAOS_ADDR or 127.0.0.1:7070)", EnvVars: []string{envAddr}},
			&cli.StringFlag{Name: "token-file", Usage: "token `FILE` the written commands read (its path is written, never the token)", EnvVars: []string{envTokenFile}},
			&cli.StringFlag{Name: "gate", Usage: "gate policy `FILE` for the tool-call hook (checked now)", EnvVars: []string{envGateFile}},
			&cli.StringFlag{Name: "maosctl", Usage: "maosctl binary `PATH` the written commands run (default: this binary; maosctl: the one on the agent's PATH, for settings a project shares)"},
			&cli.BoolFlag{Name: "dry-run", Usage: "print the change as a unified diff and write nothing"},
			&cli.BoolFlag{Name: "remove", Usage: "take maos's hooks, MCP server and status line out, leave the rest"},
			jsonFlag(),
		},
		Action: setup,
	}
}

// setupSpec is what one run of setup wants.
type setupSpec struct {
	d       hookDialect
	project bool
	root    string // the home directory, or the project's
	bin     string
	agent   string
	globals []string // the global flags every command carries
	gate    string
	timeout time.Duration // the gated hook's, 0 without a gate
	remove  bool
}

// setupFile is one settings file and how setup edits it.
type setupFile struct {
	Path string
	// edit is the file's new content from its old (nil: none yet).
	edit func(old []byte, ch *setupChange) ([]byte, error)
}

// setupCLIs are the coding agents setup knows, by hook dialect name.
var setupCLIs = map[string]func(s setupSpec) []setupFile{
	"claude-code": setupClaude,
	"codex":       setupCodex,
	"gemini":      setupGemini,
}

func setup(c *cli.Context) error {
	args, err := positionalArgs(c, "cli")
	if err != nil {
		return err
	}
	plan, ok := setupCLIs[args[0]]
	if !ok {
		return usagef(c, "unknown CLI %q: want one of %s", args[0], strings.Join(hookDialectNames(), ", "))
	}
	s, err := setupSpecOf(c, hookDialects[args[0]])
	if err != nil {
		return err
	}
	res, err := setupPlan(plan(s))
	if err != nil {
		return err
	}
	if bearerToken(c) != "" && setupFlag(c, "token-file") == "" && !s.remove {
		res[0].Notes = append(res[0].Notes, "the commands carry no token (setup never writes one): give --token-file FILE "+
			"to have them read it, or give the agent $MAOS_TOKEN_FILE")
	}
	if !c.Bool("dry-run") {
		if err := setupWrite(res); err != nil {
			return err
		}
	}
	return printSetup(c, s, res)
}

// setupSpecOf reads setup's flags.
func setupSpecOf(c *cli.Context, d hookDialect) (setupSpec, error) {
	s := setupSpec{d: d, remove: c.Bool("remove"), agent: strings.TrimSpace(c.String("agent"))}
	if err := require(c, "agent"); err != nil {
		return s, err
	}
	if !api.ValidName(s.agent) {
		return s, usagef(c, "--agent %q is not an agent id", s.agent)
	}
	switch c.String("scope") {
	case "user":
		home, err := os.UserHomeDir()
		if err != nil {
			return s, fmt.Errorf("--scope user: %w", err)
		}
		s.root = home
	case "project":
		s.project, s.root = true, c.String("dir")
	default:
		return s, usagef(c, "--scope %q: want user or project", c.String("scope"))
	}
	var err error
	if s.root, err = filepath.Abs(s.root); err != nil {
		return s, err
	}
	if s.bin = c.String("maosctl"); s.bin == "" {
		if s.bin, err = os.Executable(); err != nil {
			return s, fmt.Errorf("the maosctl binary: %w; give --maosctl PATH", err)
		}
	}
	if a := setupFlag(c, "addr"); a != "" {
		if err := checkAddr("--addr", a); err != nil {
			return s, usagef(c, "%v", err)
		}
		s.globals = append(s.globals, "--addr", a)
	}
	for _, name := range []string{"token-file", "ca"} {
		if f := setupFlag(c, name); f != "" {
			abs, err := filepath.Abs(f)
			if err != nil {
				return s, err
			}
			s.globals = append(s.globals, "--"+name, abs)
		}
	}
	return s, setupGate(c, &s)
}

// setupFlag is setup's own flag name, else the global flag of that name
// (maosctl --addr X setup ...), else "".
func setupFlag(c *cli.Context, name string) string {
	if c.IsSet(name) {
		return strings.TrimSpace(c.String(name))
	}
	for _, x := range c.Lineage()[1:] {
		if x.IsSet(name) {
			return strings.TrimSpace(x.String(name))
		}
	}
	return ""
}

// setupGate reads --gate: the policy must load now (the hook would deny
// every call otherwise), and its longest timeout sets the hook's.
func setupGate(c *cli.Context, s *setupSpec) error {
	path := strings.TrimSpace(c.String("gate"))
	if path == "" || s.remove {
		return nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	policy, err := loadGatePolicy(abs)
	if err != nil {
		return fmt.Errorf("--gate: %w", err)
	}
	longest := gateDefaultTimeout
	for _, g := range policy.Gates {
		longest = max(longest, g.Timeout)
	}
	s.gate, s.timeout = abs, longest+setupGateMargin
	return nil
}

// command is the shell command running maosctl's verb with args, after
// the global flags.
func (s setupSpec) command(verb string, args ...string) string {
	words := append([]string{s.bin}, s.globals...)
	words = append(append(words, verb), args...)
	for i, w := range words {
		words[i] = shellQuote(w)
	}
	return strings.Join(words, " ")
}

// path is the settings file rel under the scope's root (user: the home
// directory's userRel; project: projectRel under --dir).
func (s setupSpec) path(userRel, projectRel string) string {
	if s.project {
		return filepath.Join(s.root, projectRel)
	}
	return filepath.Join(s.root, userRel)
}

// ours reports whether cmd is one of maos's entries for verb.
func (s setupSpec) ours(verb string) func(string) bool {
	return func(cmd string) bool { return maosCommand(cmd, s.bin, verb) }
}

// setupResult is one file's planned change.
type setupResult struct {
	setupChange
	File    string `json:"file"`
	Changed bool   `json:"changed"`
	Diff    string `json:"diff,omitempty"`
	old     []byte
	new     []byte
	mode    fs.FileMode
	target  string // the file written: Path with its symlinks resolved
}

// setupPlan reads every file and computes its change; a file that cannot
// be read or parsed fails the whole run before anything is written.
func setupPlan(files []setupFile) ([]*setupResult, error) {
	var out []*setupResult
	for _, f := range files {
		r := &setupResult{File: f.Path, target: f.Path, mode: 0o600}
		if t, err := filepath.EvalSymlinks(f.Path); err == nil {
			r.target = t
		}
		old, err := os.ReadFile(r.target)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("%s: %w; nothing was written", f.Path, err)
		default:
			r.old = old
			if r.old == nil {
				r.old = []byte{}
			}
			if st, err := os.Stat(r.target); err == nil {
				r.mode = st.Mode().Perm()
			}
		}
		r.new, err = f.edit(r.old, &r.setupChange)
		if err != nil {
			return nil, fmt.Errorf("%s: %w; nothing was written", f.Path, err)
		}
		r.Changed = len(r.Added)+len(r.Removed) > 0
		if r.Changed {
			r.Diff = unifiedDiff(f.Path, r.old, r.new, r.old != nil)
		}
		out = append(out, r)
	}
	return out, nil
}

// setupWrite writes the changed files, each atomically.
func setupWrite(res []*setupResult) error {
	for _, r := range res {
		if !r.Changed {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(r.target), 0o755); err != nil {
			return err
		}
		if err := writeFileAtomic(r.target, r.new, r.mode); err != nil {
			return fmt.Errorf("write %s: %w", r.File, err)
		}
	}
	return nil
}

// printSetup prints what changed: --json the results, else a line per
// file, its entries and notes, and under --dry-run the diff.
func printSetup(c *cli.Context, s setupSpec, res []*setupResult) error {
	dry := c.Bool("dry-run")
	if wantJSON(c) {
		return printJSON(c.App.Writer, struct {
			CLI    string         `json:"cli"`
			DryRun bool           `json:"dry_run"`
			Remove bool           `json:"remove"`
			Files  []*setupResult `json:"files"`
		}{s.d.name, dry, s.remove, res})
	}
	w := c.App.Writer
	for _, r := range res {
		verb := map[bool]string{true: "would change", false: "changed"}[dry]
		if !r.Changed {
			verb = "unchanged"
		}
		fmt.Fprintf(w, "%s: %s\n", r.File, verb)
		for _, e := range r.Removed {
			fmt.Fprintf(w, "  - %s\n", e)
		}
		for _, e := range r.Added {
			fmt.Fprintf(w, "  + %s\n", e)
		}
		for _, n := range r.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
		if dry && r.Changed {
			fmt.Fprint(w, r.Diff)
		}
	}
	return nil
}

// hookGroups are the hook groups s wires, by event, and the events in
// the order they are added (nil under --remove).
func (s setupSpec) hookGroups(entry func(cmd string, timeout int64) *jsonObject) ([]string, map[string]*jsonObject) {
	if s.remove {
		return nil, nil
	}
	wire := slices.Clone(s.d.wire)
	if s.gate != "" {
		wire = append(wire, hookWire{Event: s.d.eventNamed(eventToolCall)})
	}
	var order []string
	groups := map[string]*jsonObject{}
	for _, w := range wire {
		g := newJSONObject()
		if w.Matcher != "" {
			g.set("matcher", w.Matcher)
		}
		var h *jsonObject
		if s.d.events[w.Event] == eventToolCall {
			h = entry(s.command("hook", s.d.name, "--agent", s.agent, "--gate", s.gate), int64(s.timeout/s.d.timeoutUnit))
		} else {
			h = entry(s.command("hook", s.d.name, "--agent", s.agent), 0)
		}
		g.set("hooks", []any{h})
		order = append(order, w.Event)
		groups[w.Event] = g
	}
	return order, groups
}
