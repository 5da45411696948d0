package maosctl

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/maos-project/maos/testing/tlstest"
)

// The maosctl binary the tests' settings name.
const setupBin = "/opt/maos/bin/maosctl"

// setupWorld is a home directory and a project directory of one test,
// with the environment setup reads cleared.
type setupWorld struct {
	t          *testing.T
	home, proj string
}

func newSetupWorld(t *testing.T) *setupWorld {
	t.Helper()
	for _, k := range []string{envAddr, envAgent, envTokenFile, envToken, envGateFile, envCA} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	w := &setupWorld{t: t, home: t.TempDir(), proj: t.TempDir()}
	t.Setenv("HOME", w.home)
	return w
}

// run runs maosctl setup args... (with --maosctl setupBin).
func (w *setupWorld) run(args ...string) runResult {
	var out, errOut bytes.Buffer
	app := App()
	app.Writer, app.ErrWriter, app.Reader = &out, &errOut, strings.NewReader("")
	err := app.Run(append([]string{"maosctl", "setup"}, append(args, "--maosctl", setupBin)...))
	return runResult{out: out.String(), errOut: errOut.String(), err: err}
}

// ok is run, failing the test on an error.
func (w *setupWorld) ok(args ...string) string {
	w.t.Helper()
	r := w.run(args...)
	if r.err != nil {
		w.t.Fatalf("setup %v: %v\nstderr %s", args, r.err, r.errOut)
	}
	return r.out
}

func (w *setupWorld) write(path, content string, mode os.FileMode) {
	w.t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		w.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		w.t.Fatal(err)
	}
}

func (w *setupWorld) read(path string) string {
	w.t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		w.t.Fatal(err)
	}
	return string(b)
}

// genericJSON is a JSON file's meaning (numbers as written).
func genericJSON(t *testing.T, data string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, data)
	}
	return m
}

// Seeds: settings that already hold another tool's hook on the same event
// maos uses, a hook on an event maos does not use, another MCP server,
// and unrelated keys (a number too big for a float64, nested objects).
const (
	seedClaudeSettings = `{
  "model": "opus",
  "permissions": {"allow": ["Bash(ls:*)"], "deny": []},
  "hooks": {
    "SessionStart": [{"hooks": [{"type": "command", "command": "other-tool start"}]}],
    "PostToolUse": [{"matcher": "Edit", "hooks": [{"type": "command", "command": "fmt-tool"}]}]
  },
  "cleanupPeriodDays": 12345678901234567890
}
`
	seedClaudeMCP  = `{"numStartups": 7, "mcpServers": {"github": {"command": "gh-mcp", "args": ["--stdio"]}}, "projects": {"/x": {"allowedTools": []}}}`
	seedCodexHooks = `{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-send done", "timeout": 5}]}]}}`
	seedCodexTOML  = `# Codex settings, hand-written
model = "o3"   # the model

[mcp_servers.github]
command = "gh-mcp"
args = ["--stdio"]

[features]
hooks = true
`
	seedGemini = `{
  "theme": "GitHub",
  "tools": {"enableHooks": true},
  "hooks": {
    "enabled": true,
    "BeforeAgent": [{"hooks": [{"name": "ctx", "type": "command", "command": "ctx-tool", "timeout": 30000}]}]
  },
  "mcpServers": {"github": {"command": "gh-mcp", "args": ["--stdio"]}}
}
`
)

// setupCase is one CLI's files under a root and their seeds.
type setupCase struct {
	cli   string
	files map[string]string // path under the root → seed
	// hooksFile is the file of the hooks; events the ones maos wires.
	hooksFile string
	events    []string
}

