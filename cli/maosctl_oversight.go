package cli

import "github.com/urfave/cli/v2"

// ctlOversightCommands are the maosctl commands of the oversight group.
func ctlOversightCommands() []*cli.Command { return nil }
