package maosctl

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/urfave/cli/v2"
)

func clusterCommand() *cli.Command {
	return &cli.Command{
		Name:  "cluster",
		Usage: "inspect and change the cluster: status, join, remove, snapshot, transfer-leadership",
		UsageText: `maosctl cluster COMMAND [flags] [args]

   maosctl cluster status
   maosctl --addr 10.0.0.1:7070 cluster join --node-id n4 --raft-addr 10.0.0.4:7000 --api-addr 10.0.0.4:7070`,
		Description: `Administers the Raft cluster through the node at --addr. Changes to the
configuration (join, remove, transfer-leadership) are carried out by the
leader; any node accepts them and forwards them.`,
		Subcommands: []*cli.Command{
			clusterStatusCommand(),
			clusterJoinCommand(),
			clusterRemoveCommand(),
			clusterSnapshotCommand(),
			clusterTransferCommand(),
			clusterConfigCommand(),
		},
		Action: noCommand,
	}
}

func clusterStatusCommand() *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "show the node's view of the cluster: state, leader, term, indexes, voters",
		UsageText: `maosctl cluster status

   maosctl --addr 10.0.0.2:7070 cluster status
   maosctl --json cluster status | jq -r .leader_id`,
		Description: `Prints the answering node's id, version, its cluster's id and Raft state, the
leader it knows, the term, its commit, applied and last log indexes, the
cluster's state version (the lowest any voter's build applies, committed by
the leader; ops that need a higher one are refused until every voter is
upgraded) beside the highest this node's build applies, then the voters of
the Raft configuration with their Raft and API addresses and whether the
answering node hears from them; '*' marks the leader.

REACH is the answering node's view, from what it knows without asking
anyone: a leader's heartbeats to each follower ("unreachable since" the
follower's last answer once they fail), a follower's last contact with
its leader (unreachable past the heartbeat timeout), gossip for the rest
("unknown" without gossip). A leader that this node no longer hears from
is flagged on the leader line too. The commit index is at least the
applied index: a restarted node knows what it applied before the leader
tells it more. With --json, the status object of GET /v1/cluster/status.`,
		Flags:  []cli.Flag{jsonFlag()},
		Action: clusterStatus,
	}
}

