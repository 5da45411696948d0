package a2ahost

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/maos-project/maos/api"
)

// FileRef is a file part of the message a task was created from, stored
// as a maos artifact (content addressed) and named in the task's context
// (A2AContext.Files).
type FileRef struct {
	Artifact  string `json:"artifact"` // "sha256:<hex>"
	Name      string `json:"name,omitempty"`
	MediaType string `json:"mediaType,omitempty"`
}

// putFiles uploads each raw file part of m through the API's artifact
// upload (PUT /v1/artifacts), as from, with the part's file name (else
// "part-N") and media type (else application/octet-stream), and answers
// their references in part order. The same bytes twice are one artifact.
// An upload the API refuses (size, quota, the secret guard) is its error.
func (a *agent) putFiles(ctx context.Context, m *a2a.Message, from string) ([]FileRef, error) {
	var refs []FileRef
	for i, p := range m.Parts {
		raw, ok := p.Content.(a2a.Raw)
		if !ok {
			continue
		}
		ref := FileRef{Name: cmp.Or(p.Filename, fmt.Sprintf("part-%d", i)), MediaType: cmp.Or(p.MediaType, "application/octet-stream")}
		art, err := a.c.PutArtifact(ctx, bytes.NewReader(raw), int64(len(raw)), api.ArtifactUpload{Name: ref.Name, ContentType: ref.MediaType, From: from})
		if err != nil {
			return nil, fromAPI(fmt.Errorf("file part %d (%s): %w", i, ref.Name, err))
		}
		ref.Artifact = art.ID
		refs = append(refs, ref)
	}
	return refs, nil
}

// attachFiles names refs in cmd's context (A2AContext.Files).
func attachFiles(cmd *api.TaskCreateCommand, refs []FileRef) error {
	if len(refs) == 0 {
		return nil
	}
	var actx A2AContext
	if err := json.Unmarshal(cmd.Context, &actx); err != nil {
		return err
	}
	actx.Files = refs
	raw, err := json.Marshal(actx)
	cmd.Context = raw
	return err
}

// artifactURL is where artifact id's bytes are served on this node
// (GET /v1/artifacts/{id}, behind the API's auth like any other read).
func (a *agent) artifactURL(id string) a2a.URL {
	return a2a.URL(a.base + "/v1/artifacts/" + url.PathEscape(id))
}

// filePart is a URL file part for artifact id.
func (a *agent) filePart(id, name, mediaType string) *a2a.Part {
	p := a2a.NewFileURLPart(a.artifactURL(id), mediaType)
	p.Filename = name
	return p
}

// view is t as an A2A task (ToTask) with its files as URL file parts: the
// request's files (A2AContext.Files) in its history message, and, when
// at keeps its result artifact, each completion output the caller may
// read (GET /v1/artifacts/{id}/info) with its name and media type; an
// output whose record the caller may not read stays an id in the data
// part "maos_artifacts".
func (a *agent) view(ctx context.Context, t *api.Task) *a2a.Task {
	return a.addFiles(ctx, t, ToTask(t))
}

// addFiles is view's second half, for an at already made (and filtered);
// a task awaiting approval also gets its question (question).
func (a *agent) addFiles(ctx context.Context, t *api.Task, at *a2a.Task) *a2a.Task {
	a.question(ctx, t, at)
	var actx A2AContext
	if json.Unmarshal(t.Context, &actx) == nil && len(at.History) > 0 {
		for _, f := range actx.Files {
			at.History[0].Parts = append(at.History[0].Parts, a.filePart(f.Artifact, f.Name, f.MediaType))
		}
	}
	if len(at.Artifacts) == 0 || t.Completion == nil || len(t.Completion.Outputs) == 0 {
		return at
	}
	parts := a2a.ContentParts{a2a.NewTextPart(t.Completion.Result)}
	var unread []string
	for _, id := range t.Completion.Outputs {
		info, err := a.c.ArtifactInfo(ctx, id, api.Strong)
		if err != nil {
			unread = append(unread, id)
			continue
		}
		parts = append(parts, a.filePart(info.ID, info.Name, info.ContentType))
	}
	if len(unread) > 0 {
		parts = append(parts, a2a.NewDataPart(map[string]any{"maos_artifacts": unread}))
	}
	at.Artifacts[0].Parts = parts
	return at
}
