package fsm

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
)

// artID is the artifact id made of 64 copies of hex digit c.
func artID(c byte) string { return api.ArtifactIDPrefix + strings.Repeat(string(c), 64) }

func artPut(c byte, name string, size int64, from string) api.ArtifactPutCommand {
	return api.ArtifactPutCommand{ID: artID(c), Name: name, ContentType: "text/plain", Size: size, From: from}
}

// putArt applies an artifact_put that must succeed.
func (b *mbox) putArt(c api.ArtifactPutCommand) *api.Artifact {
	b.t.Helper()
	a, ok := b.ok(api.OpArtifactPut, c).(*api.Artifact)
	if !ok {
		b.t.Fatalf("artifact_put %s: result is not an *Artifact", c.ID)
	}
	return a
}

// setConfig applies a set_config that must succeed.
func (b *mbox) setConfig(key, value string) {
	b.t.Helper()
	b.ok(api.OpSetConfig, api.SetConfigCommand{Key: key, Value: json.RawMessage(value)})
}

// art is the stored record of id; nil when none.
func (b *mbox) art(id string) *api.Artifact {
	b.t.Helper()
	a, err := b.f.Artifact(id)
	if errors.Is(err, api.ErrNotFound) {
		return nil
	}
	if err != nil {
		b.t.Fatalf("Artifact(%s): %v", id, err)
	}
	return a
}

func (b *mbox) usage(agent string) int64 {
	b.t.Helper()
	used, _, err := b.f.ArtifactUsage(agent)
	if err != nil {
		b.t.Fatal(err)
	}
	return used
}

// msgWith is a message from alice to bob naming refs in content.artifacts.
func (b *mbox) msgWith(channel string, refs ...api.ArtifactRef) api.Message {
	m := b.msg("alice", "see attached", "bob")
	m.Channel, m.Content.Artifacts = channel, refs
	return m
}

// Every refusal of artifact_put names its field and writes nothing.
func TestArtifactPutRefusals(t *testing.T) {
	b := newMbox(t)
	b.register("bob", "engineer")
	good := artPut('a', "plan.md", 10, "alice")
	for _, tc := range []struct {
		name, field, words string
		edit               func(c *api.ArtifactPutCommand)
	}{
		{"no prefix", "id", "not an artifact id", func(c *api.ArtifactPutCommand) { c.ID = strings.Repeat("a", 64) }},
		{"upper-case hex", "id", "not an artifact id", func(c *api.ArtifactPutCommand) { c.ID = api.ArtifactIDPrefix + strings.Repeat("A", 64) }},
		{"short", "id", "not an artifact id", func(c *api.ArtifactPutCommand) { c.ID = api.ArtifactIDPrefix + "abc" }},
		{"no name", "name", "required", func(c *api.ArtifactPutCommand) { c.Name = "" }},
		{"a path", "name", "one file name", func(c *api.ArtifactPutCommand) { c.Name = "dir/plan.md" }},
		{"dot dot", "name", "one file name", func(c *api.ArtifactPutCommand) { c.Name = ".." }},
		{"control", "name", "control character", func(c *api.ArtifactPutCommand) { c.Name = "a\nb" }},
		{"long name", "name", "at most 255", func(c *api.ArtifactPutCommand) { c.Name = strings.Repeat("n", api.MaxArtifactNameLen+1) }},
		{"no type", "content_type", "not a media type", func(c *api.ArtifactPutCommand) { c.ContentType = "" }},
		{"bad type", "content_type", "not a media type", func(c *api.ArtifactPutCommand) { c.ContentType = "plain text" }},
		{"negative size", "size", "must not be negative", func(c *api.ArtifactPutCommand) { c.Size = -1 }},
		{"bad from", "from", "must match", func(c *api.ArtifactPutCommand) { c.From = "Alice" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := dataDump(t, b.f)
			c := good
			tc.edit(&c)
			err := mustError(t, b.apply(api.OpArtifactPut, c))
			var fe *api.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(fe.Reason, tc.words) {
				t.Errorf("err = %v, want a field error on %s with %q", err, tc.field, tc.words)
			}
			if !strings.HasPrefix(err.Error(), "fsm: apply artifact_put: ") {
				t.Errorf("err = %q, want it wrapped with the op", err)
			}
			if dataDump(t, b.f) != before {
				t.Errorf("a refused put changed the state")
			}
		})
	}
	if b.art(good.ID) != nil || b.usage("alice") != 0 {
		t.Errorf("refused puts stored something")
	}
}

