package cluster_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/cluster/clustertest"
)

// Artifacts' bytes on a real 3-node cluster: stored on a majority before
// StoreBlob returns, on every node soon after, read back checked, served
// from a peer when a copy is damaged, and copied by the repair loop to a
// node that lacks them. The records are the state machine's: a test
// proposes artifact_put and artifact_delete through a node (recordArtifact,
// deleteArtifact) after putting the bytes on the nodes it chooses.

func blobData(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 99))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func blobID(b []byte) string {
	s := sha256.Sum256(b)
	return api.ArtifactIDPrefix + hex.EncodeToString(s[:])
}

// holders counts the running nodes whose store has id.
func holders(c *clustertest.Cluster, id string) int {
	k := 0
	for _, n := range c.Running() {
		if n.BlobStore().Has(id) {
			k++
		}
	}
	return k
}

// readBlob reads id through n.OpenBlob and returns the bytes and source.
func readBlob(t *testing.T, n *clustertest.Node, id string) ([]byte, string) {
	t.Helper()
	rs, size, source, err := n.OpenBlob(clustertest.Context(t), id)
	if err != nil {
		t.Fatalf("%s: OpenBlob: %v", n.ID(), err)
	}
	defer rs.Close()
	b, err := io.ReadAll(rs)
	if err != nil || int64(len(b)) != size {
		t.Fatalf("%s: read %d of %d bytes: %v", n.ID(), len(b), size, err)
	}
	return b, source
}

// A 5 MiB upload through a follower is on a majority when StoreBlob
// returns, then on every node, byte-identical.
func TestBlobThroughFollowerOnEveryNode(t *testing.T) {
	c := clustertest.New(t, 3)
	f := c.Follower()
	data := blobData(5<<20, 1)
	id, size, err := f.StoreBlob(clustertest.Context(t), bytes.NewReader(data), 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	if id != blobID(data) || size != int64(len(data)) {
		t.Fatalf("StoreBlob = %s, %d", id, size)
	}
	if k := holders(c, id); k < 2 {
		t.Fatalf("StoreBlob returned with the bytes on %d nodes, want a majority (2)", k)
	}
	clustertest.WaitFor(t, 30*time.Second, "the bytes on every node", func() bool { return holders(c, id) == 3 })
	for _, n := range c.Nodes {
		got, source := readBlob(t, n, id)
		if !bytes.Equal(got, data) || source != "local" {
			t.Fatalf("%s: %d bytes from %q, identical %v", n.ID(), len(got), source, bytes.Equal(got, data))
		}
		// And over the internal route a peer uses, checked by the reader.
		r, err := n.Client.FetchBlob(clustertest.Context(t), id)
		if err != nil {
			t.Fatal(err)
		}
		got, err = io.ReadAll(r)
		r.Close()
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: FetchBlob: %d bytes, %v", n.ID(), len(got), err)
		}
	}
}

// The same bytes again store nothing new: each node keeps its file.
func TestBlobReputStoresNothingNew(t *testing.T) {
	c := clustertest.New(t, 3)
	ctx := clustertest.Context(t)
	data := blobData(100000, 2)
	id, _, err := c.Nodes[0].StoreBlob(ctx, bytes.NewReader(data), 0)
	if err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, 30*time.Second, "the bytes on every node", func() bool { return holders(c, id) == 3 })
	before := map[string]os.FileInfo{}
	for _, n := range c.Nodes {
		fi, err := os.Stat(n.BlobStore().Path(id))
		if err != nil {
			t.Fatal(err)
		}
		before[n.ID()] = fi
	}
	if id2, _, err := c.Nodes[1].StoreBlob(ctx, bytes.NewReader(data), 0); err != nil || id2 != id {
		t.Fatalf("re-put = %s, %v", id2, err)
	}
	// A push that lands after this check would not replace the file
	// either (a stored blob is never rewritten).
	for _, n := range c.Nodes {
		fi, err := os.Stat(n.BlobStore().Path(id))
		if err != nil {
			t.Fatal(err)
		}
		if !os.SameFile(before[n.ID()], fi) {
			t.Fatalf("%s: the re-put replaced the stored file", n.ID())
		}
	}
	if l, _ := c.Nodes[0].BlobStore().List(); len(l) != 1 {
		t.Fatalf("n1 holds %d blobs, want 1", len(l))
	}
}

