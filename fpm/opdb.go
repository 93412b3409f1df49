package fpm

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// OpDB is a database of measured operation latencies on one GPU under one
// serving framework, in the layout of AIConfigurator's systems database:
// GEMMs, context (prefill) and generation (decode) attention, and
// all-reduce, each a table of coordinates and a latency in milliseconds.
// It is plain data; package fpm/opdb reads it from disk, NewOps
// prices steps with it.
//
// Two additions of steplab's are optional: a table of the engine's
// element-wise operations (Elementwise), and rows measured launched
// eagerly beside those replayed from a CUDA graph (Eager), for an engine
// that runs large steps kernel by kernel from the host.
type OpDB struct {
	// Name identifies the database (e.g. "h200-sxm-vllm-0.24.0").
	Name string `json:"name"`
	// Source is where it was opened: the name of a database shipped with
	// steplab or a directory ("" for one built in memory or assembled from
	// a tree), what an artifact of a prior over it records.
	Source string `json:"-"`
	// Framework and Version are the serving framework the kernels were
	// measured under (e.g. "vllm", "0.24.0").
	Framework string `json:"framework"`
	Version   string `json:"version"`
	// Generation is the engine's generation that measured it, for
	// steplab's worker capture/worker/config.py's WORKER_GENERATION (""
	// for other frameworks, and for the worker before generations were
	// recorded).
	Generation string `json:"generation,omitempty"`
	// System holds the GPU's peaks and the memory-op constants the
	// database's own tooling uses for operations it does not measure.
	System OpSystem `json:"system"`

	GEMM                []GEMMRow      `json:"gemm"`
	ContextAttention    []AttentionRow `json:"context_attention"`
	GenerationAttention []AttentionRow `json:"generation_attention"`
	AllReduce           []AllReduceRow `json:"allreduce,omitempty"`
	// Elementwise, when present, replaces the memory-op formula for the
	// layer's element-wise work (see ElementwiseOps).
	Elementwise []ElementwiseRow `json:"elementwise,omitempty"`
	// MoE, when present, prices a mixture of experts' routed experts by
	// the fused MoE layer measured at the shape's configuration.
	MoE []MoERow `json:"moe,omitempty"`
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
	// SMs is the GPU's streaming-multiprocessor count, 0 when the system
	// file does not say (then decode attention is priced at a batch's mean
	// context; see Ops).
	SMs float64 `json:"sms,omitempty"`
	// IntraNodeBandwidth is the GPU-to-GPU bandwidth per direction in
	// bytes/s (all-reduce past the measured message sizes).
	IntraNodeBandwidth float64 `json:"intra_node_bw"`
}

// GEMMRow is one measured GEMM: an (M×K)·(K×N) product in DType.
type GEMMRow struct {
	DType string `json:"dtype"` // e.g. "bfloat16", "fp8"
	M     int    `json:"m"`     // tokens
	N     int    `json:"n"`     // output features
	K     int    `json:"k"`     // input features
	// Eager marks a row measured launched from the host call by call
	// (dispatch included); the others are device time in a CUDA graph.
	Eager     bool    `json:"eager,omitempty"`
	LatencyMs float64 `json:"latency_ms"`
	// HostMs, on an eager row, is the host's time to issue one call (0:
	// not measured): with it an eager pass is priced as the host and the
	// device working ahead of each other (see Ops).
	HostMs float64 `json:"host_ms,omitempty"`
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
	Window    int     `json:"window"`          // sliding window; 0 for full attention
	DType     string  `json:"dtype"`           // compute dtype ("" when the table does not say)
	KVDType   string  `json:"kv_dtype"`        // KV-cache dtype, e.g. "bfloat16", "fp8"
	Eager     bool    `json:"eager,omitempty"` // as GEMMRow.Eager
	LatencyMs float64 `json:"latency_ms"`
	HostMs    float64 `json:"host_ms,omitempty"` // as GEMMRow.HostMs
}

