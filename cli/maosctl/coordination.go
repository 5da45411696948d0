package maosctl

import "github.com/urfave/cli/v2"

// coordinationCommands are the maosctl commands of the coordination
// group: the global bulletin (maosctl_bulletin.go) and advisory locks
// (maosctl_lock.go).
func coordinationCommands() []*cli.Command {
	return []*cli.Command{bulletinCommand(), lockCommand(), interruptCommand()}
}
