package cli

import "github.com/urfave/cli/v2"

// ctlCoordinationCommands are the maosctl commands of the coordination group.
func ctlCoordinationCommands() []*cli.Command { return nil }
