package layout

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// readmeMax is the most README.md may weigh: what a newcomer reads in five
// minutes; the rest lives in docs/.
const readmeMax = 12 << 10

// TestReadme keeps README.md short and holding the two commands a
// newcomer runs (.ci/run runs the second).
func TestReadme(t *testing.T) {
	dir, _ := moduleRoot(t)
	b, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > readmeMax {
		t.Errorf("README.md is %d bytes, over %d: move the detail to docs/", len(b), readmeMax)
	}
	for _, cmd := range []string{"make demo", "make test"} {
		if !strings.Contains(string(b), cmd) {
			t.Errorf("README.md does not say %q", cmd)
		}
	}
}

// TestDocsLinks fails naming file:line for a relative link of any .md file
// of the repository whose target does not exist, or whose #anchor matches
// no heading of the .md file it points into.
func TestDocsLinks(t *testing.T) {
	dir, _ := moduleRoot(t)
	files, err := markdownFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(files, "README.md") {
		t.Fatalf("no README.md among %d .md files of %s", len(files), dir)
	}
	for _, bad := range brokenLinks(dir, files) {
		t.Error(bad)
	}
}

// TestBrokenLinks checks the checker on a scratch tree.
func TestBrokenLinks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", "# maos\n\nSee [the guide](docs/GUIDE.md#the-gate-on-coding-agents-tool-calls), [x](docs/GUIDE.md#nope),\n"+
		"[gone](docs/GONE.md), [web](https://example.com/x), ![pic](docs/pic.png), [here](#maos) and [there](#missing).\n"+
		"```sh\n# not a heading\n[not a link](nowhere.md)\n```\n`[code](nowhere.md)`\n")
	write("docs/GUIDE.md", "# Guide\n\n## The gate on coding agents' tool calls\n\n## Two\n\n## Two\n\n[up](../README.md#maos) [dup](#two-1) [bad](#two-2)\n")
	write("docs/pic.png", "")
	files, err := markdownFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := brokenLinks(dir, files)
	want := []string{
		"README.md:3: docs/GUIDE.md#nope: no heading docs/GUIDE.md#nope",
		"README.md:4: docs/GONE.md: no such file docs/GONE.md",
		"README.md:4: #missing: no heading README.md#missing",
		"docs/GUIDE.md:9: #two-2: no heading docs/GUIDE.md#two-2",
	}
	if !slices.Equal(got, want) {
		t.Errorf("broken links:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// markdownFiles lists the .md files under dir, slash-separated and relative
// to it, leaving out hidden directories.
func markdownFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != dir && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, err := filepath.Rel(dir, p)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	return files, err
}

var (
	linkRE     = regexp.MustCompile(`\[[^\]]*\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)
	codeSpanRE = regexp.MustCompile("`[^`]*`")
	headingRE  = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
)

// mdLine is one line of a .md file outside its fenced code blocks.
type mdLine struct {
	n    int
	text string
}

// prose is the lines of md outside fenced code blocks.
func prose(md string) []mdLine {
	var out []mdLine
	fence := ""
	for i, line := range strings.Split(md, "\n") {
		trim := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trim, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trim, "```") || strings.HasPrefix(trim, "~~~") {
			fence = trim[:3]
			continue
		}
		out = append(out, mdLine{i + 1, line})
	}
	return out
}

// slug is GitHub's anchor for a heading: lower case, markup and
// punctuation other than '-' and '_' dropped, spaces to '-'.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors is the set of heading anchors of md, repeats numbered -1, -2, …
// as GitHub numbers them.
func anchors(md string) map[string]bool {
	set := map[string]bool{}
	seen := map[string]int{}
	for _, l := range prose(md) {
		m := headingRE.FindStringSubmatch(l.text)
		if m == nil {
			continue
		}
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			set[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			set[s] = true
		}
		seen[s]++
	}
	return set
}

// brokenLinks is every relative link of files (relative to dir) whose
// target or anchor is missing, as "file:line: link: why".
func brokenLinks(dir string, files []string) []string {
	var bad []string
	anchorsOf := map[string]map[string]bool{}
	anchorsIn := func(file string) map[string]bool {
		if a, ok := anchorsOf[file]; ok {
			return a
		}
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err == nil {
			anchorsOf[file] = anchors(string(b))
		}
		return anchorsOf[file]
	}
	for _, file := range files {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", file, err))
			continue
		}
		for _, l := range prose(string(b)) {
			for _, m := range linkRE.FindAllStringSubmatch(codeSpanRE.ReplaceAllString(l.text, ""), -1) {
				if why := checkLink(dir, file, m[1], anchorsIn); why != "" {
					bad = append(bad, fmt.Sprintf("%s:%d: %s: %s", file, l.n, m[1], why))
				}
			}
		}
	}
	return bad
}

// checkLink says what is wrong with link, found in file, or "".
func checkLink(dir, file, link string, anchorsIn func(string) map[string]bool) string {
	if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
		return ""
	}
	target, anchor, _ := strings.Cut(link, "#")
	switch {
	case target == "":
		target = file
	case strings.HasPrefix(target, "/"):
		target = strings.TrimPrefix(target, "/")
	default:
		target = filepath.ToSlash(filepath.Join(filepath.Dir(file), target))
	}
	if _, err := os.Stat(filepath.Join(dir, target)); err != nil {
		return "no such file " + target
	}
	if anchor != "" && strings.HasSuffix(target, ".md") && !anchorsIn(target)[anchor] {
		return "no heading " + target + "#" + anchor
	}
	return ""
}
