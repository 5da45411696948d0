package transport_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
	"github.com/maos-project/maos/transport/transporttest"
)

// The artifact routes end to end on one node: the bytes in the fake's
// blobstore (transporttest.Service is a one-node transport.Blobs), the
// records in its real state machine (artifact_put and artifact_delete
// applied as the cluster applies them).

type artifactEnv struct {
	svc *transporttest.Service
	url string
	c   *client.Client
}

// newArtifactEnv serves the artifact routes with opts; with opts.Auth set
// the state holds alice's and bob's agent tokens.
func newArtifactEnv(t *testing.T, opts transport.ServerOptions) *artifactEnv {
	t.Helper()
	svc := transporttest.New(t)
	for _, tok := range []struct{ id, agent, secret string }{{"tok-alice", "alice", aliceSecret}, {"tok-bob", "bob", bobSecret}} {
		if _, err := svc.ApplyCommand(api.OpCreateToken, api.CreateTokenCommand{ID: tok.id, Agent: tok.agent, Role: api.TokenRoleAgent, Hash: fsm.HashToken(tok.secret)}); err != nil {
			t.Fatal(err)
		}
	}
	opts.Blobs = svc
	srv := serve(t, svc, opts)
	c := client.NewClient(srv.URL, nil)
	if opts.Auth != nil {
		c = c.WithToken(opts.Auth.AdminToken)
	}
	return &artifactEnv{svc: svc, url: srv.URL, c: c}
}

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 17))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return api.ArtifactIDPrefix + hex.EncodeToString(s[:])
}

func apiStatus(err error) int {
	var apiErr *api.APIError
	if errors.As(err, &apiErr) {
		return apiErr.Status
	}
	return 0
}

func TestArtifactPutGetRoundTrip(t *testing.T) {
	e := newArtifactEnv(t, transport.ServerOptions{})
	ctx := context.Background()
	data := randomBytes(1<<20+17, 1)
	a, err := e.c.PutArtifact(ctx, bytes.NewReader(data), int64(len(data)), api.ArtifactUpload{Name: "report.bin", ContentType: "application/x-test", From: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if a.ID != sha(data) || a.Size != int64(len(data)) || a.Name != "report.bin" || a.ContentType != "application/x-test" || a.From != "alice" || a.Existed {
		t.Fatalf("PutArtifact = %+v", a)
	}
	// The same bytes again (chunked this time): the stored record.
	again, err := e.c.PutArtifact(ctx, bytes.NewReader(data), -1, api.ArtifactUpload{Name: "other.bin", From: "alice"})
	if err != nil || !again.Existed || again.ID != a.ID || again.Name != "report.bin" {
		t.Fatalf("re-put = %+v, %v; want the stored record, existed", again, err)
	}
	if l, _ := e.svc.BlobStore().List(); len(l) != 1 {
		t.Fatalf("store holds %d blobs, want 1", len(l))
	}

	var got bytes.Buffer
	if n, err := e.c.GetArtifact(ctx, a.ID, &got); err != nil || n != int64(len(data)) || !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("GetArtifact = %d, %v; identical %v", n, err, bytes.Equal(got.Bytes(), data))
	}
	if sha(got.Bytes()) != a.ID {
		t.Fatal("downloaded bytes do not hash to the id")
	}
	r, err := e.c.OpenArtifact(ctx, a.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, r)
	r.Close()
	if r.Name != "report.bin" || r.ContentType != "application/x-test" || r.Source != "local" || r.Size != int64(len(data)) {
		t.Fatalf("OpenArtifact = name %q type %q source %q size %d", r.Name, r.ContentType, r.Source, r.Size)
	}

	info, err := e.c.ArtifactInfo(ctx, a.ID, api.Strong)
	if err != nil || info.ID != a.ID || info.Size != a.Size {
		t.Fatalf("ArtifactInfo = %+v, %v", info, err)
	}
	if calls := e.svc.CallsTo("Linearize"); len(calls) == 0 || calls[len(calls)-1].Cons != api.Strong {
		t.Fatalf("info read at %v, want strong", calls)
	}
}

func TestArtifactList(t *testing.T) {
	e := newArtifactEnv(t, transport.ServerOptions{})
	ctx := context.Background()
	var ids []string
	for i, from := range []string{"alice", "bob", "alice"} {
		a, err := e.c.PutArtifact(ctx, strings.NewReader(strings.Repeat("x", i+1)), -1, api.ArtifactUpload{Name: "f" + from, From: from})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, a.ID)
	}
	page, err := e.c.Artifacts(ctx, api.ArtifactQuery{From: "alice"}, api.Local)
	if err != nil || len(page.Artifacts) != 2 || page.Artifacts[0].ID != ids[0] || page.Artifacts[1].ID != ids[2] {
		t.Fatalf("Artifacts(from alice) = %+v, %v", page, err)
	}
	page, err = e.c.Artifacts(ctx, api.ArtifactQuery{Limit: 1, After: page.Artifacts[0].Index}, api.Local)
	if err != nil || len(page.Artifacts) != 1 || page.Artifacts[0].ID != ids[1] || !page.HasMore {
		t.Fatalf("Artifacts(after first, limit 1) = %+v, %v", page, err)
	}
	if rep := do(t, "GET", e.url+"/v1/artifacts?owner=alice", "", nil); rep.status != http.StatusBadRequest {
		t.Fatalf("unknown parameter: %d %s", rep.status, rep.body)
	}
}

