package opdb

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/internal/yamldoc"
)

// Files of a database directory, relative to its root.
const (
	SystemFile              = "system.yaml"
	GEMMFile                = "gemm/gemm_perf.parquet"
	ContextAttentionFile    = "attention/context_attention_perf.parquet"
	GenerationAttentionFile = "attention/generation_attention_perf.parquet"
	AllReduceFile           = "comm/custom_allreduce_perf.parquet"
	// ElementwiseFile is steplab's optional table of the engine's
	// element-wise operations (columns op, m, n, dtype, latency, launch).
	ElementwiseFile = "elementwise/elementwise_perf.parquet"
	// MoEFile is AIConfigurator's optional table of fused MoE layers
	// (moe_dtype, num_tokens, hidden_size, inter_size, topk, num_experts,
	// moe_tp_size, moe_ep_size, distribution, latency).
	MoEFile = "moe/moe_perf.parquet"
	// MetaFile, in a table's folder, records the framework the table was
	// measured under (runtime.framework, runtime.version).
	MetaFile = "collection_meta.yaml"
)

// LoadDir reads the database in directory dir (see the package
// documentation for the layout). Its name is the directory's base name.
func LoadDir(dir string) (*fpm.OpDB, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("opdb: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("opdb: %s is not a directory: point at a folder holding %s, %s, %s and %s",
			dir, SystemFile, GEMMFile, ContextAttentionFile, GenerationAttentionFile)
	}
	db, err := LoadFS(os.DirFS(dir), filepath.Base(filepath.Clean(dir)))
	if err != nil {
		return nil, fmt.Errorf("opdb: %s: %w", dir, err)
	}
	// An artifact of a prior over it points here from wherever it is read.
	if db.Source, err = filepath.Abs(dir); err != nil {
		return nil, fmt.Errorf("opdb: %w", err)
	}
	return db, nil
}

// LoadFS reads a database from the root of fsys and names it name. Every
// error names the file and, for a bad value, the column and row.
func LoadFS(fsys fs.FS, name string) (*fpm.OpDB, error) {
	db := &fpm.OpDB{Name: name}
	var err error
	if db.System, err = readSystem(fsys); err != nil {
		return nil, err
	}
	if db.Framework, db.Version, db.Generation, err = readMeta(fsys, path.Dir(GEMMFile)); err != nil {
		return nil, err
	}
	if db.GEMM, err = readGEMM(fsys); err != nil {
		return nil, err
	}
	if db.ContextAttention, err = readAttention(fsys, ContextAttentionFile, false); err != nil {
		return nil, err
	}
	if db.GenerationAttention, err = readAttention(fsys, GenerationAttentionFile, true); err != nil {
		return nil, err
	}
	if _, err := fs.Stat(fsys, AllReduceFile); err == nil {
		if db.AllReduce, err = readAllReduce(fsys); err != nil {
			return nil, err
		}
	}
	if _, err := fs.Stat(fsys, ElementwiseFile); err == nil {
		if db.Elementwise, err = readElementwise(fsys); err != nil {
			return nil, err
		}
	}
	if _, err := fs.Stat(fsys, MoEFile); err == nil {
		if db.MoE, err = readMoE(fsys); err != nil {
			return nil, err
		}
	}
	return db, nil
}

// systemYAML is the part of an AIConfigurator system file the prior reads.
type systemYAML struct {
	DataDir string `yaml:"data_dir"`
	GPU     struct {
		MemBW        float64 `yaml:"mem_bw"`
		MemBWScaling float64 `yaml:"mem_bw_empirical_scaling_factor"`
		MemConstantS float64 `yaml:"mem_empirical_constant_latency"`
		BF16TCFLOPS  float64 `yaml:"bfloat16_tc_flops"`
		SMCount      float64 `yaml:"sm_count"` // steplab's; AIConfigurator's files lack it
	} `yaml:"gpu"`
	Node struct {
		IntraNodeBW float64 `yaml:"intra_node_bw"`
	} `yaml:"node"`
}

func readSystem(fsys fs.FS) (fpm.OpSystem, error) {
	b, err := fs.ReadFile(fsys, SystemFile)
	if err != nil {
		return fpm.OpSystem{}, fmt.Errorf("%s: %w (every database needs its GPU's system file)", SystemFile, err)
	}
	var y systemYAML
	if err := yamldoc.Unmarshal(b, &y); err != nil {
		return fpm.OpSystem{}, fmt.Errorf("%s: %w", SystemFile, err)
	}
	s := fpm.OpSystem{GPU: path.Base(y.DataDir), MemBandwidth: y.GPU.MemBW, BF16FLOPS: y.GPU.BF16TCFLOPS,
		MemBWScaling: y.GPU.MemBWScaling, MemConstantS: y.GPU.MemConstantS, IntraNodeBandwidth: y.Node.IntraNodeBW, SMs: y.GPU.SMCount}
	for _, f := range []struct {
		key string
		v   float64
	}{{"gpu.mem_bw", s.MemBandwidth}, {"gpu.bfloat16_tc_flops", s.BF16FLOPS}, {"gpu.mem_bw_empirical_scaling_factor", s.MemBWScaling}} {
		if !(f.v > 0) || math.IsInf(f.v, 0) {
			return fpm.OpSystem{}, fmt.Errorf("%s: %s is %v: must be a positive number", SystemFile, f.key, f.v)
		}
	}
	for _, f := range []struct {
		key string
		v   float64
	}{{"gpu.mem_empirical_constant_latency", s.MemConstantS}, {"node.intra_node_bw", s.IntraNodeBandwidth}, {"gpu.sm_count", s.SMs}} {
		if !(f.v >= 0) || math.IsInf(f.v, 0) {
			return fpm.OpSystem{}, fmt.Errorf("%s: %s is %v: must be >= 0", SystemFile, f.key, f.v)
		}
	}
	return s, nil
}

