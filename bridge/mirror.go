package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/durable"
)

// FileMessage is a message in the channel layout's JSON shape (seed
// 001: id, timestamp, session_id, from, to, type, content{text, code,
// artifacts}, metadata) plus seq, the message's place in the log, which
// Mirror resumes from. "to" is a string for one recipient, else a list.
type FileMessage struct {
	ID        string      `json:"id"`
	Seq       uint64      `json:"seq"`
	Timestamp string      `json:"timestamp"`
	SessionID string      `json:"session_id"`
	From      string      `json:"from"`
	To        any         `json:"to"`
	Type      string      `json:"type"`
	Content   FileContent `json:"content"`
	Metadata  any         `json:"metadata"`
}

// FileContent is content in the seed shape: code null when empty,
// artifacts [] when empty.
type FileContent struct {
	Text      string   `json:"text"`
	Code      *string  `json:"code"`
	Artifacts []string `json:"artifacts"`
}

// ToFile renders m in the channel layout's shape. Metadata is m's metadata
// object (a non-object is kept as metadata.value) plus the fields the seed
// shape has no place for, when set and not already there: title, priority,
// in_reply_to, thread_id, correlation_id, tags, requires_response,
// recipients.
func ToFile(m *api.Message) FileMessage {
	f := FileMessage{
		ID: m.ID, Seq: m.Seq, SessionID: m.Channel, From: m.From, Type: m.Type,
		Timestamp: m.Timestamp.UTC().Format("2006-01-02T15:04:05.000Z"),
		Content:   FileContent{Text: m.Content.Text, Artifacts: api.ArtifactStrings(m.Content.Artifacts)},
	}
	if len(m.To) == 1 {
		f.To = m.To[0]
	} else {
		f.To = []string(m.To)
	}
	if m.Content.Code != "" {
		code := m.Content.Code
		f.Content.Code = &code
	}
	if f.Content.Artifacts == nil {
		f.Content.Artifacts = []string{}
	}
	meta := map[string]any{}
	if len(m.Metadata) > 0 {
		if err := json.Unmarshal(m.Metadata, &meta); err != nil || meta == nil {
			meta = map[string]any{"value": json.RawMessage(m.Metadata)}
		}
	}
	add := func(k string, v any, set bool) {
		if _, taken := meta[k]; set && !taken {
			meta[k] = v
		}
	}
	add("title", m.Title, m.Title != "")
	add("priority", m.Priority, m.Priority != "")
	add("in_reply_to", m.InReplyTo, m.InReplyTo != "")
	add("thread_id", m.ThreadID, m.ThreadID != "")
	add("correlation_id", m.CorrelationID, m.CorrelationID != "")
	add("tags", m.Tags, len(m.Tags) > 0)
	add("requires_response", true, m.RequiresResponse)
	add("recipients", m.Recipients, len(m.Recipients) > 0)
	f.Metadata = meta
	return f
}

// FileName is the file a message is mirrored to: its id plus ".json".
func FileName(id string) string { return id + ".json" }

// WriteFile writes m into dir as FileName(m.ID) unless that file exists:
// the bytes go to a hidden ".ID.json.*.tmp" file (no watcher's *.json glob
// sees it), are synced, then hard-linked to the final name, which fails
// rather than replace an existing file, the .tmp is removed and the folder
// synced (durable.CommitNew). Where hard links are not supported it renames
// the .tmp after checking the name is free. It reports whether it wrote the
// file; an existing file is never opened for writing.
func WriteFile(dir string, m *api.Message) (bool, error) {
	if !api.ValidID(m.ID) {
		return false, fmt.Errorf("mirror: message id %q is not a safe file name", m.ID)
	}
	final := filepath.Join(dir, FileName(m.ID))
	if _, err := os.Lstat(final); err == nil {
		return false, nil
	}
	data, err := json.MarshalIndent(ToFile(m), "", "  ")
	if err != nil {
		return false, fmt.Errorf("mirror %s: encode: %w", m.ID, err)
	}
	tmp, err := durable.Create(final, 0o600)
	if err != nil {
		return false, fmt.Errorf("mirror %s: %w", m.ID, err)
	}
	defer tmp.Discard()
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		return false, fmt.Errorf("mirror %s: write %s: %w", m.ID, tmp.Name(), err)
	}
	if err := tmp.CommitNew(); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		return false, fmt.Errorf("mirror %s: %w", m.ID, err)
	}
	return true, nil
}

