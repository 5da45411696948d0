package cluster_test

import (
	"context"
	"flag"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/cluster"
	"github.com/maos-project/maos/cluster/clustertest"
)

// diskMessages is how many messages BenchmarkDiskPerMessage stores; the
// figures of docs/PERFORMANCE.md name the count they were taken at
// (go test -run '^$' -bench DiskPerMessage ./cluster -disk-messages 200000).
var diskMessages = flag.Int("disk-messages", 30_000, "messages BenchmarkDiskPerMessage stores")

// diskInterval and diskThreshold set BenchmarkDiskPerMessage's node's
// SnapshotInterval and SnapshotThreshold, to measure the raft log's
// trade-offs (0: the node's defaults).
var (
	diskInterval  = flag.Duration("disk-snapshot-interval", 0, "BenchmarkDiskPerMessage's SnapshotInterval (0: the default)")
	diskThreshold = flag.Uint64("disk-snapshot-threshold", 0, "BenchmarkDiskPerMessage's SnapshotThreshold (0: the default)")
)

// patternText is size bytes of `maosctl bench`'s payload (bench.Payload):
// a repeating 37-character pattern, which any compressor crushes.
func patternText(size int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 "
	return strings.Repeat(alphabet, size/len(alphabet)+1)[:size]
}

// wordsText makes texts of pseudo-random words, for figures where
// compression matters: a vocabulary of 8,192 made-up words of 2 to 6
// syllables drawn with a Zipf law (as words of a language are), sentences
// of 4 to 20 words; a fixed seed, so every run stores the same bytes. It
// compresses about as well as English prose does (the benchmark reports
// zstd's ratio on it).
type wordsText struct {
	rng   *rand.Rand
	zipf  *rand.Zipf
	vocab []string
}

func newWordsText(seed int64) *wordsText {
	rng := rand.New(rand.NewSource(seed))
	syll := []string{"ka", "to", "re", "mi", "san", "lo", "ver", "di", "que", "pa", "nor", "el", "sta", "in", "gu",
		"be", "ran", "co", "tha", "fe", "wil", "om", "ju", "pre", "st", "ch", "a", "e", "i", "o", "u", "ly", "ment", "ing"}
	w := &wordsText{rng: rng, zipf: rand.NewZipf(rng, 1.1, 2, 8191)}
	for range 8192 {
		var sb strings.Builder
		for range 2 + rng.Intn(5) {
			sb.WriteString(syll[rng.Intn(len(syll))])
		}
		w.vocab = append(w.vocab, sb.String())
	}
	return w
}

// text is size bytes of sentences.
func (w *wordsText) text(size int) string {
	var sb strings.Builder
	for sb.Len() < size {
		n := 4 + w.rng.Intn(17)
		for i := range n {
			word := w.vocab[w.zipf.Uint64()]
			if i == 0 {
				word = strings.ToUpper(word[:1]) + word[1:]
			}
			sb.WriteString(word)
			if i < n-1 {
				sb.WriteByte(' ')
			}
		}
		sb.WriteString(". ")
	}
	return sb.String()[:size]
}

// reportCompressibility reports how zstd (default level) compresses the
// payload: 1,000 texts of 1 KiB as one stream (text-zstd-x, as a snapshot
// sees them) and each alone (text-1k-zstd-x, as a value would be).
func reportCompressibility(b *testing.B, payload string) {
	texts := make([]string, 1000)
	w := newWordsText(19)
	for i := range texts {
		texts[i] = patternText(1024)
		if payload == "words" {
			texts[i] = w.text(1024)
		}
	}
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		b.Fatal(err)
	}
	defer enc.Close()
	all := strings.Join(texts, "")
	var alone int
	for _, t := range texts {
		alone += len(enc.EncodeAll([]byte(t), nil))
	}
	b.ReportMetric(float64(len(all))/float64(len(enc.EncodeAll([]byte(all), nil))), "text-zstd-x")
	b.ReportMetric(float64(len(all))/float64(alone), "text-1k-zstd-x")
}

// dirSize is the bytes of the files under path (a file or a folder).
func dirSize(tb testing.TB, path string) int64 {
	tb.Helper()
	var total int64
	err := filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			total += info.Size()
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return total
}

