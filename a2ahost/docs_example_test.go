package a2ahost_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/maos-project/maos/a2ahost"
	"github.com/maos-project/maos/api"
)

// curlCall is one curl command of docs/A2A.md's Example: its headers, its
// URL and its JSON-RPC body (-d '…'), as written.
type curlCall struct {
	headers map[string]string
	url     string
	body    string
}

var (
	curlRE   = regexp.MustCompile(`(?s)curl -sN?((?: -H "[^"]*")*)\s*\\?\s*(\S+) -d '(.*?)'`)
	headerRE = regexp.MustCompile(`-H "([^:]+): ([^"]*)"`)
)

// exampleCalls reads the curl commands with a body from the section
// "## Example" of docs/A2A.md.
func exampleCalls(t *testing.T) []curlCall {
	t.Helper()
	doc, err := os.ReadFile("../docs/A2A.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(doc), "\n## Example\n")
	if !ok {
		t.Fatal("docs/A2A.md has no section ## Example")
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	var calls []curlCall
	for _, m := range curlRE.FindAllStringSubmatch(sec, -1) {
		c := curlCall{headers: map[string]string{}, url: m[2], body: m[3]}
		for _, h := range headerRE.FindAllStringSubmatch(m[1], -1) {
			c.headers[h[1]] = h[2]
		}
		calls = append(calls, c)
	}
	if len(calls) < 9 {
		t.Fatalf("found %d curl calls with a body in docs/A2A.md's Example, want the 9 it shows", len(calls))
	}
	return calls
}

// The Example of docs/A2A.md works as written, with curl's bodies sent
// byte for byte by a client that is not an SDK (A2A 1.0's and 0.3's): every call answers a
// JSON-RPC result, not an error; the send makes a maos task for coder-1
// from lead; the blocking send answers once its task ended (cancelled
// here, as nobody works it); the resumed stream starts from the id the
// first stream gave.
func TestDocsExampleRunsAsWritten(t *testing.T) {
	n := start(t)
	ctx := t.Context()
	for _, r := range []api.RegisterAgentCommand{{ID: "coder-1", Role: "coder", Capabilities: []string{"go"}}, {ID: "lead", Role: "lead"}} {
		if _, err := n.admin.RegisterAgent(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	tok, err := n.admin.CreateToken(ctx, "lead", "")
	if err != nil {
		t.Fatal(err)
	}
	ex := &example{t: t, n: n, token: tok.Token, a2a: n.url + a2ahost.AgentPath("coder-1")}
	if card := ex.get(ex.a2a + "/.well-known/agent-card.json"); !strings.Contains(card, `"name":"coder-1"`) {
		t.Fatalf("the card: %s", card)
	}
	for i, c := range exampleCalls(t) {
		ex.run(i, c)
	}
}

type example struct {
	t          *testing.T
	n          *node
	token, a2a string
	task       string // the first send's task id, for "task-…"
	lastEvent  string // the last maos_event_id a stream gave, for the resume
}

func (ex *example) get(url string) string {
	req, _ := http.NewRequestWithContext(ex.t.Context(), http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+ex.token)
	return ex.do(req)
}

func (ex *example) do(req *http.Request) string {
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		ex.t.Fatal(err)
	}
	defer res.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(res.Body)
	if res.StatusCode != http.StatusOK {
		ex.t.Fatalf("%s %s: HTTP %d %s", req.Method, req.URL, res.StatusCode, b.String())
	}
	return b.String()
}

// run sends call i as curl would, its placeholders replaced: $TOKEN,
// $A2A (any node: this test has one), "task-…" and the resume id.
func (ex *example) run(i int, c curlCall) {
	t := ex.t
	body := strings.ReplaceAll(c.body, "task-…", ex.task)
	url := ex.a2a
	switch {
	case c.url == "$A2A/v0.3":
		url += "/v0.3"
	case c.url != "$A2A" && !strings.HasSuffix(c.url, "/a2a/agents/coder-1"):
		t.Fatalf("call %d: url %q, want $A2A, $A2A/v0.3 or a node's /a2a/agents/coder-1", i, c.url)
	}
	var rpc struct {
		Method string `json:"method"`
		Params struct {
			Config *struct {
				ReturnImmediately bool `json:"returnImmediately"`
			} `json:"configuration"`
		} `json:"params"`
	}
	if err := json.Unmarshal([]byte(body), &rpc); err != nil {
		t.Fatalf("call %d's body is not JSON: %v\n%s", i, err, body)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+ex.token)
	for k, v := range c.headers {
		if k == "Last-Event-ID" {
			v = ex.lastEvent
		}
		if k != "Authorization" {
			req.Header.Set(k, v)
		}
	}
	blocking := rpc.Method == "SendMessage" && (rpc.Params.Config == nil || !rpc.Params.Config.ReturnImmediately)
	if blocking && !strings.Contains(body, "Bump the deps") {
		t.Fatalf("call %d: a blocking send, which waits for an outcome nobody gives; only the one of \"Bump the deps\" is cancelled by this test", i)
	}
	if blocking {
		go ex.cancelWhenSent()
	}
	out := ex.do(req)
	ex.check(i, rpc.Method, blocking, out)
}

// check reads call i's answer: one JSON-RPC result (or, for a stream,
// SSE data lines of results) and no error.
func (ex *example) check(i int, method string, blocking bool, out string) {
	t := ex.t
	lines := []string{out}
	if !strings.HasPrefix(strings.TrimSpace(out), "{") { // Server-Sent Events
		lines = nil
		sc := bufio.NewScanner(strings.NewReader(out))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
				lines = append(lines, strings.TrimSpace(d))
			}
		}
	}
	for _, l := range lines {
		var ans struct {
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(l), &ans); err != nil || ans.Error != nil || ans.Result == nil {
			t.Fatalf("call %d (%s): %s (%v), want a result", i, method, l, err)
		}
		if id := regexp.MustCompile(`"maos_event_id":"([^"]+)"`).FindStringSubmatch(l); id != nil {
			ex.lastEvent = id[1]
		}
		if ex.task == "" && method == "SendMessage" {
			ex.task = regexp.MustCompile(`"id":"(task-[^"]+)"`).FindStringSubmatch(l)[1]
			tk, err := ex.n.admin.Task(t.Context(), ex.task)
			if err != nil || tk.To != "coder-1" || tk.From != "lead" {
				t.Fatalf("the example's task %s: %+v (%v), want to coder-1 from lead", ex.task, tk, err)
			}
		}
		if method == "message/send" && !strings.Contains(l, `"kind":"task"`) {
			t.Fatalf("call %d, a 0.3 send: %s, want a 0.3 task", i, l)
		}
		if blocking && !strings.Contains(l, "TASK_STATE_CANCELED") {
			t.Fatalf("call %d, a blocking send: %s, want it answered once its task was cancelled", i, l)
		}
	}
}

// cancelWhenSent cancels, as lead, the newest task titled "Bump the
// deps" once the blocking send has made it, so that send answers.
func (ex *example) cancelWhenSent() {
	for range 200 {
		page, err := ex.n.admin.Tasks(ex.t.Context(), api.TaskQuery{To: "coder-1", State: api.TaskReady})
		if err == nil {
			for _, tk := range page.Tasks {
				if tk.Title == "Bump the deps" {
					_, _ = ex.n.admin.CancelTask(ex.t.Context(), api.TaskCancelCommand{ID: tk.ID, From: "lead"})
					return
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}