// A put answers the record it stored: entry time and index, no refs, its
// references indexed (its readers are decided by them).
func TestArtifactPutStores(t *testing.T) {
	b := newMbox(t)
	a := b.putArt(artPut('a', "plan.md", 42, "alice"))
	want := api.Artifact{ID: artID('a'), Name: "plan.md", ContentType: "text/plain", Size: 42, From: "alice",
		Created: time.Unix(0, b.ts).UTC(), Index: b.idx, RefsIndexed: true}
	if *a != want {
		t.Errorf("put answered %+v, want %+v", *a, want)
	}
	if got := b.art(artID('a')); got == nil || *got != want {
		t.Errorf("Artifact = %+v, want %+v", got, want)
	}
	if used, quota, _ := b.f.ArtifactUsage("alice"); used != 42 || quota != api.DefaultArtifactQuota {
		t.Errorf("usage = %d of %d, want 42 of %d", used, quota, api.DefaultArtifactQuota)
	}
}

// A re-upload answers the stored record, Existed, and stores nothing:
// no second charge, the first name and uploader kept.
func TestArtifactPutIdempotent(t *testing.T) {
	b := newMbox(t)
	first := b.putArt(artPut('a', "plan.md", 100, "alice"))
	before := dataDump(t, b.f)
	again := b.putArt(api.ArtifactPutCommand{ID: artID('a'), Name: "other.md", ContentType: "text/markdown", Size: 100, From: "bob"})
	if !again.Existed || again.Name != "plan.md" || again.From != "alice" || again.Index != first.Index || !again.Created.Equal(first.Created) {
		t.Errorf("re-upload answered %+v, want the first record with Existed", again)
	}
	if dataDump(t, b.f) != before {
		t.Errorf("a re-upload changed the state")
	}
	if b.usage("bob") != 0 || b.usage("alice") != 100 {
		t.Errorf("usage alice %d bob %d, want 100 and 0", b.usage("alice"), b.usage("bob"))
	}
	if a := b.art(artID('a')); a.Existed {
		t.Errorf("Existed was stored: %+v", a)
	}
}

