package fit

import (
	"fmt"
	"github.com/steplab/steplab/fpm"
)

// Terms of an engine fit (OpsEngine), in the order of fpm.OpsEngine.
const (
	engineGEMM       = "gemm_scale"
	engineContext    = "context_attn_scale"
	engineGeneration = "generation_attn_scale"
	engineGraph      = "graph_step_ns"
	engineEager      = "eager_step_ns"
)

// OpsEngine fits how the engine that produced d departs from the framework
// whose kernels the prior's database measured: non-negative least squares
// in relative error of
//
//	y − elementwise − all-reduce = a·(GEMM + LM head) + b·context attention
//	    + c·generation attention + g·[decode-only step] + e·[step with prefill]
//
// over the prior's breakdown of every row (priced for the database's own
// framework, whatever engine prior carries). a, b, c are the engine's
// kernel times relative to the database's, g and e its per-step work the
// composition does not see (fpm.OpsEngine). A term the data does not
// exercise (no prefill rows: no context attention, no eager steps) keeps
// the database's value.
//
// Fit on a benchmark grid of the engine and evaluate on other data: the
// fitted values describe one engine on one machine.
func OpsEngine(prior *fpm.Ops, d *Data, name string) (fpm.OpsEngine, error) {
	base, err := prior.WithEngine(fpm.OpsEngine{})
	if err != nil {
		return fpm.OpsEngine{}, err
	}
	terms := []string{engineGEMM, engineContext, engineGeneration, engineGraph, engineEager}
	const unit = 1e6 // the per-step columns in ms keep the design well scaled
	n, p := d.Len(), len(terms)
	x := make([]float64, n*p)
	y := make([]float64, n)
	w := make([]float64, n)
	used := make([]bool, p)
	for i, f := range d.Features {
		b := base.Breakdown(f)
		eager := 0.0
		if f.PrefillTokens > 0 {
			eager = 1
		}
		row := []float64{b.GEMMNs + b.LMHeadNs, b.ContextAttnNs, b.GenerationAttnNs, (1 - eager) * unit, eager * unit}
		copy(x[i*p:], row)
		for j, v := range row {
			used[j] = used[j] || v != 0
		}
		y[i] = d.Y[i] - b.ElementwiseNs - b.AllReduceNs
		if y[i] <= 0 {
			return fpm.OpsEngine{}, fmt.Errorf("fit: engine: step %d takes %.0f ns, less than the element-wise and all-reduce work the database prices (%.0f ns): is the prior's shape the engine's model?",
				d.StepID(i), d.Y[i], b.ElementwiseNs+b.AllReduceNs)
		}
		w[i] = 1 / (d.Y[i] * d.Y[i])
	}
	// Keep the exercised terms only.
	var keep []int
	for j := range terms {
		if used[j] {
			keep = append(keep, j)
		}
	}
	ds := &Design{W: w, Y: y, StepIDs: d.StepIDs}
	for _, j := range keep {
		ds.Terms = append(ds.Terms, terms[j])
	}
	ds.X = make([]float64, 0, n*len(keep))
	for i := 0; i < n; i++ {
		for _, j := range keep {
			ds.X = append(ds.X, x[i*p+j])
		}
	}
	coef, err := NNLS(ds)
	if err != nil {
		return fpm.OpsEngine{}, fmt.Errorf("fit: engine: %w", err)
	}
	e := fpm.OpsEngine{Name: name}
	for k, j := range keep {
		v := coef[k]
		if v == 0 && j <= 2 {
			return fpm.OpsEngine{}, dataErr(ErrRankDeficient, "the fit prices this operation at zero: the data cannot tell its cost; fit on a grid that varies it", terms[j])
		}
		switch terms[j] {
		case engineGEMM:
			e.GEMMScale = v
		case engineContext:
			e.ContextAttnScale = v
		case engineGeneration:
			e.GenerationAttnScale = v
		case engineGraph:
			e.GraphStepNs = v * unit
		case engineEager:
			e.EagerStepNs = v * unit
		}
	}
	return e, e.Validate()
}
