package maosctl

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// Codex's config.toml is edited as text, so its comments and layout stay
// as they are: the [mcp_servers.maos] table (and its subtables) is cut
// out and written again at the end. go-toml reads the file before and
// after, which refuses a file that is not TOML and checks that nothing
// but mcp_servers.maos changed in meaning.

// tomlHeaderRE is a table header line; group 1 is the table's name.
var tomlHeaderRE = regexp.MustCompile(`^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$`)

// tomlMaosTable reports whether a header names mcp_servers.maos or a
// table under it.
func tomlMaosTable(name string) bool {
	name = strings.Join(strings.Fields(strings.ReplaceAll(name, `"`, "")), "")
	return name == "mcp_servers.maos" || strings.HasPrefix(name, "mcp_servers.maos.")
}

// parseTOML decodes a config file; an error names the line and column.
func parseTOML(data []byte) (map[string]any, error) {
	m := map[string]any{}
	if err := toml.Unmarshal(data, &m); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			return nil, fmt.Errorf("line %d, column %d: %v", row, col, err)
		}
		return nil, err
	}
	return m, nil
}

// tomlString is s as a TOML basic string (JSON's escapes are TOML's).
func tomlString(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// codexMCPTable is the [mcp_servers.maos] table of command and args.
func codexMCPTable(command string, args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = tomlString(a)
	}
	return "[mcp_servers.maos]\ncommand = " + tomlString(command) + "\nargs = [" + strings.Join(q, ", ") + "]\n"
}

// cutTOMLTable is text without the lines of table (tomlMaosTable), and
// without the blank line before it; comments right above the next table
// stay with it. found is false when no such header is in the text.
func cutTOMLTable(text string) (out string, found bool) {
	lines := strings.SplitAfter(text, "\n")
	start, end := -1, len(lines)
	for i, l := range lines {
		m := tomlHeaderRE.FindStringSubmatch(strings.TrimRight(l, "\r\n"))
		switch {
		case m == nil:
		case start < 0 && tomlMaosTable(m[1]):
			start = i
		case start >= 0 && !tomlMaosTable(m[1]):
			end = i
		}
		if end < len(lines) {
			break
		}
	}
	if start < 0 {
		return text, false
	}
	for end > start+1 {
		t := strings.TrimSpace(lines[end-1])
		if t != "" && !strings.HasPrefix(t, "#") {
			break
		}
		end--
	}
	if start > 0 && strings.TrimSpace(lines[start-1]) == "" {
		start--
	}
	return strings.Join(lines[:start], "") + strings.Join(lines[end:], ""), true
}

// editCodexConfig is config.toml's text with maos's MCP server set to
// command and args (remove: taken out).
func editCodexConfig(old []byte, command string, args []string, remove bool, ch *setupChange) ([]byte, error) {
	before, err := parseTOML(old)
	if err != nil {
		return nil, err
	}
	servers, _ := before["mcp_servers"].(map[string]any)
	cur, had := servers["maos"]
	want := map[string]any{"command": command, "args": toAnySlice(args)}
	if (remove && !had) || (!remove && had && reflect.DeepEqual(cur, want)) {
		return old, nil
	}
	text := string(old)
	if had {
		var found bool
		if text, found = cutTOMLTable(text); !found {
			return nil, errors.New("mcp_servers.maos is not written as a [mcp_servers.maos] table; edit it by hand")
		}
		ch.Removed = append(ch.Removed, "mcp_servers.maos")
	}
	if !remove {
		if text != "" && !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		if text != "" {
			text += "\n"
		}
		text += codexMCPTable(command, args)
		ch.Added = append(ch.Added, "mcp_servers.maos")
	}
	return []byte(text), checkCodexEdit(before, []byte(text), want, remove)
}

// checkCodexEdit checks that the edited text is TOML and means what
// before meant but for mcp_servers.maos, which is want (or absent).
func checkCodexEdit(before map[string]any, text []byte, want map[string]any, remove bool) error {
	after, err := parseTOML(text)
	if err != nil {
		return fmt.Errorf("the edited file would not be TOML (%v); edit mcp_servers.maos by hand", err)
	}
	a, _ := after["mcp_servers"].(map[string]any)
	got, has := a["maos"]
	if remove == has || (!remove && !reflect.DeepEqual(got, want)) {
		return fmt.Errorf("the edited file's mcp_servers.maos would be %v; edit it by hand", got)
	}
	if !reflect.DeepEqual(withoutMaosServer(before), withoutMaosServer(after)) {
		return errors.New("the edit would change more than mcp_servers.maos; edit it by hand")
	}
	return nil
}

// withoutMaosServer is m without mcp_servers.maos (and without an empty
// mcp_servers), for comparing two configs' other settings.
func withoutMaosServer(m map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	if s, ok := m["mcp_servers"].(map[string]any); ok {
		rest := map[string]any{}
		for k, v := range s {
			if k != "maos" {
				rest[k] = v
			}
		}
		delete(out, "mcp_servers")
		if len(rest) > 0 {
			out["mcp_servers"] = rest
		}
	}
	return out
}

func toAnySlice(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// codexHooksOn reports whether config turns Codex's hooks on ([features]
// hooks = true, or codex_hooks = true on older versions).
func codexHooksOn(config map[string]any) bool {
	f, _ := config["features"].(map[string]any)
	return f["hooks"] == true || f["codex_hooks"] == true
}
