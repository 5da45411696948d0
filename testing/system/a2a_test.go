package system

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/maos-project/maos/a2ahost"
	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/testing/harness"
)

// a2aWait bounds each A2A wait: a watcher's claim and a stub run (a few
// seconds), an election after a kill.
const a2aWait = 90 * time.Second

// TestA2A is issue #30's inbound promise through the built binaries: a
// 3-node cluster with --auth; n1 runs the watchers of three agents, each
// the stub model (a2a-quick: three progress lines over three seconds, writing its
// artifact; a2a-gated: one line, then a completion that asks approval;
// a2a-slow: six lines over six seconds). The A2A client is a2a-go's own
// (agentcard's resolver, a2aclient over JSON-RPC) with a bearer token of
// lead: StreamToCompletedWithArtifact uses a plain agent token (a task's
// creator reads the outputs its completion names), the others a
// moderator's. The subtests run in order
// on one cluster; Failover, which kills n2, is last. BlockingSend checks
// that a SendMessage without returnImmediately answers the task done.
func TestA2A(t *testing.T) {
	work := t.TempDir()
	c := harness.NewCluster(t, harness.Options{Maosd: maosdBin, Nodes: 3, AuthOnly: true, NodeArgs: a2aNodeArgs(t, work)})
	admin := c.Node("n1").Client()
	ctx := t.Context()
	for _, id := range []string{"a2a-quick", "a2a-gated", "a2a-slow"} {
		waitRegistered(t, admin, id)
	}
	_, err := admin.RegisterAgent(ctx, api.RegisterAgentCommand{ID: "lead", Role: "lead"})
	harness.NoErr(t, err)
	tok, err := admin.CreateToken(ctx, "lead", api.TokenRoleModerator)
	harness.NoErr(t, err)
	agentTok, err := admin.CreateToken(ctx, "lead", api.TokenRoleAgent)
	harness.NoErr(t, err)
	for _, n := range c.Nodes() {
		for _, secret := range []string{tok.Token, agentTok.Token} {
			harness.NoErr(t, harness.WaitFor(a2aWait, n.ID+" accepts lead's token", func() error {
				me, err := n.Client().WithToken(secret).WhoAmI(ctx)
				if err == nil && me.Agent != "lead" {
					err = fmt.Errorf("whoami %+v", me)
				}
				return err
			}))
		}
	}
	s := &a2aSuite{c: c, token: tok.Token, agentToken: agentTok.Token, push: newPushReceiver(t)}
	t.Run("StreamToCompletedWithArtifact", s.testQuick)
	t.Run("BlockingSend", s.testBlocking)
	t.Run("ApprovalIsInputRequired", s.testGated)
	t.Run("PushNotifications", s.testPush)
	t.Run("Failover", s.testFailover)
}

type a2aSuite struct {
	c          *harness.Cluster
	token      string // lead's, a moderator's
	agentToken string // lead's, a plain agent's
	push       *pushReceiver
}

// a2aNodeArgs runs, on n1 only, the watchers of the three stub agents,
// in workdir (where the stub writes its artifact).
func a2aNodeArgs(t *testing.T, workdir string) func(id string) []string {
	t.Helper()
	agent := func(id string, args ...string) string {
		argv := fmt.Sprintf("%q", stubmodelBin)
		for _, a := range args {
			argv += fmt.Sprintf(", %q", a)
		}
		return fmt.Sprintf(`  - id: %s
    role: a2a
    command: [%s]
    workdir: %q
    context_messages: 0
    retries: 0
    timeout: 120s
`, id, argv, workdir)
	}
	cfg := filepath.Join(t.TempDir(), "agents.yaml")
	harness.NoErr(t, os.WriteFile(cfg, []byte("agents:\n"+
		agent("a2a-quick", "--progress", "3", "--sleep", "3s", "--write-artifact")+
		agent("a2a-gated", "--progress", "1", "--requires-approval")+
		agent("a2a-slow", "--progress", "6", "--sleep", "6s", "--write-artifact")), 0o644))
	return func(id string) []string {
		push := []string{"--a2a-push-allow", "127.0.0.1"}
		if id == "n1" {
			return append(push, "--agents", cfg)
		}
		return push
	}
}

