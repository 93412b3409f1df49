package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const modulePath = "github.com/steplab/steplab"

// floors are the architecture's layers (docs/architecture.md): a package
// may import packages on a lower floor, or packages of its own part (the
// longest key that prefixes its path), and nothing else of the project.
// internal, the basement, holds helpers every floor may use (YAML
// documents under a budget, the figures' style, the files in flight) and
// imports nothing of the project. datasets (the data contract) and catalog
// (what a GPU and an LLM are) share the ground floor and import no other
// part; catalog/manifest (a manifest's sections checked against the
// catalogue) stands on both, and fpm (what a step costs; fpm/opdb reads
// kernel databases) on the catalogue; features (a steps row to FPM
// features) and pricing (the one place a spec becomes models) stand on
// those; fit and sim share the next floor and do not know each other;
// scenario (a YAML document or a manifest to a plan and a run) stands on
// sim; capture, replay and workflow (stage graphs and the what-if
// scenarios over them) sit above it; the planner searches what-if placements, a
// sweep runs scenarios and plans over a grid, the report renders all of
// them; cmd is the top and nothing imports it.
var floors = map[string]float64{
	"internal": -1,
	"datasets": 0, "catalog": 0,
	"catalog/manifest": 0.5, "fpm": 0.5,
	"features": 1, "pricing": 1,
	"fit": 2, "sim": 2,
	"scenario": 2.5,
	"capture":  3, "replay": 3, "workflow": 3,
	"planner": 3.5,
	"sweep":   4,
	"report":  5,
	"cmd":     6,
}

// part is the key of floors a package path (relative to the module)
// belongs to.
func part(rel string) (string, bool) {
	best := ""
	for k := range floors {
		if (rel == k || strings.HasPrefix(rel, k+"/")) && len(k) > len(best) {
			best = k
		}
	}
	return best, best != ""
}

// walkGoFiles calls visit with the path (relative to the module root) of
// every non-test Go file in the repository and the file parsed with mode
// (its positions in fset), and checks that the walk saw the repository.
func walkGoFiles(t *testing.T, mode parser.Mode, visit func(rel string, fset *token.FileSet, f *ast.File)) {
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
		f, err := parser.ParseFile(fset, path, nil, mode)
		if err != nil {
			return err
		}
		seen++
		visit(filepath.ToSlash(rel), fset, f)
		return nil
	})
	require.NoError(t, err)
	assert.Greater(t, seen, 100, "the walk found the repository's Go files")
	_, err = os.Stat(filepath.Join(root, "go.mod"))
	require.NoError(t, err, "the walk started at the module root")
}

// unreachable are the rules the floors alone do not say: a part that may
// not depend on another even through a third. sim stands above pricing
// but is built from plain plans: a plan carries the priced models
// (fpm.Models), and specs are priced above it (package scenario).
var unreachable = map[string][]string{
	"sim": {"pricing"},
}

// The import graph has no back arrows: every import of every non-test Go
// file in the repository points down a floor or stays in its folder, and
// no part reaches one that unreachable forbids it, directly or not.
func TestImportsPointDown(t *testing.T) {
	graph := map[string]map[string]bool{} // package → the module's packages it imports
	walkGoFiles(t, parser.ImportsOnly, func(rel string, _ *token.FileSet, f *ast.File) {
		dir := path.Dir(rel)
		from, ok := part(dir)
		if !ok {
			t.Errorf("%s: Go code outside the architecture's folders", rel)
			return
		}
		if graph[dir] == nil {
			graph[dir] = map[string]bool{}
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !strings.HasPrefix(p, modulePath+"/") {
				continue
			}
			p = strings.TrimPrefix(p, modulePath+"/")
			graph[dir][p] = true
			to, _ := part(p)
			if to != from && floors[to] >= floors[from] {
				t.Errorf("%s imports %s: %s (floor %g) may not import %s (floor %g)", rel, p, from, floors[from], to, floors[to])
			}
		}
	})
	for from, forbidden := range unreachable {
		require.Contains(t, graph, from, "the walk found %s", from)
		for pkg := range graph {
			if p, _ := part(pkg); p != from {
				continue
			}
			for dep, via := range reach(graph, pkg) {
				if to, _ := part(dep); slices.Contains(forbidden, to) {
					t.Errorf("%s reaches %s (through %s): %s may not depend on %s", pkg, dep, via, from, to)
				}
			}
		}
	}
}

// reach is every package pkg depends on, each with the package that
// imports it on the first path found.
func reach(graph map[string]map[string]bool, pkg string) map[string]string {
	via := map[string]string{}
	queue := []string{pkg}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, dep := range slices.Sorted(maps.Keys(graph[p])) {
			if _, seen := via[dep]; !seen && dep != pkg {
				via[dep] = p
				queue = append(queue, dep)
			}
		}
	}
	return via
}

// unsafeHome is the one package whose code may import unsafe: the
// columnar Parquet codec, which reads and writes rows through field
// offsets. Anywhere else a pointer trick would be a second, unreviewed
// home of memory-unsafe code.
const unsafeHome = "datasets/internal/pq"

