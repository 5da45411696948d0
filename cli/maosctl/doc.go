// Package cli builds the command lines of maos with urfave/cli/v2: the
// node daemon maosd and the admin and agent client maosctl (MaosctlApp).
// The cmd/ mains only build an app here and run it.
//
// maosctl talks to any node through transport.Client: flags and environment
// variables (MAOS_ADDR, MAOS_AGENT_ID, MAOS_CHANNEL, MAOS_TIMEOUT) choose the
// node and fill in the common fields, results are printed as text or, with
// --json, as the API's JSON objects, and errors go to stderr as
// "maosctl: <message>" with exit status 1.
package maosctl
