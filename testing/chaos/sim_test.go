package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"testing"
	"time"
)

// simulate builds the history of a linearizable cluster, as the workload
// drives it: senders send messages one after another and retry one whose
// attempt ended unknown or failed (same id); readers read pages, following
// the tail as the workload's readers do. Each attempt takes effect at a
// random point between its invoke and return; seqs are given in that order
// (one counter for all channels, like Raft indexes); an attempt of a
// message already stored returns the stored seq.
func simulate(seed uint64, senders, readers, perClient, channels int) ([]Op, map[string][]Entry) {
	r := rand.New(rand.NewPCG(seed, 1))
	type attempt struct {
		op  Op
		lin time.Duration
		// effect: the attempt reaches the log (every OK one, some unknown).
		effect bool
	}
	var all []attempt
	for c := 0; c < senders+readers; c++ {
		t := time.Duration(r.IntN(1000)) * time.Microsecond
		next := func() (call, lin, ret time.Duration) {
			call = t + time.Duration(1+r.IntN(200))*time.Microsecond
			lin = call + time.Duration(1+r.IntN(2000))*time.Microsecond
			ret = lin + time.Duration(1+r.IntN(2000))*time.Microsecond
			t = ret
			return
		}
		for i := 0; i < perClient; i++ {
			ch := fmt.Sprintf("chaos-%d", r.IntN(channels))
			if c >= senders {
				call, lin, ret := next()
				all = append(all, attempt{op: Op{Client: c, Kind: KindRead, Channel: ch, Invoke: call, Return: ret, Outcome: OK}, lin: lin})
				continue
			}
			id := fmt.Sprintf("chaos-c%d-%d", c, i)
			for try := 0; try < 5; try++ {
				call, lin, ret := next()
				a := attempt{op: Op{Client: c, Kind: KindSend, Channel: ch, ID: id, Invoke: call, Return: ret, Outcome: OK}, lin: lin, effect: true}
				switch x := r.IntN(100); {
				case x < 3:
					a.op.Outcome = Unknown // took effect
				case x < 6:
					a.op.Outcome, a.effect = Unknown, false
				case x < 8:
					a.op.Outcome, a.effect, a.op.Code = Fail, false, "no_leader"
				}
				all = append(all, a)
				if a.op.Outcome == OK {
					break
				}
			}
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].lin < all[j].lin })
	logs := map[string][]Entry{}
	stored := map[string]uint64{}
	var seq uint64
	after := map[[2]int]uint64{} // per reader and channel
	ops := make([]Op, 0, len(all))
	for _, a := range all {
		op := a.op
		switch {
		case op.Kind == KindSend && a.effect:
			s, ok := stored[op.ID]
			if !ok {
				seq++
				s = seq
				stored[op.ID] = s
				logs[op.Channel] = append(logs[op.Channel], Entry{Seq: s, ID: op.ID})
			}
			if op.Outcome == OK {
				op.Seq = s
			}
		case op.Kind == KindRead:
			var chn int
			fmt.Sscanf(op.Channel, "chaos-%d", &chn)
			key := [2]int{op.Client, chn}
			op.After = after[key]
			l := logs[op.Channel]
			lo := sort.Search(len(l), func(i int) bool { return l[i].Seq > op.After })
			hi := min(lo+PageLimit, len(l))
			op.Read = append([]Entry(nil), l[lo:hi]...)
			op.HasMore = len(l) > hi
			if len(op.Read) == PageLimit && r.IntN(2) == 0 {
				after[key] = op.Read[len(op.Read)/2].Seq
			}
		}
		ops = append(ops, op)
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].Invoke < ops[j].Invoke })
	return ops, logs
}

// TestCheckSimulatedHistory checks a long simulated history of a correct
// cluster (it must pass, unknown sends and retries included), then the same
// history with one fault planted at a time: each must be caught, and
// porcupine must reach a verdict (a search that explodes on a violation
// would end in "unknown").
func TestCheckSimulatedHistory(t *testing.T) {
	// 3 channels of about 1300 entries each: reads see full pages too.
	channels := []string{"chaos-0", "chaos-1", "chaos-2"}
	run := func(t *testing.T, ops []Op, logs map[string][]Entry) CheckResult {
		t.Helper()
		start := time.Now()
		res, err := CheckSources(context.Background(), replicas(3, logs), HistoryFromOps(ops), channels, t.TempDir(), CheckOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d ops checked in %s; notes %v", len(ops), time.Since(start).Round(time.Millisecond), res.Notes)
		return res
	}
	ops, logs := simulate(1, 8, 2, 500, 3)
	if res := run(t, ops, logs); !res.OK() {
		t.Fatalf("simulated correct history fails: %+v", res)
	}
	t.Logf("%+v", CountOps(ops))
	if !slices.ContainsFunc(ops, func(o Op) bool { return o.HasMore }) || !slices.ContainsFunc(ops, func(o Op) bool { return o.After > 0 }) {
		t.Fatal("the simulation has no full page, or no read after a seq: make it longer")
	}

	clone := func() ([]Op, map[string][]Entry) {
		o := slices.Clone(ops)
		l := map[string][]Entry{}
		for ch, es := range logs {
			l[ch] = slices.Clone(es)
		}
		return o, l
	}
	lastRead := func(o []Op) int {
		for i := len(o) - 1; i >= 0; i-- {
			if o[i].Kind == KindRead && len(o[i].Read) > 1 {
				return i
			}
		}
		t.Fatal("no read")
		return -1
	}
	faults := []struct {
		name  string
		plant func(o []Op, l map[string][]Entry)
	}{
		{"stale read", func(o []Op, l map[string][]Entry) {
			i := lastRead(o)
			o[i].Read = o[i].Read[1:] // misses the oldest entry it saw, stored long before
		}},
		{"phantom in a read", func(o []Op, l map[string][]Entry) {
			i := lastRead(o)
			o[i].Read = append(slices.Clone(o[i].Read[:1]), append([]Entry{{Seq: o[i].Read[0].Seq, ID: "phantom"}}, o[i].Read[1:]...)...)
		}},
		{"lost entry", func(o []Op, l map[string][]Entry) {
			l["chaos-1"] = append(l["chaos-1"][:100:100], l["chaos-1"][101:]...)
		}},
		{"wrong acknowledged seq", func(o []Op, l map[string][]Entry) {
			for i := len(o) / 2; i < len(o); i++ {
				if o[i].Kind == KindSend && o[i].Outcome == OK {
					o[i].Seq += 1_000_000
					return
				}
			}
		}},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			o, l := clone()
			f.plant(o, l)
			res := run(t, o, l)
			if res.OK() || res.Linearizable || !res.LinearizabilityChecked || res.Visualization == "" {
				t.Fatalf("not caught: %+v", res)
			}
			if fi, err := os.Stat(res.Visualization); err != nil || fi.Size() == 0 {
				t.Fatalf("visualisation %s: %v", res.Visualization, err)
			}
		})
	}
}
