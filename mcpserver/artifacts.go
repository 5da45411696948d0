package mcpserver

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/artifacts"
)

// ToolShareArtifact is seed 002 §1's share_artifact (issue 17); the
// read tool reads an artifact back by its id.
const ToolShareArtifact = "share_artifact"

// MaxInlineArtifact bounds the bytes read returns as text; a
// larger or binary artifact is saved to a file and its path returned.
const MaxInlineArtifact = 64 << 10

// ShareArtifactInput is the argument of share_artifact: a file, or text
// with a name.
type ShareArtifactInput struct {
	Path string `json:"path,omitempty" jsonschema:"file to upload"`
	Text string `json:"text,omitempty" jsonschema:"or its content"`
	Name string `json:"name,omitempty" jsonschema:"file name"`
}

// ArtifactOutput is an artifact's id and what it holds; Path is where
// read saved it when it is not returned inline as Text.
type ArtifactOutput struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Size int64  `json:"size"`
	Text string `json:"text,omitempty"`
	Path string `json:"path,omitempty"`
}

func (h *handlers) shareArtifact(ctx context.Context, _ *mcp.CallToolRequest, in ShareArtifactInput) (*mcp.CallToolResult, ArtifactOutput, error) {
	var (
		a   api.Artifact
		err error
	)
	switch {
	case in.Path != "" && in.Text != "":
		return nil, ArtifactOutput{}, errors.New(ToolShareArtifact + ": give path or text, not both")
	case in.Path != "":
		a, err = artifacts.Upload(ctx, h.c, in.Path, in.Name, h.cfg.Agent)
	case in.Name == "":
		return nil, ArtifactOutput{}, errors.New(ToolShareArtifact + ": text needs a name (the file name it is fetched as)")
	default:
		a, err = h.c.PutArtifact(ctx, strings.NewReader(in.Text), int64(len(in.Text)),
			api.ArtifactUpload{Name: in.Name, From: h.cfg.Agent, ContentType: artifacts.ContentType(in.Name)})
	}
	if err != nil {
		return nil, ArtifactOutput{}, toolErr(ToolShareArtifact, err)
	}
	return nil, ArtifactOutput{ID: a.ID, Name: a.Name, Size: a.Size}, nil
}

// readArtifact answers an artifact: its text inline when it is text of
// at most MaxInlineArtifact bytes, else the path it was saved to.
func (h *handlers) readArtifact(ctx context.Context, id string) (ArtifactOutput, error) {
	a, err := h.c.ArtifactInfo(ctx, id, api.Local)
	if err != nil {
		return ArtifactOutput{}, toolErr(ToolRead, err)
	}
	out := ArtifactOutput{ID: a.ID, Name: a.Name, Size: a.Size}
	if a.Size <= MaxInlineArtifact {
		var buf bytes.Buffer
		if _, err := h.c.GetArtifact(ctx, a.ID, &buf); err != nil {
			return out, toolErr(ToolRead, err)
		}
		if utf8.Valid(buf.Bytes()) && !bytes.ContainsRune(buf.Bytes(), 0) {
			out.Text = buf.String()
			return out, nil
		}
	}
	path, _, err := artifacts.Fetch(ctx, h.c, a.ID, a.Name, h.dir())
	if err != nil {
		return out, toolErr(ToolRead, err)
	}
	out.Path = path
	return out, nil
}

// dir is where read saves an artifact's file: Config.Dir, else
// $MAOS_SHARED_CONTEXT, else $TMPDIR/maos-mcp/AGENT.
func (h *handlers) dir() string {
	switch {
	case h.cfg.Dir != "":
		return h.cfg.Dir
	case os.Getenv("MAOS_SHARED_CONTEXT") != "":
		return os.Getenv("MAOS_SHARED_CONTEXT")
	}
	return filepath.Join(os.TempDir(), "maos-mcp", h.cfg.Agent)
}
