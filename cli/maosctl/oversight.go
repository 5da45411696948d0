package maosctl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/rules"
)

// oversightCommands are the maosctl commands of the oversight group:
// rules, audit and overview.
func oversightCommands() []*cli.Command {
	return []*cli.Command{rulesCommand(), auditCommand(), overviewCommand()}
}

func rulesCommand() *cli.Command {
	return &cli.Command{
		Name:  "rules",
		Usage: "show, set, remove and test the communication rules (who may message whom)",
		UsageText: `maosctl rules COMMAND [flags]

   maosctl rules set -f communication_rules.yaml
   maosctl rules set --preset hierarchical
   maosctl rules check --from tester_agent --to reviewer_agent
   maosctl rules get`,
		Description: `The rules document is replicated: every node refuses the same sends. A
send to a recipient the rules refuse is not delivered to it; the sender gets
the rule's reason (403 when every recipient is refused) and the attempt is a
BLOCKED line of 'maosctl audit'. With no document, everyone may message
everyone.

The document (YAML or JSON) gives, per agent id, role:NAME, glob or *,
can_send_to and can_receive_from lists, plus forbidden entries
{from, to, reason} that override every allow. Precedence: forbidden first;
then the most specific subject's list (agent id over role over glob over *)
for the sender and for the recipient; a pair no list speaks about gets the
document's default (deny when it has allow lists, allow when it only
forbids). See docs/CONFIG.md, "Communication rules".`,
		Subcommands: []*cli.Command{
			rulesGetCommand(),
			rulesSetCommand(),
			rulesClearCommand(),
			rulesCheckCommand(),
		},
		Action: noCommand,
	}
}

func rulesGetCommand() *cli.Command {
	return &cli.Command{
		Name:  "get",
		Usage: "print the rules document (YAML, ready for 'rules set -f')",
		UsageText: `maosctl rules get [--strong]

   maosctl rules get > rules.yaml && $EDITOR rules.yaml && maosctl rules set -f rules.yaml
   maosctl --json rules get | jq .default`,
		Description: `Prints a comment line saying when the rules were set and what a pair no
rule mentions gets, then the document as YAML. With no document, says so.
With --json, the API's object {"rules","default","index","updated_at"}
("rules" is null when there is no document).`,
		Flags:  []cli.Flag{strongFlag(), jsonFlag()},
		Action: rulesGet,
	}
}

func rulesGet(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	ctx, cancel := call(c)
	defer cancel()
	st, err := apiClient(c).Rules(ctx, consistency(c))
	if err != nil {
		return apiError(c, err)
	}
	if wantJSON(c) {
		return printJSON(c.App.Writer, st)
	}
	w := c.App.Writer
	if st.Rules == nil {
		msg := "no rules document: everyone may message everyone"
		if st.Index > 0 {
			msg += fmt.Sprintf(" (removed at index %d, %s)", st.Index, formatTime(st.UpdatedAt, false))
		}
		_, err := fmt.Fprintln(w, msg)
		return err
	}
	if _, err := fmt.Fprintf(w, "# rules set at index %d, %s; a pair no rule mentions: %s\n",
		st.Index, formatTime(st.UpdatedAt, false), st.Default); err != nil {
		return err
	}
	data, err := rules.EncodeYAML(st.Rules)
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}

func rulesSetCommand() *cli.Command {
	return &cli.Command{
		Name:  "set",
		Usage: "replace the rules with a YAML or JSON file, or with a preset",
		UsageText: `maosctl rules set -f FILE
maosctl rules set --preset hierarchical [--orchestrator-role ROLE]

   maosctl rules set -f communication_rules.yaml
   maosctl rules set --preset hierarchical --orchestrator-role lead`,
		Description: fmt.Sprintf(`Replaces the whole rules document. FILE (- reads standard input) is YAML,
or JSON when it ends in .json or starts with '{'; quote "*" in YAML. It is
checked before it is sent: an error names the field, as in
"agents[2].can_send_to[0]: bad glob ...". Limits: %d KiB, %d agent entries,
%d forbidden entries, %d selectors per list.

  agents:
    - agent: developer_agent            # an agent id, role:NAME, a glob or "*"
      can_send_to: [master_agent, reviewer_agent]
      can_receive_from: ["*"]
  forbidden:
    - {from: tester_agent, to: reviewer_agent, reason: Should go through developer first}

The seed form (allowed_interactions: {ID: {can_send_to, ...}} and
forbidden_interactions) is read too. --preset hierarchical sets a document
in which workers may send only to the orchestrator role
(--orchestrator-role, default orchestrator) and orchestrators to everyone.

Prints "rules set at index N: SUMMARY"; with --json, the API's answer.`,
			rules.MaxBytes>>10, rules.MaxEntries, rules.MaxEntries, rules.MaxSelectors),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "file", Aliases: []string{"f"}, Usage: "YAML or JSON `FILE` with the document; - for stdin"},
			&cli.StringFlag{Name: "preset", Usage: "set the preset `NAME` (hierarchical) instead of a file"},
			&cli.StringFlag{Name: "orchestrator-role", Usage: "with --preset hierarchical: the `ROLE` workers may send to (default orchestrator)"},
			jsonFlag(),
		},
		Action: rulesSet,
	}
}

