package transport

import (
	"context"
	"io"
)

// Blobs is where artifacts' bytes live, as the artifact handlers
// (server_artifacts.go) use it: content-addressed blobs named
// "sha256:<64 hex>", stored beside the Raft log on the nodes, never in it
// (the log holds the api.Artifact record). cluster.Node implements it (a
// blobstore under its data dir, copied to the other voters);
// transporttest.Service has a one-node version. ServerOptions.Blobs passes
// it; without one the artifact routes answer 503.
type Blobs interface {
	// StoreBlob reads body to its end (at most max bytes) into this node's
	// store, copies it to the other voters, and returns its id and length
	// in bytes once a majority of the voters (this node counted if it is
	// one) hold it fsynced. More than max bytes: an error wrapping
	// ErrTooLarge (or the *http.MaxBytesError of a capped body). Too few
	// copies before ctx ends or the node's timeout: an error wrapping
	// ErrNotReady; nothing is recorded then, the caller may retry, and the
	// copies made are orphans the node removes later.
	StoreBlob(ctx context.Context, body io.Reader, max int64) (id string, size int64, err error)
	// OpenBlob returns blob id's bytes, checked against the id, rewound,
	// with their length and whose copy they are: "local", or "peer N
	// (local copy missing)" / "peer N (local copy damaged)" when this
	// node's copy was not good and it fetched (and kept) peer N's. No node
	// with a good copy: an error wrapping api.ErrNotFound. The caller
	// closes rs.
	OpenBlob(ctx context.Context, id string) (rs io.ReadSeekCloser, size int64, source string, err error)
	// ReceiveBlob stores a peer's push of blob id (size bytes, -1 when
	// unknown) in this node's store, fsynced, when the bytes hash to id;
	// otherwise an error wrapping api.ErrInvalid, and nothing is kept.
	ReceiveBlob(ctx context.Context, id string, body io.Reader, size int64) error
	// LocalBlob returns this node's own copy of blob id, checked against
	// the id, and its length; none, or a damaged one: an error wrapping
	// api.ErrNotFound (a peer then asks another node). The caller closes
	// it.
	LocalBlob(ctx context.Context, id string) (io.ReadSeekCloser, int64, error)
}
