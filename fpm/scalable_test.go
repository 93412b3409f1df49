package fpm

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/steplab/steplab/catalog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var scaleSteps = []Features{decodeStep(1, 128), decodeStep(64, 2048), prefillStep(4096),
	{PrefillTokens: 512, PrefillRequests: 1, PrefillAttn: 512 * 256, DecodeRequests: 16, PaddedBatch: 16, DecodeKVTokens: 16 * 900}}

// A prior scaled by ones predicts exactly what it did; each multiplier
// moves its own part of the roofline and nothing else.
func TestRooflineScaled(t *testing.T) {
	r := NewRoofline(h200, llama8B).Prepare()
	assert.Equal(t, []string{PriorTermGEMM, PriorTermPrefillAttn, PriorTermDecodeAttn, PriorTermOverhead}, r.ScaleTerms())
	ones, err := r.Scaled([]float64{1, 1, 1, 1})
	require.NoError(t, err)
	for _, f := range scaleSteps {
		assert.Equal(t, r.PredictNs(f), ones.PredictNs(f), "ones: the prior itself")
	}
	s, err := r.Scaled([]float64{2, 3, 5, 7})
	require.NoError(t, err)
	assert.Equal(t, []float64{2, 3, 5, 7}, s.ScaleValues())
	for _, f := range scaleSteps {
		b, sb := r.Breakdown(f), s.(*PreparedRoofline).Breakdown(f)
		assert.InEpsilon(t, 2*b.GEMMNs, sb.GEMMNs, 1e-12)
		if b.PrefillAttnNs > 0 {
			assert.InEpsilon(t, 3*b.PrefillAttnNs, sb.PrefillAttnNs, 1e-12)
		}
		if b.DecodeAttnNs > 0 {
			assert.InEpsilon(t, 5*b.DecodeAttnNs, sb.DecodeAttnNs, 1e-12)
		}
		assert.InEpsilon(t, 7*b.FixedNs, sb.FixedNs, 1e-12)
		assert.Equal(t, b.AllReduceNs, sb.AllReduceNs)
	}
	again, err := s.Scaled([]float64{0.5, 1, 1, 1})
	require.NoError(t, err)
	assert.Equal(t, []float64{1, 3, 5, 7}, again.ScaleValues(), "multipliers compose")
	for _, bad := range [][]float64{{1, 1, 1}, {0, 1, 1, 1}, {1, -1, 1, 1}} {
		_, err := r.Scaled(bad)
		assert.Error(t, err, "%v", bad)
	}
}

// A scaled roofline with residuals is saved as form roofline and Load
// reads it back: the same predictions and intervals.
func TestRooflineArtifactRoundTrip(t *testing.T) {
	r := NewRoofline(h200, llama8B).Prepare()
	assert.Contains(t, NoUncertainty(r, "r"), "a prior with no prediction intervals")
	s, err := r.Scaled([]float64{1.1, 0.9, 1.2, 0.8})
	require.NoError(t, err)
	assert.Contains(t, NoUncertainty(s, "cal"), "records no residuals", "a calibrated prior is no longer fitted to nothing")
	q := &ResidualQuantiles{Scale: ScaleRelative, P: []float64{0.05, 0.5, 0.95}, Values: []float64{-0.1, 0, 0.2}}
	s = s.WithResiduals(q)
	assert.Empty(t, NoUncertainty(s, "cal"))
	a, err := s.Artifact()
	require.NoError(t, err)
	require.Equal(t, FormRoofline, a.Form)
	path := filepath.Join(t.TempDir(), "roofline.json")
	require.NoError(t, a.Save(path))
	ra, err := ReadArtifact(path)
	require.NoError(t, err)
	back, err := ra.Model()
	require.NoError(t, err)
	for _, f := range scaleSteps {
		m, lo, hi := s.(IntervalFPM).PredictIntervalNs(f, 0.9)
		bm, blo, bhi := back.(IntervalFPM).PredictIntervalNs(f, 0.9)
		assert.Equal(t, []float64{m, lo, hi}, []float64{bm, blo, bhi})
		assert.Less(t, lo, hi)
	}

	for name, params := range map[string]string{
		"no roofline":    `{}`,
		"bad hardware":   `{"roofline": {"hardware": {"name": "x"}, "shape": {}}}`,
		"negative scale": `{"roofline": ` + string(mustJSON(t, r.Roofline)) + `, "scales": {"gemm": -1}}`,
	} {
		_, err := (&Artifact{ArtifactVersion: 1, Form: FormRoofline, Params: []byte(params)}).Model()
		assert.Error(t, err, name)
	}
}

// A linear model's terms are its coefficients.
func TestLinearScaled(t *testing.T) {
	l, err := NewLinear([]string{TermConst, TermDecodeKVTokens}, []float64{4e6, 30})
	require.NoError(t, err)
	s, err := l.Scaled([]float64{0.5, 2})
	require.NoError(t, err)
	assert.Equal(t, []float64{2e6, 60}, s.ScaleValues())
	assert.Equal(t, l.ScaleTerms(), s.ScaleTerms())
	a, err := s.Artifact()
	require.NoError(t, err)
	assert.Equal(t, FormLinear, a.Form)
}

// SetParam keeps a form's own params beside the ones it adds.
func TestArtifactSetParam(t *testing.T) {
	a := &Artifact{Params: []byte(`{"database": "db"}`)}
	require.NoError(t, a.SetParam("host", map[string]int{"x": 1}))
	assert.JSONEq(t, `{"database": "db", "host": {"x": 1}}`, string(a.Params))
	a.Params = []byte(`[1]`)
	assert.ErrorContains(t, a.SetParam("host", 1), "artifact params")
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// A roofline artifact written before links stated their domains (no
// interconnects[].gpus) reads as it was priced: its TP group on its
// fastest link, one node.
func TestRooflineArtifactBeforeNodes(t *testing.T) {
	r := NewRoofline(h200, llama70B.WithTP(16))
	old := r
	old.HW.Interconnects = []catalog.Interconnect{{Kind: catalog.LinkNVLink, GBsPerDirection: 450, LatencyUs: 5},
		{Kind: catalog.LinkPCIe, GBsPerDirection: 64, LatencyUs: 15}}
	a := &Artifact{ArtifactVersion: ArtifactVersion, Form: FormRoofline, Params: mustJSON(t, rooflineArtifactParams{Roofline: &old})}
	m, err := a.Model()
	require.NoError(t, err)
	wide := r
	wide.HW.Interconnects = []catalog.Interconnect{{Kind: catalog.LinkNVLink, GBsPerDirection: 450, LatencyUs: 5, GPUs: 16}}
	f := decodeStep(64, 1024)
	assert.Equal(t, wide.PredictNs(f), m.PredictNs(f), "one NVLink domain of 16, as priced before")
	assert.Less(t, m.PredictNs(f), r.PredictNs(f), "two nodes of 8 cost the network")
}
