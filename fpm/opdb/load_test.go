package opdb

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/parquet-go/parquet-go"
	"github.com/steplab/steplab/fpm"
	"github.com/stretchr/testify/require"
)

// The shipped databases: AIConfigurator's vLLM tables, and steplab's
// worker's own operations.
const (
	h200       = "h200-sxm-vllm-0.24.0"
	h200Worker = "h200-sxm-worker"
)

// Rows in AIConfigurator's column layout, as the test writes them.
type gemmRow struct {
	KernelSource string  `parquet:"kernel_source"`
	GEMMDType    string  `parquet:"gemm_dtype"`
	M            int64   `parquet:"m"`
	N            int64   `parquet:"n"`
	K            int64   `parquet:"k"`
	Latency      float64 `parquet:"latency"`
}

type attnRow struct {
	BatchSize    int64   `parquet:"batch_size"`
	ISL          int64   `parquet:"isl"`
	NumHeads     int64   `parquet:"num_heads"`
	NumKVHeads   int64   `parquet:"num_key_value_heads"`
	HeadDim      int64   `parquet:"head_dim"`
	BeamWidth    int64   `parquet:"beam_width"`
	AttnDType    string  `parquet:"attn_dtype"`
	KVCacheDType string  `parquet:"kv_cache_dtype"`
	Step         int64   `parquet:"step"`
	WindowSize   int64   `parquet:"window_size"`
	Latency      float64 `parquet:"latency"`
}

type allReduceRow struct {
	KernelSource string  `parquet:"kernel_source"`
	DType        string  `parquet:"allreduce_dtype"`
	NumGPUs      int64   `parquet:"num_gpus"`
	MessageSize  int64   `parquet:"message_size"`
	Latency      float64 `parquet:"latency"`
}

func parquetBytes[T any](t testing.TB, rows []T) []byte {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, parquet.Write(&b, rows))
	return b.Bytes()
}

const testSystemYAML = `data_dir: data/test_gpu
gpu:
  mem_bw: 1000000000000
  mem_bw_empirical_scaling_factor: 0.8
  mem_empirical_constant_latency: 0.000003
  bfloat16_tc_flops: 1000000000000000
node:
  intra_node_bw: 100000000000
`

var (
	smallOnce  sync.Once
	smallFiles fstest.MapFS
)

// smallDB is a database in the layout, written once; each call returns a
// map of its own to edit.
func smallDB(t testing.TB) fstest.MapFS {
	smallOnce.Do(func() { smallFiles = writeSmallDB(t) })
	fs := fstest.MapFS{}
	for k, v := range smallFiles {
		c := *v
		fs[k] = &c
	}
	return fs
}

func writeSmallDB(t testing.TB) fstest.MapFS {
	var gemm []gemmRow
	for _, m := range []int64{1, 16} {
		gemm = append(gemm, gemmRow{"torch", "bfloat16", m, 64, 64, 0.002 * float64(m)})
	}
	ctx := []attnRow{{1, 16, 4, 2, 16, 1, "bfloat16", "bfloat16", 0, 0, 0.01}, {1, 64, 4, 2, 16, 1, "bfloat16", "bfloat16", 0, 0, 0.02},
		{1, 64, 4, 2, 16, 2, "bfloat16", "bfloat16", 0, 0, 0.5}} // beam search: another op, left out
	gen := []attnRow{{1, 1, 4, 2, 16, 1, "bfloat16", "bfloat16", 127, 0, 0.01}, {8, 1, 4, 2, 16, 1, "bfloat16", "bfloat16", 1023, 0, 0.03}}
	ar := []allReduceRow{{"custom_graph", "bfloat16", 2, 1024, 0.004}, {"custom_eager", "bfloat16", 2, 1024, 0.02}}
	return fstest.MapFS{
		SystemFile:                       {Data: []byte(testSystemYAML)},
		"gemm/" + MetaFile:               {Data: []byte("runtime:\n  framework: vLLM\n  version: 0.1.0\n")},
		GEMMFile:                         {Data: parquetBytes(t, gemm)},
		ContextAttentionFile:             {Data: parquetBytes(t, ctx)},
		GenerationAttentionFile:          {Data: parquetBytes(t, gen)},
		AllReduceFile:                    {Data: parquetBytes(t, ar)},
		"attention/" + MetaFile:          {Data: []byte("runtime:\n  framework: vLLM\n")},
		"comm/custom_allreduce_perf.csv": {Data: []byte("ignored")},
	}
}