// A copy damaged on disk is found on read, served from a peer (the source
// says so) and replaced by the peer's good copy.
func TestBlobDamagedCopyServedFromPeerAndRepaired(t *testing.T) {
	c := clustertest.New(t, 3)
	data := blobData(300000, 3)
	id, _, err := c.Nodes[0].StoreBlob(clustertest.Context(t), bytes.NewReader(data), 0)
	if err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, 30*time.Second, "the bytes on every node", func() bool { return holders(c, id) == 3 })
	victim := c.Nodes[2]
	flipByte(t, victim.BlobStore().Path(id), 12345)

	got, source := readBlob(t, victim, id)
	if !bytes.Equal(got, data) {
		t.Fatal("served bytes differ")
	}
	if !strings.HasPrefix(source, "peer n") || !strings.HasSuffix(source, "(local copy damaged)") {
		t.Fatalf("source %q, want peer N (local copy damaged)", source)
	}
	// Repaired: the next read is local and good.
	if got, source := readBlob(t, victim, id); !bytes.Equal(got, data) || source != "local" {
		t.Fatalf("after repair: source %q, identical %v", source, bytes.Equal(got, data))
	}
	// A peer never hands out a damaged copy: with every copy but one
	// damaged, reads still get the good one.
	flipByte(t, c.Nodes[0].BlobStore().Path(id), 1)
	flipByte(t, c.Nodes[1].BlobStore().Path(id), 2)
	if _, _, err := c.Nodes[0].LocalBlob(clustertest.Context(t), id); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("LocalBlob of a damaged copy = %v, want not found", err)
	}
	got, source = readBlob(t, c.Nodes[1], id)
	if !bytes.Equal(got, data) || source != "peer n3 (local copy damaged)" {
		t.Fatalf("n2 with n1 and n2 damaged: source %q, identical %v", source, bytes.Equal(got, data))
	}
}

// Without a majority of voters up an upload fails, saying so, and no
// record would be proposed; with them it succeeds.
func TestBlobNeedsMajority(t *testing.T) {
	c := clustertest.New(t, 3)
	l := c.Leader()
	var down []*clustertest.Node
	for _, n := range c.Nodes {
		if n != l {
			down = append(down, n)
		}
	}
	down[0].Stop()
	if _, _, err := l.StoreBlob(clustertest.Context(t), strings.NewReader("two of three"), 0); err != nil {
		t.Fatalf("with 2 of 3 voters up: %v", err)
	}
	down[1].Stop()
	_, _, err := l.StoreBlob(clustertest.Context(t), strings.NewReader("one of three"), 0)
	if !errors.Is(err, api.ErrNotReady) || !strings.Contains(err.Error(), "majority") {
		t.Fatalf("with 1 of 3 voters up: %v, want ErrNotReady naming the majority", err)
	}
}

// recordArtifact proposes, through n, the record of the bytes id (size
// bytes) as alice's upload, and returns the record as applied.
func recordArtifact(t *testing.T, n *clustertest.Node, id string, size int64) api.Artifact {
	t.Helper()
	raw, err := n.Apply(clustertest.Context(t), api.OpArtifactPut, api.ArtifactPutCommand{ID: id, Name: "r.bin",
		ContentType: api.DefaultArtifactContentType, Size: size, From: "alice"})
	if err != nil {
		t.Fatalf("%s: propose artifact_put %s: %v", n.ID(), id, err)
	}
	var a api.Artifact
	if err := json.Unmarshal(raw, &a); err != nil || a.ID != id || a.Existed {
		t.Fatalf("%s: artifact_put %s = %s, %v", n.ID(), id, raw, err)
	}
	return a
}

// deleteArtifact proposes, through n, an admin's delete of id's record.
func deleteArtifact(t *testing.T, n *clustertest.Node, id string) {
	t.Helper()
	if _, err := n.Apply(clustertest.Context(t), api.OpArtifactDelete, api.ArtifactDeleteCommand{ID: id, By: "admin"}); err != nil {
		t.Fatalf("%s: propose artifact_delete %s: %v", n.ID(), id, err)
	}
}

// A node that missed the push (it never got the bytes) gets them from a
// peer through the repair loop, woken by the record's entry.
func TestBlobRepairLoopCopiesMissing(t *testing.T) {
	c := clustertest.New(t, 3)
	data := blobData(200000, 4)
	lagger := c.Follower()
	var id string
	for _, n := range c.Nodes {
		if n == lagger {
			continue
		}
		got, _, err := n.BlobStore().Put(bytes.NewReader(data), 0)
		if err != nil {
			t.Fatal(err)
		}
		id = got
	}
	if k := holders(c, id); k != 2 || lagger.BlobStore().Has(id) {
		t.Fatalf("before the record: %d holders, lagger has it %v; want the 2 others only", k, lagger.BlobStore().Has(id))
	}
	// The record, applied on every node, wakes the loop.
	recordArtifact(t, c.Leader(), id, int64(len(data)))
	clustertest.WaitFor(t, 30*time.Second, "the repair loop to copy the missing bytes", func() bool { return lagger.BlobStore().Has(id) })
	if got, source := readBlob(t, lagger, id); !bytes.Equal(got, data) || source != "local" {
		t.Fatalf("after repair: source %q, identical %v", source, bytes.Equal(got, data))
	}
}

