package watcher

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
)

// runWatcher runs the watchers of yml against cl until the test ends.
func runWatcher(t *testing.T, cl *client.Client, yml string) {
	t.Helper()
	f, err := Parse([]byte(yml))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, f, Options{Client: cl, Logger: slog.New(slog.DiscardHandler), BackoffBase: 10 * time.Millisecond,
			Heartbeat: 50 * time.Millisecond, Dir: t.TempDir()})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	// The watcher registers its agents as it starts: a task to one
	// created before that is refused (404, not registered), as it was
	// once under load.
	for _, a := range f.Agents {
		waitFor(t, "agent "+a.ID+" registered by the watcher", func() bool {
			_, err := cl.Agent(ctx, a.ID, api.Local)
			return err == nil
		})
	}
}

func putBytes(t *testing.T, cl *client.Client, name string, b []byte) api.Artifact {
	t.Helper()
	a, err := cl.PutArtifact(context.Background(), bytes.NewReader(b), int64(len(b)), api.ArtifactUpload{Name: name, From: "lead"})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// An artifact that can no longer be fetched (deleted after the message
// referenced it) does not hold the message up: the prompt says so and
// the CLI runs; a file the CLI's artifact line names but that does not
// exist is named in the reply instead of being attached.
func TestArtifactsThatFail(t *testing.T) {
	svc, cl := apiNode(t, "w")
	ctx := context.Background()
	dir := t.TempDir()
	a := putBytes(t, cl, "gone.bin", []byte("soon deleted"))
	if _, err := cl.Send(ctx, &api.Message{ID: "job-1", Channel: "dev", From: "lead", To: api.Recipients{"w"},
		Content: api.Content{Text: "look", Artifacts: []api.ArtifactRef{{Ref: a.ID, Name: "gone.bin"}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.DeleteArtifact(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	// The watcher starts after the delete, so its fetch fails for sure.
	runWatcher(t, cl, fmt.Sprintf(`agents:
- id: w
  command: [sh, -c, 'grep -o "gone.bin: could not be fetched" /dev/stdin; echo "{\"type\":\"artifact\",\"path\":\"missing.txt\"}"']
  workdir: %q
  context_messages: 0
  retries: 0
`, dir))
	var r *api.Message
	waitFor(t, "the answer to job-1", func() bool {
		if m := svc.Stored("job-1"); m != nil {
			r = svc.Stored(ReplyID("w", m))
		}
		return r != nil
	})
	if !strings.HasPrefix(r.Content.Text, "gone.bin: could not be fetched") || !strings.Contains(r.Content.Text, "(not attached: missing.txt:") || len(r.Content.Artifacts) != 0 {
		t.Fatalf("reply %q artifacts %v; want the prompt's note echoed and missing.txt named, nothing attached", r.Content.Text, r.Content.Artifacts)
	}
}

// A task's context.artifacts are fetched into the shared context before
// its CLI runs, and the files its artifact lines name go back as artifact
// ids in the completion's outputs.
func TestTaskArtifacts(t *testing.T) {
	_, cl := apiNode(t)
	ctx := context.Background()
	dir, shared := t.TempDir(), t.TempDir()
	runWatcher(t, cl, fmt.Sprintf(`agents:
- id: w
  command: [sh, -c, 'tr a-z A-Z < "$MAOS_SHARED_CONTEXT/in.txt" > out.txt; echo "{\"type\":\"artifact\",\"path\":\"out.txt\"}"; echo done']
  workdir: %q
  shared_context: %q
  context_messages: 0
  retries: 0
`, dir, shared))
	in := []byte("shout this")
	a := putBytes(t, cl, "in.txt", in)
	taskCtx, _ := json.Marshal(map[string]any{"artifacts": []any{map[string]string{"id": a.ID, "name": "in.txt"}}})
	if _, err := cl.CreateTask(ctx, api.TaskCreateCommand{ID: "t-1", From: "lead", To: "w", Title: "shout", Context: taskCtx}); err != nil {
		t.Fatal(err)
	}
	task := waitTaskState(t, cl, "t-1", api.TaskSucceeded)
	out := bytes.ToUpper(in)
	sum := sha256.Sum256(out)
	if c := task.Completion; c.Result != "done" || len(c.Outputs) != 1 || c.Outputs[0] != api.ArtifactID(sum[:]) {
		t.Fatalf("completion %+v; want result done and out.txt's artifact id %s", c, api.ArtifactID(sum[:]))
	}
	var buf bytes.Buffer
	if _, err := cl.GetArtifact(ctx, task.Completion.Outputs[0], &buf); err != nil || !bytes.Equal(buf.Bytes(), out) {
		t.Fatalf("the output artifact: %q, %v", buf.String(), err)
	}
	if got, err := os.ReadFile(filepath.Join(shared, "in.txt")); err != nil || !bytes.Equal(got, in) {
		t.Fatalf("shared context's in.txt: %q, %v", got, err)
	}
}

func TestSharedContextDefaults(t *testing.T) {
	a := agent(t, "agents: [{id: w, command: [x]}]")
	t.Setenv(SharedContextEnv, "")
	if got := a.SharedContext("/var/maos/watcher"); got != "/var/maos/watcher/w/context" {
		t.Errorf("default = %s", got)
	}
	t.Setenv(SharedContextEnv, "/srv/shared")
	if got := a.SharedContext("/var/maos/watcher"); got != "/srv/shared" {
		t.Errorf("from the environment = %s", got)
	}
	a = agent(t, "agents: [{id: w, command: [x], env: {MAOS_SHARED_CONTEXT: /agent/env}}]")
	if got := a.SharedContext(""); got != "/agent/env" {
		t.Errorf("from the agent's env = %s", got)
	}
	a = agent(t, "agents: [{id: w, command: [x], shared_context: /yaml/dir, env: {MAOS_SHARED_CONTEXT: /agent/env}}]")
	if got := a.SharedContext(""); got != "/yaml/dir" {
		t.Errorf("from the YAML = %s", got)
	}
}

// A plain reply's seed 002 §6 lines: the file an artifact line names,
// relative to the CLI's directory (the agent's workdir, not the
// watcher's), is attached; a complete line's rationale stays in the
// reply; and MAOS_SHARED_CONTEXT is absolute even when the watcher's
// directory is given relative.
func TestReplyReportLines(t *testing.T) {
	svc, cl := apiNode(t, "w")
	base, workdir := t.TempDir(), t.TempDir()
	t.Chdir(base) // the watcher's working directory, where out.md is not
	t.Setenv(SharedContextEnv, "")
	f, err := Parse([]byte(fmt.Sprintf(`agents:
- id: w
  command: [sh, -c, 'printf report > out.md; echo "{\"type\":\"artifact\",\"path\":\"out.md\"}"; echo "{\"type\":\"complete\",\"result\":\"success\",\"rationale\":\"the spec asked for it\"}"; echo "ctx=$MAOS_SHARED_CONTEXT"']
  workdir: %q
  context_messages: 0
  retries: 0
`, workdir)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, f, Options{Client: cl, Logger: slog.New(slog.DiscardHandler), BackoffBase: 10 * time.Millisecond,
			Heartbeat: 50 * time.Millisecond, Dir: "watcher-dir"})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	if _, err := cl.Send(context.Background(), &api.Message{ID: "job-2", Channel: "dev", From: "lead", To: api.Recipients{"w"},
		Content: api.Content{Text: "write the report"}}); err != nil {
		t.Fatal(err)
	}
	var r *api.Message
	waitFor(t, "the answer to job-2", func() bool {
		if m := svc.Stored("job-2"); m != nil {
			r = svc.Stored(ReplyID("w", m))
		}
		return r != nil
	})
	sum := sha256.Sum256([]byte("report"))
	if len(r.Content.Artifacts) != 1 || r.Content.Artifacts[0].Ref != api.ArtifactID(sum[:]) || r.Content.Artifacts[0].Name != "out.md" {
		t.Errorf("reply artifacts %v; want out.md from the agent's workdir (%s)", r.Content.Artifacts, r.Content.Text)
	}
	if !strings.Contains(r.Content.Text, "rationale: the spec asked for it") || strings.Contains(r.Content.Text, `"type"`) {
		t.Errorf("reply text %q; want the complete line's rationale, no §6 line", r.Content.Text)
	}
	want := "ctx=" + filepath.Join(base, "watcher-dir", "w", "context")
	if !strings.Contains(r.Content.Text, want) {
		t.Errorf("reply text %q; want MAOS_SHARED_CONTEXT absolute: %q", r.Content.Text, want)
	}
}
