package system

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/cluster/clustertest"
	"github.com/maos-project/maos/console"
	"github.com/maos-project/maos/testing/testenv"
	"github.com/maos-project/maos/transport"
)

// The web console in a real browser: headless Chromium (Debian's
// chromium; .ci/run installs it) driven by chromedp, against in-process
// nodes with the console mounted as maosd mounts it. A failing test saves
// a screenshot and logs its path. MAOS_CONSOLE_PNG=path makes
// TestConsoleLiveFeedApprovalsAndCluster write its screenshot there
// (make console-png: docs/console.png).

// withConsole mounts the console in front of a node's API.
func withConsole(s *clustertest.Setup) {
	tlsCfg := s.Config.ClientTLS
	s.Wrap = func(apiHandler http.Handler) http.Handler {
		return console.Mount(apiHandler, console.Options{ClientTLS: tlsCfg})
	}
}

// gossipOn runs the node's gossip on a free loopback port with
// memberlist's LAN timing, as maosd does: a dead node shows dead in about
// 5 s.
func gossipOn(s *clustertest.Setup) { s.Config.GossipAddr = "127.0.0.1:0" }

// browser starts a headless Chromium for the test (skipped when none is
// installed) and returns its context; when the test fails, a screenshot
// of the page is saved and its path logged.
func browser(t *testing.T) context.Context {
	t.Helper()
	testenv.Slow(t, "drives headless Chromium against a cluster")
	path := testenv.Tool(t, "chromium", "the console's browser tests drive it: apt-get install -y chromium")
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 860),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	if err := chromedp.Do(ctx); err != nil { // starts the browser, with no timeout
		cancelCtx()
		cancelAlloc()
		t.Fatalf("start chromium: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			if p, err := screenshot(ctx, ""); err == nil {
				t.Logf("screenshot of the failing page: %s", p)
			} else {
				t.Logf("no screenshot: %v", err)
			}
		}
		cancelCtx()
		cancelAlloc()
	})
	return ctx
}

// screenshot saves the page as PNG at path ("" for a new file in the
// system's temp dir, which outlives the test) and returns the path.
func screenshot(ctx context.Context, path string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		return "", err
	}
	if path == "" {
		f, err := os.CreateTemp("", "maos-console-*.png")
		if err != nil {
			return "", err
		}
		f.Close()
		path = f.Name()
	}
	return path, os.WriteFile(path, png, 0o644)
}

// browse runs browser actions, at most d; it fails the test naming what.
func browse(t *testing.T, ctx context.Context, d time.Duration, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if err := chromedp.Do(c, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// clickStable clicks the first node sel matches once it has stayed in the
// page between two looks 100 ms apart: a row rendered again between
// finding its node and clicking it loses the click ("Could not find node
// with given id"). At most 50 looks.
func clickStable(t *testing.T, ctx context.Context, what, sel string) {
	t.Helper()
	mark := fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false; const seen = e.dataset.seen === '1'; e.dataset.seen = '1'; return seen; })()`, sel)
	for i := 0; !eval[bool](t, ctx, mark); i++ {
		if i == 50 {
			t.Fatalf("%s: %s never stayed in the page for 100 ms", what, sel)
		}
		time.Sleep(100 * time.Millisecond)
	}
	browse(t, ctx, 5*time.Second, what, chromedp.Click(chromedp.CSS(sel)))
}

// text is the text of the first node sel matches, "" when none (now).
func text(ctx context.Context, sel string) string {
	c, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	s, _ := chromedp.Run(c, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q)||{}).textContent||""`, sel)))
	return s
}

