package opdb

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/parquet-go/parquet-go"
	"go.yaml.in/yaml/v3"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fpm"
)

// The files WriteDir writes, with AIConfigurator's column names (plus
// launch, and the element-wise table).
type (
	gemmFile struct {
		DType   string  `parquet:"gemm_dtype"`
		M       int64   `parquet:"m"`
		N       int64   `parquet:"n"`
		K       int64   `parquet:"k"`
		Launch  string  `parquet:"launch"`
		Latency float64 `parquet:"latency"`
		Host    float64 `parquet:"host_latency"`
	}
	attentionFile struct {
		Batch   int64   `parquet:"batch_size"`
		ISL     int64   `parquet:"isl"`
		Heads   int64   `parquet:"num_heads"`
		KVHeads int64   `parquet:"num_key_value_heads"`
		HeadDim int64   `parquet:"head_dim"`
		DType   string  `parquet:"attn_dtype"`
		KVDType string  `parquet:"kv_cache_dtype"`
		Window  int64   `parquet:"window_size"`
		Launch  string  `parquet:"launch"`
		Latency float64 `parquet:"latency"`
		Host    float64 `parquet:"host_latency"`
	}
	allReduceFile struct {
		DType   string  `parquet:"allreduce_dtype"`
		GPUs    int64   `parquet:"num_gpus"`
		Message int64   `parquet:"message_size"`
		Source  string  `parquet:"kernel_source"` // "…_eager" for an eager launch, as readAllReduce reads it
		Latency float64 `parquet:"latency"`
	}
	moeFile struct {
		DType        string  `parquet:"moe_dtype"`
		Tokens       int64   `parquet:"num_tokens"`
		Hidden       int64   `parquet:"hidden_size"`
		Inter        int64   `parquet:"inter_size"`
		TopK         int64   `parquet:"topk"`
		Experts      int64   `parquet:"num_experts"`
		TP           int64   `parquet:"moe_tp_size"`
		EP           int64   `parquet:"moe_ep_size"`
		Distribution string  `parquet:"distribution"`
		Latency      float64 `parquet:"latency"`
		Launch       string  `parquet:"launch"`
		Host         float64 `parquet:"host_latency"`
	}
	elementwiseFile struct {
		Op      string  `parquet:"op"`
		M       int64   `parquet:"m"`
		N       int64   `parquet:"n"`
		DType   string  `parquet:"dtype"`
		Launch  string  `parquet:"launch"`
		Latency float64 `parquet:"latency"`
		Host    float64 `parquet:"host_latency"`
	}
)

func launchOf(eager bool) string {
	if eager {
		return LaunchEager
	}
	return LaunchGraph
}

