package system

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/cluster/clustertest"
	"github.com/maos-project/maos/testing/harness"
	"github.com/maos-project/maos/testing/testenv"
)

// Issue 17's promises, through the built maosd: an artifact put through
// one node comes back byte-identical (checked against its id) from every
// node, also after the leader is SIGKILLed; the same bytes again store
// nothing new; a damaged copy on one node is detected and served (and
// repaired) from a peer.

// randomBytes is n bytes of a fixed pseudo-random stream (seed).
func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for k := range 8 {
			b[i+k] = byte(v >> (8 * k))
		}
	}
	return b
}

func artifactIDOf(b []byte) string {
	s := sha256.Sum256(b)
	return api.ArtifactID(s[:])
}

// getArtifact reads id from n whole (the client checks the bytes against
// the id) and returns the bytes and the node's source header.
func getArtifact(t *testing.T, n *harness.Node, id string) ([]byte, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := n.Client().OpenArtifact(ctx, id, 0)
	if err != nil {
		t.Fatalf("GET %s from %s: %v", id, n.ID, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("GET %s from %s: %v", id, n.ID, err)
	}
	return b, r.Source
}

// blobFiles lists the files under n's data dir whose name holds hex (the
// node's copies of one artifact), leaving out temporary files.
func blobFiles(t *testing.T, n *harness.Node, hex string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(n.DataDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.Contains(d.Name(), hex) && !strings.HasPrefix(d.Name(), ".") && !strings.Contains(d.Name(), "tmp") {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func putArtifact(ctx context.Context, n *harness.Node, body io.Reader, size int64, name string) (api.Artifact, error) {
	return n.Client().PutArtifact(ctx, body, size, api.ArtifactUpload{Name: name, From: "alice", ContentType: "application/octet-stream"})
}

func TestArtifactAcrossNodesAndLeaderKill(t *testing.T) {
	c := harness.NewCluster(t, harness.Options{Maosd: maosdBin, Nodes: 3})
	harness.NoErr(t, c.WaitReady())
	leader, err := c.Leader()
	harness.NoErr(t, err)
	followers, err := c.Followers()
	harness.NoErr(t, err)

	data := randomBytes(5<<20, 17)
	id := artifactIDOf(data)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	a, err := putArtifact(ctx, followers[0], bytes.NewReader(data), int64(len(data)), "big.bin")
	harness.NoErr(t, err)
	if a.ID != id || a.Size != int64(len(data)) || a.Name != "big.bin" || a.Existed {
		t.Fatalf("put through %s = %+v; want id %s, %d bytes, new", followers[0].ID, a, id, len(data))
	}
	for _, n := range c.Nodes() {
		if got, _ := getArtifact(t, n, id); !bytes.Equal(got, data) {
			t.Fatalf("%s served %d bytes that differ from the %d put", n.ID, len(got), len(data))
		}
	}

	// The same bytes again, through another node: the stored record, no
	// new entry, and still one copy on each node.
	again, err := putArtifact(ctx, followers[1], bytes.NewReader(data), int64(len(data)), "other-name.bin")
	harness.NoErr(t, err)
	if !again.Existed || again.Index != a.Index || again.Name != "big.bin" {
		t.Fatalf("re-upload = %+v; want the stored record (index %d, existed)", again, a.Index)
	}
	page, err := leader.Client().Artifacts(ctx, api.ArtifactQuery{}, api.Strong)
	harness.NoErr(t, err)
	if len(page.Artifacts) != 1 {
		t.Fatalf("%d artifact records after a re-upload, want 1", len(page.Artifacts))
	}
	hex := strings.TrimPrefix(id, api.ArtifactIDPrefix)
	for _, n := range c.Nodes() {
		harness.NoErr(t, harness.WaitFor(30*time.Second, n.ID+" holds one copy", func() error {
			if f := blobFiles(t, n, hex); len(f) != 1 {
				return fmt.Errorf("copies %v", f)
			}
			return nil
		}))
	}

	// SIGKILL the leader: every node left serves the same bytes.
	harness.NoErr(t, leader.Kill())
	_, err = c.LeaderAmong(30*time.Second, followers...)
	harness.NoErr(t, err)
	for _, n := range followers {
		if got, _ := getArtifact(t, n, id); !bytes.Equal(got, data) {
			t.Fatalf("after the leader's kill %s served %d bytes that differ", n.ID, len(got))
		}
	}
	harness.NoErr(t, leader.Restart())
	harness.NoErr(t, c.WaitReady())
	if got, _ := getArtifact(t, leader, id); !bytes.Equal(got, data) {
		t.Fatalf("the restarted %s served %d bytes that differ", leader.ID, len(got))
	}
}

// An upload the leader's SIGKILL interrupts is complete or absent on
// every node, never partial; retried, it is complete everywhere.
func TestArtifactUploadInterruptedByLeaderKill(t *testing.T) {
	c := harness.NewCluster(t, harness.Options{Maosd: maosdBin, Nodes: 3})
	harness.NoErr(t, c.WaitReady())
	leader, err := c.Leader()
	harness.NoErr(t, err)
	followers, err := c.Followers()
	harness.NoErr(t, err)

	data := randomBytes(16<<20, 29)
	id := artifactIDOf(data)
	pr, pw := io.Pipe()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := putArtifact(ctx, followers[0], pr, int64(len(data)), "interrupted.bin")
		pr.CloseWithError(err)
		done <- err
	}()
	// Half the bytes, then the leader dies, then the rest.
	const chunk = 256 << 10
	for off := 0; off < len(data); off += chunk {
		if off == len(data)/2 {
			harness.NoErr(t, leader.Kill())
		}
		if _, err := pw.Write(data[off:min(off+chunk, len(data))]); err != nil {
			break // the upload ended early
		}
	}
	pw.Close()
	putErr := <-done
	t.Logf("the upload interrupted by the leader's kill ended with: %v", putErr)
	_, err = c.LeaderAmong(30*time.Second, followers...)
	harness.NoErr(t, err)

	check := func(phase string) bool {
		t.Helper()
		present := 0
		for _, n := range followers {
			ictx, icancel := testenv.Context(t)
			_, ierr := n.Client().ArtifactInfo(ictx, id, api.Strong)
			icancel()
			switch {
			case ierr == nil:
				present++
				if got, _ := getArtifact(t, n, id); !bytes.Equal(got, data) {
					t.Fatalf("%s: %s serves %d bytes that are not the artifact", phase, n.ID, len(got))
				}
			case errors.Is(ierr, api.ErrNotFound):
			default:
				t.Fatalf("%s: info on %s: %v", phase, n.ID, ierr)
			}
		}
		if present != 0 && present != len(followers) {
			t.Fatalf("%s: the record is on %d of %d nodes", phase, present, len(followers))
		}
		return present > 0
	}
	complete := check("after the kill")
	if putErr == nil && !complete {
		t.Fatal("the upload was acknowledged but its record is on no node")
	}
	if !complete {
		// Retried (same bytes, so the same id): complete everywhere.
		_, err := putArtifact(ctx, followers[1], bytes.NewReader(data), int64(len(data)), "interrupted.bin")
		harness.NoErr(t, err)
		if !check("after the retry") {
			t.Fatal("the retried upload is on no node")
		}
	}
}

// A node whose copy was damaged on disk says so and serves a peer's good
// copy, which it keeps: the next read is its own again.
func TestArtifactDamagedCopyServedFromPeer(t *testing.T) {
	c := harness.NewCluster(t, harness.Options{Maosd: maosdBin, Nodes: 3})
	harness.NoErr(t, c.WaitReady())
	data := randomBytes(1<<20, 41)
	id := artifactIDOf(data)
	n1 := c.Nodes()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := putArtifact(ctx, n1, bytes.NewReader(data), int64(len(data)), "victim.bin")
	harness.NoErr(t, err)

	victim := c.Nodes()[2]
	hex := strings.TrimPrefix(id, api.ArtifactIDPrefix)
	var files []string
	harness.NoErr(t, harness.WaitFor(30*time.Second, victim.ID+" holds its copy", func() error {
		if files = blobFiles(t, victim, hex); len(files) != 1 {
			return fmt.Errorf("copies %v", files)
		}
		return nil
	}))
	b, err := os.ReadFile(files[0])
	harness.NoErr(t, err)
	b[len(b)/2] ^= 0xff
	harness.NoErr(t, os.WriteFile(files[0], b, 0o600))

	got, source := getArtifact(t, victim, id)
	if !bytes.Equal(got, data) {
		t.Fatalf("%s served %d bytes that differ after its copy was damaged", victim.ID, len(got))
	}
	if !strings.Contains(source, "damaged") || !strings.HasPrefix(source, "peer") {
		t.Fatalf("source %q: want a peer's copy, saying the local one was damaged", source)
	}
	got, source = getArtifact(t, victim, id)
	if !bytes.Equal(got, data) || source != "local" {
		t.Fatalf("after the repair: %d bytes from %q; want its own good copy", len(got), source)
	}
}

// A watcher on another node gets the file a message references in its
// agent's shared context before its CLI runs, and the file its CLI
// reports with an artifact line comes back referenced in the reply,
// readable from every node.
func TestWatcherFetchesAndAttachesArtifacts(t *testing.T) {
	c := clustertest.New(t, 3)
	dir := t.TempDir()
	shared := filepath.Join(dir, "shared")
	script := writeScript(t, dir, `set -e
in="$MAOS_SHARED_CONTEXT/spec.md"
test -f "$in"
grep -q "$in" /dev/stdin   # the prompt lists the local path
tr a-z A-Z < "$in" > review.md
echo "reviewed $(wc -c < "$in") bytes"
echo '{"type":"artifact","path":"review.md","description":"the review"}'
`)
	startWatcher(t, c.Nodes[1].Client, fmt.Sprintf(`
agents:
  - id: reviewer
    command: ["sh", %q]
    workdir: %q
    shared_context: %q
    context_messages: 0
    retries: 0
`, script, dir, shared))
	cl := c.Nodes[0].Client
	waitRegistered(t, cl, "reviewer")
	spec := []byte("the api has three routes\n")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := cl.PutArtifact(ctx, bytes.NewReader(spec), int64(len(spec)), api.ArtifactUpload{Name: "upload.md", From: "architect"})
	if err != nil {
		t.Fatal(err)
	}
	m := &api.Message{ID: "review-1", Channel: "dev", From: "architect", To: api.Recipients{"reviewer"},
		Content: api.Content{Text: "please review the spec", Artifacts: []api.ArtifactRef{{Ref: a.ID, Name: "spec.md"}}}}
	resp, err := cl.Send(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	m.Seq, m.Timestamp = resp.Seq, resp.Timestamp
	r := oneReply(t, cl, "reviewer", m)
	if r.Content.Text != fmt.Sprintf("reviewed %d bytes", len(spec)) {
		t.Fatalf("reply text %q", r.Content.Text)
	}
	want := bytes.ToUpper(spec)
	if len(r.Content.Artifacts) != 1 || r.Content.Artifacts[0].Ref != artifactIDOf(want) || r.Content.Artifacts[0].Name != "review.md" {
		t.Fatalf("reply artifacts %+v; want review.md as %s", r.Content.Artifacts, artifactIDOf(want))
	}
	for _, n := range c.Nodes {
		var buf bytes.Buffer
		if _, err := n.Client.GetArtifact(ctx, r.Content.Artifacts[0].Ref, &buf); err != nil || !bytes.Equal(buf.Bytes(), want) {
			t.Fatalf("the reply's artifact from %s: %q, %v", n.ID(), buf.String(), err)
		}
	}
	if got, err := os.ReadFile(filepath.Join(shared, "spec.md")); err != nil || !bytes.Equal(got, spec) {
		t.Fatalf("shared context's spec.md: %q, %v", got, err)
	}
}