// The quota counts per uploader; a put beyond it is a *QuotaError that
// writes nothing; 0 is no quota; unset is the default.
func TestArtifactQuota(t *testing.T) {
	b := newMbox(t)
	if err := mustError(t, b.apply(api.OpArtifactPut, artPut('f', "big", api.DefaultArtifactQuota+1, "alice"))); !errors.Is(err, api.ErrQuota) {
		t.Errorf("a put over the default quota: %v, want ErrQuota", err)
	}
	b.setConfig("artifact_quota_bytes", "1000")
	b.putArt(artPut('a', "a", 600, "alice"))
	before := dataDump(t, b.f)
	err := mustError(t, b.apply(api.OpArtifactPut, artPut('b', "b", 401, "alice")))
	var qe *api.QuotaError
	if !errors.As(err, &qe) || !errors.Is(err, api.ErrQuota) || *qe != (api.QuotaError{Agent: "alice", Used: 600, Size: 401, Quota: 1000}) {
		t.Fatalf("over quota: %v, want a *QuotaError for alice 600+401 of 1000", err)
	}
	if want := "fsm: apply artifact_put: agent alice's artifacts (its forks' included) use 600 bytes of its quota of 1000 (artifact_quota_bytes); this one (401 bytes) does not fit: delete some or raise the quota"; err.Error() != want {
		t.Errorf("err = %q\nwant  %q", err, want)
	}
	if dataDump(t, b.f) != before || b.art(artID('b')) != nil {
		t.Errorf("a put refused by the quota wrote something")
	}
	b.putArt(artPut('b', "b", 400, "alice")) // fits exactly
	b.putArt(artPut('c', "c", 1000, "bob"))  // bob's own quota
	if b.usage("alice") != 1000 || b.usage("bob") != 1000 {
		t.Errorf("usage alice %d bob %d, want 1000 each", b.usage("alice"), b.usage("bob"))
	}
	b.setConfig("artifact_quota_bytes", "0")
	b.putArt(artPut('d', "d", 10<<30, "alice"))
	if used, quota, _ := b.f.ArtifactUsage("alice"); used != 1000+10<<30 || quota != 0 {
		t.Errorf("no quota: usage %d quota %d", used, quota)
	}
	// Usage never wraps.
	if err := mustError(t, b.apply(api.OpArtifactPut, artPut('e', "e", math.MaxInt64, "alice"))); !errors.Is(err, api.ErrInvalid) {
		t.Errorf("a put that would wrap the usage: %v, want a field error", err)
	}
}

// The quota counts a principal: an agent and its forks (the names its token
// acts as) share one usage, so A-fork-1 … A-fork-9999 cannot each fill a
// quota of their own. A delete gives the bytes back to the same principal.
func TestArtifactQuotaPerPrincipal(t *testing.T) {
	b := newMbox(t)
	b.setConfig("artifact_quota_bytes", "1000")
	b.putArt(artPut('a', "a", 600, "carol-fork-1"))
	err := mustError(t, b.apply(api.OpArtifactPut, artPut('b', "b", 401, "carol-fork-2")))
	var qe *api.QuotaError
	if !errors.As(err, &qe) || *qe != (api.QuotaError{Agent: "carol", Used: 600, Size: 401, Quota: 1000}) {
		t.Fatalf("carol-fork-2's put over carol's quota: %v, want a *QuotaError for carol 600+401 of 1000", err)
	}
	b.putArt(artPut('b', "b", 400, "carol")) // fits exactly, with the fork's 600
	for _, name := range []string{"carol", "carol-fork-1", "carol-fork-77"} {
		if used := b.usage(name); used != 1000 {
			t.Errorf("usage of %s = %d, want carol's 1000", name, used)
		}
	}
	// A name that only looks like a fork is its own principal.
	b.putArt(artPut('c', "c", 1000, "carol-fork-0"))
	b.ok(api.OpArtifactDelete, api.ArtifactDeleteCommand{ID: artID('a'), By: "admin"})
	if used := b.usage("carol"); used != 400 {
		t.Errorf("after deleting carol-fork-1's artifact carol uses %d, want 400", used)
	}
}

func TestArtifactSettings(t *testing.T) {
	b := newMbox(t)
	cfg, _ := b.f.Config()
	if cfg.ArtifactQuotaBytes != api.DefaultArtifactQuota || cfg.ArtifactRetentionSeconds != api.DefaultArtifactRetention {
		t.Errorf("defaults = %+v", cfg)
	}
	b.setConfig("artifact_quota_bytes", "0")
	b.setConfig("artifact_retention_seconds", "0")
	if cfg, _ := b.f.Config(); cfg.ArtifactQuotaBytes != 0 || cfg.ArtifactRetentionSeconds != 0 {
		t.Errorf("after 0, 0: %+v", cfg)
	}
	for _, tc := range []struct{ key, v string }{
		{"artifact_quota_bytes", "-1"}, {"artifact_quota_bytes", "1.5"}, {"artifact_quota_bytes", `"1GiB"`},
		{"artifact_retention_seconds", "-5"}, {"artifact_retention_seconds", fmt.Sprint(api.MaxArtifactRetention + 1)}, {"artifact_retention_seconds", "true"},
	} {
		err := mustError(t, b.apply(api.OpSetConfig, api.SetConfigCommand{Key: tc.key, Value: json.RawMessage(tc.v)}))
		var fe *api.FieldError
		if !errors.As(err, &fe) || fe.Field != "value" || !strings.Contains(fe.Reason, tc.key+": want a whole number") {
			t.Errorf("%s=%s: %v, want a value error", tc.key, tc.v, err)
		}
	}
	for _, k := range []string{"artifact_quota_bytes", "artifact_retention_seconds"} {
		if !slices.Contains(api.ConfigKeys(), k) {
			t.Errorf("ConfigKeys lacks %s", k)
		}
	}
}