// A declared body over --max-artifact-bytes is refused before a byte is
// read; a chunked one as it streams. Neither leaves a blob.
func TestArtifactTooLarge(t *testing.T) {
	e := newArtifactEnv(t, transport.ServerOptions{Limits: transport.Limits{MaxArtifactBytes: 1000}})
	ctx := context.Background()
	_, err := e.c.PutArtifact(ctx, bytes.NewReader(make([]byte, 1001)), 1001, api.ArtifactUpload{Name: "big", From: "alice"})
	if !errors.Is(err, api.ErrTooLarge) || apiStatus(err) != 413 || !strings.Contains(err.Error(), "--max-artifact-bytes") || !strings.Contains(err.Error(), "1000") {
		t.Fatalf("declared 1001 bytes = %v, want 413 naming --max-artifact-bytes and 1000", err)
	}
	if n := len(e.svc.CallsTo("StoreBlob")); n != 0 {
		t.Fatalf("StoreBlob called %d times for a body refused unread", n)
	}
	_, err = e.c.PutArtifact(ctx, bytes.NewReader(make([]byte, 5000)), -1, api.ArtifactUpload{Name: "big", From: "alice"})
	if apiStatus(err) != 413 || !strings.Contains(err.Error(), "--max-artifact-bytes") {
		t.Fatalf("chunked 5000 bytes = %v, want 413 naming --max-artifact-bytes", err)
	}
	if l, _ := e.svc.BlobStore().List(); len(l) != 0 {
		t.Fatalf("a refused upload left blobs: %v", l)
	}
	if _, err := e.c.PutArtifact(ctx, bytes.NewReader(make([]byte, 1000)), 1000, api.ArtifactUpload{Name: "fits", From: "alice"}); err != nil {
		t.Fatalf("1000 bytes (the limit): %v", err)
	}
}

