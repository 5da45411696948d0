// Command maos-chaos runs chaos scenarios against real maosd processes on
// loopback or, with --netns, in network namespaces; see `maos-chaos --help`
// and docs/RELIABILITY.md.
package main

import (
	"fmt"
	"os"

	"github.com/maos-project/maos/testing/chaos"
)

func main() {
	if err := chaos.App().Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
