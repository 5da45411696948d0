package chaos

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Fault is one fault the nemesis injected, with times since the History
// started.
type Fault struct {
	Name  string        `json:"name"`
	Nodes []string      `json:"nodes"`
	Start time.Duration `json:"start_ns"`
	// InForce is when the injection returned: the fault is in force (the
	// kills waited for, the routes in place). Between Start and InForce
	// the nemesis looked for its victims, so sends still went through.
	InForce time.Duration `json:"in_force_ns"`
	End     time.Duration `json:"end_ns"`
	// RecoveredAfter is RecoveryTime(h, InForce): from the fault in force
	// to the return of the first OK send invoked after it; -1 if none.
	RecoveredAfter time.Duration `json:"recovered_after_ns"`
	// RefusalBound is set for a nemesis that promises availability
	// (Nemesis.Available): ElectionBound. Refusal is then the longest
	// window in which every send failed (LongestRefusal), from the fault's
	// start to the next fault's (or the end of the faults).
	RefusalBound time.Duration `json:"refusal_bound_ns,omitempty"`
	Refusal      *Refusal      `json:"refusal,omitempty"`
}

// OverBound reports whether the fault promised availability and every send
// was refused for longer than its bound (or the window was not measured).
func (f Fault) OverBound() bool {
	return f.RefusalBound > 0 && (f.Refusal == nil || f.Refusal.Longest > f.RefusalBound)
}

// OpCounts counts a history's operations by kind and outcome. Sends still
// in flight count as unknown, reads still in flight as failed.
type OpCounts struct {
	SendOK      int `json:"send_ok"`
	SendFail    int `json:"send_fail"`
	SendUnknown int `json:"send_unknown"`
	ReadOK      int `json:"read_ok"`
	ReadFail    int `json:"read_fail"`
}

// CountOps counts ops.
func CountOps(ops []Op) OpCounts {
	var c OpCounts
	for _, op := range ops {
		switch {
		case op.Kind == KindSend && op.Outcome == OK:
			c.SendOK++
		case op.Kind == KindSend && op.Outcome == Fail:
			c.SendFail++
		case op.Kind == KindSend:
			c.SendUnknown++
		case op.Outcome == OK:
			c.ReadOK++
		default:
			c.ReadFail++
		}
	}
	return c
}

// Report is the outcome of one chaos run.
type Report struct {
	Scenario string `json:"scenario"`
	Nodes    int    `json:"nodes"`
	// Netns: the nodes ran in network namespaces, every plane cut by a
	// partition (Config.Netns).
	Netns    bool          `json:"netns,omitempty"`
	Seed     int64         `json:"seed"`
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration_ns"`
	Ops      OpCounts      `json:"ops"`
	Faults   []Fault       `json:"faults"`
	Check    CheckResult   `json:"check"`
	// Watchers is the watcher check, in a run with watcher agents.
	Watchers *WatcherCheck `json:"watchers,omitempty"`
	// Tasks is the task check, in a run with task workers.
	Tasks *TaskCheck `json:"tasks,omitempty"`
	// Crashes counts node processes that exited without being told to.
	Crashes int `json:"crashes"`
	// Pass: the checks passed (messages, watchers, tasks, every fault
	// within its refusal bound) and nothing crashed.
	Pass bool `json:"pass"`
	// Error is why the run could not be carried out, if it could not.
	Error string `json:"error,omitempty"`
	// ClusterDir is the cluster's directory (data and logs), kept when the
	// run failed.
	ClusterDir string `json:"cluster_dir,omitempty"`
}

// AvailabilityOK reports whether every fault that promised availability
// kept it (Fault.OverBound).
func (r *Report) AvailabilityOK() bool {
	for _, f := range r.Faults {
		if f.OverBound() {
			return false
		}
	}
	return true
}

// RecoveryTime is the time from faultStart until the return of the first
// OK send invoked after faultStart (the earliest such return); -1 if there
// is none.
func RecoveryTime(h *History, faultStart time.Duration) time.Duration {
	best := time.Duration(-1)
	for _, op := range h.Ops() {
		if op.Kind != KindSend || op.Outcome != OK || op.Invoke <= faultStart {
			continue
		}
		if d := op.Return - faultStart; best < 0 || d < best {
			best = d
		}
	}
	return best
}

// listMax is how many ids of a finding the text report shows.
const listMax = 5

