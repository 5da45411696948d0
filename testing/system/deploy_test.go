package system

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/maos-project/maos/testing/harness"
	"github.com/maos-project/maos/testing/testenv"
)

// guideBlock is one fenced block of docs/DEPLOY.md.
type guideBlock struct {
	lang   string   // sh (run) or console (shown only)
	places []string // where it runs: admin, n1, n2, ...
	line   int      // of the opening fence, 1-based
	text   string
}

var (
	fenceRe = regexp.MustCompile("^```(\\S*)\\s*$")
	onRe    = regexp.MustCompile(`^# on ([a-z0-9, ]+?)(?: \(.*\))?$`)
)

// parseGuide splits the guide into its fenced blocks. Every block must be
// sh (run by TestDeployGuide) or console (a step the test cannot run, which
// says why), and start with "# on PLACE[, PLACE and PLACE]".
func parseGuide(t *testing.T, doc string) []guideBlock {
	t.Helper()
	var blocks []guideBlock
	lines := strings.Split(doc, "\n")
	for i := 0; i < len(lines); i++ {
		m := fenceRe.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		b := guideBlock{lang: m[1], line: i + 1}
		j := i + 1
		for ; j < len(lines) && lines[j] != "```"; j++ {
		}
		if j == len(lines) {
			t.Fatalf("DEPLOY.md:%d: the block is not closed", b.line)
		}
		body := lines[i+1 : j]
		i = j
		switch b.lang {
		case "sh", "console":
		default:
			t.Errorf("DEPLOY.md:%d: a ```%s block: mark a block sh (the test runs it) or console (it cannot, and says why)", b.line, b.lang)
			continue
		}
		var on []string
		if len(body) > 0 {
			on = onRe.FindStringSubmatch(body[0])
		}
		if on == nil {
			t.Errorf("DEPLOY.md:%d: the block does not start with \"# on admin\", \"# on n1\" or \"# on n1, n2 and n3\"", b.line)
			continue
		}
		for _, p := range strings.FieldsFunc(strings.ReplaceAll(on[1], " and ", ","), func(r rune) bool { return r == ',' || r == ' ' }) {
			b.places = append(b.places, p)
		}
		if b.lang == "console" && !strings.Contains(body[0], "not run by the test") {
			t.Errorf("DEPLOY.md:%d: a console block says why the test does not run it: %q", b.line, body[0])
		}
		b.text = strings.Join(body, "\n") + "\n"
		blocks = append(blocks, b)
	}
	return blocks
}

// guideNode is where node n<k> of the guide listens in the test.
type guideNode struct{ api, raft, gossip int }

// guidePorts finds, for nodes n1..n<count>, an API port and a Raft port
// followed by its gossip port, free on loopback (freePorts).
func guidePorts(t *testing.T, count int) []guideNode {
	t.Helper()
	var offsets []int
	for k := range count {
		offsets = append(offsets, 10*k, 10*k+1, 10*k+2)
	}
	base := freePorts(t, offsets...)
	nodes := make([]guideNode, count)
	for k := range nodes {
		p := base + 10*k
		nodes[k] = guideNode{p, p + 1, p + 2}
	}
	return nodes
}

// rewrite turns a block of the guide into one for this machine: the
// hosts' addresses into the loopback ports of their nodes, the system
// paths into the directory of the place it runs on.
func rewrite(text, hostRoot string, nodes []guideNode) string {
	var pairs []string
	for k, n := range nodes {
		ip := fmt.Sprintf("10.0.0.%d", k+1)
		pairs = append(pairs, ip+":7070", fmt.Sprintf("127.0.0.1:%d", n.api),
			ip+":7071", fmt.Sprintf("127.0.0.1:%d", n.raft), ip+":7072", fmt.Sprintf("127.0.0.1:%d", n.gossip))
	}
	for k := range nodes {
		pairs = append(pairs, fmt.Sprintf("10.0.0.%d", k+1), "127.0.0.1")
	}
	for _, p := range []string{"/var/lib/private/maos", "/var/lib/maos", "/var/backups/maos", "/etc/maos", "/etc/systemd/system"} {
		to := p
		if p == "/var/lib/private/maos" {
			to = "/var/lib/maos"
		}
		pairs = append(pairs, p, hostRoot+to)
	}
	return strings.NewReplacer(pairs...).Replace(text)
}

