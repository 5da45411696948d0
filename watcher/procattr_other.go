//go:build !linux

package watcher

import "syscall"

// procAttr starts the model CLI in its own process group, so a timeout
// kills everything it spawned. Only Linux can also tie the CLI's life to
// this process's (Pdeathsig).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
