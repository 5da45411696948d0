package maosctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
)

// What the task and approval groups do alike, one copy: their id
// argument, create (its id fixed before the first try), show, list, the
// follow of one object on the stream and the wait's skeleton. what names
// the group ("task", "approval") where it is printed.

// objectID is the command's one positional argument, the task's or
// approval's id; then the flags named by required must be given
// (require).
func objectID(c *cli.Context, required ...string) (string, error) {
	pos, err := positionalArgs(c, "ID")
	if err != nil {
		return "", err
	}
	return pos[0], require(c, required...)
}

// createObject sends the create of a what (task, approval) with send.
// The object's id (*id), when none was given and from is a valid name,
// is fixed before the first try (newID), so a create that timed out can
// be checked (maosctl what show ID) and retried with --id: an error that
// leaves the create maybe stored says so. The global --timeout bounds
// the call; the command's own --timeout is the object's.
func createObject[R any](c *cli.Context, what string, id *string, from string, newID func(string, time.Time) string,
	send func(context.Context, *client.Client) (R, error)) (R, error) {
	if *id == "" && api.ValidName(from) {
		*id = newID(from, time.Now())
	}
	root := rootContext(c)
	ctx, cancel := call(root)
	defer cancel()
	res, err := send(ctx, apiClient(c))
	if err != nil {
		maybe := api.Classify(err) == api.MaybeCommitted
		err = apiError(root, err)
		if maybe {
			err = fmt.Errorf("%w\nthe %s may or may not be stored: check with 'maosctl %s show %s'; "+
				"retrying with --id %s is safe", err, what, what, *id, *id)
		}
	}
	return res, err
}

// showObject is 'show ID': it reads the object with get (a client's
// method: (*transport.Client).Task) and prints the API's answer with
// --json, else what print writes.
func showObject[T any](c *cli.Context, get func(*client.Client, context.Context, string) (T, error),
	print func(io.Writer, T) error) error {
	id, err := objectID(c)
	if err != nil {
		return err
	}
	ctx, cancel := call(c)
	defer cancel()
	v, err := get(apiClient(c), ctx, id)
	if err != nil {
		return apiError(c, err)
	}
	if wantJSON(c) {
		return printJSON(c.App.Writer, v)
	}
	return print(c.App.Writer, v)
}

// cancelObject is 'what cancel ID --from ID [--reason R]': send cancels
// object id as from, for reason, and gives the API's answer and the id it
// names; it prints "cancelled ID", or the answer with --json.
func cancelObject(c *cli.Context, send func(ctx context.Context, client *client.Client, id, from, reason string) (any, string, error)) error {
	id, err := objectID(c, "from")
	if err != nil {
		return err
	}
	ctx, cancel := call(c)
	defer cancel()
	res, resID, err := send(ctx, apiClient(c), id, strings.TrimSpace(c.String("from")), c.String("reason"))
	if err != nil {
		return apiError(c, err)
	}
	return printResult(c, res, "cancelled %s\n", resID)
}

// printHead writes the first lines of a show: "ID STATE", "title: T",
// "from: FROM → TO, channel C, priority P".
func printHead(w io.Writer, id, state, title, from, to, channel string, priority api.Priority) {
	fmt.Fprintf(w, "%s %s\n", id, state)
	fmt.Fprintf(w, "title: %s\n", title)
	fmt.Fprintf(w, "from: %s → %s, channel %s, priority %s\n", from, to, channel, priority)
}

// printStamps writes a show's "created: T (seq N), updated T" and, when
// there is one, "context: JSON".
func printStamps(w io.Writer, created time.Time, seq uint64, updated time.Time, ctxJSON json.RawMessage) {
	fmt.Fprintf(w, "created: %s (seq %d), updated %s\n", created.UTC().Format(time.RFC3339), seq, updated.UTC().Format(time.RFC3339))
	if len(ctxJSON) > 0 {
		fmt.Fprintf(w, "context: %s\n", ctxJSON)
	}
}

// printLog writes the last part of a show, when items has any: a blank
// line, "title:", and a table of one row per item (row: its cells,
// tab-separated, indented).
func printLog[T any](w io.Writer, title string, items []T, row func(T) string) error {
	if len(items) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\n%s:\n", title)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, v := range items {
		fmt.Fprintln(tw, row(v))
	}
	return tw.Flush()
}

// listFlags are the flags of 'what list': its filters, then the
// listing's (--after, --limit, --page-size) and --json.
func listFlags(what string, filters ...cli.Flag) []cli.Flag {
	return append(filters,
		&cli.Uint64Flag{Name: "after", Usage: fmt.Sprintf("start after the %s with seq `SEQ` (the next page)", what)},
		limitFlag(what+"s", api.DefaultPageLimit),
		pageSizeFlag(),
		jsonFlag())
}