// bearerClient is an http.Client that sends token as its bearer token.
func bearerClient(token string) *http.Client {
	return &http.Client{Transport: bearerRT{token}}
}

type bearerRT struct{ token string }

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// client resolves agent's card at node n (its /a2a/agents/{id}) and
// builds a2a-go's client on it, both with the suite's token.
func (s *a2aSuite) client(t *testing.T, n *harness.Node, agent string) *a2aclient.Client {
	t.Helper()
	var cl *a2aclient.Client
	harness.NoErr(t, harness.WaitFor(a2aWait, "the card of "+agent+" at "+n.ID, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
		defer cancel()
		card, err := agentcard.NewResolver(bearerClient(s.token)).Resolve(ctx, "http://"+n.APIAddr()+a2ahost.AgentPath(agent),
			agentcard.WithRequestHeader("Authorization", "Bearer "+s.token))
		if err != nil {
			return err
		}
		if card.Name != agent || card.SupportedInterfaces[0].URL != "http://"+n.APIAddr()+a2ahost.AgentPath(agent) {
			return fmt.Errorf("card %+v", card)
		}
		cl, err = a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(bearerClient(s.token)))
		return err
	}))
	return cl
}

// got is one event of a stream, with what the tests compare.
type got struct {
	ev    a2a.Event
	kind  string // task, status, artifact
	state a2a.TaskState
	words string // the status message's text
	id    string // its MetaEventID
}

func gotOf(ev a2a.Event) got {
	var (
		g    = got{ev: ev}
		st   *a2a.TaskStatus
		meta map[string]any
	)
	switch e := ev.(type) {
	case *a2a.Task:
		g.kind, st, meta = "task", &e.Status, e.Metadata
	case *a2a.TaskStatusUpdateEvent:
		g.kind, st, meta = "status", &e.Status, e.Metadata
	case *a2a.TaskArtifactUpdateEvent:
		g.kind, meta = "artifact", e.Metadata
	}
	if st != nil {
		g.state = st.State
		if st.Message != nil && len(st.Message.Parts) > 0 {
			g.words = st.Message.Parts[0].Text()
		}
	}
	g.id, _ = meta[a2ahost.MetaEventID].(string)
	return g
}

func (g got) String() string {
	return fmt.Sprintf("%s %s %q @%s", g.kind, strings.TrimPrefix(string(g.state), "TASK_STATE_"), g.words, g.id)
}

// stream reads events in a goroutine onto the channel, closed at the
// stream's end; an error is the last item, as a got of kind "error".
func stream(events func(yield func(a2a.Event, error) bool)) <-chan got {
	out := make(chan got, 64)
	go func() {
		defer close(out)
		for ev, err := range events {
			if err != nil {
				out <- got{kind: "error", words: err.Error()}
				return
			}
			out <- gotOf(ev)
		}
	}()
	return out
}

// readAll reads ch to its end, bounded by a2aWait.
func readAll(t *testing.T, ch <-chan got) []got {
	t.Helper()
	var out []got
	deadline := time.After(a2aWait)
	for {
		select {
		case g, ok := <-ch:
			if !ok {
				return out
			}
			out = append(out, g)
		case <-deadline:
			t.Fatalf("the stream did not end in %s; so far %v", a2aWait, out)
		}
	}
}

