package watcher

import "syscall"

// procAttr starts the model CLI in its own process group (so a timeout
// kills everything it spawned) and has the kernel SIGKILL it if this
// process dies first: a SIGKILLed maosd or maosctl watch leaves no model
// CLI running on its own. Helpers the CLI spawned in its group outlive it
// in that case; the watcher's next invocation does not wait for them.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
