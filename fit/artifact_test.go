package fit

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/pricing"
	"github.com/stretchr/testify/require"
)

func TestResultArtifactRoundTrip(t *testing.T) {
	d := synthData(51, 400, synthTerms, synthTrue, 0.02)
	res, err := Linear(d, Options{Terms: synthTerms, Method: MethodHuberNN, Bootstrap: 50, Seed: 3})
	require.NoError(t, err)
	rep := Evaluate(res.Model, d, 5)
	tr := fpm.Training{
		Datasets:  []fpm.DatasetRef{{ID: "synthetic", Path: "mem://", SHA256: "00", Rows: 400}},
		Selection: Selection{}.Record("production"),
		Target:    TargetGPU,
		Seed:      3,
	}
	a, err := res.Artifact(tr, rep, "fit test")
	require.NoError(t, err)
	require.Equal(t, "huber-nn", a.Training.Method)
	require.Equal(t, 400, a.Training.Rows)
	require.Equal(t, 50, a.Training.Bootstrap)
	require.Len(t, a.Features, 4, "const has no feature definition")
	path := filepath.Join(t.TempDir(), "m.json")
	require.NoError(t, a.Save(path))
	fpModel, back, err := pricing.Load(path)
	require.NoError(t, err)
	var got Report
	require.NoError(t, json.Unmarshal(back.Metrics, &got))
	require.Equal(t, rep.Overall.Count, got.Overall.Count)
	require.InDelta(t, rep.Overall.MAPE, got.Overall.MAPE, 1e-12)
	require.Len(t, got.Worst, 5)
	for i, f := range d.Features[:20] {
		require.InEpsilon(t, res.Model.PredictNs(f), fpModel.PredictNs(f), 1e-12, "row %d", i)
	}
	lm := fpModel.(*fpm.Linear)
	require.Equal(t, res.Model.CoefLo, lm.CoefLo)

	// Grids travel the same way.
	g, _, err := BuildGrid(benchRows(), GridOptions{})
	require.NoError(t, err)
	ga := fpm.GridArtifact(g)
	require.NoError(t, ga.Save(path))
	gm, _, err := pricing.Load(path)
	require.NoError(t, err)
	f := fpm.Features{DecodeRequests: 20, DecodeKVTokens: 20 * 3000}
	require.Equal(t, g.PredictNs(f), gm.PredictNs(f))
}