// ElementwiseRow is one measured element-wise operation of a layer over M
// token rows of width N, in DType (see ElementwiseOps for the operations
// and what N is for each).
type ElementwiseRow struct {
	Op        string  `json:"op"`
	M         int     `json:"m"`
	N         int     `json:"n"`
	DType     string  `json:"dtype"`
	Eager     bool    `json:"eager,omitempty"` // as GEMMRow.Eager
	LatencyMs float64 `json:"latency_ms"`
	HostMs    float64 `json:"host_ms,omitempty"` // as GEMMRow.HostMs
}

// The element-wise operations a database can measure. N is the width the
// operation runs over per token row. An engine that fuses one away leaves
// it out of its table and the composition does not price it; one that runs
// two consecutive operations of the pass as one kernel (ElementwiseFusions)
// lists the fused operation, which then replaces its parts.
const (
	OpRMSNorm     = "rmsnorm"      // N = hidden; twice a layer, and once on the sampled rows
	OpResidualAdd = "residual_add" // N = hidden; twice a layer
	OpRoPE        = "rope"         // N = (query heads + KV heads)·head_dim: splitting the q/k/v projection and rotating q and k
	OpKVWrite     = "kv_write"     // N = KV heads·head_dim: storing the step's keys and values in the cache
	OpSiLUMul     = "silu_mul"     // N = the MLP's intermediate width
	OpEmbedding   = "embedding"    // N = hidden; once a step
	// OpAddRMSNorm is residual_add and the rmsnorm after it in one pass
	// (the residual updated in place); N = hidden.
	OpAddRMSNorm = "add_rmsnorm"
	// OpRoPEKVWrite is rope and kv_write in one pass over the q/k/v
	// projection; N = (query heads + 2·KV heads)·head_dim, the width it
	// reads.
	OpRoPEKVWrite = "rope_kv_write"
)

// ElementwiseOps lists the operations an element-wise table may hold.
var ElementwiseOps = []string{OpRMSNorm, OpResidualAdd, OpRoPE, OpKVWrite, OpSiLUMul, OpEmbedding, OpAddRMSNorm, OpRoPEKVWrite}

// ElementwiseFusion is an element-wise operation that runs two
// consecutive ones of the pass, Parts[0] then Parts[1] over the same rows,
// as one kernel.
type ElementwiseFusion struct {
	Op    string
	Parts [2]string
}

// ElementwiseFusions are the fused operations the composition knows.
var ElementwiseFusions = []ElementwiseFusion{
	{OpAddRMSNorm, [2]string{OpResidualAdd, OpRMSNorm}},
	{OpRoPEKVWrite, [2]string{OpRoPE, OpKVWrite}},
}

// MoERow is one measured fused mixture-of-experts layer (routing,
// grouped expert GEMMs and the combine): Tokens tokens, each routed to
// TopK of Experts experts of intermediate width Inter (the whole expert's,
// split TP ways) over Hidden, the experts spread EP ways, with the tokens
// routed by Distribution ("balanced", "power_law_1.01", ...).
type MoERow struct {
	DType        string  `json:"dtype"`
	Tokens       int     `json:"tokens"`
	Hidden       int     `json:"hidden"`
	Inter        int     `json:"inter"`
	TopK         int     `json:"top_k"`
	Experts      int     `json:"experts"`
	TP           int     `json:"tp"`
	EP           int     `json:"ep"`
	Distribution string  `json:"distribution"`
	Eager        bool    `json:"eager,omitempty"` // as GEMMRow.Eager
	LatencyMs    float64 `json:"latency_ms"`
	HostMs       float64 `json:"host_ms,omitempty"` // as GEMMRow.HostMs
}

// MoERoutings are the routing distributions the prior reads a MoE table
// at, in order of preference: AIConfigurator's default for its MoE models
// (a power law of exponent 1.01 over the experts: real routers are not
// balanced); then steplab's worker's untilted random router (each token's
// top k about uniformly at random, independently of the others: the
// uniform routing the prior assumes without a table, and how the worker's
// captures route, routing_skew 0); then balanced routing.
var MoERoutings = []string{"power_law_1.01", "routing_skew_0", "balanced"}

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
	OpTableElementwise         = "elementwise"
	OpTableMoE                 = "moe"
)