func setupCases() []setupCase {
	return []setupCase{
		{"claude-code", map[string]string{".claude/settings.json": seedClaudeSettings, "MCP": seedClaudeMCP},
			".claude/settings.json", []string{"SessionStart", "UserPromptSubmit", "Stop", "Notification"}},
		{"codex", map[string]string{".codex/hooks.json": seedCodexHooks, ".codex/config.toml": seedCodexTOML},
			".codex/hooks.json", []string{"SessionStart", "UserPromptSubmit", "Stop"}},
		{"gemini", map[string]string{".gemini/settings.json": seedGemini},
			".gemini/settings.json", []string{"SessionStart", "BeforeAgent", "AfterAgent"}},
	}
}

// mcpFile is Claude Code's MCP file for the scope.
func mcpFile(rel string, project bool) string {
	if rel != "MCP" {
		return rel
	}
	if project {
		return ".mcp.json"
	}
	return ".claude.json"
}

// maosHooks are the commands of maos's hooks per event in a JSON
// settings file, and every other hook's command per event.
func maosHooks(t *testing.T, data string) (mine, others map[string][]string) {
	t.Helper()
	doc, err := parseJSONSettings([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	mine, others = map[string][]string{}, map[string][]string{}
	hooks, _ := doc.vals["hooks"].(*jsonObject)
	if hooks == nil {
		return mine, others
	}
	for _, ev := range hooks.keys {
		list, _ := hooks.vals[ev].([]any)
		for _, h := range hookCommands(list) {
			if strings.HasPrefix(h.command, setupBin+" ") {
				mine[ev] = append(mine[ev], h.command)
			} else {
				others[ev] = append(others[ev], h.command)
			}
		}
	}
	return mine, others
}

// Each CLI, each scope: setup adds maos's hooks once per event next to
// the other tools' (kept as they were), adds the MCP server next to the
// others, keeps every unrelated key and the files' modes, touches nothing
// outside the scope's root; a second run is byte-identical; --remove
// gives back the seeds' meaning (config.toml: its very bytes).
func TestSetupMergesKeepsAndRemoves(t *testing.T) {
	for _, tc := range setupCases() {
		for _, project := range []bool{false, true} {
			name := tc.cli + map[bool]string{false: "/user", true: "/project"}[project]
			t.Run(name, func(t *testing.T) {
				w := newSetupWorld(t)
				root, other, args := w.home, w.proj, []string{tc.cli, "--agent", "ag"}
				if project {
					root, other = w.proj, w.home
					args = append(args, "--scope", "project", "--dir", w.proj)
				}
				seeds := map[string]string{}
				for rel, seed := range tc.files {
					p := filepath.Join(root, mcpFile(rel, project))
					w.write(p, seed, 0o640)
					seeds[p] = seed
				}
				out := w.ok(args...)
				for p := range seeds {
					if !strings.Contains(out, p+": changed\n") {
						t.Errorf("output does not say %s changed:\n%s", p, out)
					}
					if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o640 {
						t.Errorf("%s: mode %v (%v), want 0640 kept", p, st.Mode().Perm(), err)
					}
				}
				checkSetupHooks(t, tc, w.read(filepath.Join(root, tc.hooksFile)), seeds[filepath.Join(root, tc.hooksFile)])
				checkSetupOthers(t, seeds, w)
				if entries, _ := os.ReadDir(other); len(entries) != 0 {
					t.Errorf("setup wrote outside its scope, in %s: %v", other, entries)
				}

				first := map[string]string{}
				for p := range seeds {
					first[p] = w.read(p)
				}
				out = w.ok(args...)
				for p := range seeds {
					if got := w.read(p); got != first[p] || !strings.Contains(out, p+": unchanged\n") {
						t.Errorf("second run changed %s:\n%s\nthen:\n%s\noutput:\n%s", p, first[p], got, out)
					}
				}

				w.ok(append(args, "--remove")...)
				for p, seed := range seeds {
					got := w.read(p)
					if strings.HasSuffix(p, ".toml") {
						if got != seed {
							t.Errorf("--remove left %s as\n%s\nwant the seed's bytes\n%s", p, got, seed)
						}
					} else if !reflect.DeepEqual(genericJSON(t, got), genericJSON(t, seed)) {
						t.Errorf("--remove left %s as\n%s\nwant the seed's meaning\n%s", p, got, seed)
					}
				}
			})
		}
	}
}

// checkSetupHooks checks the hooks file after a run: maos's one hook per
// wired event, the others' hooks as in the seed.
func checkSetupHooks(t *testing.T, tc setupCase, got, seed string) {
	t.Helper()
	mine, others := maosHooks(t, got)
	_, seedOthers := maosHooks(t, seed)
	if !reflect.DeepEqual(others, seedOthers) {
		t.Errorf("other hooks %v, want the seed's %v", others, seedOthers)
	}
	want := setupBin + " hook " + tc.cli + " --agent ag"
	for _, ev := range tc.events {
		if !slices.Equal(mine[ev], []string{want}) {
			t.Errorf("%s: maos hooks %q, want [%q]", ev, mine[ev], want)
		}
	}
	if len(mine) != len(tc.events) {
		t.Errorf("maos hooks on %d events %v, want %v", len(mine), mine, tc.events)
	}
}

// checkSetupOthers checks that every key of the seeds but the ones setup
// owns means what it did, and that the MCP server maos sits beside the
// seed's github.
func checkSetupOthers(t *testing.T, seeds map[string]string, w *setupWorld) {
	t.Helper()
	wantMCP := map[string]any{"command": setupBin, "args": []any{"mcp", "--agent", "ag"}}
	for p, seed := range seeds {
		got := w.read(p)
		var servers map[string]any
		if strings.HasSuffix(p, ".toml") {
			cfg, err := parseTOML([]byte(got))
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			servers, _ = cfg["mcp_servers"].(map[string]any)
			if cfg["model"] != "o3" || !strings.HasPrefix(got, seed) {
				t.Errorf("%s: the seed is not kept as it was:\n%s", p, got)
			}
		} else {
			g, s := genericJSON(t, got), genericJSON(t, seed)
			for k, v := range s {
				if k != "hooks" && k != "mcpServers" && k != "statusLine" && !reflect.DeepEqual(g[k], v) {
					t.Errorf("%s: %s is %v, was %v", p, k, g[k], v)
				}
			}
			if _, has := s["mcpServers"]; !has {
				continue
			}
			servers, _ = g["mcpServers"].(map[string]any)
		}
		gh, _ := servers["github"].(map[string]any)
		if gh["command"] != "gh-mcp" || !reflect.DeepEqual(servers["maos"], wantMCP) {
			t.Errorf("%s: mcp servers %v, want github kept and maos %v", p, servers, wantMCP)
		}
	}
}

// --dry-run writes nothing, creates nothing, and shows the change as a
// unified diff per file (a file not there yet from /dev/null).
func TestSetupDryRun(t *testing.T) {
	w := newSetupWorld(t)
	settings := filepath.Join(w.home, ".claude", "settings.json")
	w.write(settings, seedClaudeSettings, 0o600)
	before, _ := os.Stat(settings)
	out := w.ok("claude-code", "--agent", "ag", "--dry-run")
	if got := w.read(settings); got != seedClaudeSettings {
		t.Errorf("--dry-run wrote %s:\n%s", settings, got)
	}
	if after, _ := os.Stat(settings); !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("--dry-run touched %s", settings)
	}
	if _, err := os.Stat(filepath.Join(w.home, ".claude.json")); !os.IsNotExist(err) {
		t.Errorf("--dry-run created ~/.claude.json: %v", err)
	}
	for _, want := range []string{
		settings + ": would change\n",
		"--- " + settings + "\n+++ " + settings + "\n@@ ",
		`+            "command": "` + setupBin + ` hook claude-code --agent ag"`,
		`+    "command": "` + setupBin + ` status-line --agent ag"`,
		"--- /dev/null\n+++ " + filepath.Join(w.home, ".claude.json") + "\n",
		"\n   \"model\": \"opus\",\n", // context lines are the file's own
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dry-run output lacks %q:\n%s", want, out)
		}
	}
	// The diff is the change setup then makes.
	w.ok("claude-code", "--agent", "ag")
	if out := w.ok("claude-code", "--agent", "ag", "--dry-run"); strings.Contains(out, "@@") || !strings.Contains(out, settings+": unchanged\n") {
		t.Errorf("dry run after setup shows a change:\n%s", out)
	}
}

