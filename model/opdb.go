package model

import (
	"fmt"
	"sort"
	"strings"
)

// OpDB is a database of measured operation latencies on one GPU under one
// serving framework, in the layout of AIConfigurator's systems database:
// GEMMs, context (prefill) and generation (decode) attention, and
// all-reduce, each a table of coordinates and a latency in milliseconds.
// It is plain data; package sim/opdb reads it from disk, NewOps
// prices steps with it.
type OpDB struct {
	// Name identifies the database (e.g. "h200-sxm-vllm-0.24.0").
	Name string `json:"name"`
	// Framework and Version are the serving framework the kernels were
	// measured under (e.g. "vllm", "0.24.0").
	Framework string `json:"framework"`
	Version   string `json:"version"`
	// System holds the GPU's peaks and the memory-op constants the
	// database's own tooling uses for operations it does not measure.
	System OpSystem `json:"system"`

	GEMM                []GEMMRow      `json:"gemm"`
	ContextAttention    []AttentionRow `json:"context_attention"`
	GenerationAttention []AttentionRow `json:"generation_attention"`
	AllReduce           []AllReduceRow `json:"allreduce,omitempty"`
}

// OpSystem is what a database says about its GPU.
type OpSystem struct {
	// GPU names the system (e.g. "h200_sxm").
	GPU string `json:"gpu"`
	// MemBandwidth is the HBM bandwidth in bytes/s and BF16FLOPS the dense
	// bf16 tensor-core peak in FLOP/s: the speed of light that
	// extrapolation scales by.
	MemBandwidth float64 `json:"mem_bw"`
	BF16FLOPS    float64 `json:"bf16_flops"`
	// MemBWScaling and MemConstantS price an operation the database does
	// not measure (norms, activations, residual adds, embedding gathers)
	// as bytes/(MemBandwidth·MemBWScaling) + MemConstantS seconds.
	MemBWScaling float64 `json:"mem_bw_scaling"`
	MemConstantS float64 `json:"mem_constant_s"`
	// IntraNodeBandwidth is the GPU-to-GPU bandwidth per direction in
	// bytes/s (all-reduce past the measured message sizes).
	IntraNodeBandwidth float64 `json:"intra_node_bw"`
}

// GEMMRow is one measured GEMM: an (M×K)·(K×N) product in DType.
type GEMMRow struct {
	DType     string  `json:"dtype"` // e.g. "bfloat16", "fp8"
	M         int     `json:"m"`     // tokens
	N         int     `json:"n"`     // output features
	K         int     `json:"k"`     // input features
	LatencyMs float64 `json:"latency_ms"`
}

// AttentionRow is one measured attention kernel call over Batch requests.
// For context attention SeqLen is each request's prompt length (causal,
// no cached prefix); for generation attention it is the KV length each
// decoding request attends to.
type AttentionRow struct {
	Batch     int     `json:"batch"`
	SeqLen    int     `json:"seq_len"`
	Heads     int     `json:"heads"`    // query heads (per GPU)
	KVHeads   int     `json:"kv_heads"` // per GPU
	HeadDim   int     `json:"head_dim"`
	Window    int     `json:"window"`   // sliding window; 0 for full attention
	DType     string  `json:"dtype"`    // compute dtype ("" when the table does not say)
	KVDType   string  `json:"kv_dtype"` // KV-cache dtype, e.g. "bfloat16", "fp8"
	LatencyMs float64 `json:"latency_ms"`
}

// AllReduceRow is one measured all-reduce of MessageBytes over GPUs GPUs,
// launched from a CUDA graph or eagerly.
type AllReduceRow struct {
	DType        string  `json:"dtype"`
	GPUs         int     `json:"gpus"`
	MessageBytes int64   `json:"message_bytes"`
	Graph        bool    `json:"graph"`
	LatencyMs    float64 `json:"latency_ms"`
}

// Table names, as errors and the loader name them.
const (
	OpTableGEMM                = "gemm"
	OpTableContextAttention    = "context_attention"
	OpTableGenerationAttention = "generation_attention"
	OpTableAllReduce           = "allreduce"
)

