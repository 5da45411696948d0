package transporttest

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/blobstore"
	"github.com/maos-project/maos/transport"
)

// Artifacts: the Service is a one-node transport.Blobs (a blobstore in the
// test's temporary directory, the node's only copy: a quorum of one), so
// the artifact routes run end to end; pass it as ServerOptions.Blobs.
//
// The records are the state machine's: artifact_put and artifact_delete
// are applied by the real FSM, as every other command, and quotas are the
// cluster setting artifact_quota_bytes (set it with ApplyCommand and
// api.OpSetConfig).

var _ transport.Blobs = (*Service)(nil)

// BlobStore is the Service's blob store, for a test to inspect or damage.
func (s *Service) BlobStore() *blobstore.Store { return s.blobs }

// StoreBlob stores body in the Service's store (the whole quorum).
func (s *Service) StoreBlob(ctx context.Context, body io.Reader, max int64) (string, int64, error) {
	if err := s.record(ctx, Call{Method: "StoreBlob"}); err != nil {
		return "", 0, err
	}
	id, size, err := s.blobs.Put(body, max)
	if errors.Is(err, blobstore.ErrTooLarge) {
		err = fmt.Errorf("%w: %w", api.ErrTooLarge, err)
	}
	return id, size, err
}

// OpenBlob opens the Service's copy ("local"); missing or damaged: an
// error wrapping api.ErrNotFound (there is no peer to ask).
func (s *Service) OpenBlob(ctx context.Context, id string) (io.ReadSeekCloser, int64, string, error) {
	if err := s.record(ctx, Call{Method: "OpenBlob", Arg: id}); err != nil {
		return nil, 0, "", err
	}
	f, size, err := s.localBlob(id)
	return f, size, "local", err
}

// ReceiveBlob stores a push of id, checked.
func (s *Service) ReceiveBlob(ctx context.Context, id string, body io.Reader, size int64) error {
	if err := s.record(ctx, Call{Method: "ReceiveBlob", Arg: id}); err != nil {
		return err
	}
	_, err := s.blobs.PutExpect(id, body, 0)
	if errors.Is(err, blobstore.ErrMismatch) {
		err = fmt.Errorf("%w: %w", api.ErrInvalid, err)
	}
	return err
}

// LocalBlob opens the Service's copy, as OpenBlob.
func (s *Service) LocalBlob(ctx context.Context, id string) (io.ReadSeekCloser, int64, error) {
	if err := s.record(ctx, Call{Method: "LocalBlob", Arg: id}); err != nil {
		return nil, 0, err
	}
	return s.localBlob(id)
}

func (s *Service) localBlob(id string) (io.ReadSeekCloser, int64, error) {
	f, size, err := s.blobs.Open(id)
	if errors.Is(err, blobstore.ErrMissing) || errors.Is(err, blobstore.ErrDamaged) {
		return nil, 0, fmt.Errorf("fake: artifact %s: no good copy (%w): %w", id, err, api.ErrNotFound)
	}
	return f, size, err
}
