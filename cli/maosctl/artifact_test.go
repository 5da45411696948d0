package maosctl

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
)

// artifact put, get (to a file and to stdout), ls and info against a
// fake node with a real state machine and blob store; send --attach
// uploads and references; refusals name what to fix.
func TestArtifactVerbs(t *testing.T) {
	e := newTestEnv(t, "bob")
	dir := t.TempDir()
	body := []byte("line one\nline two\n")
	src := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(src, body, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	id := api.ArtifactID(sum[:])

	if out, want := e.ok("artifact", "put", src, "--from", "alice"), id+" notes.txt 18 bytes\n"; out != want {
		t.Fatalf("put printed %q, want %q", out, want)
	}
	if out := e.ok("artifact", "put", src, "--from", "bob", "--name", "other.txt"); !strings.HasSuffix(out, "(stored already)\n") {
		t.Fatalf("second put printed %q", out)
	}
	var a api.Artifact
	if err := json.Unmarshal([]byte(e.ok("--json", "artifact", "info", id)), &a); err != nil || a.From != "alice" || a.Name != "notes.txt" || a.Size != 18 {
		t.Fatalf("info = %+v, %v", a, err)
	}

	out := filepath.Join(dir, "copy.txt")
	if got := e.ok("artifact", "get", id, "-o", out); !strings.Contains(got, out+": 18 bytes, checked against "+id) {
		t.Fatalf("get printed %q", got)
	}
	if b, _ := os.ReadFile(out); !bytes.Equal(b, body) {
		ents, _ := os.ReadDir(dir)
		t.Fatalf("get wrote %q; dir %v", b, ents)
	}
	if got := e.ok("artifact", "get", id, "-o", "-"); got != string(body) {
		t.Fatalf("get -o - printed %q", got)
	}
	if got := e.ok("artifact", "ls", "--from", "alice"); !strings.Contains(got, id+" notes.txt 18 bytes from alice") || strings.Count(got, "\n") != 1 {
		t.Fatalf("ls printed %q", got)
	}

	msgID := e.send("dev", "alice", "bob", "see attached", "--attach", src)
	var m api.Message
	if err := json.Unmarshal([]byte(e.ok("--json", "get", msgID)), &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Content.Artifacts) != 1 || m.Content.Artifacts[0].Ref != id || m.Content.Artifacts[0].Name != "notes.txt" {
		t.Fatalf("attached = %+v", m.Content.Artifacts)
	}
	if got := e.ok("get", msgID); !strings.Contains(got, id+" (notes.txt)") {
		t.Fatalf("get shows %q, want the artifact and its name", got)
	}

	e.fail([]string{"artifact", "get", "sha256:nope"}, "not an artifact id")
	e.fail([]string{"artifact", "info", api.ArtifactID(make([]byte, 32))}, "not found")
	e.fail([]string{"artifact", "put", filepath.Join(dir, "missing")}, "missing")
	e.fail([]string{"send", "--from", "alice", "--to", "bob", "--text", "x", "--attach", filepath.Join(dir, "missing")}, "--attach")
}
