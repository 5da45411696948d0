package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"runtime/debug"
	"time"

	"go.etcd.io/bbolt"
)

// CorruptError says that a bbolt file (the state file, or the Raft log
// that cluster keeps in the same format) is damaged: what CheckFile found
// and where. It wraps ErrCorrupt.
type CorruptError struct {
	Path   string
	Reason string
}

func (e *CorruptError) Error() string { return fmt.Sprintf("%s is damaged: %s", e.Path, e.Reason) }

// Unwrap lets errors.Is(err, ErrCorrupt) match.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// The bbolt file format (go.etcd.io/bbolt, version 2), as far as CheckFile
// reads it itself: a page starts with a 16-byte header; pages 0 and 1 hold
// the two meta pages, the newer valid one is current.
const (
	boltMagic       = 0xED0CDAED
	boltVersion     = 2
	boltPageHeader  = 16
	boltMetaSumLen  = 56 // bytes of the meta summed by its FNV-64a checksum
	boltNoFreelist  = ^uint64(0)
	boltMinPageSize = 1024
)

// boltMeta is the part of a bbolt meta page CheckFile uses.
type boltMeta struct {
	pageSize uint32
	root     uint64 // page of the root bucket
	freelist uint64
	pgid     uint64 // high-water mark: pages [0, pgid) are in use
	txid     uint64
}

// readBoltMeta decodes the meta page at off, or says why it is not one.
func readBoltMeta(f *os.File, off int64) (boltMeta, error) {
	var buf [boltPageHeader + 64]byte
	if _, err := f.ReadAt(buf[:], off); err != nil {
		return boltMeta{}, fmt.Errorf("read: %w", err)
	}
	m := buf[boltPageHeader:]
	le := binary.NativeEndian // bbolt writes its files in the machine's byte order
	switch {
	case le.Uint32(m[0:]) != boltMagic:
		return boltMeta{}, errors.New("no bbolt magic number")
	case le.Uint32(m[4:]) != boltVersion:
		return boltMeta{}, fmt.Errorf("format version %d, want %d", le.Uint32(m[4:]), boltVersion)
	}
	h := fnv.New64a()
	h.Write(m[:boltMetaSumLen])
	if h.Sum64() != le.Uint64(m[boltMetaSumLen:]) {
		return boltMeta{}, errors.New("checksum mismatch")
	}
	return boltMeta{
		pageSize: le.Uint32(m[8:]),
		root:     le.Uint64(m[16:]),
		freelist: le.Uint64(m[32:]),
		pgid:     le.Uint64(m[40:]),
		txid:     le.Uint64(m[48:]),
	}, nil
}

// CheckFile checks that the bbolt file at path can be opened and read
// without the process crashing, and says what is wrong if not. bbolt
// checks no more than the checksum of its two meta pages: a page cut off by
// truncation faults (SIGBUS) when read through its memory map, and a page
// overwritten with garbage makes it panic -- at Open, in a goroutine of its
// own, when it rebuilds the free list (the files of maos do not store one).
// Neither can be recovered from, so CheckFile looks first:
//
//   - both meta pages, read with pread: at least one must be valid (bbolt
//     falls back to the older one when the newer is torn: a warning);
//   - the file must reach the high-water mark of the current meta page
//     (a shorter file was truncated);
//   - every page of the tree, every key and every value (first and last
//     byte, so overflow pages too), read through a read-only bbolt handle
//     in a goroutine that turns a memory fault into a panic and recovers
//     it.
//
// It costs one read of the file's used pages, about what bbolt's own open
// spends rebuilding the free list. It does not checksum data: bbolt keeps
// no checksums of data pages, so bytes changed inside a value, with the
// page structure intact, go unnoticed.
//
// A missing or empty file is fine (bbolt creates it). Damage is returned as
// a *CorruptError (errors.Is ErrCorrupt); a file locked by another process
// past lockTimeout as an error wrapping bbolt's ErrTimeout. Warnings are
// things worth logging that do not stop the open.
func CheckFile(path string, lockTimeout time.Duration) (warnings []string, err error) {
	return checkFile(path, lockTimeout, true)
}

// CheckMeta is CheckFile without the walk of every page: the meta pages,
// the page size and the file's length only. It reads two pages, so it
// suits a file its last writer closed cleanly; CheckFile reads the whole
// file (half a minute for 3 GB on a cold cache).
func CheckMeta(path string) (warnings []string, err error) {
	return checkFile(path, 0, false)
}

// CheckAfterClose is CheckMeta when the file's last writer closed it
// cleanly (the caller knows), CheckFile otherwise: after a crash every
// page is read.
func CheckAfterClose(path string, lockTimeout time.Duration, cleanlyClosed bool) (warnings []string, err error) {
	return checkFile(path, lockTimeout, !cleanlyClosed)
}