func TestArtifactDelete(t *testing.T) {
	b := newMbox(t)
	b.register("bob", "engineer")
	err := mustError(t, b.apply(api.OpArtifactDelete, api.ArtifactDeleteCommand{ID: artID('a'), By: "admin"}))
	var nf *api.NotFoundError
	if !errors.As(err, &nf) || nf.Error() != "artifact "+artID('a')+": not found" {
		t.Errorf("delete of nothing: %v, want artifact …: not found", err)
	}
	var fe *api.FieldError
	if err := mustError(t, b.apply(api.OpArtifactDelete, api.ArtifactDeleteCommand{ID: "sha256:x", By: "admin"})); !errors.As(err, &fe) || fe.Field != "id" {
		t.Errorf("delete of a bad id: %v, want a field error on id", err)
	}
	if err := mustError(t, b.apply(api.OpArtifactDelete, api.ArtifactDeleteCommand{ID: artID('a'), By: "Admin"})); !errors.As(err, &fe) || fe.Field != "by" {
		t.Errorf("delete by a bad name: %v, want a field error on by", err)
	}
	empty := dataDump(t, b.f)
	a := b.putArt(artPut('a', "a", 70, "alice"))
	b.send(b.msgWith("general", api.ArtifactRef{Ref: a.ID}))
	// An admin's delete removes a referenced artifact.
	got, ok := b.ok(api.OpArtifactDelete, api.ArtifactDeleteCommand{ID: a.ID, By: "admin"}).(*api.Artifact)
	if !ok || got.ID != a.ID || got.Refs != 1 || got.Kept != "" {
		t.Errorf("delete answered %+v, want the record as it was", got)
	}
	if b.art(a.ID) != nil || b.usage("alice") != 0 {
		t.Errorf("after delete: record %+v, usage %d", b.art(a.ID), b.usage("alice"))
	}
	if p, _ := b.f.Artifacts(api.ArtifactQuery{}); len(p.Artifacts) != 0 {
		t.Errorf("the list still holds %d artifacts", len(p.Artifacts))
	}
	if artifactLines(t, b.f) != artifactLinesOf(empty) {
		t.Errorf("the artifact buckets are not as before the put:\n%s", artifactLines(t, b.f))
	}
}

// artifactLines is the Dump lines of the artifact buckets.
func artifactLines(tb testing.TB, f *FSM) string { return artifactLinesOf(dataDump(tb, f)) }

