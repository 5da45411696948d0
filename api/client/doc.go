// Package client is the Go client of maos's HTTP API v1: one Client per
// node address, a method per route (send, inbox, tasks, approvals,
// artifacts, locks, the stream, the admin routes), typed errors
// (*api.APIError, *UnreachableError) and the TLS files a client or a node
// loads (TLSFiles). Its request and response bodies are package api's;
// it links no storage, Raft or secret scanner, so maosctl, watchers, the
// MCP server and bench carry only the vocabulary and net/http.
package client
