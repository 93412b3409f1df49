package main

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const modulePath = "github.com/steplab/steplab"

// floors are the architecture's layers (docs/architecture.md): a package
// may import packages on a lower floor, or packages of its own top-level
// folder, and nothing else of the project. datasets and model share the
// ground floor and import no other part; fit and sim share the first and do
// not know each other; capture and replay sit above sim; cmd is the top and
// nothing imports it.
var floors = map[string]int{
	"datasets": 0, "model": 0,
	"fit": 1, "sim": 1,
	"capture": 2, "replay": 2,
	"cmd": 3,
}

// The import graph has no back arrows: every import of every non-test Go
// file in the repository points down a floor or stays in its folder.
func TestImportsPointDown(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	seen := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && path != root) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		top := strings.Split(filepath.ToSlash(rel), "/")[0]
		from, ok := floors[top]
		if !ok {
			t.Errorf("%s: Go code outside the architecture's folders (%s)", rel, top)
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		seen++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !strings.HasPrefix(p, modulePath+"/") {
				continue
			}
			to := strings.Split(strings.TrimPrefix(p, modulePath+"/"), "/")[0]
			if to == top {
				continue
			}
			if floors[to] >= from {
				t.Errorf("%s imports %s: %s (floor %d) may not import %s (floor %d)", rel, p, top, from, to, floors[to])
			}
		}
		return nil
	})
	require.NoError(t, err)
	assert.Greater(t, seen, 100, "the walk found the repository's Go files")
	_, err = os.Stat(filepath.Join(root, "go.mod"))
	require.NoError(t, err, "the walk started at the module root")
}
