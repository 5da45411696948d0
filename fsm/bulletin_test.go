package fsm

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
)

func (c *coordFSM) bulletin(ts int64, doc string, merge bool, ifVersion *uint64) *api.BulletinResult {
	c.tb.Helper()
	res := c.apply(ts, api.OpSetBulletin, api.BulletinCommand{Doc: json.RawMessage(doc), Merge: merge, IfVersion: ifVersion, By: "orchestrator"})
	r, ok := res.(*api.BulletinResult)
	if !ok {
		c.tb.Fatalf("set_bulletin %s: result %T (%v), want *BulletinResult", doc, res, res)
	}
	return r
}

// docOf decodes a bulletin document for comparison.
func docOf(tb testing.TB, raw json.RawMessage) map[string]any {
	tb.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		tb.Fatalf("document %s: %v", raw, err)
	}
	return m
}

func readBulletin(tb testing.TB, f *FSM) (api.Bulletin, map[string]any) {
	tb.Helper()
	b, err := f.Bulletin()
	if err != nil {
		tb.Fatalf("Bulletin: %v", err)
	}
	return b, docOf(tb, b.Doc)
}

func coordPtr[T any](v T) *T { return &v }

func TestBulletinEmptyHasDefaults(t *testing.T) {
	c := newCoordFSM(t)
	b, doc := readBulletin(t, c.f)
	want := map[string]any{"system_status": "normal", "warnings": []any{}, "shared_resources": map[string]any{}}
	if b.Version != 0 || !b.UpdatedAt.IsZero() || !reflect.DeepEqual(doc, want) {
		t.Errorf("empty bulletin = %+v %v, want version 0 and defaults", b, doc)
	}
}

func TestBulletinPutAndPatch(t *testing.T) {
	c := newCoordFSM(t)
	seed := `{"system_status":"normal","active_agents":["master","developer"],"current_phase":"implementation",
		"warnings":[],"shared_resources":{"database":"locked_by: developer_agent","api_server":"available"},
		"budget":{"tokens":1000000000000000000001,"usd":12.50}}`
	r := c.bulletin(baseTS, seed, false, nil)
	if r.Conflict || r.Version != 1 || !r.UpdatedAt.Equal(time.Unix(0, baseTS)) || r.UpdatedBy != "orchestrator" {
		t.Fatalf("put = %+v", r)
	}
	if want := []string{"active_agents", "budget", "current_phase", "shared_resources", "system_status", "warnings"}; !reflect.DeepEqual(r.Changed, want) {
		t.Errorf("changed = %v, want %v", r.Changed, want)
	}
	// Numbers are kept as written, not rounded through float64.
	if !strings.Contains(string(r.Doc), `"tokens":1000000000000000000001`) || !strings.Contains(string(r.Doc), `"usd":12.50`) {
		t.Errorf("numbers not kept: %s", r.Doc)
	}

	tests := []struct {
		name  string
		patch string
		check func(doc map[string]any) bool
	}{
		{"set a key", `{"system_status":"degraded"}`, func(d map[string]any) bool { return d["system_status"] == "degraded" }},
		{"null deletes", `{"active_agents":null}`, func(d map[string]any) bool { _, ok := d["active_agents"]; return !ok }},
		{"objects merge", `{"shared_resources":{"api_server":"down","queue":"ok"}}`, func(d map[string]any) bool {
			sr := d["shared_resources"].(map[string]any)
			return sr["api_server"] == "down" && sr["queue"] == "ok" && sr["database"] == "locked_by: developer_agent"
		}},
		{"nested null deletes", `{"shared_resources":{"database":null}}`, func(d map[string]any) bool {
			_, ok := d["shared_resources"].(map[string]any)["database"]
			return !ok
		}},
		{"arrays replace", `{"warnings":["disk at 91%"]}`, func(d map[string]any) bool {
			return reflect.DeepEqual(d["warnings"], []any{"disk at 91%"})
		}},
		{"new keys", `{"release":{"tag":"v2"}}`, func(d map[string]any) bool {
			return reflect.DeepEqual(d["release"], map[string]any{"tag": "v2"})
		}},
		{"deleting system_status falls back to normal", `{"system_status":null}`, func(d map[string]any) bool { return d["system_status"] == "normal" }},
	}
	for _, tt := range tests {
		before := c.index
		r := c.bulletin(baseTS+int64(c.index)*sec, tt.patch, true, nil)
		if r.Conflict || r.Version != before+1 {
			t.Errorf("%s: result %+v", tt.name, r)
		}
		_, doc := readBulletin(t, c.f)
		if !tt.check(doc) {
			t.Errorf("%s: after %s the bulletin is %v", tt.name, tt.patch, doc)
		}
	}

	// PUT replaces: keys not in the new document are gone.
	c.bulletin(baseTS+100*sec, `{"current_phase":"review"}`, false, nil)
	_, doc := readBulletin(t, c.f)
	want := map[string]any{"current_phase": "review", "system_status": "normal", "warnings": []any{}, "shared_resources": map[string]any{}}
	if !reflect.DeepEqual(doc, want) {
		t.Errorf("after PUT: %v, want %v", doc, want)
	}
	ev := c.lastAudit()
	if ev.Label != "BULLETIN" || ev.From != "orchestrator" || !strings.Contains(ev.Text, "replaced") ||
		!strings.Contains(ev.Text, "current_phase=review") || !strings.Contains(ev.Text, "release deleted") {
		t.Errorf("audit = %q", ev.Line())
	}
}