func rulesSet(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	name, preset := c.String("file"), strings.TrimSpace(c.String("preset"))
	orch := strings.TrimSpace(c.String("orchestrator-role"))
	var doc *rules.Document
	switch {
	case name != "" && preset != "":
		return usagef(c, "give -f FILE or --preset, not both")
	case name == "" && preset == "":
		return usagef(c, "missing -f FILE (or --preset hierarchical)")
	case orch != "" && preset == "":
		return usagef(c, "--orchestrator-role goes with --preset hierarchical; in a file, write orchestrator_role")
	case preset != "":
		doc = &rules.Document{Preset: preset, OrchestratorRole: orch}
		if err := doc.Validate(); err != nil {
			return usagef(c, "--preset %s: %v", preset, err)
		}
	default:
		var err error
		if doc, err = readRules(c, name); err != nil {
			return err
		}
	}
	ctx, cancel := call(c)
	defer cancel()
	st, err := apiClient(c).SetRules(ctx, doc)
	if err != nil {
		return apiError(c, err)
	}
	return printResult(c, st, "rules set at index %d: %s\n", st.Index, st.Rules.Summary())
}

// readRules reads and checks the rules document in the file name (- for
// stdin): YAML, or JSON when it ends in .json or starts with '{'.
func readRules(c *cli.Context, name string) (*rules.Document, error) {
	var r io.Reader
	if name == "-" {
		if c.App.Reader == nil {
			return nil, usagef(c, "-f -: no standard input")
		}
		r = c.App.Reader
	} else {
		f, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("read -f: %w", err)
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, rules.MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read -f %s: %w", name, err)
	}
	if len(data) > rules.MaxBytes {
		return nil, fmt.Errorf("%s: over the limit of %d bytes (%d KiB) for a rules document", name, rules.MaxBytes, rules.MaxBytes>>10)
	}
	ext := strings.ToLower(filepath.Ext(name))
	format := rules.JSON
	if ext == ".yaml" || ext == ".yml" || (ext != ".json" && !bytes.HasPrefix(bytes.TrimSpace(data), []byte("{"))) {
		format = rules.YAML
	}
	doc, err := rules.Decode(data, format)
	if err != nil {
		return nil, &userError{err: err, msg: fmt.Sprintf("%s: %v", name, err)}
	}
	return doc, nil
}

func rulesClearCommand() *cli.Command {
	return &cli.Command{
		Name:  "clear",
		Usage: "remove the rules document: everyone may message everyone",
		UsageText: `maosctl rules clear

   maosctl rules get > rules-backup.yaml && maosctl rules clear`,
		Description: `Removes the rules document through the log; the removal is a RULES line of
the audit trail. Prints "rules removed at index N"; with --json, the API's
answer.`,
		Flags:  []cli.Flag{jsonFlag()},
		Action: rulesClear,
	}
}

func rulesClear(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	ctx, cancel := call(c)
	defer cancel()
	st, err := apiClient(c).ClearRules(ctx)
	if err != nil {
		return apiError(c, err)
	}
	return printResult(c, st, "rules removed at index %d: everyone may message everyone\n", st.Index)
}