var (
	gemmAxes = []string{"n", "k", "m"}
	attnAxes = []string{"head_dim", "kv_heads", "heads", "seq_len", "batch"}
	arAxes   = []string{"gpus", "message_bytes"}
)

// opIndex is the part of an OpDB one model shape reads, ready to look
// up: its GEMM dtype, its attention dtypes (full attention, window 0) and
// the CUDA-graph all-reduces (nil when the database has none).
type opIndex struct {
	sys                       OpSystem
	gemm, ctx, gen, allreduce *opTable
}

// index validates the rows the shape reads and builds their tables. An
// error names the table, the row and the field, or what the database has
// when it has nothing for the shape.
func (db *OpDB) index(sh *opsShape) (*opIndex, error) {
	if err := db.System.validate(); err != nil {
		return nil, fmt.Errorf("opdb %s: %w", db.Name, err)
	}
	x := &opIndex{sys: db.System}
	gb := newOpTableBuilder(fmt.Sprintf("opdb %s: %s %s", db.Name, sh.dtype, OpTableGEMM), gemmAxes)
	have := map[string]bool{}
	for i, r := range db.GEMM {
		have[r.DType] = true
		if r.DType != sh.dtype {
			continue
		}
		if err := gb.add(i, opCoords{float64(r.N), float64(r.K), float64(r.M)}, r.LatencyMs); err != nil {
			return nil, err
		}
	}
	if len(gb.root) == 0 {
		return nil, fmt.Errorf("opdb %s: no %s GEMMs measured (have %s)", db.Name, sh.dtype, strings.Join(sortedKeys(have), ", "))
	}
	x.gemm = gb.build()
	var err error
	if x.ctx, err = db.attnIndex(OpTableContextAttention, db.ContextAttention, sh); err != nil {
		return nil, err
	}
	if x.gen, err = db.attnIndex(OpTableGenerationAttention, db.GenerationAttention, sh); err != nil {
		return nil, err
	}
	ab := newOpTableBuilder(fmt.Sprintf("opdb %s: %s", db.Name, OpTableAllReduce), arAxes)
	for i, r := range db.AllReduce {
		if !r.Graph {
			continue
		}
		if err := ab.add(i, opCoords{float64(r.GPUs), float64(r.MessageBytes)}, r.LatencyMs); err != nil {
			return nil, err
		}
	}
	if len(ab.root) > 0 {
		x.allreduce = ab.build()
	}
	return x, nil
}

// attnIndex builds the attention table of the shape's compute and KV
// dtypes, full attention (rows whose table names no compute dtype serve
// any).
func (db *OpDB) attnIndex(name string, rows []AttentionRow, sh *opsShape) (*opTable, error) {
	b := newOpTableBuilder(fmt.Sprintf("opdb %s: %s", db.Name, name), attnAxes)
	have := map[string]bool{}
	for i, r := range rows {
		have[fmt.Sprintf("%s with a %s KV cache, window %d", r.DType, r.KVDType, r.Window)] = true
		if (r.DType != sh.dtype && r.DType != "") || r.KVDType != sh.kvDType || r.Window != 0 {
			continue
		}
		c := opCoords{float64(r.HeadDim), float64(r.KVHeads), float64(r.Heads), float64(r.SeqLen), float64(r.Batch)}
		if err := b.add(i, c, r.LatencyMs); err != nil {
			return nil, err
		}
	}
	if len(b.root) == 0 {
		return nil, fmt.Errorf("opdb %s: no %s measured in %s with a %s KV cache, window 0 (have %s)",
			db.Name, name, sh.dtype, sh.kvDType, strings.Join(sortedKeys(have), "; "))
	}
	return b.build(), nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (s OpSystem) validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"mem_bw", s.MemBandwidth}, {"bfloat16_tc_flops", s.BF16FLOPS}, {"mem_bw_empirical_scaling_factor", s.MemBWScaling}} {
		if !(f.v > 0) {
			return fmt.Errorf("system %s: gpu.%s = %v: must be > 0", s.GPU, f.name, f.v)
		}
	}
	if s.MemConstantS < 0 || s.IntraNodeBandwidth < 0 {
		return fmt.Errorf("system %s: gpu.mem_empirical_constant_latency and node.intra_node_bw must be >= 0", s.GPU)
	}
	return nil
}
