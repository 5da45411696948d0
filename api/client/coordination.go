package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/maos-project/maos/api"
)

// BulletinConflictError is a compare-and-set that lost: the bulletin has
// moved to Version. errors.Is(err, api.ErrConflict) holds.
type BulletinConflictError struct {
	API     *api.APIError
	Version uint64
}

func (e *BulletinConflictError) Error() string { return e.API.Error() }

// Unwrap returns the API error, so errors.As(err, **APIError) and
// errors.Is(err, api.ErrConflict) work.
func (e *BulletinConflictError) Unwrap() error { return e.API }

// LockRefusedError is a lock command the state machine refused (409):
// Outcome is api.LockHeld, api.LockLapsed, api.LockNotHolder or
// api.LockStaleToken, and Lock the lock as it stands (holder, token,
// expiry). errors.Is(err, api.ErrConflict) holds.
type LockRefusedError struct {
	API     *api.APIError
	Outcome string
	Lock    *api.Lock
}

func (e *LockRefusedError) Error() string { return e.API.Error() }

// Unwrap returns the API error.
func (e *LockRefusedError) Unwrap() error { return e.API }

// Bulletin reads the bulletin.
func (c *Client) Bulletin(ctx context.Context, cons api.Consistency) (api.Bulletin, error) {
	return request[api.Bulletin](ctx, c, http.MethodGet, "/v1/bulletin", consQuery(cons), nil)
}

// PutBulletin replaces the bulletin with doc (a JSON object; lock entries
// of shared_resources are kept by the cluster). A lost compare-and-set is
// a *BulletinConflictError.
func (c *Client) PutBulletin(ctx context.Context, doc json.RawMessage, opts api.BulletinWrite) (api.BulletinResult, error) {
	return c.writeBulletin(ctx, http.MethodPut, doc, opts)
}

// PatchBulletin merges patch into the bulletin (RFC 7396: null deletes a
// key, objects merge). A lost compare-and-set is a *BulletinConflictError.
func (c *Client) PatchBulletin(ctx context.Context, patch json.RawMessage, opts api.BulletinWrite) (api.BulletinResult, error) {
	return c.writeBulletin(ctx, http.MethodPatch, patch, opts)
}

func (c *Client) writeBulletin(ctx context.Context, method string, doc json.RawMessage, opts api.BulletinWrite) (api.BulletinResult, error) {
	q := url.Values{}
	if opts.By != "" {
		q.Set("by", opts.By)
	}
	h := http.Header{}
	if opts.IfVersion != nil {
		h.Set("If-Match", strconv.Quote(strconv.FormatUint(*opts.IfVersion, 10)))
	}
	var out api.BulletinResult
	err := c.doRaw(ctx, method, "/v1/bulletin", q, h, []byte(doc), &out, func(apiErr *api.APIError, data []byte) error {
		var body api.BulletinConflictBody
		if json.Unmarshal(data, &body) != nil {
			return apiErr
		}
		return &BulletinConflictError{API: apiErr, Version: body.Version}
	})
	return out, err
}

// AcquireLock takes (or, for its live holder, extends) a lease. A refusal
// is a *LockRefusedError naming the current holder.
func (c *Client) AcquireLock(ctx context.Context, cmd api.LockAcquireCommand) (*api.LockResult, error) {
	return c.lockCall(ctx, "/v1/locks", cmd)
}

// RenewLock extends a live lease by its holder with its token.
func (c *Client) RenewLock(ctx context.Context, cmd api.LockRenewCommand) (*api.LockResult, error) {
	return c.lockCall(ctx, "/v1/locks/renew", cmd)
}

// ReleaseLock ends a lease (by its holder, or forced).
func (c *Client) ReleaseLock(ctx context.Context, cmd api.LockReleaseCommand) (*api.LockResult, error) {
	return c.lockCall(ctx, "/v1/locks/release", cmd)
}

func (c *Client) lockCall(ctx context.Context, path string, cmd any) (*api.LockResult, error) {
	in, err := json.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("transport: encode %s: %w", path, err)
	}
	var out api.LockResult
	err = c.doRaw(ctx, http.MethodPost, path, nil, nil, in, &out, func(apiErr *api.APIError, data []byte) error {
		var body api.LockConflictBody
		if json.Unmarshal(data, &body) != nil || body.Outcome == "" {
			return apiErr
		}
		return &LockRefusedError{API: apiErr, Outcome: body.Outcome, Lock: body.Lock}
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// Locks lists locks (see api.LockQuery; Limit 0 means the server's default).
func (c *Client) Locks(ctx context.Context, lq api.LockQuery, cons api.Consistency) (api.LockPage, error) {
	q := listQuery(cons, lq.Limit, map[string]string{"prefix": lq.Prefix, "holder": lq.Holder, "after": lq.After})
	return request[api.LockPage](ctx, c, http.MethodGet, "/v1/locks", q, nil)
}

// CheckLock asks whether token is the current, unexpired grant of path.
func (c *Client) CheckLock(ctx context.Context, path string, token uint64, cons api.Consistency) (api.LockCheck, error) {
	return request[api.LockCheck](ctx, c, http.MethodPost, "/v1/locks/check", consQuery(cons), api.LockCheckCommand{Path: path, Token: token})
}
