package cluster

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/transport"
)

// Gossip benchmarks, run on loopback with memberlist's LAN timing -- what
// maosd uses -- and the gossip layer alone (no Raft), n members in one
// process:
//
//	go test -run '^$' -bench Presence -benchtime 50x ./cluster
//
// Each change takes a gossip round or two (hundreds of milliseconds) and
// each death several seconds, so the benchmarks measure at most
// maxPropagationSamples and maxDeathSamples of them whatever b.N is (make
// bench asks for thousands), and report the mean as ns/op. The figures are
// in docs/PERFORMANCE.md.

const (
	maxPropagationSamples = 50
	maxDeathSamples       = 3
)

// benchMember is one gossip member without a Raft node.
type benchMember struct {
	id    string
	g     *gossip
	store *presenceStore
}

// startBenchMembers starts n gossip members on loopback with LAN timing
// and joins them all through the first; it returns once every member
// counts n alive.
func startBenchMembers(b *testing.B, n int) []*benchMember {
	b.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	var ms []*benchMember
	for i := range n {
		id := fmt.Sprintf("b%d", i+1)
		cfg := Config{NodeID: id, GossipAddr: "127.0.0.1:0", Logger: logger, Now: time.Now, PresenceTTL: time.Minute}
		store := newPresenceStore(id, cfg.PresenceTTL, time.Now)
		g, err := startGossip(cfg, gossipOptions{meta: nodeMeta{ID: id}, store: store, logger: logger})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = g.shutdown() })
		if i > 0 {
			if _, err := g.join([]string{ms[0].g.addr}); err != nil {
				b.Fatal(err)
			}
		}
		ms = append(ms, &benchMember{id: id, g: g, store: store})
	}
	waitBench(b, 30*time.Second, "every member to see all", func() bool {
		for _, m := range ms {
			if m.g.numAlive() != n {
				return false
			}
		}
		return true
	})
	return ms
}

func waitBench(b *testing.B, timeout time.Duration, what string, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// BenchmarkPresencePropagation: one heartbeat put on a member, until every
// member holds it. Reported as ms per change.
func BenchmarkPresencePropagation(b *testing.B) {
	for _, n := range []int{3, 10} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			ms := startBenchMembers(b, n)
			b.ResetTimer()
			var total time.Duration
			samples := min(b.N, maxPropagationSamples)
			for i := 0; i < samples; i++ {
				// A random pause, so changes do not fall into step with
				// the gossip ticks (every 200 ms).
				b.StopTimer()
				time.Sleep(rand.N(250 * time.Millisecond))
				b.StartTimer()
				src := ms[i%n]
				start := time.Now()
				p, err := src.store.put("bench", api.PresenceUpdate{State: "AWAKE", Substate: "WORKING", Task: fmt.Sprint("change ", i)})
				if err != nil {
					b.Fatal(err)
				}
				waitBench(b, 30*time.Second, "the change on every member", func() bool {
					for _, m := range ms {
						q, ok := m.store.get("bench", m.g.statusOf)
						if !ok || q.Version != p.Version {
							return false
						}
					}
					return true
				})
				total += time.Since(start)
			}
			mean := total / time.Duration(samples)
			b.ReportMetric(float64(mean.Nanoseconds()), "ns/op")
			b.ReportMetric(float64(mean.Microseconds())/1000, "ms/change")
		})
	}
}

// BenchmarkPresenceDeadNode: a member's gossip stops without a word (a
// SIGKILL); the time until every other member shows its agent OFFLINE,
// "node bN dead". Each iteration starts a fresh set of members.
func BenchmarkPresenceDeadNode(b *testing.B) {
	for _, n := range []int{3, 10} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			var total time.Duration
			samples := min(b.N, maxDeathSamples)
			for i := 0; i < samples; i++ {
				b.StopTimer()
				ms := startBenchMembers(b, n)
				victim := ms[n-1]
				p, err := victim.store.put("doomed", api.PresenceUpdate{State: "AWAKE", Substate: "IDLE"})
				if err != nil {
					b.Fatal(err)
				}
				waitBench(b, 30*time.Second, "the agent on every member", func() bool {
					for _, m := range ms {
						if q, ok := m.store.get("doomed", m.g.statusOf); !ok || q.Version < p.Version {
							return false
						}
					}
					return true
				})
				b.StartTimer()
				start := time.Now()
				if err := victim.g.shutdown(); err != nil {
					b.Fatal(err)
				}
				want := reasonNode(victim.id, transport.MemberDead)
				waitBench(b, 60*time.Second, "the agent OFFLINE on every other member", func() bool {
					for _, m := range ms[:n-1] {
						if q, ok := m.store.get("doomed", m.g.statusOf); !ok || q.State != api.PresenceOffline || q.Reason != want {
							return false
						}
					}
					return true
				})
				total += time.Since(start)
				b.StopTimer()
				for _, m := range ms[:n-1] {
					_ = m.g.shutdown()
				}
				b.StartTimer()
			}
			mean := total / time.Duration(samples)
			b.ReportMetric(float64(mean.Nanoseconds()), "ns/op")
			b.ReportMetric(float64(mean.Milliseconds()), "ms/offline")
		})
	}
}
