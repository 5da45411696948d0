package harness

import (
	"os/exec"
	"runtime"
	"sync"
)

// StartProcess starts cmd like cmd.Start, but so that, where the platform
// allows it (Linux), the child is SIGKILLed by the kernel if the test
// process dies before it stopped the child -- a test binary killed by
// `go test -timeout` or by CI leaves no maosd behind. The harness starts
// every maosd this way; tests may use it for other long-lived children.
//
// The parent-death signal fires when the thread that forked the child
// exits, so every such child is forked from one goroutine locked to its
// thread for the life of the process.
func StartProcess(cmd *exec.Cmd) error {
	setDeathSignal(cmd)
	spawnOnce.Do(func() { go spawner() })
	req := spawnReq{cmd: cmd, done: make(chan error, 1)}
	spawnCh <- req
	return <-req.done
}

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

var (
	spawnOnce sync.Once
	spawnCh   = make(chan spawnReq)
)

func spawner() {
	runtime.LockOSThread() // never unlocked: the thread lives as long as the process
	for req := range spawnCh {
		req.done <- req.cmd.Start()
	}
}