// systemctlShim stands in for systemctl on a place of the guide: it runs
// maosd as deploy/systemd/maosd.service would, from the unit installed in
// the place's etc/systemd/system: a clean environment of its
// Environment= lines (%S the place's var/lib, %d its credentials
// directory), the LoadCredential= files copied there, then the
// EnvironmentFile=; and it waits for maosd's ready line, where systemd
// (Type=simple) would not, so the next block finds the node up.
const systemctlShim = `#!/usr/bin/env bash
set -euo pipefail
H=$ROOT/$PLACE
unit=$H/etc/systemd/system/maosd.service
pidf=$H/run/maosd.pid
log=$H/maosd.log
alive() { [ -e /proc/$1 ] && ! grep -q '^[0-9]* ([^)]*) Z' /proc/$1/stat; }
start() {
  [ -f "$unit" ] || { echo "systemctl: Unit maosd.service not found ($unit)" >&2; exit 5; }
  if [ -f "$pidf" ] && alive "$(cat "$pidf")"; then return 0; fi
  creds=$H/run/credentials/maosd.service
  rm -rf "$creds"; mkdir -p "$creds" "$H/var/lib/maos"
  env=(); exe=
  while IFS= read -r line; do
    case $line in
      Environment=*) v=${line#Environment=}; v=${v//%S/$H/var/lib}; v=${v//%d/$creds}; env+=("$v") ;;
      LoadCredential=*) v=${line#LoadCredential=}; install -m 0400 "$H${v#*:}" "$creds/${v%%:*}" ;;
      EnvironmentFile=*) while IFS= read -r l; do case $l in ''|'#'*) ;; *) env+=("$l") ;; esac; done <"$H${line#EnvironmentFile=}" ;;
      ExecStart=*) exe=${line#ExecStart=} ;;
    esac
  done <"$unit"
  [ "$exe" = /usr/local/bin/maosd ] || { echo "systemctl: unexpected ExecStart=$exe" >&2; exit 1; }
  [ -f "$log" ] && cat "$log" >>"$log.old"
  env -i PATH="$PATH" "${env[@]}" maosd </dev/null >"$log" 2>&1 &
  pid=$!
  echo "$pid" >"$pidf"
  for _ in $(seq 600); do
    grep -q 'maosd ready to serve' "$log" && return 0
    alive "$pid" || { echo "systemctl: maosd on $PLACE exited:" >&2; cat "$log" >&2; rm -f "$pidf"; exit 1; }
    sleep 0.1
  done
  echo "systemctl: maosd on $PLACE is not ready after 60 s:" >&2; tail -n 30 "$log" >&2; exit 1
}
stop() {
  [ -f "$pidf" ] || return 0
  pid=$(cat "$pidf")
  if alive "$pid"; then
    kill -TERM "$pid"
    for _ in $(seq 600); do alive "$pid" || break; sleep 0.1; done
    if alive "$pid"; then echo "systemctl: maosd on $PLACE ignored SIGTERM for 60 s" >&2; kill -KILL "$pid"; exit 1; fi
  fi
  rm -f "$pidf"
}
case "$*" in
  daemon-reload) ;;
  "start maosd"|"enable --now maosd") start ;;
  "stop maosd"|"disable --now maosd") stop ;;
  "restart maosd") stop; start ;;
  *) echo "systemctl (test stand-in): $* is not supported" >&2; exit 1 ;;
esac
`

// scpShim stands in for scp to root@PLACE:PATH: PATH, rewritten into the
// sending place's directory, is moved to PLACE's.
const scpShim = `#!/usr/bin/env bash
set -euo pipefail
args=("$@"); dest=${args[-1]}; unset 'args[-1]'
to=${dest%%:*}; to=${to#*@}; path=${dest#*:}
case $path in
  "$ROOT"/*) rest=${path#"$ROOT"/}; rest=${rest#*/}; path=$ROOT/$to/$rest ;;
  *) echo "scp (test stand-in): $path is not a path the test rewrote" >&2; exit 1 ;;
esac
cp "${args[@]}" "$path"
`