var (
	gemmAxes = []string{"n", "k", "m"}
	attnAxes = []string{"head_dim", "kv_heads", "heads", "seq_len", "batch"}
	arAxes   = []string{"gpus", "message_bytes"}
	ewAxes   = []string{"n", "m"}
	moeAxes  = []string{"tokens"}
)

// opIndex is the part of an OpDB one model shape reads, ready to look
// up: its GEMM dtype, its attention dtypes (full attention, window 0), the
// CUDA-graph all-reduces (nil when the database has none), and its
// element-wise operations (nil: priced by the memory-op formula), each
// for the two ways a step launches.
type opIndex struct {
	sys       OpSystem
	allreduce *opTable
	// arFloor is the smallest message the all-reduce table measured.
	arFloor float64
	launch  [2]launchIndex // by launch: graph, eager
	// host holds the host's issue time of the eager rows that record it;
	// hostOK when the GEMM and both attention tables have it, and the MoE
	// table where it prices the shape's experts.
	host   launchIndex
	hostOK bool
	// moeRouting is the routing the launches' MoE tables were read at (""
	// when the database did not measure the shape's configuration).
	moeRouting string
}

// The two ways a step's kernels are launched, indexing opIndex.launch.
const (
	launchGraph = iota
	launchEager
)

// launchIndex is the tables of one launch. An eager table the database
// did not measure is its graph table (device time only).
type launchIndex struct {
	// gemm is the GEMM table of each role's dtype (roleMLP ...).
	gemm     [nGEMMRoles]*opTable
	ctx, gen *opTable
	// ew holds one table per ElementwiseOps entry, nil for an operation the
	// database does not measure; ew itself is nil without an element-wise
	// table.
	ew []*opTable
	// moe is the fused MoE layer of the shape's experts by tokens (nil when
	// the database did not measure that configuration: the experts are
	// then priced as GEMMs).
	moe *opTable
}

