package api

import (
	"encoding/binary"
	"encoding/json"
)

// ContentTypeEntries marks a request body that is a batch of encoded log
// entries: each entry as its length (unsigned varint, encoding/binary's
// Uvarint) followed by its bytes, back to back.
const ContentTypeEntries = "application/vnd.maos.entries"

// EntryOutcome is the leader's answer to one entry of a batch: Result, the
// state machine's result as JSON, or Err (an apply refusal, or a failure
// to commit such as raft.ErrLeadershipLost, classified for the wire as a
// single entry's error would be).
type EntryOutcome struct {
	Result json.RawMessage
	Err    error
}

// EntriesResponse is the answer of POST /v1/internal/entries: one result
// per entry, in the order of the request.
type EntriesResponse struct {
	Results []EntryResult `json:"results"`
}

// EntryResult is one entry's answer: exactly one of Result (the state
// machine's result, as /v1/internal/entry answers it) and Error (the
// error body that route would have answered, with its HTTP status).
type EntryResult struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  *EntryError     `json:"error,omitempty"`
}

// EntryError is one entry's error: its HTTP status, code and message.
type EntryError struct {
	Status  int    `json:"status"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// AppendEntry appends entry to a batch body in the framing of
// ContentTypeEntries.
func AppendEntry(batch, entry []byte) []byte {
	batch = binary.AppendUvarint(batch, uint64(len(entry)))
	return append(batch, entry...)
}

// ContentTypeEntry marks a request body that is one encoded log entry.
const ContentTypeEntry = "application/vnd.maos.entry"
