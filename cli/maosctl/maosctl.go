package maosctl

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/agnivade/levenshtein"
	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/cli/internal/version"
	"github.com/maos-project/maos/hostport"
)

// Defaults and environment variables of maosctl.
const (
	// DefaultAddr is the API address maosctl talks to when neither
	// --addr nor $MAOS_ADDR is given.
	DefaultAddr = "127.0.0.1:7070"
	// DefaultTimeout bounds each API call unless --timeout says
	// otherwise.
	DefaultTimeout = 15 * time.Second

	envAddr      = "MAOS_ADDR"
	envTimeout   = "MAOS_TIMEOUT"
	envAgent     = "MAOS_AGENT_ID"
	envChannel   = "MAOS_CHANNEL"
	envToken     = "MAOS_TOKEN"
	envTokenFile = "MAOS_TOKEN_FILE"
)

// usageError is a mistake on the command line (a missing flag, an extra
// argument). It exits 1 like every other maosctl error; the type lets the
// message carry a hint at --help.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(c *cli.Context, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	return &usageError{msg: fmt.Sprintf("%s (see '%s --help')", msg, commandPath(c))}
}

// commandPath is "maosctl cluster join" for the command c runs.
func commandPath(c *cli.Context) string {
	var names []string
	for _, x := range c.Lineage() {
		if x.Command != nil && x.Command.Name != "" {
			names = append(names, x.Command.Name)
		}
	}
	path := []string{c.App.Name}
	for i := len(names) - 1; i >= 0; i-- {
		if names[i] != c.App.Name {
			path = append(path, names[i])
		}
	}
	return strings.Join(path, " ")
}

// App builds the maosctl command line: the admin and agent client of
// a maos cluster. It writes results to app.Writer, errors to app.ErrWriter
// as "maosctl: <message>", and reads `--text -` from app.Reader; tests swap
// those. Run returns a non-nil error (already printed) when the command
// failed; ExitCode turns it into the process exit status.
//
// Global flags: --addr (or $MAOS_ADDR, default 127.0.0.1:7070), --json,
// --timeout (or $MAOS_TIMEOUT, default 15s, bounds each API call), --token
// (or $MAOS_TOKEN) and --token-file (or $MAOS_TOKEN_FILE), the bearer token
// of a cluster running with --auth; --ca (or $MAOS_CA) to speak https and
// verify the node, --cert/--key (or $MAOS_CERT/$MAOS_KEY) to present a
// client certificate.
func App() *cli.App {
	app := &cli.App{
		Name:    "maosctl",
		Usage:   "send and read messages of a maos cluster, and administer its nodes",
		Version: version.String(),
		UsageText: `maosctl [--addr HOST:PORT] [--json] [--timeout D] COMMAND [flags] [args]

   maosctl send --from codex --to claude --channel review --text "@claude please review"
   maosctl read --channel review --after 40
   maosctl --addr 10.0.0.2:7070 cluster status`,
		Description: `maosctl talks to any maosd node through its HTTP API (v1). Writes are
forwarded to the leader by the node; reads are served by the node itself
unless --strong asks for a read that sees every acknowledged send.

Point it at a node with --addr or MAOS_ADDR. Agents usually export
MAOS_AGENT_ID and MAOS_CHANNEL so that 'maosctl send' needs only --to and
--text. Add --json to any command for machine-readable output.

A cluster started with maosd --auth wants a bearer token on every call: set
MAOS_TOKEN (or --token, or --token-file/MAOS_TOKEN_FILE naming a file that
holds it) to a token from 'maosctl token create'. An agent's token speaks
only for that agent. See 'maosctl token --help'.

A cluster started with maosd --tls-cert/--tls-key/--tls-ca serves https:
give --ca (or MAOS_CA) the cluster's CA certificate to verify the node.`,
		Flags: []cli.Flag{
			&cli.StringFlag{
				Name:    "addr",
				Usage:   "API address `HOST:PORT` (or URL) of any maosd node",
				EnvVars: []string{envAddr},
				Value:   DefaultAddr,
			},
			jsonFlag(),
			&cli.DurationFlag{
				Name:    "timeout",
				Usage:   "give up on each API call after `DURATION`",
				EnvVars: []string{envTimeout},
				Value:   DefaultTimeout,
			},
			&cli.StringFlag{
				Name:    "token",
				Usage:   "bearer `TOKEN` for a cluster running with --auth (wins over --token-file)",
				EnvVars: []string{envToken},
			},
			&cli.StringFlag{
				Name:    "token-file",
				Usage:   "`FILE` holding the bearer token on one line",
				EnvVars: []string{envTokenFile},
			},
			&cli.StringFlag{
				Name:    "ca",
				Usage:   "`FILE` of the CA certificate(s) (PEM) that sign the nodes' certificates: speak https, verify the node against it",
				EnvVars: []string{envCA},
			},
			&cli.StringFlag{
				Name:    "cert",
				Usage:   "client certificate `FILE` (PEM) signed by --ca, for node-to-node endpoints (agents need none)",
				EnvVars: []string{envCert},
			},
			&cli.StringFlag{
				Name:    "key",
				Usage:   "private key `FILE` (PEM) of --cert",
				EnvVars: []string{envKey},
			},
		},
		Before: chainBefore(safeStdout, checkAddrFlag, loadToken, loadTLS),
		Commands: slices.Concat([]*cli.Command{
			sendCommand(),
			taskCommand(),
			approvalCommand(),
			getCommand(),
			readCommand(),
			channelsCommand(),
			clusterCommand(),
			tokenCommand(),
			policyCommand(),
			artifactCommand(),
			setupCommand(),
		}, mailboxCommands(), oversightCommands(), coordinationCommands(), presenceCommands()),
		Action:               noCommand,
		Writer:               os.Stdout,
		ErrWriter:            os.Stderr,
		Reader:               os.Stdin,
		EnableBashCompletion: true,
	}
	app.OnUsageError = onUsageError
	setUsageHandler(app.Commands)
	app.ExitErrHandler = func(c *cli.Context, err error) {
		var st *exitStatus
		if err == nil || (errors.As(err, &st) && st.msg == "") {
			return
		}
		w := c.App.ErrWriter
		if w == nil {
			w = os.Stderr
		}
		fmt.Fprintf(w, "%s: %s\n", c.App.Name, err)
	}
	return app
}

