package fsm

import (
	"encoding/json"
	"slices"
	"strings"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// Rerouting (seed 004's hub). A rules document may name, in
// reroute_blocked_to, the agent that gets the copies the rules block: the
// message is stored once, as always, with that agent among its Recipients
// and "rerouted_from" (the ids it was blocked for) in its metadata, and
// the audit keeps each BLOCKED line and adds one REROUTED line. Who is
// blocked does not change: the blocked recipients keep their "blocked"
// receipts and the send answers them in Blocked.

// AuditRerouted is the kind of the REROUTED line.
const AuditRerouted = "rerouted"

// MetaReroutedFrom is the metadata key of a rerouted message: the ids the
// rules blocked it for.
const MetaReroutedFrom = "rerouted_from"

// rerouted is where the blocked copies of one message went.
type rerouted struct {
	to   string   // the document's reroute_blocked_to
	from []string // the blocked recipients it stands for
}

// reroute delivers the copies the rules blocked (blocked, in the order of
// resolution) to the document's reroute_blocked_to: the agent joins
// delivered (once) and m's metadata gets rerouted_from. No document, no
// such agent, a sender that is that agent, or an agent blocked itself
// (it was among the recipients) reroutes nothing for it: nil.
func (f *FSM) reroute(tx *bbolt.Tx, m *api.Message, delivered []recipient, blocked []api.BlockedRecipient) ([]recipient, *rerouted, error) {
	r, err := f.rules.load(tx)
	if err != nil {
		return delivered, nil, err
	}
	to := r.RerouteBlockedTo()
	if to == "" || to == m.From {
		return delivered, nil, nil
	}
	var from []string
	for _, b := range blocked {
		if b.ID != to {
			from = append(from, b.ID)
		}
	}
	if len(from) == 0 {
		return delivered, nil, nil
	}
	if !slices.ContainsFunc(delivered, func(d recipient) bool { return d.id == to }) {
		delivered = append(delivered, recipient{id: to, role: agentRole(tx.Bucket(bucketAgents).Get([]byte(to)))})
	}
	m.Metadata = withMeta(m.Metadata, MetaReroutedFrom, from)
	return delivered, &rerouted{to: to, from: from}, nil
}

// audit writes the REROUTED line of m: "[ts] [alice→orchestrator]
// REROUTED: for bob, carol (blocked by the rules)". A nil v writes nothing.
func (v *rerouted) audit(tx *bbolt.Tx, index uint64, ts int64, m *api.Message, delivered []recipient) {
	if v == nil {
		return
	}
	audit(tx, index, ts, markPrivate(api.AuditEvent{Kind: AuditRerouted, From: m.From, To: []string{v.to}, Label: "REROUTED",
		Text: "for " + strings.Join(v.from, ", ") + " (blocked by the rules)", MessageID: m.ID}, m, delivered))
}

// withMeta is the metadata meta with key set to value: an object gets the
// key (replacing one the sender set); anything else (a list, a string) is
// kept under "metadata" in a new object. The keys come out sorted, so every
// node writes the same bytes.
func withMeta(meta json.RawMessage, key string, value any) json.RawMessage {
	var obj map[string]json.RawMessage
	if len(meta) > 0 && json.Unmarshal(meta, &obj) != nil {
		obj = map[string]json.RawMessage{"metadata": meta}
	}
	if obj == nil { // none, or null
		obj = map[string]json.RawMessage{}
	}
	v, err := json.Marshal(value)
	if err != nil {
		panic("fsm: metadata: encode " + key + ": " + err.Error())
	}
	obj[key] = v
	out, err := json.Marshal(obj)
	if err != nil {
		panic("fsm: metadata: encode: " + err.Error())
	}
	return out
}
