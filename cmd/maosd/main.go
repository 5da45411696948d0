// Command maosd runs one node of a maos cluster; see `maosd --help`.
package main

import (
	"fmt"
	"os"

	"github.com/maos-project/maos/cli/maosd"
)

func main() {
	if err := maosd.App().Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
