// Command maosctl is the admin and agent CLI of a maos cluster: it sends and
// reads messages and administers the nodes through a node's HTTP API.
// Run "maosctl --help" for the commands.
package main

import (
	"os"

	"github.com/maos-project/maos/cli/maosctl"
)

func main() {
	if err := maosctl.App().Run(os.Args); err != nil {
		os.Exit(maosctl.ExitCode(err))
	}
}
