package maosctl

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/urfave/cli/v2"
)

// listPages refuses a node that pages out of order or says more follow
// and sends none, and prints each page it gets before going on.
func TestListPagesRefusesABadNode(t *testing.T) {
	type page struct {
		seqs []uint64
		more bool
	}
	for _, c := range []struct {
		name    string
		pages   []page
		args    []string
		out     string
		wantErr string
	}{
		{"in order, to the end", []page{{[]uint64{1, 2}, true}, {[]uint64{3}, false}}, []string{"--all"}, "#1\n#2\n#3\n", ""},
		{"one page and a hint", []page{{[]uint64{1, 2}, true}}, nil, "#1\n#2\n", ""},
		{"--limit over pages", []page{{[]uint64{1, 2}, true}, {[]uint64{3}, true}}, []string{"--limit", "3", "--page-size", "2"}, "#1\n#2\n#3\n", ""},
		{"--limit cuts a long page", []page{{[]uint64{1, 2, 3}, false}}, []string{"--limit", "2"}, "#1\n#2\n", ""},
		{"a seq at or below --after", []page{{[]uint64{5}, false}}, []string{"--after", "5"}, "",
			"things: the node returned #5 in a page after #5"},
		{"out of order within a page", []page{{[]uint64{2, 1}, false}}, nil, "", "things: the node returned #1 in a page after #2"},
		{"more follow, none sent", []page{{[]uint64{1}, true}, {nil, true}}, []string{"--all"}, "#1\n",
			"things: the node said more follow #1 but sent none"},
	} {
		var out, errOut bytes.Buffer
		calls := 0
		app := &cli.App{Writer: &out, ErrWriter: &errOut, Commands: []*cli.Command{{
			Name:  "ls",
			Flags: []cli.Flag{&cli.Uint64Flag{Name: "after"}, limitFlag("things", 2), pageSizeFlag(), allFlag("thing"), jsonFlag()},
			Action: func(ctx *cli.Context) error {
				return listPages(ctx, "things", "maosctl ls",
					func(_ context.Context, after uint64, _ int) ([]uint64, bool, error) {
						p := c.pages[calls]
						calls++
						return p.seqs, p.more, nil
					},
					func(s uint64) uint64 { return s }, func(s uint64) string { return fmt.Sprintf("#%d", s) })
			},
		}}}
		err := app.Run(append([]string{"maosctl", "ls"}, c.args...))
		if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || err.Error() != c.wantErr) {
			t.Errorf("%s: err %v, want %q", c.name, err, c.wantErr)
		}
		if out.String() != c.out {
			t.Errorf("%s: printed %q, want %q", c.name, out.String(), c.out)
		}
		if hint := "(more after #2: maosctl ls --after 2, or --all)\n"; c.name == "one page and a hint" && errOut.String() != hint {
			t.Errorf("%s: stderr %q, want %q", c.name, errOut.String(), hint)
		}
		if calls != len(c.pages) {
			t.Errorf("%s: %d fetches, want %d", c.name, calls, len(c.pages))
		}
	}
}
