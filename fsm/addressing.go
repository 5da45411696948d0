package fsm

import (
	"bytes"
	"fmt"
	"path"
	"regexp"
	"strings"

	"go.etcd.io/bbolt"
)

// The addressing forms of a "to" entry.
type recipientKindT int

const (
	kindAgent recipientKindT = iota // a plain agent id
	kindAll                         // "all" or "*": every registered agent but the sender
	kindRole                        // "role:NAME": every agent of the role but the sender
	kindGlob                        // a path.Match pattern over registered agent ids
)

// recipientKind classifies one "to" entry (already matching recipientRE).
func recipientKind(r string) recipientKindT {
	switch {
	case r == "all" || r == "*":
		return kindAll
	case strings.HasPrefix(r, "role:"):
		return kindRole
	case strings.ContainsAny(r, "*?["):
		return kindGlob
	}
	return kindAgent
}

// recipient is one resolved recipient of a send.
type recipient struct {
	id   string
	role string // its registered role; "" for an id that has not registered
}

// mentionRE finds "@name" not preceded by a name character (so an e-mail
// address is not a mention). The name is checked with ValidName after
// trailing punctuation is cut ("@claude." ends a sentence).
var mentionRE = regexp.MustCompile(`(?:^|[^A-Za-z0-9._-])@([A-Za-z0-9][A-Za-z0-9._-]*)`)

// mentions returns the distinct valid agent ids mentioned in text, in
// order of appearance, at most max of them.
func mentions(text string, max int) []string {
	var out []string
	seen := map[string]bool{}
	for _, sm := range mentionRE.FindAllStringSubmatch(text, -1) {
		name := strings.TrimRight(sm[1], ".-_")
		if !ValidName(name) || seen[name] {
			continue
		}
		seen[name] = true
		out = append(out, name)
		if len(out) == max {
			break
		}
	}
	return out
}

// resolveRecipients turns m's "to" and the @mentions of its text into
// agents, at apply time, against the registry in tx:
//
//   - a plain id is a recipient whether or not it has registered (its inbox
//     starts filling before its watcher starts);
//   - "all" and "*" are every registered agent but the sender (none is not
//     an error: the message still goes to the channel);
//   - "role:NAME" is every agent of that role but the sender, and a glob
//     every registered agent whose id it matches but the sender; one that
//     matches nobody is a *FieldError on "to[i]";
//   - "@id" in content.text adds a registered agent other than the sender
//     (a mention of an id nobody registered is taken for prose).
//
// The list is deduplicated, in the order the forms name the agents; within
// a form, in id order. The cost is the agents each form covers: a role reads
// its index range, a glob the id range of its literal prefix, "all" every
// agent.
func resolveRecipients(tx *bbolt.Tx, m *Message) ([]recipient, error) {
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
		switch recipientKind(r) {
		case kindAll:
			c := agents.Cursor()
			for k, v := c.First(); k != nil; k, v = c.Next() {
				if string(k) != m.From {
					add(string(k), agentRole(v))
				}
			}
		case kindRole:
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
			if n == 0 {
				return nil, fieldErr(field, "%q matches no agent: no registered agent other than the sender has role %q", r, role)
			}
		case kindGlob:
			lit := []byte(r[:strings.IndexAny(r, "*?[")])
			n := 0
			c := agents.Cursor()
			for k, v := c.Seek(lit); k != nil && bytes.HasPrefix(k, lit); k, v = c.Next() {
				if ok, _ := path.Match(r, string(k)); ok && string(k) != m.From {
					n++
					add(string(k), agentRole(v))
				}
			}
			if n == 0 {
				return nil, fieldErr(field, "%q matches no agent: no registered agent other than the sender matches the glob", r)
			}
		default:
			add(r, agentRole(agents.Get([]byte(r))))
		}
	}
	for _, id := range mentions(m.Content.Text, MaxRecipients) {
		if id == m.From || seen[id] {
			continue
		}
		if v := agents.Get([]byte(id)); v != nil {
			add(id, agentRole(v))
		}
	}
	return out, nil
}
