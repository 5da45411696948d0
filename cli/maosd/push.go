package maosd

import (
	"context"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/a2ahost"
)

// A2A push notifications (docs/A2A.md): the operator's allowlist of the
// hosts a node may call, and the deliverer the node runs while it leads.

// pushAllowFlag is --a2a-push-allow.
var pushAllowFlag = &cli.StringFlag{Name: "a2a-push-allow", EnvVars: []string{"MAOS_A2A_PUSH_ALLOW"},
	Usage: "the hosts (host or host:port, comma-separated) A2A push notifications may be sent to; empty: push notifications off " +
		"(the cards say pushNotifications false). Give every node the same list: the Raft leader delivers"}

// readPushAllow reads --a2a-push-allow: each entry a host or host:port,
// no scheme, path or space.
func readPushAllow(c *cli.Context) ([]string, error) {
	var out []string
	v := c.String(pushAllowFlag.Name)
	if v == "" {
		return nil, nil
	}
	for _, h := range strings.Split(v, ",") {
		h = strings.TrimSpace(h)
		if h == "" || strings.ContainsAny(h, "/ @?#") {
			return nil, fmt.Errorf("--a2a-push-allow: %q: want a host or host:port (no scheme or path)", h)
		}
		out = append(out, strings.ToLower(h))
	}
	return out, nil
}

// startPush runs the push deliverer (a2ahost.Deliverer) when
// --a2a-push-allow is set: a client of this node's API with the admin
// token, delivering while the node leads, until shutdown.
func (d *daemon) startPush(ctx context.Context) {
	if len(d.cfg.pushAllow) == 0 {
		return
	}
	ctx, d.stopPush = context.WithCancel(ctx)
	dl := &a2ahost.Deliverer{Client: d.localClient(), Allow: d.cfg.pushAllow, IsLeader: d.node.IsLeader, Logger: d.logger}
	go dl.Run(ctx)
	d.logger.Info("push notifications on", "allow", d.cfg.pushAllow)
}
