package fsm

// The artifact buckets (issue 17) and their typed accessors: the only
// code that knows their byte layouts.
//
// bucketArtifacts: artifact id ("sha256:…") → Artifact JSON (Existed and
// Kept never stored).
//
// bucketArtifactIndex: the recording entry's index (8-byte big-endian) →
// artifact id; lists page by it, and since apply's time is monotonic it is
// also creation-time order (ArtifactsDue stops at the first one not due).
//
// bucketArtifactUsage: principal (an agent, never a fork: Principal) → the
// bytes of the artifacts it and its forks uploaded first that are stored
// (8-byte big-endian int64, never below 0); the key is deleted when it
// reaches 0, so a state without artifacts holds no key.
//
// bucketArtifactRefs: artifact id ‖ 0x00 ‖ seq (8-byte big-endian) →
// empty: the stored message at seq names the artifact (artifactRefKey).
// Written by send, deleted by trim and by the artifact's delete; what
// canReadArtifact reads to find an artifact's readers.
//
// Refs (Artifact.Refs) is the number of stored messages that name the
// artifact in content.artifacts, each message once, counted by send and
// undone by retention's trim.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"go.etcd.io/bbolt"

	"github.com/maos-project/maos/api"
)

// getArtifact reads artifact id's record; nil (and no error) when none is
// stored.
func getArtifact(tx *bbolt.Tx, id string) (*api.Artifact, error) {
	v := tx.Bucket(bucketArtifacts).Get([]byte(id))
	if v == nil {
		return nil, nil
	}
	var a api.Artifact
	if err := json.Unmarshal(v, &a); err != nil {
		return nil, fmt.Errorf("artifact %s: decode: %w", id, err)
	}
	return &a, nil
}

// putArtifact writes a's record (its Index entry is addArtifactIndex's).
func putArtifact(tx *bbolt.Tx, a *api.Artifact) {
	rec := *a
	rec.Existed, rec.Kept = false, ""
	data, err := json.Marshal(&rec)
	if err != nil {
		panic(fmt.Sprintf("fsm: artifact %s: encode: %v", a.ID, err))
	}
	mustPut(tx.Bucket(bucketArtifacts), []byte(a.ID), data)
}

// addArtifact stores a new artifact: its record, its index entry, and its
// size on its uploader's usage.
func addArtifact(tx *bbolt.Tx, a *api.Artifact) {
	putArtifact(tx, a)
	mustPut(tx.Bucket(bucketArtifactIndex), u64(a.Index), []byte(a.ID))
	addArtifactUsage(tx, a.From, a.Size)
}

// removeArtifact deletes a's record and index entry and takes its size off
// its uploader's usage.
func removeArtifact(tx *bbolt.Tx, a *api.Artifact) {
	mustDelete(tx.Bucket(bucketArtifacts), []byte(a.ID))
	mustDelete(tx.Bucket(bucketArtifactIndex), u64(a.Index))
	addArtifactUsage(tx, a.From, -a.Size)
	// The messages that named it keep the id, but they make nobody a
	// reader of a later upload of the same bytes.
	prefix := append([]byte(a.ID), 0)
	refs := tx.Bucket(bucketArtifactRefs)
	var keys [][]byte
	c := refs.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		keys = append(keys, slices.Clone(k))
	}
	for _, k := range keys {
		mustDelete(refs, k)
	}
}

// artifactUsage is the bytes the stored artifacts of agent's principal
// (the agent and its forks together, Principal) use (0 when none): the
// usage bucket is keyed by principal, so a token cannot multiply its quota
// by uploading as A-fork-1 … A-fork-9999.
func artifactUsage(tx *bbolt.Tx, agent string) int64 {
	v := tx.Bucket(bucketArtifactUsage).Get([]byte(Principal(agent)))
	if len(v) != 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(v))
}

// addArtifactUsage adds delta to the usage of agent's principal, kept
// within 0..MaxInt64; a usage of 0 deletes the key.
func addArtifactUsage(tx *bbolt.Tx, agent string, delta int64) {
	used := artifactUsage(tx, agent)
	agent = Principal(agent)
	switch {
	case delta > 0 && used > math.MaxInt64-delta:
		used = math.MaxInt64
	default:
		used = max(used+delta, 0)
	}
	b := tx.Bucket(bucketArtifactUsage)
	if used == 0 {
		mustDelete(b, []byte(agent))
		return
	}
	mustPut(b, []byte(agent), u64(uint64(used)))
}

// messageArtifactIDs is the distinct artifact ids m's content.artifacts
// names, in first-named order (paths are not artifacts); with the index
// of each one's first entry.
func messageArtifactIDs(m *api.Message) (ids []string, at []int) {
	for i, r := range m.Content.Artifacts {
		id := r.ArtifactID()
		if id == "" || slices.Contains(ids, id) {
			continue
		}
		ids, at = append(ids, id), append(at, i)
	}
	return ids, at
}