func artifactLinesOf(d string) string {
	var out []string
	for l := range strings.Lines(d) {
		if strings.HasPrefix(l, "artifact") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}

// A retention delete re-checks at the entry's time: a referenced
// artifact, one not due, or any with retention 0 is kept (and the answer
// says why); a due one goes, at the boundary too.
func TestArtifactUnreferencedDelete(t *testing.T) {
	for _, tc := range []struct {
		name      string
		retention string
		ref       bool
		after     time.Duration // from the put to the delete's entry
		kept      string        // "" : deleted
	}{
		{"referenced", "60", true, time.Hour, "referenced by 1 message"},
		{"not due", "60", false, 59 * time.Second, "not due until "},
		{"kept forever", "0", false, 1000 * time.Hour, "kept forever"},
		{"due at the boundary", "60", false, 60 * time.Second, ""},
		{"due", "60", false, time.Hour, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newMbox(t)
			b.register("bob", "engineer")
			b.setConfig("artifact_retention_seconds", tc.retention)
			a := b.putArt(artPut('a', "a", 5, "alice"))
			if tc.ref {
				b.send(b.msgWith("general", api.ArtifactRef{Ref: a.ID}))
			}
			b.ts = a.Created.UnixNano() + int64(tc.after) - 1000 // apply adds 1000
			before := dataDump(t, b.f)
			got := b.ok(api.OpArtifactDelete, api.ArtifactDeleteCommand{ID: a.ID, By: api.SystemSender, Unreferenced: true}).(*api.Artifact)
			stored := b.art(a.ID)
			if tc.kept == "" {
				if stored != nil || got.Kept != "" || b.usage("alice") != 0 {
					t.Errorf("due: answered %+v, stored %+v; want it deleted", got, stored)
				}
				return
			}
			if stored == nil || !strings.HasPrefix(got.Kept, tc.kept) || dataDump(t, b.f) != before {
				t.Errorf("answered %+v, stored %+v; want it kept (%q) and nothing changed", got, stored, tc.kept)
			}
			if stored != nil && stored.Kept != "" {
				t.Errorf("Kept was stored: %+v", stored)
			}
		})
	}
}

// A message naming an artifact that is not stored is refused on that
// entry, nothing written; paths are not artifacts.
func TestSendRefusesUnknownArtifact(t *testing.T) {
	b := newMbox(t)
	b.register("bob", "engineer")
	b.putArt(artPut('a', "a", 5, "alice"))
	for _, tc := range []struct {
		name      string
		refs      []api.ArtifactRef
		field, id string
	}{
		{"plain id", []api.ArtifactRef{{Ref: "shared/context/x.md"}, {Ref: artID('a')}, {Ref: artID('b')}}, "content.artifacts[2]", artID('b')},
		{"object", []api.ArtifactRef{{Ref: artID('c'), Name: "c.txt"}}, "content.artifacts[0]", artID('c')},
		{"first of two unknown", []api.ArtifactRef{{Ref: artID('a')}, {Ref: artID('a')}, {Ref: artID('d')}, {Ref: artID('e')}}, "content.artifacts[2]", artID('d')},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := dataDump(t, b.f)
			err := b.sendErr(b.msgWith("general", tc.refs...))
			var fe *api.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Fatalf("err = %v, want a field error on %s", err, tc.field)
			}
			if want := "no artifact " + tc.id + ": upload it first (maosctl artifact put)"; fe.Reason != want {
				t.Errorf("reason %q, want %q", fe.Reason, want)
			}
			if !strings.HasPrefix(err.Error(), "fsm: apply send: ") {
				t.Errorf("err = %q, want it wrapped with the op", err)
			}
			if dataDump(t, b.f) != before {
				t.Errorf("a refused send changed the state")
			}
		})
	}
	// Paths alone need no artifact.
	b.send(b.msgWith("general", api.ArtifactRef{Ref: "shared/context/plan.md"}))
}