func TestLoadFS(t *testing.T) {
	db, err := LoadFS(smallDB(t), "small")
	require.NoError(t, err)
	require.Equal(t, "small", db.Name)
	require.Equal(t, "vllm", db.Framework)
	require.Equal(t, "0.1.0", db.Version)
	require.Equal(t, fpm.OpSystem{GPU: "test_gpu", MemBandwidth: 1e12, BF16FLOPS: 1e15, MemBWScaling: 0.8, MemConstantS: 3e-6, IntraNodeBandwidth: 1e11}, db.System)
	require.Equal(t, []fpm.GEMMRow{{DType: "bfloat16", M: 1, N: 64, K: 64, LatencyMs: 0.002}, {DType: "bfloat16", M: 16, N: 64, K: 64, LatencyMs: 0.032}}, db.GEMM)
	require.Len(t, db.ContextAttention, 2, "the beam-search row is left out")
	require.Equal(t, fpm.AttentionRow{Batch: 8, SeqLen: 1024, Heads: 4, KVHeads: 2, HeadDim: 16, DType: "bfloat16", KVDType: "bfloat16", LatencyMs: 0.03},
		db.GenerationAttention[1], "a generation row attends to isl + step keys")
	require.Equal(t, []bool{true, false}, []bool{db.AllReduce[0].Graph, db.AllReduce[1].Graph}, "a kernel source ending in _eager is eager")
	_, err = fpm.NewOps(db, tiny)
	require.NoError(t, err)
}

