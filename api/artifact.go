package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/maos-project/maos/blobstore"
)

// The artifact ops.
const (
	// OpArtifactPut records an artifact whose bytes a majority of nodes
	// hold (body: ArtifactPutCommand); the same id again answers the
	// stored artifact and stores nothing new.
	OpArtifactPut Op = "artifact_put"
	// OpArtifactDelete removes an artifact's record (body:
	// ArtifactDeleteCommand): an admin's delete, or retention's.
	OpArtifactDelete Op = "artifact_delete"
)

// ArtifactIDPrefix starts every artifact id.
const ArtifactIDPrefix = blobstore.IDPrefix

// Limits of an artifact's metadata.
const (
	// MaxArtifactNameLen bounds an artifact's name, in bytes.
	MaxArtifactNameLen = 255
	// MaxArtifactContentTypeLen bounds its content type, in bytes.
	MaxArtifactContentTypeLen = 255
	// DefaultArtifactContentType is the type of an upload that names none.
	DefaultArtifactContentType = "application/octet-stream"
)

// ArtifactID is the id of the bytes whose SHA-256 is sum (32 bytes):
// blobstore.ID, the one spelling of a content address.
func ArtifactID(sum []byte) string { return blobstore.ID(sum) }

// ValidArtifactID reports whether s is "sha256:" and 64 lowercase hex
// digits (blobstore.ValidID).
func ValidArtifactID(s string) bool { return blobstore.ValidID(s) }

// ArtifactIDError is the *FieldError for field whose value is not an
// artifact id.
func ArtifactIDError(field, value string) error {
	if len(value) > 80 {
		value = TruncateUTF8(value, 80) + "…"
	}
	return FieldErrorf(field, "not an artifact id: want %s and 64 lowercase hex digits (got %q)", ArtifactIDPrefix, value)
}

