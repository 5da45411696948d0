package secretfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// write puts content in a new file, mode 0600, and returns its path.
func write(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRead(t *testing.T) {
	p := write(t, "  s3cret-token\r\n")
	if err := os.Chmod(p, 0o640); err != nil {
		t.Fatal(err)
	}
	secret, mode, err := Read(p)
	if err != nil || secret != "s3cret-token" || mode.Perm() != 0o640 {
		t.Errorf("Read(%s) = %q, %v, %v; want the trimmed secret and mode 0640", p, secret, mode, err)
	}
}

func TestReadRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, path, want string
	}{
		{"missing", filepath.Join(t.TempDir(), "missing"), "no such file"},
		{"a directory", t.TempDir(), "not a regular file"},
		{"empty", write(t, ""), "is empty"},
		{"blanks only", write(t, " \n\t\n"), "is empty"},
		{"two lines", write(t, "first\nsecond"), "more than one line"},
		{"a blank inside", write(t, "tok en"), "blank or control character at byte 3"},
		{"a control character", write(t, "tok\x00en"), "blank or control character at byte 3"},
		{"too large", write(t, strings.Repeat("a", MaxBytes+1)), "larger than 4096 bytes"},
	} {
		secret, _, err := Read(tc.path)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Read = %q, %v; want an error saying %q", tc.name, secret, err, tc.want)
		}
	}
	if secret, _, err := Read(write(t, strings.Repeat("a", MaxBytes))); err != nil || len(secret) != MaxBytes {
		t.Errorf("a secret of exactly MaxBytes: %d bytes, %v", len(secret), err)
	}
}
