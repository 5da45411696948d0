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
	"errors"
	"fmt"

	"github.com/maos-project/maos/api"
)

// ArtifactPage is a page of artifacts in index order.
type ArtifactPage struct {
	Artifacts []*api.Artifact `json:"artifacts"`
	HasMore   bool            `json:"has_more"`
}

// ErrQuota: an artifact does not fit its uploader's quota (*QuotaError;
// the API answers 413).
var ErrQuota = errors.New("over quota")

// QuotaError is an artifact_put refused by the uploader's quota (the
// cluster setting artifact_quota_bytes): its words name the agent, the
// bytes it uses, the upload's size and the quota.
type QuotaError struct {
	Agent             string // the principal (Principal): an agent, whose forks it counts with it
	Used, Size, Quota int64
}

func (e *QuotaError) Error() string {
	return fmt.Sprintf("agent %s's artifacts (its forks' included) use %d bytes of its quota of %d (artifact_quota_bytes); this one (%d bytes) does not fit: delete some or raise the quota",
		e.Agent, e.Used, e.Quota, e.Size)
}

// Unwrap lets errors.Is(err, ErrQuota) match.
func (e *QuotaError) Unwrap() error { return ErrQuota }

// CheckQuota is the one quota rule, for apply and for the node that checks
// an upload before reading its body: size more bytes for agent, whose
// principal (Principal) already uses used, fit quota (0: none); else a
// *QuotaError naming the principal.
func CheckQuota(agent string, used, size, quota int64) error {
	if quota > 0 && (size > quota || used > quota-size) {
		return &QuotaError{Agent: Principal(agent), Used: used, Size: size, Quota: quota}
	}
	return nil
}
