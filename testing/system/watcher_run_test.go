package system

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/cluster/clustertest"
	"github.com/maos-project/maos/watcher"
)

// startWatcher runs watcher.Run for cfg against c until the returned stop
// is called (which waits for Run to return).
func startWatcher(t *testing.T, c *client.Client, yml string) (stop func()) {
	t.Helper()
	f, err := watcher.Parse([]byte(yml))
	if err != nil {
		t.Fatalf("watcher config: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- watcher.Run(ctx, f, watcher.Options{Client: c, BackoffBase: 10 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	}()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("watcher.Run: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// repliesTo returns the messages of m's thread that answer m.
func repliesTo(t *testing.T, c *client.Client, id string) []*api.Message {
	t.Helper()
	p, err := c.Thread(context.Background(), id, 0, 500, api.Strong)
	if err != nil {
		return nil
	}
	var out []*api.Message
	for _, m := range p.Messages {
		if m.InReplyTo == id {
			out = append(out, m)
		}
	}
	return out
}

// awaitReplies waits (30 s at most) for a reply to m and returns the
// replies to it.
func awaitReplies(t *testing.T, c *client.Client, m *api.Message) []*api.Message {
	t.Helper()
	clustertest.WaitFor(t, 30*time.Second, "a reply to "+m.ID, func() bool { return len(repliesTo(t, c, m.ID)) > 0 })
	return repliesTo(t, c, m.ID)
}

// answeredOnce fails the test unless each of msgs has exactly one reply.
func answeredOnce(t *testing.T, c *client.Client, msgs ...*api.Message) {
	t.Helper()
	for _, m := range msgs {
		if n := len(repliesTo(t, c, m.ID)); n != 1 {
			t.Fatalf("%s has %d replies, want 1", m.ID, n)
		}
	}
}

// sendJob sends m from lead in channel dev, titled "job ID" with the text
// "please do ID", and returns it with its seq and time.
func sendJob(t *testing.T, c *client.Client, m *api.Message) *api.Message {
	t.Helper()
	m.Channel, m.From, m.Title, m.Content = "dev", "lead", "job "+m.ID, api.Content{Text: "please do " + m.ID}
	resp, err := c.Send(context.Background(), m)
	if err != nil {
		t.Fatalf("send %s: %v", m.ID, err)
	}
	m.Seq, m.Timestamp = resp.Seq, resp.Timestamp
	return m
}

func waitRegistered(t *testing.T, c *client.Client, id string) {
	t.Helper()
	clustertest.WaitFor(t, 30*time.Second, id+" registered", func() bool {
		_, err := c.Agent(context.Background(), id, api.Strong)
		return err == nil
	})
}

func TestWatcherAnswersOnceAcrossNodesAndResumesAfterCursor(t *testing.T) {
	c := clustertest.New(t, 3)
	nodeA, nodeC := c.Nodes[0], c.Nodes[2]
	logFile := filepath.Join(t.TempDir(), "invocations")
	cfg := fmt.Sprintf(`
agents:
  - id: bob
    role: worker
    command: ["sh", "-c", "echo \"$MAOS_MESSAGE_ID $MAOS_AGENT_ROLE $MAOS_SESSION_ID\" >> %s; exec %s --json"]
    context_messages: 3
`, logFile, stubmodelBin)
	registerAgents(t, nodeA.Client, "amy")
	stop := startWatcher(t, nodeC.Client, cfg)
	waitRegistered(t, nodeA.Client, "bob")
	ctx := context.Background()

	send := func(id, typ string) *api.Message {
		t.Helper()
		return sendJob(t, nodeA.Client, &api.Message{ID: id, To: api.Recipients{"role:worker"}, Type: typ})
	}
	// Not for bob: another recipient, and bob's own message.
	if _, err := nodeA.Client.Send(ctx, &api.Message{ID: "other-1", Channel: "dev", From: "lead", To: api.Recipients{"amy"}, Content: api.Content{Text: "hi amy"}}); err != nil {
		t.Fatal(err)
	}
	m1 := send("job-1", "chat")
	r := awaitReplies(t, nodeA.Client, m1)
	if len(r) != 1 || r[0].ID != watcher.ReplyID("bob", m1) || r[0].From != "bob" || r[0].Type != "response" ||
		r[0].Channel != "dev" || r[0].Content.Text != "stub answer to job-1" || len(r[0].To) != 1 || r[0].To[0] != "lead" {
		t.Fatalf("replies to job-1: %+v", r)
	}
	clustertest.WaitFor(t, 30*time.Second, "cursor past job-1", func() bool {
		cur, err := nodeA.Client.Cursor(ctx, "bob", api.Strong)
		return err == nil && cur.Seq >= m1.Seq
	})
	stop()

	// The restarted watcher (against another node) resumes after the cursor:
	// job-1 is not run again, job-2 (a task) gets a task_result.
	stop2 := startWatcher(t, c.Nodes[1].Client, cfg)
	m2 := send("job-2", "task_assign")
	r2 := awaitReplies(t, nodeA.Client, m2)
	if len(r2) != 1 || r2[0].Type != "task_result" || r2[0].Content.Text != "stub answer to job-2" {
		t.Fatalf("replies to job-2: %+v", r2)
	}
	clustertest.WaitFor(t, 30*time.Second, "cursor past job-2", func() bool {
		cur, err := nodeA.Client.Cursor(ctx, "bob", api.Strong)
		return err == nil && cur.Seq >= m2.Seq
	})
	stop2()
	if n := len(repliesTo(t, nodeA.Client, m1.ID)); n != 1 {
		t.Fatalf("job-1 has %d replies after the restart, want 1", n)
	}
	data, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(data), "job-1 worker dev\njob-2 worker dev\n"; got != want {
		t.Fatalf("invocations:\n%s\nwant:\n%s", got, want)
	}
	other, err := nodeA.Client.Message(ctx, "other-1", api.Strong)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nodeA.Client.Message(ctx, watcher.ReplyID("bob", other), api.Strong); err == nil {
		t.Fatal("the watcher answered a message not meant for bob")
	}
}

func TestWatcherRetriesThenPostsIncident(t *testing.T) {
	c := clustertest.New(t, 3)
	logFile := filepath.Join(t.TempDir(), "attempts")
	startWatcher(t, c.Nodes[2].Client, fmt.Sprintf(`
agents:
  - id: flaky
    command: ["sh", "-c", "echo try >> %s; exec %s --fail"]
    retries: 2
`, logFile, stubmodelBin))
	waitRegistered(t, c.Nodes[0].Client, "flaky")
	m := &api.Message{ID: "ask-1", Channel: "dev", From: "lead", To: api.Recipients{"flaky"}, Content: api.Content{Text: "answer me"}}
	if _, err := c.Nodes[0].Client.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	r := awaitReplies(t, c.Nodes[0].Client, m)
	if len(r) != 1 || r[0].Type != "incident" || !strings.Contains(r[0].Content.Text, "exit code: 3") ||
		!strings.Contains(r[0].Content.Text, "failing as asked (--fail)") || !strings.Contains(r[0].Content.Text, "after 3 attempt(s)") {
		t.Fatalf("incident: %+v", r)
	}
	data, _ := os.ReadFile(logFile)
	if n := strings.Count(string(data), "try"); n != 3 {
		t.Fatalf("%d attempts, want 1 + 2 retries", n)
	}
}
