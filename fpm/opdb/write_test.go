package opdb

import (
	"cmp"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/steplab/steplab/fpm"
	"github.com/stretchr/testify/require"
)

// writeTestDB is a database with every table WriteDir writes, rows of
// both launches, and rows given out of order.
func writeTestDB() *fpm.OpDB {
	db := &fpm.OpDB{
		Framework:  "steplab-worker",
		Version:    "torch 2.11.0, triton 3.6.0, NVIDIA H200",
		Generation: "piecewise",
		System: fpm.OpSystem{GPU: "H200-SXM", MemBandwidth: 4.8e12, BF16FLOPS: 9.89e14, MemBWScaling: 0.8,
			MemConstantS: 3e-6, SMs: 132, IntraNodeBandwidth: 4.5e11},
	}
	for _, eager := range []bool{true, false} {
		for _, m := range []int{64, 1, 8} {
			lat := 0.001 * float64(m)
			if eager {
				lat += 0.01
			}
			db.GEMM = append(db.GEMM, fpm.GEMMRow{DType: "bfloat16", M: m, N: 4096, K: 1024, Eager: eager, LatencyMs: lat})
			db.Elementwise = append(db.Elementwise,
				fpm.ElementwiseRow{Op: fpm.OpSiLUMul, M: m, N: 14336, DType: "bfloat16", Eager: eager, LatencyMs: lat / 2},
				fpm.ElementwiseRow{Op: fpm.OpRMSNorm, M: m, N: 4096, DType: "bfloat16", Eager: eager, LatencyMs: lat / 3})
		}
		for _, s := range []int{1024, 16} {
			db.ContextAttention = append(db.ContextAttention, fpm.AttentionRow{Batch: 2, SeqLen: s, Heads: 32, KVHeads: 8,
				HeadDim: 128, DType: "bfloat16", KVDType: "bfloat16", Eager: eager, LatencyMs: 1e-5 * float64(s)})
			db.GenerationAttention = append(db.GenerationAttention, fpm.AttentionRow{Batch: 8, SeqLen: s, Heads: 32, KVHeads: 8,
				HeadDim: 128, DType: "bfloat16", KVDType: "bfloat16", Eager: eager, LatencyMs: 2e-5 * float64(s)},
				fpm.AttentionRow{Batch: 8, SeqLen: s, Heads: 32, KVHeads: 8,
					HeadDim: 128, Window: 512, DType: "bfloat16", KVDType: "fp8", Eager: eager, LatencyMs: 3e-5 * float64(s)})
		}
	}
	db.GEMM = append(db.GEMM, fpm.GEMMRow{DType: "fp8", M: 8, N: 4096, K: 1024, LatencyMs: 0.004})
	for _, tok := range []int{256, 1} {
		db.MoE = append(db.MoE, fpm.MoERow{DType: "nvfp4", Tokens: tok, Hidden: 3072, Inter: 1536, TopK: 8, Experts: 256, TP: 4, EP: 1,
			Distribution: "power_law_1.01", LatencyMs: 0.01 + 1e-4*float64(tok)},
			fpm.MoERow{DType: "bfloat16", Tokens: tok, Hidden: 4096, Inter: 1024, TopK: 2, Experts: 8, TP: 1, EP: 1,
				Distribution: "routing_skew_0", Eager: true, LatencyMs: 0.02 + 1e-4*float64(tok), HostMs: 0.015})
	}
	for _, graph := range []bool{true, false} {
		db.AllReduce = append(db.AllReduce, fpm.AllReduceRow{DType: "bfloat16", GPUs: 2, MessageBytes: 1 << 20, Graph: graph, LatencyMs: 0.02},
			fpm.AllReduceRow{DType: "bfloat16", GPUs: 4, MessageBytes: 1 << 10, Graph: graph, LatencyMs: 0.01})
	}
	return db
}

// sortedTables returns a copy of db with every table in one order, to
// compare databases whatever order their rows were written or read in.
func sortedTables(db *fpm.OpDB) *fpm.OpDB {
	c := *db
	c.GEMM = sortedRows(db.GEMM)
	c.ContextAttention = sortedRows(db.ContextAttention)
	c.GenerationAttention = sortedRows(db.GenerationAttention)
	c.AllReduce = sortedRows(db.AllReduce)
	c.Elementwise = sortedRows(db.Elementwise)
	c.MoE = sortedRows(db.MoE)
	return &c
}

