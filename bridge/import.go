package bridge

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/maos-project/maos/dialect"
	"github.com/maos-project/maos/fsm"
	"github.com/maos-project/maos/transport"
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

// Import sends every message file under root (Scan) to the cluster behind c,
// mapped by dialect.Map with the file's Place, in timestamp order (files without one first, then path
// order) so a parent is stored before its replies. A file that cannot be
// read, mapped, or that the cluster refuses (4xx: invalid, an id already
// holding another message, blocked by the rules) is added to Skipped and
// nothing of it is stored. Import returns an error, with the report so far,
// only when the cluster could not be asked (unreachable, 5xx, ctx done):
// then the file being sent may or may not be stored, and re-running is safe.
func Import(ctx context.Context, c *transport.Client, root string, opt dialect.Options) (*Report, error) {
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
		m *fsm.Message
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
	for _, t := range todo {
		_, err := c.Message(ctx, t.m.ID, transport.Strong)
		already := err == nil
		if err != nil && !errors.Is(err, fsm.ErrNotFound) {
			return rep, fmt.Errorf("bridge: import %s: look up %s: %w", t.f.Rel, t.m.ID, err)
		}
		res, err := c.Send(ctx, t.m)
		if err != nil {
			var api *transport.APIError
			if errors.As(err, &api) && api.Status >= 400 && api.Status < 500 {
				reason := api.Message
				if errors.Is(err, fsm.ErrConflict) {
					reason = fmt.Sprintf("id %s already holds a different message (%s)", t.m.ID, api.Message)
				}
				rep.Skipped = append(rep.Skipped, Skipped{File: t.f.Rel, Reason: reason})
				continue
			}
			return rep, fmt.Errorf("bridge: import %s: send %s: %w", t.f.Rel, t.m.ID, err)
		}
		rep.Imported = append(rep.Imported, Imported{File: t.f.Rel, Layout: t.f.Layout, ID: res.ID, Seq: res.Seq, Already: already})
	}
	return rep, nil
}