// A malformed database is refused with the file, the column and the row.
func TestLoadFSRefuses(t *testing.T) {
	cases := []struct {
		name string
		edit func(t *testing.T, fs fstest.MapFS)
		want string
	}{
		{"no system file", func(t *testing.T, fs fstest.MapFS) { delete(fs, SystemFile) }, "system.yaml: open system.yaml"},
		{"system without bandwidth", func(t *testing.T, fs fstest.MapFS) {
			fs[SystemFile] = &fstest.MapFile{Data: []byte("gpu:\n  bfloat16_tc_flops: 1\n  mem_bw_empirical_scaling_factor: 1\n")}
		}, "system.yaml: gpu.mem_bw is 0"},
		{"system not yaml", func(t *testing.T, fs fstest.MapFS) { fs[SystemFile] = &fstest.MapFile{Data: []byte("gpu: [")} }, "system.yaml"},
		{"no gemm table", func(t *testing.T, fs fstest.MapFS) { delete(fs, GEMMFile) }, "gemm/gemm_perf.parquet"},
		{"not parquet", func(t *testing.T, fs fstest.MapFS) { fs[GEMMFile] = &fstest.MapFile{Data: []byte("m,n,k\n1,2,3\n")} }, "gemm/gemm_perf.parquet: not a readable Parquet file"},
		{"missing column", func(t *testing.T, fs fstest.MapFS) {
			type noK struct {
				GEMMDType string  `parquet:"gemm_dtype"`
				M         int64   `parquet:"m"`
				N         int64   `parquet:"n"`
				Latency   float64 `parquet:"latency"`
			}
			fs[GEMMFile] = &fstest.MapFile{Data: parquetBytes(t, []noK{{"bfloat16", 1, 2, 0.1}})}
		}, `gemm/gemm_perf.parquet: no column "k"`},
		{"latency of another type", func(t *testing.T, fs fstest.MapFS) {
			type strLat struct {
				GEMMDType string `parquet:"gemm_dtype"`
				M         int64  `parquet:"m"`
				N         int64  `parquet:"n"`
				K         int64  `parquet:"k"`
				Latency   string `parquet:"latency"`
			}
			fs[GEMMFile] = &fstest.MapFile{Data: parquetBytes(t, []strLat{{"bfloat16", 1, 2, 3, "fast"}})}
		}, `gemm/gemm_perf.parquet: column "latency" is STRING: want a float`},
		{"negative size", func(t *testing.T, fs fstest.MapFS) {
			fs[GEMMFile] = &fstest.MapFile{Data: parquetBytes(t, []gemmRow{{"t", "bfloat16", 1, 64, 64, 0.1}, {"t", "bfloat16", -4, 64, 64, 0.1}})}
		}, `gemm/gemm_perf.parquet: column "m" row 1 is -4`},
		{"null latency", func(t *testing.T, fs fstest.MapFS) {
			type optLat struct {
				GEMMDType string   `parquet:"gemm_dtype"`
				M         int64    `parquet:"m"`
				N         int64    `parquet:"n"`
				K         int64    `parquet:"k"`
				Latency   *float64 `parquet:"latency,optional"`
			}
			fs[GEMMFile] = &fstest.MapFile{Data: parquetBytes(t, []optLat{{"bfloat16", 1, 2, 3, nil}})}
		}, `gemm/gemm_perf.parquet: column "latency" row 0 is null`},
		{"zero latency", func(t *testing.T, fs fstest.MapFS) {
			fs[GenerationAttentionFile] = &fstest.MapFile{Data: parquetBytes(t, []attnRow{{1, 1, 4, 2, 16, 1, "bfloat16", "bfloat16", 3, 0, 0}})}
		}, `attention/generation_attention_perf.parquet: column "latency" row 0 is 0`},
		{"context row with a step", func(t *testing.T, fs fstest.MapFS) {
			fs[ContextAttentionFile] = &fstest.MapFile{Data: parquetBytes(t, []attnRow{{1, 16, 4, 2, 16, 1, "bfloat16", "bfloat16", 5, 0, 0.1}})}
		}, `attention/context_attention_perf.parquet: column "step" row 0 is 5`},
		{"only beam search", func(t *testing.T, fs fstest.MapFS) {
			fs[ContextAttentionFile] = &fstest.MapFile{Data: parquetBytes(t, []attnRow{{1, 16, 4, 2, 16, 4, "bfloat16", "bfloat16", 0, 0, 0.1}})}
		}, "context_attention_perf.parquet: no rows of beam width 1"},
		{"bad meta", func(t *testing.T, fs fstest.MapFS) {
			fs["gemm/"+MetaFile] = &fstest.MapFile{Data: []byte("runtime: [")}
		}, "gemm/collection_meta.yaml"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := smallDB(t)
			c.edit(t, fs)
			_, err := LoadFS(fs, "small")
			require.ErrorContains(t, err, c.want)
		})
	}
}

// Open reads a directory in the layout (here a copy of the shipped
// database) and names it after the directory.
func TestLoadDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "my-gpu-db")
	require.NoError(t, os.CopyFS(dir, shippedFS(h200)))
	db, err := Open(dir)
	require.NoError(t, err)
	require.Equal(t, "my-gpu-db", db.Name)
	require.Len(t, db.GEMM, 107225)
	require.Len(t, db.ContextAttention, 50830)
	require.Len(t, db.GenerationAttention, 62166)
	require.Len(t, db.AllReduce, 138)
	require.Equal(t, "h200_sxm", db.System.GPU)
	require.Equal(t, "vllm", db.Framework)
	require.Equal(t, "0.24.0", db.Version)
	shipped, err := Open(h200)
	require.NoError(t, err)
	require.Equal(t, shipped.GEMM, db.GEMM)

	require.NoError(t, os.Remove(filepath.Join(dir, SystemFile)))
	_, err = LoadDir(dir)
	require.ErrorContains(t, err, "my-gpu-db: system.yaml")
	_, err = LoadDir(filepath.Join(dir, "gemm", "gemm_perf.parquet"))
	require.ErrorContains(t, err, "is not a directory")
	_, err = Open(filepath.Join(dir, "nope"))
	require.ErrorContains(t, err, "neither a database shipped with steplab ("+strings.Join(Names(), ", ")+") nor a directory")
}

