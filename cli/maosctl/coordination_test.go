package maosctl

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/maos-project/maos/api"
)

// fails runs args and fails the test unless the command failed with a
// "maosctl: " message on stderr containing every want.
func (e *testEnv) fails(stdin string, args []string, want ...string) {
	e.t.Helper()
	r := e.run(stdin, args...)
	if r.err == nil || ExitCode(r.err) != 1 || !strings.HasPrefix(r.errOut, "maosctl: ") {
		e.t.Errorf("maosctl %s: err=%v stderr=%q, want a failure", strings.Join(args, " "), r.err, r.errOut)
		return
	}
	for _, w := range want {
		if !strings.Contains(r.errOut, w) {
			e.t.Errorf("maosctl %s: stderr %q lacks %q", strings.Join(args, " "), r.errOut, w)
		}
	}
}

func TestBulletin(t *testing.T) {
	e := newTestEnv(t)
	out := e.ok("bulletin", "get")
	if !strings.HasPrefix(out, "version 0\n{\n") || !strings.Contains(out, `"system_status": "normal"`) {
		t.Errorf("empty bulletin printed %q", out)
	}

	versionRE := regexp.MustCompile(`^bulletin version (\d+): changed system_status\n$`)
	m := versionRE.FindStringSubmatch(e.ok("bulletin", "set", "system_status", "degraded", "--by", "ops"))
	if m == nil {
		t.Fatal("set printed no version")
	}
	if out := e.ok("bulletin", "get", "system_status"); out != "degraded\n" {
		t.Errorf("get system_status = %q", out)
	}
	out = e.ok("bulletin", "get")
	if !strings.HasPrefix(out, "version "+m[1]+" · updated ") || !strings.Contains(out, " by ops\n") {
		t.Errorf("get printed %q", out)
	}

	// Every write names its author: --by, else $MAOS_AGENT_ID (without
	// --auth the node knows no token's agent).
	e.fails("", []string{"bulletin", "set", "current_phase", "anonymous"}, "by: required", "400")
	t.Setenv(envAgent, "ops")

	// VALUE is JSON when it parses, a string otherwise.
	e.ok("bulletin", "set", "warnings", `["disk at 91%"]`)
	e.ok("bulletin", "set", "current_phase", "integration tests")
	e.ok("bulletin", "set", "replicas", "3")
	if out := e.ok("bulletin", "get", "warnings"); out != "[\n  \"disk at 91%\"\n]\n" {
		t.Errorf("get warnings = %q", out)
	}
	if out := e.ok("bulletin", "get", "current_phase"); out != "integration tests\n" {
		t.Errorf("get current_phase = %q", out)
	}
	if out := e.ok("--json", "bulletin", "get", "replicas"); out != "3\n" {
		t.Errorf("get --json replicas = %q", out)
	}
	// null deletes.
	if out := e.ok("bulletin", "set", "replicas", "null"); !strings.HasSuffix(out, ": changed replicas\n") {
		t.Errorf("set null printed %q", out)
	}
	e.fails("", []string{"bulletin", "get", "replicas"}, `no key "replicas"`, "current_phase, shared_resources, system_status, warnings")

	// The server's refusals reach the user.
	e.fails("", []string{"bulletin", "set", "current_phase", "7"}, "current_phase: want a string, got a number", "400")
	e.fails("", []string{"bulletin", "set", "system_status", "on-fire"}, "want one of normal, degraded, maintenance")

	// --json prints the API object.
	var b api.Bulletin
	if err := json.Unmarshal([]byte(e.ok("--json", "bulletin", "get")), &b); err != nil || b.Version == 0 {
		t.Fatalf("get --json: %+v %v", b, err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b.Doc, &doc); err != nil || doc["current_phase"] != "integration tests" {
		t.Errorf("get --json document: %v %v", doc, err)
	}
}

func TestBulletinEdit(t *testing.T) {
	e := newTestEnv(t)
	t.Setenv(envAgent, "ops") // the author of its writes
	dir := t.TempDir()
	file := filepath.Join(dir, "status.json")
	if err := os.WriteFile(file, []byte(`{"system_status":"maintenance","current_phase":"upgrade","warnings":["n2 down"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out := e.ok("bulletin", "edit", "-f", file)
	m := regexp.MustCompile(`^bulletin version (\d+): changed current_phase, system_status, warnings\n$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("edit printed %q", out)
	}
	version := m[1]

	// A stale --if-version fails naming the current version, and changes nothing.
	e.ok("bulletin", "set", "current_phase", "rollback")
	e.fails("", []string{"bulletin", "edit", "-f", file, "--if-version", version}, "at version", "409")
	if out := e.ok("bulletin", "get", "current_phase"); out != "rollback\n" {
		t.Errorf("a failed CAS changed the bulletin: current_phase %q", out)
	}
	var cur api.Bulletin
	if err := json.Unmarshal([]byte(e.ok("--json", "bulletin", "get")), &cur); err != nil {
		t.Fatal(err)
	}
	v := strconv.FormatUint(cur.Version, 10)

	// PUT replaces: keys not in the file go. From stdin, at the current version.
	out = e.ok("bulletin", "edit", "-f", file, "--if-version", v)
	if !strings.Contains(out, "changed current_phase") {
		t.Errorf("edit at the current version printed %q", out)
	}
	r := e.run(`{"current_phase":"done"}`, "bulletin", "edit", "-f", "-")
	if r.err != nil {
		t.Fatalf("edit -f -: %v %s", r.err, r.errOut)
	}
	if out := e.ok("bulletin", "get", "system_status"); out != "normal\n" {
		t.Errorf("after replacing: system_status %q, want the default", out)
	}
	// --merge keeps the other keys.
	r = e.run(`{"warnings":["again"]}`, "bulletin", "edit", "--merge", "-f", "-")
	if r.err != nil {
		t.Fatalf("edit --merge: %v %s", r.err, r.errOut)
	}
	if out := e.ok("bulletin", "get", "current_phase"); out != "done\n" {
		t.Errorf("after merging: current_phase %q", out)
	}

	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"a":`), 0o600)
	e.fails("", []string{"bulletin", "edit", "-f", bad}, "bad.json is not valid JSON")
	e.fails("", []string{"bulletin", "edit", "-f", filepath.Join(dir, "missing.json")}, "read --file", "no such file")
	e.fails("", []string{"bulletin", "edit"}, "missing required flag --file")
	e.fails("", []string{"bulletin", "edit", "-f", file, "--if-version", "v3"}, "--if-version", "not a version")
	e.fails("", []string{"bulletin", "set", "only-key"}, "missing VALUE")
	e.fails("", []string{"bulletin", "get", "a", "b"}, `unexpected argument "b"`)
	e.fails("", []string{"bulletin", "nope"}, `unknown command "nope"`)
}

func TestLock(t *testing.T) {
	e := newTestEnv(t)
	grantRE := regexp.MustCompile(`^granted src/retry\.go to codex: token (\d+), expires 20\d\d-\S+Z\n$`)
	m := grantRE.FindStringSubmatch(e.ok("lock", "acquire", "--path", "src/retry.go", "--holder", "codex", "--ttl", "10m"))
	if m == nil {
		t.Fatal("acquire printed no grant")
	}
	token := m[1]

	// Another holder is refused, told who holds it and what to do.
	e.fails("", []string{"lock", "acquire", "--path", "src/retry.go", "--holder", "claude", "--ttl", "60"},
		`lock "src/retry.go" is held by codex (token `+token+`) until`, "wait for it")

	// The holder again: extended, same token. $MAOS_AGENT_ID is the default holder.
	t.Setenv(envAgent, "codex")
	if out := e.ok("lock", "acquire", "--path", "src/retry.go", "--ttl", "20m"); !strings.HasPrefix(out, "extended src/retry.go to codex: token "+token+",") {
		t.Errorf("re-acquire printed %q", out)
	}
	var res api.LockResult
	if err := json.Unmarshal([]byte(e.ok("--json", "lock", "renew", "--path", "src/retry.go", "--token", token, "--ttl", "5m")), &res); err != nil ||
		res.Outcome != api.LockExtended || strconv.FormatUint(res.Lock.Token, 10) != token {
		t.Errorf("renew --json: %+v %v", res, err)
	}
	e.fails("", []string{"lock", "renew", "--path", "src/retry.go", "--token", "999", "--ttl", "5m"}, "token 999 is not the current grant's", "acquire the lock again")

	if out := e.ok("lock", "check", "--path", "src/retry.go", "--token", token, "--strong"); !strings.HasPrefix(out, "current: src/retry.go held by codex (token "+token+") until ") {
		t.Errorf("check printed %q", out)
	}
	e.fails("", []string{"lock", "check", "--path", "src/retry.go", "--token", "1"}, "token 1 is not current for src/retry.go", "not the current grant")

	e.ok("lock", "acquire", "--path", "docs/plan.md", "--holder", "claude", "--ttl", "1h")
	out := e.ok("lock", "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "PATH") || !strings.HasPrefix(lines[1], "docs/plan.md") ||
		!strings.Contains(lines[2], "codex") || !strings.HasSuffix(lines[2], "held") {
		t.Errorf("list printed\n%s", out)
	}
	if out := e.ok("lock", "list", "--holder", "claude"); strings.Contains(out, "src/retry.go") || !strings.Contains(out, "docs/plan.md") {
		t.Errorf("list --holder claude printed\n%s", out)
	}
	var page api.LockPage
	if err := json.Unmarshal([]byte(e.ok("--json", "lock", "list", "--limit", "1")), &page); err != nil || len(page.Locks) != 1 || !page.HasMore {
		t.Errorf("list --json --limit 1: %+v %v", page, err)
	}
	// The bulletin shows both locks.
	if out := e.ok("bulletin", "get", "shared_resources"); !strings.Contains(out, `"managed_by": "lock"`) || !strings.Contains(out, "docs/plan.md") {
		t.Errorf("shared_resources = %s", out)
	}

	// Release: not by another holder; by the holder; forced by an admin.
	e.fails("", []string{"lock", "release", "--path", "src/retry.go", "--holder", "claude", "--token", token}, "held by codex", "not claude")
	if out := e.ok("lock", "release", "--path", "src/retry.go", "--token", token); out != "released src/retry.go (held by codex, token "+token+")\n" {
		t.Errorf("release printed %q", out)
	}
	e.fails("", []string{"lock", "check", "--path", "src/retry.go", "--token", token}, "no lock on this path")
	// A --holder given with --force pins the lease to break
	// ($MAOS_AGENT_ID=codex does not).
	e.fails("", []string{"lock", "release", "--path", "docs/plan.md", "--force", "--by", "supervisor", "--holder", "gemini"}, "held by claude", "not gemini")
	if out := e.ok("lock", "release", "--path", "docs/plan.md", "--force", "--by", "supervisor"); !strings.HasPrefix(out, "released docs/plan.md (held by claude,") {
		t.Errorf("forced release printed %q", out)
	}
	e.fails("", []string{"lock", "release", "--path", "docs/plan.md", "--force", "--by", "supervisor"}, "no lock on", "404")
	if out := e.ok("lock", "list"); out != "" {
		t.Errorf("list after releasing everything printed %q", out)
	}
}

func TestLockUsage(t *testing.T) {
	e := newTestEnv(t)
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"lock", "acquire", "--holder", "codex", "--ttl", "1m"}, []string{"missing required flag --path"}},
		{[]string{"lock", "acquire", "--path", "p", "--ttl", "1m"}, []string{"--holder is required", "$MAOS_AGENT_ID", "an agent's token"}},
		{[]string{"lock", "acquire", "--path", "p", "--holder", "codex"}, []string{"missing required flag --ttl"}},
		{[]string{"lock", "acquire", "--path", "p", "--holder", "codex", "--ttl", "soon"}, []string{`--ttl: "soon" is not a duration`}},
		{[]string{"lock", "acquire", "--path", "p", "--holder", "codex", "--ttl", "500ms"}, []string{"ttl: 500ms is outside the limits 1s to 24h0m0s", "400"}},
		{[]string{"lock", "acquire", "--path", "p", "--holder", "Codex", "--ttl", "1m"}, []string{"holder", "400"}},
		{[]string{"lock", "renew", "--path", "p", "--holder", "codex", "--ttl", "1m"}, []string{"missing required flag --token"}},
		{[]string{"lock", "renew", "--path", "p", "--holder", "codex", "--token", "x", "--ttl", "1m"}, []string{`--token: "x" is not a lock token`}},
		{[]string{"lock", "renew", "--path", "p", "--holder", "codex", "--token", "3", "--ttl", "1m"}, []string{`no lock on "p"`, "404"}},
		{[]string{"lock", "release", "--path", "p", "--force"}, []string{"--by is required"}},
		{[]string{"lock", "release", "--path", "p", "--holder", "codex", "--token", "1", "--by", "x"}, []string{"--by goes with --force"}},
		{[]string{"lock", "release", "--path", "p", "--token", "1"}, []string{"--holder is required"}},
		{[]string{"lock", "check", "--path", "p"}, []string{"missing required flag --token"}},
		{[]string{"lock", "list", "--limit", "-1"}, []string{"--limit -1: want a positive number"}},
		{[]string{"lock", "list", "extra"}, []string{`unexpected argument "extra"`}},
	}
	for _, tt := range tests {
		e.fails("", tt.args, tt.want...)
	}
	for _, args := range [][]string{{"lock", "--help"}, {"lock", "acquire", "--help"}, {"bulletin", "set", "--help"}, {"lock", "check", "--help"}} {
		out := e.ok(args...)
		if !strings.Contains(out, "USAGE:") || !strings.Contains(out, "maosctl ") || len(out) < 400 {
			t.Errorf("%v printed too little help:\n%s", args, out)
		}
	}
}
