package maosctl

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/bench"
	"github.com/urfave/cli/v2"
)

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "measure a running cluster: send throughput and latency, delivery latency, fan-out",
		UsageText: `maosctl bench COMMAND [--addr H:P,H:P,...] [flags]

   maosctl bench send --addr 127.0.0.1:7070,127.0.0.1:7080,127.0.0.1:7090 --concurrency 64 --duration 15s
   maosctl bench delivery --addr 127.0.0.1:7070,127.0.0.1:7090 --count 1000
   maosctl bench fanout --agents 100`,
		Description: `Drives the nodes given by --addr (comma-separated or repeated; default the
global --addr) and reports what clients feel. Every mode prints one progress
line a second on stderr, a table on stdout at the end, and with --json one
object with every figure instead of the table. Latencies are in ms;
percentiles are nearest-rank over the samples (at most 1,000,000 kept, a
uniform sample past that; count, min, mean and max are exact).

It writes to the cluster: messages on channel "bench" (or --channel) from
"bench-sender", and for fanout agents bench-a-000... of role "bench".`,
		Subcommands: []*cli.Command{benchSendCommand(), benchDeliveryCommand(), benchFanoutCommand()},
		Action:      noCommand,
	}
}

func benchAddrFlag() cli.Flag {
	return &cli.StringSliceFlag{Name: "addr", Usage: "node API `ADDRESSES` to drive, comma-separated or repeated (default: the global --addr)"}
}

func benchCommonFlags() []cli.Flag {
	return []cli.Flag{
		benchAddrFlag(),
		&cli.IntFlag{Name: "size", Value: bench.DefaultSize, Usage: "message text `BYTES`"},
		&cli.StringFlag{Name: "channel", Usage: "channel `NAME` (default bench)"},
		&cli.StringSliceFlag{Name: "to", Usage: "recipient `ID`s (default bench-sink, registered by the run if it is not)"},
		jsonFlag(),
	}
}

func benchSendCommand() *cli.Command {
	return &cli.Command{
		Name:  "send",
		Usage: "closed-loop senders: sends/s and send-acknowledged latency",
		UsageText: `maosctl bench send [--addr H:P,...] [--concurrency C] [--size BYTES] (--duration D | --count N) [--to ID] [--channel CH]

   maosctl bench send --addr 127.0.0.1:7070 --concurrency 1 --duration 15s
   maosctl bench send --addr 127.0.0.1:7070,127.0.0.1:7080,127.0.0.1:7090 --concurrency 64 --duration 15s --json`,
		Description: `Runs --concurrency senders; sender i talks to node i mod len(--addr). Each
posts a message with a unique id, waits for the committed answer, and posts
the next. Reports acknowledged sends per second over the run and the
latency of each acknowledged send (p50/p95/p99/max), failures counted by
kind (the API's error code, timeout, refused, reset, eof, network). A failed
send is not retried; the sender pauses 10ms and goes on. Ctrl-C stops the
run and prints the report of what ran.`,
		Flags: append(benchCommonFlags(),
			&cli.IntFlag{Name: "concurrency", Aliases: []string{"c"}, Value: 1, Usage: "`C` closed-loop senders"},
			&cli.DurationFlag{Name: "duration", Usage: "run for `D` (e.g. 15s)"},
			&cli.IntFlag{Name: "count", Usage: "or: `N` sends in all"},
		),
		Action: benchSend,
	}
}

func benchDeliveryCommand() *cli.Command {
	return &cli.Command{
		Name:  "delivery",
		Usage: "end-to-end latency: send on the first node, event on a stream on the last",
		UsageText: `maosctl bench delivery [--addr A,...,C] [--count N] [--size BYTES]

   maosctl bench delivery --addr 127.0.0.1:7070,127.0.0.1:7080,127.0.0.1:7090 --count 1000`,
		Description: `Opens a stream of a fresh channel (bench-delivery-RUNID unless --channel)
on the last --addr, waits until it is live, then sends --count messages on
the first --addr one at a time, each waiting for its event. Reports the
latency from the start of each send to its event on the stream, and the
sends' acknowledged latency. An event missing after --timeout counts as
not_delivered.`,
		Flags: append(benchCommonFlags(),
			&cli.IntFlag{Name: "count", Value: 1000, Usage: "`N` messages"},
		),
		Action: benchDelivery,
	}
}

