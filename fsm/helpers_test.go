package fsm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/maos-project/maos/api"
)

// baseTS is the proposer clock the tests stamp entries with (Unix ns).
var baseTS = time.Date(2026, 11, 21, 10, 30, 0, 0, time.UTC).UnixNano()

var quietLogger = slog.New(slog.DiscardHandler)

// openAt opens the state file at path with a discarding logger.
func openAt(tb testing.TB, path string) *FSM {
	tb.Helper()
	f, err := Open(path, Options{Logger: quietLogger})
	if err != nil {
		tb.Fatalf("Open(%s): %v", path, err)
	}
	return f
}

// openTemp opens a fresh state file in a temporary directory; it is closed
// when the test ends.
func openTemp(tb testing.TB) (*FSM, string) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "state.db")
	f := openAt(tb, path)
	tb.Cleanup(func() { _ = f.Close() })
	return f, path
}

// testMessage is a valid, normalized message as a proposer would put in a
// send command.
func testMessage(id, channel, text string) api.Message {
	return api.Message{
		ID:         id,
		Channel:    channel,
		From:       "codex",
		To:         api.Recipients{"claude"},
		Type:       api.DefaultType,
		Priority:   api.DefaultPriority,
		Visibility: api.VisibilityPublic,
		Content:    api.Content{Text: text},
	}
}

func msgID(n int) string { return fmt.Sprintf("msg-20261121-103000-codex-%08x", n) }

func sendEntry(tb testing.TB, index uint64, ts int64, m api.Message) *raft.Log {
	tb.Helper()
	data, err := Encode(api.OpSend, ts, api.SendCommand{Message: m})
	if err != nil {
		tb.Fatalf("Encode send: %v", err)
	}
	return &raft.Log{Type: raft.LogCommand, Index: index, Term: 1, Data: data}
}

func nodeEntry(tb testing.TB, index uint64, ts int64, c api.RegisterNodeCommand) *raft.Log {
	tb.Helper()
	data, err := Encode(api.OpRegisterNode, ts, c)
	if err != nil {
		tb.Fatalf("Encode register_node: %v", err)
	}
	return &raft.Log{Type: raft.LogCommand, Index: index, Term: 1, Data: data}
}

// rawEntry builds a command entry from an arbitrary envelope.
func rawEntry(tb testing.TB, index uint64, c Command) *raft.Log {
	tb.Helper()
	data, err := json.Marshal(c)
	if err != nil {
		tb.Fatalf("marshal command: %v", err)
	}
	return &raft.Log{Type: raft.LogCommand, Index: index, Term: 1, Data: data}
}

func applyOne(f *FSM, l *raft.Log) any { return f.ApplyBatch([]*raft.Log{l})[0] }

func mustSendResult(tb testing.TB, res any) *SendResult {
	tb.Helper()
	r, ok := res.(*SendResult)
	if !ok {
		tb.Fatalf("result = %T (%v), want *SendResult", res, res)
	}
	return r
}

func mustError(tb testing.TB, res any) error {
	tb.Helper()
	err, ok := res.(error)
	if !ok || err == nil {
		tb.Fatalf("result = %T (%v), want an error", res, res)
	}
	return err
}

// dump is the canonical form of the whole state.
func dump(tb testing.TB, f *FSM) string {
	tb.Helper()
	var buf bytes.Buffer
	if err := f.Dump(&buf); err != nil {
		tb.Fatalf("Dump: %v", err)
	}
	return buf.String()
}

// dataDump is dump without the meta bucket (applied index, last time), which
// every applied entry moves: what a refused command must leave untouched.
func dataDump(tb testing.TB, f *FSM) string {
	tb.Helper()
	var keep []string
	for line := range strings.Lines(dump(tb, f)) {
		if !strings.HasPrefix(line, string(bucketMeta)+" ") {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "")
}

// channelCount is the stored count of channel, 0 if it does not exist.
func channelCount(tb testing.TB, f *FSM, channel string) uint64 {
	tb.Helper()
	chans, err := f.Channels()
	if err != nil {
		tb.Fatalf("Channels: %v", err)
	}
	for _, c := range chans {
		if c.Name == channel {
			return c.Count
		}
	}
	return 0
}

// resultString renders an apply result so two runs can be compared.
func resultString(r any) string {
	switch v := r.(type) {
	case nil:
		return "nil"
	case *SendResult:
		return fmt.Sprintf("send id=%s seq=%d ts=%s dup=%t", v.ID, v.Seq, v.Timestamp.Format(time.RFC3339Nano), v.Duplicate)
	case *NodeInfo:
		return fmt.Sprintf("node %+v", *v)
	case error:
		return errorString(v)
	default:
		return fmt.Sprintf("unexpected %T", v)
	}
}

// errorString renders an apply error with the sentinel it wraps first,
// so a test can count refusals by kind whatever their words.
func errorString(err error) string {
	for _, s := range []error{api.ErrConflict, api.ErrForbidden, api.ErrNotFound, api.ErrInvalid} {
		if errors.Is(err, s) {
			return "error [" + s.Error() + "] " + err.Error()
		}
	}
	return "error " + err.Error()
}

func isErr(r any, target error) bool {
	err, ok := r.(error)
	return ok && errors.Is(err, target)
}
