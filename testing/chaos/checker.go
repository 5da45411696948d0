package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/testing/harness"
)

// LogSource is one replica as the checker reads it.
type LogSource interface {
	// Name identifies the replica in the result (a node id).
	Name() string
	// ReadChannel returns the whole log of channel on this replica, in the
	// order the replica stores it (seq order), or an error.
	ReadChannel(ctx context.Context, channel string) ([]Entry, error)
}

// NodeSource reads a node's log through its API with local consistency:
// what that node itself stores.
func NodeSource(n *harness.Node) LogSource { return nodeSource{n} }

// NodeSources is NodeSource of each node.
func NodeSources(nodes []*harness.Node) []LogSource {
	out := make([]LogSource, len(nodes))
	for i, n := range nodes {
		out[i] = NodeSource(n)
	}
	return out
}

type nodeSource struct{ n *harness.Node }

// Reading a node's log: each page request is bounded and retried a few
// times, since a node that just healed may still be settling.
const (
	pageTimeout  = 10 * time.Second
	pageAttempts = 5
	pagePause    = 200 * time.Millisecond
	// maxPages bounds one channel's read (1e7 entries).
	maxPages = 10_000
)

func (s nodeSource) Name() string { return s.n.ID }

func (s nodeSource) ReadChannel(ctx context.Context, channel string) ([]Entry, error) {
	cl := s.n.Client()
	if cl == nil {
		return nil, fmt.Errorf("chaos: %s was never started", s.n.ID)
	}
	var out []Entry
	var after uint64
	for pages := 0; pages < maxPages; pages++ {
		var page struct {
			entries []Entry
			more    bool
		}
		var err error
		for attempt := 0; attempt < pageAttempts; attempt++ {
			if attempt > 0 {
				sleepOrDone(ctx, pagePause)
			}
			if ctx.Err() != nil {
				return out, fmt.Errorf("chaos: read %s of %s: %w", channel, s.n.ID, ctx.Err())
			}
			pctx, cancel := context.WithTimeout(ctx, pageTimeout)
			p, perr := cl.ChannelPage(pctx, channel, after, PageLimit, api.Local)
			cancel()
			if err = perr; err == nil {
				page.more = p.HasMore
				page.entries = make([]Entry, len(p.Messages))
				for i, m := range p.Messages {
					page.entries[i] = Entry{Seq: m.Seq, ID: m.ID}
				}
				break
			}
		}
		if err != nil {
			return out, fmt.Errorf("chaos: read %s of %s after seq %d: %w", channel, s.n.ID, after, err)
		}
		out = append(out, page.entries...)
		if !page.more {
			return out, nil
		}
		if len(page.entries) == 0 || page.entries[len(page.entries)-1].Seq <= after {
			return out, fmt.Errorf("chaos: read %s of %s: has_more after seq %d, but the page does not advance", channel, s.n.ID, after)
		}
		after = page.entries[len(page.entries)-1].Seq
	}
	return out, fmt.Errorf("chaos: read %s of %s: more than %d pages", channel, s.n.ID, maxPages)
}

// CheckResult is the checker's verdict. The id lists are sorted; Notes say
// what was seen for each finding (on which node, at which seq).
type CheckResult struct {
	// Acked is the number of distinct ids acknowledged OK.
	Acked int `json:"acked"`
	// Stored is how many messages each node stores in the checked
	// channels, by node name.
	Stored map[string]int `json:"stored"`
	// Lost: acknowledged ids missing on at least one node.
	Lost []string `json:"lost"`
	// Duplicated: ids stored more than once on a node (any channels).
	Duplicated []string `json:"duplicated"`
	// Divergent: channels whose seq→id log differs between nodes (or is
	// not in seq order on one).
	Divergent []string `json:"divergent"`
	// Unexpected: stored ids no send of the workload ever carried.
	Unexpected []string `json:"unexpected"`
	// SeqMismatch: acknowledged ids stored at another seq or channel than
	// acknowledged, or acknowledged with two different seqs.
	SeqMismatch []string `json:"seq_mismatch"`
	// Rejected: sends answered with a 4xx (bad input, conflict). The
	// workload only sends valid new messages and retries with identical
	// content, so any is a bug.
	Rejected []string `json:"rejected"`
	// FailedButStored: ids whose every attempt failed definitely (an
	// answer that says nothing was applied), yet stored.
	FailedButStored []string `json:"failed_but_stored"`
	// Linearizable is porcupine's verdict; LinearizabilityChecked is false
	// when it gave up (timeout) or could not run.
	Linearizable           bool `json:"linearizable"`
	LinearizabilityChecked bool `json:"linearizability_checked"`
	// NonLinearizable lists the channels whose history is not linearizable.
	NonLinearizable []string `json:"non_linearizable"`
	// Visualization is the path of porcupine's HTML visualisation of the
	// non-linearizable channels, when there are any.
	Visualization string `json:"visualization,omitempty"`
	// Notes explain the findings, and anything the checker could not do.
	Notes []string `json:"notes"`
}

