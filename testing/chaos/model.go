package chaos

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// The linearizability model.
//
// Each channel is its own partition (Model.Partition): a channel's state is
// its ordered log of (seq, id) entries. The operations:
//
//   - send(id) that returned ok(seq): if id is in the log, seq must be the
//     seq it is stored at (a deduplicated retry); otherwise the entry is
//     appended, and seq must be greater than the last one.
//   - send(id) with an unknown outcome (timeout, 503 outcome_unknown, lost
//     connection, never completed): it is pending, Return = MaxInt64, so it
//     may take effect at any time after its invoke. Its output comes from the
//     final log (read from the nodes after the run): if the id is stored
//     there at seq S, the op is "ok(S)" like an acknowledged one; if not, it
//     did not apply, and a send that did not apply changes nothing and fits
//     anywhere, so it is left out of the history (the model would accept it
//     in any state, as linOutput{Applied: false}). Either way the model
//     accepts what the cluster did, and only what it did.
//   - the attempts of one message that report the same seq are merged into
//     one op (mergeSends): the same verdicts, far fewer states to search.
//   - sends that definitely failed are left out: they had no effect.
//   - read(after) that returned a page: the page must be the entries of the
//     log with seq > after, at most PageLimit of them, and has_more must be
//     true exactly when more follow. Failed reads are left out (no side
//     effects).
//   - one final read per channel, invoked after every completed op returned
//     (concurrent only with pending sends): the whole log as the reference
//     node stores it. This makes a lost acknowledged send, or a stored id no
//     op wrote, a linearizability violation too.
//
// The log a channel can ever hold is known before checking: the entries the
// sends of the history report (acknowledged seqs and, for unknown sends, the
// final log's). Because porcupine must linearize every op and appends are
// in increasing seq order, a linearization builds the log in that order, so
// the state is stored as a prefix length k of that sorted list: an append
// that is not the next entry is refused at once. The verdicts are those of
// the plain list model; the search just never wanders into dead ends.

// linInput is the input of a porcupine operation.
type linInput struct {
	Kind    string // "send", "read", "final"
	Channel string
	ID      string // send
	After   uint64 // read
}

// linOutput is the output of a porcupine operation.
type linOutput struct {
	// Applied: the send's entry (ID, Seq) is in the log after it.
	Applied bool
	Seq     uint64
	// Pending: the send's outcome is unknown (its output comes from the
	// final log).
	Pending bool
	Entries []Entry
	HasMore bool
	// Attempts is how many attempts of the message this op stands for
	// (see mergeSends); for descriptions only.
	Attempts int
}

const (
	linSend  = "send"
	linRead  = "read"
	linFinal = "final"
)

// chanLog is every entry one channel's sends can have stored, by seq.
type chanLog struct {
	name  string
	log   []Entry
	index map[Entry]int
	// dupBefore[i]: log[i].ID is also in log[:i] (one id at two seqs).
	dupBefore []bool
}

func newChanLog(name string, entries []Entry) *chanLog {
	sort.Slice(entries, func(i, j int) bool {
		if entries[i].Seq != entries[j].Seq {
			return entries[i].Seq < entries[j].Seq
		}
		return entries[i].ID < entries[j].ID
	})
	cl := &chanLog{name: name, index: make(map[Entry]int, len(entries))}
	seen := make(map[string]bool, len(entries))
	for _, e := range entries {
		if _, dup := cl.index[e]; dup {
			continue
		}
		cl.index[e] = len(cl.log)
		cl.log = append(cl.log, e)
		cl.dupBefore = append(cl.dupBefore, seen[e.ID])
		seen[e.ID] = true
	}
	return cl
}

// linState is a channel's log: the first k entries of its chanLog.
type linState struct {
	cl *chanLog // nil in the initial state
	k  int
}

func (s linState) String() string {
	if s.k == 0 || s.cl == nil {
		return "empty log"
	}
	return fmt.Sprintf("%d entries, last %s", s.k, s.cl.log[s.k-1])
}

// step applies one operation to state s.
func (s linState) step(logs map[string]*chanLog, in linInput, out linOutput) (bool, linState) {
	cl := s.cl
	if cl == nil {
		cl = logs[in.Channel]
		if cl == nil {
			cl = &chanLog{name: in.Channel}
		}
		s.cl = cl
	}
	switch in.Kind {
	case linSend:
		if !out.Applied {
			return true, s
		}
		i, ok := cl.index[Entry{Seq: out.Seq, ID: in.ID}]
		switch {
		case !ok:
			return false, s // cannot happen: every applied send's entry is in the log
		case i < s.k:
			return true, s // stored already: a deduplicated retry
		case i > s.k:
			return false, s // an entry with a lower seq is not stored yet
		case cl.dupBefore[i]:
			return false, s // the id is stored already, at another seq
		case i > 0 && cl.log[i-1].Seq >= out.Seq:
			return false, s // two ids at one seq
		}
		s.k++
		return true, s
	case linRead, linFinal:
		lo, limit := 0, s.k
		if in.Kind == linRead {
			lo = min(sort.Search(len(cl.log), func(i int) bool { return cl.log[i].Seq > in.After }), s.k)
			limit = PageLimit
		}
		hi := min(lo+limit, s.k)
		if len(out.Entries) != hi-lo || out.HasMore != (s.k-lo > limit) {
			return false, s
		}
		for i, e := range out.Entries {
			if e != cl.log[lo+i] {
				return false, s
			}
		}
		return true, s
	}
	return false, s
}

