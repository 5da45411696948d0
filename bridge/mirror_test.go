package bridge

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/testing/testenv"
	"github.com/maos-project/maos/transport"
)

// send stores a message on the node as a client would.
func (n *node) send(t *testing.T, id, from, to, visibility, typ string) {
	t.Helper()
	m := &api.Message{ID: id, From: from, To: api.Recipients{to}, Channel: "ops", Type: typ, Visibility: visibility,
		Content: api.Content{Text: "text of " + id}}
	if _, err := n.client(adminSecret).Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}

// files lists the *.json files of dir.
func files(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".json") {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// A folder has no per-reader access control: a mirror run with a token
// that reads everything (an admin here) writes the public messages only,
// and counts the private and moderators-only ones it skipped; a second
// run starts after the newest file and skips them again.
func TestMirrorSkipsMessagesNotForEveryone(t *testing.T) {
	n := newNode(t, transport.ServerOptions{Auth: &transport.AuthConfig{AdminToken: adminSecret}}, nil)
	n.send(t, "msg-p1", "alice", "bob", "", "")
	n.send(t, "msg-s", "alice", "bob", api.VisibilityPrivate, "")
	n.send(t, "msg-coc", "alice", "bob", "", fsm.TypeCoCViolationFlag)
	n.send(t, "msg-p2", "bob", "alice", "", "")
	dir := filepath.Join(t.TempDir(), "ops")
	var skipped []string
	mr := &Mirror{Client: n.client(adminSecret), Channel: "ops", Dir: dir, OnSkip: func(m *api.Message) { skipped = append(skipped, m.ID) }}
	if _, err := mr.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := files(t, dir); !slices.Equal(got, []string{"msg-p1.json", "msg-p2.json"}) {
		t.Errorf("files %v, want the public messages only", got)
	}
	if mr.Written != 2 || mr.Skipped != 2 || !slices.Equal(skipped, []string{"msg-s", "msg-coc"}) {
		t.Errorf("written %d, skipped %d %v; want 2 and 2 [msg-s msg-coc]", mr.Written, mr.Skipped, skipped)
	}

	// Following: a private message arriving live is skipped too.
	ctx, cancel := testenv.Context(t)
	defer cancel()
	fo := &Mirror{Client: n.client(adminSecret), Channel: "ops", Dir: dir}
	wrote := make(chan string, 8)
	fo.OnWrite = func(_ string, m *api.Message) { wrote <- m.ID }
	done := make(chan error, 1)
	go func() { done <- fo.Follow(ctx) }()
	n.send(t, "msg-s2", "bob", "alice", api.VisibilityPrivate, "")
	n.send(t, "msg-p3", "bob", "alice", "", "")
	select {
	case id := <-wrote:
		if id != "msg-p3" {
			t.Errorf("follow wrote %s first, want msg-p3", id)
		}
	case <-ctx.Done():
		t.Fatal("follow wrote nothing")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if fo.Skipped != 1 {
		t.Errorf("follow skipped %d, want 1", fo.Skipped)
	}
	if got := files(t, dir); !slices.Equal(got, []string{"msg-p1.json", "msg-p2.json", "msg-p3.json"}) {
		t.Errorf("files %v after following", got)
	}
}
