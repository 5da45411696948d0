package fsm

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
)

// TestPushConfigsSetReadDelete: the creator sets configs of its task;
// reads show them without credentials, to the creator and moderators
// only; the deliverer's read has the credentials; another agent may not
// set or delete; the ninth config is refused naming the limit; a
// replacement does not count; delete removes one; a bad config is a
// FieldError and nothing is written.
func TestPushConfigsSetReadDelete(t *testing.T) {
	b := newTaskBox(t)
	c := b.newTask("rita")
	b.create(c)
	const secret = "cred-0123456789"
	cfg := api.PushConfig{TaskID: c.ID, ID: "hook", URL: "https://hooks.example/a2a", Token: "tok-1",
		Authentication: &api.PushAuthentication{Scheme: "Bearer", Credentials: secret}}
	res := b.ok(api.OpPushConfigSet, api.PushConfigSetCommand{From: "boss", Config: cfg}).(*api.PushConfig)
	if res.Index != b.idx || res.Authentication == nil || res.Authentication.Credentials != "" || res.Token != "tok-1" {
		t.Fatalf("set result %+v: want index %d, the scheme and no credentials", res, b.idx)
	}
	for _, v := range []*api.Viewer{nil, {Agent: "boss"}, {Agent: "rex", Moderator: true}} {
		page, err := b.f.PushConfigs(c.ID, v)
		data, _ := json.Marshal(page)
		if err != nil || len(page.Configs) != 1 || strings.Contains(string(data), secret) || page.Configs[0].URL != cfg.URL {
			t.Errorf("PushConfigs as %+v = %s, %v: want the one config without credentials", v, data, err)
		}
	}
	if _, err := b.f.PushConfigs(c.ID, &api.Viewer{Agent: "eve"}); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("PushConfigs as a stranger = %v, want not found", err)
	}
	full, err := b.f.PushConfigsWithCredentials(c.ID)
	if err != nil || len(full.Configs) != 1 || full.Configs[0].Authentication.Credentials != secret || full.Index != b.idx {
		t.Fatalf("PushConfigsWithCredentials = %+v, %v: want the credentials and index %d", full, err, b.idx)
	}
	b.refused(api.OpPushConfigSet, api.PushConfigSetCommand{From: "eve", Config: cfg}, api.ErrForbidden, "only its creator sets or deletes its push configs, not eve")
	b.refused(api.OpPushConfigDelete, api.PushConfigDeleteCommand{From: "eve", TaskID: c.ID, ID: "hook"}, api.ErrForbidden, "only its creator")
	b.refused(api.OpPushConfigSet, api.PushConfigSetCommand{From: "boss", Config: api.PushConfig{TaskID: "task-404", ID: "h", URL: cfg.URL}}, api.ErrNotFound, "task task-404")
	for _, bad := range []struct {
		p    api.PushConfig
		want string
	}{
		{api.PushConfig{TaskID: c.ID, ID: "h", URL: "ftp://x/"}, "config.url: must be an absolute http or https URL"},
		{api.PushConfig{TaskID: c.ID, ID: "h", URL: "https://" + strings.Repeat("a", api.MaxPushURLLen)}, fmt.Sprintf("at most %d", api.MaxPushURLLen)},
		{api.PushConfig{TaskID: c.ID, ID: "h", URL: cfg.URL, Authentication: &api.PushAuthentication{Scheme: "Digest"}}, "config.authentication.scheme"},
		{api.PushConfig{TaskID: c.ID, ID: "h", URL: cfg.URL, Token: "two words"}, "config.token: must be one token"},
		{api.PushConfig{TaskID: c.ID, ID: "", URL: cfg.URL}, "config.id"},
	} {
		b.refused(api.OpPushConfigSet, api.PushConfigSetCommand{From: "boss", Config: bad.p}, api.ErrInvalid, bad.want)
	}
	for i := 2; i <= api.MaxPushConfigsPerTask; i++ {
		p := cfg
		p.ID = fmt.Sprintf("hook-%d", i)
		b.ok(api.OpPushConfigSet, api.PushConfigSetCommand{From: "boss", Config: p})
	}
	ninth := cfg
	ninth.ID = "one-too-many"
	b.refused(api.OpPushConfigSet, api.PushConfigSetCommand{From: "boss", Config: ninth}, api.ErrInvalid,
		fmt.Sprintf("config.id: task %s has %d push configs, at most %d", c.ID, api.MaxPushConfigsPerTask, api.MaxPushConfigsPerTask))
	again := cfg
	again.URL = "https://hooks.example/v2"
	b.ok(api.OpPushConfigSet, api.PushConfigSetCommand{From: "boss", Config: again})
	b.ok(api.OpPushConfigDelete, api.PushConfigDeleteCommand{From: "boss", TaskID: c.ID, ID: "hook-2"})
	page, _ := b.f.PushConfigs(c.ID, nil)
	if len(page.Configs) != api.MaxPushConfigsPerTask-1 || page.Configs[0].ID != "hook" || page.Configs[0].URL != again.URL {
		t.Errorf("after a replacement and a delete: %+v", page.Configs)
	}
	b.refused(api.OpPushConfigDelete, api.PushConfigDeleteCommand{From: "boss", TaskID: c.ID, ID: "hook-2"}, api.ErrNotFound, "push config hook-2 of task "+c.ID)
}

