package layout

import (
	"slices"
	"strings"
	"testing"
)

const testModule = "example.com/m"

// testTable is a small layout table: b uses a, its tests the helper h.
const testTable = "# m\n\nintro\n\n" + tableSection + `

text before the table

| package | what lives there | may import | its tests may also import |
|---|---|---|---|
| ` + "`a`" + ` | pure | — | — |
| ` + "`b/`" + ` | uses a | ` + "`a`" + ` | ` + "`b/h`" + ` |
| ` + "`b/h`" + ` | b's test helper | ` + "`a`, `b`" + ` | — |
| ` + "`z`" + ` *(to come)* | later | ` + "`a`" + ` | — |

## Next
`

// testPkgs is a module that keeps testTable.
func testPkgs() []pkg {
	return []pkg{
		{ImportPath: testModule + "/a", Imports: []string{"fmt"}},
		{ImportPath: testModule + "/b", Imports: []string{testModule + "/a", "github.com/other/x"},
			TestImports: []string{"testing"}, XTestImports: []string{testModule + "/b", testModule + "/b/h"}},
		{ImportPath: testModule + "/b/h", Imports: []string{testModule + "/b"}},
	}
}

func TestParseTable(t *testing.T) {
	rows, err := parseTable(testTable)
	if err != nil {
		t.Fatal(err)
	}
	want := []row{
		{line: 11, pkg: "a"},
		{line: 12, pkg: "b", imports: []string{"a"}, testImports: []string{"b/h"}},
		{line: 13, pkg: "b/h", imports: []string{"a", "b"}},
		{line: 14, pkg: "z", toCome: true, imports: []string{"a"}},
	}
	if len(rows) != len(want) {
		t.Fatalf("rows = %+v, want %+v", rows, want)
	}
	for i, r := range rows {
		w := want[i]
		if r.line != w.line || r.pkg != w.pkg || r.toCome != w.toCome || !slices.Equal(r.imports, w.imports) || !slices.Equal(r.testImports, w.testImports) {
			t.Errorf("row %d = %+v, want %+v", i, r, w)
		}
	}
}

func TestParseTableRefusals(t *testing.T) {
	row := func(cells ...string) string { return "| " + strings.Join(cells, " | ") + " |\n" }
	head := tableSection + "\n\n" + row(wantHeader...) + "|---|---|---|---|\n"
	for _, tc := range []struct {
		name, md, want string
	}{
		{"no section", "# m\n\n## Other\n", `no "## Layout" section`},
		{"no table", tableSection + "\n\ntext\n\n## Next\n| a |\n", "no table in"},
		{"no table at the end", tableSection + "\n\ntext\n", "no table in"},
		{"other header", tableSection + "\n\n" + row("folder", "what", "imports", "tests") + "|---|---|---|---|\n", "the layout table's header is"},
		{"short row", head + row("`a`", "pure", "—"), "3 cells, want 4"},
		{"two packages in a row", head + row("`a`, `b`", "pure", "—", "—"), "names 2 packages, want one"},
		{"no package in a row", head + row("a", "pure", "—", "—"), "names 0 packages, want one"},
		{"two rows for a package", head + row("`a`", "pure", "—", "—") + row("`a/`", "again", "—", "—"), "`a` has a row already, at line 5"},
	} {
		if _, err := parseTable(tc.md); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: parseTable error %v, want it to say %q", tc.name, err, tc.want)
		}
	}
}

// TestCheck breaks a module that keeps its table in each way check must
// catch, one at a time, and requires exactly that problem, worded to name
// the importer, the import and the row.
func TestCheck(t *testing.T) {
	rows, err := parseTable(testTable)
	if err != nil {
		t.Fatal(err)
	}
	if p := check(testModule, rows, testPkgs()); len(p) != 0 {
		t.Fatalf("a module that keeps the table: %q", p)
	}
	for _, tc := range []struct {
		name  string
		rows  func([]row) []row
		pkgs  func([]pkg) []pkg
		wants []string
	}{
		{"a forbidden import", nil, func(p []pkg) []pkg {
			p[0].Imports = append(p[0].Imports, testModule+"/b")
			return p
		}, []string{"a imports b, which its row DESIGN.md:11 (`a`) does not allow (may import: —; its tests also: —)"}},
		{"a test helper imported outside tests", nil, func(p []pkg) []pkg {
			p[1].Imports = append(p[1].Imports, testModule+"/b/h")
			return p
		}, []string{"b imports b/h, which its row DESIGN.md:12 (`b`) does not allow (may import: a; its tests also: b/h)"}},
		{"a forbidden import in tests", nil, func(p []pkg) []pkg {
			p[0].TestImports = append(p[0].TestImports, testModule+"/b/h")
			return p
		}, []string{"a imports b/h in its tests, which its row DESIGN.md:11 (`a`)"}},
		{"a package without a row", nil, func(p []pkg) []pkg {
			return append(p, pkg{ImportPath: testModule + "/c"})
		}, []string{"package c has no row in the layout table of DESIGN.md"}},
		{"a package whose row says to come", nil, func(p []pkg) []pkg {
			return append(p, pkg{ImportPath: testModule + "/z", Imports: []string{testModule + "/a"}})
		}, []string{"row DESIGN.md:14 (`z`): the package exists now: take *(to come)* off its row"}},
		{"a row with no package", func(r []row) []row {
			return append(r, row{line: 20, pkg: "gone"})
		}, nil, []string{"row DESIGN.md:20 (`gone`): no such package; mark the row *(to come)* or remove it"}},
		{"an allowed import with no row", func(r []row) []row {
			r[1].imports = append(r[1].imports, "nowhere")
			return r
		}, nil, []string{"row DESIGN.md:12 (`b`): may import `nowhere`, which has no row"}},
		{"an allowed test import with no row", func(r []row) []row {
			r[0].testImports = append(r[0].testImports, "nowhere")
			return r
		}, nil, []string{"row DESIGN.md:11 (`a`): its tests may import `nowhere`, which has no row"}},
		{"an allowed import from below", func(r []row) []row {
			r[0].imports = append(r[0].imports, "b")
			return r
		}, nil, []string{"row DESIGN.md:11 (`a`): may import `b`, whose row (DESIGN.md:12 (`b`)) is not above it"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows, err := parseTable(testTable)
			if err != nil {
				t.Fatal(err)
			}
			pkgs := testPkgs()
			if tc.rows != nil {
				rows = tc.rows(rows)
			}
			if tc.pkgs != nil {
				pkgs = tc.pkgs(pkgs)
			}
			got := check(testModule, rows, pkgs)
			if len(got) != len(tc.wants) {
				t.Fatalf("problems = %q, want %d: %q", got, len(tc.wants), tc.wants)
			}
			for i, w := range tc.wants {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %q, want it to say %q", got[i], w)
				}
			}
		})
	}
}