// readMeta reads the framework, version and (steplab's worker) worker
// generation a table folder was measured under; a folder without a meta
// file says nothing.
func readMeta(fsys fs.FS, dir string) (framework, version, generation string, err error) {
	name := path.Join(dir, MetaFile)
	b, err := fs.ReadFile(fsys, name)
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", "", nil
	}
	if err != nil {
		return "", "", "", err
	}
	var m struct {
		Runtime struct {
			Framework  string `yaml:"framework"`
			Version    string `yaml:"version"`
			Generation string `yaml:"worker_generation"`
		} `yaml:"runtime"`
	}
	if err := yamldoc.Unmarshal(b, &m); err != nil {
		return "", "", "", fmt.Errorf("%s: %w", name, err)
	}
	return strings.ToLower(m.Runtime.Framework), m.Runtime.Version, m.Runtime.Generation, nil
}

func readGEMM(fsys fs.FS) ([]fpm.GEMMRow, error) {
	c, err := openColumns(fsys, GEMMFile)
	if err != nil {
		return nil, err
	}
	dt := c.strings("gemm_dtype")
	m, n, k := c.positiveInts("m"), c.positiveInts("n"), c.positiveInts("k")
	lat := c.latencies()
	eager, host := c.launches()
	if c.err != nil {
		return nil, c.err
	}
	rows := make([]fpm.GEMMRow, c.rows)
	for i := range rows {
		rows[i] = fpm.GEMMRow{DType: dt[i], M: m[i], N: n[i], K: k[i], Eager: eager[i], LatencyMs: lat[i], HostMs: host[i]}
	}
	return rows, nil
}

// readMoE reads a fused-MoE table.
func readMoE(fsys fs.FS) ([]fpm.MoERow, error) {
	c, err := openColumns(fsys, MoEFile)
	if err != nil {
		return nil, err
	}
	dt, dist := c.strings("moe_dtype"), c.strings("distribution")
	tokens, hidden, inter := c.positiveInts("num_tokens"), c.positiveInts("hidden_size"), c.positiveInts("inter_size")
	topK, experts := c.positiveInts("topk"), c.positiveInts("num_experts")
	tp, ep := c.positiveInts("moe_tp_size"), c.positiveInts("moe_ep_size")
	lat := c.latencies()
	eager, host := c.launches()
	if c.err != nil {
		return nil, c.err
	}
	rows := make([]fpm.MoERow, c.rows)
	for i := range rows {
		rows[i] = fpm.MoERow{DType: dt[i], Tokens: tokens[i], Hidden: hidden[i], Inter: inter[i], TopK: topK[i],
			Experts: experts[i], TP: tp[i], EP: ep[i], Distribution: dist[i], Eager: eager[i], LatencyMs: lat[i], HostMs: host[i]}
	}
	return rows, nil
}

