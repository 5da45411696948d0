package maosctl

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
)

// --limit has one meaning in every listing: print at most N items in
// total, asking for as many pages as that takes; without it each command
// prints its default (the first api.DefaultPageLimit items of a paged
// listing; every lock and every audit event). --page-size is only how
// many items one request asks for. --all, where a listing has it, lifts
// the limit.

// limitFlag is a listing's --limit: what names its items ("messages"), def
// its default count, 0 for no limit (printed as "all").
func limitFlag(what string, def int) cli.Flag {
	f := &cli.IntFlag{Name: "limit", Usage: fmt.Sprintf("print at most `N` %s in total (following pages as needed)", what), Value: def}
	if def == 0 {
		f.DefaultText = "all"
	}
	return f
}

// pageSizeFlag is a listing's --page-size.
func pageSizeFlag() cli.Flag {
	return &cli.IntFlag{Name: "page-size", Usage: fmt.Sprintf("ask the node for at most `N` items a request (1-%d)", api.MaxPageLimit),
		DefaultText: fmt.Sprintf("what --limit leaves, at most %d", api.MaxPageLimit)}
}

// allFlag is a listing's --all: no --limit.
func allFlag(what string) cli.Flag {
	return &cli.BoolFlag{Name: "all", Usage: "print every " + what + " (follow pages to the end; not with --limit)"}
}

// listLimit is what a listing's --limit, --all and --page-size ask for.
type listLimit struct {
	max  int // items to print in total; 0: all
	size int // items a page; 0: what max leaves, at most api.MaxPageLimit
}

// limitFlags reads c's --limit, --all (when the command has it) and
// --page-size.
func limitFlags(c *cli.Context) (listLimit, error) {
	l := listLimit{max: c.Int("limit"), size: c.Int("page-size")}
	if c.IsSet("limit") && l.max < 1 {
		return l, usagef(c, "--limit %d: want a positive number of items", l.max)
	}
	if c.Bool("all") {
		if c.IsSet("limit") {
			return l, usagef(c, "--all and --limit %d: give one of them", l.max)
		}
		l.max = 0
	}
	if c.IsSet("page-size") && (l.size < 1 || l.size > api.MaxPageLimit) {
		return l, usagef(c, "--page-size %d: must be 1..%d", l.size, api.MaxPageLimit)
	}
	return l, nil
}

// pageSize is how many items to ask for when got are printed.
func (l listLimit) pageSize(got int) int {
	n := api.MaxPageLimit
	if l.size > 0 {
		n = l.size
	}
	if l.max > 0 {
		n = min(n, l.max-got)
	}
	return n
}

// eachPage asks fetch for page after page, each call bounded by c's
// --timeout under parent, and hands each page's items to fn, until the
// listing ends (more false) or l.max items were handed over (more true
// if the node said more follow). fetch keeps its own cursor and checks
// that the node moved on; it is asked for at most size items, and any
// more it returns are dropped.
func eachPage[T any](c *cli.Context, parent context.Context, l listLimit,
	fetch func(ctx context.Context, size int) (items []T, more bool, err error), fn func([]T) error) (more bool, err error) {
	got := 0
	for {
		size := l.pageSize(got)
		ctx, cancel := callWith(c, parent)
		items, more, err := fetch(ctx, size)
		cancel()
		if err != nil {
			return false, err
		}
		if len(items) > size {
			items, more = items[:size], true
		}
		if err := fn(items); err != nil {
			return false, err
		}
		got += len(items)
		if !more || (l.max > 0 && got >= l.max) {
			return more, nil
		}
	}
}

// listPages prints a seq-ordered listing (read, overview, artifact ls)
// from --after on, as far as --limit (or --all) asks: each item as the
// line line makes of it, or under --json all of them as one JSON array
// once the listing ends. fetch gets the page of at most size items after
// a seq. When it stops with more to come, a hint on stderr gives the
// command (again) that goes on. what names the listing in the errors
// about a node that sends a page out of order or says more follow and
// sends none.
func listPages[T any](c *cli.Context, what, again string,
	fetch func(ctx context.Context, after uint64, size int) (items []T, more bool, err error),
	seq func(T) uint64, line func(T) string) error {
	l, err := limitFlags(c)
	if err != nil {
		return err
	}
	after, asJSON := c.Uint64("after"), wantJSON(c)
	out := []T{}
	more, err := eachPage(c, commandContext(c), l, func(ctx context.Context, size int) ([]T, bool, error) {
		items, more, err := fetch(ctx, after, size)
		if err != nil {
			return nil, false, apiError(c, err)
		}
		for _, it := range items {
			if s := seq(it); s <= after {
				return nil, false, fmt.Errorf("%s: the node returned #%d in a page after #%d", what, s, after)
			}
			after = seq(it)
		}
		if more && len(items) == 0 {
			return nil, false, fmt.Errorf("%s: the node said more follow #%d but sent none", what, after)
		}
		return items, more, nil
	}, func(items []T) error {
		if asJSON {
			out = append(out, items...)
			return nil
		}
		for _, it := range items {
			if _, err := fmt.Fprintln(c.App.Writer, line(it)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if more && !asJSON {
		fmt.Fprintf(c.App.ErrWriter, "(more after #%d: %s --after %d, or --all)\n", after, again, after)
	}
	if asJSON {
		return printJSON(c.App.Writer, out)
	}
	return nil
}
