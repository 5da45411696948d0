package maosctl

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/bridge"
	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/testing/testenv"
)

// bridgeSend stores a message without running maosctl (a second app run
// would race with a running mirror -f on urfave/cli's shared flags).
func bridgeSend(t *testing.T, e *testEnv, channel, from, to, text string) string {
	t.Helper()
	m := api.Message{From: from, To: api.Recipients{to}, Channel: channel, Content: api.Content{Text: text}}
	m.Normalize(time.Now())
	if _, err := e.svc.Apply(context.Background(), api.OpSend, api.SendCommand{Message: m}); err != nil {
		t.Fatal(err)
	}
	return m.ID
}

// copyTree copies the bridge fixtures so a test can add files.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if info.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func importReport(t *testing.T, e *testEnv, args ...string) (bridge.Report, runResult) {
	t.Helper()
	r := e.run("", append([]string{"--json", "import"}, args...)...)
	var rep bridge.Report
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
		t.Fatalf("import %v: stdout %q: %v (stderr %q)", args, r.out, err, r.errOut)
	}
	return rep, r
}

func TestImportEachLayoutTwice(t *testing.T) {
	for _, tc := range []struct {
		dir      string
		files    int // message files
		messages int // distinct messages
		ignored  int
	}{
		{"mailbox", 4, 3, 1},
		{"channel", 3, 3, 0},
		{"adr008", 4, 4, 0},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			e := newTestEnv(t, "agent_engineer_002", "all_engineers", "claude", "codex", "developer_agent", "orchestrator", "reviewer_agent", "triage")
			dir := filepath.Join("..", "..", "bridge", "testdata", tc.dir)
			rep, r := importReport(t, e, dir)
			if r.err != nil || r.errOut != "" {
				t.Fatalf("first import: %v %q", r.err, r.errOut)
			}
			imported, already := rep.Counts()
			if imported != tc.messages || already != tc.files-tc.messages || len(rep.Skipped) != 0 || len(rep.Ignored) != tc.ignored {
				t.Fatalf("first import: imported %d already %d report %+v", imported, already, rep)
			}
			seqs := map[string]uint64{}
			for _, i := range rep.Imported {
				m, err := e.svc.State().Message(i.ID)
				if err != nil {
					t.Fatalf("%s (%s) not stored: %v", i.File, i.ID, err)
				}
				seqs[i.ID] = m.Seq
			}
			out := e.ok("import", dir)
			want := "imported 0, already there " + itoa(tc.files) + ", skipped 0, ignored " + itoa(tc.ignored) + "\n"
			if out != want {
				t.Errorf("second import printed %q, want %q", out, want)
			}
			rep2, _ := importReport(t, e, dir)
			for _, i := range rep2.Imported {
				if !i.Already || seqs[i.ID] != i.Seq {
					t.Errorf("re-import of %s: %+v, want already at seq %d", i.File, i, seqs[i.ID])
				}
			}
			// The re-imports applied entries, but every one was a duplicate.
			if n := countMessages(t, e); n != tc.messages {
				t.Errorf("%d messages stored after re-imports, want %d", n, tc.messages)
			}
		})
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func countMessages(t *testing.T, e *testEnv) int {
	t.Helper()
	chans, err := e.svc.State().Channels()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range chans {
		n += int(c.Count)
	}
	return n
}

func TestImportThreadsAndFields(t *testing.T) {
	e := newTestEnv(t, "agent_engineer_002", "all_engineers", "claude", "codex", "orchestrator", "triage")
	e.ok("import", "--channel", "triage", filepath.Join("..", "..", "bridge", "testdata", "adr008"))
	st := e.svc.State()
	chans, _ := st.Channels()
	if len(chans) != 1 || chans[0].Name != "triage" {
		t.Fatalf("channels %+v, want only triage (--channel for files without session_id)", chans)
	}
	e2 := newTestEnv(t, "claude", "codex")
	e2.ok("import", filepath.Join("..", "..", "bridge", "testdata", "channel"))
	reply, err := e2.svc.State().Message("msg-20260111-163315-claude-4c78")
	if err != nil {
		t.Fatal(err)
	}
	if reply.ThreadID != "msg-20260111-163300-codex-a1b2" || reply.Channel != "agent-os-paper" ||
		reply.Timestamp.Format(time.RFC3339Nano) != "2026-01-11T16:33:15.123Z" || len(reply.Recipients) != 1 || reply.Recipients[0] != "codex" {
		t.Errorf("reply stored as %+v", reply)
	}
}

