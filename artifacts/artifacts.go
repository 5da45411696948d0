// Package artifacts moves files between a host and the cluster's artifact
// store (issue 17) for the clients of the API: maosctl (artifact put/get,
// send --attach), watchers (the files a message references, fetched into
// the agent's shared context before its CLI runs; the files its CLI
// reports, uploaded and referenced in the reply) and the MCP server. One
// upload and one fetch, so every client names, types and checks files the
// same way.
//
// A fetched file is written to a temporary file in the target folder and
// renamed once its bytes matched the artifact id, so a reader never sees a
// partial or damaged file under the artifact's name.
package artifacts

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"mime"
	"os"
	"path/filepath"
	"strings"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/durable"
)

// ContentType is the media type an upload of file name is given: by its
// extension, else api.DefaultArtifactContentType.
func ContentType(name string) string {
	if t := mime.TypeByExtension(filepath.Ext(name)); t != "" {
		return t
	}
	return api.DefaultArtifactContentType
}

// Upload uploads the file at path as an artifact named name (default:
// its base name), uploaded by from ("" for the client token's agent). The
// same bytes again return the stored record (Existed set).
func Upload(ctx context.Context, c *client.Client, path, name, from string) (api.Artifact, error) {
	f, err := os.Open(path)
	if err != nil {
		return api.Artifact{}, fmt.Errorf("artifacts: upload: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return api.Artifact{}, fmt.Errorf("artifacts: upload: %w", err)
	}
	if !st.Mode().IsRegular() {
		return api.Artifact{}, fmt.Errorf("artifacts: upload %s: not a regular file", path)
	}
	if name == "" {
		name = filepath.Base(path)
	}
	if err := api.ValidArtifactName("name", name); err != nil {
		return api.Artifact{}, fmt.Errorf("artifacts: upload %s: %w", path, err)
	}
	a, err := c.PutArtifact(ctx, f, st.Size(), api.ArtifactUpload{Name: name, From: from, ContentType: ContentType(name)})
	if err != nil {
		return a, fmt.Errorf("artifacts: upload %s: %w", path, err)
	}
	return a, nil
}

// Local is an artifact fetched into a folder.
type Local struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Path string `json:"path"`
	Size int64  `json:"size"`
	// Err says why it could not be fetched ("" when it was).
	Err string `json:"error,omitempty"`
}

// Fetch writes artifact id into dir (made if missing) as name (default:
// the artifact's record name) and returns its path and size. A file of
// that name whose bytes already match id is kept without a download; one
// with other bytes is left alone and the artifact goes to
// "<first 12 hex of the id>-<name>" instead. The bytes are checked against
// id before the rename (an error wrapping transport.ErrArtifactDamaged
// otherwise, and nothing is left behind).
func Fetch(ctx context.Context, c *client.Client, id, name, dir string) (string, int64, error) {
	if !api.ValidArtifactID(id) {
		return "", 0, fmt.Errorf("artifacts: fetch: %w", api.ArtifactIDError("id", id))
	}
	if name == "" {
		rec, err := c.ArtifactInfo(ctx, id, api.Local)
		if err != nil {
			return "", 0, fmt.Errorf("artifacts: fetch %s: %w", id, err)
		}
		name = rec.Name
	}
	if err := api.ValidArtifactName("name", name); err != nil {
		return "", 0, fmt.Errorf("artifacts: fetch %s: %w", id, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", 0, fmt.Errorf("artifacts: fetch %s: %w", id, err)
	}
	path := filepath.Join(dir, name)
	switch same, size, err := holds(path, id); {
	case err == nil && same:
		return path, size, nil
	case err == nil:
		path = filepath.Join(dir, strings.TrimPrefix(id, api.ArtifactIDPrefix)[:12]+"-"+name)
		if same, size, err := holds(path, id); err == nil && same {
			return path, size, nil
		}
	case !errors.Is(err, os.ErrNotExist):
		return "", 0, fmt.Errorf("artifacts: fetch %s: %w", id, err)
	}
	size, err := download(ctx, c, id, path)
	if err != nil {
		return "", 0, fmt.Errorf("artifacts: fetch %s: %w", id, err)
	}
	return path, size, nil
}

// download writes id's bytes to path through a temporary file beside it,
// fsynced and renamed into place only once the client checked them
// against the id (durable.Create).
func download(ctx context.Context, c *client.Client, id, path string) (int64, error) {
	tmp, err := durable.Create(path, 0o644)
	if err != nil {
		return 0, err
	}
	defer tmp.Discard() // a no-op after the commit; cleans up on failure
	n, err := c.GetArtifact(ctx, id, tmp)
	if err != nil {
		return 0, err
	}
	return n, tmp.Commit()
}

// holds reports whether the file at path has the bytes of artifact id.
func holds(path, id string) (bool, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return false, 0, err
	}
	return api.ArtifactID(h.Sum(nil)) == id, n, nil
}

// FetchRefs fetches into dir every artifact that refs name (paths are
// left as they are), each once, under its object's name or its record's.
// A failure is kept in that entry's Err and the others go on; ctx's end
// stops it with ctx's error.
func FetchRefs(ctx context.Context, c *client.Client, refs []api.ArtifactRef, dir string) ([]Local, error) {
	var out []Local
	seen := map[string]bool{}
	for _, r := range refs {
		id := r.ArtifactID()
		if id == "" || seen[id+"\x00"+r.Name] {
			continue
		}
		seen[id+"\x00"+r.Name] = true
		path, size, err := Fetch(ctx, c, id, r.Name, dir)
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		l := Local{ID: id, Name: r.Name, Path: path, Size: size}
		if l.Name == "" {
			l.Name = filepath.Base(path)
		}
		if err != nil {
			l.Err = err.Error()
		}
		out = append(out, l)
	}
	return out, nil
}

// UploadPaths uploads the files paths name (relative ones under dir) and
// returns a reference to each, {id, name} with the file's base name, in
// order; a path that cannot be uploaded is returned in failed with why.
func UploadPaths(ctx context.Context, c *client.Client, dir, from string, paths []string) (refs []api.ArtifactRef, failed []string) {
	for _, p := range paths {
		full := p
		if !filepath.IsAbs(full) {
			full = filepath.Join(dir, p)
		}
		a, err := Upload(ctx, c, full, "", from)
		if err != nil {
			failed = append(failed, p+": "+err.Error())
			continue
		}
		refs = append(refs, api.ArtifactRef{Ref: a.ID, Name: filepath.Base(full)})
	}
	return refs, failed
}
