package fsm

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/rules"
)

// benchEntries makes send entries with 1 KiB of text and unique ids. It
// encodes one template and patches the id in place, so building an entry
// costs a copy, not a JSON encoding, and stays out of the measured cost.
type benchEntries struct {
	template []byte
	idAt     int
	next     uint64
}

const benchIDFormat = "msg-20261121-103000-bench-%016x"

func newBenchEntries(b *testing.B) *benchEntries {
	m := testMessage(fmt.Sprintf(benchIDFormat, 0), "bench", strings.Repeat("x", 1024))
	m.From = "bench"
	data, err := Encode(api.OpSend, baseTS, api.SendCommand{Message: m})
	if err != nil {
		b.Fatal(err)
	}
	at := bytes.Index(data, []byte(m.ID))
	if at < 0 {
		b.Fatal("id not found in the encoded entry")
	}
	return &benchEntries{template: data, idAt: at}
}

// fill sets logs to the next len(logs) entries.
func (e *benchEntries) fill(logs []*raft.Log) {
	for i := range logs {
		e.next++
		data := bytes.Clone(e.template)
		copy(data[e.idAt:], fmt.Sprintf(benchIDFormat, e.next))
		logs[i] = &raft.Log{Type: raft.LogCommand, Index: e.next, Term: 1, Data: data}
	}
}

// applyTo applies the next entries of e to f until e.next reaches n, in
// batches of batch, as the cluster applies them.
func (e *benchEntries) applyTo(f *FSM, n uint64, batch int) {
	logs := make([]*raft.Log, batch)
	for e.next < n {
		e.fill(logs)
		f.ApplyBatch(logs)
	}
}

func benchmarkApply(b *testing.B, perBatch int, doc *rules.Document) {
	f, _ := openTemp(b)
	entries := newBenchEntries(b)
	if doc != nil {
		entries.next++
		data, err := Encode(api.OpSetRules, baseTS, api.SetRulesCommand{Rules: doc})
		if err != nil {
			b.Fatal(err)
		}
		if err, ok := applyOne(f, &raft.Log{Type: raft.LogCommand, Index: entries.next, Term: 1, Data: data}).(error); ok {
			b.Fatal(err)
		}
	}
	logs := make([]*raft.Log, perBatch)
	b.SetBytes(int64(perBatch * len(entries.template)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		entries.fill(logs)
		results := f.ApplyBatch(logs)
		if r, ok := results[perBatch-1].(*SendResult); !ok || r.Seq != entries.next {
			b.Fatalf("result %v, want a send stored at %d", results[perBatch-1], entries.next)
		}
	}
	msgs := float64(b.N) * float64(perBatch)
	b.ReportMetric(msgs/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/msgs, "ns/msg")
	if got := channelCount(b, f, "bench"); got != uint64(msgs) {
		b.Fatalf("channel holds %d messages, want %d", got, uint64(msgs))
	}
}

// BenchmarkApplySingle applies one 1 KiB send per ApplyBatch call: one
// bbolt transaction (and fsync) per message.
func BenchmarkApplySingle(b *testing.B) { benchmarkApply(b, 1, nil) }

// BenchmarkApplyBatch64 applies 64 sends of 1 KiB per ApplyBatch call, as
// raft's BatchingFSM does under load.
func BenchmarkApplyBatch64(b *testing.B) { benchmarkApply(b, 64, nil) }

// BenchmarkApplyBatch64Rules is BenchmarkApplyBatch64 under a rules
// document that allows the sends: each one looks up the compiled rules and
// checks its recipient.
func BenchmarkApplyBatch64Rules(b *testing.B) {
	benchmarkApply(b, 64, &rules.Document{
		Agents: []rules.AgentRule{
			{Agent: "bench", CanSendTo: []string{"claude", "role:lead"}},
			{Agent: "role:lead", CanSendTo: []string{"*"}},
			{Agent: "engineer_*", CanSendTo: []string{"role:lead"}, CanReceiveFrom: []string{"*"}},
		},
		Forbidden: []rules.ForbiddenRule{{From: "*", To: "vault", Reason: "read-only"}},
	})
}

// BenchmarkPageAtScale reads a 50-message page of a channel (its first and
// its last) and of an inbox from a state holding N messages: with bbolt's
// B+trees keyed by seq, a page costs a seek and 50 reads whatever N is.
// The cluster-level figure at 1,000,000 messages is in docs/PERFORMANCE.md.
func BenchmarkPageAtScale(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("msgs=%d", n), func(b *testing.B) {
			f, _ := openTemp(b)
			entries := newBenchEntries(b)
			entries.applyTo(f, uint64(n), 1000)
			last := entries.next
			for _, tc := range []struct {
				name string
				read func() (int, error)
			}{
				{"channel-first", func() (int, error) {
					p, err := f.ChannelPage("bench", 0, 50)
					return len(p.Messages), err
				}},
				{"channel-last", func() (int, error) {
					p, err := f.ChannelPage("bench", last-50, 50)
					return len(p.Messages), err
				}},
				{"inbox-first", func() (int, error) {
					p, err := f.Inbox("claude", api.InboxQuery{Limit: 50})
					return len(p.Messages), err
				}},
			} {
				b.Run(tc.name, func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						if got, err := tc.read(); err != nil || got != 50 {
							b.Fatalf("page of %d messages, %v; want 50", got, err)
						}
					}
				})
			}
		})
	}
}