// until reads ch until an event satisfies ok, and returns the events so
// far (it included); the stream ending first fails the test.
func until(t *testing.T, ch <-chan got, what string, ok func(got) bool) []got {
	t.Helper()
	var out []got
	deadline := time.After(a2aWait)
	for {
		select {
		case g, open := <-ch:
			if !open {
				t.Fatalf("the stream ended before %s: %v", what, out)
			}
			out = append(out, g)
			if ok(g) {
				return out
			}
		case <-deadline:
			t.Fatalf("no %s in %s; so far %v", what, a2aWait, out)
		}
	}
}

// sendStreaming sends text to cl's agent as a streaming message.
func sendStreaming(ctx context.Context, cl *a2aclient.Client, text string) <-chan got {
	return stream(cl.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))}))
}

// taskID is the id of the stream's first event, the Task.
func taskID(t *testing.T, evs []got) string {
	t.Helper()
	task, ok := evs[0].ev.(*a2a.Task)
	if !ok {
		t.Fatalf("first event %v, want the Task", evs[0])
	}
	return string(task.ID)
}

// (a) A streaming message to a2a-quick through n2: the stream goes
// SUBMITTED (the Task) → WORKING, with the stub's progress words →
// COMPLETED, the result artifact just before the final status; the task
// read back holds the stub's file as a URL file part, whose bytes, read
// with the token from another node, are the stub's answer. All of it with
// lead's plain agent token: the creator reads the task's outputs.
func (s *a2aSuite) testQuick(t *testing.T) {
	s = &a2aSuite{c: s.c, token: s.agentToken, agentToken: s.agentToken, push: s.push}
	n2, n3 := s.c.Node("n2"), s.c.Node("n3")
	cl := s.client(t, n2, "a2a-quick")
	evs := readAll(t, sendStreaming(t.Context(), cl, "Answer the quick question"))
	id := taskID(t, evs)
	t.Logf("stream of %s: %v", id, evs)
	last := evs[len(evs)-1]
	if (evs[0].state != a2a.TaskStateSubmitted && evs[0].state != a2a.TaskStateWorking) || last.kind != "status" || last.state != a2a.TaskStateCompleted {
		t.Fatalf("stream %v: want the Task SUBMITTED (or WORKING: the watcher may claim it before it is read) first, COMPLETED last", evs)
	}
	steps := 0
	for i, g := range evs[1 : len(evs)-1] {
		switch {
		case g.kind == "status" && g.state == a2a.TaskStateWorking:
			if strings.HasPrefix(g.words, "step ") && strings.HasSuffix(g.words, " of 3") {
				steps++
			}
		case g.kind == "artifact" && i == len(evs)-3:
		default:
			t.Errorf("event %d %v: want WORKING updates, then the artifact just before COMPLETED", i+1, g)
		}
	}
	if steps == 0 || evs[len(evs)-2].kind != "artifact" {
		t.Errorf("stream %v: want WORKING updates with the stub's words (\"step i of 3\") and the result artifact", evs)
	}
	task, err := cl.GetTask(t.Context(), &a2a.GetTaskRequest{ID: a2a.TaskID(id)})
	harness.NoErr(t, err)
	if task.Status.State != a2a.TaskStateCompleted || len(task.Artifacts) != 1 {
		t.Fatalf("GetTask: %s with %d artifacts, want COMPLETED with the result", task.Status.State, len(task.Artifacts))
	}
	var fileURL string
	for _, p := range task.Artifacts[0].Parts {
		if u, ok := p.Content.(a2a.URL); ok {
			fileURL = string(u)
		}
	}
	if !strings.HasPrefix(fileURL, "http://"+n2.APIAddr()+"/v1/artifacts/sha256:") {
		t.Fatalf("result parts %+v: want a URL file part under n2's /v1/artifacts/", task.Artifacts[0].Parts)
	}
	u, err := url.Parse(fileURL)
	harness.NoErr(t, err)
	body := getWithToken(t, "http://"+n3.APIAddr()+u.Path, s.token)
	if want := "stub answer to " + id + "\n"; body != want {
		t.Errorf("GET %s from n3: %q, want the stub's file %q", u.Path, body, want)
	}
}

