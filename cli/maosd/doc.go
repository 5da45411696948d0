// Package maosd builds maosd, the node daemon of a maos cluster, with
// urfave/cli/v2: App reads the flags (and their MAOS_* environment
// variables), runs one cluster.Node behind the HTTP API and, with
// --agents, its watchers. cmd/maosd only runs it.
//
// A flag maosd refuses exits with status 2 and a message naming the flag;
// a node that cannot start (a port taken, a locked data dir, a failed
// join) exits with status 1.
package maosd