// listObjects reads 'what list' from --after on, as many items as
// --limit asks for (eachPage): fetch gets the page of at most size items
// after a seq. It returns the items and whether the node said more
// follow them.
func listObjects[T any](c *cli.Context, what string, fetch func(ctx context.Context, after uint64, size int) ([]T, bool, error),
	seq func(T) uint64) ([]T, bool, error) {
	l, err := limitFlags(c)
	if err != nil {
		return nil, false, err
	}
	after := c.Uint64("after")
	out := []T{}
	more, err := eachPage(c, commandContext(c), l, func(ctx context.Context, size int) ([]T, bool, error) {
		items, more, err := fetch(ctx, after, size)
		if err != nil {
			return nil, false, apiError(c, err)
		}
		if len(items) > 0 {
			after = seq(items[len(items)-1])
		}
		if more && len(items) == 0 {
			return nil, false, fmt.Errorf("%s list: the node said more follow #%d but sent none", what, after)
		}
		return items, more, nil
	}, func(items []T) error {
		out = append(out, items...)
		return nil
	})
	return out, more, err
}

// printList prints a page of 'what list': page, the API's answer, with
// --json; else "no whats", or a table of header and one row per item,
// then, when the page has more, the command that lists the next one
// ("more: maosctl what list --after SEQ", the last item's seq). items
// points at the page's list: a nil one is made empty first, so --json
// prints [].
func printList[T any](c *cli.Context, page any, items *[]T, hasMore bool, what, header string,
	row func(T) string, seq func(T) uint64) error {
	if *items == nil {
		*items = []T{}
	}
	if wantJSON(c) {
		return printJSON(c.App.Writer, page)
	}
	w := c.App.Writer
	if len(*items) == 0 {
		_, err := fmt.Fprintf(w, "no %ss\n", what)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, v := range *items {
		fmt.Fprintln(tw, row(v))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !hasMore {
		return nil
	}
	_, err := fmt.Fprintf(w, "more: maosctl %s list --after %d\n", what, seq((*items)[len(*items)-1]))
	return err
}

// followObject follows one object v (as read) on the node's stream q
// until it is final and returns it so, as its last update left it; pick
// gives an event's object when it is v's. When ctx ends first it returns
// v as last seen and ctx's error; a refusal of the stream that
// reconnecting will not mend is returned as the error.
func followObject[T any](ctx context.Context, client *client.Client, q api.StreamQuery, v T,
	pick func(api.StreamEvent) (T, bool), final func(T) bool) (T, error) {
	err := followStream(ctx, client, q, func(ev api.StreamEvent) error {
		u, ok := pick(ev)
		if !ok {
			return nil
		}
		v = u
		if final(v) {
			return errStreamDone
		}
		return nil
	})
	return v, err
}

// waitObject is 'what wait ID [--timeout D]': it reads the object with
// get (the global --timeout bounds the read), and unless it is final
// awaits its end with await within --timeout, then prints the outcome
// (print, given the object as it then stands: the last seen when
// --timeout passed) and returns the exit status print returns. An error
// of await before --timeout passed is the command's error.
func waitObject[T any](c *cli.Context, get func(*client.Client, context.Context, string) (T, error), final func(T) bool,
	await func(ctx context.Context, client *client.Client, root *cli.Context, v T) (T, error),
	print func(*cli.Context, T, time.Duration) error) error {
	id, err := objectID(c)
	if err != nil {
		return err
	}
	timeout := c.Duration("timeout")
	if c.IsSet("timeout") && timeout <= 0 {
		return usagef(c, "--timeout %s: want a positive duration such as 90s or 30m", timeout)
	}
	root := rootContext(c)
	ctx, cancel := within(commandContext(c), timeout)
	defer cancel()
	client := apiClient(c)
	readCtx, cancelRead := call(root)
	v, err := get(client, readCtx, id)
	cancelRead()
	if err != nil {
		return apiError(root, err)
	}
	if !final(v) {
		v, err = await(ctx, client, root, v)
		if err != nil && ctx.Err() == nil {
			return apiError(root, err)
		}
	}
	return print(c, v, timeout)
}

// printWaitEnd prints the end of a wait, v (the API's object) with
// --json, else what plain writes, and returns the exit status code
// (waitSucceeded: none).
func printWaitEnd(c *cli.Context, code int, v any, plain func(io.Writer) error) error {
	var err error
	if wantJSON(c) {
		err = printJSON(c.App.Writer, v)
	} else {
		err = plain(c.App.Writer)
	}
	if err != nil || code == waitSucceeded {
		return err
	}
	return &exitStatus{code: code}
}