func TestBulletinCompareAndSet(t *testing.T) {
	c := newCoordFSM(t)
	// if_version 0: only if never written.
	r := c.bulletin(baseTS, `{"current_phase":"plan"}`, false, coordPtr[uint64](0))
	if r.Conflict || r.Version != 1 {
		t.Fatalf("first CAS put = %+v", r)
	}
	before := dataDump(t, c.f)
	for _, tt := range []struct {
		name  string
		merge bool
		v     uint64
	}{{"put at 0", false, 0}, {"patch at 0", true, 0}, {"patch at a future version", true, 2}} {
		r = c.bulletin(baseTS+sec, `{"current_phase":"lost update"}`, tt.merge, &tt.v)
		if !r.Conflict || r.Version != 1 || !strings.Contains(string(r.Doc), `"plan"`) {
			t.Errorf("%s: %+v, want a conflict reporting version 1", tt.name, r)
		}
		if dataDump(t, c.f) != before {
			t.Errorf("%s: a conflicting CAS changed the state", tt.name)
		}
	}
	r = c.bulletin(baseTS+2*sec, `{"current_phase":"build"}`, true, coordPtr[uint64](1))
	if r.Conflict || r.Version != c.index {
		t.Errorf("CAS at the current version = %+v", r)
	}
	// Locks do not move the version: a CAS against it still applies.
	c.granted(baseTS+3*sec, "db", "codex", time.Minute)
	if r2 := c.bulletin(baseTS+4*sec, `{"current_phase":"test"}`, true, &r.Version); r2.Conflict {
		t.Errorf("CAS after a lock grant = %+v, want applied", r2)
	}
}

func TestBulletinRefusalsChangeNothing(t *testing.T) {
	big := `{"notes":"` + strings.Repeat("x", api.MaxBulletinBytes) + `"}`
	half := `{"a":"` + strings.Repeat("x", api.MaxBulletinBytes/2+10) + `"}`
	half2 := `{"b":"` + strings.Repeat("y", api.MaxBulletinBytes/2+10) + `"}`
	tests := []struct {
		name  string
		doc   string
		merge bool
		by    string
		field string
	}{
		{"an array", `[1,2]`, false, "", "bulletin"},
		{"null", `null`, true, "", "bulletin"},
		{"bad system_status", `{"system_status":"panic"}`, false, "", "system_status"},
		{"system_status not a string", `{"system_status":3}`, true, "", "system_status"},
		{"null system_status in a PUT", `{"system_status":null}`, false, "", "system_status"},
		{"current_phase a number", `{"current_phase":2}`, true, "", "current_phase"},
		{"warnings an object", `{"warnings":{"a":1}}`, false, "", "warnings"},
		{"shared_resources an array", `{"shared_resources":["db"]}`, true, "", "shared_resources"},
		{"reserved if_version", `{"if_version":3,"a":1}`, true, "", "if_version"},
		{"over 64 KiB", big, false, "", "bulletin"},
		{"a patch whose result is over 64 KiB", half2, true, "", "bulletin"},
		{"bad by", `{"a":1}`, true, "Not An Id", "by"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCoordFSM(t)
			c.bulletin(baseTS, half, false, nil)
			before := dataDump(t, c.f)
			res := c.apply(baseTS+sec, api.OpSetBulletin, api.BulletinCommand{Doc: json.RawMessage(tt.doc), Merge: tt.merge, By: tt.by})
			err := mustError(t, res)
			var fe *api.FieldError
			if !errors.Is(err, api.ErrInvalid) || !errors.As(err, &fe) || fe.Field != tt.field {
				t.Errorf("error %v, want invalid %s", err, tt.field)
			}
			if tt.field == "bulletin" && strings.Contains(tt.name, "64 KiB") && !strings.Contains(err.Error(), "limit of 65536 bytes") {
				t.Errorf("error %v does not name the limit", err)
			}
			if dataDump(t, c.f) != before {
				t.Error("a refused bulletin command changed the state")
			}
		})
	}
}

