package fsm

import (
	"bytes"
	"fmt"
	"path"
	"slices"
	"strings"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// recipient is one resolved recipient of a send.
type recipient struct {
	id   string
	role string // its registered role; "" for an id that has not registered
}

// mentions returns the distinct valid agent ids mentioned in text as
// "@name", in order of appearance, at most max of them. An "@" preceded by
// a name character (an e-mail address) is not a mention, and trailing
// punctuation is cut before the name is checked with ValidName ("@claude."
// ends a sentence). A hand scan rather than a regexp: every send's text
// goes through it at apply, on every node.
func mentions(text string, max int) []string {
	var out []string
	var seen map[string]bool
	for i := 0; i < len(text); {
		at := strings.IndexByte(text[i:], '@')
		if at < 0 {
			break
		}
		at += i
		end := at + 1
		for end < len(text) && isMentionByte(text[end]) {
			end++
		}
		i = end
		if (at > 0 && isMentionByte(text[at-1])) || end == at+1 || !isAlnum(text[at+1]) {
			continue
		}
		name := strings.TrimRight(text[at+1:end], ".-_")
		if !api.ValidName(name) || seen[name] {
			continue
		}
		if seen == nil {
			seen = map[string]bool{}
		}
		seen[name] = true
		out = append(out, name)
		if len(out) == max {
			break
		}
	}
	return out
}

// isMentionByte reports whether c may appear in a mentioned name as written
// ([A-Za-z0-9._-]; ValidName then insists on lower case).
func isMentionByte(c byte) bool {
	return isAlnum(c) || ('A' <= c && c <= 'Z') || c == '.' || c == '_' || c == '-'
}

// resolveRecipients turns m's "to" and the @mentions of its text into
// agents, at apply time, against the registry in tx:
//
//   - a plain id is a recipient whether or not it has registered (its inbox
//     starts filling before its watcher starts; a client's send checked
//     before that someone answers to it, unless unknown_recipients is
//     accept: checkKnown);
//   - "all" and "*" are every registered agent but the sender (none is not
//     an error: the message still goes to the channel);
//   - "role:NAME" is every agent of that role but the sender,
//     "capability:NAME" every agent registered with that capability but
//     the sender, and a glob every registered agent whose id it matches
//     but the sender; one that matches nobody is a *FieldError on "to[i]",
//     unless emptyOK (a task's queue may have no agent yet: the message
//     then goes to the channel alone);
//   - "@id" in content.text adds a registered agent other than the sender
//     (a mention of an id nobody registered is taken for prose);
//   - a message for moderators only goes to the agents "to" names by id
//     and no one else (the other forms are still checked).
//
// The list is deduplicated, in the order the forms name the agents; within
// a form, in id order. The cost is the agents each form covers: a role or
// a capability reads its index range (a capability also each match's
// record, for its role), a glob the id range of its literal prefix, "all"
// every agent.
func resolveRecipients(tx *bbolt.Tx, m *api.Message, emptyOK bool) ([]recipient, error) {
	agents := tx.Bucket(bucketAgents)
	index := tx.Bucket(bucketAgentIndex)
	seen := map[string]bool{}
	var out []recipient
	add := func(id, role string) {
		if !seen[id] {
			seen[id] = true
			out = append(out, recipient{id: id, role: role})
		}
	}
	for i, r := range m.To {
		field := fmt.Sprintf("to[%d]", i)
		switch api.AddressKindOf(r) {
		case api.AddressAll:
			c := agents.Cursor()
			for k, v := c.First(); k != nil; k, v = c.Next() {
				if string(k) != m.From {
					add(string(k), agentRole(v))
				}
			}
		case api.AddressRole:
			role := strings.TrimPrefix(r, "role:")
			prefix := agentIndexPrefix(idxRole, role)
			n := 0
			c := index.Cursor()
			for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
				if id := string(k[len(prefix):]); id != m.From {
					n++
					add(id, role)
				}
			}
			if n == 0 && !emptyOK {
				return nil, api.FieldErrorf(field, "%q matches no agent: no registered agent other than the sender has role %q", r, role)
			}
		case api.AddressCapability:
			capability := strings.TrimPrefix(r, api.CapabilityPrefix)
			prefix := agentIndexPrefix(idxCapability, capability)
			n := 0
			c := index.Cursor()
			for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
				if id := string(k[len(prefix):]); id != m.From {
					n++
					add(id, agentRole(agents.Get([]byte(id))))
				}
			}
			if n == 0 && !emptyOK {
				return nil, api.FieldErrorf(field, "%q matches no agent: no registered agent other than the sender has capability %q", r, capability)
			}
		case api.AddressGlob:
			lit := []byte(r[:strings.IndexAny(r, "*?[")])
			n := 0
			c := agents.Cursor()
			for k, v := c.Seek(lit); k != nil && bytes.HasPrefix(k, lit); k, v = c.Next() {
				if ok, _ := path.Match(r, string(k)); ok && string(k) != m.From {
					n++
					add(string(k), agentRole(v))
				}
			}
			if n == 0 && !emptyOK {
				return nil, api.FieldErrorf(field, "%q matches no agent: no registered agent other than the sender matches the glob", r)
			}
		default:
			add(r, agentRole(agents.Get([]byte(r))))
		}
	}
	for _, id := range mentions(m.Content.Text, api.MaxRecipients) {
		if id == m.From || seen[id] {
			continue
		}
		if v := agents.Get([]byte(id)); v != nil {
			add(id, agentRole(v))
		}
	}
	if m.Visibility == api.VisibilityModerators {
		out = slices.DeleteFunc(out, func(r recipient) bool { return !api.NamesAgent(m.To, r.id) })
	}
	return out, nil
}

// isAlnum reports whether c is in [a-z0-9].
func isAlnum(c byte) bool { return ('a' <= c && c <= 'z') || ('0' <= c && c <= '9') }