// A SendMessage without returnImmediately, through n3, answers once
// the stub has done the task: COMPLETED, with the result artifact.
func (s *a2aSuite) testBlocking(t *testing.T) {
	cl := s.client(t, s.c.Node("n3"), "a2a-quick")
	ctx, cancel := context.WithTimeout(t.Context(), a2aWait)
	defer cancel()
	res, err := cl.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("Answer when done"))})
	harness.NoErr(t, err)
	task, ok := res.(*a2a.Task)
	if !ok || task.Status.State != a2a.TaskStateCompleted || len(task.Artifacts) != 1 ||
		task.Artifacts[0].Parts[0].Text() != "stub answer to "+string(task.ID) {
		t.Errorf("blocking send: %+v, want the task COMPLETED with the stub's answer", res)
	}
}

// getWithToken GETs u with the bearer token and answers the body; not
// 200 fails the test.
func getWithToken(t *testing.T, u, token string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	harness.NoErr(t, err)
	resp, err := bearerClient(token).Do(req)
	harness.NoErr(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	harness.NoErr(t, err)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", u, resp.StatusCode, b)
	}
	return string(b)
}

// (c) a2a-gated's completion asks approval: the stream (through n3) and
// GetTask (through n1) show INPUT_REQUIRED, the status message the
// approval's question (the stub's rationale, the approval, its approver
// lead, the proposed action), and stay so; once lead approves with
// maosctl approval approve, the stream goes on to COMPLETED.
func (s *a2aSuite) testGated(t *testing.T) {
	n1, n3 := s.c.Node("n1"), s.c.Node("n3")
	ch := sendStreaming(t.Context(), s.client(t, n3, "a2a-gated"), "Deploy when ready")
	evs := until(t, ch, "INPUT_REQUIRED", func(g got) bool { return g.state == a2a.TaskStateInputRequired })
	id := taskID(t, evs)
	mt, err := readTask(n1.Client(), id)
	harness.NoErr(t, err)
	if mt.State != api.TaskAwaitingApproval || mt.ApprovalID == "" {
		t.Fatalf("maos task: %s", describe(mt))
	}
	ap, err := n1.Client().Approval(t.Context(), mt.ApprovalID)
	harness.NoErr(t, err)
	asked := evs[len(evs)-1].words
	for _, want := range []string{"stub asks to deploy " + id, ap.ID, "lead", ap.ActionHash, `{"deploy":"` + id + `"}`} {
		if !strings.Contains(asked, want) {
			t.Errorf("INPUT_REQUIRED's message %q does not say %q", asked, want)
		}
	}
	viaN1 := s.client(t, n1, "a2a-gated")
	task, err := viaN1.GetTask(t.Context(), &a2a.GetTaskRequest{ID: a2a.TaskID(id)})
	harness.NoErr(t, err)
	if task.Status.State != a2a.TaskStateInputRequired || task.Status.Message == nil || task.Status.Message.Parts[0].Text() != asked {
		t.Fatalf("GetTask through n1 before the approval: %s %+v, want INPUT_REQUIRED asking %q", task.Status.State, task.Status.Message, asked)
	}
	ctl := exec.Command(maosctlBin, "--addr", n1.APIAddr(), "approval", "approve", ap.ID, "--approver", "lead", "--comment", "go")
	ctl.Env = append(os.Environ(), "MAOS_TOKEN="+s.token)
	var out bytes.Buffer
	ctl.Stdout, ctl.Stderr = &out, &out
	if err := ctl.Run(); err != nil {
		t.Fatalf("maosctl approval approve: %v\n%s", err, out.String())
	}
	rest := readAll(t, ch)
	if len(rest) != 2 || rest[0].kind != "artifact" || rest[1].state != a2a.TaskStateCompleted {
		t.Errorf("after the approval: %v, want the result artifact and COMPLETED", rest)
	}
	if task, err = viaN1.GetTask(t.Context(), &a2a.GetTaskRequest{ID: a2a.TaskID(id)}); err != nil || task.Status.State != a2a.TaskStateCompleted {
		t.Errorf("GetTask after the approval: %v %v, want COMPLETED", err, task)
	}
}