// Each message counts once on each artifact it names, however often it
// names it; a retry counts nothing; a retry of a stored message is
// answered even once its artifact is gone.
func TestArtifactRefsCountedOncePerMessage(t *testing.T) {
	b := newMbox(t)
	b.register("bob", "engineer")
	a := b.putArt(artPut('a', "a", 5, "alice"))
	c := b.putArt(artPut('c', "c", 5, "alice"))
	m := b.msgWith("general", api.ArtifactRef{Ref: a.ID}, api.ArtifactRef{Ref: a.ID, Name: "again.txt"}, api.ArtifactRef{Ref: c.ID}, api.ArtifactRef{Ref: a.ID})
	b.send(m)
	if got := b.art(a.ID).Refs; got != 1 {
		t.Errorf("a named three times in one message: refs %d, want 1", got)
	}
	if got := b.art(c.ID).Refs; got != 1 {
		t.Errorf("c: refs %d, want 1", got)
	}
	if r := mustSendResult(t, b.ok(api.OpSend, api.SendCommand{Message: m})); !r.Duplicate {
		t.Fatalf("retry was not a duplicate")
	}
	if got := b.art(a.ID).Refs; got != 1 {
		t.Errorf("after a retry: refs %d, want 1", got)
	}
	b.send(b.msgWith("general", api.ArtifactRef{Ref: a.ID}))
	if got := b.art(a.ID).Refs; got != 2 {
		t.Errorf("after a second message: refs %d, want 2", got)
	}
	b.ok(api.OpArtifactDelete, api.ArtifactDeleteCommand{ID: a.ID, By: "admin"})
	if r := mustSendResult(t, b.ok(api.OpSend, api.SendCommand{Message: m})); !r.Duplicate {
		t.Errorf("a retry after the artifact's delete was not answered as a duplicate")
	}
}

// Trimming a message takes its reference off each artifact it named,
// never below 0, and only off a record its send counted.
func TestArtifactRefsDroppedByTrim(t *testing.T) {
	b := newMbox(t)
	b.register("bob", "engineer")
	a := b.putArt(artPut('a', "a", 5, "alice"))
	c := b.putArt(artPut('c', "c", 5, "alice"))
	b.send(b.msgWith("files", api.ArtifactRef{Ref: a.ID}, api.ArtifactRef{Ref: c.ID}, api.ArtifactRef{Ref: a.ID}))
	b.send(b.msgWith("files", api.ArtifactRef{Ref: a.ID}))
	b.send(b.msgWith("files"))
	refs := func() (int64, int64) { return b.art(a.ID).Refs, b.art(c.ID).Refs }
	if ra, rc := refs(); ra != 2 || rc != 1 {
		t.Fatalf("refs %d %d, want 2 1", ra, rc)
	}
	b.ok(api.OpSetRetention, api.SetRetentionCommand{Channel: "files", MaxMessages: 2})
	if ra, rc := refs(); ra != 1 || rc != 0 {
		t.Errorf("after trimming the first message: refs %d %d, want 1 0", ra, rc)
	}
	// a deleted and uploaded again: the old message did not count on the
	// new record, so trimming it leaves the new message's reference.
	b.ok(api.OpArtifactDelete, api.ArtifactDeleteCommand{ID: a.ID, By: "admin"})
	b.putArt(artPut('a', "a", 5, "alice"))
	b.send(b.msgWith("files", api.ArtifactRef{Ref: a.ID}))
	b.ok(api.OpSetRetention, api.SetRetentionCommand{Channel: "files", MaxMessages: 1})
	if ra, _ := refs(); ra != 1 {
		t.Errorf("after trimming messages older than the re-upload: refs %d, want 1 (the new message)", ra)
	}
	b.send(b.msgWith("files"))
	b.ok(api.OpTrim, api.TrimCommand{Channel: "files"})
	if ra, rc := refs(); ra != 0 || rc != 0 {
		t.Errorf("all referencing messages trimmed: refs %d %d, want 0 0", ra, rc)
	}
}

