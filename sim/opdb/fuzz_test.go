package opdb

import (
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