// index validates the rows the shape reads and builds their tables. An
// error names the table, the row and the field, or what the database has
// when it has nothing for the shape.
func (db *OpDB) index(sh *opsShape) (*opIndex, error) {
	if err := db.System.validate(); err != nil {
		return nil, fmt.Errorf("opdb %s: %w", db.Name, err)
	}
	x := &opIndex{sys: db.System, moeRouting: db.moeRouting(sh)}
	for l := range x.launch {
		if err := db.indexLaunch(sh, l == launchEager, false, x.moeRouting, &x.launch[l]); err != nil {
			return nil, err
		}
	}
	if err := db.indexLaunch(sh, true, true, x.moeRouting, &x.host); err != nil {
		return nil, err
	}
	x.hostOK = x.host.ctx != nil && x.host.gen != nil && (x.moeRouting == "" || x.host.moe != nil)
	for _, t := range x.host.gemm {
		x.hostOK = x.hostOK && t != nil
	}
	// A table measured one way only serves both (a CPU run measures eager
	// calls only; AIConfigurator's tables are graph rows).
	g, e := &x.launch[launchGraph], &x.launch[launchEager]
	for r := range g.gemm {
		g.gemm[r], e.gemm[r] = orTable(g.gemm[r], e.gemm[r]), orTable(e.gemm[r], g.gemm[r])
	}
	g.ctx, g.gen, g.moe = orTable(g.ctx, e.ctx), orTable(g.gen, e.gen), orTable(g.moe, e.moe)
	e.ctx, e.gen, e.moe = orTable(e.ctx, g.ctx), orTable(e.gen, g.gen), orTable(e.moe, g.moe)
	for r, t := range g.gemm {
		if t == nil && (r != roleExpert || (sh.experts > 0 && g.moe == nil)) {
			have := map[string]bool{}
			for _, r := range db.GEMM {
				have[r.DType] = true
			}
			return nil, fmt.Errorf("opdb %s: no %s GEMMs measured (have %s): price it with fpm: roofline, or give a database that measured them", db.Name, sh.gemmDType[r], strings.Join(sortedKeys(have), ", "))
		}
	}
	for _, t := range []struct {
		name string
		rows []AttentionRow
		tab  *opTable
	}{{OpTableContextAttention, db.ContextAttention, g.ctx}, {OpTableGenerationAttention, db.GenerationAttention, g.gen}} {
		if t.tab == nil {
			have := map[string]bool{}
			for _, r := range t.rows {
				have[fmt.Sprintf("%s with a %s KV cache, window %d", r.DType, r.KVDType, r.Window)] = true
			}
			return nil, fmt.Errorf("opdb %s: no %s measured in %s with a %s KV cache, window 0 (have %s)",
				db.Name, t.name, sh.computeDType, sh.kvDType, strings.Join(sortedKeys(have), "; "))
		}
	}
	switch {
	case g.ew == nil:
		g.ew = e.ew
	case e.ew == nil:
		e.ew = g.ew
	default:
		for i := range e.ew {
			e.ew[i], g.ew[i] = orTable(e.ew[i], g.ew[i]), orTable(g.ew[i], e.ew[i])
		}
	}
	ab := newOpTableBuilder(fmt.Sprintf("opdb %s: %s", db.Name, OpTableAllReduce), arAxes)
	for i, r := range db.AllReduce {
		if !r.Graph {
			continue
		}
		if err := ab.add(i, opCoords{float64(r.GPUs), float64(r.MessageBytes)}, r.LatencyMs); err != nil {
			return nil, err
		}
		if m := float64(r.MessageBytes); x.arFloor == 0 || m < x.arFloor {
			x.arFloor = m
		}
	}
	if len(ab.root) > 0 {
		x.allreduce = ab.build()
	}
	return x, nil
}

func orTable(t, fallback *opTable) *opTable {
	if t == nil {
		return fallback
	}
	return t
}

// indexLaunch builds the tables of the rows measured one way (eager or
// from a CUDA graph), of their latencies or, with host, of the host issue
// times eager rows record, the MoE table at routing; a table without such
// rows is left nil.
func (db *OpDB) indexLaunch(sh *opsShape, eager, host bool, routing string, li *launchIndex) error {
	how := ""
	if eager {
		how = " (eager)"
	}
	if host {
		how = " (host issue)"
	}
	// value is what a row contributes: its latency, or its host time (a
	// row without one is skipped).
	value := func(lat, hostMs float64) (float64, bool) {
		if host {
			return hostMs, hostMs > 0
		}
		return lat, true
	}
	byDType := map[string]*opTable{}
	for role, dt := range sh.gemmDType {
		t, done := byDType[dt]
		if !done {
			gb := newOpTableBuilder(fmt.Sprintf("opdb %s: %s %s%s", db.Name, dt, OpTableGEMM, how), gemmAxes)
			for i, r := range db.GEMM {
				v, ok := value(r.LatencyMs, r.HostMs)
				if r.DType != dt || r.Eager != eager || !ok {
					continue
				}
				if err := gb.add(i, opCoords{float64(r.N), float64(r.K), float64(r.M)}, v); err != nil {
					return err
				}
			}
			t = gb.built()
			byDType[dt] = t
		}
		li.gemm[role] = t
	}
	var err error
	if li.ctx, err = db.attnIndex(OpTableContextAttention+how, db.ContextAttention, sh, eager, value); err != nil {
		return err
	}
	if li.gen, err = db.attnIndex(OpTableGenerationAttention+how, db.GenerationAttention, sh, eager, value); err != nil {
		return err
	}
	if li.moe, err = db.moeIndex(sh, routing, how, eager, value); err != nil {
		return err
	}
	if len(db.Elementwise) == 0 {
		return nil
	}
	builders := make([]*opTableBuilder, len(ElementwiseOps))
	for i, op := range ElementwiseOps {
		builders[i] = newOpTableBuilder(fmt.Sprintf("opdb %s: %s %s%s", db.Name, OpTableElementwise, op, how), ewAxes)
	}
	measured := false
	for i, r := range db.Elementwise {
		k := slices.Index(ElementwiseOps, r.Op)
		if k < 0 {
			return fmt.Errorf("opdb %s: %s row %d: unknown op %q (known: %s)", db.Name, OpTableElementwise, i, r.Op, strings.Join(ElementwiseOps, ", "))
		}
		v, ok := value(r.LatencyMs, r.HostMs)
		if (r.DType != sh.computeDType && r.DType != "") || r.Eager != eager || !ok {
			continue
		}
		if err := builders[k].add(i, opCoords{float64(r.N), float64(r.M)}, v); err != nil {
			return err
		}
		measured = true
	}
	if measured {
		li.ew = make([]*opTable, len(builders))
		for i, b := range builders {
			li.ew[i] = b.built()
		}
	}
	return nil
}

