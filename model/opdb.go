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
// It is plain data; package datasets/opdb reads it from disk, NewOps
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

// opIndex is an OpDB ready to look up: one opTable per discrete key.
type opIndex struct {
	sys        OpSystem
	gemm       map[string]*opTable // by dtype
	ctx, gen   map[attnKey]*opTable
	allreduce  map[bool]*opTable // by graph
	gemmDTypes []string
}

type attnKey struct {
	dtype, kvDType string
	window         int
}

// index validates the database and builds its lookup tables. An error
// names the table, the row and the field.
func (db *OpDB) index() (*opIndex, error) {
	if err := db.System.validate(); err != nil {
		return nil, fmt.Errorf("opdb %s: %w", db.Name, err)
	}
	x := &opIndex{sys: db.System, gemm: map[string]*opTable{}, ctx: map[attnKey]*opTable{},
		gen: map[attnKey]*opTable{}, allreduce: map[bool]*opTable{}}
	if len(db.GEMM) == 0 || len(db.ContextAttention) == 0 || len(db.GenerationAttention) == 0 {
		return nil, fmt.Errorf("opdb %s: needs gemm, context_attention and generation_attention rows (have %d, %d, %d)",
			db.Name, len(db.GEMM), len(db.ContextAttention), len(db.GenerationAttention))
	}
	gb := map[string]*opTableBuilder{}
	for i, r := range db.GEMM {
		b := gb[r.DType]
		if b == nil {
			b = newOpTableBuilder(fmt.Sprintf("opdb %s: %s %s", db.Name, r.DType, OpTableGEMM), gemmAxes)
			gb[r.DType] = b
		}
		if err := b.add(i, opCoords{float64(r.N), float64(r.K), float64(r.M)}, r.LatencyMs); err != nil {
			return nil, err
		}
	}
	for dt, b := range gb {
		x.gemm[dt] = b.build()
		x.gemmDTypes = append(x.gemmDTypes, dt)
	}
	sort.Strings(x.gemmDTypes)
	for _, t := range []struct {
		name string
		rows []AttentionRow
		into map[attnKey]*opTable
	}{{OpTableContextAttention, db.ContextAttention, x.ctx}, {OpTableGenerationAttention, db.GenerationAttention, x.gen}} {
		bs := map[attnKey]*opTableBuilder{}
		for i, r := range t.rows {
			if r.Window < 0 {
				return nil, fmt.Errorf("opdb %s: %s row %d: window = %d: must be >= 0", db.Name, t.name, i, r.Window)
			}
			k := attnKey{r.DType, r.KVDType, r.Window}
			b := bs[k]
			if b == nil {
				b = newOpTableBuilder(fmt.Sprintf("opdb %s: %s", db.Name, t.name), attnAxes)
				bs[k] = b
			}
			c := opCoords{float64(r.HeadDim), float64(r.KVHeads), float64(r.Heads), float64(r.SeqLen), float64(r.Batch)}
			if err := b.add(i, c, r.LatencyMs); err != nil {
				return nil, err
			}
		}
		for k, b := range bs {
			t.into[k] = b.build()
		}
	}
	ab := map[bool]*opTableBuilder{}
	for i, r := range db.AllReduce {
		b := ab[r.Graph]
		if b == nil {
			b = newOpTableBuilder(fmt.Sprintf("opdb %s: %s", db.Name, OpTableAllReduce), arAxes)
			ab[r.Graph] = b
		}
		if err := b.add(i, opCoords{float64(r.GPUs), float64(r.MessageBytes)}, r.LatencyMs); err != nil {
			return nil, err
		}
	}
	for g, b := range ab {
		x.allreduce[g] = b.build()
	}
	return x, nil
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

// gemmTable returns the table of a GEMM dtype, or an error listing the
// dtypes the database has.
func (x *opIndex) gemmTable(dtype string) (*opTable, error) {
	if t, ok := x.gemm[dtype]; ok {
		return t, nil
	}
	return nil, fmt.Errorf("no %s GEMMs measured (have %s)", dtype, strings.Join(x.gemmDTypes, ", "))
}

// attnTable returns the attention table of a compute dtype, KV dtype and
// window; rows whose table does not name a compute dtype serve any.
func attnTable(tables map[attnKey]*opTable, name, dtype, kvDType string, window int) (*opTable, error) {
	if t, ok := tables[attnKey{dtype, kvDType, window}]; ok {
		return t, nil
	}
	if t, ok := tables[attnKey{"", kvDType, window}]; ok {
		return t, nil
	}
	var have []string
	for k := range tables {
		have = append(have, fmt.Sprintf("%s with a %s KV cache, window %d", k.dtype, k.kvDType, k.window))
	}
	sort.Strings(have)
	return nil, fmt.Errorf("no %s measured in %s with a %s KV cache, window %d (have %s)", name, dtype, kvDType, window, strings.Join(have, "; "))
}