// ExitCode is the process exit status for an error returned by
// App().Run: 0 for nil, the status a command chose for its outcome (task
// wait: 1 failed or cancelled, 2 timed out), 1 for any other error (usage,
// API or connection), which Run has already printed to the app's
// ErrWriter.
func ExitCode(err error) int {
	var st *exitStatus
	switch {
	case err == nil:
		return 0
	case errors.As(err, &st):
		return st.code
	}
	return 1
}

// exitStatus is an outcome a command reports by its exit status rather
// than as an error: msg, if any, is printed like an error's.
type exitStatus struct {
	code int
	msg  string
}

func (e *exitStatus) Error() string {
	if e.msg == "" {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.msg
}

// setUsageHandler routes flag-parsing errors of every command through
// ExitErrHandler, so they are printed as "maosctl: ..." on stderr.
func setUsageHandler(cmds []*cli.Command) {
	for _, cmd := range cmds {
		cmd.OnUsageError = onUsageError
		setUsageHandler(cmd.Subcommands)
	}
}

func onUsageError(c *cli.Context, err error, isSubcommand bool) error {
	msg := err.Error()
	if isSubcommand {
		for _, g := range []string{"addr", "timeout", "token", "token-file", "ca", "cert", "key"} {
			if strings.HasSuffix(msg, "not defined: -"+g) {
				msg += fmt.Sprintf("; --%s is a global flag and goes before the command: maosctl --%s ... %s",
					g, g, strings.TrimPrefix(commandPath(c), c.App.Name+" "))
			}
		}
	}
	return usagef(c, "%s", msg)
}

// noCommand is the action of a command that needs a subcommand: help
// when none is given, a usage error naming the unknown one otherwise.
func noCommand(c *cli.Context) error {
	if c.Args().Present() {
		name := c.Args().First()
		cmds := c.App.Commands
		if c.Command != nil && len(c.Command.Subcommands) > 0 {
			cmds = c.Command.Subcommands
		}
		if s := suggestCommand(cmds, name); s != "" {
			return usagef(c, "unknown command %q; did you mean %s?", name, s)
		}
		return usagef(c, "unknown command %q", name)
	}
	return cli.ShowSubcommandHelp(c)
}

// suggestCommand is the visible command (or alias) of cmds closest to a
// mistyped name by edit distance, "" when none is close: at most a third
// of the name's length away (at least 2), as the API's "did you mean" for
// agent names. urfave/cli's own Suggest always names some command, which
// for a word that is none ("frobnicate") misleads.
func suggestCommand(cmds []*cli.Command, name string) string {
	best, bestDist := "", max(2, len(name)/3)+1
	for _, cmd := range cmds {
		if cmd.Hidden {
			continue
		}
		for _, n := range cmd.Names() {
			if d := levenshtein.ComputeDistance(n, name); d < bestDist {
				best, bestDist = n, d
			}
		}
	}
	return best
}

func jsonFlag() *cli.BoolFlag {
	return &cli.BoolFlag{Name: "json", Usage: "print the API's JSON objects instead of text"}
}

// wantJSON reports whether --json was given globally or to the command.
func wantJSON(c *cli.Context) bool {
	for _, x := range c.Lineage() {
		if x.App != nil && x.Bool("json") {
			return true
		}
	}
	return false
}

// checkAddr checks one API address as --addr takes it: HOST:PORT (port
// 1..65535), or a URL http(s)://HOST[:PORT][/PATH]. The error names flag
// and says the form wanted.
func checkAddr(flag, addr string) error {
	const want = "want HOST:PORT (e.g. 127.0.0.1:7070) or http(s)://HOST:PORT"
	if !strings.Contains(addr, "://") {
		if err := hostport.Check(addr, hostport.Port); err != nil {
			return fmt.Errorf("%s: %w; %s", flag, err, want)
		}
		return nil
	}
	u, err := url.Parse(addr)
	switch {
	case err != nil:
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("%s: %q is not a URL (%v); %s", flag, addr, err, want)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%s: %q: scheme %q; %s", flag, addr, u.Scheme, want)
	case u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("%s: %q: want a host, and no user, query or fragment; %s", flag, addr, want)
	case u.Port() != "":
		if err := hostport.Check(u.Host, hostport.Port); err != nil {
			return fmt.Errorf("%s: %w; %s", flag, err, want)
		}
	}
	return nil
}

// checkAddrFlag is the app's check of the global --addr, before any
// command runs: a list (HOST:PORT,HOST:PORT) only for bench. The hook
// checks it itself, as it notes every problem on stderr and exits 0.
func checkAddrFlag(c *cli.Context) error {
	flag := "--addr (or $" + envAddr + ")"
	addrs := []string{nodeAddr(c)}
	switch c.Args().First() {
	case "hook":
		return nil
	case "bench":
		addrs = splitList(addrs)
	}
	for _, a := range addrs {
		if err := checkAddr(flag, a); err != nil {
			return err
		}
	}
	return nil
}

// nodeAddr is the --addr the user gave (or its default).
func nodeAddr(c *cli.Context) string {
	if a := strings.TrimSpace(c.String("addr")); a != "" {
		return a
	}
	return DefaultAddr
}

// apiClient is the API client for --addr, carrying the --token.
func apiClient(c *cli.Context) *client.Client {
	return newAPIClient(c, nodeAddr(c), nil).WithToken(bearerToken(c))
}

// call returns the context of one API call: the command's context bounded
// by --timeout.
func call(c *cli.Context) (context.Context, context.CancelFunc) {
	return callWith(c, commandContext(c))
}

// callWith is call with parent instead of the command's context.
func callWith(c *cli.Context, parent context.Context) (context.Context, context.CancelFunc) {
	return within(parent, c.Duration("timeout"))
}

// commandContext is the context the command runs in (Background when the
// app was run without one).
func commandContext(c *cli.Context) context.Context {
	if c.Context != nil {
		return c.Context
	}
	return context.Background()
}

// within is parent bounded by d; no bound when d is 0 or less.
func within(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d > 0 {
		return context.WithTimeout(parent, d)
	}
	return context.WithCancel(parent)
}

// userError is an error whose message is written for the user while the
// cause stays reachable through errors.Is/As.
type userError struct {
	msg string
	err error
}

func (e *userError) Error() string { return e.msg }
func (e *userError) Unwrap() error { return e.err }

// apiError turns an error of a transport.Client call into the message
// maosctl prints: the server's words for an API error, the client's words
// (transport.UnreachableError, as the MCP tools say it) and where to set
// the address when the node cannot be reached, a hint when it does not
// answer in time.
func apiError(c *cli.Context, err error) error {
	if err == nil {
		return nil
	}
	if e := tlsHint(c, err); e != nil {
		return e
	}
	addr := nodeAddr(c)
	var (
		apiErr      *api.APIError
		unreachable *client.UnreachableError
	)
	switch {
	case errors.As(err, &apiErr) && apiErr.Status == http.StatusUnauthorized:
		return &userError{err: err, msg: err.Error() + "; " + unauthorizedHint(c)}
	case errors.As(err, &apiErr):
		return err
	case errors.Is(err, context.DeadlineExceeded):
		return &userError{err: err, msg: fmt.Sprintf("no answer from %s within %s (raise --timeout, or check the node)",
			addr, c.Duration("timeout"))}
	case errors.As(err, &unreachable):
		return &userError{err: err, msg: fmt.Sprintf("%v Set --addr or %s to a node's API address", unreachable, envAddr)}
	}
	return fmt.Errorf("%s: %w", addr, err)
}

// printJSON writes v as indented JSON and a newline.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode JSON: %w", err)
	}
	return nil
}