func sortedRows[T any](rows []T) []T {
	if rows == nil {
		return nil
	}
	out := slices.Clone(rows)
	slices.SortFunc(out, func(a, b T) int { return cmp.Compare(fmt.Sprintf("%+v", a), fmt.Sprintf("%+v", b)) })
	return out
}

// dirFiles reads every file under dir by its slash path.
func dirFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	require.NoError(t, fs.WalkDir(os.DirFS(dir), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		out[p], err = fs.ReadFile(os.DirFS(dir), p)
		return err
	}))
	return out
}

// dirNames lists a directory's entries: a temporary folder WriteDir left
// behind shows here.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func TestWriteDirRoundTrip(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "my-db")
	in := writeTestDB()
	require.NoError(t, WriteDir(dir, in, false))
	require.Equal(t, []string{"my-db"}, dirNames(t, parent), "no temporary folder is left")
	st, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o755), st.Mode().Perm(), "readable as a database folder, not a private temporary one")

	files := dirFiles(t, dir)
	require.ElementsMatch(t, []string{SystemFile, GEMMFile, "gemm/" + MetaFile, ContextAttentionFile, GenerationAttentionFile, AllReduceFile, ElementwiseFile, MoEFile},
		slices.Collect(maps.Keys(files)))

	out, err := LoadDir(dir)
	require.NoError(t, err)
	want := sortedTables(in)
	want.Name, want.Source = "my-db", dir
	require.Equal(t, want, sortedTables(out), "read back, and where from")
	_, err = fpm.NewOps(out, llama8B)
	require.NoError(t, err, "the prior indexes what WriteDir wrote")

	// Without an element-wise table none is written, and none read back.
	in.Elementwise = nil
	require.NoError(t, WriteDir(filepath.Join(parent, "plain"), in, false))
	_, err = os.Stat(filepath.Join(parent, "plain", ElementwiseFile))
	require.ErrorIs(t, err, fs.ErrNotExist)
	out, err = LoadDir(filepath.Join(parent, "plain"))
	require.NoError(t, err)
	require.Nil(t, out.Elementwise)
	require.Len(t, out.GEMM, len(in.GEMM))
}

// The same database writes the same bytes, whatever order its rows are
// in: a database regenerated from the same rows is no diff in the repo.
func TestWriteDirDeterministic(t *testing.T) {
	parent := t.TempDir()
	a, b := filepath.Join(parent, "a"), filepath.Join(parent, "b")
	db := writeTestDB()
	require.NoError(t, WriteDir(a, db, false))
	first := dirFiles(t, a)
	require.NoError(t, WriteDir(a, db, true))
	require.Equal(t, first, dirFiles(t, a), "written twice")

	shuffled := writeTestDB()
	slices.Reverse(shuffled.GEMM)
	slices.Reverse(shuffled.ContextAttention)
	slices.Reverse(shuffled.GenerationAttention)
	slices.Reverse(shuffled.Elementwise)
	require.NotEqual(t, db.GEMM, shuffled.GEMM)
	require.NoError(t, WriteDir(b, shuffled, false))
	require.Equal(t, first, dirFiles(t, b), "rows in another order")
	require.ElementsMatch(t, []string{"a", "b"}, dirNames(t, parent))
}

func TestWriteDirOverwrite(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "db")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	keep := filepath.Join(dir, "notes.txt")
	require.NoError(t, os.WriteFile(keep, []byte("mine"), 0o644))

	err := WriteDir(dir, writeTestDB(), false)
	require.ErrorContains(t, err, dir+" exists")
	require.Equal(t, map[string][]byte{"notes.txt": []byte("mine")}, dirFiles(t, dir), "a refused write leaves the folder as it was")
	require.Equal(t, []string{"db"}, dirNames(t, parent))

	require.NoError(t, WriteDir(dir, writeTestDB(), true))
	_, err = os.Stat(keep)
	require.ErrorIs(t, err, fs.ErrNotExist, "overwrite replaces the folder, not merges into it")
	db, err := LoadDir(dir)
	require.NoError(t, err)
	require.Len(t, db.GEMM, len(writeTestDB().GEMM))
	require.Equal(t, []string{"db"}, dirNames(t, parent))

	// A file in the way is refused too, and a missing parent is made.
	file := filepath.Join(parent, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	require.ErrorContains(t, WriteDir(file, writeTestDB(), false), "exists")
	require.NoError(t, WriteDir(filepath.Join(parent, "x", "y", "db"), writeTestDB(), false))
	require.Equal(t, []string{"db"}, dirNames(t, filepath.Join(parent, "x", "y")))
}