// A settings file that is not JSON (TOML) is refused, naming the file and
// the line, and no file is written, not even the ones that parse.
func TestSetupRefusesMalformed(t *testing.T) {
	for _, tc := range []struct {
		cli, bad, content, want string
	}{
		{"claude-code", ".claude/settings.json", "{\n  \"model\": \"opus\",\n  \"hooks\": {,}\n}\n", "line 3, column 13: invalid character ','"},
		{"claude-code", ".claude.json", `["not", "an", "object"]`, "not a JSON object at the top"},
		{"codex", ".codex/config.toml", "model = \"o3\"\n[mcp_servers\n", "line 2, column"},
		{"codex", ".codex/hooks.json", `{"hooks": {"Stop": {"type": "command"}}}`, "hooks.Stop is not a list of hook groups"},
		{"gemini", ".gemini/settings.json", "{\"theme\": \"x\"", "line 1, column 13: unexpected end of JSON input"},
	} {
		w := newSetupWorld(t)
		bad := filepath.Join(w.home, tc.bad)
		w.write(bad, tc.content, 0o600)
		r := w.run(tc.cli, "--agent", "ag")
		if r.err == nil || !strings.Contains(r.errOut, bad+": ") || !strings.Contains(r.errOut, tc.want) || !strings.Contains(r.errOut, "nothing was written") {
			t.Errorf("%s with a bad %s: err=%v stderr %q, want the file and %q", tc.cli, tc.bad, r.err, r.errOut, tc.want)
		}
		if got := w.read(bad); got != tc.content {
			t.Errorf("%s: the bad file was changed to %q", tc.cli, got)
		}
		if files := filesUnder(t, w.home); !slices.Equal(files, []string{tc.bad}) {
			t.Errorf("%s: files under home %v, want only the bad one", tc.cli, files)
		}
	}
}

