package maosctl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
)

func lockCommand() *cli.Command {
	return &cli.Command{
		Name:  "lock",
		Usage: "advisory locks (leases) on shared files and resources",
		UsageText: `maosctl lock acquire|renew|release|list|check [flags]

   maosctl lock acquire --path src/retry.go --holder codex --ttl 10m
   maosctl lock check --path src/retry.go --token 42 || exit 1   # in a pre-commit hook
   maosctl lock release --path src/retry.go --holder codex --token 42`,
		Description: `A lock is a lease: granted to one holder for a time to live (1s to 24h),
with a fencing token, the Raft index of the grant, which grows with every
new grant of the path. Renew it before it runs out; once it has, anyone
may acquire it and the old token is no longer current. Expiry is judged
by the timestamps of the cluster's log entries, never a node's clock, so
every node agrees who holds a lock.

Locks are advisory: they bind only the agents that ask. Guard a write by
checking the token just before it ('maosctl lock check'), so a holder whose
lease moved while it was cut off is refused. Paths are compared byte for
byte: agree on one form (repository-relative, say). Locks show in the
bulletin's shared_resources.

--holder defaults to $MAOS_AGENT_ID.`,
		Subcommands: []*cli.Command{
			lockAcquireCommand(),
			lockRenewCommand(),
			lockReleaseCommand(),
			lockListCommand(),
			lockCheckCommand(),
		},
		Action: noCommand,
	}
}

func lockPathFlag() cli.Flag {
	return &cli.StringFlag{Name: "path", Usage: "the locked file or resource `PATH` (required)"}
}

func lockHolderFlag(what string) cli.Flag {
	return agentFlag("holder", what)
}

func lockTokenFlag(usage string) cli.Flag {
	return &cli.StringFlag{Name: "token", Usage: usage}
}

func lockTTLFlag() cli.Flag {
	return &cli.StringFlag{Name: "ttl", Usage: "lease `DURATION`: 90s, 10m, 2h (1s to 24h) or a number of seconds (required)"}
}