func TestImportBrokenFileSkipped(t *testing.T) {
	e := newTestEnv(t, "claude", "codex")
	dir := copyTree(t, filepath.Join("..", "..", "bridge", "testdata", "channel"))
	ch := filepath.Join(dir, "agent-os-paper")
	os.WriteFile(filepath.Join(ch, "msg-20260111-170000-gemini-dead.json"), []byte(`{"id": "msg-x", "from": "gemini", "to":`), 0o644)
	os.WriteFile(filepath.Join(ch, "msg-20260111-170100-gemini-beef.json"), []byte(`{"from":"gemini","to":"codex","content":{"text":"ok"},"timestamp":"soon"}`), 0o644)
	// Same id as a fixture, other content: the cluster refuses it whole.
	os.WriteFile(filepath.Join(ch, "msg-20260111-170200-codex-f00d.json"),
		[]byte(`{"id":"msg-20260111-163300-codex-a1b2","timestamp":"2026-01-11T17:02:00Z","from":"codex","to":"claude","content":"other"}`), 0o644)
	for run := 0; run < 2; run++ {
		r := e.run("", "import", dir)
		if r.err == nil || ExitCode(r.err) != 1 {
			t.Fatalf("run %d: err %v, want exit 1", run, r.err)
		}
		for _, w := range []string{
			"maosctl: skipped agent-os-paper/msg-20260111-170000-gemini-dead.json: not a JSON object",
			"maosctl: skipped agent-os-paper/msg-20260111-170100-gemini-beef.json: timestamp",
			"maosctl: skipped agent-os-paper/msg-20260111-170200-codex-f00d.json: id msg-20260111-163300-codex-a1b2 already holds a different message",
			"3 file(s) skipped",
		} {
			if !strings.Contains(r.errOut, w) {
				t.Errorf("run %d: stderr %q lacks %q", run, r.errOut, w)
			}
		}
		want := "imported 3, already there 0, skipped 3, ignored 0\n"
		if run == 1 {
			want = "imported 0, already there 3, skipped 3, ignored 0\n"
		}
		if r.out != want {
			t.Errorf("run %d: stdout %q, want %q", run, r.out, want)
		}
	}
	if n := countMessages(t, e); n != 3 {
		t.Errorf("%d messages stored, want the 3 good ones", n)
	}
	if m, _ := e.svc.State().Message("msg-20260111-163300-codex-a1b2"); m == nil || m.Content.Text != "@claude can you draft section 3?" {
		t.Errorf("conflicting file changed the stored message: %+v", m)
	}
	e.fail([]string{"import"}, "DIR")
	e.fail([]string{"import", filepath.Join(dir, "nope")}, "not a folder")
	e.fail([]string{"import", "--channel", "Bad Name", dir}, "--channel")
}

type fileStamp struct {
	ino   uint64
	mtime time.Time
}

func stamps(t *testing.T, dir string) map[string]fileStamp {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]fileStamp{}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = fileStamp{info.Sys().(*syscall.Stat_t).Ino, info.ModTime()}
	}
	return out
}