// The launch column marks eager rows; a table without it is all graph
// rows. The element-wise table is read when present, its dtype optional.
func TestLoadFSLaunchAndElementwise(t *testing.T) {
	fs := smallDB(t)
	fs[GEMMFile] = &fstest.MapFile{Data: parquetBytes(t, []gemmFile{
		{"bfloat16", 1, 64, 64, LaunchGraph, 0.002, 0}, {"bfloat16", 1, 64, 64, LaunchEager, 0.02, 0.015}})}
	fs[ContextAttentionFile] = &fstest.MapFile{Data: parquetBytes(t, []attentionFile{
		{1, 16, 4, 2, 16, "bfloat16", "bfloat16", 0, LaunchEager, 0.05, 0}})}
	type noDType struct {
		Op      string  `parquet:"op"`
		M       int64   `parquet:"m"`
		N       int64   `parquet:"n"`
		Latency float64 `parquet:"latency"`
	}
	fs[ElementwiseFile] = &fstest.MapFile{Data: parquetBytes(t, []noDType{{fpm.OpEmbedding, 4, 4096, 0.003}})}
	db, err := LoadFS(fs, "small")
	require.NoError(t, err)
	require.Equal(t, []fpm.GEMMRow{{DType: "bfloat16", M: 1, N: 64, K: 64, LatencyMs: 0.002},
		{DType: "bfloat16", M: 1, N: 64, K: 64, Eager: true, LatencyMs: 0.02, HostMs: 0.015}}, db.GEMM)
	require.Equal(t, []fpm.AttentionRow{{Batch: 1, SeqLen: 16, Heads: 4, KVHeads: 2, HeadDim: 16, DType: "bfloat16",
		KVDType: "bfloat16", Eager: true, LatencyMs: 0.05}}, db.ContextAttention)
	require.False(t, db.GenerationAttention[0].Eager, "a table without a launch column is graph rows")
	require.Equal(t, []fpm.ElementwiseRow{{Op: fpm.OpEmbedding, M: 4, N: 4096, LatencyMs: 0.003}}, db.Elementwise)
	require.Nil(t, must(LoadFS(smallDB(t), "small")).Elementwise, "the element-wise table is optional")
}

