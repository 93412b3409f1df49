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

	"go.yaml.in/yaml/v3"

	"github.com/steplab/steplab/model"
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
	// MetaFile, in a table's folder, records the framework the table was
	// measured under (runtime.framework, runtime.version).
	MetaFile = "collection_meta.yaml"
)

// LoadDir reads the database in directory dir (see the package
// documentation for the layout). Its name is the directory's base name.
func LoadDir(dir string) (*model.OpDB, error) {
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
	return db, nil
}

// LoadFS reads a database from the root of fsys and names it name. Every
// error names the file and, for a bad value, the column and row.
func LoadFS(fsys fs.FS, name string) (*model.OpDB, error) {
	db := &model.OpDB{Name: name}
	var err error
	if db.System, err = readSystem(fsys); err != nil {
		return nil, err
	}
	if db.Framework, db.Version, err = readMeta(fsys, path.Dir(GEMMFile)); err != nil {
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

func readSystem(fsys fs.FS) (model.OpSystem, error) {
	b, err := fs.ReadFile(fsys, SystemFile)
	if err != nil {
		return model.OpSystem{}, fmt.Errorf("%s: %w (every database needs its GPU's system file)", SystemFile, err)
	}
	var y systemYAML
	if err := yaml.Unmarshal(b, &y); err != nil {
		return model.OpSystem{}, fmt.Errorf("%s: %w", SystemFile, err)
	}
	s := model.OpSystem{GPU: path.Base(y.DataDir), MemBandwidth: y.GPU.MemBW, BF16FLOPS: y.GPU.BF16TCFLOPS,
		MemBWScaling: y.GPU.MemBWScaling, MemConstantS: y.GPU.MemConstantS, IntraNodeBandwidth: y.Node.IntraNodeBW, SMs: y.GPU.SMCount}
	for _, f := range []struct {
		key string
		v   float64
	}{{"gpu.mem_bw", s.MemBandwidth}, {"gpu.bfloat16_tc_flops", s.BF16FLOPS}, {"gpu.mem_bw_empirical_scaling_factor", s.MemBWScaling}} {
		if !(f.v > 0) || math.IsInf(f.v, 0) {
			return model.OpSystem{}, fmt.Errorf("%s: %s is %v: must be a positive number", SystemFile, f.key, f.v)
		}
	}
	for _, f := range []struct {
		key string
		v   float64
	}{{"gpu.mem_empirical_constant_latency", s.MemConstantS}, {"node.intra_node_bw", s.IntraNodeBandwidth}, {"gpu.sm_count", s.SMs}} {
		if !(f.v >= 0) || math.IsInf(f.v, 0) {
			return model.OpSystem{}, fmt.Errorf("%s: %s is %v: must be >= 0", SystemFile, f.key, f.v)
		}
	}
	return s, nil
}

// readMeta reads the framework and version a table folder was measured
// under; a folder without a meta file says nothing ("", "").
func readMeta(fsys fs.FS, dir string) (framework, version string, err error) {
	name := path.Join(dir, MetaFile)
	b, err := fs.ReadFile(fsys, name)
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", nil
	}
	if err != nil {
		return "", "", err
	}
	var m struct {
		Runtime struct {
			Framework string `yaml:"framework"`
			Version   string `yaml:"version"`
		} `yaml:"runtime"`
	}
	if err := yaml.Unmarshal(b, &m); err != nil {
		return "", "", fmt.Errorf("%s: %w", name, err)
	}
	return strings.ToLower(m.Runtime.Framework), m.Runtime.Version, nil
}

func readGEMM(fsys fs.FS) ([]model.GEMMRow, error) {
	c, err := openColumns(fsys, GEMMFile)
	if err != nil {
		return nil, err
	}
	dt, err := c.strings("gemm_dtype")
	if err != nil {
		return nil, err
	}
	var mnk [3][]int
	for i, col := range []string{"m", "n", "k"} {
		if mnk[i], err = c.positiveInts(col); err != nil {
			return nil, err
		}
	}
	lat, err := c.latencies()
	if err != nil {
		return nil, err
	}
	eager, host, err := c.launches()
	if err != nil {
		return nil, err
	}
	rows := make([]model.GEMMRow, c.rows)
	for i := range rows {
		rows[i] = model.GEMMRow{DType: dt[i], M: mnk[0][i], N: mnk[1][i], K: mnk[2][i], Eager: eager[i], LatencyMs: lat[i], HostMs: host[i]}
	}
	return rows, nil
}

// readAttention reads an attention table. A generation table stores the
// KV length a decoding request attends to as isl + step; a context table
// has step 0 and isl the prompt length. Rows of beam width above one (beam
// search) are another operation and are left out.
func readAttention(fsys fs.FS, name string, generation bool) ([]model.AttentionRow, error) {
	c, err := openColumns(fsys, name)
	if err != nil {
		return nil, err
	}
	cols := []string{"batch_size", "isl", "num_heads", "num_key_value_heads", "head_dim"}
	var ints [5][]int
	for i, col := range cols {
		if ints[i], err = c.positiveInts(col); err != nil {
			return nil, err
		}
	}
	kvdt, err := c.strings("kv_cache_dtype")
	if err != nil {
		return nil, err
	}
	dt := make([]string, c.rows)
	if c.has("attn_dtype") {
		if dt, err = c.strings("attn_dtype"); err != nil {
			return nil, err
		}
	}
	step, err := c.intsOr("step", 0)
	if err != nil {
		return nil, err
	}
	window, err := c.intsOr("window_size", 0)
	if err != nil {
		return nil, err
	}
	beam, err := c.intsOr("beam_width", 1)
	if err != nil {
		return nil, err
	}
	lat, err := c.latencies()
	if err != nil {
		return nil, err
	}
	eager, host, err := c.launches()
	if err != nil {
		return nil, err
	}
	rows := make([]model.AttentionRow, 0, c.rows)
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
		r := model.AttentionRow{Batch: ints[0][i], SeqLen: ints[1][i], Heads: ints[2][i], KVHeads: ints[3][i], HeadDim: ints[4][i],
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
func readAllReduce(fsys fs.FS) ([]model.AllReduceRow, error) {
	c, err := openColumns(fsys, AllReduceFile)
	if err != nil {
		return nil, err
	}
	dt, err := c.strings("allreduce_dtype")
	if err != nil {
		return nil, err
	}
	gpus, err := c.positiveInts("num_gpus")
	if err != nil {
		return nil, err
	}
	msg, err := c.positiveInts("message_size")
	if err != nil {
		return nil, err
	}
	src, err := c.strings("kernel_source")
	if err != nil {
		return nil, err
	}
	backend := make([]string, c.rows)
	if c.has("backend") {
		if backend, err = c.strings("backend"); err != nil {
			return nil, err
		}
	}
	lat, err := c.latencies()
	if err != nil {
		return nil, err
	}
	rows := make([]model.AllReduceRow, c.rows)
	for i := range rows {
		rows[i] = model.AllReduceRow{DType: dt[i], GPUs: gpus[i], MessageBytes: int64(msg[i]),
			Graph: !strings.HasSuffix(src[i], "_eager") && !strings.HasSuffix(backend[i], "_eager"), LatencyMs: lat[i]}
	}
	return rows, nil
}

// readElementwise reads the element-wise table; a row names one of
// model.ElementwiseOps.
func readElementwise(fsys fs.FS) ([]model.ElementwiseRow, error) {
	c, err := openColumns(fsys, ElementwiseFile)
	if err != nil {
		return nil, err
	}
	op, err := c.strings("op")
	if err != nil {
		return nil, err
	}
	m, err := c.positiveInts("m")
	if err != nil {
		return nil, err
	}
	n, err := c.positiveInts("n")
	if err != nil {
		return nil, err
	}
	dt := make([]string, c.rows)
	if c.has("dtype") {
		if dt, err = c.strings("dtype"); err != nil {
			return nil, err
		}
	}
	lat, err := c.latencies()
	if err != nil {
		return nil, err
	}
	eager, host, err := c.launches()
	if err != nil {
		return nil, err
	}
	rows := make([]model.ElementwiseRow, c.rows)
	for i := range rows {
		if !slices.Contains(model.ElementwiseOps, op[i]) {
			return nil, fmt.Errorf("%s: column \"op\" row %d is %q: want one of %s", ElementwiseFile, i, op[i], strings.Join(model.ElementwiseOps, ", "))
		}
		rows[i] = model.ElementwiseRow{Op: op[i], M: m[i], N: n[i], DType: dt[i], Eager: eager[i], LatencyMs: lat[i], HostMs: host[i]}
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
func (c *columns) launches() (eager []bool, host []float64, err error) {
	eager, host = make([]bool, c.rows), make([]float64, c.rows)
	if c.has("launch") {
		v, err := c.strings("launch")
		if err != nil {
			return nil, nil, err
		}
		for i, s := range v {
			switch s {
			case LaunchGraph:
			case LaunchEager:
				eager[i] = true
			default:
				return nil, nil, fmt.Errorf("%s: column \"launch\" row %d is %q: want %q or %q", c.name, i, s, LaunchGraph, LaunchEager)
			}
		}
	}
	if !c.has("host_latency") {
		return eager, host, nil
	}
	if host, err = c.floats("host_latency"); err != nil {
		return nil, nil, err
	}
	for i, x := range host {
		if !(x >= 0) || math.IsInf(x, 0) || (x > 0 && !eager[i]) {
			return nil, nil, fmt.Errorf("%s: column \"host_latency\" row %d is %v: want a non-negative number of milliseconds, on eager rows only", c.name, i, x)
		}
	}
	return eager, host, nil
}

// positiveInts reads an integer column whose every value must be a
// positive int32 (a size or a count).
func (c *columns) positiveInts(col string) ([]int, error) {
	v, err := c.ints(col)
	if err != nil {
		return nil, err
	}
	out := make([]int, len(v))
	for i, x := range v {
		if x <= 0 || x > math.MaxInt32 {
			return nil, fmt.Errorf("%s: column %q row %d is %d: want a positive size", c.name, col, i, x)
		}
		out[i] = int(x)
	}
	return out, nil
}

// latencies reads the latency column (milliseconds), every value finite
// and positive.
func (c *columns) latencies() ([]float64, error) {
	v, err := c.floats("latency")
	if err != nil {
		return nil, err
	}
	for i, x := range v {
		if !(x > 0) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%s: column \"latency\" row %d is %v: want a positive number of milliseconds", c.name, i, x)
		}
	}
	return v, nil
}