// groupBy splits items by key (called once per item, in order): the groups
// in the order their key first appears, each in the items' order.
func groupBy[T any](items []T, key func(T) string) [][]T {
	byKey := map[string][]T{}
	var order []string
	for _, it := range items {
		k := key(it)
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], it)
	}
	out := make([][]T, 0, len(order))
	for _, k := range order {
		out = append(out, byKey[k])
	}
	return out
}

// newModel returns the porcupine model over the channel logs.
func newModel(logs map[string]*chanLog) porcupine.Model {
	return porcupine.Model{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			return groupBy(history, func(op porcupine.Operation) string { return op.Input.(linInput).Channel })
		},
		PartitionEvent: func(history []porcupine.Event) [][]porcupine.Event {
			// Calls carry the input, returns only the output: group a
			// return with its call by Id.
			chanOf := map[int]string{}
			return groupBy(history, func(ev porcupine.Event) string {
				ch, ok := chanOf[ev.Id]
				if ev.Kind == porcupine.CallEvent || !ok {
					if in, isIn := ev.Value.(linInput); isIn {
						ch = in.Channel
						chanOf[ev.Id] = ch
					}
				}
				return ch
			})
		},
		Init: func() interface{} { return linState{} },
		Step: func(state, input, output interface{}) (bool, interface{}) {
			return state.(linState).step(logs, input.(linInput), output.(linOutput))
		},
		// Within a partition every state is of one channel: k says it all.
		Equal: func(a, b interface{}) bool { return a.(linState).k == b.(linState).k },
		Hash:  func(s interface{}) uint64 { return uint64(s.(linState).k) },
		DescribeOperation: func(input, output interface{}) string {
			return describeOp(input.(linInput), output.(linOutput))
		},
		DescribeState: func(s interface{}) string { return s.(linState).String() },
	}
}

func describeOp(in linInput, out linOutput) string {
	switch in.Kind {
	case linSend:
		attempts := ""
		if out.Attempts > 1 {
			attempts = fmt.Sprintf(", %d attempts", out.Attempts)
		}
		switch {
		case out.Pending && out.Applied:
			return fmt.Sprintf("send(%s) -> unknown (final log: seq %d%s)", in.ID, out.Seq, attempts)
		case out.Pending:
			return fmt.Sprintf("send(%s) -> unknown (not in final log%s)", in.ID, attempts)
		}
		return fmt.Sprintf("send(%s) -> seq %d%s", in.ID, out.Seq, attempts)
	case linRead, linFinal:
		var b strings.Builder
		if in.Kind == linFinal {
			b.WriteString("final read")
		} else {
			fmt.Fprintf(&b, "read(after %d)", in.After)
		}
		fmt.Fprintf(&b, " -> %d entries", len(out.Entries))
		if n := len(out.Entries); n > 0 {
			fmt.Fprintf(&b, " [%s .. %s]", out.Entries[0], out.Entries[n-1])
		}
		if out.HasMore {
			b.WriteString(" has_more")
		}
		return b.String()
	}
	return fmt.Sprintf("%+v -> %+v", in, out)
}

// pendingReturn is the Return of an op whose outcome is unknown: porcupine's
// convention for an op that may take effect at any time after its call.
const pendingReturn = math.MaxInt64

// linHistory is what the linearizability check runs on.
type linHistory struct {
	ops    []porcupine.Operation
	logs   map[string]*chanLog
	byChan map[string][]porcupine.Operation
}

