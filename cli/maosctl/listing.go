package maosctl

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
)

// pageLimitFlag is --limit of a paged listing: 0 (the node's default,
// api.DefaultPageLimit) to api.MaxPageLimit.
func pageLimitFlag(c *cli.Context) (int, error) {
	limit := c.Int("limit")
	if limit < 0 || limit > api.MaxPageLimit {
		return 0, usagef(c, "--limit %d: must be 1..%d (0 for the default %d)", limit, api.MaxPageLimit, api.DefaultPageLimit)
	}
	return limit, nil
}

// listPages prints a seq-ordered listing (read, overview) from --after
// on: each item as the line line makes of it, or under --json all of
// them as one JSON array once the listing ends. fetch gets the page after
// a seq, each call bounded by --timeout. With --all it follows pages to
// the end; without, it stops after the first, and a hint on stderr gives
// the command (again) that goes on. what names the listing in the errors
// about a node that sends a page out of order or says more follow and
// sends none.
func listPages[T any](c *cli.Context, what, again string,
	fetch func(ctx context.Context, after uint64) (items []T, more bool, err error),
	seq func(T) uint64, line func(T) string) error {
	after, all, asJSON := c.Uint64("after"), c.Bool("all"), wantJSON(c)
	out := []T{}
	for {
		ctx, cancel := call(c)
		items, more, err := fetch(ctx, after)
		cancel()
		if err != nil {
			return apiError(c, err)
		}
		for _, it := range items {
			if s := seq(it); s <= after {
				return fmt.Errorf("%s: the node returned #%d in a page after #%d", what, s, after)
			}
			after = seq(it)
		}
		if asJSON {
			out = append(out, items...)
		} else {
			for _, it := range items {
				if _, err := fmt.Fprintln(c.App.Writer, line(it)); err != nil {
					return err
				}
			}
		}
		if !more {
			break
		}
		if !all {
			if !asJSON {
				fmt.Fprintf(c.App.ErrWriter, "(more after #%d: %s --after %d, or --all)\n", after, again, after)
			}
			break
		}
		if len(items) == 0 {
			return fmt.Errorf("%s: the node said more messages follow #%d but sent none", what, after)
		}
	}
	if asJSON {
		return printJSON(c.App.Writer, out)
	}
	return nil
}
