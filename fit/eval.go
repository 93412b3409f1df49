package fit

import (
	"encoding/json"
	"fmt"
	"github.com/steplab/steplab/fpm"
	"math"
	"math/rand/v2"
	"sort"
)

// Metrics summarise prediction error on a set of steps. Percentage errors
// are in percent of the actual duration: APE = 100·|pred − actual|/actual.
type Metrics struct {
	Count     int     `json:"count"`
	MAPE      float64 `json:"mape_pct"`
	MedianAPE float64 `json:"median_ape_pct"`
	P90APE    float64 `json:"p90_ape_pct"`
	P99APE    float64 `json:"p99_ape_pct"`
	RMSE      float64 `json:"rmse_ns"`
	// R2 is 1 − SSres/SStot (NaN with fewer than two rows or constant
	// actuals); MeanBias the mean of (pred − actual)/actual in percent, the
	// sign saying whether the model over- or under-predicts.
	R2       float64 `json:"r2"`
	MeanBias float64 `json:"mean_bias_pct"`
}

// MarshalJSON writes an undefined R² (NaN) as null: JSON has no NaN.
func (m Metrics) MarshalJSON() ([]byte, error) {
	type plain Metrics
	out := struct {
		plain
		R2 *float64 `json:"r2"`
	}{plain: plain(m)}
	if !math.IsNaN(m.R2) && !math.IsInf(m.R2, 0) {
		out.R2 = &m.R2
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads a null R² back as NaN.
func (m *Metrics) UnmarshalJSON(b []byte) error {
	type plain Metrics
	in := struct {
		*plain
		R2 *float64 `json:"r2"`
	}{plain: (*plain)(m)}
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	m.R2 = math.NaN()
	if in.R2 != nil {
		m.R2 = *in.R2
	}
	return nil
}

// BucketMetrics are the metrics of one batch-size bucket, written to JSON
// as one flat object with a "bucket" key.
type BucketMetrics struct {
	Bucket string `json:"bucket"`
	Metrics
}

// MarshalJSON keeps the bucket next to the promoted metrics.
func (b BucketMetrics) MarshalJSON() ([]byte, error) {
	m, err := json.Marshal(b.Metrics)
	if err != nil {
		return nil, err
	}
	name, _ := json.Marshal(b.Bucket)
	return append(append([]byte(`{"bucket":`), name...), append([]byte{','}, m[1:]...)...), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (b *BucketMetrics) UnmarshalJSON(data []byte) error {
	var head struct {
		Bucket string `json:"bucket"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return err
	}
	b.Bucket = head.Bucket
	return json.Unmarshal(data, &b.Metrics)
}

// WorstStep is one of the steps the model predicts worst.
type WorstStep struct {
	Row         int     `json:"row"`
	StepID      int64   `json:"step_id"`
	Kind        string  `json:"kind"`
	Batch       int     `json:"batch"`
	ActualNs    float64 `json:"actual_ns"`
	PredictedNs float64 `json:"predicted_ns"`
	APE         float64 `json:"ape_pct"`
	// BeyondGrid names the table axes on which the step lies beyond the
	// model's measured grid (BeyondAxes; eval fills it).
	BeyondGrid []string `json:"beyond_grid,omitempty"`
}

// Report is an evaluation of predictions against actual step times:
// overall, per step kind, per batch-size bucket, and the worst steps.
type Report struct {
	Overall  Metrics            `json:"overall"`
	ByKind   map[string]Metrics `json:"by_kind"`
	ByBucket []BucketMetrics    `json:"by_bucket"` // in BatchBuckets order, empty buckets left out
	Worst    []WorstStep        `json:"worst"`
}

// BatchBuckets are the batch-size buckets of a Report, by upper bound: a
// step of batch b falls in the first bucket whose bound is ≥ b. The batch
// of a step is its number of requests (prefill + decode).
var BatchBuckets = []struct {
	Label string
	Max   int
}{
	{"1", 1}, {"2-4", 4}, {"5-8", 8}, {"9-16", 16}, {"17-32", 32}, {"33-64", 64},
	{"65-128", 128}, {"129-256", 256}, {"257-512", 512}, {">512", math.MaxInt},
}

// BatchOf is the batch size a step is bucketed by.
func BatchOf(f fpm.Features) int { return int(f.PrefillRequests + f.DecodeRequests) }

// BucketOf returns the bucket label of a batch size (0 joins "1").
func BucketOf(batch int) string {
	for _, b := range BatchBuckets {
		if batch <= b.Max {
			return b.Label
		}
	}
	return BatchBuckets[len(BatchBuckets)-1].Label
}

// Evaluate predicts every row with m and reports the error; worstN steps
// are listed (0: none).
func Evaluate(m fpm.FPM, d *Data, worstN int) Report {
	pred := make([]float64, d.Len())
	for i, f := range d.Features {
		pred[i] = m.PredictNs(f)
	}
	return EvaluatePredictions(d, pred, worstN)
}

// EvaluatePredictions reports the error of given predictions of d's rows.
func EvaluatePredictions(d *Data, pred []float64, worstN int) Report {
	all := make([]int, d.Len())
	byKind := map[string][]int{}
	byBucket := map[string][]int{}
	for i := range all {
		all[i] = i
		k := d.Kind(i)
		byKind[k] = append(byKind[k], i)
		b := BucketOf(BatchOf(d.Features[i]))
		byBucket[b] = append(byBucket[b], i)
	}
	r := Report{Overall: metricsOf(d.Y, pred, all), ByKind: map[string]Metrics{}}
	for k, idx := range byKind {
		r.ByKind[k] = metricsOf(d.Y, pred, idx)
	}
	for _, b := range BatchBuckets {
		if idx := byBucket[b.Label]; len(idx) > 0 {
			r.ByBucket = append(r.ByBucket, BucketMetrics{b.Label, metricsOf(d.Y, pred, idx)})
		}
	}
	if worstN > 0 {
		sort.SliceStable(all, func(a, b int) bool { return ape(d.Y[all[a]], pred[all[a]]) > ape(d.Y[all[b]], pred[all[b]]) })
		for _, i := range all[:min(worstN, len(all))] {
			r.Worst = append(r.Worst, WorstStep{Row: i, StepID: d.StepID(i), Kind: d.Kind(i), Batch: BatchOf(d.Features[i]),
				ActualNs: d.Y[i], PredictedNs: pred[i], APE: ape(d.Y[i], pred[i])})
		}
	}
	return r
}

func ape(actual, pred float64) float64 { return 100 * math.Abs(pred-actual) / actual }

func metricsOf(y, pred []float64, idx []int) Metrics {
	m := Metrics{Count: len(idx)}
	if len(idx) == 0 {
		return m
	}
	apes := make([]float64, len(idx))
	var mean, sse, bias float64
	for k, i := range idx {
		apes[k] = ape(y[i], pred[i])
		m.MAPE += apes[k]
		d := pred[i] - y[i]
		sse += d * d
		bias += 100 * d / y[i]
		mean += y[i]
	}
	n := float64(len(idx))
	m.MAPE /= n
	m.MeanBias = bias / n
	m.RMSE = math.Sqrt(sse / n)
	mean /= n
	var sst float64
	for _, i := range idx {
		sst += (y[i] - mean) * (y[i] - mean)
	}
	m.R2 = math.NaN()
	if sst > 0 {
		m.R2 = 1 - sse/sst
	}
	sort.Float64s(apes)
	m.MedianAPE = fpm.SortedQuantile(apes, 0.5)
	m.P90APE = fpm.SortedQuantile(apes, 0.9)
	m.P99APE = fpm.SortedQuantile(apes, 0.99)
	return m
}

// Folds assigns n rows to k folds at random with a seeded stream: a
// permutation of the rows dealt round-robin, so fold sizes differ by at
// most one. The same (n, k, seed) always gives the same folds.
func Folds(n, k int, seed uint64) []int {
	rng := rand.New(rand.NewPCG(seed, 0x5eed_f01d))
	perm := rng.Perm(n)
	fold := make([]int, n)
	for pos, i := range perm {
		fold[i] = pos % k
	}
	return fold
}

// Split divides d into a training part and a held-out part holding about
// frac of the rows, chosen at random with a seeded stream.
func Split(d *Data, frac float64, seed uint64) (train, test *Data) {
	rng := rand.New(rand.NewPCG(seed, 0x5b117))
	var tr, te []int
	for i := 0; i < d.Len(); i++ {
		if rng.Float64() < frac {
			te = append(te, i)
		} else {
			tr = append(tr, i)
		}
	}
	return d.Subset(tr), d.Subset(te)
}

// FitFunc fits a model to training data (e.g. a closure over Linear).
type FitFunc func(train *Data) (fpm.FPM, error)

// CVResult is a k-fold cross-validation: the report over all out-of-fold
// predictions (each row predicted by the model that did not see it), and
// each fold's overall metrics.
type CVResult struct {
	K      int       `json:"k"`
	Seed   uint64    `json:"seed"`
	Report Report    `json:"report"`
	Folds  []Metrics `json:"folds"`
	// Predictions are the out-of-fold predictions, by row.
	Predictions []float64 `json:"-"`
}

// CrossValidate runs k-fold cross-validation with seeded fold assignment
// (Folds). A fold whose training part cannot be fitted fails the whole
// run, with the fold named.
func CrossValidate(d *Data, k int, seed uint64, fitFn FitFunc, worstN int) (*CVResult, error) {
	if k < 2 {
		return nil, fmt.Errorf("fit: cross-validation needs k ≥ 2 folds, got %d", k)
	}
	if d.Len() < k {
		return nil, dataErr(ErrTooFewRows, fmt.Sprintf("%d rows for %d folds", d.Len(), k))
	}
	fold := Folds(d.Len(), k, seed)
	pred := make([]float64, d.Len())
	res := &CVResult{K: k, Seed: seed}
	for f := 0; f < k; f++ {
		var tr, te []int
		for i, fi := range fold {
			if fi == f {
				te = append(te, i)
			} else {
				tr = append(tr, i)
			}
		}
		m, err := fitFn(d.Subset(tr))
		if err != nil {
			return nil, fmt.Errorf("fit: cross-validation fold %d of %d: %w", f+1, k, err)
		}
		for _, i := range te {
			pred[i] = m.PredictNs(d.Features[i])
		}
		res.Folds = append(res.Folds, metricsOf(d.Y, pred, te))
	}
	res.Predictions = pred
	res.Report = EvaluatePredictions(d, pred, worstN)
	return res, nil
}
