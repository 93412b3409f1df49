package opdb

import (
	"bytes"
	"github.com/steplab/steplab/fpm"
	"math"
	"slices"
	"testing"
	"testing/fstest"
)

// The loader never panics on a table's bytes, and what it accepts the
// prior can index: every coordinate and latency positive.

// fuzzTable replaces one file of the small database with data and loads
// it.
func fuzzTable(t *testing.T, file string, data []byte) {
	fs := smallDB(t)
	fs[file] = &fstest.MapFile{Data: data}
	db, err := LoadFS(fs, "fuzz")
	if err != nil {
		return
	}
	for _, r := range db.GEMM {
		if r.M <= 0 || r.N <= 0 || r.K <= 0 || !(r.LatencyMs > 0) {
			t.Fatalf("accepted a GEMM row the prior cannot use: %+v", r)
		}
	}
	for _, r := range append(db.ContextAttention, db.GenerationAttention...) {
		if r.Batch <= 0 || r.SeqLen <= 0 || r.Heads <= 0 || r.KVHeads <= 0 || r.HeadDim <= 0 || r.Window < 0 || !(r.LatencyMs > 0) {
			t.Fatalf("accepted an attention row the prior cannot use: %+v", r)
		}
	}
	for _, r := range db.AllReduce {
		if r.GPUs <= 0 || r.MessageBytes <= 0 || !(r.LatencyMs > 0) {
			t.Fatalf("accepted an all-reduce row the prior cannot use: %+v", r)
		}
	}
	for _, r := range db.MoE {
		if r.Tokens <= 0 || r.Hidden <= 0 || r.Inter <= 0 || r.TopK <= 0 || r.Experts <= 0 || r.TP <= 0 || r.EP <= 0 || !(r.LatencyMs > 0) {
			t.Fatalf("accepted a MoE row the prior cannot use: %+v", r)
		}
	}
	for _, r := range db.Elementwise {
		if r.M <= 0 || r.N <= 0 || !(r.LatencyMs > 0) || !(r.HostMs >= 0) || (r.HostMs > 0 && !r.Eager) || !slices.Contains(fpm.ElementwiseOps, r.Op) {
			t.Fatalf("accepted an element-wise row the prior cannot use: %+v", r)
		}
	}
}

func seedTable(f *testing.F, file string) {
	fs := smallDB(f)
	good := fs[file].Data
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add(good[:len(good)-9])
	f.Add([]byte("PAR1\x00\x00\x00\x00PAR1"))
	f.Add([]byte{})
}

func FuzzGEMMTable(f *testing.F) {
	seedTable(f, GEMMFile)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzTable(t, GEMMFile, data) })
}

func FuzzAttentionTable(f *testing.F) {
	seedTable(f, GenerationAttentionFile)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzTable(t, GenerationAttentionFile, data) })
}

func FuzzAllReduceTable(f *testing.F) {
	seedTable(f, AllReduceFile)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzTable(t, AllReduceFile, data) })
}

func FuzzMoETable(f *testing.F) {
	rows := []moeFile{{"nvfp4", 1, 3072, 1536, 8, 256, 4, 1, "balanced", 0.018, LaunchGraph, 0},
		{"nvfp4", 256, 3072, 1536, 8, 256, 4, 1, "balanced", 0.1, LaunchEager, 0.05}}
	good := parquetBytes(f, rows)
	for _, b := range [][]byte{good, good[:len(good)/2], good[:len(good)-9], []byte("PAR1\x00\x00\x00\x00PAR1")} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) { fuzzTable(t, MoEFile, data) })
}

func FuzzElementwiseTable(f *testing.F) {
	rows := []elementwiseFile{{fpm.OpRMSNorm, 1, 4096, "bfloat16", LaunchGraph, 0.001, 0},
		{fpm.OpRoPE, 16, 6144, "bfloat16", LaunchEager, 0.02, 0.015}}
	good := parquetBytes(f, rows)
	for _, b := range [][]byte{good, good[:len(good)/2], good[:len(good)-9], []byte("PAR1\x00\x00\x00\x00PAR1")} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) { fuzzTable(t, ElementwiseFile, data) })
}

func FuzzSystem(f *testing.F) {
	f.Add([]byte(testSystemYAML))
	f.Add([]byte("gpu:\n  mem_bw: -1\n"))
	f.Add([]byte("gpu: {mem_bw: .inf, bfloat16_tc_flops: 1, mem_bw_empirical_scaling_factor: 1}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := readSystem(fstest.MapFS{SystemFile: {Data: data}})
		if err == nil && !(s.MemBandwidth > 0 && s.BF16FLOPS > 0 && s.MemBWScaling > 0 && s.MemConstantS >= 0) {
			t.Fatalf("accepted an unusable system: %+v", s)
		}
	})
}

// ReadBench never panics on a benchmark's output, and what it accepts
// WriteDir can write and LoadDir read back: the three tables a database
// needs, every size a positive int32, every latency positive and finite,
// every element-wise op one the table may hold.
func FuzzReadBench(f *testing.F) {
	f.Add([]byte(benchInput))
	f.Add([]byte(benchInput[:len(benchInput)-30]))
	f.Add([]byte(benchInput + `{"table": "gemm", "launch": "eager", "dtype": "bfloat16", "m": 1, "n": 2, "k": 3, "latency_ms": 1e-3}`))
	f.Add([]byte(`{"table": "meta"}` + "\n" + `{"table": "gemm", "m": -1}` + "\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		db, _, err := ReadBench(bytes.NewReader(data))
		if err != nil {
			if db != nil {
				t.Fatalf("an error with a database: %v", err)
			}
			return
		}
		if len(db.GEMM) == 0 || len(db.ContextAttention) == 0 || len(db.GenerationAttention) == 0 {
			t.Fatalf("accepted a database without a table it needs: %d GEMM, %d context, %d generation rows",
				len(db.GEMM), len(db.ContextAttention), len(db.GenerationAttention))
		}
		size := func(v ...int) bool {
			for _, x := range v {
				if x <= 0 || x > math.MaxInt32 {
					return false
				}
			}
			return true
		}
		latency := func(ms float64) bool { return ms > 0 && !math.IsInf(ms, 0) }
		for _, r := range db.GEMM {
			if !size(r.M, r.N, r.K) || !latency(r.LatencyMs) {
				t.Fatalf("accepted a GEMM row the prior cannot use: %+v", r)
			}
		}
		for _, r := range append(slices.Clone(db.ContextAttention), db.GenerationAttention...) {
			if !size(r.Batch, r.SeqLen, r.Heads, r.KVHeads, r.HeadDim) || r.Window != 0 || !latency(r.LatencyMs) {
				t.Fatalf("accepted an attention row the prior cannot use: %+v", r)
			}
		}
		for _, r := range db.MoE {
			if r.Tokens <= 0 || r.Hidden <= 0 || r.Inter <= 0 || r.TopK <= 0 || r.Experts <= 0 || r.TP <= 0 || r.EP <= 0 || !(r.LatencyMs > 0) {
				t.Fatalf("accepted a MoE row the prior cannot use: %+v", r)
			}
		}
		for _, r := range db.Elementwise {
			if !size(r.M, r.N) || !latency(r.LatencyMs) || !slices.Contains(fpm.ElementwiseOps, r.Op) {
				t.Fatalf("accepted an element-wise row the prior cannot use: %+v", r)
			}
		}
	})
}