func benchFanoutCommand() *cli.Command {
	return &cli.Command{
		Name:  "fanout",
		Usage: "one send to every agent: time until every inbox has it",
		UsageText: `maosctl bench fanout [--addr A,...,C] [--agents N] [--to all|role:bench] [--wait D]

   maosctl bench fanout --addr 127.0.0.1:7070,127.0.0.1:7090 --agents 100`,
		Description: `Registers --agents agents bench-a-000... (role bench) on the first --addr,
then posts one message to --to (default all: every registered agent) and
polls each inbox's counts on the last --addr (8 requests at a time) until
every inbox has it, for at most --wait. Reports the time from the send to
the poll round that saw the last inbox (its resolution is one round,
reported too) and lists inboxes that never got it.`,
		Flags: []cli.Flag{
			benchAddrFlag(),
			&cli.IntFlag{Name: "agents", Value: 100, Usage: fmt.Sprintf("`N` agents to register (1..%d)", bench.MaxFanoutAgents)},
			&cli.StringFlag{Name: "to", Value: "all", Usage: "`RECIPIENT`: all or role:bench"},
			&cli.IntFlag{Name: "size", Value: bench.DefaultSize, Usage: "message text `BYTES`"},
			&cli.StringFlag{Name: "channel", Usage: "channel `NAME` (default bench)"},
			&cli.DurationFlag{Name: "wait", Value: 30 * time.Second, Usage: "give up on the inboxes after `D`"},
			jsonFlag(),
		},
		Action: benchFanout,
	}
}

// benchClients are the clients of the nodes to drive: the command's --addr
// list, else the global --addr (which may be a comma-separated list too).
// They share one pooled transport.
func benchClients(c *cli.Context) ([]*client.Client, error) {
	addrs := splitList(c.StringSlice("addr"))
	if len(addrs) == 0 {
		addrs = splitList([]string{nodeAddr(rootContext(c))})
	}
	shared := &http.Client{Transport: httpTransport(c)}
	out := make([]*client.Client, len(addrs))
	for i, a := range addrs {
		if err := checkAddr("bench --addr", a); err != nil {
			return nil, usagef(c, "%v", err)
		}
		out[i] = newAPIClient(c, a, shared).WithToken(bearerToken(c))
	}
	return out, nil
}

// benchContext is the command's context, ended by Ctrl-C so a run can be
// cut short and still report.
func benchContext(c *cli.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(commandContext(c), os.Interrupt)
}

func benchMsgFlags(c *cli.Context) (size int, channel string, to []string, err error) {
	size = c.Int("size")
	if size < 1 {
		return 0, "", nil, usagef(c, "--size %d: must be at least 1", size)
	}
	return size, strings.TrimSpace(c.String("channel")), splitList(c.StringSlice("to")), nil
}

func benchProgress(w io.Writer, what string) func(bench.Progress) {
	return func(p bench.Progress) {
		fmt.Fprintf(w, "%5.0fs  %s %d  errors %d  %.0f/s  p50 %.2fms\n",
			p.Elapsed.Seconds(), what, p.Done, p.Errors, p.Rate, float64(p.P50)/float64(time.Millisecond))
	}
}

func benchSend(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	size, channel, to, err := benchMsgFlags(c)
	if err != nil {
		return err
	}
	conc, dur, count := c.Int("concurrency"), c.Duration("duration"), c.Int("count")
	switch {
	case conc < 1:
		return usagef(c, "--concurrency %d: must be at least 1", conc)
	case dur < 0 || count < 0:
		return usagef(c, "--duration and --count must not be negative")
	case (dur > 0) == (count > 0):
		return usagef(c, "give exactly one of --duration and --count")
	}
	cls, err := benchClients(c)
	if err != nil {
		return err
	}
	ctx, cancel := benchContext(c)
	defer cancel()
	rep, err := bench.RunSend(ctx, bench.SendOptions{
		Clients: cls, Concurrency: conc, Size: size, Duration: dur, Count: count,
		Channel: channel, To: to, CallTimeout: rootContext(c).Duration("timeout"),
		Progress: benchProgress(c.App.ErrWriter, "sends"),
	})
	if err != nil {
		return err
	}
	if err := printReport(c, rep, func(tw io.Writer) {
		fmt.Fprintf(tw, "nodes\t%s\n", strings.Join(rep.Nodes, ","))
		fmt.Fprintf(tw, "concurrency\t%d\n", rep.Concurrency)
		fmt.Fprintf(tw, "size\t%d bytes\n", rep.SizeBytes)
		fmt.Fprintf(tw, "sends\t%d in %.2fs\n", rep.Sends, rep.ElapsedSeconds)
		fmt.Fprintf(tw, "sends/s\t%.0f\n", rep.SendsPerSecond)
		benchLatencyRows(tw, "latency", rep.Latency)
		benchErrorRows(tw, rep.Errors, rep.ErrorsByKind)
	}); err != nil {
		return err
	}
	return benchFailed(rep.Sends, rep.Errors)
}

