package maosctl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
)

func bulletinCommand() *cli.Command {
	return &cli.Command{
		Name:  "bulletin",
		Usage: "read and change the global bulletin every agent sees",
		UsageText: `maosctl bulletin get [KEY] | set KEY VALUE | edit -f FILE

   maosctl bulletin get system_status
   maosctl bulletin set system_status degraded
   maosctl bulletin set warnings '["disk at 91% on n2"]'
   maosctl bulletin edit -f status.json --if-version 12`,
		Description: `The bulletin is one replicated JSON document: system_status (normal,
degraded, maintenance), current_phase, warnings[], shared_resources{} and
any other keys. Its version is the Raft index of its last change; give
--if-version N to set or edit so the change applies only if nobody changed
the bulletin since you read version N (otherwise it fails, naming the
current version).

Every advisory lock shows in shared_resources as an entry with
"managed_by": "lock"; such entries are maintained by the lock commands and
dropped from what you write, so get, edit and put back is safe.`,
		Subcommands: []*cli.Command{
			bulletinGetCommand(),
			bulletinSetCommand(),
			bulletinEditCommand(),
		},
		Action: noCommand,
	}
}

func bulletinWriteFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "if-version", Usage: "apply only if the bulletin is still at `VERSION` (0: never written)"},
		agentFlag("by", "your agent `ID`, recorded in the audit trail"),
		jsonFlag(),
	}
}

func bulletinGetCommand() *cli.Command {
	return &cli.Command{
		Name:  "get",
		Usage: "print the bulletin, or one of its keys",
		UsageText: `maosctl bulletin get [KEY] [--strong]

   maosctl bulletin get
   maosctl bulletin get current_phase
   maosctl --json bulletin get | jq .version`,
		Description: `Without KEY, prints "version N · updated TIME by ID" and the document as
indented JSON. With KEY, prints that key's value: a string as it is,
anything else as JSON; a key the bulletin lacks is an error.

With --json, the API's object {"version","updated_at","updated_by","as_of",
"bulletin"} (or, with KEY, the key's JSON value).`,
		Flags:  []cli.Flag{strongFlag(), jsonFlag()},
		Action: bulletinGet,
	}
}