// pctSuffix is the " (NN%)" a progress event's detail adds to the words
// (or "NN%" alone, for a note without words).
var pctSuffix = regexp.MustCompile(`(^| \()\d+%\)?$`)

// (b) The stream's node dies mid-task. An update is what A2A's
// SubscribeToTask sends after its first event (the Task): a
// TaskStatusUpdateEvent, one per change of the task's A2A state or status
// message (TaskArtifactUpdateEvent is the result, sent once, just before
// the final status). a2a-slow's task is sent as a streaming message
// through n2, made the leader first; after its first WORKING update with
// the stub's words, n2 is SIGKILLed, so an election runs while the client
// resubscribes. Once the task has two more progress
// notes (so a stream that began from the task as it is then would miss
// one), the client subscribes on n3 with the last event id it got (Last-Event-ID, a2aclient's service parameter),
// again after each cut, until the task ends. What both streams delivered,
// the resubscription's first event (the Task) dropped when it is the last
// state already seen, is each transition of the task exactly once, in
// order, ending COMPLETED: the same (state, words, entry) list the task's
// maos history, read through n3, gives when each event is mapped as
// a2ahost maps it and repeats are dropped.
func (s *a2aSuite) testFailover(t *testing.T) {
	n2, n3 := s.c.Node("n2"), s.c.Node("n3")
	ctx := t.Context()
	// n2 leads, so its death also takes the leader: the resubscription
	// meets an election.
	harness.NoErr(t, harness.WaitFor(a2aWait, "n2 leads", func() error {
		if l, err := s.c.Leader(); err == nil && l == n2 {
			return nil
		}
		tctx, cancel := context.WithTimeout(ctx, readTimeout)
		defer cancel()
		_, err := n2.Client().TransferLeadership(tctx, n2.ID)
		if err == nil {
			err = errors.New("transferred; not yet seen by every node")
		}
		return err
	}))
	// With a push config: every update the client sees is pushed too,
	// though the leader that delivers it dies (checkPushed).
	s.waitVersion3(t)
	first := stream(s.client(t, n2, "a2a-slow").SendStreamingMessage(ctx, &a2a.SendMessageRequest{
		Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("Take your time")),
		Config:  &a2a.SendMessageConfig{PushConfig: s.push.config()}}))
	seen := until(t, first, "a WORKING update with the stub's words", func(g got) bool {
		return g.kind == "status" && g.state == a2a.TaskStateWorking && strings.HasPrefix(g.words, "step ")
	})
	id := taskID(t, seen)
	harness.NoErr(t, n2.Kill())
	for _, g := range readAll(t, first) {
		if g.kind != "error" {
			seen = append(seen, g)
		}
	}
	t.Logf("through n2 before it died: %v", seen)
	// Resubscribe only once the task has two more progress notes: a
	// resubscription that started from the task as it is then would lose
	// one.
	after := indexOfID(seen[len(seen)-1].id)
	harness.NoErr(t, harness.WaitFor(a2aWait, "two more progress notes of "+id, func() error {
		mt, err := readTask(n3.Client(), id)
		if err != nil {
			return err
		}
		notes := 0
		for _, e := range mt.History {
			if e.Seq > after && e.Event == "progress" {
				notes++
			}
		}
		if notes < 2 && !mt.State.Final() {
			return fmt.Errorf("%d notes after entry %d", notes, after)
		}
		return nil
	}))
	viaN3 := s.client(t, n3, "a2a-slow")
	for attempt := 0; !finalOf(seen); attempt++ {
		if attempt == 30 {
			t.Fatalf("the task is not final after %d resubscriptions: %v", attempt, seen)
		}
		last := seen[len(seen)-1]
		rctx := a2aclient.AttachServiceParams(ctx, a2aclient.ServiceParams{a2ahost.HeaderLastEventID: {last.id}})
		again := readAll(t, stream(viaN3.SubscribeToTask(rctx, &a2a.SubscribeToTaskRequest{ID: a2a.TaskID(id)})))
		t.Logf("resubscribed on n3 after %s: %v", last.id, again)
		if len(again) > 0 && again[0].kind == "task" && again[0].state == last.state && again[0].words == last.words {
			again = again[1:]
		}
		for _, g := range again {
			if g.kind == "error" {
				time.Sleep(time.Second) // an election after the kill: try again
				break
			}
			seen = append(seen, g)
		}
	}
	checkAgainstHistory(t, s, id, seen)
	s.checkPushed(t, id, seen)
}

