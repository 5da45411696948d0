package artifacts_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/artifacts"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

// node serves the API, artifacts included, on a one-node fake over a real
// state machine.
func node(t *testing.T) (*transporttest.Service, *client.Client) {
	t.Helper()
	svc := transporttest.New(t)
	srv := httptest.NewServer(transport.NewServer(svc, transport.ServerOptions{Blobs: svc}))
	t.Cleanup(srv.Close)
	return svc, client.NewClient(srv.URL, nil)
}

func idOf(b []byte) string {
	s := sha256.Sum256(b)
	return api.ArtifactID(s[:])
}

func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestUploadAndFetch(t *testing.T) {
	svc, cl := node(t)
	ctx := context.Background()
	src := t.TempDir()
	body := []byte(`{"plan": "step one"}`)
	a, err := artifacts.Upload(ctx, cl, writeFile(t, src, "plan.json", body), "", "architect")
	if err != nil {
		t.Fatal(err)
	}
	if a.ID != idOf(body) || a.Name != "plan.json" || a.From != "architect" || a.Size != int64(len(body)) || a.ContentType != "application/json" {
		t.Fatalf("upload = %+v", a)
	}

	dst := t.TempDir()
	path, n, err := artifacts.Fetch(ctx, cl, a.ID, "", dst)
	if err != nil || path != filepath.Join(dst, "plan.json") || n != int64(len(body)) {
		t.Fatalf("fetch = %s, %d, %v", path, n, err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, body) {
		t.Fatalf("fetched %q", got)
	}
	// The same file again is not downloaded again.
	opens := len(svc.CallsTo("OpenBlob"))
	if again, _, err := artifacts.Fetch(ctx, cl, a.ID, "", dst); err != nil || again != path {
		t.Fatalf("second fetch = %s, %v", again, err)
	}
	if got := len(svc.CallsTo("OpenBlob")); got != opens {
		t.Errorf("a file already holding the bytes was downloaded again (%d opens, was %d)", got, opens)
	}
	// A file of that name with other bytes is left alone: the artifact
	// goes beside it, named after its id.
	other := writeFile(t, dst, "notes.md", []byte("mine"))
	p2, _, err := artifacts.Fetch(ctx, cl, a.ID, "notes.md", dst)
	if err != nil || p2 == other || !strings.HasSuffix(p2, "-notes.md") {
		t.Fatalf("fetch over another file = %s, %v", p2, err)
	}
	if got, _ := os.ReadFile(other); string(got) != "mine" {
		t.Fatalf("the other file was overwritten: %q", got)
	}
}

func TestFetchRefsSkipsPathsAndKeepsFailures(t *testing.T) {
	_, cl := node(t)
	ctx := context.Background()
	body := []byte("data")
	a, err := artifacts.Upload(ctx, cl, writeFile(t, t.TempDir(), "d.txt", body), "", "alice")
	if err != nil {
		t.Fatal(err)
	}
	missing := idOf([]byte("never uploaded"))
	dst := t.TempDir()
	got, err := artifacts.FetchRefs(ctx, cl, []api.ArtifactRef{
		{Ref: "shared/context/plan.md"}, {Ref: a.ID, Name: "input.txt"}, {Ref: a.ID, Name: "input.txt"}, {Ref: missing, Name: "gone.bin"},
	}, dst)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Path != filepath.Join(dst, "input.txt") || got[0].Err != "" || got[1].Err == "" || !strings.Contains(got[1].Err, "not found") {
		t.Fatalf("FetchRefs = %+v; want input.txt fetched once, gone.bin failed (not found), the path skipped", got)
	}
	if _, err := os.Stat(filepath.Join(dst, "gone.bin")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed fetch left a file: %v", err)
	}
}

// Bytes that do not match the id (a node or proxy serving garbage) fail
// the fetch and leave no file, temporary or final.
func TestFetchRefusesBytesThatDoNotMatch(t *testing.T) {
	want := []byte("the real bytes")
	id := idOf(want)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("other bytes!!!"))
	}))
	t.Cleanup(srv.Close)
	dst := t.TempDir()
	_, _, err := artifacts.Fetch(context.Background(), client.NewClient(srv.URL, nil), id, "x.bin", dst)
	if !errors.Is(err, client.ErrArtifactDamaged) {
		t.Fatalf("fetch of bytes that do not match = %v, want ErrArtifactDamaged", err)
	}
	if ents, _ := os.ReadDir(dst); len(ents) != 0 {
		t.Fatalf("left behind: %v", ents)
	}
}

func TestUploadRefusals(t *testing.T) {
	_, cl := node(t)
	ctx := context.Background()
	dir := t.TempDir()
	if _, err := artifacts.Upload(ctx, cl, filepath.Join(dir, "nope"), "", "a"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := artifacts.Upload(ctx, cl, dir, "", "a"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a directory: %v", err)
	}
	if _, err := artifacts.Upload(ctx, cl, writeFile(t, dir, "f", nil), "a/b", "a"); !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), "name") {
		t.Errorf("a name with a slash: %v", err)
	}
	if _, _, err := artifacts.Fetch(ctx, cl, "sha256:xyz", "", dir); !errors.Is(err, api.ErrInvalid) {
		t.Errorf("a bad id: %v", err)
	}
}