// TestBulletinSharedResourcesShowLocks: locks appear in shared_resources
// beside the written entries, leave on release, and their entries are
// dropped from what a writer puts back.
func TestBulletinSharedResourcesShowLocks(t *testing.T) {
	c := newCoordFSM(t)
	c.bulletin(baseTS, `{"shared_resources":{"api_server":"available","db":"written by hand"}}`, false, nil)
	l := c.granted(baseTS+sec, "src/retry.go", "codex", time.Minute)
	c.granted(baseTS+2*sec, "db", "claude", time.Second)
	c.tick(baseTS + 5*sec) // claude's lease on db has run out

	b, doc := readBulletin(t, c.f)
	if b.Version != 1 {
		t.Errorf("version %d: lock changes must not move it", b.Version)
	}
	sr := doc["shared_resources"].(map[string]any)
	entry, _ := sr["src/retry.go"].(map[string]any)
	if sr["api_server"] != "available" || entry["managed_by"] != "lock" || entry["holder"] != "codex" ||
		entry["token"] != float64(l.Token) || entry["expires_at"] != l.ExpiresAt.Format(time.RFC3339Nano) || entry["expired"] != false {
		t.Errorf("shared_resources = %v", sr)
	}
	// A lock on a written key shadows it while the lock exists; expired
	// locks show as expired until released or taken over.
	if db, _ := sr["db"].(map[string]any); db["holder"] != "claude" || db["expired"] != true {
		t.Errorf("shared_resources.db = %v, want claude's expired lock", sr["db"])
	}

	// Read, edit, put back: the lock entries are not stored as written keys.
	doc["current_phase"] = "review"
	edited, _ := json.Marshal(doc)
	c.bulletin(baseTS+6*sec, string(edited), false, coordPtr(b.Version))
	c.lockResult(baseTS+7*sec, api.OpLockRelease, api.LockReleaseCommand{Path: "src/retry.go", Holder: "codex", Token: l.Token})
	c.lockResult(baseTS+8*sec, api.OpLockRelease, api.LockReleaseCommand{Path: "db", Holder: "claude", Token: l.Token + 1})
	_, doc = readBulletin(t, c.f)
	sr = doc["shared_resources"].(map[string]any)
	if _, ok := sr["src/retry.go"]; ok || doc["current_phase"] != "review" || sr["api_server"] != "available" {
		t.Errorf("after edit and release: %v", doc)
	}
	// The written db entry was shadowed when read, so the edit dropped it.
	if _, ok := sr["db"]; ok {
		t.Errorf("db = %v: the lock's entry was stored as a written one", sr["db"])
	}
	// A patch naming a lock entry is dropped the same way.
	c.bulletin(baseTS+9*sec, `{"shared_resources":{"ghost":{"managed_by":"lock","holder":"x"},"queue":"ok"}}`, true, nil)
	_, doc = readBulletin(t, c.f)
	if sr := doc["shared_resources"].(map[string]any); sr["ghost"] != nil || sr["queue"] != "ok" {
		t.Errorf("patch with a lock entry: %v", sr)
	}
}

// TestBulletinValidateRaw: what cannot travel in a log entry (it is not
// JSON) is refused by Validate, which the handler calls.
func TestBulletinValidateRaw(t *testing.T) {
	for _, doc := range []string{`{"a":`, ``, `  `, `{"a":1} {"b":2}`, `{"a":1}]`} {
		cmd := api.BulletinCommand{Doc: json.RawMessage(doc)}
		var fe *api.FieldError
		if err := cmd.Validate(); !errors.As(err, &fe) || fe.Field != "bulletin" {
			t.Errorf("Validate(%q) = %v, want invalid bulletin", doc, err)
		}
	}
}
