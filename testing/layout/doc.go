// Package layout holds the code to the layout table of the repository's
// DESIGN.md: its test lists every package of the module with `go list`
// and fails when a package imports a maos package its row does not allow.
// The table is the one source of truth. Its tests also hold every
// function outside tests and tables to 80 lines, every relative link of
// the .md files to a file and heading that exist, and README.md to 12 KB.
// The package is tests only.
package layout
