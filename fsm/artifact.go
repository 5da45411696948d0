package fsm

// Artifacts (issue 17): immutable blobs named by their content,
// "sha256:<64 lowercase hex>". The bytes are not in the log: they are
// stored beside it, on a majority of the nodes, before their metadata is
// proposed (cluster, blobstore). The log holds what every node must agree
// on: which artifacts exist, their name, type, size, uploader and time,
// each agent's usage against its quota, and how many stored messages
// reference them (so retention removes an artifact nobody references;
// tasks do not count, see DESIGN.md).

import (
	"github.com/maos-project/maos/api"
)

// CheckQuota is the one quota rule, for apply and for the node that checks
// an upload before reading its body: size more bytes for agent, whose
// principal (Principal) already uses used, fit quota (0: none); else a
// *QuotaError naming the principal.
func CheckQuota(agent string, used, size, quota int64) error {
	if quota > 0 && (size > quota || used > quota-size) {
		return &api.QuotaError{Agent: Principal(agent), Used: used, Size: size, Quota: quota}
	}
	return nil
}
