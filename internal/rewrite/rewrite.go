// Package rewrite is the one switch that refreshes expected outputs in
// tests: `go test ./PKG -rewrite`. The flag is datadriven's (its scripts
// under testdata/ are golden files too), so every package's goldens,
// datadriven or not, are rewritten by the same word.
package rewrite

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	// Defines the -rewrite flag this package reads.
	_ "github.com/cockroachdb/datadriven"
)

// Requested reports whether the test binary was run with -rewrite.
func Requested() bool {
	f := flag.Lookup("rewrite")
	if f == nil {
		return false
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return false
	}
	v, _ := g.Get().(bool)
	return v
}

// DocTable holds a table a test computes to its golden file and to the
// block of a doc that shows it, between the lines
//
//	<!-- BEGIN name (command) -->
//	<!-- END name -->
//
// Under -rewrite it writes both first; then a table that differs from
// either fails the test, naming the command that refreshes them.
func DocTable(t testing.TB, golden, doc, name, command, table string) {
	t.Helper()
	begin, end := "<!-- BEGIN "+name+" ("+command+") -->\n", "<!-- END "+name+" -->"
	if Requested() {
		if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(table), 0o644); err != nil {
			t.Fatal(err)
		}
		d, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		i, j := bytes.Index(d, []byte(begin)), bytes.Index(d, []byte(end))
		if i < 0 || j < i {
			t.Fatalf("%s lacks the markers %q and %q", doc, begin, end)
		}
		out := append(append(append([]byte{}, d[:i+len(begin)]...), table...), d[j:]...)
		if err := os.WriteFile(doc, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v: run %s to create it", err, command)
	}
	if string(want) != table {
		t.Errorf("%s: the table changed; if intended, run %s\ngot:\n%s", golden, command, table)
	}
	d, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(d, []byte(begin+table+end)) {
		t.Errorf("%s shows another table than %s; run %s", doc, golden, command)
	}
}
