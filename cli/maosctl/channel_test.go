package maosctl

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
)

func TestChannelRetention(t *testing.T) {
	e := newTestEnv(t)
	for i := range 4 {
		m := api.Message{From: "codex", To: api.Recipients{"claude"}, Channel: "ops", Content: api.Content{Text: fmt.Sprint(i)}}
		m.Normalize(time.Now())
		if _, err := e.svc.Apply(context.Background(), api.OpSend, api.SendCommand{Message: m}); err != nil {
			t.Fatal(err)
		}
	}
	out := e.ok("channel", "set-retention", "--channel", "ops", "--max-messages", "1", "--max-age", "720h")
	if !strings.Contains(out, "trimmed 3 now (3 in all)") || !strings.Contains(out, "max_messages 1") {
		t.Fatalf("set-retention printed %q", out)
	}
	var r api.Retention
	if err := json.Unmarshal([]byte(e.ok("channel", "retention", "--channel", "ops", "--json")), &r); err != nil {
		t.Fatal(err)
	}
	if r.MaxMessages != 1 || r.MaxAge != 720*time.Hour || r.Trimmed != 3 {
		t.Fatalf("retention = %+v", r)
	}
	if out := e.ok("channel", "trim", "--channel", "ops"); !strings.Contains(out, "trimmed 0") {
		t.Fatalf("second trim printed %q", out)
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"channel", "set-retention", "--max-messages", "1"}, "--channel"},
		{[]string{"channel", "set-retention", "--channel", "ops", "--max-age", "soon"}, "max_age"},
		{[]string{"channel", "trim", "--channel", "nopolicy"}, "no retention policy"},
		{[]string{"channel", "retention", "--channel", "nopolicy"}, "no retention policy"},
	} {
		res := e.run("", tt.args...)
		if res.err == nil || !strings.Contains(res.errOut, tt.want) {
			t.Errorf("maosctl %v: err=%v stderr=%q, want it to mention %q", tt.args, res.err, res.errOut, tt.want)
		}
	}
}
