package main

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/steplab/steplab/capture"
	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/fpm/opdb"
)

// The memory-op formula's constants a database written here carries for
// the operations its tables lack (AIConfigurator's defaults; an
// element-wise table makes them unused).
const (
	memOpScaling   = 0.8
	memOpConstantS = 3e-6
)

func newCaptureOpsCmd() *cobra.Command {
	var (
		out, hardware, device, grid, rowsFile, python, workerScript string
		models                                                      []string
		skews                                                       []float64
		force, verbose, asJSON                                      bool
	)
	cmd := &cobra.Command{
		Use:   "ops -o DIR --model NAME [--model NAME ...]",
		Short: "Measure the worker's operations into a database the ops prior reads",
		Long: `ops measures, on this machine's GPU, every operation one forward pass of the
worker runs, each alone over a grid of sizes: the GEMMs, the worker's paged
attention (prefill and decode), the element-wise steps of a layer (fused on
the GPU, as the worker runs them there) and a mixture of experts' layer
(balanced, and under the worker's router at each --routing-skew), each
replayed from a CUDA graph and launched eagerly (capture/worker/opbench.py).
It writes them as an operations database (docs/ops-prior.md): the layout of
AIConfigurator's, with a launch column and an element-wise table, which
"steplab eval ops:DIR", "replay ... ops:DIR" and "fpm: ops:DIR" read; its
collection_meta.yaml records the worker generation that measured it.

The full grid measures GEMMs and element-wise widths on a generic grid as
well as the --model shapes' own, so that other shapes interpolate; --grid
shapes measures only the shapes' own. The raw rows go to DIR.opbench.jsonl as
they are measured (an interrupted run keeps them; --rows converts such a
file without measuring) and end up in DIR/opbench.jsonl.

Examples:
  # needs: gpu (an NVIDIA GPU with CUDA, and PyTorch and Triton in the worker's Python)
  steplab capture ops -o out/opdb-help --model Llama-3.1-8B --model Qwen2.5-7B
  steplab eval ops:out/opdb-help datasets/h200/qwen2.5-7b/traffic-azure-5rps

  # needs: torch (the CPU path: eager timings, PyTorch in the worker's Python)
  steplab capture ops -o out/opdb-cpu --model tiny --device cpu --grid quick --hardware H200 --force

  # rebuild the shipped H200 database from its raw rows
  steplab capture ops -o out/h200-worker --rows datasets/h200/logs/opbench-h200-worker.jsonl --force`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := refuseExisting("capture ops", out, force); err != nil {
				return err
			}
			raw := rowsFile
			if raw == "" {
				if len(models) == 0 {
					return errors.New("capture ops: name the models to measure with --model (or convert a run with --rows FILE)")
				}
				var shapes []catalog.Shape
				for _, m := range models {
					s, err := catalog.LookupModel(m)
					if err != nil {
						return err
					}
					shapes = append(shapes, s)
				}
				raw = strings.TrimSuffix(out, string(filepath.Separator)) + ".opbench.jsonl"
				if err := os.MkdirAll(filepath.Dir(raw), 0o755); err != nil {
					return err
				}
				opts := capture.OpBenchOptions{Worker: capture.WorkerOptions{Python: python, Script: workerScript},
					Shapes: shapes, Device: device, Grid: grid, RoutingSkews: skews, Out: raw}
				if verbose {
					opts.Stderr = cmd.ErrOrStderr()
				}
				if err := capture.MeasureOps(cmd.Context(), opts); err != nil {
					return err
				}
			}
			res, err := buildOpDB(raw, hardware, out, force)
			if err != nil {
				return err
			}
			if rowsFile == "" {
				if err := os.Rename(raw, filepath.Join(out, "opbench.jsonl")); err != nil {
					return err
				}
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %s (generation %s) on %s, %d GEMMs, %d context and %d generation attention, %d element-wise, %d MoE rows\n",
				out, res.Framework, cmp.Or(res.WorkerGeneration, "not recorded"), res.GPU, res.GEMM, res.Context, res.Generation, res.Elementwise, res.MoE)
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "database directory to write")
	cmd.Flags().StringArrayVar(&models, "model", nil, "a model whose operations to measure: catalogue name or config.json (repeatable)")
	cmd.Flags().StringVar(&hardware, "hardware", "", "the GPU measured, for system.yaml (default: the name the benchmark reports)")
	cmd.Flags().StringVar(&device, "device", "cuda", "device: cuda, cuda:N or cpu (eager timings only)")
	cmd.Flags().StringVar(&grid, "grid", "full", "grid: full, shapes or quick")
	cmd.Flags().Float64SliceVar(&skews, "routing-skew", nil, "tilts of the worker's router to time a mixture of experts' layer under, besides balanced routing (default 0,1)")
	cmd.Flags().StringVar(&rowsFile, "rows", "", "convert this benchmark output instead of measuring")
	cmd.Flags().StringVar(&python, "python", "", "Python interpreter with PyTorch (default: $STEPLAB_PYTHON, else python3)")
	cmd.Flags().StringVar(&workerScript, "worker", "", "path of capture/worker/worker.py (opbench.py is beside it)")
	cmd.Flags().BoolVar(&force, "force", false, "overwrite an existing database")
	cmd.Flags().BoolVar(&verbose, "worker-log", false, "copy the benchmark's stderr to ours")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the summary as JSON")
	return cmd
}