// OK reports whether the check passed: nothing lost, duplicated,
// divergent, unexpected, mismatched, rejected or failed-but-stored, and the
// history was checked and found linearizable. (It is a safety verdict: a
// run where no send succeeded passes.)
func (r CheckResult) OK() bool {
	return len(r.Lost) == 0 && len(r.Duplicated) == 0 && len(r.Divergent) == 0 &&
		len(r.Unexpected) == 0 && len(r.SeqMismatch) == 0 && len(r.Rejected) == 0 &&
		len(r.FailedButStored) == 0 && r.LinearizabilityChecked && r.Linearizable
}

// CheckOptions tune CheckSources.
type CheckOptions struct {
	// LinearizabilityTimeout bounds the porcupine search, in all (default
	// 60 s; ctx's deadline, if earlier, wins). When it runs out, the result
	// says so in Notes and LinearizabilityChecked is false.
	LinearizabilityTimeout time.Duration
	// MaxNotes caps the notes per kind of finding (default 20).
	MaxNotes int
}

// DefaultLinearizabilityTimeout bounds the porcupine search by default.
const DefaultLinearizabilityTimeout = 60 * time.Second

// VisualizationFile is the name of porcupine's HTML file in outDir.
const VisualizationFile = "linearizability.html"

// Check reads every channel of channels in full from every node (local
// reads: call it once the faults are healed and the nodes have converged,
// e.g. after harness.Cluster.WaitConverged) and checks them and the
// history h: see CheckSources.
func Check(ctx context.Context, nodes []*harness.Node, h *History, channels []string, outDir string) (CheckResult, error) {
	return CheckSources(ctx, NodeSources(nodes), h, channels, outDir, CheckOptions{})
}

// CheckSources checks the history h against the logs of sources:
//
//  1. every acknowledged id is stored on every replica, in the channel it
//     was sent to, at the acknowledged seq (else Lost / SeqMismatch);
//  2. no id is stored twice on a replica, across all channels (Duplicated);
//  3. every replica holds the same seq→id log of each channel (Divergent);
//  4. no stored id is one the workload never sent (Unexpected), or one whose
//     every attempt definitely failed (FailedButStored); no send got a 4xx
//     (Rejected);
//  5. the history is linearizable against a per-channel append-only log
//     (see model.go), the first source's logs serving as the final log.
//
// When the history is not linearizable, porcupine's visualisation of the
// offending channels is written to outDir/linearizability.html (outDir is
// created if needed; "" skips it). The error is for a replica that could
// not be read, or a bad argument; the result then holds what was found.
func CheckSources(ctx context.Context, sources []LogSource, h *History, channels []string, outDir string, opts CheckOptions) (CheckResult, error) {
	res := CheckResult{Stored: map[string]int{}, NonLinearizable: []string{}, Notes: []string{}}
	if len(sources) == 0 {
		return res, errors.New("chaos: check: no nodes")
	}
	if h == nil {
		return res, errors.New("chaos: check: nil history")
	}
	if opts.LinearizabilityTimeout <= 0 {
		opts.LinearizabilityTimeout = DefaultLinearizabilityTimeout
	}
	if opts.MaxNotes <= 0 {
		opts.MaxNotes = 20
	}
	c := &checker{opts: opts, res: &res, noteCount: map[string]int{}}

	// Read every replica.
	logs := make([]map[string][]Entry, len(sources))
	for i, src := range sources {
		logs[i] = make(map[string][]Entry, len(channels))
		for _, ch := range channels {
			entries, err := src.ReadChannel(ctx, ch)
			if err != nil {
				return res, fmt.Errorf("chaos: check: %w", err)
			}
			logs[i][ch] = entries
			res.Stored[src.Name()] += len(entries)
		}
	}
	ops := h.Ops()
	c.checkStorage(sources, logs, channels, ops)
	c.checkLinearizable(ctx, ops, channels, logs[0], sources[0].Name(), outDir)
	return res, nil
}