// printResult prints the outcome of a command: v, the API's answer, as
// JSON under --json, else the line format makes of args.
func printResult(c *cli.Context, v any, format string, args ...any) error {
	if wantJSON(c) {
		return printJSON(c.App.Writer, v)
	}
	_, err := fmt.Fprintf(c.App.Writer, format, args...)
	return err
}

// require returns a usage error naming the first flag among names whose
// value is empty (flags set from an empty environment variable count as
// missing). An empty acting-agent flag (agentFlag) is resolved instead,
// after the others are checked: it defaults to the token's agent
// (actingAgent).
func require(c *cli.Context, names ...string) error {
	var acting []string
	for _, name := range names {
		if isActingFlag(c, name) {
			acting = append(acting, name)
			continue
		}
		var empty bool
		if _, ok := commandFlag(c, name).(*cli.StringSliceFlag); ok {
			empty = len(splitList(c.StringSlice(name))) == 0
		} else {
			empty = strings.TrimSpace(c.String(name)) == ""
		}
		if empty {
			return usagef(c, "missing required flag --%s%s", name, envHint(c, name))
		}
	}
	for _, name := range acting {
		if err := resolveActing(c, name); err != nil {
			return err
		}
	}
	return nil
}

// envHint is " (or set $VAR)" when the flag name of c's command reads an
// environment variable.
func envHint(c *cli.Context, name string) string {
	if ev, ok := commandFlag(c, name).(interface{ GetEnvVars() []string }); ok && len(ev.GetEnvVars()) > 0 {
		return " (or set $" + strings.Join(ev.GetEnvVars(), " or $") + ")"
	}
	return ""
}

