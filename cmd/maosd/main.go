// Command maosd runs one node of a maos cluster; see `maosd --help`.
package main

import (
	"fmt"
	"os"

	maoscli "github.com/maos-project/maos/cli"
)

func main() {
	if err := maoscli.MaosdApp().Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