// Usage mistakes: an unknown CLI names the three, no --agent, a bad
// scope, a gate policy that does not load (checked before writing).
func TestSetupUsageErrors(t *testing.T) {
	w := newSetupWorld(t)
	bad := filepath.Join(w.home, "gates.yaml")
	w.write(bad, "gates: [{tool: Bash, approvers: [alice], quorum: 2}]", 0o600)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"cursor", "--agent", "ag"}, `unknown CLI "cursor": want one of claude-code, codex, gemini`},
		{[]string{}, "missing CLI"},
		{[]string{"codex"}, "missing required flag --agent"},
		{[]string{"codex", "--agent", "ag", "--scope", "global"}, `--scope "global": want user or project`},
		{[]string{"gemini", "--agent", "ag", "--gate", bad}, "--gate: gate policy " + bad + ": gates[0].quorum: 2 of 1 listed agents"},
		{[]string{"gemini", "--agent", "ag", "--addr", "host:notaport"}, "port must be 1..65535"},
	} {
		if r := w.run(tc.args...); r.err == nil || !strings.Contains(r.errOut, tc.want) {
			t.Errorf("setup %v: err=%v stderr %q, want %q", tc.args, r.err, r.errOut, tc.want)
		}
	}
	if files := filesUnder(t, w.home); !slices.Equal(files, []string{"gates.yaml"}) {
		t.Errorf("a refused setup wrote files: %v", files)
	}
}