// Text is a compact human summary of the report.
func (r *Report) Text() string {
	var b strings.Builder
	verdict := "PASS"
	if !r.Pass {
		verdict = "FAIL"
	}
	where := ""
	if r.Netns {
		where = " in network namespaces"
	}
	fmt.Fprintf(&b, "chaos %s: %s (%d nodes%s, %s, seed %d", r.Scenario, verdict, r.Nodes, where, roundMS(r.Duration), r.Seed)
	if !r.Started.IsZero() {
		fmt.Fprintf(&b, ", started %s", r.Started.UTC().Format(time.RFC3339))
	}
	b.WriteString(")\n")
	if r.Error != "" {
		fmt.Fprintf(&b, "error: %s\n", r.Error)
	}
	o := r.Ops
	fmt.Fprintf(&b, "ops: send %d ok, %d failed, %d unknown; read %d ok, %d failed\n",
		o.SendOK, o.SendFail, o.SendUnknown, o.ReadOK, o.ReadFail)
	for _, f := range r.Faults {
		rec := "never recovered"
		if f.RecoveredAfter >= 0 {
			rec = "recovered after " + roundMS(f.RecoveredAfter)
		}
		avail := ""
		if f.RefusalBound > 0 {
			verdict := "within"
			if f.OverBound() {
				verdict = "OVER"
			}
			switch r := f.Refusal; {
			case r == nil:
				avail = fmt.Sprintf("; refusals not measured, OVER the bound %s", roundMS(f.RefusalBound))
			case r.Attempts == 0:
				avail = fmt.Sprintf("; no send refused, within the bound %s", roundMS(f.RefusalBound))
			default:
				avail = fmt.Sprintf("; every send refused for at most %s (%d attempts from %s), %s the bound %s",
					roundMS(r.Longest), r.Attempts, roundMS(r.From), verdict, roundMS(f.RefusalBound))
			}
		}
		fmt.Fprintf(&b, "fault %s on %s: %s – %s, %s%s\n", f.Name, strings.Join(f.Nodes, ","), roundMS(f.Start), roundMS(f.End), rec, avail)
	}
	c := r.Check
	names := make([]string, 0, len(c.Stored))
	for n := range c.Stored {
		names = append(names, n)
	}
	sort.Strings(names)
	stored := make([]string, len(names))
	for i, n := range names {
		stored[i] = fmt.Sprintf("%s=%d", n, c.Stored[n])
	}
	fmt.Fprintf(&b, "check: acked %d; stored %s\n", c.Acked, strings.Join(stored, " "))
	for _, l := range []struct {
		name string
		ids  []string
	}{
		{"lost", c.Lost}, {"duplicated", c.Duplicated}, {"divergent", c.Divergent},
		{"unexpected", c.Unexpected}, {"seq mismatch", c.SeqMismatch}, {"rejected", c.Rejected},
		{"failed but stored", c.FailedButStored},
	} {
		fmt.Fprintf(&b, "  %s: %s\n", l.name, idList(l.ids))
	}
	lin := "no"
	switch {
	case !c.LinearizabilityChecked:
		lin = "unknown (not checked)"
	case c.Linearizable:
		lin = "yes"
	case len(c.NonLinearizable) > 0:
		lin = "no (" + strings.Join(c.NonLinearizable, ", ") + ")"
	}
	fmt.Fprintf(&b, "  linearizable: %s\n", lin)
	if c.Visualization != "" {
		fmt.Fprintf(&b, "  visualization: %s\n", c.Visualization)
	}
	for _, n := range c.Notes {
		fmt.Fprintf(&b, "  note: %s\n", n)
	}
	if r.Watchers != nil {
		b.WriteString(r.Watchers.text())
	}
	if r.Tasks != nil {
		b.WriteString(r.Tasks.text())
	}
	if r.ClusterDir != "" {
		fmt.Fprintf(&b, "cluster kept in %s\n", r.ClusterDir)
	}
	return b.String()
}

func roundMS(d time.Duration) string { return d.Round(time.Millisecond).String() }

// idList shows the count and the first few ids.
func idList(ids []string) string {
	if len(ids) == 0 {
		return "0"
	}
	if len(ids) <= listMax {
		return fmt.Sprintf("%d (%s)", len(ids), strings.Join(ids, ", "))
	}
	return fmt.Sprintf("%d (%s, ...)", len(ids), strings.Join(ids[:listMax], ", "))
}