// A bad launch value or element-wise row is refused with the file, the
// column and the row. The files are written as WriteDir writes them, with
// one value changed.
func TestLoadFSRefusesLaunchAndElementwise(t *testing.T) {
	goodEW := []elementwiseFile{{fpm.OpRMSNorm, 1, 4096, "bfloat16", LaunchGraph, 0.001, 0}, {fpm.OpRoPE, 1, 6144, "bfloat16", LaunchEager, 0.002, 0.0015}}
	// ew returns the good element-wise rows with row 1 edited.
	ew := func(edit func(r *elementwiseFile)) *fstest.MapFile {
		rows := slices.Clone(goodEW)
		edit(&rows[1])
		return &fstest.MapFile{Data: parquetBytes(t, rows)}
	}
	cases := []struct {
		name string
		file string
		data *fstest.MapFile
		want string
	}{
		{"gemm launch", GEMMFile, &fstest.MapFile{Data: parquetBytes(t, []gemmFile{
			{"bfloat16", 1, 64, 64, LaunchGraph, 0.002, 0}, {"bfloat16", 1, 64, 64, "Eager", 0.02, 0}})},
			`gemm/gemm_perf.parquet: column "launch" row 1 is "Eager": want "graph" or "eager"`},
		{"attention launch empty", GenerationAttentionFile, &fstest.MapFile{Data: parquetBytes(t, []attentionFile{
			{1, 16, 4, 2, 16, "bfloat16", "bfloat16", 0, "", 0.05, 0}})},
			`attention/generation_attention_perf.parquet: column "launch" row 0 is ""`},
		{"launch not a string", GEMMFile, &fstest.MapFile{Data: parquetBytes(t, []struct {
			DType   string  `parquet:"gemm_dtype"`
			M       int64   `parquet:"m"`
			N       int64   `parquet:"n"`
			K       int64   `parquet:"k"`
			Launch  int64   `parquet:"launch"`
			Latency float64 `parquet:"latency"`
		}{{"bfloat16", 1, 64, 64, 1, 0.002}})}, `gemm/gemm_perf.parquet: column "launch" is INT(64,true): want a string`},
		{"host time on a graph row", GEMMFile, &fstest.MapFile{Data: parquetBytes(t, []gemmFile{
			{"bfloat16", 1, 64, 64, LaunchEager, 0.02, 0.01}, {"bfloat16", 1, 64, 64, LaunchGraph, 0.002, 0.001}})},
			`gemm/gemm_perf.parquet: column "host_latency" row 1 is 0.001: want a non-negative number of milliseconds, on eager rows only`},
		{"negative host time", ElementwiseFile, ew(func(r *elementwiseFile) { r.Host = -0.5 }),
			`elementwise/elementwise_perf.parquet: column "host_latency" row 1 is -0.5`},
		{"element-wise launch", ElementwiseFile, ew(func(r *elementwiseFile) { r.Launch = "cuda-graph" }),
			`elementwise/elementwise_perf.parquet: column "launch" row 1 is "cuda-graph"`},
		{"unknown element-wise op", ElementwiseFile, ew(func(r *elementwiseFile) { r.Op = "softmax" }),
			`elementwise/elementwise_perf.parquet: column "op" row 1 is "softmax": want one of rmsnorm, residual_add, rope, kv_write, silu_mul, embedding`},
		{"element-wise zero width", ElementwiseFile, ew(func(r *elementwiseFile) { r.N = 0 }),
			`elementwise/elementwise_perf.parquet: column "n" row 1 is 0`},
		{"element-wise negative latency", ElementwiseFile, ew(func(r *elementwiseFile) { r.Latency = -1 }),
			`elementwise/elementwise_perf.parquet: column "latency" row 1 is -1`},
		{"element-wise without op", ElementwiseFile, &fstest.MapFile{Data: parquetBytes(t, []gemmFile{{"bfloat16", 1, 64, 64, LaunchGraph, 0.002, 0}})},
			`elementwise/elementwise_perf.parquet: no column "op"`},
		{"element-wise not parquet", ElementwiseFile, &fstest.MapFile{Data: []byte("op,m,n\n")},
			`elementwise/elementwise_perf.parquet: not a readable Parquet file`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := smallDB(t)
			fs[ElementwiseFile] = &fstest.MapFile{Data: parquetBytes(t, goodEW)}
			_, err := LoadFS(fs, "small")
			require.NoError(t, err, "the database is good before the edit")
			fs[c.file] = c.data
			_, err = LoadFS(fs, "small")
			require.ErrorContains(t, err, c.want)
		})
	}
}

// A database assembled with DuckDB (datasets/testdata/foreign/duckdb/
// make_fixtures.mjs): BIGINT sizes, VARCHAR launch, host issue times that
// DuckDB stores as DECIMAL(3,2), and the element-wise table. It loads, and
// an eager step is priced with the host's dispatch overlapped.
func TestLoadDirDuckDB(t *testing.T) {
	db, err := LoadDir(filepath.Join("..", "..", "datasets", "testdata", "foreign", "duckdb", "fixtures", "opdb"))
	require.NoError(t, err)
	require.Equal(t, 132.0, db.System.SMs)
	var eager, host int
	for _, r := range db.GEMM {
		if r.Eager {
			eager++
			require.InDelta(t, 0.02, r.HostMs, 1e-12, "the DECIMAL host time at its scale")
		} else {
			require.Zero(t, r.HostMs)
		}
		if r.HostMs > 0 {
			host++
		}
	}
	require.Equal(t, len(db.GEMM)/2, eager)
	require.Equal(t, eager, host)
	require.Len(t, db.Elementwise, 6*33*4*2)

	o, err := fpm.NewOps(db, llama8B)
	require.NoError(t, err)
	f := fpm.Features{PrefillTokens: 900, PrefillRequests: 1, DecodeRequests: 40, DecodeKVTokens: 40 * 1000, DecodeMaxKVTokens: 3000}
	require.Zero(t, o.Breakdown(f).HostWaitNs, "no graph sizes known: a graph step")
	b := o.WithGraphs([]int{512}).Breakdown(f)
	require.True(t, b.Eager)
	require.Positive(t, b.HostWaitNs, "20 µs a call keeps the device waiting on short operations")
}
