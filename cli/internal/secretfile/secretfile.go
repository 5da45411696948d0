// Package secretfile reads a secret kept alone on one line of a file: the
// admin token (maosd --admin-token-file), the gossip key (maosd
// --gossip-key-file) and an agent's bearer token (maosctl --token-file).
// Both programs read these files the same way, so it lives beside them
// rather than in either; no package outside cli/ reads secrets from files.
package secretfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"unicode"
)

// ErrEmpty is wrapped by Read's error for a file with no secret in it.
// How to make the secret depends on which one it is (random bytes for
// the admin token and the gossip key, 'maosctl token create' for an
// agent's token), so the caller adds that.
var ErrEmpty = errors.New("is empty")

// MaxBytes bounds what is read of a secret file, so a wrong path (a log, a
// binary) fails fast instead of becoming a huge header.
const MaxBytes = 4 << 10

// Read returns the secret kept alone on one line of the file at path
// (surrounding blanks and the final newline trimmed) and the file's mode,
// so the caller can warn about one other users may read. It refuses a
// path that is not a regular file, a file over MaxBytes, an empty file
// (ErrEmpty, for the caller to say how its secret is made),
// more than one line, and a secret with blanks or control characters; the
// error names path and says what a secret file holds.
func Read(path string) (string, fs.FileMode, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", 0, err
	}
	if !st.Mode().IsRegular() {
		return "", 0, fmt.Errorf("%s is not a regular file", path)
	}
	raw, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return "", 0, fmt.Errorf("read %s: %w", path, err)
	}
	if len(raw) > MaxBytes {
		return "", 0, fmt.Errorf("%s is larger than %d bytes; a token file holds one token on one line", path, MaxBytes)
	}
	secret := strings.TrimSpace(string(raw))
	if secret == "" {
		return "", 0, fmt.Errorf("%s %w", path, ErrEmpty)
	}
	if strings.ContainsAny(secret, "\r\n") {
		return "", 0, fmt.Errorf("%s holds more than one line; a token file holds one token on one line", path)
	}
	if i := strings.IndexFunc(secret, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }); i >= 0 {
		return "", 0, fmt.Errorf("%s: the token has a blank or control character at byte %d; tokens are printable, without spaces", path, i)
	}
	return secret, st.Mode(), nil
}