// The uploader's quota (the cluster setting artifact_quota_bytes) is
// checked before the body is read (and again by apply).
func TestArtifactQuota(t *testing.T) {
	e := newArtifactEnv(t, transport.ServerOptions{})
	if _, err := e.svc.ApplyCommand(api.OpSetConfig, api.SetConfigCommand{Key: "artifact_quota_bytes", Value: json.RawMessage("100")}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err := e.c.PutArtifact(ctx, bytes.NewReader(make([]byte, 101)), 101, api.ArtifactUpload{Name: "q", From: "alice"})
	if apiStatus(err) != 413 || !strings.Contains(err.Error(), "artifact_quota_bytes") {
		t.Fatalf("over quota = %v, want 413 naming artifact_quota_bytes", err)
	}
	if n := len(e.svc.CallsTo("StoreBlob")); n != 0 {
		t.Fatalf("StoreBlob called %d times for an upload over quota", n)
	}
	// Chunked: the size is known after the store; the record is refused.
	_, err = e.c.PutArtifact(ctx, bytes.NewReader(make([]byte, 101)), -1, api.ArtifactUpload{Name: "q", From: "alice"})
	if apiStatus(err) != 413 || !strings.Contains(err.Error(), "artifact_quota_bytes") {
		t.Fatalf("chunked over quota = %v, want 413", err)
	}
	// The quota is per uploader: alice's 60 bytes leave her 40, and bob
	// his 100.
	if _, err := e.c.PutArtifact(ctx, bytes.NewReader(make([]byte, 60)), 60, api.ArtifactUpload{Name: "q", From: "alice"}); err != nil {
		t.Fatalf("60 bytes within quota: %v", err)
	}
	if _, err := e.c.PutArtifact(ctx, bytes.NewReader(randomBytes(41, 4)), 41, api.ArtifactUpload{Name: "q", From: "alice"}); apiStatus(err) != 413 {
		t.Fatalf("41 more bytes for alice = %v, want 413", err)
	}
	if _, err := e.c.PutArtifact(ctx, bytes.NewReader(randomBytes(100, 5)), 100, api.ArtifactUpload{Name: "q", From: "bob"}); err != nil {
		t.Fatalf("bob's 100 bytes: %v", err)
	}
}

// Quotas and limits count a principal, not a name: alice's token acts as
// alice-fork-1 … alice-fork-9999, and each fork's upload counts against
// alice's one quota (checked before the body is read, and by apply), and
// every upload draws on alice's one send bucket.
func TestArtifactQuotaAndRatePerPrincipal(t *testing.T) {
	e := newArtifactEnv(t, transport.ServerOptions{Auth: &transport.AuthConfig{AdminToken: adminSecret},
		Limits: transport.Limits{SendRate: 0.001, SendBurst: 3}})
	if _, err := e.svc.ApplyCommand(api.OpSetConfig, api.SetConfigCommand{Key: "artifact_quota_bytes", Value: json.RawMessage("100")}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	alice := client.NewClient(e.url, nil).WithToken(aliceSecret)
	if _, err := alice.PutArtifact(ctx, bytes.NewReader(randomBytes(60, 6)), 60, api.ArtifactUpload{Name: "a", From: "alice-fork-1"}); err != nil {
		t.Fatalf("alice-fork-1's 60 bytes: %v", err)
	}
	for _, chunked := range []bool{false, true} {
		size := int64(41)
		if chunked {
			size = -1
		}
		_, err := alice.PutArtifact(ctx, bytes.NewReader(randomBytes(41, 7)), size, api.ArtifactUpload{Name: "b", From: "alice-fork-2"})
		if apiStatus(err) != 413 || !strings.Contains(err.Error(), "agent alice's artifacts (its forks' included) use 60 bytes") {
			t.Fatalf("alice-fork-2's 41 more bytes (chunked %t) = %v, want 413 counting alice's 60", chunked, err)
		}
	}
	used, _, err := e.svc.State().ArtifactUsage("alice-fork-3")
	if err != nil || used != 60 {
		t.Fatalf("usage of alice-fork-3 = %d (%v), want alice's 60", used, err)
	}
	// The three uploads so far took alice's burst of 3, whichever fork
	// made them: a fourth, as another fork, waits for the bucket.
	_, err = alice.PutArtifact(ctx, bytes.NewReader(randomBytes(10, 8)), 10, api.ArtifactUpload{Name: "c", From: "alice-fork-9"})
	if apiStatus(err) != http.StatusTooManyRequests || !strings.Contains(err.Error(), "agent alice over its send rate") {
		t.Fatalf("a fourth upload = %v, want 429 naming alice's send rate", err)
	}
	if n := len(e.svc.CallsTo("StoreBlob")); n != 2 {
		t.Errorf("StoreBlob called %d times, want 2 (the chunked refusal is stored, then refused; the others never read)", n)
	}
}

func TestArtifactPutRefusals(t *testing.T) {
	e := newArtifactEnv(t, transport.ServerOptions{})
	for _, tc := range []struct {
		name, query, ctype, field string
	}{
		{"name missing", "from=alice", "", "name"},
		{"name with a slash", "from=alice&name=a%2Fb", "", "name"},
		{"from missing without auth", "name=x", "", "from"},
		{"bad content type", "from=alice&name=x", "not a type", "content_type"},
	} {
		h := http.Header{}
		if tc.ctype != "" {
			h.Set("Content-Type", tc.ctype)
		}
		rep := do(t, "PUT", e.url+"/v1/artifacts?"+tc.query, "bytes", h)
		code, msg := errorOf(t, rep.body)
		if rep.status != http.StatusBadRequest || code != api.CodeInvalid || !strings.Contains(msg, tc.field) {
			t.Errorf("%s: %d %s %q, want 400 invalid naming %s", tc.name, rep.status, code, msg, tc.field)
		}
	}
	if n := len(e.svc.CallsTo("StoreBlob")); n != 0 {
		t.Fatalf("StoreBlob called %d times for refused uploads", n)
	}
}

// With --auth a token uploads as its own agent (the default) and no other.
func TestArtifactPutImpersonation(t *testing.T) {
	e := newArtifactEnv(t, transport.ServerOptions{Auth: &transport.AuthConfig{AdminToken: adminSecret}})
	ctx := context.Background()
	alice := client.NewClient(e.url, nil).WithToken(aliceSecret)
	_, err := alice.PutArtifact(ctx, strings.NewReader("mine"), 4, api.ArtifactUpload{Name: "n", From: "bob"})
	if apiStatus(err) != 403 || !errors.Is(err, api.ErrForbidden) {
		t.Fatalf("alice uploading as bob = %v, want 403", err)
	}
	a, err := alice.PutArtifact(ctx, strings.NewReader("mine"), 4, api.ArtifactUpload{Name: "n"})
	if err != nil || a.From != "alice" {
		t.Fatalf("alice uploading as herself (default) = %+v, %v", a, err)
	}
	// The admin token has no agent: it names one.
	if _, err := e.c.PutArtifact(ctx, strings.NewReader("x"), 1, api.ArtifactUpload{Name: "n"}); apiStatus(err) != 400 || !strings.Contains(err.Error(), "from") {
		t.Fatalf("admin without from = %v, want 400 naming from", err)
	}
	if _, err := e.c.PutArtifact(ctx, strings.NewReader("x"), 1, api.ArtifactUpload{Name: "n", From: "bob"}); err != nil {
		t.Fatalf("admin uploading as bob: %v", err)
	}
	// Only an admin deletes, and only nodes (admin tokens) push and fetch blobs.
	if _, err := alice.DeleteArtifact(ctx, a.ID); apiStatus(err) != 403 {
		t.Fatalf("alice deleting = %v, want 403", err)
	}
	if err := alice.PushBlob(ctx, sha([]byte("y")), strings.NewReader("y"), 1); apiStatus(err) != 403 {
		t.Fatalf("alice pushing a blob = %v, want 403", err)
	}
	if _, err := alice.FetchBlob(ctx, a.ID); apiStatus(err) != 403 {
		t.Fatalf("alice fetching a blob = %v, want 403", err)
	}
	if rep := do(t, "GET", e.url+"/v1/artifacts/"+a.ID, "", nil); rep.status != http.StatusUnauthorized {
		t.Fatalf("download without a token: %d", rep.status)
	}
}

func TestArtifactGetUnknown(t *testing.T) {
	e := newArtifactEnv(t, transport.ServerOptions{})
	ctx := context.Background()
	unknown := sha([]byte("never uploaded"))
	if _, err := e.c.OpenArtifact(ctx, unknown, 0); !errors.Is(err, api.ErrNotFound) || apiStatus(err) != 404 {
		t.Fatalf("unknown id = %v, want 404", err)
	}
	if _, err := e.c.ArtifactInfo(ctx, unknown, api.Local); apiStatus(err) != 404 {
		t.Fatalf("info of unknown id = %v, want 404", err)
	}
	if _, err := e.c.OpenArtifact(ctx, "sha256:short", 0); apiStatus(err) != 400 {
		t.Fatalf("malformed id = %v, want 400", err)
	}
}

func TestArtifactRangeHeadETag(t *testing.T) {
	e := newArtifactEnv(t, transport.ServerOptions{})
	ctx := context.Background()
	data := randomBytes(10000, 2)
	a, err := e.c.PutArtifact(ctx, bytes.NewReader(data), int64(len(data)), api.ArtifactUpload{Name: "ränge file.bin", From: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	// The client's resume: the rest from an offset.
	r, err := e.c.OpenArtifact(ctx, a.ID, 4000)
	if err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(r)
	r.Close()
	if err != nil || !bytes.Equal(rest, data[4000:]) || r.Name != "ränge file.bin" {
		t.Fatalf("OpenArtifact(offset 4000): %d bytes, %v, name %q", len(rest), err, r.Name)
	}
	rep := do(t, "GET", e.url+"/v1/artifacts/"+a.ID, "", http.Header{"Range": {"bytes=10-19"}})
	if rep.status != http.StatusPartialContent || !bytes.Equal(rep.body, data[10:20]) || rep.header.Get("Content-Range") != "bytes 10-19/10000" {
		t.Fatalf("Range 10-19: %d %q %q", rep.status, rep.header.Get("Content-Range"), rep.body)
	}
	head := do(t, "HEAD", e.url+"/v1/artifacts/"+a.ID, "", nil)
	if head.status != 200 || len(head.body) != 0 || head.header.Get("Content-Length") != "10000" ||
		head.header.Get("ETag") != `"`+a.ID+`"` || head.header.Get(client.HeaderArtifactSource) != "local" ||
		!strings.HasPrefix(head.header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("HEAD: %d %v (%d body bytes)", head.status, head.header, len(head.body))
	}
	if rep := do(t, "GET", e.url+"/v1/artifacts/"+a.ID, "", http.Header{"If-None-Match": {`"` + a.ID + `"`}}); rep.status != http.StatusNotModified {
		t.Fatalf("If-None-Match: %d, want 304", rep.status)
	}
}

// A damaged copy is never served: with no peer to ask, the node answers
// 404 rather than bytes that are not the artifact.
func TestArtifactDamagedNotServed(t *testing.T) {
	e := newArtifactEnv(t, transport.ServerOptions{})
	ctx := context.Background()
	a, err := e.c.PutArtifact(ctx, strings.NewReader("precious bytes"), -1, api.ArtifactUpload{Name: "p", From: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	p := e.svc.BlobStore().Path(a.ID)
	if err := os.WriteFile(p, []byte("precious bytez"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.OpenArtifact(ctx, a.ID, 0); apiStatus(err) != 404 {
		t.Fatalf("damaged copy = %v, want 404", err)
	}
	if _, err := e.c.FetchBlob(ctx, a.ID); apiStatus(err) != 404 {
		t.Fatalf("internal fetch of a damaged copy = %v, want 404", err)
	}
	// A good push replaces it.
	if err := e.c.PushBlob(ctx, a.ID, strings.NewReader("precious bytes"), 14); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if _, err := e.c.GetArtifact(ctx, a.ID, &got); err != nil || got.String() != "precious bytes" {
		t.Fatalf("after a good push: %q, %v", got.String(), err)
	}
}

func TestInternalBlobs(t *testing.T) {
	e := newArtifactEnv(t, transport.ServerOptions{})
	ctx := context.Background()
	data := randomBytes(3000, 3)
	if err := e.c.PushBlob(ctx, sha(data), bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	r, err := e.c.FetchBlob(ctx, sha(data))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("FetchBlob: %d bytes, %v", len(got), err)
	}
	other := sha([]byte("other"))
	if err := e.c.PushBlob(ctx, other, bytes.NewReader(data), int64(len(data))); apiStatus(err) != 400 {
		t.Fatalf("push under the wrong id = %v, want 400", err)
	}
	if e.svc.BlobStore().Has(other) {
		t.Fatal("mismatched push kept")
	}
	if _, err := e.c.FetchBlob(ctx, other); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("fetch of a blob not held = %v, want not found", err)
	}
}

func TestArtifactDelete(t *testing.T) {
	e := newArtifactEnv(t, transport.ServerOptions{Auth: &transport.AuthConfig{AdminToken: adminSecret}})
	ctx := context.Background()
	a, err := e.c.PutArtifact(ctx, strings.NewReader("gone soon"), -1, api.ArtifactUpload{Name: "g", From: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := e.c.DeleteArtifact(ctx, a.ID)
	if err != nil || rec.ID != a.ID {
		t.Fatalf("DeleteArtifact = %+v, %v", rec, err)
	}
	cmd, _ := proposed[api.ArtifactDeleteCommand](t, e.svc, api.OpArtifactDelete)
	if cmd.By != "admin" || cmd.ID != a.ID || cmd.Unreferenced {
		t.Fatalf("proposed %+v, want by admin", cmd)
	}
	if _, err := e.c.ArtifactInfo(ctx, a.ID, api.Local); apiStatus(err) != 404 {
		t.Fatalf("info after delete = %v, want 404", err)
	}
}

// Without Blobs the artifact byte routes say why they cannot serve.
func TestArtifactRoutesWithoutBlobs(t *testing.T) {
	srv := serve(t, transporttest.New(t), transport.ServerOptions{})
	c := client.NewClient(srv.URL, nil)
	_, err := c.PutArtifact(context.Background(), strings.NewReader("x"), 1, api.ArtifactUpload{Name: "n", From: "alice"})
	if apiStatus(err) != 503 || !strings.Contains(err.Error(), "Blobs") {
		t.Fatalf("PUT without Blobs = %v, want 503 saying why", err)
	}
}

func TestLimitsMaxArtifactBytes(t *testing.T) {
	for _, v := range []int64{-1, transport.MaxArtifactBytesCeiling + 1} {
		var fe *api.FieldError
		if err := (transport.Limits{MaxArtifactBytes: v}).Validate(); !errors.As(err, &fe) || fe.Field != "MaxArtifactBytes" {
			t.Errorf("Validate(MaxArtifactBytes %d) = %v, want a FieldError naming it", v, err)
		}
	}
	if err := (transport.Limits{MaxArtifactBytes: transport.MaxArtifactBytesCeiling}).Validate(); err != nil {
		t.Errorf("the ceiling: %v", err)
	}
}

// An artifact's readers are its uploader and the readers of the messages
// that name it: one attached to a private message is not found for anyone
// else (its bytes, its record, its line in a list), and nobody can make it
// readable by naming it without reading it. A reply to a message its
// sender may not read learns nothing of it: not its thread, not its
// visibility.
func TestArtifactReadersAndHiddenParents(t *testing.T) {
	e := newArtifactEnv(t, transport.ServerOptions{Auth: &transport.AuthConfig{AdminToken: adminSecret}})
	for _, tok := range []struct{ id, agent, role, secret string }{
		{"tok-carol", "carol", api.TokenRoleAgent, "maos_carol-0123456789"},
		{"tok-rex", "rex", api.TokenRoleModerator, rexSecret},
	} {
		if _, err := e.svc.ApplyCommand(api.OpCreateToken, api.CreateTokenCommand{ID: tok.id, Agent: tok.agent, Role: tok.role, Hash: fsm.HashToken(tok.secret)}); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	as := func(secret string) *client.Client { return client.NewClient(e.url, nil).WithToken(secret) }
	alice, bob, carol, rex := as(aliceSecret), as(bobSecret), as("maos_carol-0123456789"), as(rexSecret)
	data := randomBytes(100, 9)
	art, err := alice.PutArtifact(ctx, bytes.NewReader(data), int64(len(data)), api.ArtifactUpload{Name: "plan.txt"})
	if err != nil {
		t.Fatal(err)
	}
	send := func(cl *client.Client, m *api.Message) error {
		_, err := cl.Send(ctx, m)
		return err
	}
	root := &api.Message{ID: "msg-20261129-040000-alice-00000001", From: "alice", To: api.Recipients{"bob"}, Channel: "dev",
		Visibility: api.VisibilityPrivate, Content: api.Content{Text: "the plan", Artifacts: api.ArtifactRefs(art.ID)}}
	if err := send(alice, root); err != nil {
		t.Fatal(err)
	}
	reads := func(cl *client.Client) bool {
		t.Helper()
		_, infoErr := cl.ArtifactInfo(ctx, art.ID, api.Strong)
		var buf bytes.Buffer
		_, getErr := cl.GetArtifact(ctx, art.ID, &buf)
		page, listErr := cl.Artifacts(ctx, api.ArtifactQuery{}, api.Strong)
		if listErr != nil {
			t.Fatal(listErr)
		}
		listed := len(page.Artifacts) == 1 && page.Artifacts[0].ID == art.ID
		if (infoErr == nil) != (getErr == nil) || (infoErr == nil) != listed {
			t.Fatalf("info %v, get %v, listed %t: the routes disagree", infoErr, getErr, listed)
		}
		if infoErr != nil && (apiStatus(infoErr) != 404 || apiStatus(getErr) != 404 || !strings.Contains(infoErr.Error(), "artifact "+art.ID+": not found")) {
			t.Fatalf("a hidden artifact: info %v, get %v, want 404 not found", infoErr, getErr)
		}
		if getErr == nil && !bytes.Equal(buf.Bytes(), data) {
			t.Fatalf("read %d bytes, not the artifact's", buf.Len())
		}
		return infoErr == nil
	}
	for name, tc := range map[string]struct {
		cl   *client.Client
		want bool
	}{"alice (uploader)": {alice, true}, "bob (reader of the private message)": {bob, true}, "rex (moderator)": {rex, true}, "carol": {carol, false}} {
		if got := reads(tc.cl); got != tc.want {
			t.Errorf("%s reads the artifact of a private message: %t, want %t", name, got, tc.want)
		}
	}

	// Naming it needs reading it: carol cannot publish what she cannot
	// read, and the refusal is the unknown id's.
	leak := &api.Message{ID: "msg-20261129-040000-carol-00000002", From: "carol", To: api.Recipients{"all"}, Channel: "dev",
		Content: api.Content{Text: "look", Artifacts: api.ArtifactRefs(art.ID)}}
	if err := send(carol, leak); apiStatus(err) != 400 || !strings.Contains(err.Error(), "content.artifacts[0]: no artifact "+art.ID) {
		t.Fatalf("carol naming a hidden artifact = %v, want 400 as for an unknown one", err)
	}
	if reads(carol) {
		t.Fatal("carol reads the artifact after a refused send")
	}

	// A reply to a hidden message: bob answers alice's private root (thread
	// root), then carol replies to bob's answer, which she cannot read.
	answer := &api.Message{ID: "msg-20261129-040000-bob-00000003", From: "bob", To: api.Recipients{"alice"}, Channel: "dev",
		InReplyTo: root.ID, Content: api.Content{Text: "ok"}}
	if err := send(bob, answer); err != nil {
		t.Fatal(err)
	}
	if m, err := bob.Message(ctx, answer.ID, api.Strong); err != nil || m.ThreadID != root.ID || m.Visibility != api.VisibilityPrivate {
		t.Fatalf("bob's answer %+v (%v): want private in alice's thread", m, err)
	}
	probe := &api.Message{ID: "msg-20261129-040000-carol-00000004", From: "carol", To: api.Recipients{"bob"}, Channel: "dev",
		InReplyTo: answer.ID, Content: api.Content{Text: "what?"}}
	unknown := &api.Message{ID: "msg-20261129-040000-carol-00000005", From: "carol", To: api.Recipients{"bob"}, Channel: "dev",
		InReplyTo: "msg-20261129-040000-bob-0000ffff", Content: api.Content{Text: "what?"}}
	for _, m := range []*api.Message{probe, unknown} {
		if err := send(carol, m); err != nil {
			t.Fatal(err)
		}
	}
	got, err := carol.Message(ctx, probe.ID, api.Strong)
	if err != nil {
		t.Fatal(err)
	}
	control, err := carol.Message(ctx, unknown.ID, api.Strong)
	if err != nil {
		t.Fatal(err)
	}
	if got.ThreadID != answer.ID || got.Visibility != control.Visibility || control.ThreadID != unknown.InReplyTo {
		t.Errorf("carol's reply to a hidden message: thread %q visibility %q; to an unknown id: thread %q visibility %q; "+
			"want the hidden one's id as thread (not its root %s) and the same visibility", got.ThreadID, got.Visibility, control.ThreadID, control.Visibility, root.ID)
	}

	// Named in a public message by one who reads it, its readers are
	// everyone's.
	share := &api.Message{ID: "msg-20261129-040000-bob-00000006", From: "bob", To: api.Recipients{"carol"}, Channel: "dev",
		Content: api.Content{Text: "here", Artifacts: api.ArtifactRefs(art.ID)}}
	if err := send(bob, share); err != nil {
		t.Fatal(err)
	}
	if !reads(carol) {
		t.Error("carol does not read the artifact bob shared with her in a public message")
	}
}

// A record this node has not applied is read again after a strong read
// before the answer is 404: an artifact uploaded through one node and read
// through another at once is found (its bytes are there before its record).
func TestArtifactNotFoundAfterAStrongRead(t *testing.T) {
	e := newArtifactEnv(t, transport.ServerOptions{})
	missing := api.ArtifactIDPrefix + strings.Repeat("ab", 32)
	before := len(e.svc.CallsTo("Linearize"))
	wantError(t, do(t, "GET", e.url+"/v1/artifacts/"+missing+"/info", "", nil), http.StatusNotFound, api.CodeNotFound)
	var cons []api.Consistency
	for _, c := range e.svc.CallsTo("Linearize")[before:] {
		cons = append(cons, c.Cons)
	}
	if !slices.Contains(cons, api.Strong) {
		t.Errorf("a local read's 404 came without a strong read first (reads %v)", cons)
	}
}

// TestArtifactOutputsReadByTheTaskCreator: a task's creator reads the
// artifacts its completion names as outputs, uploaded by its claimant,
// with a plain agent token (A2A shows them as URLs); a stranger does not,
// and a claimant naming an artifact someone else uploaded hands nothing
// over.
func TestArtifactOutputsReadByTheTaskCreator(t *testing.T) {
	e := newArtifactEnv(t, transport.ServerOptions{Auth: &transport.AuthConfig{AdminToken: adminSecret}})
	const carolSecret = "maos_carol-0123456789"
	if _, err := e.svc.ApplyCommand(api.OpCreateToken, api.CreateTokenCommand{ID: "tok-carol", Agent: "carol", Role: api.TokenRoleAgent, Hash: fsm.HashToken(carolSecret)}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	as := func(secret string) *client.Client { return client.NewClient(e.url, nil).WithToken(secret) }
	alice, bob, carol := as(aliceSecret), as(bobSecret), as(carolSecret)
	put := func(cl *client.Client, seed uint64) api.Artifact {
		data := randomBytes(64, seed)
		a, err := cl.PutArtifact(ctx, bytes.NewReader(data), int64(len(data)), api.ArtifactUpload{Name: "out.txt"})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	reads := func(cl *client.Client, id string) bool {
		t.Helper()
		var buf bytes.Buffer
		_, getErr := cl.GetArtifact(ctx, id, &buf)
		_, infoErr := cl.ArtifactInfo(ctx, id, api.Strong)
		if (getErr == nil) != (infoErr == nil) {
			t.Fatalf("get %v, info %v: the routes disagree", getErr, infoErr)
		}
		if getErr != nil && apiStatus(getErr) != 404 {
			t.Fatalf("get %s = %v, want 200 or 404", id, getErr)
		}
		return getErr == nil
	}
	if _, err := alice.CreateTask(ctx, api.TaskCreateCommand{ID: "t-out", From: "alice", To: "bob", Title: "make it"}); err != nil {
		t.Fatal(err)
	}
	claim, err := bob.ClaimTask(ctx, "t-out", "bob")
	if err != nil {
		t.Fatal(err)
	}
	mine, theirs := put(bob, 1), put(carol, 2)
	if reads(alice, mine.ID) {
		t.Fatal("alice reads bob's artifact before any completion names it")
	}
	if _, err := bob.CompleteTask(ctx, api.TaskCompleteCommand{ID: "t-out", Agent: "bob", Fence: claim.Fence,
		Completion: api.TaskCompletion{Status: api.TaskStatusSuccess, Outputs: []string{mine.ID, theirs.ID}}}); err != nil {
		t.Fatal(err)
	}
	if !reads(alice, mine.ID) {
		t.Error("alice, the task's creator, does not read the output its claimant uploaded")
	}
	if reads(alice, theirs.ID) {
		t.Error("alice reads carol's artifact because bob named it as an output")
	}
	if reads(carol, mine.ID) {
		t.Error("carol, a stranger to the task, reads its output")
	}
}