// End to end over HTTP: put through a follower, get from every node.
func TestArtifactPutThroughFollowerGetEverywhere(t *testing.T) {
	c := clustertest.New(t, 3)
	f := c.Follower()
	ctx := clustertest.Context(t)
	data := blobData(5<<20, 5)
	a, err := f.Client.PutArtifact(ctx, bytes.NewReader(data), int64(len(data)), api.ArtifactUpload{Name: "big.bin", From: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if a.ID != blobID(data) {
		t.Fatalf("PutArtifact = %+v", a)
	}
	again, err := f.Client.PutArtifact(ctx, bytes.NewReader(data), int64(len(data)), api.ArtifactUpload{Name: "big.bin", From: "alice"})
	if err != nil || !again.Existed {
		t.Fatalf("re-put = %+v, %v; want existed", again, err)
	}
	for _, n := range c.Nodes {
		if _, err := n.Client.ArtifactInfo(ctx, a.ID, api.Strong); err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if _, err := n.Client.GetArtifact(ctx, a.ID, &got); err != nil || !bytes.Equal(got.Bytes(), data) {
			t.Fatalf("%s: GetArtifact: %v, identical %v", n.ID(), err, bytes.Equal(got.Bytes(), data))
		}
	}
	victim := c.Nodes[0]
	clustertest.WaitFor(t, 30*time.Second, "the bytes on every node", func() bool { return holders(c, a.ID) == 3 })
	flipByte(t, victim.BlobStore().Path(a.ID), 99)
	r, err := victim.Client.OpenArtifact(ctx, a.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if err != nil || !bytes.Equal(got, data) || !strings.HasSuffix(r.Source, "(local copy damaged)") {
		t.Fatalf("damaged copy: source %q, %v, identical %v", r.Source, err, bytes.Equal(got, data))
	}
}

// flipByte inverts the byte at off of the file at path.
func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// GC removes bytes no record names once an hour old, and keeps young
// ones (an upload whose record is not committed yet) and recorded ones;
// bytes whose record it saw and that was deleted go once past the
// deleted grace (minutes), well before the hour.
func TestBlobGCRemovesOldOrphans(t *testing.T) {
	c := clustertest.New(t, 1)
	n := c.Nodes[0]
	ctx := clustertest.Context(t)
	store := func(s string, age time.Duration) string {
		id, _, err := n.StoreBlob(ctx, strings.NewReader(s), 0)
		if err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-age)
		if err := os.Chtimes(n.BlobStore().Path(id), old, old); err != nil {
			t.Fatal(err)
		}
		return id
	}
	orphan := store("orphan", 2*time.Hour)
	young := store("young", time.Minute)
	kept := store("recorded", 2*time.Hour)
	gone := store("deleted", 10*time.Minute)
	recordArtifact(t, n, kept, int64(len("recorded")))
	recordArtifact(t, n, gone, int64(len("deleted")))

	// GC that has seen the records: the deleted one's bytes go. (A GC
	// with no memory of the record, as after a restart, keeps them the
	// hour an orphan gets.)
	passes := n.BlobPasses()
	passes.Repair()
	deleteArtifact(t, n, gone)
	if _, err := n.Client.ArtifactInfo(ctx, gone, api.Local); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("record after delete: %v, want not found", err)
	}
	n.CollectBlobs()
	if !n.BlobStore().Has(gone) {
		t.Error("GC with no memory of the record removed bytes 10 min old")
	}
	passes.Collect()
	if n.BlobStore().Has(orphan) {
		t.Error("an orphan 2 h old survived GC")
	}
	if !n.BlobStore().Has(young) {
		t.Error("GC removed an orphan a minute old (an upload in flight)")
	}
	if !n.BlobStore().Has(kept) {
		t.Error("GC removed recorded bytes")
	}
	if n.BlobStore().Has(gone) {
		t.Error("the bytes of a deleted record, 10 min old, survived GC")
	}
}