// filesUnder are the regular files under dir, relative, sorted.
func filesUnder(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// --gate wires the tool-call event for every tool with a timeout a minute
// above the policy's longest gate, in the CLI's unit (Claude Code and
// Codex: seconds; Gemini CLI: milliseconds); a run without --gate takes
// that entry out again. The commands carry --addr, the token FILE's
// path (never a token) and the CA's.
func TestSetupGateAddrTokenFile(t *testing.T) {
	w := newSetupWorld(t)
	policy := filepath.Join(w.home, "gates.yaml")
	w.write(policy, examplePolicy, 0o600) // its longest timeout: 20m
	t.Setenv(envToken, "s3cret-token")
	t.Setenv(envTokenFile, "tok en")
	ca := tlstest.NewCA(t, "maos-test").Node(t, "n1").CA
	t.Setenv(envCA, ca)
	for _, tc := range []struct {
		cli, file, event string
		timeout          string
	}{
		{"claude-code", ".claude/settings.json", "PreToolUse", "1260"},
		{"codex", ".codex/hooks.json", "PreToolUse", "1260"},
		{"gemini", ".gemini/settings.json", "BeforeTool", "1260000"},
	} {
		w.ok(tc.cli, "--agent", "ag", "--gate", policy, "--addr", "10.0.0.2:7070")
		cwd, _ := os.Getwd()
		want := setupBin + " --addr 10.0.0.2:7070 --token-file '" + filepath.Join(cwd, "tok en") + "' --ca " + ca + " hook " + tc.cli + " --agent ag"
		got := w.read(filepath.Join(w.home, tc.file))
		mine, _ := maosHooks(t, got)
		if !slices.Equal(mine[tc.event], []string{want + " --gate " + policy}) || !slices.Equal(mine["SessionStart"], []string{want}) {
			t.Errorf("%s: maos hooks %q, want %q (+ --gate)", tc.cli, mine, want)
		}
		if !strings.Contains(got, `"timeout": `+tc.timeout+"\n") || strings.Contains(got, "s3cret") {
			t.Errorf("%s: want timeout %s and no token:\n%s", tc.cli, tc.timeout, got)
		}
		w.ok(tc.cli, "--agent", "ag", "--addr", "10.0.0.2:7070")
		if mine, _ := maosHooks(t, w.read(filepath.Join(w.home, tc.file))); len(mine[tc.event]) != 0 || len(mine["SessionStart"]) != 1 {
			t.Errorf("%s: without --gate: %q", tc.cli, mine)
		}
	}
	for _, f := range filesUnder(t, w.home) {
		if strings.Contains(w.read(filepath.Join(w.home, f)), "s3cret") {
			t.Errorf("%s holds the token", f)
		}
	}
}

// A status line of another program stays, with a note; --json says per
// file what was added and removed.
func TestSetupStatusLineAndJSON(t *testing.T) {
	w := newSetupWorld(t)
	settings := filepath.Join(w.home, ".claude", "settings.json")
	w.write(settings, `{"statusLine": {"type": "command", "command": "~/bin/my-status"}}`, 0o600)
	var res struct {
		CLI    string `json:"cli"`
		DryRun bool   `json:"dry_run"`
		Files  []struct {
			File    string   `json:"file"`
			Changed bool     `json:"changed"`
			Added   []string `json:"added"`
			Removed []string `json:"removed"`
			Notes   []string `json:"notes"`
		} `json:"files"`
	}
	if err := json.Unmarshal([]byte(w.ok("claude-code", "--agent", "ag", "--json")), &res); err != nil {
		t.Fatal(err)
	}
	hook := setupBin + " hook claude-code --agent ag"
	if res.CLI != "claude-code" || res.DryRun || len(res.Files) != 2 || res.Files[0].File != settings || !res.Files[0].Changed ||
		!slices.Equal(res.Files[0].Added, []string{"hooks.SessionStart: " + hook, "hooks.UserPromptSubmit: " + hook, "hooks.Stop: " + hook, "hooks.Notification: " + hook}) ||
		len(res.Files[0].Notes) != 1 || !strings.Contains(res.Files[0].Notes[0], `statusLine left as it is: it runs another program ("~/bin/my-status")`) ||
		!slices.Equal(res.Files[1].Added, []string{"mcpServers.maos"}) {
		t.Errorf("--json: %+v", res)
	}
	if g := genericJSON(t, w.read(settings)); !reflect.DeepEqual(g["statusLine"], map[string]any{"type": "command", "command": "~/bin/my-status"}) {
		t.Errorf("another program's status line was changed: %v", g["statusLine"])
	}
	if err := json.Unmarshal([]byte(w.ok("claude-code", "--agent", "ag", "--remove", "--json")), &res); err != nil ||
		!slices.Equal(res.Files[0].Removed, []string{"hooks.SessionStart: " + hook, "hooks.UserPromptSubmit: " + hook, "hooks.Stop: " + hook, "hooks.Notification: " + hook}) {
		t.Errorf("--remove --json: %+v %v", res, err)
	}
	if got := w.read(settings); !reflect.DeepEqual(genericJSON(t, got), genericJSON(t, `{"statusLine": {"type": "command", "command": "~/bin/my-status"}}`)) {
		t.Errorf("after --remove: %s", got)
	}
}

// A settings file reached through a symlink (a dotfiles repository) is
// written where the link points, and the link stays; an MCP server maos
// in config.toml that is not a [mcp_servers.maos] table is refused.
func TestSetupSymlinkAndTOMLForms(t *testing.T) {
	w := newSetupWorld(t)
	real := filepath.Join(w.proj, "dotfiles", "settings.json")
	w.write(real, `{"theme": "x"}`, 0o644)
	link := filepath.Join(w.home, ".gemini", "settings.json")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	w.ok("gemini", "--agent", "ag")
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v %v", fi, err)
	}
	if got := w.read(real); !strings.Contains(got, `"theme": "x"`) || !strings.Contains(got, "hook gemini --agent ag") {
		t.Errorf("the link's target: %s", got)
	}
	inline := "mcp_servers = { maos = { command = \"old\" } }\n"
	w.write(filepath.Join(w.home, ".codex", "config.toml"), inline, 0o600)
	if r := w.run("codex", "--agent", "ag"); r.err == nil || !strings.Contains(r.errOut, "mcp_servers.maos is not written as a [mcp_servers.maos] table; edit it by hand") {
		t.Errorf("inline mcp_servers.maos: err=%v stderr %q", r.err, r.errOut)
	}
	if _, err := os.Stat(filepath.Join(w.home, ".codex", "hooks.json")); !os.IsNotExist(err) {
		t.Errorf("hooks.json was written though config.toml was refused: %v", err)
	}
}