// commandFlag is the flag of c's command called name, or nil.
func commandFlag(c *cli.Context, name string) cli.Flag {
	if c.Command == nil {
		return nil
	}
	for _, f := range c.Command.Flags {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}

// splitList flattens repeated and comma-separated values, dropping
// blanks: ["a,b", " c "] → [a b c].
func splitList(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// positionalArgs returns the positional arguments of c, exactly want of them, named
// by names for the error message. Flags of the command that follow the
// arguments ("get ID --strong") are applied too, since the flag package
// stops at the first argument.
func positionalArgs(c *cli.Context, names ...string) ([]string, error) {
	pos, err := trailingFlags(c)
	if err != nil {
		return nil, err
	}
	if len(pos) < len(names) {
		return nil, usagef(c, "missing %s", strings.ToUpper(names[len(pos)]))
	}
	if len(pos) > len(names) {
		return nil, usagef(c, "unexpected argument %q", pos[len(names)])
	}
	return pos, nil
}

// trailingFlags splits c's arguments into positional ones and the
// command's flags given among or after them, and sets the latter on c.
func trailingFlags(c *cli.Context) ([]string, error) {
	args := c.Args().Slice()
	var pos []string
	for len(args) > 0 {
		a := args[0]
		switch {
		case a == "--":
			return append(pos, args[1:]...), nil
		case a == "-" || !strings.HasPrefix(a, "-"):
			pos = append(pos, a)
			args = args[1:]
			continue
		}
		fs := flag.NewFlagSet(c.Command.Name, flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		given := map[string]*flagValues{}
		// An alias (-o) is set through its flag's first name (--output):
		// urfave/cli keeps a value per name and reads the first.
		primary := map[string]string{}
		for _, f := range c.Command.Flags {
			for _, n := range f.Names() {
				primary[n] = f.Names()[0]
				if _, ok := f.(*cli.BoolFlag); ok {
					fs.Bool(n, false, "")
					continue
				}
				// Every other kind takes a value, which c.Set parses as
				// the flag's own type (a repeated slice flag: each one).
				v := &flagValues{}
				given[n] = v
				fs.Var(v, n, "")
			}
		}
		if err := fs.Parse(args); err != nil {
			return nil, usagef(c, "%v", err)
		}
		var setErr error
		fs.Visit(func(f *flag.Flag) {
			vals := []string{f.Value.String()}
			if v, ok := given[f.Name]; ok {
				vals = *v
			}
			for _, val := range vals {
				if err := c.Set(primary[f.Name], val); err != nil && setErr == nil {
					setErr = usagef(c, "flag --%s: %v", f.Name, err)
				}
			}
		})
		if setErr != nil {
			return nil, setErr
		}
		rest := fs.Args()
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			// flag.Parse consumed "--": everything after it is positional.
			return append(pos, rest...), nil
		}
		args = rest
	}
	return pos, nil
}

// flagValues collects each value a flag is given, in order.
type flagValues []string

func (v *flagValues) String() string     { return strings.Join(*v, ",") }
func (v *flagValues) Set(s string) error { *v = append(*v, s); return nil }

// noArgs checks a command that takes flags only: it fails when c got
// positional arguments, then when one of the required flags is missing
// (require's error).
func noArgs(c *cli.Context, required ...string) error {
	if c.Args().Present() {
		return usagef(c, "unexpected argument %q (flags go before arguments)", c.Args().First())
	}
	return require(c, required...)
}

// consistency is Strong when --strong was given.
func consistency(c *cli.Context) api.Consistency {
	if c.Bool("strong") {
		return api.Strong
	}
	return api.Local
}

func strongFlag() *cli.BoolFlag {
	return &cli.BoolFlag{
		Name:  "strong",
		Usage: "strongly consistent read: confirmed by the leader, sees every acknowledged send",
	}
}

// priorityFlag is the --priority of a message a command sends.
func priorityFlag() *cli.StringFlag {
	return &cli.StringFlag{Name: "priority", Usage: fmt.Sprintf("`PRIORITY`: %s (default %s)", api.PriorityList(), api.PriorityNormal)}
}

// flagPriority is --priority as given, trimmed ("" when not given).
func flagPriority(c *cli.Context) api.Priority {
	return api.Priority(strings.TrimSpace(c.String("priority")))
}