func checkFile(path string, lockTimeout time.Duration, walk bool) (warnings []string, err error) {
	corrupt := func(format string, args ...any) error {
		return &CorruptError{Path: path, Reason: fmt.Sprintf(format, args...)}
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	size := info.Size()
	if size == 0 {
		f.Close()
		return nil, nil
	}

	m0, m1, err0, err1 := readBoltMetas(f, size)
	f.Close()
	if err0 != nil && err1 != nil {
		if size < 2*boltMinPageSize {
			return nil, corrupt("%d bytes: too short for a bbolt file", size)
		}
		return nil, corrupt("both meta pages are invalid (page 0: %v; page 1: %v)", err0, err1)
	}
	cur, curNo := m0, 0
	if err0 != nil || (err1 == nil && m1.txid > m0.txid) {
		cur, curNo = m1, 1
	}
	if err0 != nil || err1 != nil {
		bad, why := 0, err0
		if err1 != nil {
			bad, why = 1, err1
		}
		warnings = append(warnings, fmt.Sprintf("%s: meta page %d is invalid (%v); using meta page %d, transaction %d: "+
			"the last write before a crash may be lost", path, bad, why, curNo, cur.txid))
	}
	ps := uint64(cur.pageSize)
	if ps < boltMinPageSize || ps&(ps-1) != 0 {
		return warnings, corrupt("page size %d in meta page %d", ps, curNo)
	}
	if cur.pgid < 3 || cur.root < 2 || cur.root >= cur.pgid || (cur.freelist != boltNoFreelist && cur.freelist >= cur.pgid) {
		return warnings, corrupt("meta page %d: root page %d, free list page %d, high-water mark %d", curNo, cur.root, cur.freelist, cur.pgid)
	}
	if need := cur.pgid * ps; uint64(size) < need {
		return warnings, corrupt("truncated: %d bytes, but its pages reach byte %d (%d pages of %d bytes)", size, need, cur.pgid, ps)
	}
	if !walk {
		return warnings, nil
	}

	return warnings, walkFile(path, lockTimeout, cur.pgid*ps, corrupt)
}

// readBoltMetas reads the meta pages of f, size bytes, as bbolt finds
// them: page 0 at offset 0; page 1 one page further, the page size taken
// from page 0 or, if that is bad, found by trying each size bbolt
// supports.
func readBoltMetas(f *os.File, size int64) (m0, m1 boltMeta, err0, err1 error) {
	m0, err0 = readBoltMeta(f, 0)
	err1 = errors.New("no valid meta page at any page size")
	if err0 == nil {
		m1, err1 = readBoltMeta(f, int64(m0.pageSize))
		return m0, m1, err0, err1
	}
	for ps := int64(boltMinPageSize); ps <= 16<<20 && ps < size; ps <<= 1 {
		if m, err := readBoltMeta(f, ps); err == nil && int64(m.pageSize) == ps {
			return m0, m, err0, nil
		}
	}
	return m0, m1, err0, err1
}

// walkFile opens path read-only (waiting up to lockTimeout for its lock)
// and walks its pages, bytes long in all; a file bbolt cannot open or
// whose pages do not make a tree is corrupt.
func walkFile(path string, lockTimeout time.Duration, bytes uint64, corrupt func(string, ...any) error) error {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: lockTimeout})
	if err != nil {
		if errors.Is(err, bbolt.ErrTimeout) {
			return err
		}
		return corrupt("%v", err)
	}
	defer db.Close()
	// A leaf element takes at least 17 bytes: more keys than that means
	// the walk went round a cycle of pages.
	if reason := walkPages(db, int(bytes/17)); reason != "" {
		return corrupt("%s", reason)
	}
	return nil
}

// touched keeps the bytes walkPages reads from being optimized away.
var touched byte

// walkPages reads every page of db's tree, every key and every value, and
// returns what went wrong ("" if nothing did), including more than
// maxKeys keys. It runs in a goroutine of its own that turns a memory fault
// into a panic, and recovers that.
func walkPages(db *bbolt.DB, maxKeys int) string {
	done := make(chan string, 1)
	go func() {
		debug.SetPanicOnFault(true)
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Sprintf("reading its pages failed: %v", r)
			}
		}()
		var keys int
		var walk func(b *bbolt.Bucket, depth int) error
		walk = func(b *bbolt.Bucket, depth int) error {
			if depth > 64 {
				return errors.New("buckets nested more than 64 deep")
			}
			c := b.Cursor()
			for k, v := c.First(); k != nil; k, v = c.Next() {
				if keys++; keys > maxKeys {
					return fmt.Errorf("more than %d keys: its pages form a cycle", maxKeys)
				}
				touched ^= k[0] ^ k[len(k)-1]
				if v == nil {
					if child := b.Bucket(k); child != nil {
						if err := walk(child, depth+1); err != nil {
							return err
						}
					}
					continue
				}
				if len(v) > 0 {
					touched ^= v[0] ^ v[len(v)-1]
				}
			}
			return nil
		}
		err := db.View(func(tx *bbolt.Tx) error {
			return tx.ForEach(func(name []byte, b *bbolt.Bucket) error {
				return walk(b, 0)
			})
		})
		if err != nil {
			done <- fmt.Sprintf("reading its pages failed: %v", err)
			return
		}
		done <- ""
	}()
	return <-done
}

// SafeOpen runs open (a bbolt.Open of path, or something that does one),
// turning a panic of bbolt in this goroutine -- a page it finds
// inconsistent while it rebuilds the free list -- into a *CorruptError
// naming path. Run CheckFile first: it catches what would crash the
// process in ways no recover can.
func SafeOpen(path string, open func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &CorruptError{Path: path, Reason: fmt.Sprintf("bbolt failed opening it: %v", r)}
		}
	}()
	return open()
}