// attnIndex builds the attention table of the shape's compute and KV
// dtypes, full attention, launched one way (rows whose table names no
// compute dtype serve any); nil when no row qualifies.
func (db *OpDB) attnIndex(name string, rows []AttentionRow, sh *opsShape, eager bool, value func(lat, host float64) (float64, bool)) (*opTable, error) {
	b := newOpTableBuilder(fmt.Sprintf("opdb %s: %s", db.Name, name), attnAxes)
	for i, r := range rows {
		v, ok := value(r.LatencyMs, r.HostMs)
		if (r.DType != sh.computeDType && r.DType != "") || r.KVDType != sh.kvDType || r.Window != 0 || r.Eager != eager || !ok {
			continue
		}
		c := opCoords{float64(r.HeadDim), float64(r.KVHeads), float64(r.Heads), float64(r.SeqLen), float64(r.Batch)}
		if err := b.add(i, c, v); err != nil {
			return nil, err
		}
	}
	return b.built(), nil
}

// moeMatches reports whether a fused-MoE row measured the shape's experts
// (dtype, hidden, width, top-k, count, TP, no expert parallelism).
func (sh *opsShape) moeMatches(r *MoERow) bool {
	return r.DType == sh.gemmDType[roleExpert] && r.Hidden == sh.hidden && r.Inter == sh.expertInter*sh.tp &&
		r.TopK == sh.topK && r.Experts == sh.experts && r.TP == sh.tp && r.EP == 1
}

// moeRouting is the first routing of MoERoutings at which the database
// measured the shape's experts, "" when it has none (or the shape is
// dense).
func (db *OpDB) moeRouting(sh *opsShape) string {
	if sh.experts == 0 {
		return ""
	}
	for _, routing := range MoERoutings {
		for i := range db.MoE {
			if r := &db.MoE[i]; r.Distribution == routing && sh.moeMatches(r) {
				return routing
			}
		}
	}
	return ""
}

// moeIndex builds the fused-MoE table of the shape's experts at routing,
// launched one way; nil when routing is "" or no row qualifies.
func (db *OpDB) moeIndex(sh *opsShape, routing, how string, eager bool, value func(lat, host float64) (float64, bool)) (*opTable, error) {
	if routing == "" {
		return nil, nil
	}
	b := newOpTableBuilder(fmt.Sprintf("opdb %s: %s %s %s%s", db.Name, sh.gemmDType[roleExpert], OpTableMoE, routing, how), moeAxes)
	for i := range db.MoE {
		r := &db.MoE[i]
		v, ok := value(r.LatencyMs, r.HostMs)
		if r.Distribution != routing || !sh.moeMatches(r) || r.Eager != eager || !ok {
			continue
		}
		if err := b.add(i, opCoords{float64(r.Tokens)}, v); err != nil {
			return nil, err
		}
	}
	return b.built(), nil
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