func bulletinGet(c *cli.Context) error {
	pos, err := trailingFlags(c)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return usagef(c, "unexpected argument %q (get takes at most one KEY)", pos[1])
	}
	ctx, cancel := call(c)
	defer cancel()
	b, err := apiClient(c).Bulletin(ctx, consistency(c))
	if err != nil {
		return apiError(c, err)
	}
	if len(pos) == 0 {
		if wantJSON(c) {
			return printJSON(c.App.Writer, b)
		}
		var buf bytes.Buffer
		if err := json.Indent(&buf, b.Doc, "", "  "); err != nil {
			return fmt.Errorf("bulletin: %w", err)
		}
		head := fmt.Sprintf("version %d", b.Version)
		if !b.UpdatedAt.IsZero() {
			head += " · updated " + b.UpdatedAt.Format(time.RFC3339)
			if b.UpdatedBy != "" {
				head += " by " + b.UpdatedBy
			}
		}
		_, err = fmt.Fprintf(c.App.Writer, "%s\n%s\n", head, buf.Bytes())
		return err
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(b.Doc, &doc); err != nil {
		return fmt.Errorf("bulletin: %w", err)
	}
	v, ok := doc[pos[0]]
	if !ok {
		keys := make([]string, 0, len(doc))
		for k := range doc {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return fmt.Errorf("the bulletin has no key %q (keys: %s)", pos[0], strings.Join(keys, ", "))
	}
	var s string
	if !wantJSON(c) && json.Unmarshal(v, &s) == nil {
		_, err = fmt.Fprintln(c.App.Writer, s)
		return err
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, v, "", "  "); err != nil {
		return fmt.Errorf("bulletin: %w", err)
	}
	_, err = fmt.Fprintf(c.App.Writer, "%s\n", buf.Bytes())
	return err
}

func bulletinSetCommand() *cli.Command {
	return &cli.Command{
		Name:  "set",
		Usage: "set one top-level key of the bulletin",
		UsageText: `maosctl bulletin set KEY VALUE [--if-version N] [--by ID]

   maosctl bulletin set system_status maintenance
   maosctl bulletin set current_phase "integration tests"
   maosctl bulletin set warnings '["flaky CI on main"]'
   maosctl bulletin set release null`,
		Description: `VALUE is taken as JSON when it parses as JSON (numbers, true, null,
'["a"]', '{"k":"v"}', '"123"'), and as a string otherwise. null deletes
the key. The change is a JSON merge patch (RFC 7396): an object VALUE is
merged into the key's object rather than replacing it, so
"set shared_resources '{"db":"free"}'" leaves the other resources alone.

Prints "bulletin version N: changed KEY"; with --json, the API's result.`,
		Flags:  bulletinWriteFlags(),
		Action: bulletinSet,
	}
}

func bulletinSet(c *cli.Context) error {
	args, err := positionalArgs(c, "key", "value")
	if err != nil {
		return err
	}
	key, value := args[0], args[1]
	if key == "" {
		return usagef(c, "KEY is empty")
	}
	raw := json.RawMessage(value)
	if !json.Valid(raw) {
		raw, _ = json.Marshal(value)
	}
	patch, err := json.Marshal(map[string]json.RawMessage{key: raw})
	if err != nil {
		return fmt.Errorf("bulletin set: %w", err)
	}
	return bulletinWrite(c, http.MethodPatch, patch)
}

func bulletinEditCommand() *cli.Command {
	return &cli.Command{
		Name:  "edit",
		Usage: "replace the bulletin with a JSON file (or merge it with --merge)",
		UsageText: `maosctl bulletin edit -f FILE [--merge] [--if-version N] [--by ID]

   maosctl --json bulletin get | jq .bulletin > status.json   # note the version
   $EDITOR status.json
   maosctl bulletin edit -f status.json --if-version 12`,
		Description: `Puts the JSON object in FILE (- reads standard input) as the whole new
bulletin: keys it lacks are removed. With --merge, FILE is a JSON merge
patch instead (RFC 7396: null deletes a key, objects merge). Lock entries
of shared_resources are kept whatever FILE says.

The bulletin is capped at 64 KiB. Prints "bulletin version N: changed
KEYS"; with --json, the API's result.`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "file", Aliases: []string{"f"}, Usage: "JSON `FILE` with the document; - for stdin (required)"},
			&cli.BoolFlag{Name: "merge", Usage: "merge FILE into the bulletin instead of replacing it"},
		}, bulletinWriteFlags()...),
		Action: bulletinEdit,
	}
}

func bulletinEdit(c *cli.Context) error {
	if err := noArgs(c, "file"); err != nil {
		return err
	}
	name := c.String("file")
	var (
		data []byte
		err  error
	)
	if name == "-" {
		if c.App.Reader == nil {
			return usagef(c, "--file -: no standard input")
		}
		data, err = io.ReadAll(c.App.Reader)
	} else {
		data, err = os.ReadFile(name)
	}
	if err != nil {
		return fmt.Errorf("read --file: %w", err)
	}
	if !json.Valid(data) {
		var v any
		err := json.Unmarshal(data, &v)
		return fmt.Errorf("%s is not valid JSON: %v", name, err)
	}
	method := http.MethodPut
	if c.Bool("merge") {
		method = http.MethodPatch
	}
	return bulletinWrite(c, method, data)
}

// bulletinWrite sends a PUT or PATCH with --if-version and --by.
func bulletinWrite(c *cli.Context, method string, doc []byte) error {
	if err := defaultActing(c, "by"); err != nil {
		return err
	}
	opts := api.BulletinWrite{By: strings.TrimSpace(c.String("by"))}
	if s := strings.TrimSpace(c.String("if-version")); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return usagef(c, "--if-version: %q is not a version (a whole number, as 'maosctl bulletin get' prints)", s)
		}
		opts.IfVersion = &v
	}
	ctx, cancel := call(c)
	defer cancel()
	cl := apiClient(c)
	var (
		res api.BulletinResult
		err error
	)
	if method == http.MethodPut {
		res, err = cl.PutBulletin(ctx, doc, opts)
	} else {
		res, err = cl.PatchBulletin(ctx, doc, opts)
	}
	if err != nil {
		return apiError(c, err)
	}
	if wantJSON(c) {
		return printJSON(c.App.Writer, res)
	}
	what := "no change"
	if len(res.Changed) > 0 {
		what = "changed " + strings.Join(res.Changed, ", ")
	}
	_, err = fmt.Fprintf(c.App.Writer, "bulletin version %d: %s\n", res.Version, what)
	return err
}
