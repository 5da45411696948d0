// Package transport is maos's wire: the HTTP/JSON API v1 (server handlers
// and the Go client), its error bodies and the small consumer-side
// interfaces the handlers serve through (service.go: Proposer, Reader,
// Membership, PresenceStore; together a Backend).
//
// The server never imports cluster: cluster.Node implements Backend and
// the cli wires it in. A request a node forwards to the leader carries the
// header X-Maos-Forwarded, which tells the receiving node to answer itself
// (or say it is not the leader) rather than forward again, so a request
// crosses at most one hop.
//
// Errors travel as {"error":{"code","message"}} with the HTTP status of the
// table in errors.go; the client turns them back into *APIError values that
// match the sentinel errors with errors.Is.
package transport
