package maosctl

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
)

func clusterConfigCommand() *cli.Command {
	return &cli.Command{
		Name:  "config",
		Usage: "read and change the replicated cluster settings",
		UsageText: `maosctl cluster config get [KEY] | set KEY VALUE

   maosctl cluster config get
   maosctl cluster config set strict_senders true
   maosctl cluster config set secret_guard redact`,
		Description: `Cluster settings are replicated through the log like messages: a change made
through any node applies on every node, from that point of the log on.

Settings:
   strict_senders  true: refuse sends from agents that are not registered (403
                   naming them, recorded in the audit trail as BLOCKED);
                   false (the default): register such a sender on the spot
                   with role "agent".
   secret_guard    what a node does with a secret (an API key, a token:
                   gitleaks' rules) found in a message's title, text or code:
                   refuse (the default: 422 naming the field and the rule,
                   never the secret; a DENIED line in the audit trail),
                   redact (store it with each secret replaced by
                   [REDACTED:rule]) or off (store it as sent).
   unknown_recipients  refuse (the default): a send, interrupt, task or
                   approval naming an agent that is neither registered nor
                   has sent, or a role or capability no agent has, is
                   refused (404 naming each, with the closest known names);
                   accept: stored, for agents addressed before they exist
                   (and imports of old mailboxes).
   auth_required   set by a leader running with --auth; false takes the
                   cluster off auth on purpose (docs/FARM.md: Authentication).
   escalation_target  an agent id or role:NAME that also gets the incident of
                   a task whose lease expired max_attempts times ("" : the
                   task's creator alone).
   artifact_quota_bytes  the bytes of artifacts one agent may have uploaded
                   first (default 1073741824, 1 GiB; 0: no quota); an upload
                   over it is refused with 413.
   artifact_retention_seconds  an artifact no stored message references is
                   deleted everywhere once it is this old (default 604800,
                   7 days; 0: kept forever).`,
		Subcommands: []*cli.Command{
			{
				Name:      "get",
				Usage:     "print the settings, or one",
				ArgsUsage: "[KEY]",
				UsageText: `maosctl cluster config get [KEY] [--strong]

   maosctl cluster config get
   maosctl cluster config get strict_senders`,
				Description: `Prints "KEY: VALUE" for every setting, or the value of KEY alone. With
--json, the settings object (or KEY's JSON value).`,
				Flags:  []cli.Flag{strongFlag(), jsonFlag()},
				Action: configGet,
			},
			{
				Name:      "set",
				Usage:     "change one setting",
				ArgsUsage: "KEY VALUE",
				UsageText: `maosctl cluster config set KEY VALUE

   maosctl cluster config set strict_senders true`,
				Description: `Sets KEY to VALUE, read as JSON when it is JSON (true, 3, "x", {...}) and as
a string otherwise. An unknown key or a value of the wrong kind is refused,
naming the known keys. Prints the settings after the change; with --json,
the settings object. The change goes into the audit trail.`,
				Flags:  []cli.Flag{jsonFlag()},
				Action: configSet,
			},
		},
		Action: noCommand,
	}
}

// configMap is the settings object as KEY → JSON value.
func configMap(cfg api.ClusterConfig) (map[string]json.RawMessage, error) {
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	return m, json.Unmarshal(b, &m)
}

func printConfig(c *cli.Context, cfg api.ClusterConfig) error {
	if wantJSON(c) {
		return printJSON(c.App.Writer, cfg)
	}
	m, err := configMap(cfg)
	if err != nil {
		return err
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, err := fmt.Fprintf(c.App.Writer, "%s: %s\n", k, m[k]); err != nil {
			return err
		}
	}
	return nil
}

func configGet(c *cli.Context) error {
	pos, err := trailingFlags(c)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return usagef(c, "unexpected argument %q", pos[1])
	}
	ctx, cancel := call(c)
	defer cancel()
	cfg, err := apiClient(c).Config(ctx, consistency(c))
	if err != nil {
		return apiError(c, err)
	}
	if len(pos) == 0 {
		return printConfig(c, cfg)
	}
	m, err := configMap(cfg)
	if err != nil {
		return err
	}
	v, ok := m[pos[0]]
	if !ok {
		return usagef(c, "unknown setting %q; known: %s", pos[0], strings.Join(api.ConfigKeys(), ", "))
	}
	_, err = fmt.Fprintf(c.App.Writer, "%s\n", v)
	return err
}

func configSet(c *cli.Context) error {
	args, err := positionalArgs(c, "key", "value")
	if err != nil {
		return err
	}
	key, raw := args[0], args[1]
	if !slices.Contains(api.ConfigKeys(), key) {
		return usagef(c, "unknown setting %q; known: %s", key, strings.Join(api.ConfigKeys(), ", "))
	}
	var value any = raw
	if json.Valid([]byte(raw)) {
		value = json.RawMessage(raw)
	}
	ctx, cancel := call(c)
	defer cancel()
	cfg, err := apiClient(c).SetConfig(ctx, key, value)
	if err != nil {
		return apiError(c, err)
	}
	return printConfig(c, cfg)
}