func TestArtifactsPaging(t *testing.T) {
	b := newMbox(t)
	var all []*api.Artifact
	for i, c := range []byte("0123456") {
		from := []string{"alice", "bob"}[i%2]
		all = append(all, b.putArt(artPut(c, fmt.Sprintf("f%d.txt", i%3), int64(i), from)))
		b.ok(api.OpSetCursor, api.SetCursorCommand{Agent: "w", Seq: 1}) // gaps between indexes
	}
	ids := func(p api.ArtifactPage) []string {
		var out []string
		for _, a := range p.Artifacts {
			out = append(out, a.ID)
		}
		return out
	}
	idsOf := func(as ...*api.Artifact) []string {
		var out []string
		for _, a := range as {
			out = append(out, a.ID)
		}
		return out
	}
	page := func(q api.ArtifactQuery) api.ArtifactPage {
		t.Helper()
		p, err := b.f.Artifacts(q)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if p := page(api.ArtifactQuery{}); !slices.Equal(ids(p), idsOf(all...)) || p.HasMore {
		t.Errorf("all: %v has_more %t", ids(p), p.HasMore)
	}
	p := page(api.ArtifactQuery{Limit: 3})
	if !slices.Equal(ids(p), idsOf(all[:3]...)) || !p.HasMore {
		t.Errorf("first 3: %v has_more %t", ids(p), p.HasMore)
	}
	p = page(api.ArtifactQuery{Limit: 3, After: p.Artifacts[2].Index})
	if !slices.Equal(ids(p), idsOf(all[3:6]...)) || !p.HasMore {
		t.Errorf("next 3: %v has_more %t", ids(p), p.HasMore)
	}
	p = page(api.ArtifactQuery{Limit: 3, After: p.Artifacts[2].Index})
	if !slices.Equal(ids(p), idsOf(all[6])) || p.HasMore {
		t.Errorf("last: %v has_more %t", ids(p), p.HasMore)
	}
	if p := page(api.ArtifactQuery{From: "bob"}); !slices.Equal(ids(p), idsOf(all[1], all[3], all[5])) {
		t.Errorf("from bob: %v", ids(p))
	}
	if p := page(api.ArtifactQuery{Name: "f0.txt"}); !slices.Equal(ids(p), idsOf(all[0], all[3], all[6])) {
		t.Errorf("named f0.txt: %v", ids(p))
	}
	if p := page(api.ArtifactQuery{From: "alice", Name: "f0.txt", Limit: 1}); !slices.Equal(ids(p), idsOf(all[0])) || !p.HasMore {
		t.Errorf("alice's f0.txt, limit 1: %v has_more %t", ids(p), p.HasMore)
	}
	if p := page(api.ArtifactQuery{After: math.MaxUint64}); len(p.Artifacts) != 0 || p.Artifacts == nil {
		t.Errorf("after the last index: %v", ids(p))
	}
	var fe *api.FieldError
	if _, err := b.f.Artifacts(api.ArtifactQuery{From: "Bob"}); !errors.As(err, &fe) || fe.Field != "from" {
		t.Errorf("bad from: %v", err)
	}
	if _, err := b.f.Artifacts(api.ArtifactQuery{Name: "a/b"}); !errors.As(err, &fe) || fe.Field != "name" {
		t.Errorf("bad name: %v", err)
	}
	for _, id := range []string{artID('f'), "plan.md", strings.Repeat("x", 500)} {
		var nf *api.NotFoundError
		if _, err := b.f.Artifact(id); !errors.As(err, &nf) || len(err.Error()) > 120 {
			t.Errorf("Artifact(%.20s…) = %v, want a short not found", id, err)
		}
	}
}

func TestArtifactsDue(t *testing.T) {
	b := newMbox(t)
	b.register("bob", "engineer")
	b.setConfig("artifact_retention_seconds", "60")
	old := b.putArt(artPut('a', "a", 5, "alice"))
	ref := b.putArt(artPut('b', "b", 5, "alice"))
	b.send(b.msgWith("general", api.ArtifactRef{Ref: ref.ID}))
	b.ts += int64(30 * time.Second)
	young := b.putArt(artPut('c', "c", 5, "alice"))
	due := func(now time.Time, limit int) []string {
		t.Helper()
		ids, err := b.f.ArtifactsDue(now, limit)
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	if got := due(old.Created.Add(59*time.Second), 0); len(got) != 0 {
		t.Errorf("before the retention: %v", got)
	}
	if got := due(old.Created.Add(60*time.Second), 0); !slices.Equal(got, []string{old.ID}) {
		t.Errorf("at the retention: %v, want the unreferenced old one", got)
	}
	if got := due(young.Created.Add(time.Hour), 0); !slices.Equal(got, []string{old.ID, young.ID}) {
		t.Errorf("an hour on: %v, want both unreferenced ones", got)
	}
	if got := due(young.Created.Add(time.Hour), 1); !slices.Equal(got, []string{old.ID}) {
		t.Errorf("limit 1: %v", got)
	}
	b.setConfig("artifact_retention_seconds", "0")
	if got := due(young.Created.Add(1000*time.Hour), 0); len(got) != 0 {
		t.Errorf("retention 0: %v, want none", got)
	}
}

// The artifacts survive a restart of the state file.
func TestArtifactsSurviveRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	f := openAt(t, path)
	b := &mbox{t: t, f: f, ts: baseTS}
	b.register("bob", "engineer")
	a := b.putArt(artPut('a', "a", 5, "alice"))
	b.send(b.msgWith("general", api.ArtifactRef{Ref: a.ID}))
	before := dump(t, f)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	f = openAt(t, path)
	defer func() { _ = f.Close() }()
	got, err := f.Artifact(a.ID)
	if err != nil || got.Refs != 1 || got.Size != 5 || dump(t, f) != before {
		t.Errorf("after restart: %+v, %v", got, err)
	}
	if used, _, _ := f.ArtifactUsage("alice"); used != 5 {
		t.Errorf("usage after restart %d", used)
	}
}

// An artifact's readers: its uploader's principal, moderators, and the
// readers of the stored messages naming it after it was recorded; a
// delete and a new upload of the same bytes start with no readers, and a
// sender may name only what it reads.
func TestArtifactReaders(t *testing.T) {
	b := newMbox(t)
	b.putArt(artPut('a', "plan.md", 10, "alice"))
	reads := func(agent string) bool {
		t.Helper()
		_, err := b.f.ArtifactFor(artID('a'), &api.Viewer{Agent: agent})
		if err != nil && !errors.Is(err, api.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	if !reads("alice") || !reads("alice-fork-2") || reads("bob") {
		t.Fatalf("before any message: alice %t, her fork %t, bob %t; want only alice's", reads("alice"), reads("alice-fork-2"), reads("bob"))
	}
	if _, err := b.f.ArtifactFor(artID('a'), &api.Viewer{Moderator: true}); err != nil {
		t.Errorf("a moderator: %v", err)
	}
	m := b.msg("alice", "the plan", "bob")
	m.Visibility, m.Content.Artifacts = api.VisibilityPrivate, api.ArtifactRefs(artID('a'))
	b.send(m)
	if !reads("bob") || reads("carol") {
		t.Errorf("after alice's private message to bob: bob %t, carol %t", reads("bob"), reads("carol"))
	}
	if page, _ := b.f.Artifacts(api.ArtifactQuery{Viewer: &api.Viewer{Agent: "carol"}}); len(page.Artifacts) != 0 {
		t.Errorf("carol's list shows %d artifacts", len(page.Artifacts))
	}
	leak := b.msg("carol", "look", "all")
	leak.Content.Artifacts = api.ArtifactRefs(artID('a'))
	if err := mustError(t, b.apply(api.OpSend, api.SendCommand{Message: leak})); !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), "no artifact "+artID('a')) {
		t.Errorf("carol naming it: %v, want the unknown artifact's refusal", err)
	}
	b.ok(api.OpArtifactDelete, api.ArtifactDeleteCommand{ID: artID('a'), By: "admin"})
	b.putArt(artPut('a', "plan.md", 10, "alice"))
	if reads("bob") {
		t.Errorf("bob reads a new upload of the bytes through a message that named the deleted record")
	}
}