// checkArtifactRefs reads the artifacts m names, each once; it refuses m
// when one is not stored, or its sender (viewer sender; nil: anyone) may
// not read it, in the same words: a *FieldError on content.artifacts[i],
// the first such entry. (Naming an artifact in a message makes the
// message's readers its readers, so only one who reads it may.)
func checkArtifactRefs(tx *bbolt.Tx, m *api.Message, sender *api.Viewer) ([]*api.Artifact, error) {
	ids, at := messageArtifactIDs(m)
	var out []*api.Artifact
	for i, id := range ids {
		a, err := getArtifact(tx, id)
		if err != nil {
			return nil, err
		}
		if a != nil {
			ok, err := canReadArtifact(tx, a, sender)
			if err != nil {
				return nil, err
			}
			if !ok {
				a = nil
			}
		}
		if a == nil {
			return nil, UnknownArtifactError(fmt.Sprintf("content.artifacts[%d]", at[i]), id)
		}
		out = append(out, a)
	}
	return out, nil
}

// UnknownArtifactError is the *FieldError of field naming artifact id
// that is not stored: "no artifact sha256:…: upload it first (maosctl
// artifact put)".
func UnknownArtifactError(field, id string) error {
	return api.FieldErrorf(field, "no artifact %s: upload it first (maosctl artifact put)", id)
}

// refArtifacts counts the message stored at seq in this entry once on
// each artifact it names (as checkArtifactRefs read them in the same
// entry), and indexes it as naming each (artifactRefKey).
func refArtifacts(tx *bbolt.Tx, arts []*api.Artifact, seq uint64) {
	for _, a := range arts {
		a.Refs++
		putArtifact(tx, a)
		mustPut(tx.Bucket(bucketArtifactRefs), artifactRefKey(a.ID, seq), []byte{})
	}
}

// artifactRefKey is the key of bucketArtifactRefs saying the message at
// seq names artifact id: id ‖ 0x00 ‖ seq (8 bytes, big-endian), so an
// artifact's referencing messages are one prefix range in seq order.
func artifactRefKey(id string, seq uint64) []byte {
	return append(append([]byte(id), 0), u64(seq)...)
}

// canReadArtifact is the one rule of who reads an artifact (its record,
// its bytes, its line in a list): a nil viewer (no auth) or a moderator;
// its uploader's principal (Principal: the agent and its forks); a reader
// of any stored message that names it (Viewer.CanRead, the messages'
// one visibility rule) and was stored after the record (an older one named
// a deleted record of the same bytes). A record stored before the index
// existed (RefsIndexed false) is read by everyone, as it was. And the
// creator of a task whose completion names it as an output
// (createdOutput).
func canReadArtifact(tx *bbolt.Tx, a *api.Artifact, v *api.Viewer) (bool, error) {
	if v == nil || v.Moderator || !a.RefsIndexed {
		return true, nil
	}
	if v.Agent == "" {
		return false, nil
	}
	if Principal(v.Agent) == Principal(a.From) {
		return true, nil
	}
	if ok, err := createdOutput(tx, a, v.Agent); ok || err != nil {
		return ok, err
	}
	prefix := append([]byte(a.ID), 0)
	c := tx.Bucket(bucketArtifactRefs).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		seq := binary.BigEndian.Uint64(k[len(prefix):])
		if seq <= a.Index {
			continue
		}
		m, err := getMessage(tx, seq)
		if errors.Is(err, api.ErrNotFound) {
			continue
		}
		if err != nil {
			return false, err
		}
		if v.CanRead(m) {
			return true, nil
		}
	}
	return false, nil
}

// unrefArtifacts takes m, being removed, off the refs of the artifacts it
// names. Only a record that m's send counted is changed: one recorded
// before m (Index < m.Seq); an artifact deleted since, or deleted and
// uploaded again after m, did not count m. Refs never go below 0. A
// record that does not decode (a damaged file) is left as it is, as trim
// leaves a message that does not decode.
func unrefArtifacts(tx *bbolt.Tx, m *api.Message) {
	ids, _ := messageArtifactIDs(m)
	for _, id := range ids {
		mustDelete(tx.Bucket(bucketArtifactRefs), artifactRefKey(id, m.Seq))
		a, err := getArtifact(tx, id)
		if err != nil || a == nil || a.Index >= m.Seq || a.Refs == 0 {
			continue
		}
		a.Refs--
		putArtifact(tx, a)
	}
}

// createdOutput reports whether agent created a task whose completion
// names artifact a in its outputs and whose claimant is a's uploader (the
// same principal: a claimant cannot hand over, by naming it, an artifact
// it did not upload). It reads the agent's tasks (task_index 'f'), so its
// cost grows with the tasks the agent created; it runs only for a viewer
// that neither uploaded a nor reads a message naming it.
func createdOutput(tx *bbolt.Tx, a *api.Artifact, agent string) (bool, error) {
	prefix := taskIndexKey(tidxFrom, agent, 0)
	prefix = prefix[:len(prefix)-8]
	c := tx.Bucket(bucketTaskIndex).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		t, err := getTask(tx, binary.BigEndian.Uint64(k[len(prefix):]))
		if err != nil {
			return false, err
		}
		if t.Completion != nil && Principal(t.ClaimedBy) == Principal(a.From) && slices.Contains(t.Completion.Outputs, a.ID) {
			return true, nil
		}
	}
	return false, nil
}
