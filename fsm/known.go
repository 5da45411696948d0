package fsm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/agnivade/levenshtein"
	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// Known names: who a command may address. A send, a task's create and
// handoff and an approval's request name agents, roles and capabilities;
// a name no one answers to would be stored as a phantom (an inbox nobody
// reads, a queue nobody claims, an approver who never decides). So apply
// refuses them, with the closest known names, unless the cluster setting
// unknown_recipients is accept.
//
// An agent is known when it is registered, has sent a message (the
// senders bucket), or holds a live token (an admin creates the token
// before its agent first runs). A role or capability is known when a
// registered agent has it. "all", "*" and globs match registered agents
// only, and @mentions of unknown names are prose: neither is checked.
//
// Apply decides, on every node alike, but only for an entry that says so:
// the node that accepts a client's command sets its known_names flag
// (Addressing; transport's commit does it for every command), so an entry
// an older build committed applies on replay as it did before. The same
// flag makes a send record its sender: a replayed old send records
// nothing, so two nodes never disagree on who has sent.
//
//	bucketSenders: agent id → the 8-byte seq of its first message stored by
//	a flagged entry. Never trimmed: an agent that once sent stays known.

// recordSender records that from sent the message at seq, if it is its
// first (SystemSender is no agent and is never recorded).
func recordSender(tx *bbolt.Tx, from string, seq uint64) {
	b := tx.Bucket(bucketSenders)
	if from == api.SystemSender || b.Get([]byte(from)) != nil {
		return
	}
	mustPut(b, []byte(from), u64(seq))
}

// agentBook answers, in one transaction, whether agents are known:
// registered, a sender, or the agent of a live token. The tokens are read
// once, when a name is neither of the first two.
type agentBook struct {
	tx     *bbolt.Tx
	tokens []string
	read   bool
}

// known reports whether someone answers to agent id.
func (b *agentBook) known(id string) bool {
	k := []byte(id)
	if b.tx.Bucket(bucketAgents).Get(k) != nil || b.tx.Bucket(bucketSenders).Get(k) != nil {
		return true
	}
	if !b.read {
		b.tokens, b.read = tokenAgents(b.tx), true
	}
	return slices.Contains(b.tokens, id)
}

// tokenAgents lists the agents of the live tokens (a scan of the tokens:
// they are few, and only a name that is neither registered nor a sender
// gets here).
func tokenAgents(tx *bbolt.Tx) []string {
	var out []string
	_ = tx.Bucket(bucketTokens).ForEach(func(_, v []byte) error {
		var t api.Token
		if json.Unmarshal(v, &t) == nil && t.Agent != "" && !t.Revoked() {
			out = append(out, t.Agent)
		}
		return nil
	})
	return out
}

// hasIndexed reports whether a registered agent has the role or
// capability name (kind idxRole or idxCapability).
func hasIndexed(tx *bbolt.Tx, kind byte, name string) bool {
	prefix := agentIndexPrefix(kind, name)
	k, _ := tx.Bucket(bucketAgentIndex).Cursor().Seek(prefix)
	return k != nil && bytes.HasPrefix(k, prefix)
}

// checkKnown is the one rule of who may be addressed: it refuses, with
// one *NotFoundError naming each and the closest known names, the entries
// of names (field's values: agent ids, role:NAME, capability:NAME) no
// one answers to, unless unknown_recipients is accept. actor, the agent
// the command acts as, is known (it acts now). Every command's apply that
// carries known_names calls it before it writes anything.
func checkKnown(tx *bbolt.Tx, field, actor string, names []string) error {
	var unknown []string
	book := agentBook{tx: tx}
	for _, n := range names {
		if slices.Contains(unknown, n) {
			continue
		}
		switch api.AddressKindOf(n) {
		case api.AddressAgent:
			if n != actor && !book.known(n) {
				unknown = append(unknown, n)
			}
		case api.AddressRole:
			if !hasIndexed(tx, idxRole, strings.TrimPrefix(n, api.RolePrefix)) {
				unknown = append(unknown, n)
			}
		case api.AddressCapability:
			if !hasIndexed(tx, idxCapability, strings.TrimPrefix(n, api.CapabilityPrefix)) {
				unknown = append(unknown, n)
			}
		}
	}
	if len(unknown) == 0 || readConfig(tx).UnknownRecipients == api.UnknownRecipientsAccept {
		return nil
	}
	return unknownNames(tx, field, unknown)
}

