package chaos

import (
	"sort"
	"time"

	"github.com/hashicorp/raft"
)

// Availability under a fault that a majority rides out (a node replaced,
// a rolling restart): no send may be refused for longer than an election.
// The window is measured from the history alone.

// ElectionBound is the longest a correct cluster may refuse every send
// while it elects a new leader, with the Raft timeouts maosd runs with
// (it sets none, so hashicorp/raft's DefaultConfig): a follower notices
// the leader gone within 2×HeartbeatTimeout (its timeout is randomised in
// [HB, 2·HB)), one election round takes at most 2×ElectionTimeout
// (randomised the same way), and a client's next attempt comes at most
// maxBackoff after its last refusal. With the defaults (1 s, 1 s) that is
// 4.2 s. A split vote takes a second round and may exceed it: that is a
// finding too (two elections where one should do).
func ElectionBound() time.Duration {
	rc := raft.DefaultConfig()
	return 2*rc.HeartbeatTimeout + 2*rc.ElectionTimeout + maxBackoff
}

// Refusal is the longest window in which every send attempt failed.
type Refusal struct {
	// Longest is the window's length: from the invoke of the first of a
	// run of consecutive (by invoke time) failed or unknown send attempts
	// to the invoke of the next attempt that was acknowledged (or, when
	// none came, the return of the run's last attempt). 0 when no attempt
	// failed.
	Longest time.Duration `json:"longest_ns"`
	// From is where that window starts (since the history's start), and
	// Attempts how many attempts failed in it.
	From     time.Duration `json:"from_ns"`
	Attempts int           `json:"attempts"`
}

// LongestRefusal measures, among the send attempts of ops invoked in
// [from, to), the longest run in which every attempt failed (Fail or
// Unknown); an attempt acknowledged OK ends a run (it was accepted, even
// if it waited through an election). Attempts still in flight count as
// failed. Reads and task ops are ignored.
func LongestRefusal(ops []Op, from, to time.Duration) Refusal {
	var sends []Op
	for _, op := range ops {
		if op.Kind == KindSend {
			sends = append(sends, op)
		}
	}
	sort.SliceStable(sends, func(i, j int) bool { return sends[i].Invoke < sends[j].Invoke })
	var best Refusal
	for i := 0; i < len(sends); {
		op := sends[i]
		if op.Invoke < from || op.Invoke >= to || op.Outcome == OK {
			i++
			continue
		}
		// A run of failures starts at i; it ends at the next OK attempt.
		j, end := i, op.Return
		for j < len(sends) && sends[j].Outcome != OK {
			end = max(end, sends[j].Return)
			j++
		}
		if j < len(sends) {
			end = sends[j].Invoke
		}
		if w := end - op.Invoke; w > best.Longest {
			best = Refusal{Longest: w, From: op.Invoke, Attempts: j - i}
		}
		i = j
	}
	return best
}
