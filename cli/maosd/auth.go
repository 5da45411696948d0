package maosd

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"strings"
	"unicode"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/cluster"
	"github.com/maos-project/maos/transport"
)

// maxTokenFileBytes bounds what is read of a token file (--admin-token-file,
// maosctl --token-file), so a wrong path (a log, a binary) fails fast
// instead of becoming a huge header.
const maxTokenFileBytes = 4 << 10

// authFlags checks --auth and --admin-token-file and returns the admin
// bootstrap token, "" when auth is off. It warns through logger when the
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
	secret, mode, err := readSecretFile(file)
	if err != nil {
		return "", fmt.Errorf("--admin-token-file: %w", err)
	}
	// It may do everything, so it must not be guessable.
	if len(secret) < transport.MinAdminTokenLen || len(secret) > transport.MaxTokenLen {
		return "", fmt.Errorf("--admin-token-file %s: the token is %d characters; want %d to %d (openssl rand -base64 32 makes 44)",
			file, len(secret), transport.MinAdminTokenLen, transport.MaxTokenLen)
	}
	if err := (&transport.AuthConfig{AdminToken: secret}).Validate(); err != nil {
		return "", fmt.Errorf("--admin-token-file %s: %v", file, err)
	}
	if mode.Perm()&0o077 != 0 {
		logger.Warn("the admin token file can be read by other users of this host; anyone holding it can do everything: chmod 600 it",
			"file", file, "mode", fmt.Sprintf("%04o", mode.Perm()))
	}
	return secret, nil
}

// readSecretFile reads a bearer token kept alone on one line of the file
// at path (surrounding blanks and the final newline trimmed) and returns it
// with the file's mode. It refuses an empty file, more than one line, a
// token with spaces or control characters, and files over 4 KiB.
func readSecretFile(path string) (string, fs.FileMode, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", 0, err
	}
	if !st.Mode().IsRegular() {
		return "", 0, fmt.Errorf("%s is not a regular file", path)
	}
	raw, err := io.ReadAll(io.LimitReader(f, maxTokenFileBytes+1))
	if err != nil {
		return "", 0, fmt.Errorf("read %s: %w", path, err)
	}
	if len(raw) > maxTokenFileBytes {
		return "", 0, fmt.Errorf("%s is larger than %d bytes; a token file holds one token on one line", path, maxTokenFileBytes)
	}
	secret := strings.TrimSpace(string(raw))
	if secret == "" {
		return "", 0, fmt.Errorf("%s is empty; put the token on one line (openssl rand -base64 32 > %s)", path, path)
	}
	if strings.ContainsAny(secret, "\r\n") {
		return "", 0, fmt.Errorf("%s holds more than one line; a token file holds one token on one line", path)
	}
	if i := strings.IndexFunc(secret, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }); i >= 0 {
		return "", 0, fmt.Errorf("%s: the token has a blank or control character at byte %d; tokens are printable, without spaces", path, i)
	}
	return secret, st.Mode(), nil
}

// checkAuthRequired refuses to run a node without --auth whose cluster
// records that it runs with authentication (fsm.ClusterConfig.AuthRequired,
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
		"--auth --admin-token-file FILE (README, Authentication), or say --insecure-no-auth to serve it open anyway", bound)
}
