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

// The artifact tools (issue 17; seed 002 §1's share_artifact).
const (
	ToolShareArtifact = "share_artifact"
	ToolReadArtifact  = "read_artifact"
)

// MaxInlineArtifact bounds the bytes read_artifact returns as text; a
// larger or binary artifact is saved to a file and its path returned.
const MaxInlineArtifact = 64 << 10

// ShareArtifactInput is the argument of share_artifact: a file, or text
// with a name.
type ShareArtifactInput struct {
	Path string `json:"path,omitempty" jsonschema:"file to upload"`
	Text string `json:"text,omitempty" jsonschema:"or the content"`
	Name string `json:"name,omitempty" jsonschema:"file name (default: path's)"`
}

// ArtifactOutput is an artifact's id and what it holds; Path is where
// read_artifact saved it when it is not returned inline as Text.
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

// ReadArtifactInput is the argument of read_artifact.
type ReadArtifactInput struct {
	ID string `json:"id" jsonschema:"sha256:…"`
}

func (h *handlers) readArtifact(ctx context.Context, _ *mcp.CallToolRequest, in ReadArtifactInput) (*mcp.CallToolResult, ArtifactOutput, error) {
	a, err := h.c.ArtifactInfo(ctx, in.ID, api.Local)
	if err != nil {
		return nil, ArtifactOutput{}, toolErr(ToolReadArtifact, err)
	}
	out := ArtifactOutput{ID: a.ID, Name: a.Name, Size: a.Size}
	if a.Size <= MaxInlineArtifact {
		var buf bytes.Buffer
		if _, err := h.c.GetArtifact(ctx, a.ID, &buf); err != nil {
			return nil, out, toolErr(ToolReadArtifact, err)
		}
		if utf8.Valid(buf.Bytes()) && !bytes.ContainsRune(buf.Bytes(), 0) {
			out.Text = buf.String()
			return nil, out, nil
		}
	}
	path, _, err := artifacts.Fetch(ctx, h.c, a.ID, a.Name, h.dir())
	if err != nil {
		return nil, out, toolErr(ToolReadArtifact, err)
	}
	out.Path = path
	return nil, out, nil
}

// dir is where read_artifact saves files: Config.Dir, else
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