// NewestSeq returns the highest seq among the *.json files in dir (files
// without a seq, written by something else, are passed over); zero for an
// empty or missing folder.
func NewestSeq(dir string) (uint64, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("mirror: read %s: %w", dir, err)
	}
	var newest uint64
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || strings.HasPrefix(n, ".") || !strings.HasSuffix(n, ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return 0, fmt.Errorf("mirror: %w", err)
		}
		var f struct {
			Seq uint64 `json:"seq"`
		}
		if json.Unmarshal(b, &f) == nil && f.Seq > newest {
			newest = f.Seq
		}
	}
	return newest, nil
}

// Mirror keeps dir a copy of a channel in the channel layout.
//
// A folder has no per-reader access control: whoever reads it reads every
// file. So the mirror writes only the messages everyone may read, and
// skips (and counts) those that are private or for moderators only,
// whatever its token lets it read.
type Mirror struct {
	Client  *client.Client
	Channel string
	Dir     string
	// OnWrite, if set, is called after each file written (path, message).
	OnWrite func(path string, m *api.Message)
	// OnSkip, if set, is called for each message not written because it
	// is not public.
	OnSkip func(m *api.Message)
	// OnRetry, if set, is called by Follow before it reconnects a broken
	// stream (the error, the seq it resumes after).
	OnRetry func(err error, after uint64)
	// Written and Present count files written and messages whose file was
	// already there; Skipped counts the messages not written because they
	// are private or for moderators only.
	Written, Present, Skipped int
}

// pageSize is how many messages one channel page asks for.
const pageSize = 200

func (mr *Mirror) write(m *api.Message) error {
	if !m.Public() {
		mr.Skipped++
		if mr.OnSkip != nil {
			mr.OnSkip(m)
		}
		return nil
	}
	ok, err := WriteFile(mr.Dir, m)
	if err != nil {
		return err
	}
	if !ok {
		mr.Present++
		return nil
	}
	mr.Written++
	if mr.OnWrite != nil {
		mr.OnWrite(filepath.Join(mr.Dir, FileName(m.ID)), m)
	}
	return nil
}

// start creates the folder and returns the seq to resume after.
func (mr *Mirror) start() (uint64, error) {
	if !api.ValidName(mr.Channel) {
		return 0, fmt.Errorf("mirror: channel %q is not a channel name", mr.Channel)
	}
	if err := os.MkdirAll(mr.Dir, 0o755); err != nil {
		return 0, fmt.Errorf("mirror: %w", err)
	}
	return NewestSeq(mr.Dir)
}

// Once writes the channel's messages after the newest file present and
// returns the last seq it saw.
func (mr *Mirror) Once(ctx context.Context) (uint64, error) {
	after, err := mr.start()
	if err != nil {
		return 0, err
	}
	for {
		page, err := mr.Client.ChannelPage(ctx, mr.Channel, after, pageSize, api.Strong)
		if err != nil {
			return after, fmt.Errorf("mirror %s: %w", mr.Channel, err)
		}
		for _, m := range page.Messages {
			if err := mr.write(m); err != nil {
				return after, err
			}
			after = m.Seq
		}
		if !page.HasMore || len(page.Messages) == 0 {
			return after, nil
		}
	}
}

// Follow writes what is there and then every new message of the channel's
// stream until ctx ends (it then returns nil). It starts after the newest
// file present and, when the stream breaks, reconnects after the last
// message it saw (no gap, no repeat), waiting 0.5 s, 1 s, ... up to 5 s
// between tries and calling OnRetry if set. A refusal (4xx: a bad channel)
// ends it with the error.
func (mr *Mirror) Follow(ctx context.Context) error {
	after, err := mr.start()
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		err := mr.Client.Stream(ctx, api.StreamQuery{Channel: mr.Channel, After: after}, func(ev api.StreamEvent) error {
			if ev.Message == nil {
				return nil
			}
			if err := mr.write(ev.Message); err != nil {
				return &writeError{err}
			}
			after = ev.Message.Seq
			attempt = 0
			return nil
		})
		if ctx.Err() != nil {
			return nil
		}
		var we *writeError
		if errors.As(err, &we) {
			return we.err
		}
		if api.Classify(err) == api.Refused { // reconnecting will not help
			return fmt.Errorf("mirror %s: %w", mr.Channel, err)
		}
		if err == nil {
			err = errors.New("the node closed the stream")
		}
		if mr.OnRetry != nil {
			mr.OnRetry(err, after)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(min(time.Duration(attempt+1)*500*time.Millisecond, 5*time.Second)):
		}
	}
}

// writeError marks a failure to write a file inside the stream callback, so
// Follow stops instead of reconnecting.
type writeError struct{ err error }

func (e *writeError) Error() string { return e.err.Error() }
