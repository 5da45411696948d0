package watcher

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/maos-project/maos/testing/testenv"
)

// envExecParent makes the test binary act as a watcher process that runs
// one long model CLI (sleep) and writes the CLI's pid to the named file.
const envExecParent = "MAOS_TEST_EXEC_PARENT_PIDFILE"

func TestMain(m *testing.M) {
	if pidFile := os.Getenv(envExecParent); pidFile != "" {
		// sh writes its own pid, then becomes sleep (same pid).
		Exec(context.Background(), Invocation{
			Argv:    []string{"sh", "-c", fmt.Sprintf("echo $$ > %s.tmp && mv %s.tmp %s && exec sleep 60", pidFile, pidFile, pidFile)},
			Timeout: time.Minute,
		})
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// A watcher process killed with SIGKILL takes its running model CLI with
// it: nothing is left answering mail on its own.
func TestExecChildDiesWithTheWatcher(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "cli.pid")
	parent := exec.Command(os.Args[0], "-test.run=^$")
	parent.Env = append(os.Environ(), envExecParent+"="+pidFile)
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	var child int
	deadline := testenv.Deadline(t)
	for child == 0 {
		if b, err := os.ReadFile(pidFile); err == nil {
			child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		if time.Now().After(deadline) {
			_ = parent.Process.Kill()
			t.Fatal("the helper watcher did not start its CLI by the test's deadline")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := syscall.Kill(child, 0); err != nil {
		t.Fatalf("the CLI (pid %d) is not running before the kill: %v", child, err)
	}
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	// Dead is gone or a zombie: the CLI's parent is gone, and whether init
	// reaps it soon depends on the machine.
	alive := func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", child))
		if err != nil {
			return false
		}
		_, after, ok := strings.Cut(string(b), ") ")
		return ok && !strings.HasPrefix(after, "Z") && !strings.HasPrefix(after, "X")
	}
	deadline = time.Now().Add(5 * time.Second)
	for alive() {
		if time.Now().After(deadline) {
			_ = syscall.Kill(child, syscall.SIGKILL)
			t.Fatalf("the model CLI (pid %d) outlived its SIGKILLed watcher by 5s", child)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