// A hand-written [mcp_servers.maos] in the middle of config.toml, with a
// subtable, is cut out whole and written again at the end; the comment
// above the next table stays with it, and nothing else moves.
func TestSetupCodexConfigText(t *testing.T) {
	old := "model = \"o3\"\n\n[mcp_servers.maos]\ncommand = \"maosctl\"\nargs = [\"mcp\"]\n\n[mcp_servers.maos.env]\nX = \"1\"\n\n# the features\n[features]\nhooks = true\n"
	var ch setupChange
	got, err := editCodexConfig([]byte(old), setupBin, []string{"mcp", "--agent", "codex"}, false, &ch)
	want := "model = \"o3\"\n\n# the features\n[features]\nhooks = true\n\n[mcp_servers.maos]\ncommand = \"" + setupBin + "\"\nargs = [\"mcp\", \"--agent\", \"codex\"]\n"
	if err != nil || string(got) != want || !slices.Equal(ch.Removed, []string{"mcp_servers.maos"}) || !slices.Equal(ch.Added, []string{"mcp_servers.maos"}) {
		t.Errorf("err=%v change %+v, got\n%s\nwant\n%s", err, ch, got, want)
	}
	ch = setupChange{}
	if again, err := editCodexConfig(got, setupBin, []string{"mcp", "--agent", "codex"}, false, &ch); err != nil || string(again) != want || len(ch.Added)+len(ch.Removed) != 0 {
		t.Errorf("second edit: err=%v change %+v\n%s", err, ch, again)
	}
}