func rulesCheckCommand() *cli.Command {
	return &cli.Command{
		Name:  "check",
		Usage: "say whether one agent may message another (or interrupt) under the current rules",
		UsageText: `maosctl rules check [--from A] --to B [--from-role ROLE] [--to-role ROLE] [--strong]
   maosctl rules check --interrupt --from A [--from-role ROLE] [--strong]

   maosctl rules check --from tester_agent --to reviewer_agent
   maosctl rules check --from newbie --from-role engineer --to boss   # what if newbie were an engineer
   maosctl rules check --interrupt --from lead                         # may lead interrupt an agent?`,
		Description: `Asks the node whether a message from A to B would pass the rules now,
with the roles a send would use: each agent's registered role ("agent" for an
unregistered sender, which a send registers so; none for an unregistered
recipient). --from-role and --to-role replace them.

With --interrupt (and no --to) it asks instead whether A may interrupt an
agent (maosctl interrupt): by the document's interrupt: list, or without one
the roles master, orchestrator and supervisor, with A's registered role (none
when it is not registered). A moderator's token may always interrupt, which
this check does not see.

Prints "allowed: A (role R) → B (role S)" or "blocked: A (role R) → B (role S):
REASON" (with --interrupt "allowed: A (role R) may interrupt" or "blocked: A
(role R) may not interrupt: REASON"). The exit status is 0 either way;
scripts read --json ({"from","from_role","to","to_role","allowed","reason"},
and "interrupt": true).`,
		Flags: []cli.Flag{
			agentFlag("from", "sender agent `ID`"),
			&cli.StringFlag{Name: "to", Usage: "recipient agent `ID` (required without --interrupt)"},
			&cli.StringFlag{Name: "from-role", Usage: "check as if the sender had `ROLE`"},
			&cli.StringFlag{Name: "to-role", Usage: "check as if the recipient had `ROLE`"},
			&cli.BoolFlag{Name: "interrupt", Usage: "ask whether the sender may interrupt an agent, not message one"},
			strongFlag(),
			jsonFlag(),
		},
		Action: rulesCheck,
	}
}

func rulesCheck(c *cli.Context) error {
	need := []string{"from", "to"}
	if c.Bool("interrupt") {
		need = need[:1] // the node refuses --to with --interrupt
	}
	if err := noArgs(c, need...); err != nil {
		return err
	}
	req := api.RulesCheckRequest{
		From:      strings.TrimSpace(c.String("from")),
		To:        strings.TrimSpace(c.String("to")),
		FromRole:  strings.TrimSpace(c.String("from-role")),
		ToRole:    strings.TrimSpace(c.String("to-role")),
		Interrupt: c.Bool("interrupt"),
	}
	ctx, cancel := call(c)
	defer cancel()
	res, err := apiClient(c).CheckRules(ctx, req, consistency(c))
	if err != nil {
		return apiError(c, err)
	}
	if wantJSON(c) {
		return printJSON(c.App.Writer, res)
	}
	who := func(id, role string) string {
		if role == "" {
			return id + " (no role)"
		}
		return id + " (role " + role + ")"
	}
	if res.Interrupt {
		if res.Allowed {
			_, err = fmt.Fprintf(c.App.Writer, "allowed: %s may interrupt\n", who(res.From, res.FromRole))
		} else {
			_, err = fmt.Fprintf(c.App.Writer, "blocked: %s may not interrupt: %s\n", who(res.From, res.FromRole), res.Reason)
		}
		return err
	}
	pair := who(res.From, res.FromRole) + " → " + who(res.To, res.ToRole)
	if res.Allowed {
		_, err = fmt.Fprintf(c.App.Writer, "allowed: %s\n", pair)
	} else {
		_, err = fmt.Fprintf(c.App.Writer, "blocked: %s: %s\n", pair, res.Reason)
	}
	return err
}

// auditPollEvery is how often 'audit -f' asks for new events.
const auditPollEvery = time.Second

func auditCommand() *cli.Command {
	return &cli.Command{
		Name:  "audit",
		Usage: "print the audit trail: messages, blocked sends, registrations, rule and lock changes",
		UsageText: `maosctl audit [-f] [--after SEQ] [--limit N] [--page-size N] [--strong]

   maosctl audit                       # the whole trail, oldest first
   maosctl audit -f --after 1200       # from event 1201 on, then follow
   maosctl audit | grep BLOCKED`,
		Description: fmt.Sprintf(`Prints one line per event in the seed format:

   [2025-10-20T14:30:00Z] [orchestrator→triage] TASK_ASSIGN: Triage new issue #123
   [2025-10-20T14:31:02Z] [tester_agent→reviewer_agent] BLOCKED: Should go through developer first

The trail is derived from the log, so every node prints the same one and
nobody can edit it. Events about private messages show "(private)" instead
of their text. --after SEQ starts after event SEQ; --limit N prints at
most N events, however many pages that takes (a hint on stderr gives the
--after to go on). -f follows: once at the end, it asks for new events
every second (--interval) until Ctrl-C. With --json, one JSON object per
line: the event with its "seq" and "line". A request asks for
--page-size events (default %d).`, api.MaxPageLimit),
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing new events until interrupted"},
			&cli.Uint64Flag{Name: "after", Usage: "only events with a seq above `SEQ`"},
			limitFlag("events", 0),
			pageSizeFlag(),
			&cli.DurationFlag{Name: "interval", Usage: "with -f, ask for new events every `DURATION`", Value: auditPollEvery},
			strongFlag(),
			jsonFlag(),
		},
		Action: audit,
	}
}

