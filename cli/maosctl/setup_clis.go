package maosctl

import (
	"io/fs"
	"strings"

	"github.com/pmezard/go-difflib/difflib"

	"github.com/maos-project/maos/durable"
)

// The settings each coding agent's CLI reads, as docs/agents/*.md give
// them: which files setup edits and what goes where.

// setupClaude: hooks and statusLine in settings.json; the MCP server in
// ~/.claude.json's mcpServers (where 'claude mcp add --scope user' keeps
// it) or the project's .mcp.json.
func setupClaude(s setupSpec) []setupFile {
	return []setupFile{
		{Path: s.path(".claude/settings.json", ".claude/settings.json"), edit: jsonEdit(func(doc *jsonObject, ch *setupChange) error {
			if err := s.mergeHooks(doc, false, ch); err != nil {
				return err
			}
			var status *jsonObject
			if !s.remove {
				status = newJSONObject()
				status.set("type", "command")
				status.set("command", s.command("status-line", "--agent", s.agent))
			}
			mergeStatusLine(doc, status, s.ours("status-line"), ch)
			return nil
		})},
		{Path: s.path(".claude.json", ".mcp.json"), edit: jsonEdit(s.mergeMCP)},
	}
}

// setupCodex: hooks in hooks.json, the MCP server in config.toml, both
// under ~/.codex (project: DIR/.codex).
func setupCodex(s setupSpec) []setupFile {
	return []setupFile{
		{Path: s.path(".codex/hooks.json", ".codex/hooks.json"), edit: jsonEdit(func(doc *jsonObject, ch *setupChange) error {
			return s.mergeHooks(doc, false, ch)
		})},
		{Path: s.path(".codex/config.toml", ".codex/config.toml"), edit: func(old []byte, ch *setupChange) ([]byte, error) {
			out, err := editCodexConfig(old, s.bin, s.mcpArgs(), s.remove, ch)
			if err != nil || s.remove {
				return out, err
			}
			if cfg, err := parseTOML(out); err == nil && !codexHooksOn(cfg) {
				ch.Notes = append(ch.Notes, "Codex runs hooks only with [features] hooks = true in config.toml "+
					"(codex_hooks = true on older versions); setup leaves that switch to you")
			}
			return out, nil
		}},
	}
}

// setupGemini: hooks and the MCP server in ~/.gemini/settings.json
// (project: DIR/.gemini/settings.json); each hook is named "maos".
func setupGemini(s setupSpec) []setupFile {
	return []setupFile{
		{Path: s.path(".gemini/settings.json", ".gemini/settings.json"), edit: jsonEdit(func(doc *jsonObject, ch *setupChange) error {
			if err := s.mergeHooks(doc, true, ch); err != nil {
				return err
			}
			tools, _ := doc.vals["tools"].(*jsonObject)
			if !s.remove && (tools == nil || tools.vals["enableHooks"] != true) {
				ch.Notes = append(ch.Notes, "Gemini CLI runs hooks only with its hooks system on (/settings, Advanced, "+
					"Enable Hooks System; tools.enableHooks: true in the versions docs/agents/gemini.md names); setup leaves that switch to you")
			}
			return s.mergeMCP(doc, ch)
		})},
	}
}

// mergeHooks wires s's hook groups into doc; named gives each hook the
// name "maos" (Gemini CLI's /hooks enable and disable use it).
func (s setupSpec) mergeHooks(doc *jsonObject, named bool, ch *setupChange) error {
	order, groups := s.hookGroups(func(cmd string, timeout int64) *jsonObject {
		h := newJSONObject()
		if named {
			h.set("name", "maos")
		}
		h.set("type", "command")
		h.set("command", cmd)
		if timeout > 0 {
			h.set("timeout", timeout)
		}
		return h
	})
	return mergeHooks(doc, order, groups, s.ours("hook"), ch)
}

// mcpArgs are the MCP server's arguments after the binary.
func (s setupSpec) mcpArgs() []string {
	return append(append([]string{}, s.globals...), "mcp", "--agent", s.agent)
}

// mergeMCP sets (or, under --remove, takes out) the MCP server "maos".
func (s setupSpec) mergeMCP(doc *jsonObject, ch *setupChange) error {
	var want *jsonObject
	if !s.remove {
		want = newJSONObject()
		want.set("command", s.bin)
		want.set("args", toAnySlice(s.mcpArgs()))
	}
	return mergeMCPServer(doc, want, ch)
}

// jsonEdit is the edit of a JSON settings file by merge.
func jsonEdit(merge func(*jsonObject, *setupChange) error) func([]byte, *setupChange) ([]byte, error) {
	return func(old []byte, ch *setupChange) ([]byte, error) {
		doc, err := parseJSONSettings(old)
		if err != nil {
			return nil, err
		}
		if err := merge(doc, ch); err != nil {
			return nil, err
		}
		if len(ch.Added)+len(ch.Removed) == 0 {
			return old, nil
		}
		return encodeJSONSettings(doc), nil
	}
}

// unifiedDiff is the change of file from old to new as a unified diff.
// A file that is not there yet is /dev/null.
func unifiedDiff(file string, old, new []byte, existed bool) string {
	from := file
	if !existed {
		from = "/dev/null"
	}
	d, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{ // writes to a strings.Builder: never fails
		A: diffLines(old), B: diffLines(new), FromFile: from, ToFile: file, Context: 3,
	})
	return d
}

// diffLines are b's lines, each with its newline (the last one may have
// none).
func diffLines(b []byte) []string {
	lines := strings.SplitAfter(string(b), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// writeFileAtomic replaces path with data, mode perm, crash-safely.
func writeFileAtomic(path string, data []byte, perm fs.FileMode) error {
	return durable.WriteFile(path, data, perm)
}
