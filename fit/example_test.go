package fit_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fit"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/pricing"
)

// Example fits the step-time model to a small synthetic capture: decode
// steps whose time is 5 ms + 30 µs per request + 2 ns per KV token read,
// with 2% noise, plus warm-up rows marked scaffolding that run 5× slower.
func Example() {
	rng := rand.New(rand.NewPCG(1, 2))
	var steps []datasets.Step
	for i := 0; i < 400; i++ {
		b := int32(1 + rng.IntN(128))
		kv := int64(b) * int64(500+rng.IntN(4000))
		ns := (5e6 + 3e4*float64(b) + 2*float64(kv)) * (1 + 0.02*rng.NormFloat64())
		role := datasets.RoleMeasured
		if i%10 == 0 {
			role, ns = datasets.RoleScaffolding, 5*ns // admission-step warm-ups
		}
		steps = append(steps, datasets.Step{StepID: int64(i), Kind: datasets.KindDecode, Role: role, Valid: true,
			NumDecodeRequests: b, SumDecodeKVTokens: kv, GPUTimeNs: int64(ns), WallTimeNs: int64(ns)})
	}

	sel, err := fit.Select(steps, fit.Selection{}) // scaffolding rows are left out
	if err != nil {
		panic(err)
	}
	data, err := fit.DataFromSteps(sel, fit.TargetAuto)
	if err != nil {
		panic(err)
	}
	terms := []string{fpm.TermConst, fpm.TermDecodeRequests, fpm.TermDecodeKVTokens}
	res, err := fit.Linear(data, fit.Options{Terms: terms, Method: fit.MethodHuberNN, Bootstrap: 200, Seed: 1})
	if err != nil {
		panic(err)
	}
	m := res.Model
	fmt.Printf("rows: %d of %d (target %s)\n", res.Rows, len(steps), data.Target)
	for j, t := range m.Terms {
		fmt.Printf("%-17s %.3g  [%.3g, %.3g]\n", t, m.Coef[j], m.CoefLo[j], m.CoefHi[j])
	}

	cv, err := fit.CrossValidate(data, 5, 1, func(train *fit.Data) (fpm.FPM, error) {
		r, err := fit.Linear(train, fit.Options{Terms: terms, Method: fit.MethodHuberNN})
		if err != nil {
			return nil, err
		}
		return r.Model, nil
	}, 1)
	if err != nil {
		panic(err)
	}
	fmt.Printf("5-fold CV MAPE %.1f%%, p90 %.1f%%\n", cv.Report.Overall.MAPE, cv.Report.Overall.P90APE)

	// Save the model as a versioned artifact and load it back.
	art := fpm.LinearArtifact(m)
	art.Training.Selection = fit.Selection{}.Record("steady_state_second_step")
	art.CreatedBy = "example"
	dir, _ := os.MkdirTemp("", "fit-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "model.json")
	if err := art.Save(path); err != nil {
		panic(err)
	}
	fpModel, _, err := pricing.Load(path)
	if err != nil {
		panic(err)
	}
	f := fpm.Features{DecodeRequests: 64, DecodeKVTokens: 64 * 2000}
	mid, lo, hi := fpModel.(fpm.IntervalFPM).PredictIntervalNs(f, 0.9)
	fmt.Printf("B=64, 2000-token contexts: %.2f ms (90%%: %.2f–%.2f ms)\n", mid/1e6, lo/1e6, hi/1e6)
	// Output:
	// rows: 360 of 400 (target gpu_time_ns)
	// const             5e+06  [4.97e+06, 5.02e+06]
	// decode_requests   2.98e+04  [2.93e+04, 3.05e+04]
	// decode_kv_tokens  2.17  [1.99, 2.34]
	// 5-fold CV MAPE 1.6%, p90 3.2%
	// B=64, 2000-token contexts: 7.18 ms (90%: 6.94–7.39 ms)
}

// ExampleFitRecipe fits the default recipe to a decode benchmark grid
// (batch × context, the long contexts of the large batches not measured)
// and prices three steps: inside the grid's hull, in its unmeasured
// corner, and beyond its largest batch.
func ExampleFitRecipe() {
	rng := rand.New(rand.NewPCG(3, 4))
	var steps []datasets.Step
	for _, b := range []int32{1, 4, 16, 64, 256} {
		for _, ctx := range []int64{256, 1024, 4096} {
			if int64(b)*ctx > 300_000 {
				continue // does not fit in the KV cache
			}
			ns := (5e6 + 3e4*float64(b) + 20*float64(int64(b)*ctx)) * (1 + 0.01*rng.NormFloat64())
			steps = append(steps, datasets.Step{StepID: int64(len(steps)), Kind: datasets.KindDecode, Role: datasets.RoleMeasured,
				Valid: true, BenchmarkID: int64(len(steps)), NumDecodeRequests: b, SumDecodeKVTokens: int64(b) * ctx, WallTimeNs: int64(ns), GPUTimeNs: -1})
		}
	}
	data, err := fit.DataFromSteps(steps, fit.TargetAuto)
	if err != nil {
		panic(err)
	}
	res, err := fit.FitRecipe(data, fit.RecipeOptions{Bootstrap: 100, Seed: 1})
	if err != nil {
		panic(err)
	}
	fmt.Println("decode priced by", res.Kinds[0].PricedBy, "over", res.Kinds[0].Table.Coords, "missing nodes:", res.Kinds[0].Table.Missing)
	for _, b := range []float64{8, 200, 1024} {
		p := res.Model.Price(fpm.Features{DecodeRequests: b, DecodeKVTokens: b * 2048, DecodeMaxKVTokens: 2048, PaddedBatch: b}, 0.9)
		fmt.Printf("B=%-4.0f %s, interval %.0f%% of the prediction wide\n", b, p.Region, 100*(p.Hi-p.Lo)/p.Ns)
	}
	// Output:
	// decode priced by table+linear over [decode_requests kv_per_request kv_max_ratio] missing nodes: 1
	// B=8    interpolated, interval 4% of the prediction wide
	// B=200  extrapolated, interval 8% of the prediction wide
	// B=1024 extrapolated, interval 19% of the prediction wide
}
