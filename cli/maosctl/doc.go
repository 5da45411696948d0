// Package maosctl builds maosctl, the admin and agent client of a maos
// cluster, with urfave/cli/v2: App is the whole command line, one file per
// verb (send.go, inbox.go, ...). cmd/maosctl only runs it.
//
// maosctl talks to any node through transport.Client: flags and environment
// variables (MAOS_ADDR, MAOS_AGENT_ID, MAOS_CHANNEL, MAOS_TIMEOUT) choose the
// node and fill in the common fields, results are printed as text or, with
// --json, as the API's JSON objects, and errors go to stderr as
// "maosctl: <message>" with exit status 1 (task wait says a task's outcome
// by its status: 1 failed or cancelled, 2 timed out).
package maosctl
