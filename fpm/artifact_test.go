package fpm

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestArtifactLinearRoundTrip(t *testing.T) {
	m, err := NewLinear([]string{"const", "decode_kv_tokens"}, []float64{4e6, 1.2})
	require.NoError(t, err)
	m.CoefLo, m.CoefHi, m.CoefLevel = []float64{3.9e6, 1.1}, []float64{4.1e6, 1.3}, 0.95
	m.Residuals, _ = NewResidualQuantiles(ScaleRelative, []float64{-0.1, 0, 0.1}, nil, "training")
	a := LinearArtifact(m)
	a.Training = Training{
		Datasets:  []DatasetRef{{ID: "cap1", Path: "data/cap1", SHA256: "ab12", Rows: 1000}},
		Selection: Selection{Roles: []string{"measured", "production"}, Kinds: []string{"decode"}, Valid: true, Policy: "steady_state_second_step"},
	}
	a.Metrics = json.RawMessage(`{"mape":0.031}`)
	a.CreatedBy = "test"
	path := filepath.Join(t.TempDir(), "m.json")
	require.NoError(t, Save(path, a))
	entries, _ := os.ReadDir(filepath.Dir(path))
	require.Len(t, entries, 1, "no temporary file left behind")

	fpModel, got, err := load(path)
	require.NoError(t, err)
	require.Equal(t, 1, got.ArtifactVersion)
	require.Equal(t, "linear", got.Form)
	require.Equal(t, a.Training, got.Training)
	require.JSONEq(t, `{"mape":0.031}`, string(got.Metrics))
	f := Features{DecodeRequests: 2, DecodeKVTokens: 1000}
	require.Equal(t, m.PredictNs(f), fpModel.PredictNs(f))
	lm := fpModel.(*Linear)
	require.Equal(t, m.CoefLo, lm.CoefLo)
	require.Equal(t, 0.95, lm.CoefLevel)
	_, lo, hi := lm.PredictIntervalNs(f, 0.9)
	require.Less(t, lo, hi)

	raw, _ := os.ReadFile(path)
	var generic map[string]any
	require.NoError(t, json.Unmarshal(raw, &generic))
	for _, k := range []string{"artifact_version", "form", "terms", "coefficients", "training", "metrics", "created_by"} {
		require.Contains(t, generic, k)
	}
}

func TestArtifactGridRoundTrip(t *testing.T) {
	a := GridArtifact(testGrid())
	path := filepath.Join(t.TempDir(), "models", "g.json") // Save creates models/
	require.NoError(t, a.Save(path))
	fpModel, _, err := load(path)
	require.NoError(t, err)
	require.Equal(t, 6e6, fpModel.PredictNs(dec(8, 1024)))
}

func writeRaw(t *testing.T, s string) string {
	p := filepath.Join(t.TempDir(), "a.json")
	require.NoError(t, os.WriteFile(p, []byte(s), 0o644))
	return p
}

func TestArtifactRefusals(t *testing.T) {
	_, _, err := load(writeRaw(t, `{"artifact_version": 7, "form": "linear", "future_field": {"x": 1}}`))
	require.ErrorContains(t, err, "artifact version 7 is newer than this build reads (version 1)")
	_, _, err = load(writeRaw(t, `{"artifact_version": 1, "form": "neural"}`))
	require.ErrorContains(t, err, `unknown model form "neural"`)
	_, _, err = load(writeRaw(t, `{"form": "linear"}`))
	require.ErrorContains(t, err, "no artifact_version")
	_, _, err = load(writeRaw(t, `{"artifact_version": 1, "form": "linear", "terms": ["const"], "coefficients": []}`))
	require.ErrorContains(t, err, "1 terms but 0 coefficients")
	_, _, err = load(writeRaw(t, `{"artifact_version": 1, "form": "grid"}`))
	require.ErrorContains(t, err, "no \"grid\"")
	_, _, err = load(filepath.Join(t.TempDir(), "absent.json"))
	require.Error(t, err)
}

// TestArtifactOpsForm: an ops artifact is built by package pricing, which
// reads its database; Model says so.
func TestArtifactOpsForm(t *testing.T) {
	_, _, err := load(writeRaw(t, `{"artifact_version": 1, "form": "ops", "params": {}}`))
	require.ErrorContains(t, err, "build it with package pricing")
}

// load reads an artifact file and builds its model (pricing.Load, less the
// ops form).
func load(path string) (FPM, *Artifact, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	a, err := ParseArtifact(b)
	if err != nil {
		return nil, nil, err
	}
	m, err := a.Model()
	return m, a, err
}