// unknownNames is the refusal of unknown, with the closest known names:
// `to: agent "wroker1" (not registered, never sent; did you mean
// worker1?) and role "wrker" (no agent has it; did you mean
// role:worker?): not found; …what to do`.
func unknownNames(tx *bbolt.Tx, field string, unknown []string) error {
	known := knownNames(tx)
	more := len(unknown) - maxNamed
	if more > 0 {
		unknown = unknown[:maxNamed]
	}
	parts := make([]string, len(unknown))
	agents := false
	for i, n := range unknown {
		var what, why string
		var pool []candidate
		switch api.AddressKindOf(n) {
		case api.AddressRole:
			what, why, pool = fmt.Sprintf("role %q", strings.TrimPrefix(n, api.RolePrefix)), "no agent has it", known.roles
		case api.AddressCapability:
			what, why, pool = fmt.Sprintf("capability %q", strings.TrimPrefix(n, api.CapabilityPrefix)), "no agent has it", known.capabilities
		default:
			agents = true
			what, why, pool = fmt.Sprintf("agent %q", n), "not registered, never sent", append(slices.Clip(known.agents), known.roles...)
		}
		if s := closest(bare(n), pool); len(s) > 0 {
			why += "; did you mean " + strings.Join(s, " or ") + "?"
		}
		parts[i] = what + " (" + why + ")"
	}
	if more > 0 {
		parts = append(parts, fmt.Sprintf("%d more", more))
	}
	list := parts[0]
	if len(parts) > 1 {
		list = strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
	}
	hint := "register the agent, or one with the role or capability (maosctl agents register ID --role ROLE --capability CAP)"
	if agents {
		hint += ", or let the agent send first"
	}
	hint += "; to address agents before they exist: maosctl cluster config set unknown_recipients accept"
	return &api.NotFoundError{What: field + ": " + list, Hint: hint}
}

// candidate is a known name as a suggestion shows it (role:worker) and
// as it is compared (worker).
type candidate struct{ show, bare string }

// known are the names a suggestion may offer.
type known struct{ agents, roles, capabilities []candidate }

// knownNames reads every known name: registered agents, senders and the
// agents of live tokens; registered roles; capabilities. Only a refusal
// reads them.
func knownNames(tx *bbolt.Tx) known {
	var k known
	seen := map[string]bool{}
	addAgent := func(id string) {
		if !seen[id] {
			seen[id] = true
			k.agents = append(k.agents, candidate{id, id})
		}
	}
	_ = tx.Bucket(bucketAgents).ForEach(func(id, _ []byte) error { addAgent(string(id)); return nil })
	_ = tx.Bucket(bucketSenders).ForEach(func(id, _ []byte) error { addAgent(string(id)); return nil })
	for _, id := range tokenAgents(tx) {
		addAgent(id)
	}
	c := tx.Bucket(bucketAgentIndex).Cursor()
	for _, kind := range []byte{idxRole, idxCapability} {
		var last string
		for key, _ := c.Seek([]byte{kind}); key != nil && key[0] == kind; key, _ = c.Next() {
			name, _, _ := bytes.Cut(key[1:], []byte{0})
			if string(name) == last {
				continue
			}
			last = string(name)
			if kind == idxRole {
				k.roles = append(k.roles, candidate{api.RolePrefix + last, last})
			} else {
				k.capabilities = append(k.capabilities, candidate{api.CapabilityPrefix + last, last})
			}
		}
	}
	return k
}

// bare is a name without its role: or capability: prefix.
func bare(n string) string {
	if r, ok := strings.CutPrefix(n, api.RolePrefix); ok {
		return r
	}
	return strings.TrimPrefix(n, api.CapabilityPrefix)
}

// maxSuggestions is how many known names a refusal offers for one name,
// maxNamed how many unknown names it names (then "and N more").
const (
	maxSuggestions = 3
	maxNamed       = 8
)

// closest returns the candidates nearest to name by edit distance
// (Levenshtein), at most maxSuggestions, nearest first, then by name; a
// candidate further than a third of the name's length (at least 2; 1 for
// a name of one or two characters) is no suggestion.
func closest(name string, pool []candidate) []string {
	limit := max(2, len(name)/3)
	if len(name) < 3 {
		limit = 1
	}
	type scored struct {
		show string
		d    int
	}
	var near []scored
	for _, c := range pool {
		if d := levenshtein.ComputeDistance(name, c.bare); d <= limit {
			near = append(near, scored{c.show, d})
		}
	}
	slices.SortFunc(near, func(a, b scored) int {
		if a.d != b.d {
			return a.d - b.d
		}
		return strings.Compare(a.show, b.show)
	})
	out := make([]string, 0, maxSuggestions)
	for _, s := range near[:min(len(near), maxSuggestions)] {
		out = append(out, s.show)
	}
	return out
}