// printReport prints a bench report: as JSON under --json, else as the
// two-column table rows writes to tw.
func printReport(c *cli.Context, rep any, rows func(tw io.Writer)) error {
	if wantJSON(c) {
		return printJSON(c.App.Writer, rep)
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
	rows(tw)
	return tw.Flush()
}

// benchFailed makes a run in which nothing succeeded exit 1.
func benchFailed(ok, errs uint64) error {
	if ok == 0 && errs > 0 {
		return fmt.Errorf("bench: all %d operations failed", errs)
	}
	return nil
}

func benchLatencyRows(w io.Writer, name string, l bench.Latency) {
	fmt.Fprintf(w, "%s p50\t%.3f ms\n", name, l.P50Ms)
	fmt.Fprintf(w, "%s p95\t%.3f ms\n", name, l.P95Ms)
	fmt.Fprintf(w, "%s p99\t%.3f ms\n", name, l.P99Ms)
	fmt.Fprintf(w, "%s max\t%.3f ms\n", name, l.MaxMs)
	fmt.Fprintf(w, "%s mean\t%.3f ms\n", name, l.MeanMs)
}

func benchErrorRows(w io.Writer, n uint64, kinds map[string]uint64) {
	fmt.Fprintf(w, "errors\t%d\n", n)
	keys := make([]string, 0, len(kinds))
	for k := range kinds {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "  %s\t%d\n", k, kinds[k])
	}
}

func benchDelivery(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	size, channel, to, err := benchMsgFlags(c)
	if err != nil {
		return err
	}
	if n := c.Int("count"); n < 1 {
		return usagef(c, "--count %d: must be at least 1", n)
	}
	cls, err := benchClients(c)
	if err != nil {
		return err
	}
	ctx, cancel := benchContext(c)
	defer cancel()
	rep, err := bench.RunDelivery(ctx, bench.DeliveryOptions{
		Send: cls[0], Stream: cls[len(cls)-1], Count: c.Int("count"), Size: size, Channel: channel, To: to,
		CallTimeout: rootContext(c).Duration("timeout"), Progress: benchProgress(c.App.ErrWriter, "delivered"),
	})
	if err != nil {
		return err
	}
	if err := printReport(c, rep, func(tw io.Writer) {
		fmt.Fprintf(tw, "send node\t%s\n", rep.SendNode)
		fmt.Fprintf(tw, "stream node\t%s\n", rep.StreamNode)
		fmt.Fprintf(tw, "delivered\t%d of %d in %.2fs\n", rep.Delivered, rep.Count, rep.ElapsedSeconds)
		benchLatencyRows(tw, "send→event", rep.Latency)
		benchLatencyRows(tw, "send ack", rep.SendLatency)
		benchErrorRows(tw, rep.Errors, rep.ErrorsByKind)
	}); err != nil {
		return err
	}
	return benchFailed(rep.Delivered, rep.Errors)
}

func benchFanout(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	n := c.Int("agents")
	if n < 1 || n > bench.MaxFanoutAgents {
		return usagef(c, "--agents %d: must be 1..%d", n, bench.MaxFanoutAgents)
	}
	if c.Int("size") < 1 {
		return usagef(c, "--size %d: must be at least 1", c.Int("size"))
	}
	cls, err := benchClients(c)
	if err != nil {
		return err
	}
	ctx, cancel := benchContext(c)
	defer cancel()
	fmt.Fprintf(c.App.ErrWriter, "registering %d agents on %s, polling inboxes on %s\n", n, cls[0].Addr(), cls[len(cls)-1].Addr())
	rep, err := bench.RunFanout(ctx, bench.FanoutOptions{
		Send: cls[0], Poll: cls[len(cls)-1], Agents: n, To: strings.TrimSpace(c.String("to")),
		Channel: strings.TrimSpace(c.String("channel")), Size: c.Int("size"),
		Timeout: c.Duration("wait"), CallTimeout: rootContext(c).Duration("timeout"),
	})
	if err != nil {
		return apiError(rootContext(c), err)
	}
	if err := printReport(c, rep, func(tw io.Writer) {
		fmt.Fprintf(tw, "send node\t%s\n", rep.SendNode)
		fmt.Fprintf(tw, "poll node\t%s\n", rep.PollNode)
		fmt.Fprintf(tw, "message\t%s seq=%d to %s\n", rep.MessageID, rep.Seq, rep.To)
		fmt.Fprintf(tw, "agents\t%d (registered in %.1f ms)\n", rep.Agents, rep.RegisterMs)
		fmt.Fprintf(tw, "send ack\t%.3f ms\n", rep.SendMs)
		fmt.Fprintf(tw, "in every inbox\t%.3f ms\n", rep.AllDeliveredMs)
		fmt.Fprintf(tw, "poll rounds\t%d (%.3f ms each)\n", rep.PollRounds, rep.PollRoundMs)
		fmt.Fprintf(tw, "delivered\t%d of %d\n", rep.Delivered, rep.Agents)
	}); err != nil {
		return err
	}
	if rep.Delivered < rep.Agents {
		return fmt.Errorf("bench: %d of %d inboxes did not get %s within %s (first: %s)",
			rep.Agents-rep.Delivered, rep.Agents, rep.MessageID, c.Duration("wait"), strings.Join(rep.Missing, ", "))
	}
	return nil
}