// BenchmarkCheckRules answers one rules check (POST /v1/rules/check): a
// read transaction, the compiled rules looked up by the stored document's
// hash, two role lookups and Allows.
func BenchmarkCheckRules(b *testing.B) {
	f, _ := openTemp(b)
	data, err := Encode(api.OpSetRules, baseTS, api.SetRulesCommand{Rules: &rules.Document{
		Agents:    []rules.AgentRule{{Agent: "role:lead", CanSendTo: []string{"*"}}, {Agent: "*", CanSendTo: []string{"role:lead"}}},
		Forbidden: []rules.ForbiddenRule{{From: "*", To: "vault", Reason: "read-only"}},
	}})
	if err != nil {
		b.Fatal(err)
	}
	if err, ok := applyOne(f, &raft.Log{Type: raft.LogCommand, Index: 1, Term: 1, Data: data}).(error); ok {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		c, err := f.CheckRules("w1", "engineer", "w2", "engineer")
		if err != nil || c.Allowed {
			b.Fatalf("CheckRules = %+v, %v; want refused", c, err)
		}
	}
}

// BenchmarkLoadRules is the lookup every send makes under a rules
// document: read the stored document's hash and find its compiled form.
func BenchmarkLoadRules(b *testing.B) {
	f, _ := openTemp(b)
	data, err := Encode(api.OpSetRules, baseTS, api.SetRulesCommand{Rules: &rules.Document{
		Forbidden: []rules.ForbiddenRule{{From: "*", To: "vault", Reason: "read-only"}},
	}})
	if err != nil {
		b.Fatal(err)
	}
	if err, ok := applyOne(f, &raft.Log{Type: raft.LogCommand, Index: 1, Term: 1, Data: data}).(error); ok {
		b.Fatal(err)
	}
	if err := f.view(func(tx *bbolt.Tx) error {
		b.ReportAllocs()
		for b.Loop() {
			if r, err := f.rules.load(tx); r == nil || err != nil {
				b.Fatalf("load = %v, %v", r, err)
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkStateBytesPerMessage reports the state file's size per stored
// 1 KiB message after 20,000 of them (to a test message's recipients,
// in batches of 100, as the cluster applies them), how full its
// pages are, and the pages (leaf and branch) of each bucket that grows
// with the messages: where the disk per message issue 19 counts goes.
// Figures: docs/PERFORMANCE.md.
func BenchmarkStateBytesPerMessage(b *testing.B) {
	const n = 20_000
	for range b.N {
		f, path := openTemp(b)
		newBenchEntries(b).applyTo(f, n, 100)
		var leafInuse, leafAlloc int
		if err := f.db.View(func(tx *bbolt.Tx) error {
			return tx.ForEach(func(name []byte, bk *bbolt.Bucket) error {
				s := bk.Stats()
				leafInuse += s.LeafInuse
				leafAlloc += s.LeafAlloc
				if s.KeyN >= n/2 {
					b.ReportMetric(float64(s.LeafAlloc+s.BranchAlloc)/n, string(name)+"-B/msg")
				}
				return nil
			})
		}); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		st, err := os.Stat(path)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(st.Size())/n, "file-B/msg")
		b.ReportMetric(float64(leafAlloc)/n, "leaf-B/msg")
		b.ReportMetric(100*float64(leafInuse)/float64(leafAlloc), "leaf-fill-%")
	}
}

// fileSink is a raft.SnapshotSink writing to a file, as raft's file
// snapshot store does (without its CRC and fsync).
type fileSink struct{ *os.File }

func (s fileSink) ID() string    { return "bench" }
func (s fileSink) Cancel() error { return s.File.Close() }

// cpuTime is the CPU time (user and system) the process used so far:
// under a loaded machine's contention it says what an operation costs
// better than the wall clock does.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSnapshotPersist writes the snapshot of a state of 20,000 1 KiB
// messages to a file: as Persist does (zstd) and as the build before did
// (the state file's bytes, Tx.WriteTo). MB/s is of the state file's
// bytes; snap-B/msg is what the snapshot store keeps per message;
// cpu-ms/op the process's CPU time per snapshot.
func BenchmarkSnapshotPersist(b *testing.B) {
	const n = 20_000
	f, path := openTemp(b)
	newBenchEntries(b).applyTo(f, n, 100)
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	out := filepath.Join(b.TempDir(), "snap")
	for _, mode := range []string{"zstd", "plain"} {
		b.Run(mode, func(b *testing.B) {
			b.SetBytes(st.Size())
			var size int64
			cpu0 := cpuTime(b)
			for b.Loop() {
				file, err := os.Create(out)
				if err != nil {
					b.Fatal(err)
				}
				if mode == "plain" {
					err = f.db.View(func(tx *bbolt.Tx) error { _, err := tx.WriteTo(file); return err })
					if err == nil {
						err = file.Close()
					}
				} else {
					var snap raft.FSMSnapshot
					if snap, err = f.Snapshot(); err == nil {
						err = snap.Persist(fileSink{file})
						snap.Release()
					}
				}
				if err != nil {
					b.Fatal(err)
				}
				fi, err := os.Stat(out)
				if err != nil {
					b.Fatal(err)
				}
				size = fi.Size()
			}
			b.ReportMetric(float64(size)/n, "snap-B/msg")
			b.ReportMetric(float64((cpuTime(b)-cpu0).Milliseconds())/float64(b.N), "cpu-ms/op")
		})
	}
}

// BenchmarkSnapshotRestore restores the snapshot of a state of 20,000
// 1 KiB messages, as Persist writes it (zstd) and as the build before did
// (plain): the rebuild after a power loss is this plus the replay of the
// log after the snapshot. cpu-ms/op is the process's CPU time per restore.
func BenchmarkSnapshotRestore(b *testing.B) {
	const n = 20_000
	src, _ := openTemp(b)
	newBenchEntries(b).applyTo(src, n, 100)
	var plain, compressed bytes.Buffer
	if err := src.db.View(func(tx *bbolt.Tx) error { _, err := tx.WriteTo(&plain); return err }); err != nil {
		b.Fatal(err)
	}
	snap, err := src.Snapshot()
	if err != nil {
		b.Fatal(err)
	}
	sink := &bufferSink{Buffer: &compressed}
	if err := snap.Persist(sink); err != nil {
		b.Fatal(err)
	}
	snap.Release()
	dst, _ := openTemp(b)
	for _, tc := range []struct {
		name string
		data []byte
	}{{"zstd", compressed.Bytes()}, {"plain", plain.Bytes()}} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(plain.Len()))
			cpu0 := cpuTime(b)
			for b.Loop() {
				if err := dst.Restore(io.NopCloser(bytes.NewReader(tc.data))); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cpuTime(b)-cpu0).Milliseconds())/float64(b.N), "cpu-ms/op")
			if dst.AppliedIndex() != n {
				b.Fatalf("restored applied index %d, want %d", dst.AppliedIndex(), n)
			}
		})
	}
}

// bufferSink is a raft.SnapshotSink writing to memory.
type bufferSink struct{ *bytes.Buffer }

func (s *bufferSink) ID() string    { return "bench" }
func (s *bufferSink) Cancel() error { return nil }
func (s *bufferSink) Close() error  { return nil }