// Every sh block of docs/DEPLOY.md runs, in order, on a three-host cluster
// with TLS, auth and a gossip key (and a fourth host added, removed,
// a host replaced, a backup restored, a rolling restart), each "host" a
// directory of its own on loopback, maosd started from
// deploy/systemd/maosd.service and the env files the guide writes. The
// guide's console blocks are the steps it cannot run (they say why).
func TestDeployGuide(t *testing.T) {
	testenv.Slow(t, "runs every command of docs/DEPLOY.md on a cluster of maosd processes")
	if runtime.GOOS != "linux" {
		t.Skipf("the guide is for Linux hosts; the test's systemctl stand-in reads /proc")
	}
	for _, tool := range []string{"bash", "openssl", "tar", "install"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the deployment guide needs %s: %v", tool, err)
		}
	}
	repo, err := harness.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(repo, "docs", "DEPLOY.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := parseGuide(t, string(doc))
	if t.Failed() {
		return
	}
	nodes := guidePorts(t, 4)
	root := t.TempDir()
	places := map[string]bool{"admin": true}
	for k := range nodes {
		places[fmt.Sprintf("n%d", k+1)] = true
	}
	for p := range places {
		// A host has /etc/systemd/system already.
		if err := os.MkdirAll(filepath.Join(root, p, "etc", "systemd", "system"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The admin's workstation holds a checkout: the guide copies the unit
	// from it.
	if err := os.CopyFS(filepath.Join(root, "admin", "deploy"), os.DirFS(filepath.Join(repo, "deploy"))); err != nil {
		t.Fatal(err)
	}
	shims := filepath.Join(root, "shims")
	if err := os.Mkdir(shims, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"systemctl": systemctlShim, "scp": scpShim} {
		if err := os.WriteFile(filepath.Join(shims, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Stop every maosd the guide started, whatever happened.
	t.Cleanup(func() {
		for p := range places {
			b, err := os.ReadFile(filepath.Join(root, p, "run", "maosd.pid"))
			if err != nil {
				continue
			}
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, p := range []string{"n1", "n2", "n3", "n4"} {
			b, _ := os.ReadFile(filepath.Join(root, p, "maosd.log"))
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			t.Logf("%s: the last lines of maosd's log:\n%s", p, strings.Join(lines[max(0, len(lines)-15):], "\n"))
		}
	})

	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "MAOS_") })
	env = append(env, "ROOT="+root, "PATH="+shims+string(os.PathListSeparator)+filepath.Dir(maosdBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ran := 0
	for _, b := range blocks {
		if b.lang != "sh" {
			continue
		}
		for _, p := range b.places {
			if !places[p] {
				t.Fatalf("DEPLOY.md:%d: runs on %q, which is not admin or n1..n%d", b.line, p, len(nodes))
			}
			dir := filepath.Join(root, p)
			state, cwd := filepath.Join(dir, ".shell-state"), filepath.Join(dir, ".shell-cwd")
			// One shell session per place: the exports, functions and
			// working directory of its earlier blocks hold.
			script := fmt.Sprintf("cd \"$(cat %[2]q 2>/dev/null || echo %[3]q)\"\n[ -f %[1]q ] && . %[1]q\nset -e\n%[4]s"+
				"{ declare -px | grep -E '^declare -x MAOS_' || true; declare -f; } >%[1]q\npwd >%[2]q\n",
				state, cwd, dir, rewrite(b.text, dir, nodes))
			cmd := exec.CommandContext(ctx, "bash", "-c", script)
			cmd.Env = append(env, "PLACE="+p)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			start := time.Now()
			err := cmd.Run()
			t.Logf("DEPLOY.md:%d on %s (%.1fs)", b.line, p, time.Since(start).Seconds())
			if err != nil {
				t.Fatalf("DEPLOY.md:%d on %s: %v\n--- the block as run:\n%s--- its output:\n%s", b.line, p, err, rewrite(b.text, dir, nodes), out.String())
			}
			ran++
		}
	}
	if ran < 20 {
		t.Errorf("ran %d blocks of DEPLOY.md; the guide has lost its commands?", ran)
	}
}