// storeMessages proposes count 1 KiB messages (from bench to bench-sink
// on channel bench, as `maosctl bench send` sends them) through node's
// Raft in process, 32 at a time, each with text(i).
func storeMessages(tb testing.TB, node *clustertest.Node, count int, text func(i int) string) {
	tb.Helper()
	ctx := clustertest.Context(tb)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	var mu sync.Mutex // text's generator is not safe for concurrent use
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1))
				if i > count {
					return
				}
				mu.Lock()
				body := text(i)
				mu.Unlock()
				m := api.Message{ID: fmt.Sprintf("bench-disk-%d", i), From: "bench", To: api.Recipients{"bench-sink"},
					Channel: "bench", Content: api.Content{Text: body}}
				m.Normalize(time.Now())
				if _, err := node.Apply(ctx, api.OpSend, api.SendCommand{Message: m}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
}

// BenchmarkDiskPerMessage is issue 19's disk per message: one node's data
// dir after -disk-messages sends of 1 KiB (one node in process: every
// voter of a cluster writes the same log, state and snapshots), for two
// payloads, bench's repeating pattern and pseudo-random words. Sends go
// through Raft at the node's default snapshot and log settings (or the
// -disk-snapshot-* flags'), so a run of several thresholds reaches the
// steady state an operator's long run reaches: the state file, the
// snapshot store after its last snapshot, and the raft log at its
// high-water mark (bbolt files never shrink). It then takes one more
// snapshot, as the next threshold would (timed: snapshot-s), and reports
// bytes per stored message of each file and of the three together.
//
// The same data dir then gives the restart figures: a clean stop and
// start, a crash (same boot) and start, and a crash with a new boot id
// (a power loss: the state file is moved aside and rebuilt from the
// snapshot and the log), each timed from Open until the state machine
// has applied the last index.
func BenchmarkDiskPerMessage(b *testing.B) {
	for _, payload := range []string{"pattern", "words"} {
		b.Run("payload="+payload, func(b *testing.B) {
			for range b.N {
				benchmarkDisk(b, payload)
			}
		})
	}
}

func benchmarkDisk(b *testing.B, payload string) {
	count := *diskMessages
	text := func(int) string { return patternText(1024) }
	if payload == "words" {
		w := newWordsText(19)
		text = func(int) string { return w.text(1024) }
	}
	reportCompressibility(b, payload)
	dir := b.TempDir()
	boot := "boot-1"
	opts := []clustertest.Option{clustertest.WithConfig(func(c *cluster.Config) {
		c.SnapshotInterval, c.SnapshotThreshold = *diskInterval, *diskThreshold
		c.BootID = func() (string, error) { return boot, nil }
	})}
	node := clustertest.Start(b, "n1", dir, "", nil, opts...)
	clustertest.WaitFor(b, 10*time.Second, "n1 leads", node.IsLeader)
	start := time.Now()
	storeMessages(b, node, count, text)
	b.ReportMetric(float64(count)/time.Since(start).Seconds(), "sends/s")
	t0 := time.Now()
	if _, err := node.Snapshot(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(time.Since(t0).Seconds(), "snapshot-s")
	last := node.FSM().AppliedIndex()

	state := dirSize(b, filepath.Join(dir, "state.db"))
	snaps := dirSize(b, filepath.Join(dir, "snapshots"))
	raftLog := dirSize(b, filepath.Join(dir, "raft.db"))
	per := func(v int64) float64 { return float64(v) / float64(count) }
	b.ReportMetric(per(state), "state-B/msg")
	b.ReportMetric(per(snaps), "snapshots-B/msg")
	b.ReportMetric(per(raftLog), "raftlog-B/msg")
	b.ReportMetric(per(state+snaps+raftLog), "total-B/msg")

	// Restarts of the same data dir, each timed to the last applied index.
	restart := func(name string, stop func()) {
		stop()
		t0 := time.Now()
		node = clustertest.Start(b, "n1", dir, "", nil, append(opts, clustertest.SameRaftAddr(node))...)
		clustertest.WaitFor(b, 10*time.Minute, "n1 applies "+fmt.Sprint(last), func() bool { return node.FSM().AppliedIndex() >= last })
		b.ReportMetric(time.Since(t0).Seconds(), name+"-s")
	}
	restart("restart-clean", node.Stop)
	restart("restart-crash", func() { node.Kill((*cluster.Node).Crash) })
	restart("rebuild-powerloss", func() {
		node.Kill((*cluster.Node).Crash)
		boot = "boot-2"
	})
	entries, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	aside := false
	for _, e := range entries {
		aside = aside || strings.HasPrefix(e.Name(), "state.db.untrusted-")
	}
	if !aside {
		b.Fatal("after the power loss the state file was not moved aside: no rebuild was measured")
	}
}