// eval evaluates a JavaScript expression in the page, at most 5 s.
func eval[T any](t *testing.T, ctx context.Context, expr string, opts ...chromedp.EvaluateOption) T {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v, err := chromedp.Run(c, chromedp.Evaluate[T](expr, opts...))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

func send(t *testing.T, cl *client.Client, from, to, channel, typ, prio, title, body string) string {
	t.Helper()
	m := &api.Message{From: from, To: api.Recipients{to}, Channel: channel, Type: typ, Priority: api.Priority(prio), Title: title, Content: api.Content{Text: body}}
	r, err := cl.Send(context.Background(), m)
	if err != nil {
		t.Fatalf("send %q: %v", title, err)
	}
	return r.ID
}

// The console's main paths on a 3-node cluster: a message sent with the
// Go client shows in the feed within 2 s with no reload, a click opens its
// text, the Approve button approves in the API with the shown hash, and a
// node that stops turns dead (left, for a clean close) on the cluster view.
func TestConsoleLiveFeedApprovalsAndCluster(t *testing.T) {
	c := clustertest.New(t, 3, withConsole, gossipOn)
	n1, n2 := c.Nodes[0], c.Nodes[1]
	// Whom the mail, the tasks and the approval are for.
	for _, a := range []api.RegisterAgentCommand{{ID: "worker1", Role: "worker"}, {ID: "reviewer", Role: "reviewer"}, {ID: "operator", Role: "agent"}} {
		if _, err := n1.Client.RegisterAgent(context.Background(), a); err != nil {
			t.Fatal(err)
		}
	}
	ctx := browser(t)

	send(t, n1.Client, "supervisor", "worker1", "demo", "task_assign", "high", "Retry logic", "Add a capped exponential backoff.")
	send(t, n1.Client, "worker1", "supervisor", "demo", "task_result", "normal", "Backoff done", "Capped at 5 s, full jitter.")
	if _, err := n1.Client.CreateTask(context.Background(), api.TaskCreateCommand{ID: "demo-impl", From: "supervisor", To: "role:worker", Title: "Implement the retry backoff", Channel: "demo"}); err != nil {
		t.Fatal(err)
	}
	if _, err := n1.Client.CreateTask(context.Background(), api.TaskCreateCommand{ID: "demo-review", From: "supervisor", To: "role:reviewer", Title: "Review the backoff", Channel: "demo", DependsOn: []string{"demo-impl"}}); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	browse(t, ctx, 20*time.Second, "open the console on n2 and see the stream live",
		chromedp.Navigate("http://"+n2.Addr+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS(`#conn.live`)),
		chromedp.WaitVisible(chromedp.CSS(`#feed li[data-channel="demo"]`)),
	)
	t.Logf("console loaded and live in %v", time.Since(start).Round(time.Millisecond))

	// Live: sent through n1 after the page loaded, shown by n2's stream.
	sent := time.Now()
	id := send(t, n1.Client, "reviewer", "supervisor", "review", "response", "urgent", "Vote: approve", "LGTM: the backoff is capped and jittered.")
	browse(t, ctx, 2*time.Second, "the new message in the feed within 2 s, no reload",
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#feed li[data-id=%q]`, id))))
	t.Logf("message in the feed %v after the send returned", time.Since(sent).Round(time.Millisecond))
	browse(t, ctx, 5*time.Second, "click the line, see its text",
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`#feed li[data-id=%q]`, id))),
		chromedp.WaitVisible(chromedp.CSS(`#detail pre.text`)))
	if got := text(ctx, `#detail pre.text`); got != "LGTM: the backoff is capped and jittered." {
		t.Fatalf("detail text %q", got)
	}

	// Approvals: without auth the page asks who decides.
	ar, err := n1.Client.RequestApproval(context.Background(), api.ApprovalRequestCommand{ID: "appr-deploy", From: "supervisor", Approvers: []string{"operator"},
		Title: "Deploy the retry change", Action: json.RawMessage(`{"deploy":"retry-backoff","to":"prod"}`)})
	if err != nil {
		t.Fatal(err)
	}
	browse(t, ctx, 5*time.Second, "the approval in the queue",
		chromedp.Click(chromedp.CSS(`nav a[data-tab="approvals"]`)),
		chromedp.WaitVisible(chromedp.CSS(`button.approve[data-id="appr-deploy"]`)),
		chromedp.SendKeys(chromedp.CSS(`#approver`), "operator"))
	if got := text(ctx, `tr[data-approval="appr-deploy"] code.hash`); got != ar.ActionHash {
		t.Fatalf("shown hash %q, want %q", got, ar.ActionHash)
	}
	if p := os.Getenv("MAOS_CONSOLE_PNG"); p != "" {
		browse(t, ctx, 5*time.Second, "back to the feed for the picture", chromedp.Click(chromedp.CSS(`nav a[data-tab="feed"]`)), chromedp.WaitVisible(`#detail pre.text`))
		if _, err := screenshot(ctx, p); err != nil {
			t.Fatalf("write %s: %v", p, err)
		}
		t.Logf("wrote %s", p)
		browse(t, ctx, 5*time.Second, "approvals again", chromedp.Click(chromedp.CSS(`nav a[data-tab="approvals"]`)), chromedp.WaitVisible(`button.approve[data-id="appr-deploy"]`))
	}
	// Another approval changes the queue, not appr-deploy's row: its
	// nodes stay (marked before, still marked once the new row shows).
	eval[bool](t, ctx, `(() => { document.querySelector('button.approve[data-id="appr-deploy"]').dataset.kept = '1'; return true; })()`)
	if _, err := n1.Client.RequestApproval(context.Background(), api.ApprovalRequestCommand{ID: "appr-later", From: "supervisor", Approvers: []string{"reviewer"},
		Title: "Tag the release", Action: json.RawMessage(`{"tag":"v1"}`)}); err != nil {
		t.Fatal(err)
	}
	browse(t, ctx, 5*time.Second, "the second approval in the queue", chromedp.WaitVisible(chromedp.CSS(`button.approve[data-id="appr-later"]`)))
	if !eval[bool](t, ctx, `document.querySelector('button.approve[data-id="appr-deploy"]').dataset.kept === '1'`) {
		t.Fatal("appr-deploy's row was built again when another approval came")
	}
	clickStable(t, ctx, "click Approve", `button.approve[data-id="appr-deploy"]`)
	clustertest.WaitFor(t, 5*time.Second, "appr-deploy approved in the API", func() bool {
		a, err := n1.Client.Approval(context.Background(), "appr-deploy")
		return err == nil && a.State == api.ApprovalApproved && len(a.Decisions) == 1 && a.Decisions[0].ActionHash == ar.ActionHash
	})
	browse(t, ctx, 5*time.Second, "the decided approval leaves the queue",
		chromedp.WaitNotPresent(chromedp.CSS(`button.approve[data-id="appr-deploy"]`)))

	// Agents: worker1 served by n1's watcher, n2's standing by (its lease).
	bg := context.Background()
	if _, err := n1.Client.PutPresence(bg, "worker1", api.PresenceUpdate{State: api.PresenceAwake, Source: "watcher"}); err != nil {
		t.Fatal(err)
	}
	for _, node := range []string{"n1", "n2"} {
		cmd := api.AgentLeaseAcquireCommand{Agent: "worker1", LeaseHolder: api.LeaseHolder{Node: node, Instance: "maosd"}, TTL: api.LockTTL(time.Minute)}
		if _, err := n1.Client.AcquireAgentLease(bg, cmd); err != nil {
			t.Fatal(err)
		}
	}
	browse(t, ctx, 5*time.Second, "the agents view",
		chromedp.Click(chromedp.CSS(`nav a[data-tab="agents"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#agents .card[data-agent="worker1"] .served`)))
	clustertest.WaitFor(t, 10*time.Second, `worker1's served-by cell "n1 standby n2" (the view refreshes)`, func() bool {
		return text(ctx, `#agents .card[data-agent="worker1"] .served`) == "n1 standby n2"
	})

	// Cluster: n3 stops; gossip marks it dead (about 5 s).
	browse(t, ctx, 10*time.Second, "the cluster view",
		chromedp.Click(chromedp.CSS(`nav a[data-tab="cluster"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#members tr[data-node="n3"] td.status.alive`)),
		chromedp.WaitVisible(chromedp.CSS(`#nodes tr[data-node="n3"] td.follower, #nodes tr[data-node="n3"] td.leader`)))
	c.Nodes[2].Stop()
	stopped := time.Now()
	// A closed in-process node leaves gossip ("left"); a SIGKILLed
	// maosd is found dead by probes ("dead"). Either is not alive.
	clustertest.WaitFor(t, 30*time.Second, "n3 dead (or left) on the cluster view", func() bool {
		st := text(ctx, `#members tr[data-node="n3"] td.status`)
		return st == "dead" || st == "left"
	})
	t.Logf("n3 shown dead %v after it stopped", time.Since(stopped).Round(time.Millisecond))
	if got := text(ctx, `#nodes tr[data-node="n3"] td:nth-child(3)`); !strings.HasPrefix(got, "unreachable") {
		t.Fatalf("n3's status cell %q, want unreachable", got)
	}

	// Last contact is truthful on a node whose console never asked n3
	// while it ran: n1's page, opened only now, shows when n1 last heard
	// from n3 (its gossip probes), not "never".
	browse(t, ctx, 15*time.Second, "n1's cluster view by its URL",
		chromedp.Navigate("http://"+n1.Addr+"/ui/#/cluster"),
		chromedp.WaitVisible(chromedp.CSS(`#nodes tr[data-node="n3"] td.contact`)))
	for _, sel := range []string{`#nodes tr[data-node="n3"] td.contact`, `#members tr[data-node="n3"] td.contact`} {
		got := text(ctx, sel)
		if got == "" || strings.HasPrefix(got, "never") || !strings.Contains(got, "ago") {
			t.Fatalf("%s: %q, want when n1 last heard from n3 and how long ago", sel, got)
		}
	}
}