// opDBSummary is what capture ops wrote.
type opDBSummary struct {
	Dir         string `json:"dir"`
	GPU         string `json:"gpu"`
	Framework   string `json:"framework"`
	Version     string `json:"version"`
	GEMM        int    `json:"gemm_rows"`
	Context     int    `json:"context_attention_rows"`
	Generation  int    `json:"generation_attention_rows"`
	Elementwise int    `json:"elementwise_rows"`
	MoE         int    `json:"moe_rows"`
	// WorkerGeneration is the worker's generation that measured it (""
	// for rows from before it was recorded).
	WorkerGeneration string `json:"worker_generation,omitempty"`
}

// buildOpDB turns a benchmark's rows into a database directory, its
// system file from the hardware catalogue.
func buildOpDB(rows, hardware, out string, force bool) (*opDBSummary, error) {
	f, err := os.Open(rows)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	db, meta, err := opdb.ReadBench(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rows, err)
	}
	if hardware == "" {
		hardware = meta.GPU
	}
	if hardware == "" {
		return nil, fmt.Errorf("%s names no GPU (a CPU run): pass --hardware", rows)
	}
	hw, err := catalog.LookupHardware(hardware)
	if err != nil {
		return nil, err
	}
	db.Framework, db.Generation = "steplab-worker", meta.WorkerGeneration
	db.Version = fmt.Sprintf("torch %s, triton %s, %s", meta.Torch, cmp.Or(meta.Triton, "none"), cmp.Or(meta.GPU, meta.Device))
	if meta.CPU != "" {
		db.Version += ", host " + meta.CPU
	}
	db.System = fpm.OpSystem{GPU: hw.Name, MemBandwidth: hw.BandwidthBytes(), BF16FLOPS: hw.PeakFLOPs(),
		MemBWScaling: memOpScaling, MemConstantS: memOpConstantS, SMs: float64(cmp.Or(meta.SMCount, hw.SMs))}
	if link, ok := hw.TPLink(); ok {
		db.System.IntraNodeBandwidth = link.GBsPerDirection * 1e9
	}
	if err := opdb.WriteDir(out, db, force); err != nil {
		return nil, err
	}
	return &opDBSummary{Dir: out, GPU: hw.Name, Framework: db.Framework, Version: db.Version, GEMM: len(db.GEMM),
		Context: len(db.ContextAttention), Generation: len(db.GenerationAttention), Elementwise: len(db.Elementwise), MoE: len(db.MoE),
		WorkerGeneration: db.Generation}, nil
}
