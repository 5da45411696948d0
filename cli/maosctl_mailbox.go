package cli

import "github.com/urfave/cli/v2"

// ctlMailboxCommands are the maosctl commands of the mailbox group.
func ctlMailboxCommands() []*cli.Command { return nil }