// Only the Parquet codec imports unsafe.
func TestUnsafeOnlyInCodec(t *testing.T) {
	homes := 0
	walkGoFiles(t, parser.ImportsOnly, func(rel string, _ *token.FileSet, f *ast.File) {
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p != "unsafe" {
				continue
			}
			if path.Dir(rel) != unsafeHome {
				t.Errorf("%s imports unsafe: only %s may (move the code there, behind its API)", rel, unsafeHome)
				continue
			}
			homes++
		}
	})
	assert.Positive(t, homes, "the codec itself imports unsafe (the walk reads imports)")
}

// maxFuncLines is the longest a function may be, from its func keyword to
// its closing brace: a longer one is split by role (read, check, convert,
// write; one function per figure or message kind), not into fragments.
const maxFuncLines = 120

// funcName is a function's name as the test reports it: Name, or
// (Recv).Name for a method.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	recv := fn.Recv.List[0].Type
	star := ""
	if p, ok := recv.(*ast.StarExpr); ok {
		star, recv = "*", p.X
	}
	switch r := recv.(type) {
	case *ast.IndexExpr: // a generic receiver T[P]
		recv = r.X
	case *ast.IndexListExpr:
		recv = r.X
	}
	id, _ := recv.(*ast.Ident)
	if id == nil {
		return fn.Name.Name
	}
	if star != "" {
		return "(" + star + id.Name + ")." + fn.Name.Name
	}
	return id.Name + "." + fn.Name.Name
}

// No hand-written function of the repository is over maxFuncLines lines.
func TestFunctionsShort(t *testing.T) {
	funcs := 0
	walkGoFiles(t, parser.ParseComments, func(rel string, fset *token.FileSet, f *ast.File) {
		if ast.IsGenerated(f) {
			return
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			funcs++
			lines := fset.Position(fn.Body.Rbrace).Line - fset.Position(fn.Pos()).Line + 1
			if lines > maxFuncLines {
				t.Errorf("%s %s: %d lines, at most %d: split it by role (read and check, build, convert, write; one function per kind), not into fragments", rel, funcName(fn), lines, maxFuncLines)
			}
		}
	})
	assert.Greater(t, funcs, 1000, "the walk read the functions")
}

// documentReaders are the packages that read a document or a manifest:
// sim and sim/cluster are built from plain plans (package scenario makes
// them) and import none of them.
var documentReaders = []string{
	modulePath + "/internal/yamldoc", // YAML documents
	"go.yaml.in/yaml/v3",
	modulePath + "/catalog/manifest", // a manifest's sections to models
}

// The engine, the cluster and the rest of sim/ never read a YAML
// document, a manifest or a spec string: no import of a document reader
// and no datasets.ReadManifest (and, TestImportsPointDown says, nothing of
// package pricing, where a spec becomes models).
func TestSimReadsNoDocuments(t *testing.T) {
	fset := token.NewFileSet()
	seen := 0
	err := filepath.WalkDir(filepath.Join("..", "..", "sim"), func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && d.Name() == "testdata":
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go"):
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		seen++
		names := map[string]string{} // local name → import path
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			assert.NotContains(t, documentReaders, p, "%s imports %s", path, p)
			name := p[strings.LastIndex(p, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			names[name] = p
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok {
				checkSimSelector(t, fset, names[x.Name], sel)
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
	assert.Greater(t, seen, 40, "the walk found sim's files, sim/cluster's among them")
}

// checkSimSelector refuses, in sim/, a read of a manifest.
func checkSimSelector(t *testing.T, fset *token.FileSet, pkg string, sel *ast.SelectorExpr) {
	if pkg == modulePath+"/datasets" {
		assert.NotEqual(t, "ReadManifest", sel.Sel.Name, "%s reads a manifest: package scenario does", fset.Position(sel.Pos()))
	}
}

// The picture of floors in docs/architecture.md ("Import direction") is the
// code's: line by line from the bottom, the packages that stand on floor
// 0, 1, …, where a package stands one floor above the highest package of
// the project its non-test files import.
func TestArchitectureFloors(t *testing.T) {
	graph := map[string][]string{}
	walkGoFiles(t, parser.ImportsOnly, func(rel string, _ *token.FileSet, f *ast.File) {
		dir := path.Dir(rel)
		if _, ok := graph[dir]; !ok {
			graph[dir] = nil
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(p, modulePath+"/") {
				graph[dir] = append(graph[dir], strings.TrimPrefix(p, modulePath+"/"))
			}
		}
	})
	floor := map[string]int{}
	var of func(pkg string) int
	of = func(pkg string) int {
		if f, ok := floor[pkg]; ok {
			return f
		}
		f := 0
		for _, dep := range graph[pkg] {
			f = max(f, of(dep)+1)
		}
		floor[pkg] = f
		return f
	}
	var want [][]string
	for _, pkg := range slices.Sorted(maps.Keys(graph)) {
		f := of(pkg)
		for len(want) <= f {
			want = append(want, nil)
		}
		want[f] = append(want[f], pkg)
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "architecture.md"))
	require.NoError(t, err)
	doc := string(b)
	i := strings.Index(doc, "## Import direction")
	require.GreaterOrEqual(t, i, 0, "docs/architecture.md has its Import direction section")
	block := strings.SplitN(strings.SplitN(doc[i:], "```\n", 2)[1], "```", 2)[0]
	lines := strings.Split(strings.TrimSpace(block), "\n")
	var got [][]string
	for _, l := range slices.Backward(lines) {
		got = append(got, slices.Sorted(slices.Values(strings.Fields(l))))
	}
	assert.Equal(t, want, got, "docs/architecture.md's floors, bottom first")
}
