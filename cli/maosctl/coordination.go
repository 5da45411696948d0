package maosctl

import "github.com/urfave/cli/v2"

// ctlCoordinationCommands are the maosctl commands of the coordination
// group: the global bulletin (maosctl_bulletin.go) and advisory locks
// (maosctl_lock.go).
func ctlCoordinationCommands() []*cli.Command {
	return []*cli.Command{ctlBulletinCommand(), ctlLockCommand(), ctlInterruptCommand()}
}