// lockToken parses --token; required reports a missing one.
func lockToken(c *cli.Context, required bool) (uint64, error) {
	s := strings.TrimSpace(c.String("token"))
	if s == "" {
		if required {
			return 0, usagef(c, "missing required flag --token (the token 'maosctl lock acquire' printed)")
		}
		return 0, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v == 0 {
		return 0, usagef(c, "--token: %q is not a lock token (a whole number from 1)", s)
	}
	return v, nil
}

// lockTTL parses --ttl, which is required: a Go duration or a number of
// seconds. The server checks the limits.
func lockTTL(c *cli.Context) (api.LockTTL, error) {
	if err := require(c, "ttl"); err != nil {
		return 0, err
	}
	s := strings.TrimSpace(c.String("ttl"))
	if d, err := time.ParseDuration(s); err == nil {
		return api.LockTTL(d), nil
	}
	var ttl api.LockTTL
	if _, err := strconv.ParseFloat(s, 64); err != nil || ttl.UnmarshalJSON([]byte(s)) != nil {
		return 0, usagef(c, "--ttl: %q is not a duration like 90s, 10m, 2h or a number of seconds", s)
	}
	return ttl, nil
}

// lockError is apiError that, for a refusal, adds what to do.
func lockError(c *cli.Context, err error) error {
	var refused *client.LockRefusedError
	if errors.As(err, &refused) {
		hint := ""
		switch refused.Outcome {
		case api.LockHeld:
			hint = "; wait for it to be released or to expire"
		case api.LockLapsed, api.LockStaleToken:
			hint = "; your lease is gone: acquire the lock again and redo what it guarded"
		}
		return &userError{err: err, msg: refused.API.Message + hint}
	}
	return apiError(c, err)
}

// lockRequest sends cmd with send (the Client's AcquireLock, RenewLock or
// ReleaseLock), bounded by --timeout, and prints the result; a refusal's
// error says what to do (lockError).
func lockRequest[C any](c *cli.Context, send func(*client.Client, context.Context, C) (*api.LockResult, error), cmd C) error {
	ctx, cancel := call(c)
	defer cancel()
	res, err := send(apiClient(c), ctx, cmd)
	if err != nil {
		return lockError(c, err)
	}
	return printLockResult(c, res)
}

// printLockResult prints "granted PATH to HOLDER: token N, expires T".
func printLockResult(c *cli.Context, res *api.LockResult) error {
	if wantJSON(c) {
		return printJSON(c.App.Writer, res)
	}
	l := res.Lock
	var err error
	switch res.Outcome {
	case api.LockReleased:
		_, err = fmt.Fprintf(c.App.Writer, "released %s (held by %s, token %d)\n", l.Path, l.Holder, l.Token)
	default:
		_, err = fmt.Fprintf(c.App.Writer, "%s %s to %s: token %d, expires %s\n",
			res.Outcome, l.Path, l.Holder, l.Token, l.ExpiresAt.Format(time.RFC3339Nano))
	}
	return err
}

func lockAcquireCommand() *cli.Command {
	return &cli.Command{
		Name:  "acquire",
		Usage: "take a lock for a time to live",
		UsageText: `maosctl lock acquire --path PATH [--holder ID] --ttl DURATION

   maosctl lock acquire --path src/retry.go --holder codex --ttl 10m
   TOKEN=$(maosctl --json lock acquire --path db/migrations --ttl 30m | jq .lock.token)`,
		Description: `Grants the lock and prints "granted PATH to ID: token N, expires TIME".
Keep the token: renew, release and check need it. If ID already holds the
lock (and it has not expired), the lease is extended from now and keeps
its token ("extended ..."). If another holder's lease is live, fails
naming the holder, its token and its expiry. With --json, the API's
{"outcome","lock":{"path","holder","token","acquired_at","expires_at",...}}.`,
		Flags: []cli.Flag{
			lockPathFlag(),
			lockHolderFlag("agent `ID` taking the lock"),
			lockTTLFlag(),
			jsonFlag(),
		},
		Action: lockAcquire,
	}
}

func lockAcquire(c *cli.Context) error {
	if err := noArgs(c, "path", "holder"); err != nil {
		return err
	}
	ttl, err := lockTTL(c)
	if err != nil {
		return err
	}
	return lockRequest(c, (*client.Client).AcquireLock, api.LockAcquireCommand{
		Path: c.String("path"), Holder: strings.TrimSpace(c.String("holder")), TTL: ttl})
}

func lockRenewCommand() *cli.Command {
	return &cli.Command{
		Name:  "renew",
		Usage: "extend a lock you hold",
		UsageText: `maosctl lock renew --path PATH [--holder ID] --token N --ttl DURATION

   maosctl lock renew --path src/retry.go --holder codex --token 42 --ttl 10m`,
		Description: `Extends the lease to now + DURATION, keeping its token. Only the holder
can renew, with the current token, and only while the lease is live: a
lease that has run out is gone even if nobody took it (acquire it again,
for a new token). Prints "extended PATH to ID: token N, expires TIME".`,
		Flags: []cli.Flag{
			lockPathFlag(),
			lockHolderFlag("agent `ID` holding the lock"),
			lockTokenFlag("the lease's `TOKEN` (required)"),
			lockTTLFlag(),
			jsonFlag(),
		},
		Action: lockRenew,
	}
}

func lockRenew(c *cli.Context) error {
	if err := noArgs(c, "path", "holder"); err != nil {
		return err
	}
	token, err := lockToken(c, true)
	if err != nil {
		return err
	}
	ttl, err := lockTTL(c)
	if err != nil {
		return err
	}
	return lockRequest(c, (*client.Client).RenewLock, api.LockRenewCommand{
		Path: c.String("path"), Holder: strings.TrimSpace(c.String("holder")), Token: token, TTL: ttl})
}

func lockReleaseCommand() *cli.Command {
	return &cli.Command{
		Name:  "release",
		Usage: "give a lock up (or break it with --force)",
		UsageText: `maosctl lock release --path PATH [--holder ID] --token N
maosctl lock release --path PATH --force --by ADMIN [--holder ID] [--token N]

   maosctl lock release --path src/retry.go --holder codex --token 42
   maosctl lock release --path src/retry.go --force --by supervisor`,
		Description: `Ends the lease at once; the path is free for the next acquire. Only the
holder can release, with the current token. --force breaks another
holder's lease (an operator's tool); --by names you in the audit trail,
and --holder/--token, if given, must still match, so you break the lease
you meant to. Prints "released PATH (held by ID, token N)".`,
		Flags: []cli.Flag{
			lockPathFlag(),
			// No EnvVars: $MAOS_AGENT_ID is the default holder only
			// without --force (see lockRelease).
			&cli.StringFlag{Name: "holder", Usage: "agent `ID` holding the lock (without --force, default: $MAOS_AGENT_ID, else the token's agent)"},
			lockTokenFlag("the lease's `TOKEN` (required without --force)"),
			&cli.BoolFlag{Name: "force", Usage: "release whoever holds the lock"},
			&cli.StringFlag{Name: "by", Usage: "with --force: your `ID` for the audit trail (default: the token's agent)"},
			jsonFlag(),
		},
		Action: lockRelease,
	}
}

func lockRelease(c *cli.Context) error {
	if err := noArgs(c, "path"); err != nil {
		return err
	}
	cmd := api.LockReleaseCommand{Path: c.String("path"), Holder: strings.TrimSpace(c.String("holder")), Force: c.Bool("force")}
	if cmd.Force {
		// A --holder given with --force pins the lease to break;
		// $MAOS_AGENT_ID, the operator's own id, does not.
		by, err := actingAgent(c, "by")
		if err != nil {
			return err
		}
		cmd.By = by
	} else {
		if c.String("by") != "" {
			return usagef(c, "--by goes with --force")
		}
		if cmd.Holder == "" {
			cmd.Holder = strings.TrimSpace(os.Getenv(envAgent))
		}
		if cmd.Holder == "" {
			holder, err := actingAgent(c, "holder")
			if err != nil {
				return err
			}
			cmd.Holder = holder
		}
	}
	token, err := lockToken(c, !cmd.Force)
	if err != nil {
		return err
	}
	cmd.Token = token
	return lockRequest(c, (*client.Client).ReleaseLock, cmd)
}

func lockListCommand() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list the locks",
		UsageText: `maosctl lock list [--prefix P] [--holder ID] [--limit N] [--page-size N] [--strong]

   maosctl lock list
   maosctl lock list --prefix src/ --holder codex`,
		Description: `Prints a table PATH HOLDER TOKEN EXPIRES STATE, by path. STATE is "held"
or "expired": judged by the time of the latest entry the node applied
(the cluster has no other clock), so a lease just past its time may read
"held" until the next write. Expired locks stay listed until released or
taken over. With --json, the API's {"locks":[...],"has_more","as_of"}.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "prefix", Usage: "only paths starting with `PREFIX`"},
			&cli.StringFlag{Name: "holder", Usage: "only locks held by agent `ID`"},
			limitFlag("locks", 0),
			pageSizeFlag(),
			strongFlag(),
			jsonFlag(),
		},
		Action: lockList,
	}
}

func lockList(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	l, err := limitFlags(c)
	if err != nil {
		return err
	}
	q := api.LockQuery{Prefix: c.String("prefix"), Holder: strings.TrimSpace(c.String("holder"))}
	cl := apiClient(c)
	all := api.LockPage{Locks: []api.Lock{}}
	all.HasMore, err = eachPage(c, commandContext(c), l, func(ctx context.Context, size int) ([]api.Lock, bool, error) {
		q.Limit = size
		page, err := cl.Locks(ctx, q, consistency(c))
		if err != nil {
			return nil, false, apiError(c, err)
		}
		all.AsOf = page.AsOf
		if len(page.Locks) == 0 {
			return nil, false, nil
		}
		q.After = page.Locks[len(page.Locks)-1].Path
		return page.Locks, page.HasMore, nil
	}, func(locks []api.Lock) error {
		all.Locks = append(all.Locks, locks...)
		return nil
	})
	if err != nil {
		return err
	}
	if wantJSON(c) {
		return printJSON(c.App.Writer, all)
	}
	if len(all.Locks) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PATH\tHOLDER\tTOKEN\tEXPIRES\tSTATE")
	for _, l := range all.Locks {
		state := "held"
		if l.Expired {
			state = "expired"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", l.Path, l.Holder, l.Token, l.ExpiresAt.Format(time.RFC3339), state)
	}
	return tw.Flush()
}

func lockCheckCommand() *cli.Command {
	return &cli.Command{
		Name:  "check",
		Usage: "exit 0 if a token is still the current grant of a lock, 1 if not",
		UsageText: `maosctl lock check --path PATH --token N [--strong]

   maosctl lock check --path src/retry.go --token 42 --strong && git commit ...`,
		Description: `Answers whether TOKEN is the latest grant of PATH and has not expired (as
of the latest entry the node applied). Prints "current: PATH held by ID
(token N) until TIME" and exits 0, or prints why not to stderr and exits 1:
the lock was released, taken over (another token), or its lease ran out.
Use --strong in guards, so a lagging node cannot answer for a lease that
already moved. With --json, prints the API's answer
{"path","current","holder","token","expires_at","expired","as_of","reason"}
and still exits 1 when not current.`,
		Flags: []cli.Flag{
			lockPathFlag(),
			lockTokenFlag("the `TOKEN` to check (required)"),
			strongFlag(),
			jsonFlag(),
		},
		Action: lockCheck,
	}
}

func lockCheck(c *cli.Context) error {
	if err := noArgs(c, "path"); err != nil {
		return err
	}
	token, err := lockToken(c, true)
	if err != nil {
		return err
	}
	ctx, cancel := call(c)
	defer cancel()
	res, err := apiClient(c).CheckLock(ctx, c.String("path"), token, consistency(c))
	if err != nil {
		return apiError(c, err)
	}
	if wantJSON(c) {
		if err := printJSON(c.App.Writer, res); err != nil {
			return err
		}
	}
	if !res.Current {
		return fmt.Errorf("token %d is not current for %s: %s", token, res.Path, res.Reason)
	}
	if wantJSON(c) {
		return nil
	}
	_, err = fmt.Fprintf(c.App.Writer, "current: %s held by %s (token %d) until %s\n",
		res.Path, res.Holder, res.Token, res.ExpiresAt.Format(time.RFC3339Nano))
	return err
}