func audit(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	l, err := limitFlags(c)
	if err != nil {
		return err
	}
	follow := c.Bool("follow")
	switch {
	case follow && l.max > 0:
		return usagef(c, "--limit stops the listing; -f never stops: give one of them")
	case c.Duration("interval") <= 0:
		return usagef(c, "--interval %s: must be positive", c.Duration("interval"))
	}
	ctx := commandContext(c)
	if follow {
		// Ctrl-C ends following normally, with exit status 0.
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
	}
	client, cons, asJSON := apiClient(c), consistency(c), wantJSON(c)
	after, printed := c.Uint64("after"), 0
	var timer *time.Timer
	for {
		callCtx, cancel := callWith(c, ctx)
		page, err := client.Audit(callCtx, after, l.pageSize(printed), cons)
		cancel()
		if err != nil {
			if follow && ctx.Err() != nil {
				return nil
			}
			return apiError(c, err)
		}
		for _, e := range page.Events {
			if e.Seq <= after {
				return fmt.Errorf("audit: the node returned event %d in a page after %d", e.Seq, after)
			}
			after = e.Seq
			if err := printAuditEvent(c, e, asJSON); err != nil {
				return err
			}
			printed++
		}
		if page.HasMore {
			if l.max > 0 && printed >= l.max {
				fmt.Fprintf(c.App.ErrWriter, "(more after event %d: maosctl audit --after %d)\n", after, after)
				return nil
			}
			if len(page.Events) == 0 {
				return fmt.Errorf("audit: the node said more events follow %d but sent none", after)
			}
			continue
		}
		if !follow {
			return nil
		}
		if timer == nil {
			timer = time.NewTimer(c.Duration("interval"))
			defer timer.Stop()
		} else {
			timer.Reset(c.Duration("interval"))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
	}
}

// printAuditEvent writes e as its text line, or as a JSON line.
func printAuditEvent(c *cli.Context, e api.AuditEntry, asJSON bool) error {
	if !asJSON {
		_, err := fmt.Fprintln(c.App.Writer, e.Line)
		return err
	}
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode JSON: %w", err)
	}
	b = append(b, '\n')
	_, err = c.App.Writer.Write(b)
	return err
}

func overviewCommand() *cli.Command {
	return &cli.Command{
		Name:  "overview",
		Usage: "list every message's headers (no content): the supervisor's view",
		UsageText: `maosctl overview [--channel CH] [--after SEQ] [--limit N | --all] [--page-size N] [--strong]

   maosctl overview                        # the first 100 messages of every channel, in log order
   maosctl overview --channel review --all
   maosctl get msg-20261121-103000-codex-9f3a61c2   # the whole message`,
		Description: fmt.Sprintf(`Prints one line per message, oldest first, without its content:

   #SEQ TIME CHANNEL: FROM → TO [TYPE/PRIORITY] TITLE (ID)

TO is the delivery list when the message has one, "to" as written
otherwise. A private message's title shows as "(private)". The whole
message is one 'maosctl get ID' away. It prints at most --limit messages
(default %d), asking for as many pages as that takes (--page-size a
request, at most %d); when more follow, a hint on stderr gives the --after
to continue from, and --all prints every message. With --json,
a JSON array of {"seq","id","timestamp","channel","from","to","recipients",
"type","priority","title"} objects.`, api.DefaultPageLimit, api.MaxPageLimit),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "channel", Usage: "only the messages of channel `NAME`"},
			&cli.Uint64Flag{Name: "after", Usage: "only messages with a seq above `SEQ`"},
			limitFlag("messages", api.DefaultPageLimit),
			pageSizeFlag(),
			allFlag("message"),
			strongFlag(),
			jsonFlag(),
		},
		Action: overview,
	}
}

func overview(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	channel := strings.TrimSpace(c.String("channel"))
	again := "maosctl overview"
	if channel != "" {
		again += " --channel " + channel
	}
	client, cons := apiClient(c), consistency(c)
	return listPages(c, "overview", again,
		func(ctx context.Context, after uint64, size int) ([]api.OverviewEntry, bool, error) {
			page, err := client.Overview(ctx, channel, after, size, cons)
			return page.Messages, page.HasMore, err
		},
		func(m api.OverviewEntry) uint64 { return m.Seq }, overviewLine)
}

// overviewLine is "#SEQ TIME CHANNEL: FROM → TO [TYPE/PRIORITY] TITLE (ID)".
func overviewLine(m api.OverviewEntry) string {
	to := m.Recipients
	if len(to) == 0 {
		to = m.To
	}
	title := m.Title
	if title == "" {
		title = "(no title)"
	}
	return fmt.Sprintf("#%d %s %s: %s → %s [%s/%s] %s (%s)", m.Seq, formatTime(m.Timestamp, false), m.Channel,
		m.From, strings.Join(to, ","), m.Type, m.Priority, title, m.ID)
}
