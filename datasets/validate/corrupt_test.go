package validate

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/datasets/export"
	"github.com/stretchr/testify/require"
)

// The corruption test damages one file of a bundled dataset at a time,
// each case from a seed it prints, and reads the result the way the
// commands do (export, validate, the dataset scanner that fit and replay
// use). Every reader must end in an error naming a file of the dataset, or
// read exactly the original rows: never panic, hang, or return other rows
// without an error. Replay one case with
//
//	go test ./datasets/validate -run TestCorruption -corrupt.seed=S -corrupt.case=N
var (
	flagCorruptSeed  = flag.Uint64("corrupt.seed", 1, "base seed of TestCorruption (0: a fresh one)")
	flagCorruptCases = flag.Int("corrupt.cases", 240, "cases of TestCorruption")
	flagCorruptCase  = flag.Int("corrupt.case", -1, "run only this case of TestCorruption")
)

const corruptSource = "../h200/traffic-azure-5rps"

// corruption is one way to damage a file.
type corruption struct {
	name  string
	apply func(r *rand.Rand, b []byte) []byte
}

// at picks an offset, in the last KiB (the footer) half the time.
func at(r *rand.Rand, n int) int {
	if n > 1024 && r.IntN(2) == 0 {
		return n - 1 - r.IntN(1024)
	}
	return r.IntN(n)
}

var corruptions = []corruption{
	{"flip-bits", func(r *rand.Rand, b []byte) []byte {
		for range 1 + r.IntN(3) {
			i := at(r, len(b))
			b[i] ^= 1 << r.IntN(8)
		}
		return b
	}},
	{"truncate", func(r *rand.Rand, b []byte) []byte { return b[:at(r, len(b))] }},
	{"zero-range", func(r *rand.Rand, b []byte) []byte {
		i := at(r, len(b))
		clear(b[i:min(len(b), i+1+r.IntN(64))])
		return b
	}},
}

// corruptCase is what one case damaged.
type corruptCase struct {
	seed  uint64
	table string // "" for the manifest
	file  string // relative to the dataset
	how   string
}

func TestCorruption(t *testing.T) {
	base := *flagCorruptSeed
	if base == 0 {
		base = rand.Uint64()
	}
	t.Logf("base seed %d: replay with -corrupt.seed=%d (one case: -corrupt.case=N)", base, base)
	d, err := datasets.Open(corruptSource)
	require.NoError(t, err)
	tables := []string{datasets.TableSteps, datasets.TableStepRequests, datasets.TableRequests, datasets.TableGPUSamples}
	want := map[string][]byte{}
	for _, table := range tables {
		want[table] = exportCSV(t, corruptSource, table)
	}
	orig, err := Dataset(corruptSource, Options{})
	require.NoError(t, err)
	require.True(t, orig.OK())
	for i := range *flagCorruptCases {
		if *flagCorruptCase >= 0 && i != *flagCorruptCase {
			continue
		}
		r := rand.New(rand.NewPCG(base, uint64(i)))
		c := corruptCase{seed: base, table: "", file: datasets.ManifestFile}
		if k := r.IntN(len(tables) + 1); k < len(tables) {
			c.table = tables[k]
			ti := d.Manifest.Tables[c.table]
			c.file = ti.Parts[r.IntN(len(ti.Parts))].File
		}
		how := corruptions[r.IntN(len(corruptions))]
		c.how = how.name
		t.Run(fmt.Sprintf("%d-%s-%s", i, strings.ReplaceAll(c.file, "/", "_"), c.how), func(t *testing.T) {
			dir := copyDataset(t, corruptSource)
			path := filepath.Join(dir, filepath.FromSlash(c.file))
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(path, how.apply(r, b), 0o644))
			within(t, c, func() { checkCorrupted(t, dir, c, tables, want, orig) })
		})
	}
}

// within runs f, failing on a panic and on a hang (a generous bound: a case
// takes well under a second).
func within(t *testing.T, c corruptCase, f func()) {
	t.Helper()
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		f()
	}()
	select {
	case p := <-done:
		if p != nil {
			t.Fatalf("panic (seed %d, %s %s): %v", c.seed, c.file, c.how, p)
		}
	case <-time.After(5 * time.Minute):
		t.Fatalf("hang (seed %d, %s %s)", c.seed, c.file, c.how)
	}
}

func checkCorrupted(t *testing.T, dir string, c corruptCase, tables []string, want map[string][]byte, orig *Report) {
	check := func(what string, err error, same bool) {
		if err != nil {
			require.Containsf(t, err.Error(), dir, "%s: the error names no file of the dataset", what)
			require.NotContains(t, err.Error(), "\n", "%s: a one-line error", what)
			return
		}
		require.Truef(t, same, "%s: no error, but rows differ from the original (%s %s)", what, c.file, c.how)
	}
	read := tables
	if c.table != "" {
		read = []string{c.table}
	}
	for _, table := range read {
		out := t.TempDir()
		_, err := export.Dataset(dir, out, export.Options{Format: export.CSV, Tables: []string{table}})
		var got []byte
		if err == nil {
			got, err = os.ReadFile(filepath.Join(out, table+".csv"))
			require.NoError(t, err)
		}
		check("export "+table, err, bytes.Equal(got, want[table]))
		n, err := scanRows(dir, table)
		check("scan "+table, err, n == orig.RowsChecked[table])
	}
	rep, err := Dataset(dir, Options{})
	if err == nil && rep.OK() {
		for _, table := range read {
			require.Equalf(t, orig.RowsChecked[table], rep.RowsChecked[table], "validate passes %s with other rows", table)
		}
	}
	check("validate", err, true)
}

// scanRows reads a table with the dataset scanner, as its schema's rows.
func scanRows(dir, table string) (int64, error) {
	d, err := datasets.Open(dir)
	if err != nil {
		return 0, err
	}
	count := func(n int, err error) (int64, error) { return int64(n), err }
	switch table {
	case datasets.TableSteps:
		rows, err := datasets.ReadAll[datasets.Step](d, table)
		return count(len(rows), err)
	case datasets.TableStepRequests:
		rows, err := datasets.ReadAll[datasets.StepRequest](d, table)
		return count(len(rows), err)
	case datasets.TableRequests:
		rows, err := datasets.ReadAll[datasets.Request](d, table)
		return count(len(rows), err)
	}
	rows, err := datasets.ReadAll[datasets.GPUSample](d, table)
	return count(len(rows), err)
}

func exportCSV(t *testing.T, dir, table string) []byte {
	out := t.TempDir()
	_, err := export.Dataset(dir, out, export.Options{Format: export.CSV, Tables: []string{table}})
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(out, table+".csv"))
	require.NoError(t, err)
	return b
}

// copyDataset copies a dataset directory (files and table folders) under
// t.TempDir().
func copyDataset(t *testing.T, src string) string {
	dst := filepath.Join(t.TempDir(), "ds")
	require.NoError(t, os.CopyFS(dst, os.DirFS(src)))
	return dst
}