// buildLinHistory turns the recorded ops of channels into porcupine
// operations, resolving unknown sends against final (the reference node's
// log of each channel) and adding one final read per channel.
//
// The attempts of one message are merged first (see mergeSends), and an
// unknown send that is not in the final log is left out: it changes
// nothing, may take effect at any time, and so fits anywhere — but left in,
// it would let the search try it at every point, which is harmless when
// the history is linearizable and exponential when it is not.
func buildLinHistory(ops []Op, channels []string, final map[string][]Entry, finalNode string) linHistory {
	want := make(map[string]bool, len(channels))
	finalSeq := make(map[string]map[string]uint64, len(channels))
	for _, ch := range channels {
		want[ch] = true
		m := make(map[string]uint64, len(final[ch]))
		for _, e := range final[ch] {
			if _, ok := m[e.ID]; !ok {
				m[e.ID] = e.Seq
			}
		}
		finalSeq[ch] = m
	}
	var end time.Duration
	maxClient := -1
	entries := map[string][]Entry{}
	lh := linHistory{logs: map[string]*chanLog{}, byChan: map[string][]porcupine.Operation{}}
	type sendKey struct{ channel, id string }
	sends := map[sendKey][]porcupine.Operation{}
	var sendOrder []sendKey
	for _, op := range ops {
		if !want[op.Channel] {
			continue
		}
		end = max(end, op.Invoke, op.Return)
		maxClient = max(maxClient, op.Client)
		in := linInput{Kind: string(op.Kind), Channel: op.Channel, ID: op.ID, After: op.After}
		var out linOutput
		ret := int64(op.Return)
		switch {
		case op.Kind == KindSend && op.Outcome == OK:
			out = linOutput{Applied: true, Seq: op.Seq, Attempts: 1}
		case op.Kind == KindSend && (op.Outcome == Unknown || op.Outcome == ""):
			seq, ok := finalSeq[op.Channel][op.ID]
			if !ok {
				continue // not applied: no effect, fits anywhere
			}
			out = linOutput{Applied: true, Seq: seq, Pending: true, Attempts: 1}
			ret = pendingReturn
		case op.Kind == KindRead && op.Outcome == OK:
			out = linOutput{Entries: op.Read, HasMore: op.HasMore}
		default:
			continue // failed sends had no effect; failed reads tell nothing
		}
		meta := fmt.Sprintf("client %d via %s", op.Client, op.Node)
		if op.Err != "" {
			meta += ": " + op.Err
		}
		pop := porcupine.Operation{ClientId: op.Client, Input: in, Call: int64(op.Invoke), Output: out, Return: ret, Metadata: meta}
		if op.Kind == KindSend {
			k := sendKey{op.Channel, op.ID}
			if _, ok := sends[k]; !ok {
				sendOrder = append(sendOrder, k)
			}
			sends[k] = append(sends[k], pop)
			entries[op.Channel] = append(entries[op.Channel], Entry{Seq: out.Seq, ID: op.ID})
			continue
		}
		lh.add(pop)
	}
	for _, k := range sendOrder {
		for _, op := range mergeSends(sends[k]) {
			lh.add(op)
		}
	}
	for _, ch := range channels {
		lh.logs[ch] = newChanLog(ch, entries[ch])
		lh.add(porcupine.Operation{
			ClientId: maxClient + 1,
			Input:    linInput{Kind: linFinal, Channel: ch},
			Call:     int64(end) + 1,
			Output:   linOutput{Entries: final[ch]},
			Return:   int64(end) + 2,
			Metadata: "the log of " + finalNode + " after the run",
		})
	}
	return lh
}

// mergeSends merges the attempts of one message (one id in one channel)
// that report the same seq into one operation, invoked with the first and
// returning with the earliest return (pending if none returned OK).
//
// That changes no verdict: whichever attempt takes effect first appends
// the entry at some point p; every other attempt is then a deduplicated
// no-op, which fits anywhere in its window after p, so the attempts are
// linearizable exactly when some p lies between the earliest invoke and the
// earliest return. Kept apart, the attempts that become no-ops could be
// placed at many points each, which only multiplies the states the search
// visits. Attempts that report different seqs are not merged (the model
// refuses the second seq anyway).
func mergeSends(attempts []porcupine.Operation) []porcupine.Operation {
	bySeq := map[uint64]*porcupine.Operation{}
	var order []uint64
	var metas = map[uint64][]string{}
	for _, a := range attempts {
		out := a.Output.(linOutput)
		m, ok := bySeq[out.Seq]
		if !ok {
			cp := a
			bySeq[out.Seq] = &cp
			order = append(order, out.Seq)
			metas[out.Seq] = []string{a.Metadata.(string)}
			continue
		}
		mo := m.Output.(linOutput)
		mo.Attempts++
		mo.Pending = mo.Pending && out.Pending
		m.Output = mo
		m.Call = min(m.Call, a.Call)
		m.Return = min(m.Return, a.Return)
		metas[out.Seq] = append(metas[out.Seq], a.Metadata.(string))
	}
	res := make([]porcupine.Operation, 0, len(order))
	for _, seq := range order {
		op := *bySeq[seq]
		if ms := metas[seq]; len(ms) > 1 {
			op.Metadata = fmt.Sprintf("%d attempts: %s", len(ms), strings.Join(ms, "; "))
		}
		res = append(res, op)
	}
	return res
}

func (lh *linHistory) add(op porcupine.Operation) {
	lh.ops = append(lh.ops, op)
	ch := op.Input.(linInput).Channel
	lh.byChan[ch] = append(lh.byChan[ch], op)
}