// readAttention reads an attention table. A generation table stores the
// KV length a decoding request attends to as isl + step; a context table
// has step 0 and isl the prompt length. Rows of beam width above one (beam
// search) are another operation and are left out.
func readAttention(fsys fs.FS, name string, generation bool) ([]fpm.AttentionRow, error) {
	c, err := openColumns(fsys, name)
	if err != nil {
		return nil, err
	}
	batch, isl := c.positiveInts("batch_size"), c.positiveInts("isl")
	heads, kvHeads, headDim := c.positiveInts("num_heads"), c.positiveInts("num_key_value_heads"), c.positiveInts("head_dim")
	kvdt, dt := c.strings("kv_cache_dtype"), c.stringsOr("attn_dtype")
	step, window, beam := c.intsOr("step", 0), c.intsOr("window_size", 0), c.intsOr("beam_width", 1)
	lat := c.latencies()
	eager, host := c.launches()
	if c.err != nil {
		return nil, c.err
	}
	rows := make([]fpm.AttentionRow, 0, c.rows)
	for i := 0; i < c.rows; i++ {
		if beam[i] != 1 {
			continue
		}
		if step[i] < 0 || step[i] > math.MaxInt32 || (!generation && step[i] != 0) {
			return nil, fmt.Errorf("%s: column \"step\" row %d is %d: want 0 in a context table, >= 0 in a generation one", name, i, step[i])
		}
		if window[i] < 0 || window[i] > math.MaxInt32 {
			return nil, fmt.Errorf("%s: column \"window_size\" row %d is %d: want >= 0", name, i, window[i])
		}
		r := fpm.AttentionRow{Batch: batch[i], SeqLen: isl[i], Heads: heads[i], KVHeads: kvHeads[i], HeadDim: headDim[i],
			Window: int(window[i]), DType: dt[i], KVDType: kvdt[i], Eager: eager[i], LatencyMs: lat[i], HostMs: host[i]}
		if generation {
			r.SeqLen += int(step[i])
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: no rows of beam width 1", name)
	}
	return rows, nil
}

// readAllReduce reads the all-reduce table. A row whose kernel_source or
// backend ends in "_eager" was launched eagerly, any other from a CUDA
// graph (the convention of AIConfigurator's loader).
func readAllReduce(fsys fs.FS) ([]fpm.AllReduceRow, error) {
	c, err := openColumns(fsys, AllReduceFile)
	if err != nil {
		return nil, err
	}
	dt := c.strings("allreduce_dtype")
	gpus, msg := c.positiveInts("num_gpus"), c.positiveInts("message_size")
	src, backend := c.strings("kernel_source"), c.stringsOr("backend")
	lat := c.latencies()
	if c.err != nil {
		return nil, c.err
	}
	rows := make([]fpm.AllReduceRow, c.rows)
	for i := range rows {
		rows[i] = fpm.AllReduceRow{DType: dt[i], GPUs: gpus[i], MessageBytes: int64(msg[i]),
			Graph: !strings.HasSuffix(src[i], "_eager") && !strings.HasSuffix(backend[i], "_eager"), LatencyMs: lat[i]}
	}
	return rows, nil
}

// readElementwise reads the element-wise table; a row names one of
// fpm.ElementwiseOps.
func readElementwise(fsys fs.FS) ([]fpm.ElementwiseRow, error) {
	c, err := openColumns(fsys, ElementwiseFile)
	if err != nil {
		return nil, err
	}
	op := c.strings("op")
	m, n := c.positiveInts("m"), c.positiveInts("n")
	dt := c.stringsOr("dtype")
	lat := c.latencies()
	eager, host := c.launches()
	if c.err != nil {
		return nil, c.err
	}
	rows := make([]fpm.ElementwiseRow, c.rows)
	for i := range rows {
		if !slices.Contains(fpm.ElementwiseOps, op[i]) {
			return nil, fmt.Errorf("%s: column \"op\" row %d is %q: want one of %s", ElementwiseFile, i, op[i], strings.Join(fpm.ElementwiseOps, ", "))
		}
		rows[i] = fpm.ElementwiseRow{Op: op[i], M: m[i], N: n[i], DType: dt[i], Eager: eager[i], LatencyMs: lat[i], HostMs: host[i]}
	}
	return rows, nil
}

// Values of the optional launch column: how a row's kernels were launched.
const (
	LaunchGraph = "graph" // replayed from a CUDA graph: device time (a table without the column)
	LaunchEager = "eager" // called one by one from the host, dispatch included
)

// launches reads the optional launch column as whether each row ran
// eagerly, and the optional host_latency column (ms; eager rows only) as
// the host's issue time per call, 0 where not recorded.
func (c *columns) launches() (eager []bool, host []float64) {
	eager, host = make([]bool, c.rows), make([]float64, c.rows)
	present := c.has("launch")
	for i, s := range c.stringsOr("launch") {
		switch {
		case s == LaunchEager:
			eager[i] = true
		case s == LaunchGraph || (s == "" && !present):
		default:
			c.fail("column \"launch\" row %d is %q: want %q or %q", i, s, LaunchGraph, LaunchEager)
		}
	}
	if !c.has("host_latency") {
		return eager, host
	}
	host = c.floats("host_latency")
	for i, x := range host {
		if !(x >= 0) || math.IsInf(x, 0) || (x > 0 && !eager[i]) {
			c.fail("column \"host_latency\" row %d is %v: want a non-negative number of milliseconds, on eager rows only", i, x)
		}
	}
	if c.err != nil {
		return nil, nil
	}
	return eager, host
}

// positiveInts reads an integer column whose every value must be a
// positive int32 (a size or a count).
func (c *columns) positiveInts(col string) []int {
	v := c.ints(col)
	out := make([]int, len(v))
	for i, x := range v {
		if x <= 0 || x > math.MaxInt32 {
			c.fail("column %q row %d is %d: want a positive size", col, i, x)
			return nil
		}
		out[i] = int(x)
	}
	return out
}

// latencies reads the latency column (milliseconds), every value finite
// and positive.
func (c *columns) latencies() []float64 {
	v := c.floats("latency")
	for i, x := range v {
		if !(x > 0) || math.IsInf(x, 0) {
			c.fail("column \"latency\" row %d is %v: want a positive number of milliseconds", i, x)
			return nil
		}
	}
	return v
}
