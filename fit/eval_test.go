package fit

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/steplab/steplab/fpm"
	"github.com/stretchr/testify/require"
)

func TestBuckets(t *testing.T) {
	for b, want := range map[int]string{0: "1", 1: "1", 2: "2-4", 4: "2-4", 5: "5-8", 16: "9-16", 17: "17-32", 64: "33-64", 65: "65-128", 256: "129-256", 512: "257-512", 513: ">512", 100000: ">512"} {
		require.Equal(t, want, BucketOf(b), "batch %d", b)
	}
}

func TestEvaluateMetrics(t *testing.T) {
	d := &Data{
		Features: []fpm.Features{{DecodeRequests: 1}, {DecodeRequests: 3}, {DecodeRequests: 3}, {PrefillTokens: 10, PrefillRequests: 1}},
		Y:        []float64{100, 200, 400, 1000},
		StepIDs:  []int64{10, 11, 12, 13},
	}
	pred := []float64{110, 200, 300, 1000} // APE 10, 0, 25, 0
	r := EvaluatePredictions(d, pred, 2)
	require.Equal(t, 4, r.Overall.Count)
	require.InDelta(t, 8.75, r.Overall.MAPE, 1e-12)
	require.InDelta(t, 5, r.Overall.MedianAPE, 1e-12)
	require.InDelta(t, math.Sqrt((100+0+10000+0)/4.0), r.Overall.RMSE, 1e-9)
	require.InDelta(t, (10+0-25+0)/4.0, r.Overall.MeanBias, 1e-12)
	mean := 425.0
	sst := (100-mean)*(100-mean) + (200-mean)*(200-mean) + (400-mean)*(400-mean) + (1000-mean)*(1000-mean)
	require.InDelta(t, 1-10100/sst, r.Overall.R2, 1e-12)
	require.Equal(t, 3, r.ByKind["decode"].Count)
	require.Equal(t, 1, r.ByKind["prefill"].Count)
	require.Equal(t, []string{"1", "2-4"}, []string{r.ByBucket[0].Bucket, r.ByBucket[1].Bucket})
	require.Equal(t, 2, r.ByBucket[0].Count, "the 1-request prefill and the 1-request decode")
	require.Len(t, r.Worst, 2)
	require.EqualValues(t, 12, r.Worst[0].StepID)
	require.InDelta(t, 25, r.Worst[0].APE, 1e-12)
	require.EqualValues(t, 10, r.Worst[1].StepID)
	one := EvaluatePredictions(d.Subset([]int{0}), []float64{1}, 0)
	require.True(t, math.IsNaN(one.Overall.R2))
	// NaN R² survives JSON as null; the rest round-trips.
	b, err := json.Marshal(one)
	require.NoError(t, err)
	require.Contains(t, string(b), `"r2":null`)
	var back Report
	require.NoError(t, json.Unmarshal(b, &back))
	require.True(t, math.IsNaN(back.Overall.R2))
	require.Equal(t, one.Overall.MAPE, back.Overall.MAPE)
	b, err = json.Marshal(r)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, r.Overall, back.Overall)
	require.Equal(t, r.ByBucket, back.ByBucket)
}

func TestFoldsAndCrossValidation(t *testing.T) {
	f1, f2 := Folds(103, 5, 9), Folds(103, 5, 9)
	require.Equal(t, f1, f2)
	require.NotEqual(t, f1, Folds(103, 5, 10))
	counts := make([]int, 5)
	for _, f := range f1 {
		counts[f]++
	}
	for _, c := range counts {
		require.True(t, c == 20 || c == 21)
	}

	d := synthData(41, 1000, synthTerms, synthTrue, 0.02)
	fitFn := func(train *Data) (fpm.FPM, error) {
		r, err := Linear(train, Options{Terms: synthTerms})
		if err != nil {
			return nil, err
		}
		return r.Model, nil
	}
	cv, err := CrossValidate(d, 5, 1, fitFn, 3)
	require.NoError(t, err)
	require.Len(t, cv.Folds, 5)
	require.Equal(t, 1000, cv.Report.Overall.Count)
	require.InDelta(t, 1.6, cv.Report.Overall.MAPE, 0.4, "2%% Gaussian noise: MAPE ≈ 0.8·2%%")
	require.Greater(t, cv.Report.Overall.R2, 0.99)
	require.Len(t, cv.Report.Worst, 3)
	cv2, err := CrossValidate(d, 5, 1, fitFn, 3)
	require.NoError(t, err)
	require.Equal(t, cv.Predictions, cv2.Predictions)

	_, err = CrossValidate(d, 1, 1, fitFn, 0)
	require.Error(t, err)
	_, err = CrossValidate(d.Subset([]int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}), 4, 1, fitFn, 0)
	require.ErrorIs(t, err, ErrTooFewRows)
	require.ErrorContains(t, err, "fold 1 of 4")

	train, test := Split(d, 0.2, 3)
	require.Equal(t, 1000, train.Len()+test.Len())
	require.InDelta(t, 200, test.Len(), 40)
	m, err := fitFn(train)
	require.NoError(t, err)
	require.Less(t, Evaluate(m, test, 0).Overall.MAPE, 2.5)
}