// setup says what it leaves to the user: Gemini CLI's hooks switch when
// the settings do not turn it on, and a token given only inline (which
// it never writes).
func TestSetupNotes(t *testing.T) {
	w := newSetupWorld(t)
	t.Setenv(envToken, "s3cret-token")
	out := w.ok("gemini", "--agent", "ag")
	for _, want := range []string{"note: Gemini CLI runs hooks only with its hooks system on", "note: the commands carry no token (setup never writes one)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	w.write(filepath.Join(w.home, ".gemini", "settings.json"), `{"tools": {"enableHooks": true}}`, 0o600)
	t.Setenv(envTokenFile, filepath.Join(w.home, "tok"))
	w.write(filepath.Join(w.home, "tok"), "s3cret-token\n", 0o600)
	if out := w.ok("gemini", "--agent", "ag"); strings.Contains(out, "note:") {
		t.Errorf("notes with the switch on and a token file:\n%s", out)
	}
}

// Which commands are maos's own entries: maosctl (by this path or any
// path named maosctl) whose command, after the global flags, is the verb;
// not a maosctl command that merely mentions it, nor another program.
func TestSetupRecognizesOwnEntries(t *testing.T) {
	for cmd, want := range map[string]bool{
		setupBin + " hook claude-code --agent a":                               true,
		"maosctl hook codex --agent codex":                                     true,
		"/usr/local/bin/maosctl --addr 10.0.0.1:7070 --json hook gemini":       true,
		"'/opt/my tools/maosctl' --token-file '/a b/t' --addr=h:1 hook gemini": true,
		"maosctl send --from a --to b --text hook":                             false,
		"maosctl --addr hook status-line":                                      false,
		"other-tool hook":                                                      false,
		"/opt/maos/bin/maosctl-wrapper hook":                                   false,
		"maosctl":                                                              false,
	} {
		if got := maosCommand(cmd, setupBin, "hook"); got != want {
			t.Errorf("maosCommand(%q) = %t, want %t", cmd, got, want)
		}
	}
}

// The commands setup writes run as written: each hook command of each
// CLI, split as a shell would and run against a node with its event on
// stdin, answers without a word on stderr (SessionStart with the agent's
// identity), and Claude Code's status line prints the count.
func TestSetupCommandsRun(t *testing.T) {
	e := newHookEnv(t)
	w := newSetupWorld(t)
	run := func(stdin string, words []string) runResult {
		var out, errOut bytes.Buffer
		app := App()
		app.Writer, app.ErrWriter, app.Reader = &out, &errOut, strings.NewReader(stdin)
		err := app.Run(append([]string{"maosctl"}, words[1:]...))
		return runResult{out: out.String(), errOut: errOut.String(), err: err}
	}
	for _, tc := range setupCases() {
		w.ok(tc.cli, "--agent", "alice", "--addr", e.addr)
		mine, _ := maosHooks(t, w.read(filepath.Join(w.home, tc.hooksFile)))
		for ev, cmds := range mine {
			r := run(`{"hook_event_name":"`+ev+`","source":"startup"}`, shellWords(cmds[0]))
			if r.err != nil || r.errOut != "" || (ev == "SessionStart") != strings.Contains(r.out, "You are maos agent alice (mailbox at http://"+e.addr+")") {
				t.Errorf("%s %s: %q: err=%v out=%q stderr=%q", tc.cli, ev, cmds[0], r.err, r.out, r.errOut)
			}
		}
	}
	status := genericJSON(t, w.read(filepath.Join(w.home, ".claude", "settings.json")))["statusLine"].(map[string]any)["command"].(string)
	if r := run("", shellWords(status)); r.err != nil || r.out != "📬 0 new | 🌐 normal\n" {
		t.Errorf("status line %q: err=%v out=%q stderr=%q", status, r.err, r.out, r.errOut)
	}
}
