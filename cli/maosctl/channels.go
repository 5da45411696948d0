package maosctl

import (
	"fmt"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
)

func channelsCommand() *cli.Command {
	return &cli.Command{
		Name:  "channels",
		Usage: "list the channels with their message counts",
		UsageText: `maosctl channels [--strong]

   maosctl channels
   maosctl --json channels | jq -r '.[].name'`,
		Description: `Prints a table NAME COUNT FIRST LAST: each channel, how many messages it
holds and the seq of its oldest and newest message (read it with
'maosctl read --channel NAME'). With --json, an array of
{"name","count","first_seq","last_seq"} objects ([] when there are none).`,
		Flags:  []cli.Flag{strongFlag(), jsonFlag()},
		Action: channels,
	}
}

func channels(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	ctx, cancel := call(c)
	defer cancel()
	list, err := apiClient(c).Channels(ctx, consistency(c))
	if err != nil {
		return apiError(c, err)
	}
	if list == nil {
		list = []api.ChannelInfo{}
	}
	if wantJSON(c) {
		return printJSON(c.App.Writer, list)
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tCOUNT\tFIRST\tLAST")
	for _, ch := range list {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\n", ch.Name, ch.Count, ch.FirstSeq, ch.LastSeq)
	}
	return tw.Flush()
}