// With --auth: before login the page shows the login form and nothing of
// the mail (the assets hold none, the API refuses the page); the login
// sets an HttpOnly session cookie the page's script cannot read (and that
// holds no token); after login the feed is live and a button's write
// (cookie, CSRF header) is accepted; an agent token's Agents view asks
// only for what it may read.
func TestConsoleAuthLogin(t *testing.T) {
	const admin = "console-admin-token-0123456789"
	c := clustertest.New(t, 3, withConsole, gossipOn, func(s *clustertest.Setup) {
		s.Config.AdminToken = admin // what nodes present to each other
		s.Auth = &transport.AuthConfig{AdminToken: admin}
	})
	n1, n2 := c.Nodes[0], c.Nodes[1]
	tok, err := n1.Client.CreateToken(context.Background(), "operator", api.TokenRoleModerator)
	if err != nil {
		t.Fatal(err)
	}
	const marker = "Mail-only-after-login-7f3a"
	registerAgents(t, n1.Client, "worker1", "security")
	send(t, n1.Client, "supervisor", "worker1", "demo", "chat", "normal", marker, marker+" body")
	if _, err := n1.Client.RequestApproval(context.Background(), api.ApprovalRequestCommand{ID: "appr-auth", From: "supervisor", Approvers: []string{"operator"},
		Title: "Rotate the keys", Action: json.RawMessage(`{"rotate":"keys"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := n1.Client.RequestApproval(context.Background(), api.ApprovalRequestCommand{ID: "appr-other", From: "supervisor", Approvers: []string{"security"},
		Title: "Open the firewall", Action: json.RawMessage(`{"open":"22"}`)}); err != nil {
		t.Fatal(err)
	}
	ctx := browser(t)
	base := "http://" + n2.Addr
	browse(t, ctx, 15*time.Second, "the login page",
		chromedp.Navigate(base+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS(`#login-form`)))
	html := eval[string](t, ctx, `document.documentElement.outerHTML`)
	status := eval[string](t, ctx, `fetch("/v1/overview").then(r => String(r.status))`, chromedp.EvalAwaitPromise)
	if strings.Contains(html, marker) || status != "401" {
		t.Fatalf("before login: page holds the mail %v, the API answered the page %s", strings.Contains(html, marker), status)
	}
	for _, asset := range []string{"/ui/", "/ui/app.js", "/ui/style.css"} {
		resp, err := http.Get(base + asset)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s without a token: %d", asset, resp.StatusCode)
		}
	}

	browse(t, ctx, 15*time.Second, "log in and see the feed",
		chromedp.SendKeys(chromedp.CSS(`#token`), tok.Token),
		chromedp.Click(chromedp.CSS(`#login-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#conn.live`)),
		chromedp.WaitVisible(chromedp.CSS(`#feed li[data-channel="demo"]`)))
	if got := text(ctx, `#feed li[data-channel="demo"]`); !strings.Contains(got, marker) {
		t.Fatalf("feed line %q, want the marker", got)
	}
	cookies := eval[string](t, ctx, `document.cookie`)
	if strings.Contains(cookies, "maos_session") || strings.Contains(cookies, tok.Token) {
		t.Fatalf("the page's script reads the token: document.cookie = %q", cookies)
	}
	url := eval[string](t, ctx, `location.href`)
	if strings.Contains(url, tok.Token) {
		t.Fatalf("the token is in the URL %s", url)
	}

	id := send(t, n1.Client, "worker1", "supervisor", "demo", "response", "normal", "after login", "live after login")
	browse(t, ctx, 2*time.Second, "a message after login, live", chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#feed li[data-id=%q]`, id))))

	browse(t, ctx, 5*time.Second, "approvals: buttons only where operator is an approver",
		chromedp.Click(chromedp.CSS(`nav a[data-tab="approvals"]`)),
		chromedp.WaitVisible(chromedp.CSS(`button.approve[data-id="appr-auth"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-approval="appr-other"] .not-yours`)))
	if n := eval[int](t, ctx, `document.querySelectorAll('button[data-id="appr-other"]').length`); n != 0 {
		t.Fatalf("%d decide buttons on an approval operator is not listed for", n)
	}
	clickStable(t, ctx, "approve as operator through the cookie", `button.approve[data-id="appr-auth"]`)
	clustertest.WaitFor(t, 5*time.Second, "appr-auth approved by operator", func() bool {
		a, err := n1.Client.Approval(context.Background(), "appr-auth")
		return err == nil && a.State == api.ApprovalApproved && len(a.Decisions) == 1 && a.Decisions[0].Approver == "operator"
	})

	// An agent's token: the Agents view asks only for what it may read
	// (its own inbox's counts), so it writes no DENIED line per other
	// agent.
	wtok, err := n1.Client.CreateToken(context.Background(), "worker1", api.TokenRoleAgent)
	if err != nil {
		t.Fatal(err)
	}
	browse(t, ctx, 15*time.Second, "log out, log in as worker1, the agents view",
		chromedp.Click(chromedp.CSS(`#logout`)),
		chromedp.WaitVisible(chromedp.CSS(`#login-form`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), wtok.Token),
		chromedp.Click(chromedp.CSS(`#login-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#conn.live`)),
		chromedp.Click(chromedp.CSS(`nav a[data-tab="agents"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#agents .card[data-agent="security"]`)))
	// A denial of worker1's after the view's requests: once its line is
	// in the trail, the view's would be too.
	if _, err := n2.Client.WithToken(wtok.Token).Tokens(context.Background()); err == nil {
		t.Fatal("an agent token listed the tokens")
	}
	var lines []string
	clustertest.WaitFor(t, 10*time.Second, "worker1's denial of the token list audited", func() bool {
		p, err := n1.Client.Audit(context.Background(), 0, api.MaxPageLimit, api.Local)
		lines = lines[:0]
		found := false
		for _, ev := range p.Events {
			if ev.Label == "DENIED" {
				lines = append(lines, ev.Line)
				found = found || strings.Contains(ev.Line, "/v1/tokens")
			}
		}
		return err == nil && found
	})
	for _, l := range lines {
		if strings.Contains(l, "inbox/counts") {
			t.Errorf("the agents view asked for what worker1's token may not read: %s", l)
		}
	}
}