// TestPushCursorNeverMovesBack: the cursor moves forward only; Since is
// the entry of the first config set.
func TestPushCursorNeverMovesBack(t *testing.T) {
	b := newTaskBox(t)
	if cur, _ := b.f.PushCursor(); cur != (api.PushCursor{}) {
		t.Fatalf("a new state's cursor = %+v, want zero", cur)
	}
	b.ok(api.OpPushCursor, api.PushCursorCommand{Index: 40})
	if got := b.ok(api.OpPushCursor, api.PushCursorCommand{Index: 30}).(*api.PushCursor); got.Index != 40 {
		t.Errorf("cursor after a lower write = %d, want 40", got.Index)
	}
	c := b.newTask("rita")
	b.create(c)
	for _, id := range []string{"a", "b"} {
		b.ok(api.OpPushConfigSet, api.PushConfigSetCommand{From: "boss", Config: api.PushConfig{TaskID: c.ID, ID: id, URL: "http://127.0.0.1:1/"}})
	}
	if cur, _ := b.f.PushCursor(); cur.Index != 40 || cur.Since != b.idx-1 {
		t.Errorf("cursor %+v: want index 40, since %d (the first config's entry)", cur, b.idx-1)
	}
}

// TestPushOpsNeedVersion3: a cluster at version 2 refuses the push ops
// before they are proposed.
func TestPushOpsNeedVersion3(t *testing.T) {
	f, err := Open(filepath.Join(t.TempDir(), "state.db"), Options{Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	applyOne(f, versionEntry(t, 1, 2))
	for _, op := range []api.Op{api.OpPushConfigSet, api.OpPushConfigDelete, api.OpPushCursor} {
		var cve *api.ClusterVersionError
		if err := f.CheckVersion(op, nil); !errors.As(err, &cve) || cve.Needs != 3 {
			t.Errorf("CheckVersion(%s) at 2 = %v, want needing 3", op, err)
		}
	}
	applyOne(f, versionEntry(t, 2, 3))
	if err := f.CheckVersion(api.OpPushConfigSet, nil); err != nil {
		t.Errorf("CheckVersion(push_config_set) at 3 = %v", err)
	}
}

// TestCheckPushURL: the allowlist takes hosts (any port) and host:port.
func TestCheckPushURL(t *testing.T) {
	allow := []string{"127.0.0.1", "Hooks.Example:8443"}
	for u, ok := range map[string]bool{
		"http://127.0.0.1:9999/x":       true,
		"https://hooks.example:8443/a":  true,
		"https://hooks.example/a":       false,
		"http://127.0.0.2/":             false,
		"http://evil.example/127.0.0.1": false,
	} {
		if err := api.CheckPushURL(allow, u); (err == nil) != ok {
			t.Errorf("CheckPushURL(%s) = %v, want allowed %t", u, err, ok)
		}
	}
	if err := api.CheckPushURL(nil, "http://127.0.0.1/"); err == nil || !strings.Contains(err.Error(), "push notifications are off") {
		t.Errorf("an empty allowlist: %v", err)
	}
}
