package mcpserver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// share_artifact uploads a file or text; read returns an artifact's text
// inline and saves a binary artifact to a file; send_message references
// the ids; refusals are tool errors.
func TestArtifactTools(t *testing.T) {
	t.Setenv("MAOS_SHARED_CONTEXT", t.TempDir())
	cs := session(t, serveFake(t, "codex"), "claude")
	var txt ArtifactOutput
	if e := call(t, cs, ToolShareArtifact, map[string]any{"text": "# findings\n", "name": "findings.md"}, &txt); e != "" {
		t.Fatal(e)
	}
	if !strings.HasPrefix(txt.ID, "sha256:") || txt.Name != "findings.md" || txt.Size != 11 {
		t.Fatalf("share text = %+v", txt)
	}
	var read ArtifactOutput
	if e := call(t, cs, ToolRead, map[string]any{"id": txt.ID}, &read); e != "" || read.Text != "# findings\n" || read.Path != "" {
		t.Fatalf("read text = %+v, %s", read, e)
	}

	bin := filepath.Join(t.TempDir(), "blob.bin")
	if err := os.WriteFile(bin, []byte{0, 1, 2, 0xff}, 0o644); err != nil {
		t.Fatal(err)
	}
	var b ArtifactOutput
	if e := call(t, cs, ToolShareArtifact, map[string]any{"path": bin}, &b); e != "" || b.Name != "blob.bin" {
		t.Fatalf("share file = %+v, %s", b, e)
	}
	read = ArtifactOutput{}
	if e := call(t, cs, ToolRead, map[string]any{"id": b.ID}, &read); e != "" || read.Text != "" || read.Path == "" {
		t.Fatalf("read binary = %+v, %s", read, e)
	}
	if got, err := os.ReadFile(read.Path); err != nil || string(got) != "\x00\x01\x02\xff" {
		t.Fatalf("saved %q, %v", got, err)
	}

	var sent SendOutput
	if e := call(t, cs, ToolSend, map[string]any{"to": []string{"codex"}, "text": "see", "artifacts": []string{txt.ID}}, &sent); e != "" {
		t.Fatal(e)
	}
	var got MessageOutput
	if e := call(t, cs, ToolRead, map[string]any{"id": sent.ID}, &got); e != "" || len(got.Artifacts) != 1 || got.Artifacts[0] != txt.ID {
		t.Fatalf("read of a message = %+v, %s", got, e)
	}

	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{ToolShareArtifact, map[string]any{"text": "x"}, "needs a name"},
		{ToolShareArtifact, map[string]any{"text": "x", "path": bin}, "not both"},
		{ToolRead, map[string]any{"id": "sha256:" + strings.Repeat("0", 64)}, "not found"},
		{ToolSend, map[string]any{"to": []string{"codex"}, "text": "x", "artifacts": []string{"sha256:" + strings.Repeat("1", 64)}}, "upload it first"},
	} {
		var out any
		if e := call(t, cs, tc.tool, tc.args, &out); !strings.Contains(e, tc.want) {
			t.Errorf("%s %v: %q, want an error with %q", tc.tool, tc.args, e, tc.want)
		}
	}
}
