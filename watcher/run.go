package watcher

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// StderrLines is how many trailing stderr lines a Result keeps.
const StderrLines = 10

// Invocation is one run of an agent's command.
type Invocation struct {
	Argv    []string
	Stdin   string
	Workdir string
	Env     []string // added to the watcher's environment
	Timeout time.Duration
	// OnLine, if set, is called with each line of stdout (without its
	// newline) as the command prints it, from one goroutine, in order;
	// it must not block for long (the command's output waits on it).
	OnLine func(line string)
}

// Result is what one invocation gave.
type Result struct {
	Output   string   // trimmed stdout, or its JSON "result" field
	Stdout   string   // trimmed stdout, as printed
	ExitCode int      // -1 when the process did not exit on its own
	Stderr   []string // the last StderrLines lines of stderr
	TimedOut bool
	// Err is nil for a good answer; otherwise why the run failed (non-zero
	// exit, timeout, empty output, start failure, cancelled).
	Err error
	// ErrorType and Suggestion, set by a Runner whose failures are not a
	// command's, name the failure completion's error_type and
	// suggested_action in place of cli_error and "check the agent's
	// command".
	ErrorType, Suggestion string
}

// Runner runs an agent's invocations in process, in place of Exec
// (AgentConfig.Runner): the watcher gives it the Invocation it would give
// the command (the prompt on Stdin; Env with MAOS_TASK_ID,
// MAOS_TASK_FENCE, MAOS_TASK_ATTEMPT for a task, MAOS_MESSAGE_ID; OnLine
// for the seed 002 §6 lines it "prints", which it must call itself, in
// order, from one goroutine at a time) and takes its Result as it takes
// Exec's: Stdout read as the command's stdout (task_report.go), Err a
// failed attempt, retried with backoff and then reported with Stderr. So
// the agent's lease, the task's claim, fence and renewals, the retries and
// the artifact uploads are the watcher's, as for any command. ctx ends at
// the invocation's Timeout, as a command is killed; Run must return soon
// after ctx ends.
type Runner interface {
	Run(ctx context.Context, inv Invocation) Result
}

// RunnerFunc is a func as a Runner.
type RunnerFunc func(ctx context.Context, inv Invocation) Result

// Run calls f.
func (f RunnerFunc) Run(ctx context.Context, inv Invocation) Result { return f(ctx, inv) }

// runWith runs inv by r, or by Exec for a nil r. A runner's answer is read
// as Exec reads stdout: Output is Stdout's answer unless the runner set
// one, and a good run that said nothing is ErrEmptyOutput; ExitCode is 0
// for a good run and -1 for a failed one, as no process exited.
func runWith(ctx context.Context, r Runner, inv Invocation) Result {
	if r == nil {
		return Exec(ctx, inv)
	}
	if inv.Timeout <= 0 {
		inv.Timeout = DefaultTimeout
	}
	tctx, cancel := context.WithTimeout(ctx, inv.Timeout)
	defer cancel()
	res := r.Run(tctx, inv)
	res.Stdout = strings.TrimSpace(res.Stdout)
	switch {
	case errors.Is(tctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
		res.TimedOut, res.Err = true, fmt.Errorf("timed out after %s", inv.Timeout)
	case res.Err == nil && ctx.Err() != nil:
		res.Err = fmt.Errorf("cancelled: %w", ctx.Err())
	}
	if res.Err == nil && res.Output == "" {
		if res.Output = extractResult(res.Stdout); res.Output == "" {
			res.Err = ErrEmptyOutput
		}
	}
	res.ExitCode = 0
	if res.Err != nil {
		res.ExitCode = -1 // no process exited: a failure names no exit code
	}
	return res
}

// ErrEmptyOutput is a run that exited 0 but printed nothing.
var ErrEmptyOutput = errors.New("empty output")

// Exec runs inv.Argv in its own process group with inv.Stdin on stdin. When
// the timeout passes or ctx ends, the whole group is killed with SIGKILL,
// so helpers the CLI spawned die with it.
func Exec(ctx context.Context, inv Invocation) Result {
	if inv.Timeout <= 0 {
		inv.Timeout = DefaultTimeout
	}
	tctx, cancel := context.WithTimeout(ctx, inv.Timeout)
	defer cancel()
	cmd := exec.CommandContext(tctx, inv.Argv[0], inv.Argv[1:]...)
	cmd.Dir = inv.Workdir
	cmd.Env = append(os.Environ(), inv.Env...)
	cmd.Stdin = strings.NewReader(inv.Stdin)
	var stdout, stderr bytes.Buffer
	lines := &lineWriter{buf: &stdout, fn: inv.OnLine}
	cmd.Stdout = lines
	cmd.Stderr = &stderr
	cmd.SysProcAttr = procAttr()
	cmd.Cancel = func() error {
		// The group id is the child's pid (Setpgid with Pgid 0).
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	// A grandchild that escaped the group could hold the pipes open; do
	// not wait for it forever.
	cmd.WaitDelay = 2 * time.Second
	// Linux sends the parent-death signal when the thread that started the
	// child exits, not the process: keep this goroutine on its thread
	// until the child is reaped.
	runtime.LockOSThread()
	err := cmd.Run()
	runtime.UnlockOSThread()
	lines.flush()
	res := Result{ExitCode: -1, Stderr: lastLines(stderr.String(), StderrLines), Stdout: strings.TrimSpace(stdout.String())}
	if cmd.ProcessState != nil && cmd.ProcessState.Exited() {
		res.ExitCode = cmd.ProcessState.ExitCode()
	}
	switch {
	case errors.Is(tctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
		res.TimedOut = true
		res.Err = fmt.Errorf("timed out after %s (process group killed)", inv.Timeout)
		return res
	case ctx.Err() != nil:
		res.Err = fmt.Errorf("cancelled: %w", ctx.Err())
		return res
	case err != nil:
		res.Err = fmt.Errorf("%s: %w", inv.Argv[0], err)
		return res
	}
	res.Output = extractResult(stdout.String())
	if res.Output == "" {
		res.Err = ErrEmptyOutput
	}
	return res
}

// lineWriter keeps what is written in buf and, with fn set, calls fn with
// every complete line as it arrives; flush passes on a last line that had
// no newline. exec writes from one goroutine, and flush runs after it ended.
type lineWriter struct {
	buf  *bytes.Buffer
	fn   func(string)
	from int // start of the line not yet passed to fn
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf.Write(p)
	if w.fn == nil {
		return len(p), nil
	}
	for {
		rest := w.buf.Bytes()[w.from:]
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.fn(strings.TrimSuffix(string(rest[:i]), "\r"))
		w.from += i + 1
	}
}

func (w *lineWriter) flush() {
	if rest := w.buf.Bytes()[w.from:]; w.fn != nil && len(rest) > 0 {
		w.from += len(rest)
		w.fn(strings.TrimSuffix(string(rest), "\r"))
	}
}

// extractResult trims out; if it is a JSON object with a string "result"
// field, that field (trimmed) is the answer.
func extractResult(out string) string {
	out = strings.TrimSpace(out)
	if strings.HasPrefix(out, "{") {
		var v struct {
			Result *string `json:"result"`
		}
		if json.Unmarshal([]byte(out), &v) == nil && v.Result != nil {
			return strings.TrimSpace(*v.Result)
		}
	}
	return out
}

func lastLines(s string, n int) []string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return nil
	}
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}
