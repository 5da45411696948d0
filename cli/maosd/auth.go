package maosd

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/cli/internal/secretfile"
	"github.com/maos-project/maos/cluster"
)

// authFlags checks --auth and --admin-token-file and returns the admin
// bootstrap token, "" when auth is off; the token's length and characters
// are cluster.Config.Validate's to check. It warns through logger when the
// file can be read by other users, and when auth is off at all.
func authFlags(c *cli.Context, logger *slog.Logger) (string, error) {
	file := strings.TrimSpace(c.String("admin-token-file"))
	if !c.Bool("auth") {
		if file != "" {
			return "", errors.New("--admin-token-file is only read with --auth; add --auth (or MAOS_AUTH=true) to turn authentication on")
		}
		logger.Warn("auth is off: anyone who can reach the API can send as any agent and read every inbox; " +
			"this is meant for a single-node local setup only -- start every node of a multi-host cluster with " +
			"--auth --admin-token-file FILE")
		return "", nil
	}
	if file == "" {
		return "", errors.New("--auth needs --admin-token-file FILE (or $MAOS_ADMIN_TOKEN_FILE): the admin bootstrap token, " +
			"the same file on every node; make one with: openssl rand -base64 32 > admin.token && chmod 600 admin.token")
	}
	secret, mode, err := secretfile.Read(file)
	if err != nil {
		return "", fmt.Errorf("--admin-token-file: %w", emptyRandomHint(err, file))
	}
	if mode.Perm()&0o077 != 0 {
		logger.Warn("the admin token file can be read by other users of this host; anyone holding it can do everything: chmod 600 it",
			"file", file, "mode", fmt.Sprintf("%04o", mode.Perm()))
	}
	return secret, nil
}

// checkAuthRequired refuses to run a node without --auth whose cluster
// records that it runs with authentication (api.ClusterConfig.AuthRequired,
// set by a leader started with --auth).
func checkAuthRequired(node *cluster.Node, adminToken string) error {
	if adminToken != "" {
		return nil
	}
	cfg, err := node.State().Config()
	if err != nil {
		return fmt.Errorf("read the cluster config: %w", err)
	}
	if cfg.AuthRequired {
		return errors.New("this node's cluster runs with authentication (cluster config auth_required=true) but --auth is not set: " +
			"restart it with --auth --admin-token-file FILE (the same file as the other nodes); " +
			"to run the whole cluster without auth, an admin sets it off first: maosctl cluster config set auth_required false")
	}
	return nil
}

// checkOpenAPI refuses an API listening beyond loopback without --auth:
// authentication is off only for the local default (127.0.0.1), unless the
// operator says --insecure-no-auth.
func checkOpenAPI(bound net.Addr, auth, insecure bool) error {
	if auth || insecure {
		return nil
	}
	if tcp, ok := bound.(*net.TCPAddr); ok && tcp.IP.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--http-addr %s is reachable from other hosts and --auth is off: start every node with "+
		"--auth --admin-token-file FILE (docs/FARM.md, Authentication), or say --insecure-no-auth to serve it open anyway", bound)
}

// checkGossipKey refuses --auth with gossip in the clear beyond loopback:
// anyone who reaches --gossip-addr could then join the gossip, claim to
// host agents and advertise addresses, and the cluster's auth would guard
// a door gossip leaves open. --insecure-gossip says it is meant (a trusted
// network). Without --auth, checkOpenAPI already decided; without gossip
// there is nothing to say.
func checkGossipKey(gossipAddr string, auth, hasKey, insecure bool) error {
	if !auth || hasKey || insecure || gossipAddr == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(gossipAddr)
	if err != nil {
		return nil // Validate names a malformed address
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--gossip-addr %s is reachable from other hosts and gossip is not encrypted, though --auth is on: "+
		"give every node the same --gossip-key-file (openssl rand -base64 32), or say --insecure-gossip to run it in the clear anyway", gossipAddr)
}

// emptyRandomHint adds to secretfile.Read's error for an empty file how
// to make the secret maosd reads (the admin token, the gossip key): 32
// random bytes in base64. Any other error is returned as is.
func emptyRandomHint(err error, file string) error {
	if errors.Is(err, secretfile.ErrEmpty) {
		return fmt.Errorf("%w; make one with: openssl rand -base64 32 > %s && chmod 600 %s", err, file, file)
	}
	return err
}
