package a2ahost

import (
	"context"
	"fmt"
	"strconv"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/maos-project/maos/api"
)

// List paging: the default and largest page, and how many API pages one
// ListTasks reads at most while its filters pass over tasks.
const (
	DefaultPageSize = 50
	MaxPageSize     = 100
	maxScanPages    = 10
)

// ListTasks lists this agent's tasks: every maos task whose "to" is the
// agent, however it was created (the tasks GetTask answers), oldest
// first, as ToTask shows them. Filters, applied to the A2A view:
// contextId, status, statusTimestampAfter; includeArtifacts (default
// false) keeps the result artifact, historyLength 0 drops the history.
// The page token is the seq of the last task the page looked at (the
// API's ?after=); a page may hold fewer than pageSize tasks and still
// have a next token when the filters passed over many tasks. maos keeps
// no count of a filtered list: totalSize is the page's own count.
// Errors: a2a.ErrInvalidParams for a pageSize outside 1..100 or a token
// that is not one of ours; the API's errors wrapped.
func (a *agent) ListTasks(ctx context.Context, req *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
	size := req.PageSize
	if size == 0 {
		size = DefaultPageSize
	}
	if size < 1 || size > MaxPageSize {
		return nil, fmt.Errorf("%w: pageSize %d: want 1 to %d", a2a.ErrInvalidParams, req.PageSize, MaxPageSize)
	}
	q := api.TaskQuery{To: a.id, Limit: size}
	if req.PageToken != "" {
		after, err := strconv.ParseUint(req.PageToken, 10, 64)
		if err != nil || after == 0 {
			return nil, fmt.Errorf("%w: pageToken %q is not one this agent gave", a2a.ErrInvalidParams, req.PageToken)
		}
		q.After = after
	}
	out := &a2a.ListTasksResponse{Tasks: []*a2a.Task{}, PageSize: size}
	for range maxScanPages {
		page, err := a.c.Tasks(ctx, q)
		if err != nil {
			return nil, fromAPI(err)
		}
		for i, t := range page.Tasks {
			q.After = t.Seq
			if at := ToTask(t); listed(req, at) {
				out.Tasks = append(out.Tasks, a.addFiles(ctx, t, at))
			}
			if len(out.Tasks) == size {
				return finish(out, q.After, i < len(page.Tasks)-1 || page.HasMore), nil
			}
		}
		if !page.HasMore {
			return finishAt(out, 0), nil
		}
	}
	return finishAt(out, q.After), nil
}

// listed reports whether at passes req's filters, and trims it as req asks.
func listed(req *a2a.ListTasksRequest, at *a2a.Task) bool {
	if req.ContextID != "" && at.ContextID != req.ContextID {
		return false
	}
	if req.Status != "" && req.Status != a2a.TaskStateUnspecified && at.Status.State != req.Status {
		return false
	}
	if after := req.StatusTimestampAfter; after != nil && !at.Status.Timestamp.After(*after) {
		return false
	}
	if !req.IncludeArtifacts {
		at.Artifacts = nil
	}
	if n := req.HistoryLength; n != nil && *n == 0 {
		at.History = nil
	}
	return true
}

// finish ends a full page: the next token is after, if more may follow.
func finish(r *a2a.ListTasksResponse, after uint64, more bool) *a2a.ListTasksResponse {
	if !more {
		after = 0
	}
	return finishAt(r, after)
}

// finishAt sets the count and the next token (none for after 0).
func finishAt(r *a2a.ListTasksResponse, after uint64) *a2a.ListTasksResponse {
	r.TotalSize = len(r.Tasks)
	if after > 0 {
		r.NextPageToken = strconv.FormatUint(after, 10)
	}
	return r
}
