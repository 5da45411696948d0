package maosctl

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// What setup changes in a settings file's tree: maos's hook entries, the
// status line and the MCP server, each recognized by its command (the
// maosctl binary, then the verb: "hook", "status-line") or, for the MCP
// server, by its name "maos". Everything else is left as it was.

// setupChange is what setup did, or would do, to one file.
type setupChange struct {
	Added   []string `json:"added,omitempty"`
	Removed []string `json:"removed,omitempty"`
	Notes   []string `json:"notes,omitempty"`
}

// maosCommand reports whether the shell command cmd runs maosctl (bin, or
// any program named maosctl) with the command verb, after any global
// flags: an entry of maos's own, which setup replaces or removes.
func maosCommand(cmd, bin, verb string) bool {
	words := shellWords(cmd)
	if len(words) < 2 || (words[0] != bin && filepath.Base(words[0]) != "maosctl") {
		return false
	}
	for i := 1; i < len(words); i++ {
		w := words[i]
		if !strings.HasPrefix(w, "-") {
			return w == verb
		}
		name := strings.TrimLeft(w, "-")
		if !strings.Contains(name, "=") && slices.Contains(globalValueFlags, name) {
			i++ // the flag's value
		}
	}
	return false
}

// globalValueFlags are maosctl's global flags that take a value.
var globalValueFlags = []string{"addr", "timeout", "token", "token-file", "ca", "cert", "key"}

