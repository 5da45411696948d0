package cluster_test

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/cluster/clustertest"
)

// BenchmarkArtifact measures artifacts on an in-process 3-node cluster
// over loopback HTTP: a put through a follower (stored, copied to a
// majority, recorded) and a whole get (checked against the id) from
// another node, for 1 MiB and 64 MiB; MB/s is the artifact's bytes per
// operation. Every put uploads new bytes. Figures: docs/PERFORMANCE.md.
func BenchmarkArtifact(b *testing.B) {
	for _, size := range []int{1 << 20, 64 << 20} {
		c := clustertest.New(b, 3)
		ctx := clustertest.Context(b)
		put, get := c.Follower().Client, c.Leader().Client
		r := rand.New(rand.NewPCG(uint64(size), 7))
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		var last string
		b.Run(fmt.Sprintf("put/%dMiB", size>>20), func(b *testing.B) {
			b.SetBytes(int64(size))
			for i := range b.N {
				// New bytes each time: the first 8 bytes count the puts.
				for k := range 8 {
					data[k] = byte((i + 1) >> (8 * k))
				}
				data[8] = byte(time.Now().UnixNano())
				a, err := put.PutArtifact(ctx, bytes.NewReader(data), int64(size), api.ArtifactUpload{Name: "bench.bin", From: "bench"})
				if err != nil {
					b.Fatal(err)
				}
				last = a.ID
			}
		})
		b.Run(fmt.Sprintf("get/%dMiB", size>>20), func(b *testing.B) {
			b.SetBytes(int64(size))
			for range b.N {
				if _, err := get.GetArtifact(ctx, last, io.Discard); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSendDuringArtifactPut measures 1 KiB sends (c=1 to the leader)
// with no other load ("idle") and while 64 MiB artifacts are put through a
// follower back to back ("during-64MiB-puts"): what a large artifact does
// to send latency. It reports the sends' p50 and p99.
func BenchmarkSendDuringArtifactPut(b *testing.B) {
	for _, load := range []bool{false, true} {
		name := "idle"
		if load {
			name = "during-64MiB-puts"
		}
		b.Run(name, func(b *testing.B) { benchSendDuringPuts(b, load) })
	}
}

func benchSendDuringPuts(b *testing.B, load bool) {
	c := clustertest.New(b, 3)
	ctx := clustertest.Context(b)
	leader, follower := c.Leader().Client, c.Follower().Client
	stop := make(chan struct{})
	var wg sync.WaitGroup
	if load {
		data := make([]byte, 64<<20)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				data[0], data[1], data[2] = byte(i), byte(i>>8), byte(time.Now().UnixNano())
				if _, err := follower.PutArtifact(ctx, bytes.NewReader(data), int64(len(data)), api.ArtifactUpload{Name: "big.bin", From: "bench"}); err != nil {
					return
				}
			}
		}()
	}
	text := strings.Repeat("x", 1024)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		m := &api.Message{ID: fmt.Sprintf("during-%d", i), From: "bench", To: api.Recipients{"all"}, Channel: "bench", Content: api.Content{Text: text}}
		m.Normalize(time.Now())
		t0 := time.Now()
		if _, err := leader.Send(ctx, m); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	close(stop)
	wg.Wait()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds())/1000, "p99-ms")
}
