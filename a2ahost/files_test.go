package a2ahost_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
)

// A file part with its bytes is stored as a maos artifact (content
// addressed, with its name and media type), named in the task's context,
// and shown in the task's history as a URL file part the sender can fetch.
func TestFilePartIsAnArtifact(t *testing.T) {
	n := start(t)
	_, c := n.a2aFor(t, n.alice)
	ctx := t.Context()
	body := []byte("# Notes\n\nship it\n")
	sum := sha256.Sum256(body)
	id := "sha256:" + hex.EncodeToString(sum[:])
	file := a2a.NewRawPart(body)
	file.Filename, file.MediaType = "notes.md", "text/markdown"
	sent := sendText(t, c, a2a.NewTextPart("Review the notes"), file)
	info, err := n.admin.ArtifactInfo(ctx, id, api.Strong)
	if err != nil {
		t.Fatalf("no artifact %s: %v", id, err)
	}
	if info.Name != "notes.md" || info.ContentType != "text/markdown" || info.From != "alice" {
		t.Errorf("artifact record %+v", info)
	}
	mt, err := n.admin.Task(ctx, string(sent.ID))
	if err != nil || !strings.Contains(string(mt.Context), id) {
		t.Errorf("task context %s (%v) does not name %s", mt.Context, err, id)
	}
	parts := sent.History[0].Parts
	last := parts[len(parts)-1]
	if last.URL() != a2a.URL(n.url+"/v1/artifacts/"+id) || last.Filename != "notes.md" || last.MediaType != "text/markdown" {
		t.Fatalf("history's file part %+v", last)
	}
	if got := fetch(t, n.alice, string(last.URL())); !bytes.Equal(got, body) {
		t.Errorf("fetched %q, want %q", got, body)
	}
}

// A completion's output artifacts are the result artifact's URL file parts,
// with their names and media types, when the caller may read them (maos's
// read rule: the uploader, the readers of a message naming it, the task's
// creator for an output its claimant uploaded); else the output is an id
// in the data part.
func TestOutputsAreFileParts(t *testing.T) {
	n := start(t)
	_, c := n.a2aFor(t, n.alice)
	ctx := t.Context()
	sent := sendText(t, c, a2a.NewTextPart("Draw the diagram"))
	bob := client.NewClient(n.url, nil).WithToken(n.bob)
	png := []byte("\x89PNG not really")
	art, err := bob.PutArtifact(ctx, bytes.NewReader(png), int64(len(png)), api.ArtifactUpload{Name: "diagram.png", ContentType: "image/png", From: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	claim, err := bob.ClaimTask(ctx, string(sent.ID), "bob")
	if err != nil {
		t.Fatal(err)
	}
	// An output bob did not upload (carol's) hands nothing over: it stays
	// an id in the data part.
	other, err := n.admin.PutArtifact(ctx, bytes.NewReader([]byte("carol's notes")), 13, api.ArtifactUpload{Name: "notes.txt", From: "carol"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.CompleteTask(ctx, api.TaskCompleteCommand{ID: string(sent.ID), Agent: "bob", Fence: claim.Fence,
		Completion: api.TaskCompletion{Status: api.TaskStatusSuccess, Result: "drawn", Outputs: []string{art.ID, other.ID}}}); err != nil {
		t.Fatal(err)
	}
	parts := resultParts(t, c, sent.ID, 3)
	if p := parts[1]; p.URL() != a2a.URL(n.url+"/v1/artifacts/"+art.ID) || p.Filename != "diagram.png" || p.MediaType != "image/png" {
		t.Errorf("output part %+v: want the URL of bob's output, which alice (the creator) reads", p)
	}
	if ids, _ := parts[2].Data().(map[string]any)["maos_artifacts"].([]any); len(ids) != 1 || ids[0] != other.ID {
		t.Errorf("an output alice may not read: part %+v, want its id in maos_artifacts", parts[2])
	}
}

// resultParts are the parts of task id's one artifact, read through A2A;
// want of them.
func resultParts(t *testing.T, c *a2aclient.Client, id a2a.TaskID, want int) a2a.ContentParts {
	t.Helper()
	got, err := c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Artifacts) != 1 || len(got.Artifacts[0].Parts) != want {
		t.Fatalf("artifacts %+v, want one of %d parts", got.Artifacts, want)
	}
	return got.Artifacts[0].Parts
}

// fetch GETs u with secret as the bearer token and answers the body.
func fetch(t *testing.T, secret, u string) []byte {
	t.Helper()
	resp, err := bearer(secret).Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", u, resp.StatusCode, b)
	}
	return b
}