// WriteDir writes db as a database directory LoadDir reads: system.yaml
// from db.System, the GEMM and attention tables in AIConfigurator's
// layout with a launch column, the all-reduce and element-wise tables
// when db has them,
// and collection_meta.yaml naming db.Framework and db.Version. Rows are
// sorted, so the same database writes the same bytes. The directory is
// assembled under a temporary name and renamed when complete; an existing
// dir is replaced only with overwrite.
func WriteDir(dir string, db *fpm.OpDB, overwrite bool) error {
	if _, err := os.Stat(dir); err == nil && !overwrite {
		return fmt.Errorf("opdb: %s exists (overwrite it with --force)", dir)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := writeTables(tmp, db); err != nil {
		return fmt.Errorf("opdb: writing %s: %w", dir, err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if overwrite {
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	return os.Rename(tmp, dir)
}

func writeTables(dir string, db *fpm.OpDB) error {
	s := db.System
	sys := map[string]any{
		"data_dir": s.GPU,
		"gpu": map[string]any{"mem_bw": s.MemBandwidth, "bfloat16_tc_flops": s.BF16FLOPS,
			"mem_bw_empirical_scaling_factor": s.MemBWScaling, "mem_empirical_constant_latency": s.MemConstantS,
			"sm_count": s.SMs},
		"node": map[string]any{"intra_node_bw": s.IntraNodeBandwidth},
	}
	if err := writeYAML(filepath.Join(dir, SystemFile), sys); err != nil {
		return err
	}
	runtime := map[string]string{"framework": db.Framework, "version": db.Version}
	if db.Generation != "" {
		runtime["worker_generation"] = db.Generation
	}
	meta := map[string]any{"runtime": runtime}
	if err := writeYAML(filepath.Join(dir, filepath.Dir(GEMMFile), MetaFile), meta); err != nil {
		return err
	}
	gemm := make([]gemmFile, len(db.GEMM))
	for i, r := range db.GEMM {
		gemm[i] = gemmFile{r.DType, int64(r.M), int64(r.N), int64(r.K), launchOf(r.Eager), r.LatencyMs, r.HostMs}
	}
	slices.SortFunc(gemm, func(a, b gemmFile) int {
		return cmp.Or(cmp.Compare(a.DType, b.DType), cmp.Compare(a.Launch, b.Launch), cmp.Compare(a.N, b.N),
			cmp.Compare(a.K, b.K), cmp.Compare(a.M, b.M), cmp.Compare(a.Latency, b.Latency))
	})
	if err := writeParquet(filepath.Join(dir, GEMMFile), gemm); err != nil {
		return err
	}
	for _, t := range []struct {
		file string
		rows []fpm.AttentionRow
	}{{ContextAttentionFile, db.ContextAttention}, {GenerationAttentionFile, db.GenerationAttention}} {
		out := make([]attentionFile, len(t.rows))
		for i, r := range t.rows {
			out[i] = attentionFile{int64(r.Batch), int64(r.SeqLen), int64(r.Heads), int64(r.KVHeads), int64(r.HeadDim),
				r.DType, r.KVDType, int64(r.Window), launchOf(r.Eager), r.LatencyMs, r.HostMs}
		}
		slices.SortFunc(out, func(a, b attentionFile) int {
			return cmp.Or(cmp.Compare(a.DType, b.DType), cmp.Compare(a.KVDType, b.KVDType), cmp.Compare(a.Launch, b.Launch),
				cmp.Compare(a.HeadDim, b.HeadDim), cmp.Compare(a.KVHeads, b.KVHeads), cmp.Compare(a.Heads, b.Heads),
				cmp.Compare(a.Window, b.Window), cmp.Compare(a.ISL, b.ISL), cmp.Compare(a.Batch, b.Batch), cmp.Compare(a.Latency, b.Latency))
		})
		if err := writeParquet(filepath.Join(dir, t.file), out); err != nil {
			return err
		}
	}
	if len(db.AllReduce) > 0 {
		ar := make([]allReduceFile, len(db.AllReduce))
		for i, r := range db.AllReduce {
			src := "steplab"
			if !r.Graph {
				src += "_eager"
			}
			ar[i] = allReduceFile{r.DType, int64(r.GPUs), r.MessageBytes, src, r.LatencyMs}
		}
		slices.SortFunc(ar, func(a, b allReduceFile) int {
			return cmp.Or(cmp.Compare(a.DType, b.DType), cmp.Compare(a.Source, b.Source), cmp.Compare(a.GPUs, b.GPUs),
				cmp.Compare(a.Message, b.Message), cmp.Compare(a.Latency, b.Latency))
		})
		if err := writeParquet(filepath.Join(dir, AllReduceFile), ar); err != nil {
			return err
		}
	}
	if len(db.MoE) > 0 {
		if err := writeMoE(dir, db.MoE); err != nil {
			return err
		}
	}
	if len(db.Elementwise) == 0 {
		return nil
	}
	ew := make([]elementwiseFile, len(db.Elementwise))
	for i, r := range db.Elementwise {
		ew[i] = elementwiseFile{r.Op, int64(r.M), int64(r.N), r.DType, launchOf(r.Eager), r.LatencyMs, r.HostMs}
	}
	slices.SortFunc(ew, func(a, b elementwiseFile) int {
		return cmp.Or(cmp.Compare(a.Op, b.Op), cmp.Compare(a.DType, b.DType), cmp.Compare(a.Launch, b.Launch),
			cmp.Compare(a.N, b.N), cmp.Compare(a.M, b.M), cmp.Compare(a.Latency, b.Latency))
	})
	return writeParquet(filepath.Join(dir, ElementwiseFile), ew)
}

func writeMoE(dir string, rows []fpm.MoERow) error {
	out := make([]moeFile, len(rows))
	for i, r := range rows {
		out[i] = moeFile{r.DType, int64(r.Tokens), int64(r.Hidden), int64(r.Inter), int64(r.TopK), int64(r.Experts),
			int64(r.TP), int64(r.EP), r.Distribution, r.LatencyMs, launchOf(r.Eager), r.HostMs}
	}
	slices.SortFunc(out, func(a, b moeFile) int {
		return cmp.Or(cmp.Compare(a.DType, b.DType), cmp.Compare(a.Launch, b.Launch), cmp.Compare(a.Hidden, b.Hidden), cmp.Compare(a.Inter, b.Inter),
			cmp.Compare(a.TopK, b.TopK), cmp.Compare(a.Experts, b.Experts), cmp.Compare(a.TP, b.TP), cmp.Compare(a.EP, b.EP),
			cmp.Compare(a.Distribution, b.Distribution), cmp.Compare(a.Tokens, b.Tokens), cmp.Compare(a.Latency, b.Latency))
	})
	return writeParquet(filepath.Join(dir, MoEFile), out)
}

func writeYAML(path string, v any) error {
	b, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	return datasets.WriteFileAtomic(path, b)
}

func writeParquet[T any](path string, rows []T) error {
	return datasets.WriteAtomic(path, func(w io.Writer) error {
		pw := parquet.NewGenericWriter[T](w, parquet.Compression(&parquet.Zstd))
		if _, err := pw.Write(rows); err != nil {
			return err
		}
		return pw.Close()
	})
}
