// Package rewrite is the one switch that refreshes expected outputs in
// tests: `go test ./PKG -rewrite`. The flag is datadriven's (its scripts
// under testdata/ are golden files too), so every package's goldens,
// datadriven or not, are rewritten by the same word.
package rewrite

import (
	"flag"

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