func clusterStatus(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	ctx, cancel := call(c)
	defer cancel()
	st, err := apiClient(c).Status(ctx)
	if err != nil {
		return apiError(c, err)
	}
	if st.Voters == nil {
		st.Voters = []api.Voter{}
	}
	if wantJSON(c) {
		return printJSON(c.App.Writer, st)
	}
	w := c.App.Writer
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	leader := st.LeaderID
	switch {
	case leader == "":
		leader = "none known (election running, or no quorum)"
	case st.LeaderAPIAddr != "":
		leader += " (api " + st.LeaderAPIAddr + ")"
	}
	now := time.Now()
	for _, v := range st.Voters {
		if v.ID == st.LeaderID && v.Reach == api.ReachUnreachable {
			leader += "; " + reachText(v, now) + " from this node"
		}
	}
	fmt.Fprintf(tw, "node:\t%s\n", or(st.NodeID, "-"))
	fmt.Fprintf(tw, "version:\t%s\n", or(st.Version, "-"))
	fmt.Fprintf(tw, "cluster:\t%s\n", or(st.ClusterID, "-"))
	fmt.Fprintf(tw, "state:\t%s\n", or(st.State, "-"))
	fmt.Fprintf(tw, "leader:\t%s\n", leader)
	fmt.Fprintf(tw, "term:\t%d\n", st.Term)
	fmt.Fprintf(tw, "commit index:\t%d\n", st.CommitIndex)
	fmt.Fprintf(tw, "applied index:\t%d\n", st.AppliedIndex)
	fmt.Fprintf(tw, "last index:\t%d\n", st.LastIndex)
	fmt.Fprintf(tw, "cluster version:\t%s\n", clusterVersionLine(st))
	if st.APIAddr != "" || st.RaftAddr != "" {
		fmt.Fprintf(tw, "api addr:\t%s\n", or(st.APIAddr, "-"))
		fmt.Fprintf(tw, "raft addr:\t%s\n", or(st.RaftAddr, "-"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  ID\tRAFT ADDR\tAPI ADDR\tSUFFRAGE\tREACH")
	for _, v := range st.Voters {
		mark := " "
		if v.ID != "" && v.ID == st.LeaderID {
			mark = "*"
		}
		fmt.Fprintf(tw, "%s %s\t%s\t%s\t%s\t%s\n", mark, v.ID, or(v.RaftAddr, "-"), or(v.APIAddr, "-"), or(v.Suffrage, "-"),
			reachText(v, now))
	}
	return tw.Flush()
}

// clusterVersionLine is the cluster's committed state version and the
// highest this node's build applies; a node of a build before versions
// reports neither, and runs version 1.
func clusterVersionLine(st api.Status) string {
	if st.ClusterVersion == 0 {
		return "1 (the node's build predates state versions)"
	}
	return fmt.Sprintf("%d (this node's build applies up to %d; ops of a higher version are refused until every voter is upgraded)",
		st.ClusterVersion, st.StateVersion)
}

// reachText says whether the answering node hears from v: "self",
// "reachable, last contact 2s ago (raft)", "unreachable since
// 09:30:01Z, 12s ago (gossip)", "unknown" ("-" from a node that does not
// say).
func reachText(v api.Voter, now time.Time) string {
	s := or(v.Reach, "-")
	if !v.LastContact.IsZero() {
		ago := now.Sub(v.LastContact).Round(100 * time.Millisecond)
		if v.Reach == api.ReachUnreachable {
			s += fmt.Sprintf(" since %s, %s ago", v.LastContact.UTC().Format("15:04:05Z"), ago)
		} else {
			s += fmt.Sprintf(", last contact %s ago", ago)
		}
	}
	if v.Via != "" {
		s += " (" + v.Via + ")"
	}
	return s
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func clusterJoinCommand() *cli.Command {
	return &cli.Command{
		Name:  "join",
		Usage: "add a node to the cluster as a voter",
		UsageText: `maosctl cluster join --node-id ID --raft-addr HOST:PORT --api-addr HOST:PORT

   maosctl --addr 10.0.0.1:7070 cluster join --node-id n4 --raft-addr 10.0.0.4:7000 --api-addr 10.0.0.4:7070`,
		Description: `Asks the node at --addr (any member; it forwards to the leader) to add the
server ID, reachable at --raft-addr for Raft and --api-addr for the API, as a
voter. Start the new node's maosd first; it catches up from the leader.

A node id (or Raft address) that is already another voter's is refused
(409): --replace takes that voter's place on purpose, for a dead node rebuilt
with a new data dir, and is refused while the old voter still answers.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "node-id", Usage: "`ID` of the node to add (required)"},
			&cli.BoolFlag{Name: "replace", Usage: "take the place of the voter with this id or Raft address (a dead node rebuilt); refused while it still answers"},
			&cli.StringFlag{Name: "raft-addr", Usage: "its advertised Raft `HOST:PORT` (required)"},
			&cli.StringFlag{Name: "api-addr", Usage: "its advertised API `HOST:PORT` (required)"},
			jsonFlag(),
		},
		Action: clusterJoin,
	}
}

func clusterJoin(c *cli.Context) error {
	if err := noArgs(c, "node-id", "raft-addr", "api-addr"); err != nil {
		return err
	}
	req := api.JoinRequest{
		NodeID:   strings.TrimSpace(c.String("node-id")),
		RaftAddr: strings.TrimSpace(c.String("raft-addr")),
		APIAddr:  strings.TrimSpace(c.String("api-addr")),
		Replace:  c.Bool("replace"),
	}
	ctx, cancel := call(c)
	defer cancel()
	if err := apiClient(c).Join(ctx, req); err != nil {
		return apiError(c, err)
	}
	return printResult(c, map[string]string{"joined": req.NodeID}, "joined %s (raft %s, api %s)\n", req.NodeID, req.RaftAddr, req.APIAddr)
}

func clusterRemoveCommand() *cli.Command {
	return &cli.Command{
		Name:      "remove",
		Usage:     "remove a node from the cluster",
		ArgsUsage: "ID",
		UsageText: `maosctl cluster remove ID

   maosctl cluster remove n4`,
		Description: `Asks the leader (through the node at --addr) to remove the server ID from
the Raft configuration. Remove a node before retiring it for good, so the
quorum is counted without it.`,
		Flags:  []cli.Flag{jsonFlag()},
		Action: clusterRemove,
	}
}

func clusterRemove(c *cli.Context) error {
	args, err := positionalArgs(c, "id")
	if err != nil {
		return err
	}
	id := args[0]
	ctx, cancel := call(c)
	defer cancel()
	if err := apiClient(c).Remove(ctx, id); err != nil {
		return apiError(c, err)
	}
	return printResult(c, map[string]string{"removed": id}, "removed %s\n", id)
}

func clusterSnapshotCommand() *cli.Command {
	return &cli.Command{
		Name:  "snapshot",
		Usage: "make the node at --addr take a Raft snapshot now",
		UsageText: `maosctl cluster snapshot

   maosctl --addr 10.0.0.2:7070 cluster snapshot`,
		Description: `Makes the node at --addr snapshot its state now (nodes also do it on their
own), which lets it compact its Raft log. Prints the snapshot's id and the
index and term it covers; with --json, the API's object.`,
		Flags:  []cli.Flag{jsonFlag()},
		Action: clusterSnapshot,
	}
}

func clusterSnapshot(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	ctx, cancel := call(c)
	defer cancel()
	res, err := apiClient(c).Snapshot(ctx)
	if err != nil {
		return apiError(c, err)
	}
	return printResult(c, res, "snapshot %s of node %s at index %d term %d\n",
		or(res.ID, "-"), or(res.NodeID, "-"), res.Index, res.Term)
}

func clusterTransferCommand() *cli.Command {
	return &cli.Command{
		Name:  "transfer-leadership",
		Usage: "make the leader hand over to another voter",
		UsageText: `maosctl cluster transfer-leadership [--to ID]

   maosctl cluster transfer-leadership            # to the most up-to-date follower
   maosctl cluster transfer-leadership --to n2`,
		Description: `Asks the leader to hand leadership over, to --to if given, otherwise to the
follower Raft picks. Use it before restarting the leader's host. Prints the
leader afterwards; with --json, {"leader_id": ...}.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "to", Usage: "`ID` of the voter to hand over to (default: Raft picks)"},
			jsonFlag(),
		},
		Action: clusterTransfer,
	}
}

func clusterTransfer(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	ctx, cancel := call(c)
	defer cancel()
	res, err := apiClient(c).TransferLeadership(ctx, strings.TrimSpace(c.String("to")))
	if err != nil {
		return apiError(c, err)
	}
	return printResult(c, res, "leader is now %s\n", or(res.LeaderID, "unknown"))
}
