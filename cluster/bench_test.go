package cluster_test

import (
	"fmt"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/cluster/clustertest"
)

// gcCPU is the CPU time, in seconds, the garbage collector has used in
// this process so far (an estimate of the runtime's own).
func gcCPU() float64 {
	s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64 {
		return 0
	}
	return s[0].Value.Float64()
}

// BenchmarkSend measures acknowledged sends (1 KiB text, fsync on every
// commit) on an in-process 3-node cluster over loopback HTTP: one client to
// the leader, one through a follower, and 64 concurrent clients spread over
// all nodes. Besides sends/s it reports the process's CPU time per send
// (cpu-µs/send: three nodes and the clients, all in this process), the
// figure that a busy shared machine disturbs least, and the garbage
// collector's share of it (gc-cpu-µs/send, from runtime/metrics: the
// figure GOGC moves). Figures are in docs/PERFORMANCE.md.
func BenchmarkSend(b *testing.B) {
	text := strings.Repeat("x", 1024)
	cases := []struct {
		name        string
		concurrency int
		target      string // leader, follower, all
	}{
		{"c=1/leader", 1, "leader"},
		{"c=1/follower", 1, "follower"},
		{"c=64/all", 64, "all"},
	}
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			c := clustertest.New(b, 3)
			var targets []*client.Client
			switch bc.target {
			case "leader":
				targets = []*client.Client{c.Leader().Client}
			case "follower":
				targets = []*client.Client{c.Follower().Client}
			default:
				for _, n := range c.Nodes {
					targets = append(targets, n.Client)
				}
			}
			ctx := clustertest.Context(b)
			var next atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, bc.concurrency)
			b.SetBytes(int64(len(text)))
			b.ResetTimer()
			cpu0, gc0 := processCPU(), gcCPU()
			for w := range bc.concurrency {
				wg.Add(1)
				go func() {
					defer wg.Done()
					cl := targets[w%len(targets)]
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						m := &api.Message{ID: fmt.Sprintf("bench-%d", i), From: "bench", To: api.Recipients{"all"},
							Channel: "bench", Content: api.Content{Text: text}}
						m.Normalize(time.Now())
						if _, err := cl.Send(ctx, m); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			cpu, gc := processCPU()-cpu0, gcCPU()-gc0
			b.StopTimer()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sends/s")
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/send")
			b.ReportMetric(gc*1e6/float64(b.N), "gc-cpu-µs/send")
		})
	}
}