// shellWords splits a command line as a POSIX shell would for the forms
// shellQuote writes: words apart by blanks, single quotes, backslashes.
func shellWords(s string) []string {
	var (
		words  []string
		cur    strings.Builder
		inWord bool
		quoted bool
		escape bool
	)
	for _, r := range s {
		switch {
		case escape:
			cur.WriteRune(r)
			escape = false
		case quoted:
			if r == '\'' {
				quoted = false
			} else {
				cur.WriteRune(r)
			}
		case r == '\'':
			quoted, inWord = true, true
		case r == '\\':
			escape, inWord = true, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// hookEntry is one command hook of a settings file's hook group.
type hookEntry struct {
	group, index int
	command      string
}

// hookCommands are the commands of the hook entries in an event's list
// of groups ({"matcher": …, "hooks": [{"type": "command", "command": …}]}).
func hookCommands(list []any) []hookEntry {
	var out []hookEntry
	for gi, g := range list {
		obj, ok := g.(*jsonObject)
		if !ok {
			continue
		}
		hooks, _ := obj.vals["hooks"].([]any)
		for hi, h := range hooks {
			if ho, ok := h.(*jsonObject); ok {
				if cmd, ok := ho.vals["command"].(string); ok {
					out = append(out, hookEntry{gi, hi, cmd})
				}
			}
		}
	}
	return out
}

// mergeEvent is an event's list of hook groups with maos's entries (ours)
// replaced by the group want (nil: only taken out). A list that already
// holds want as maos's only entry is left as it is (changed false), so a
// second run, or one after another tool added its hook, changes nothing.
func mergeEvent(list []any, want *jsonObject, ours func(string) bool) (out []any, removed []string, changed bool) {
	var mine []hookEntry
	for _, h := range hookCommands(list) {
		if ours(h.command) {
			mine = append(mine, h)
		}
	}
	if len(mine) == 0 && want == nil {
		return list, nil, false
	}
	if want != nil && len(mine) == 1 && jsonEqual(list[mine[0].group], want) {
		return list, nil, false
	}
	for gi, g := range list {
		obj, isObj := g.(*jsonObject)
		var keep []any
		dropped := false
		if isObj {
			hooks, _ := obj.vals["hooks"].([]any)
			for hi, h := range hooks {
				if slices.ContainsFunc(mine, func(e hookEntry) bool { return e.group == gi && e.index == hi }) {
					dropped = true
					removed = append(removed, h.(*jsonObject).vals["command"].(string))
					continue
				}
				keep = append(keep, h)
			}
		}
		switch {
		case !dropped:
			out = append(out, g)
		case len(keep) > 0:
			obj.set("hooks", keep)
			out = append(out, obj)
		}
	}
	if want != nil {
		out = append(out, want)
	}
	return out, removed, true
}

// mergeHooks puts want (event → group) into doc's "hooks" object in place
// of maos's entries; events want leaves out lose maos's entries. Other
// keys of "hooks" that are not lists (Gemini CLI's "enabled",
// "disabled") are left alone.
func mergeHooks(doc *jsonObject, order []string, want map[string]*jsonObject, ours func(string) bool, ch *setupChange) error {
	if _, ok := doc.get("hooks"); !ok && len(want) == 0 {
		return nil
	}
	hooks, err := doc.object("hooks", "")
	if err != nil {
		return err
	}
	events := slices.Clone(hooks.keys)
	for _, ev := range order {
		if !slices.Contains(events, ev) {
			events = append(events, ev)
		}
	}
	touched := false
	for _, ev := range events {
		v, present := hooks.get(ev)
		list, isList := v.([]any)
		if present && !isList {
			if want[ev] != nil {
				return fmt.Errorf("hooks.%s is not a list of hook groups; fix it by hand", ev)
			}
			continue
		}
		out, removed, changed := mergeEvent(list, want[ev], ours)
		if !changed {
			continue
		}
		touched = true
		for _, r := range removed {
			ch.Removed = append(ch.Removed, "hooks."+ev+": "+r)
		}
		if w := want[ev]; w != nil {
			ch.Added = append(ch.Added, "hooks."+ev+": "+hookCommands([]any{w})[0].command)
		}
		if len(out) == 0 {
			hooks.del(ev)
		} else {
			hooks.set(ev, out)
		}
	}
	if touched && len(hooks.keys) == 0 {
		doc.del("hooks")
	}
	return nil
}

// mergeStatusLine sets Claude Code's statusLine to want (nil: takes
// maos's out). A status line of another program is left as it is, with
// a note: a status bar shows one command.
func mergeStatusLine(doc, want *jsonObject, ours func(string) bool, ch *setupChange) {
	v, ok := doc.get("statusLine")
	cur, isObj := v.(*jsonObject)
	cmd := ""
	if isObj {
		cmd, _ = cur.vals["command"].(string)
	}
	switch {
	case !ok:
		if want != nil {
			doc.set("statusLine", want)
			ch.Added = append(ch.Added, "statusLine: "+want.vals["command"].(string))
		}
	case !isObj || !ours(cmd):
		if want != nil {
			ch.Notes = append(ch.Notes, fmt.Sprintf("statusLine left as it is: it runs another program (%q); "+
				"to show maos's there instead, set its command to %q", cmd, want.vals["command"]))
		}
	case want == nil:
		doc.del("statusLine")
		ch.Removed = append(ch.Removed, "statusLine: "+cmd)
	case !jsonEqual(cur, want):
		doc.set("statusLine", want)
		ch.Removed = append(ch.Removed, "statusLine: "+cmd)
		ch.Added = append(ch.Added, "statusLine: "+want.vals["command"].(string))
	}
}

// mergeMCPServer sets the MCP server "maos" in doc's mcpServers to want
// (nil: takes it out, and mcpServers when nothing else is left in it).
func mergeMCPServer(doc, want *jsonObject, ch *setupChange) error {
	const name = "maos"
	if _, ok := doc.get("mcpServers"); !ok && want == nil {
		return nil
	}
	servers, err := doc.object("mcpServers", "")
	if err != nil {
		return err
	}
	cur, had := servers.get(name)
	switch {
	case want == nil && had:
		servers.del(name)
		ch.Removed = append(ch.Removed, "mcpServers."+name)
		if len(servers.keys) == 0 {
			doc.del("mcpServers")
		}
	case want != nil && (!had || !jsonEqual(cur, want)):
		if had {
			ch.Removed = append(ch.Removed, "mcpServers."+name)
		}
		servers.set(name, want)
		ch.Added = append(ch.Added, "mcpServers."+name)
	}
	return nil
}