// indexOfID is N of an "N:task" event id; 0 if it is not one.
func indexOfID(id string) uint64 {
	var n uint64
	if _, err := fmt.Sscanf(id, "%d:task", &n); err != nil {
		return 0
	}
	return n
}

// finalOf reports whether the events end in a final status.
func finalOf(evs []got) bool {
	if len(evs) == 0 {
		return false
	}
	switch evs[len(evs)-1].state {
	case a2a.TaskStateCompleted, a2a.TaskStateFailed, a2a.TaskStateCanceled, a2a.TaskStateRejected:
		return true
	}
	return false
}

// checkAgainstHistory compares the transitions a client saw of task id
// (seen: its events, the result artifact aside) with the task's maos
// history read through n3: each history event as a2ahost maps it (its
// state by a2ahost.State, the words of a progress note, none after a
// claim, the final status's after the end), repeats dropped, with the
// event's entry.
func checkAgainstHistory(t *testing.T, s *a2aSuite, id string, seen []got) {
	t.Helper()
	n3 := s.c.Node("n3")
	mt, err := readTask(n3.Client(), id)
	harness.NoErr(t, err)
	final, err := s.client(t, n3, "a2a-slow").GetTask(t.Context(), &a2a.GetTaskRequest{ID: a2a.TaskID(id)})
	harness.NoErr(t, err)
	// The client's first event is the Task as the entry it names left
	// it: the history up to that entry is one state.
	start := indexOfID(seen[0].id)
	var want []string
	prev := ""
	words := ""
	for _, e := range mt.History {
		switch {
		case e.Event == "progress":
			words = pctSuffix.ReplaceAllString(e.Detail, "")
		case e.State.Final():
			words = ""
			if m := final.Status.Message; m != nil {
				words = m.Parts[0].Text()
			}
		case e.Event == "claimed":
			words = ""
		}
		key := fmt.Sprintf("%s %q", strings.TrimPrefix(string(a2ahost.State(e.State)), "TASK_STATE_"), words)
		if e.Seq < start {
			continue // folded into the first event
		}
		if key != prev {
			want = append(want, fmt.Sprintf("%s @%d:task", key, e.Seq))
			prev = key
		}
	}
	var have []string
	artifacts := 0
	for i, g := range seen {
		if g.kind == "artifact" {
			artifacts++
			if i != len(seen)-2 || seen[i+1].id != g.id {
				t.Errorf("the artifact %v is not just before the final status, of the same entry", g)
			}
			continue
		}
		have = append(have, fmt.Sprintf("%s %q @%s", strings.TrimPrefix(string(g.state), "TASK_STATE_"), g.words, g.id))
	}
	if strings.Join(have, "\n") != strings.Join(want, "\n") || artifacts != 1 || mt.State != api.TaskSucceeded {
		t.Errorf("task %s (%s): the client saw %d artifacts and\n%s\nthe history (through n3) gives\n%s", id, describe(mt), artifacts,
			strings.Join(have, "\n"), strings.Join(want, "\n"))
	}
}