type checker struct {
	opts      CheckOptions
	res       *CheckResult
	noteCount map[string]int
}

// note adds a note of kind, up to MaxNotes per kind.
func (c *checker) note(kind, format string, args ...any) {
	c.noteCount[kind]++
	switch n := c.noteCount[kind]; {
	case n <= c.opts.MaxNotes:
		c.res.Notes = append(c.res.Notes, kind+": "+fmt.Sprintf(format, args...))
	case n == c.opts.MaxNotes+1:
		c.res.Notes = append(c.res.Notes, kind+": (more notes of this kind left out)")
	}
}

// location is where a replica stores an id.
type location struct {
	channel string
	seq     uint64
}

func (l location) String() string { return fmt.Sprintf("%s seq %d", l.channel, l.seq) }

// idSet is a set of strings, listed sorted.
type idSet map[string]bool

func (s idSet) sorted() []string {
	out := make([]string, 0, len(s))
	for k := range s {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// nonRejecting are the Codes (harness.ErrorKind) of a failed send that are
// not a verdict on the message: the node could not take it (no leader, not
// leader, not ready) or the connection was not made.
var nonRejecting = map[string]bool{
	"": true, api.CodeNoLeader: true, api.CodeNotLeader: true, api.CodeNotReady: true,
	"refused": true, "timeout": true, "reset": true, "eof": true, "other": true,
}

func (c *checker) checkStorage(sources []LogSource, logs []map[string][]Entry, channels []string, ops []Op) {
	res := c.res
	// What the history says about each id.
	type sent struct {
		channel   string
		acked     []uint64 // distinct seqs acknowledged OK
		ok        bool
		uncertain bool // some attempt ended unknown or never returned
	}
	ids := map[string]*sent{}
	rejected := idSet{}
	for _, op := range ops {
		if op.Kind != KindSend {
			continue
		}
		s := ids[op.ID]
		if s == nil {
			s = &sent{channel: op.Channel}
			ids[op.ID] = s
		}
		switch op.Outcome {
		case OK:
			s.ok = true
			if !slices.Contains(s.acked, op.Seq) {
				s.acked = append(s.acked, op.Seq)
			}
		case Fail:
			if !nonRejecting[op.Code] {
				rejected[op.ID] = true
				c.note("rejected", "%s (to %s via %s at %s): %s", op.ID, op.Channel, op.Node, op.Invoke, op.Err)
			}
		default:
			s.uncertain = true
		}
	}
	res.Rejected = rejected.sorted()

	// Where each replica stores each id.
	where := make([]map[string][]location, len(sources))
	divergent := idSet{}
	for i, src := range sources {
		where[i] = map[string][]location{}
		for _, ch := range channels {
			var prev uint64
			for j, e := range logs[i][ch] {
				where[i][e.ID] = append(where[i][e.ID], location{ch, e.Seq})
				if j > 0 && e.Seq <= prev {
					divergent[ch] = true
					c.note("divergent", "%s on %s is not in seq order: %s after seq %d", ch, src.Name(), e, prev)
				}
				prev = e.Seq
			}
		}
	}

	// (1) acknowledged ids: stored everywhere, where acknowledged.
	lost, mismatch := idSet{}, idSet{}
	acked := make([]string, 0, len(ids))
	for id, s := range ids {
		if s.ok {
			acked = append(acked, id)
		}
	}
	sort.Strings(acked)
	res.Acked = len(acked)
	for _, id := range acked {
		s := ids[id]
		if len(s.acked) > 1 {
			mismatch[id] = true
			c.note("seq mismatch", "%s was acknowledged with different seqs %v", id, s.acked)
		}
		for i, src := range sources {
			locs := where[i][id]
			switch {
			case len(locs) == 0:
				lost[id] = true
				c.note("lost", "%s (acknowledged at %s seq %d) is missing on %s", id, s.channel, s.acked[0], src.Name())
			case !slices.Contains(locs, location{s.channel, s.acked[0]}):
				mismatch[id] = true
				c.note("seq mismatch", "%s was acknowledged at %s seq %d; %s stores it at %v", id, s.channel, s.acked[0], src.Name(), locs)
			}
		}
	}
	res.Lost, res.SeqMismatch = lost.sorted(), mismatch.sorted()

	// (2) nothing stored twice; (4) nothing stored that was not sent, or
	// whose every attempt failed.
	dup, unexpected, failedStored := idSet{}, idSet{}, idSet{}
	for i, src := range sources {
		for id, locs := range where[i] {
			if len(locs) > 1 {
				dup[id] = true
				c.note("duplicated", "%s is stored %d times on %s: %v", id, len(locs), src.Name(), locs)
			}
			switch s := ids[id]; {
			case s == nil:
				if !unexpected[id] {
					c.note("unexpected", "%s is stored on %s at %v but was never sent", id, src.Name(), locs)
				}
				unexpected[id] = true
			case !s.ok && !s.uncertain:
				if !failedStored[id] {
					c.note("failed but stored", "every attempt to send %s failed definitely, yet %s stores it at %v", id, src.Name(), locs)
				}
				failedStored[id] = true
			}
		}
	}
	res.Duplicated, res.Unexpected, res.FailedButStored = dup.sorted(), unexpected.sorted(), failedStored.sorted()

	// (3) the same log everywhere.
	for _, ch := range channels {
		ref := logs[0][ch]
		for i := 1; i < len(sources); i++ {
			other := logs[i][ch]
			if slices.Equal(ref, other) {
				continue
			}
			divergent[ch] = true
			c.note("divergent", "%s: %s", ch, describeDiff(sources[0].Name(), ref, sources[i].Name(), other))
		}
	}
	res.Divergent = divergent.sorted()
}

// describeDiff says where two logs of one channel part ways.
func describeDiff(aName string, a []Entry, bName string, b []Entry) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	switch {
	case i == len(a):
		return fmt.Sprintf("%s has %d entries, %s has %d; %s is a prefix of %s (lagging?), next on %s: %s",
			aName, len(a), bName, len(b), aName, bName, bName, b[i])
	case i == len(b):
		return fmt.Sprintf("%s has %d entries, %s has %d; %s is a prefix of %s (lagging?), next on %s: %s",
			aName, len(a), bName, len(b), bName, aName, aName, a[i])
	}
	return fmt.Sprintf("%s and %s differ at entry %d: %s has %s, %s has %s (%d and %d entries)",
		aName, bName, i, aName, a[i], bName, b[i], len(a), len(b))
}

func (c *checker) checkLinearizable(ctx context.Context, ops []Op, channels []string, final map[string][]Entry, finalNode, outDir string) {
	res := c.res
	lh := buildLinHistory(ops, channels, final, finalNode)
	model := newModel(lh.logs)
	deadline := time.Now().Add(c.opts.LinearizabilityTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	remaining := func() time.Duration { return time.Until(deadline) }
	if remaining() <= 0 {
		c.note("linearizability", "not checked: no time left (%v)", ctx.Err())
		return
	}
	start := time.Now()
	verdict := porcupine.CheckOperationsTimeout(model, lh.ops, remaining())
	switch verdict {
	case porcupine.Ok:
		res.Linearizable, res.LinearizabilityChecked = true, true
		return
	case porcupine.Unknown:
		c.note("linearizability", "unknown: porcupine gave up after %s on %d operations; the run does not pass",
			time.Since(start).Round(time.Millisecond), len(lh.ops))
		return
	}
	res.LinearizabilityChecked = true

	// Illegal: find the channels, and draw them.
	var bad []porcupine.Operation
	for _, ch := range channels {
		if remaining() <= 0 {
			break
		}
		if porcupine.CheckOperationsTimeout(model, lh.byChan[ch], remaining()) == porcupine.Illegal {
			res.NonLinearizable = append(res.NonLinearizable, ch)
			bad = append(bad, lh.byChan[ch]...)
		}
	}
	c.note("linearizability", "not linearizable: channels %s (of %d operations in all)",
		strings.Join(res.NonLinearizable, ", "), len(lh.ops))
	if len(bad) == 0 {
		bad = lh.ops
	}
	if outDir == "" {
		c.note("linearizability", "no output directory: visualisation not written")
		return
	}
	if remaining() <= 0 {
		c.note("linearizability", "no time left to compute the visualisation")
		return
	}
	_, info := porcupine.CheckOperationsVerbose(model, bad, remaining())
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		c.note("linearizability", "visualisation: %v", err)
		return
	}
	path := filepath.Join(outDir, VisualizationFile)
	if err := porcupine.VisualizePath(model, info, path); err != nil {
		c.note("linearizability", "visualisation: %v", err)
		return
	}
	res.Visualization = path
}