// ValidArtifactName checks an artifact's name: 1..MaxArtifactNameLen
// bytes of UTF-8, one path element (no "/" or "\", not "." or ".."), no
// control characters, so a watcher can write it as a file name as is.
func ValidArtifactName(field, name string) error {
	switch {
	case name == "":
		return FieldErrorf(field, "required: the file name the artifact is fetched as")
	case len(name) > MaxArtifactNameLen:
		return FieldErrorf(field, "%d bytes, at most %d", len(name), MaxArtifactNameLen)
	case !utf8.ValidString(name):
		return FieldErrorf(field, "not valid UTF-8")
	case name == "." || name == ".." || strings.ContainsAny(name, `/\`):
		return FieldErrorf(field, "%q: one file name, without / or \\, not . or ..", name)
	case strings.IndexFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
		return FieldErrorf(field, "%q holds a control character", name)
	}
	return nil
}

// Artifact is an artifact's record: GET /v1/artifacts/{id}/info, the
// upload's answer, a list's entries.
type Artifact struct {
	// ID is "sha256:" and the hex SHA-256 of the bytes.
	ID string `json:"id"`
	// Name is the file name it is fetched as (the first upload's).
	Name        string `json:"name"`
	ContentType string `json:"content_type"`
	// Size is the length of the bytes.
	Size int64 `json:"size"`
	// From is the agent that uploaded it first; its quota counts it.
	From string `json:"from"`
	// Created is the time of the entry that recorded it.
	Created time.Time `json:"created"`
	// Index is the Raft index of that entry: lists page by it.
	Index uint64 `json:"index"`
	// Refs is how many stored messages name it in content.artifacts
	// (each message once); tasks do not count.
	Refs int64 `json:"refs"`
	// RefsIndexed is true for a record stored by a build that indexes the
	// messages naming it (artifact_refs), whose readers are its uploader
	// and the readers of those messages (CanReadArtifact). A record stored
	// before has no such index and is read by every token, as it was.
	RefsIndexed bool `json:"refs_indexed,omitempty"`
	// Existed is set in the answer of a put whose id was stored already
	// (nothing new stored).
	Existed bool `json:"existed,omitempty"`
	// Kept is set in the answer of a retention delete (Unreferenced) that
	// deleted nothing, and says why: "referenced by N messages", or "not
	// due until TIME" (artifact_retention_seconds after Created; "kept
	// forever" when it is 0). Never stored.
	Kept string `json:"kept,omitempty"`
}

// ArtifactPutCommand records an artifact whose bytes are held by a
// majority of the nodes.
type ArtifactPutCommand struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	ContentType string `json:"content_type"`
	Size        int64  `json:"size"`
	From        string `json:"from"`
}

// Validate checks the id, name, type, size and uploader, naming the field.
func (c *ArtifactPutCommand) Validate() error {
	switch {
	case !ValidArtifactID(c.ID):
		return ArtifactIDError("id", c.ID)
	case c.Size < 0:
		return FieldErrorf("size", "%d: must not be negative", c.Size)
	case !ValidName(c.From):
		return NameError("from", c.From)
	}
	if err := ValidArtifactName("name", c.Name); err != nil {
		return err
	}
	return validContentType(c.ContentType)
}

func validContentType(ct string) error {
	if len(ct) > MaxArtifactContentTypeLen {
		return FieldErrorf("content_type", "%d bytes, at most %d", len(ct), MaxArtifactContentTypeLen)
	}
	if _, _, err := mime.ParseMediaType(ct); err != nil {
		return FieldErrorf("content_type", "%q is not a media type (type/subtype): %v", ct, err)
	}
	return nil
}

// ArtifactDeleteCommand removes an artifact's record. By is who deletes
// it: an admin's agent (or "admin"), or SystemSender for retention.
type ArtifactDeleteCommand struct {
	ID string `json:"id"`
	By string `json:"by"`
	// Unreferenced, set by retention, makes the delete a no-op (the
	// answer's Kept says why) for an artifact that a message references
	// by the time it applies, or that is not due at the entry's time.
	Unreferenced bool `json:"unreferenced,omitempty"`
}

// Validate checks the id and who deletes it.
func (c *ArtifactDeleteCommand) Validate() error {
	switch {
	case !ValidArtifactID(c.ID):
		return ArtifactIDError("id", c.ID)
	case !ValidName(c.By):
		return NameError("by", c.By)
	}
	return nil
}

// ArtifactQuery selects artifacts: uploaded by From, named Name (exact),
// recorded after index After; Limit as for ChannelPage.
type ArtifactQuery struct {
	From  string
	Name  string
	After uint64
	Limit int
	// Viewer keeps the records it may read (CanReadArtifact); nil: all.
	Viewer *Viewer
}

// ArtifactRef is one entry of a message's content.artifacts: a plain
// string, as the seeds write them (a path under shared/context, kept as
// given, or an artifact id), or an object {"id", "name"} naming an
// artifact and the file name to fetch it as. A plain string encodes as a
// string, so messages without objects keep their bytes.
type ArtifactRef struct {
	// Ref is the string, or the object's id.
	Ref string
	// Name is the object's name; "" for a plain string.
	Name string
}

// ArtifactID is the artifact the entry names ("" for a path).
func (r ArtifactRef) ArtifactID() string {
	if ValidArtifactID(r.Ref) {
		return r.Ref
	}
	return ""
}

// String is the entry as one line: the ref, and " (name)" for an object.
func (r ArtifactRef) String() string {
	if r.Name != "" {
		return r.Ref + " (" + r.Name + ")"
	}
	return r.Ref
}

// MarshalJSON writes a plain string, or {"id","name"} when Name is set.
func (r ArtifactRef) MarshalJSON() ([]byte, error) {
	if r.Name == "" {
		return json.Marshal(r.Ref)
	}
	return json.Marshal(struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	}{r.Ref, r.Name})
}

// UnmarshalJSON reads a string or an object {"id", "name"} (unknown
// fields refused; the object's id must be an artifact id, checked by
// Message.Validate).
func (r *ArtifactRef) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		*r = ArtifactRef{}
		return json.Unmarshal(b, &r.Ref)
	}
	var o struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return fmt.Errorf("an artifact entry is a string or {\"id\", \"name\"}: %w", err)
	}
	if o.ID == "" {
		return errors.New(`an artifact object needs "id"`)
	}
	*r = ArtifactRef{Ref: o.ID, Name: o.Name}
	return nil
}

// ArtifactRefs makes plain-string entries of refs (paths or ids).
func ArtifactRefs(refs ...string) []ArtifactRef {
	out := make([]ArtifactRef, len(refs))
	for i, s := range refs {
		out[i] = ArtifactRef{Ref: s}
	}
	return out
}

// ArtifactStrings is refs as strings: each entry's Ref (a path or an id),
// for formats that hold strings only (the seeds' files).
func ArtifactStrings(refs []ArtifactRef) []string {
	if refs == nil {
		return nil
	}
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = r.Ref
	}
	return out
}

// Validate checks the filters: From an agent id, Name an artifact name,
// each when set (*FieldError naming "from" or "name").
func (q ArtifactQuery) Validate() error {
	if q.From != "" && !ValidName(q.From) {
		return NameError("from", q.From)
	}
	if q.Name != "" {
		return ValidArtifactName("name", q.Name)
	}
	return nil
}

// ArtifactPage is a page of artifacts in index order.
type ArtifactPage struct {
	Artifacts []*Artifact `json:"artifacts"`
	HasMore   bool        `json:"has_more"`
}

// ErrQuota: an artifact does not fit its uploader's quota (*QuotaError;
// the API answers 413).
var ErrQuota = errors.New("over quota")

// QuotaError is an artifact_put refused by the uploader's quota (the
// cluster setting artifact_quota_bytes): its words name the agent, the
// bytes it uses, the upload's size and the quota.
type QuotaError struct {
	Agent             string // the principal (Principal): an agent, whose forks it counts with it
	Used, Size, Quota int64
}

func (e *QuotaError) Error() string {
	return fmt.Sprintf("agent %s's artifacts (its forks' included) use %d bytes of its quota of %d (artifact_quota_bytes); this one (%d bytes) does not fit: delete some or raise the quota",
		e.Agent, e.Used, e.Quota, e.Size)
}

// Unwrap lets errors.Is(err, ErrQuota) match.
func (e *QuotaError) Unwrap() error { return ErrQuota }
