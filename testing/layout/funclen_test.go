package layout

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxFuncLines is the longest a function may be, counted from its `func`
// line to its closing brace, outside tests and tables.
const maxFuncLines = 80

// tables are the functions that may be longer than maxFuncLines, keyed
// by slash path from the module root and function name ("Recv.Name" for
// a method), each with why: they are tables, read row by row.
var tables = map[string]string{
	"transport/routes.go:Server.routes":       "the route table, one row per route",
	"cli/maosd/maosd.go:App":                  "urfave/cli table of maosd's commands and flags",
	"cli/maosctl/maosctl.go:App":              "urfave/cli table of maosctl's commands and global flags",
	"cli/maosctl/artifact.go:artifactCommand": "urfave/cli table of the artifact subcommands and flags",
	"cli/maosctl/channel.go:channelCommand":   "urfave/cli table of the channel subcommands and flags",
}

// longFunc is one function over maxFuncLines.
type longFunc struct {
	key   string // "file:function", as in tables
	lines int
}

func (f longFunc) String() string { return fmt.Sprintf("%s:%d lines", f.key, f.lines) }

// longFuncs parses every non-test .go file under root, skipping the
// top-level testing/ tree, testdata and hidden directories, and returns
// each function longer than max, in file order.
func longFuncs(root string, max int) ([]longFunc, error) {
	fset := token.NewFileSet()
	var out []longFunc
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if rel == "testing" || name == "testdata" || name == "vendor" ||
				(rel != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_"))) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			if n > max {
				out = append(out, longFunc{key: rel + ":" + funcName(fd), lines: n})
			}
		}
		return nil
	})
	return out, err
}

// funcName is a declaration's name, "Recv.Name" for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// checkLengths returns a problem for each long function not in allowed,
// and for each allowed function that is no longer long (or gone), so the
// allowlist stays true.
func checkLengths(long []longFunc, allowed map[string]string) []string {
	var problems []string
	seen := map[string]bool{}
	for _, f := range long {
		seen[f.key] = true
		if _, ok := allowed[f.key]; !ok {
			problems = append(problems, fmt.Sprintf("%s: over %d lines; split it (or, if it is a table, add it to tables)", f, maxFuncLines))
		}
	}
	for key := range allowed {
		if !seen[key] {
			problems = append(problems, fmt.Sprintf("%s: in tables but not over %d lines (or gone); drop it from tables", key, maxFuncLines))
		}
	}
	slices.Sort(problems)
	return problems
}

func TestCheckLengths(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, src string) {
		t.Helper()
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	body := func(name string, lines int) string { // a function of exactly lines lines
		return "func " + name + " {\n" + strings.Repeat("\t_ = 0\n", lines-2) + "}\n"
	}
	write("a/a.go", "package a\n\n"+body("short()", 4)+body("long()", 5)+"type T struct{}\n\n"+body("(t *T) M()", 6))
	write("a/a_test.go", "package a\n\n"+body("longTest()", 9))
	write("testing/h/h.go", "package h\n\n"+body("helper()", 9))
	write("a/testdata/x.go", "package x\n\n"+body("data()", 9))
	write("b/b.go", "package b\n\n"+body("table()", 7))

	long, err := longFuncs(dir, 4)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, f := range long {
		keys = append(keys, f.String())
	}
	want := []string{"a/a.go:long:5 lines", "a/a.go:T.M:6 lines", "b/b.go:table:7 lines"}
	if !slices.Equal(keys, want) {
		t.Fatalf("longFuncs = %q, want %q", keys, want)
	}

	got := checkLengths(long, map[string]string{"b/b.go:table": "a table", "b/b.go:gone": "was a table"})
	if len(got) != 3 ||
		!strings.HasPrefix(got[0], "a/a.go:T.M:6 lines: over") ||
		!strings.HasPrefix(got[1], "a/a.go:long:5 lines: over") ||
		!strings.HasPrefix(got[2], "b/b.go:gone: in tables") {
		t.Fatalf("checkLengths = %q", got)
	}
}

// TestFuncLength holds every function of the module, outside tests, the
// testing/ tree and the tables, to maxFuncLines lines.
func TestFuncLength(t *testing.T) {
	dir, _ := moduleRoot(t)
	long, err := longFuncs(dir, maxFuncLines)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range checkLengths(long, tables) {
		t.Error(p)
	}
}
