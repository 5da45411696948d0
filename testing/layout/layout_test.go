package layout

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// tableFile is where the layout table lives, relative to the module root,
// and tableSection the heading of the section that holds it.
const (
	tableFile    = "DESIGN.md"
	tableSection = "## Layout"
	toCome       = "*(to come)*"
)

// wantHeader is the table's header row, cell by cell.
var wantHeader = []string{"package", "what lives there", "may import", "its tests may also import"}

// row is one package's row of the table.
type row struct {
	line        int    // 1-based line in tableFile
	pkg         string // import path under the module, e.g. "cluster/clustertest"
	toCome      bool   // the package does not exist yet
	imports     []string
	testImports []string
}

func (r row) String() string { return fmt.Sprintf("%s:%d (`%s`)", tableFile, r.line, r.pkg) }

// pkg is what `go list -json` says of one package.
type pkg struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

var backticked = regexp.MustCompile("`([^`]+)`")

// names returns the backticked names of a cell; "—" (or nothing) is none.
func names(cell string) []string {
	var out []string
	for _, m := range backticked.FindAllStringSubmatch(cell, -1) {
		out = append(out, strings.TrimSuffix(m[1], "/"))
	}
	return out
}

// parseTable reads the layout table: the first table after the line
// tableSection, up to the first line that is not a table row.
func parseTable(md string) ([]row, error) {
	lines := strings.Split(md, "\n")
	start := slices.Index(lines, tableSection)
	if start < 0 {
		return nil, fmt.Errorf("%s: no %q section", tableFile, tableSection)
	}
	i := start + 1
	for i < len(lines) && !strings.HasPrefix(lines[i], "|") {
		if strings.HasPrefix(lines[i], "## ") {
			return nil, fmt.Errorf("%s: no table in %q", tableFile, tableSection)
		}
		i++
	}
	if i+1 >= len(lines) {
		return nil, fmt.Errorf("%s: no table in %q", tableFile, tableSection)
	}
	if got := cells(lines[i]); !slices.Equal(got, wantHeader) {
		return nil, fmt.Errorf("%s:%d: the layout table's header is %q, want %q", tableFile, i+1, got, wantHeader)
	}
	var rows []row
	seen := map[string]int{}
	for i += 2; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
		c := cells(lines[i])
		if len(c) != len(wantHeader) {
			return nil, fmt.Errorf("%s:%d: %d cells, want %d", tableFile, i+1, len(c), len(wantHeader))
		}
		pkgs := names(c[0])
		if len(pkgs) != 1 {
			return nil, fmt.Errorf("%s:%d: the package cell %q names %d packages, want one", tableFile, i+1, c[0], len(pkgs))
		}
		if prev, dup := seen[pkgs[0]]; dup {
			return nil, fmt.Errorf("%s:%d: `%s` has a row already, at line %d", tableFile, i+1, pkgs[0], prev)
		}
		seen[pkgs[0]] = i + 1
		rows = append(rows, row{line: i + 1, pkg: pkgs[0], toCome: strings.Contains(c[0], toCome),
			imports: names(c[2]), testImports: names(c[3])})
	}
	return rows, nil
}

// cells splits a table line "| a | b |" into its trimmed cells.
func cells(line string) []string {
	parts := strings.Split(strings.TrimSpace(line), "|")
	if len(parts) < 3 {
		return nil
	}
	out := parts[1 : len(parts)-1]
	for i := range out {
		out[i] = strings.TrimSpace(out[i])
	}
	return out
}

// check holds the packages of module to the table and returns every
// problem, each naming the row (and the importer and import) at fault.
func check(module string, rows []row, pkgs []pkg) []string {
	var problems []string
	byName := map[string]int{}
	for i, r := range rows {
		byName[r.pkg] = i
	}
	// The table itself: each allowed import names a row, the may-import
	// ones a row above (so the layers point one way).
	for i, r := range rows {
		for _, imp := range r.imports {
			j, ok := byName[imp]
			switch {
			case !ok:
				problems = append(problems, fmt.Sprintf("row %s: may import `%s`, which has no row", r, imp))
			case j >= i:
				problems = append(problems, fmt.Sprintf("row %s: may import `%s`, whose row (%s) is not above it: the layers must point one way", r, imp, rows[j]))
			}
		}
		for _, imp := range r.testImports {
			if _, ok := byName[imp]; !ok {
				problems = append(problems, fmt.Sprintf("row %s: its tests may import `%s`, which has no row", r, imp))
			}
		}
	}
	local := func(path string) (string, bool) {
		if path == module {
			return ".", true
		}
		name, ok := strings.CutPrefix(path, module+"/")
		return name, ok
	}
	exists := map[string]bool{}
	for _, p := range pkgs {
		name, ok := local(p.ImportPath)
		if !ok {
			continue
		}
		exists[name] = true
		i, ok := byName[name]
		if !ok {
			problems = append(problems, fmt.Sprintf("package %s has no row in the layout table of %s: add one saying what it may import", name, tableFile))
			continue
		}
		r := rows[i]
		if r.toCome {
			problems = append(problems, fmt.Sprintf("row %s: the package exists now: take %s off its row", r, toCome))
		}
		report := func(imports []string, allowed []string, where string) {
			for _, imp := range imports {
				dep, ok := local(imp)
				if !ok || dep == name || slices.Contains(allowed, dep) {
					continue
				}
				problems = append(problems, fmt.Sprintf("%s imports %s%s, which its row %s does not allow (may import: %s; its tests also: %s)",
					name, dep, where, r, list(r.imports), list(r.testImports)))
			}
		}
		report(p.Imports, r.imports, "")
		report(slices.Concat(p.TestImports, p.XTestImports), slices.Concat(r.imports, r.testImports), " in its tests")
	}
	for _, r := range rows {
		if !exists[r.pkg] && !r.toCome {
			problems = append(problems, fmt.Sprintf("row %s: no such package; mark the row %s or remove it", r, toCome))
		}
	}
	return problems
}

func list(s []string) string {
	if len(s) == 0 {
		return "—"
	}
	return strings.Join(s, ", ")
}

// goList runs `go list -json` over every package of the module rooted at
// dir, tests' imports included.
func goList(t *testing.T, dir string) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,TestImports,XTestImports", "./...")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./... in %s: %v\n%s", dir, err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatalf("go list ./... in %s listed no package", dir)
	}
	return pkgs
}

// moduleRoot returns the module's directory and path.
func moduleRoot(t *testing.T) (dir, path string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}\n{{.Path}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	dir, path, _ = strings.Cut(strings.TrimSpace(string(out)), "\n")
	return dir, path
}

// TestLayout holds every package of the module, and its tests, to the
// layout table.
func TestLayout(t *testing.T) {
	dir, module := moduleRoot(t)
	md, err := os.ReadFile(filepath.Join(dir, tableFile))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := parseTable(string(md))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range check(module, rows, goList(t, dir)) {
		t.Error(p)
	}
}
