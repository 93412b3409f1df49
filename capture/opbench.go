package capture

import (
	"context"
	"fmt"
	"github.com/steplab/steplab/catalog"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// OpBenchOptions runs the worker's operations benchmark
// (capture/worker/opbench.py, beside the worker script).
type OpBenchOptions struct {
	Worker WorkerOptions
	// Shapes are the model shapes whose operations to measure (per GPU:
	// a tensor-parallel shape is measured at its per-GPU widths).
	Shapes []catalog.Shape
	Device string // "cuda", "cuda:N" or "cpu"
	Grid   string // "full", "shapes" or "quick"
	// RoutingSkews are the tilts of the worker's router a mixture of
	// experts' layer is timed under besides balanced routing (nil:
	// opbench.py's default, 0 and 1).
	RoutingSkews []float64
	// Out is the JSON-lines file the benchmark writes as it measures, so
	// that an interrupted run keeps its rows.
	Out    string
	Stderr io.Writer // the benchmark's stderr (nil: discarded)
}

// MeasureOps runs the operations benchmark and returns when it has
// written every row to opts.Out, or when ctx is done (the rows measured
// so far stay in opts.Out).
func MeasureOps(ctx context.Context, opts OpBenchOptions) error {
	w, err := opts.Worker.withDefaults()
	if err != nil {
		return err
	}
	script := filepath.Join(filepath.Dir(w.Script), "opbench.py")
	if _, err := os.Stat(script); err != nil {
		return fmt.Errorf("the operations benchmark %s: %w", script, err)
	}
	args := []string{"-u", script, "--device", opts.Device, "--grid", opts.Grid, "--out", opts.Out}
	for _, s := range opts.Shapes {
		args = append(args, "--shape", BenchShape(s))
	}
	for _, sk := range opts.RoutingSkews {
		args = append(args, "--routing-skew", strconv.FormatFloat(sk, 'g', -1, 64))
	}
	cmd := exec.CommandContext(ctx, w.Python, args...)
	cmd.Env = append(os.Environ(), w.Env...)
	var tail strings.Builder
	cmd.Stderr = io.MultiWriter(&tail, orDiscard(opts.Stderr))
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("operations benchmark interrupted (%s keeps the rows measured): %w", opts.Out, ctx.Err())
		}
		msg := tail.String()
		if len(msg) > 2000 {
			msg = msg[len(msg)-2000:]
		}
		return fmt.Errorf("operations benchmark %s %s failed: %w\n%s", w.Python, script, err, msg)
	}
	return nil
}

// BenchShape is a shape as opbench.py's --shape flag takes it: the widths
// one GPU of the tensor-parallel group computes, and a mixture of
// experts' routed experts (their width per GPU, and the group's size).
func BenchShape(s catalog.Shape) string {
	tp := max(1, s.TP)
	inter := s.Intermediate
	if inter == 0 {
		inter = s.MoE.ExpertIntermediate
	}
	out := fmt.Sprintf("hidden=%d,heads=%d,kv_heads=%d,head_dim=%d,intermediate=%d,vocab=%d",
		s.Hidden, s.Heads/tp, s.KVHeadsPerGPU(), s.HeadDim, inter/tp, s.Vocab/tp)
	if m := s.MoE; s.IsMoE() {
		out += fmt.Sprintf(",experts=%d,top_k=%d,expert_intermediate=%d,tp=%d", m.Experts, m.TopK, m.ExpertIntermediate/tp, tp)
	}
	return out
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
