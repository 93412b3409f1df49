package opdb

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/steplab/steplab/fpm"
	"io"
	"math"
	"slices"
	"strings"
)

// BenchMeta is what an operations benchmark says about where it ran (the
// first line of its output).
type BenchMeta struct {
	GPU     string `json:"gpu"`
	Device  string `json:"device"`
	Torch   string `json:"torch"`
	Triton  string `json:"triton"`
	SMCount int    `json:"sm_count"`
	GPUUUID string `json:"gpu_uuid"`
	// CPU is the host's processor: eager rows time its dispatch, so a
	// database carries its host's speed.
	CPU      string   `json:"cpu"`
	Launches []string `json:"launches"`
	// WorkerGeneration is the worker's generation that ran the benchmark
	// (capture/worker/config.py; "" before it was recorded) and
	// AttentionBackend the backend its pass runs there (triton: the
	// fused element-wise kernels; torch: the PyTorch steps).
	WorkerGeneration string `json:"worker_generation"`
	AttentionBackend string `json:"attention_backend"`
}

// benchRow is one line of an operations benchmark's output: a table name,
// the coordinates of that table and a latency in ms.
type benchRow struct {
	Table     string   `json:"table"`
	Launch    string   `json:"launch"`
	DType     string   `json:"dtype"`
	LatencyMs *float64 `json:"latency_ms"`
	HostMs    float64  `json:"host_ms"` // eager rows: the host's issue time per call
	// gemm, elementwise
	M, N, K int
	Op      string `json:"op"`
	// attention
	Batch   int    `json:"batch_size"`
	ISL     int    `json:"isl"`
	Heads   int    `json:"num_heads"`
	KVHeads int    `json:"num_key_value_heads"`
	HeadDim int    `json:"head_dim"`
	KVDType string `json:"kv_cache_dtype"`
	// moe: its coordinates, under MoERow's names (the fields above shadow
	// its dtype, latency and host time)
	fpm.MoERow
}

// ReadBench reads the JSON lines an operations benchmark writes
// (capture/worker/opbench.py: a meta line, then one measured operation a
// line) into the tables of a database; its System is left for the caller.
// A truncated last line (an interrupted run) is dropped; any other bad
// line is an error naming its number.
func ReadBench(r io.Reader) (*fpm.OpDB, BenchMeta, error) {
	var meta BenchMeta
	db := &fpm.OpDB{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var pending error // a bad line is an error unless it is the last one
	for n := 1; sc.Scan(); n++ {
		if pending != nil {
			return nil, meta, pending
		}
		line := sc.Bytes()
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		var row benchRow
		if err := json.Unmarshal(line, &row); err != nil {
			pending = fmt.Errorf("opbench line %d: %w", n, err)
			continue
		}
		switch row.Table {
		case "meta":
			if err := json.Unmarshal(line, &meta); err != nil {
				return nil, meta, fmt.Errorf("opbench line %d: %w", n, err)
			}
			continue
		}
		if err := addBench(db, &row); err != nil {
			return nil, meta, fmt.Errorf("opbench line %d: %w", n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, meta, fmt.Errorf("opbench: %w", err)
	}
	if len(db.GEMM) == 0 || len(db.ContextAttention) == 0 || len(db.GenerationAttention) == 0 {
		return nil, meta, errors.New("opbench: the run measured no GEMM, context or generation attention: a database needs all three")
	}
	return db, meta, nil
}

// addBench appends one benchmark row to its table.
func addBench(db *fpm.OpDB, r *benchRow) error {
	if r.LatencyMs == nil || !(*r.LatencyMs > 0) || math.IsInf(*r.LatencyMs, 0) {
		return fmt.Errorf("%s: latency_ms must be a positive number", r.Table)
	}
	var eager bool
	switch r.Launch {
	case LaunchGraph:
	case LaunchEager:
		eager = true
	default:
		return fmt.Errorf("%s: launch %q: want %q or %q", r.Table, r.Launch, LaunchGraph, LaunchEager)
	}
	lat := *r.LatencyMs
	if !(r.HostMs >= 0) || math.IsInf(r.HostMs, 0) || (r.HostMs > 0 && !eager) {
		return fmt.Errorf("%s: host_ms must be a non-negative number, on eager rows only", r.Table)
	}
	// A size is a positive int32, as LoadDir reads it back.
	positive := func(names string, v ...int) error {
		for i, x := range v {
			if x <= 0 || x > math.MaxInt32 {
				return fmt.Errorf("%s: %s must be a positive int32, got %d", r.Table, strings.Split(names, ",")[i], x)
			}
		}
		return nil
	}
	switch r.Table {
	case fpm.OpTableGEMM:
		if err := positive("m,n,k", r.M, r.N, r.K); err != nil {
			return err
		}
		db.GEMM = append(db.GEMM, fpm.GEMMRow{DType: r.DType, M: r.M, N: r.N, K: r.K, Eager: eager, LatencyMs: lat, HostMs: r.HostMs})
	case fpm.OpTableContextAttention, fpm.OpTableGenerationAttention:
		if err := positive("batch_size,isl,num_heads,num_key_value_heads,head_dim", r.Batch, r.ISL, r.Heads, r.KVHeads, r.HeadDim); err != nil {
			return err
		}
		a := fpm.AttentionRow{Batch: r.Batch, SeqLen: r.ISL, Heads: r.Heads, KVHeads: r.KVHeads, HeadDim: r.HeadDim,
			DType: r.DType, KVDType: r.KVDType, Eager: eager, LatencyMs: lat, HostMs: r.HostMs}
		if r.Table == fpm.OpTableContextAttention {
			db.ContextAttention = append(db.ContextAttention, a)
		} else {
			db.GenerationAttention = append(db.GenerationAttention, a)
		}
	case fpm.OpTableElementwise:
		if !slices.Contains(fpm.ElementwiseOps, r.Op) {
			return fmt.Errorf("elementwise: op %q: want one of %s", r.Op, strings.Join(fpm.ElementwiseOps, ", "))
		}
		if err := positive("m,n", r.M, r.N); err != nil {
			return err
		}
		db.Elementwise = append(db.Elementwise, fpm.ElementwiseRow{Op: r.Op, M: r.M, N: r.N, DType: r.DType, Eager: eager, LatencyMs: lat, HostMs: r.HostMs})
	case fpm.OpTableMoE:
		if err := positive("tokens,hidden,inter,top_k,experts,tp,ep", r.Tokens, r.Hidden, r.Inter, r.TopK, r.Experts, r.TP, r.EP); err != nil {
			return err
		}
		if r.TopK > r.Experts || r.Distribution == "" {
			return fmt.Errorf("moe: top_k %d of %d experts, distribution %q: want top_k <= experts and a distribution", r.TopK, r.Experts, r.Distribution)
		}
		m := r.MoERow
		m.DType, m.Eager, m.LatencyMs, m.HostMs = r.DType, eager, lat, r.HostMs
		db.MoE = append(db.MoE, m)
	default:
		return fmt.Errorf("unknown table %q", r.Table)
	}
	return nil
}