// jqWatch reads the folder the way the seed's watchers do: a shell loop
// over msg-*.json with jq pulling fields out of each file.
func jqWatch(t *testing.T, dir, agent string) []string {
	t.Helper()
	testenv.Tool(t, "jq", "the seed's shell watcher reads the mirrored files with it; apt-get install -y jq")
	script := `
AGENT="$1"
for file in "$2"/msg-*.json; do
  [ -e "$file" ] || continue
  from=$(jq -r '.from' "$file")
  to=$(jq -r '.to' "$file")
  text=$(jq -r '.content.text' "$file")
  [ "$from" = "$AGENT" ] && continue
  if [ "$to" = "$AGENT" ] || echo "$text" | grep -q "@${AGENT}"; then
    echo "$(jq -r '[.id, .session_id, .type, (.content.artifacts|length|tostring), (.metadata.in_reply_to // "-")] | join(" ")' "$file") $from: $text"
  fi
done`
	out, err := exec.Command("bash", "-c", script, "watch", agent, dir).CombinedOutput()
	if err != nil {
		t.Fatalf("jq loop: %v: %s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	sort.Strings(lines)
	return lines
}

func TestMirrorJQWatcher(t *testing.T) {
	e := newTestEnv(t, "claude", "codex")
	e.ok("import", filepath.Join("..", "..", "bridge", "testdata", "channel"))
	dir := filepath.Join(t.TempDir(), "agent-os-paper")
	out := e.ok("mirror", "--channel", "agent-os-paper", "--dir", dir)
	if n := strings.Count(out, "\n"); n != 3 {
		t.Fatalf("mirror printed %q, want 3 files", out)
	}
	got := jqWatch(t, dir, "codex")
	want := []string{
		"msg-20260111-155709-qc-1-b4f6 agent-os-paper qc_review 0 - qc-1: Team update: Phase 1 complete. @codex @gemini please review",
		"msg-20260111-163315-claude-4c78 agent-os-paper chat 1 msg-20260111-163300-codex-a1b2 claude: Your message text here",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("jq watcher saw\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// A second run writes nothing and touches no file.
	before := stamps(t, dir)
	if out := e.ok("mirror", "--channel", "agent-os-paper", "--dir", dir); out != "" {
		t.Errorf("second mirror printed %q, want nothing", out)
	}
	e.send("agent-os-paper", "gemini", "codex", "@codex section 4 is up")
	out = e.ok("--json", "mirror", "--channel", "agent-os-paper", "--dir", dir)
	var line struct {
		File, ID string
		Seq      uint64
	}
	if err := json.Unmarshal([]byte(out), &line); err != nil || !strings.HasPrefix(line.ID, "msg-") || line.Seq == 0 {
		t.Fatalf("--json mirror printed %q: %v", out, err)
	}
	after := stamps(t, dir)
	if len(after) != len(before)+1 {
		t.Fatalf("%d files after the new message, want %d: %v", len(after), len(before)+1, after)
	}
	for name, s := range before {
		if after[name] != s {
			t.Errorf("%s was rewritten: %+v → %+v", name, s, after[name])
		}
	}
	if got := jqWatch(t, dir, "codex"); len(got) != 3 || !strings.Contains(strings.Join(got, "\n"), "gemini: @codex section 4 is up") {
		t.Errorf("jq watcher after the new message: %q", got)
	}
	e.fail([]string{"mirror", "--dir", dir}, "--channel")
	e.fail([]string{"mirror", "--channel", "agent-os-paper"}, "--dir")
	e.fail([]string{"mirror", "--channel", "Bad!", "--dir", dir}, "--channel")
}

func TestMirrorFollow(t *testing.T) {
	e := newTestEnv(t, "claude")
	dir := t.TempDir()
	first := e.send("ops", "codex", "claude", "before")
	// A file already there stays as it is, and following resumes after it.
	m, err := e.svc.State().Message(first)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bridge.WriteFile(dir, m); err != nil {
		t.Fatal(err)
	}
	before := stamps(t, dir)
	mirror := e.follow("mirror", "--channel", "ops", "--dir", dir, "-f")
	second := bridgeSend(t, e, "ops", "claude", "codex", "after")
	bridgeSend(t, e, "other", "claude", "codex", "elsewhere")
	waitFile := func(path string) {
		t.Helper()
		mirror.waitUntil(func() bool { _, err := os.Stat(path); return err == nil })
	}
	path := filepath.Join(dir, second+".json")
	waitFile(path)
	// The stream is live now: this one arrives while following.
	third := bridgeSend(t, e, "ops", "codex", "claude", "live")
	waitFile(filepath.Join(dir, third+".json"))
	mirror.stop()
	if want := path + "\n" + filepath.Join(dir, third+".json") + "\n"; mirror.out.String() != want || mirror.errOut.String() != "" {
		t.Errorf("mirror -f printed %q (stderr %q), want %q", mirror.out.String(), mirror.errOut.String(), want)
	}
	after := stamps(t, dir)
	if len(after) != 3 || after[first+".json"] != before[first+".json"] {
		t.Errorf("files %v, want the untouched first, the second and the third", after)
	}
	var f bridge.FileMessage
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(b, &f); err != nil || f.From != "claude" || f.To != "codex" || f.Content.Text != "after" || f.SessionID != "ops" {
		t.Errorf("%s: %s (%v)", path, b, err)
	}
}

// A seed 004 code-of-conduct flag imported from a file is stored for
// moderators only, as the same JSON posted to the API is.
func TestImportCoCFlagIsForModerators(t *testing.T) {
	e := newTestEnv(t, "orchestrator")
	raw, err := os.ReadFile(filepath.Join("..", "..", "dialect", "testdata", "seed004_coc.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "shared", "messages", "inbox", "orchestrator")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "flag.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	rep, r := importReport(t, e, "--channel", "moderation", filepath.Dir(filepath.Dir(filepath.Dir(dir))))
	if r.err != nil || len(rep.Imported) != 1 {
		t.Fatalf("import: %+v, err %v, stderr %q", rep, r.err, r.errOut)
	}
	m := e.svc.Stored(rep.Imported[0].ID)
	if m == nil || m.Visibility != api.VisibilityModerators || m.Type != fsm.TypeCoCViolationFlag || m.From != "community" {
		t.Errorf("stored %+v, want a coc_violation_flag for moderators", m)
	}
}

// mirror never writes a private message into the folder (a folder has no
// per-reader access control), and says so: a line for each one and the
// count.
func TestMirrorSaysWhatItSkipped(t *testing.T) {
	e := newTestEnv(t, "claude")
	pub := e.send("ops", "codex", "claude", "public")
	priv := e.send("ops", "codex", "claude", "between us", "--private")
	dir := filepath.Join(t.TempDir(), "ops")
	r := e.run("", "mirror", "--channel", "ops", "--dir", dir)
	if r.err != nil {
		t.Fatalf("mirror: %v, stderr %q", r.err, r.errOut)
	}
	if r.out != filepath.Join(dir, pub+".json")+"\n" {
		t.Errorf("mirror printed %q, want only the public file", r.out)
	}
	if _, err := os.Stat(filepath.Join(dir, priv+".json")); !os.IsNotExist(err) {
		t.Errorf("the private message was written (stat: %v)", err)
	}
	m, err := e.svc.State().Message(priv)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		fmt.Sprintf("maosctl: skipped #%d %s: private, and a shared folder would show it to every reader\n", m.Seq, priv),
		"maosctl: skipped 1 message(s) not for everyone (private or for moderators only)\n",
	} {
		if !strings.Contains(r.errOut, want) {
			t.Errorf("stderr %q lacks %q", r.errOut, want)
		}
	}
}
