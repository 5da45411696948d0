package bridge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/dialect"
)

// Imported is one message file import sent.
type Imported struct {
	File   string `json:"file"`
	Layout Layout `json:"layout"`
	ID     string `json:"id"`
	Seq    uint64 `json:"seq"`
	// Already is true when the cluster held the message before this run
	// (a re-run, or the other copy of a message found in an inbox and an
	// outbox): the send stored nothing.
	Already bool `json:"already"`
}

// Skipped is a file import could not read, map or store; nothing of it was
// stored.
type Skipped struct {
	File   string `json:"file"`
	Reason string `json:"reason"`
}

// Report is what Import did, file by file.
type Report struct {
	Imported []Imported `json:"imported"`
	Skipped  []Skipped  `json:"skipped"`
	// Ignored are files that are not messages in any layout (status.json,
	// presence files, non-JSON files).
	Ignored []string `json:"ignored"`
}

// Counts returns how many files were newly imported and already there.
func (r *Report) Counts() (imported, already int) {
	for _, i := range r.Imported {
		if i.Already {
			already++
		} else {
			imported++
		}
	}
	return imported, already
}

// Import sends every message file under root (Scan) to the cluster behind
// c, mapped by dialect.Map with the file's Place, in timestamp order
// (files without one first, then path order) so a parent is stored before
// its replies. A file that cannot be read, mapped, or that the cluster
// refuses (4xx: invalid, an id already holding another message, blocked
// by the rules, a secret) is added to Skipped and nothing of it is
// stored.
//
// What refuses the caller rather than a file stops the import at once:
// a token the node does not take (401), and a token that may not send as
// some file's sender (an import sends as each file's sender, which takes
// an admin token on a cluster with --auth; checked against
// GET /v1/whoami before anything is sent). A send over the node's rate
// (429) waits as Retry-After says and tries the file again, at most
// rateRetries times and never longer than maxRateWait at once; past that
// the import stops.
//
// Import returns an error, with the report so far, when it stops or when
// the cluster could not be asked (unreachable, 5xx, ctx done): then the
// file being sent may or may not be stored, and re-running is safe.
func Import(ctx context.Context, c *client.Client, root string, opt dialect.Options) (*Report, error) {
	if opt.Fallback == "" {
		if abs, err := filepath.Abs(root); err == nil {
			opt.Fallback = dialect.SanitizeName(filepath.Base(abs))
		}
	}
	files, ignored, err := Scan(root)
	if err != nil {
		return nil, err
	}
	rep := &Report{Imported: []Imported{}, Skipped: []Skipped{}, Ignored: ignored}
	if rep.Ignored == nil {
		rep.Ignored = []string{}
	}
	type mapped struct {
		f File
		m *api.Message
	}
	var todo []mapped
	for _, f := range files {
		raw, err := os.ReadFile(f.Path)
		if err != nil {
			rep.Skipped = append(rep.Skipped, Skipped{File: f.Rel, Reason: err.Error()})
			continue
		}
		m, err := dialect.Map(raw, f.Place(), opt)
		if err != nil {
			rep.Skipped = append(rep.Skipped, Skipped{File: f.Rel, Reason: err.Error()})
			continue
		}
		todo = append(todo, mapped{f, m})
	}
	sort.SliceStable(todo, func(i, j int) bool { return todo[i].m.Timestamp.Before(todo[j].m.Timestamp) })
	if len(todo) > 0 {
		who, err := c.WhoAmI(ctx)
		if err != nil {
			return rep, fmt.Errorf("import: %w", err)
		}
		for _, t := range todo {
			if !who.MaySpeakFor(t.m.From) {
				return rep, fmt.Errorf("import %s: its sender is %s, but the token speaks for agent %s (role %s): "+
					"an import sends as each file's sender, which needs an admin token; nothing was sent", t.f.Rel, t.m.From, who.Agent, who.Role)
			}
		}
	}
	for _, t := range todo {
		_, err := c.Message(ctx, t.m.ID, api.Strong)
		already := err == nil
		if err != nil && !errors.Is(err, api.ErrNotFound) {
			return rep, fmt.Errorf("import %s: look up %s: %w", t.f.Rel, t.m.ID, err)
		}
		res, err := sendPaced(ctx, c, t.m)
		if err != nil {
			var apiErr *api.APIError
			if errors.As(err, &apiErr) && apiErr.Status >= 400 && apiErr.Status < 500 &&
				apiErr.Status != http.StatusUnauthorized && apiErr.Status != http.StatusTooManyRequests {
				reason := apiErr.Message
				if errors.Is(err, api.ErrConflict) {
					reason = fmt.Sprintf("id %s already holds a different message (%s)", t.m.ID, apiErr.Message)
				}
				rep.Skipped = append(rep.Skipped, Skipped{File: t.f.Rel, Reason: reason})
				continue
			}
			return rep, fmt.Errorf("import %s: send %s: %w", t.f.Rel, t.m.ID, err)
		}
		rep.Imported = append(rep.Imported, Imported{File: t.f.Rel, Layout: t.f.Layout, ID: res.ID, Seq: res.Seq, Already: already})
	}
	return rep, nil
}

// The bounds of waiting out a node's send rate (429) during an import.
const (
	// rateRetries is how many times one file is sent again after a 429.
	rateRetries = 10
	// maxRateWait is the longest one wait: a node asking for more stops
	// the import (its --send-rate is too low for one).
	maxRateWait = 30 * time.Second
	// minRateWait is the wait when Retry-After says 0 or nothing.
	minRateWait = 100 * time.Millisecond
)

// sendPaced sends m, and after a 429 waits as its Retry-After says and
// sends it again (the same id: a send that did commit is answered as
// such), within rateRetries and maxRateWait. Any other error, or a 429
// past those bounds, is returned.
func sendPaced(ctx context.Context, c *client.Client, m *api.Message) (*api.SendResponse, error) {
	for try := 0; ; try++ {
		res, err := c.Send(ctx, m)
		if !errors.Is(err, api.ErrRateLimited) {
			return res, err
		}
		wait := max(api.RetryAfter(err), minRateWait)
		switch {
		case wait > maxRateWait:
			return nil, fmt.Errorf("the node asks to wait %s before the next send (over %s: lower the import's pace or raise --send-rate): %w", wait, maxRateWait, err)
		case try == rateRetries:
			return nil, fmt.Errorf("still over the node's send rate after %d tries: %w", try+1, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}
