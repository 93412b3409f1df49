package replay

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fit"
	"github.com/steplab/steplab/fpm"
)

// A run simulated with its roofline prior, whose parts are known: started
// from the prior mispriced part by part, the step fit recovers each
// part's multiplier from the recorded steps (within 2%: step times are
// rounded to ns, nothing else is off), and the calibration keeps them
// there (within 5%) while it fits the requests.
func TestStepFitRecoversParts(t *testing.T) {
	dir, p := simulated(t, "async")
	d, err := datasets.Open(dir)
	require.NoError(t, err)
	tr, err := LoadTrace(d)
	require.NoError(t, err)
	prior, ok := p.Engine().FPM.(fpm.Scalable)
	require.True(t, ok)
	require.Equal(t, []string{fpm.PriorTermGEMM, fpm.PriorTermPrefillAttn, fpm.PriorTermDecodeAttn, fpm.PriorTermOverhead}, prior.ScaleTerms())
	for _, off := range [][]float64{{1.5, 0.6, 1.8, 0.7}, {0.6, 2.5, 0.8, 1.4}} {
		t.Run(fmt.Sprint(off), func(t *testing.T) {
			start, err := prior.Scaled(off)
			require.NoError(t, err)
			sf, why, err := fitSteps([]string{dir}, start, []int{0, 1, 2, 3})
			require.NoError(t, err)
			require.NotNil(t, sf, why)
			for i, m := range sf.Multipliers {
				assert.InEpsilon(t, 1/off[i], m, 0.02, "%s", sf.Terms[i])
			}
			assert.Less(t, sf.MAPEAfter, 0.5, "the step-fitted model is the one that generated the run")
			assert.Greater(t, sf.MAPEBefore, 10.0)

			res, err := Calibrate([]CalibSet{{Name: "sim", Dir: dir, Trace: tr, Plan: p.Plan}},
				CalibOptions{Start: start, Host: p.Engine().Host, HostParams: []string{}, MaxEvals: 60})
			require.NoError(t, err)
			require.NotNil(t, res.StepFit)
			assert.Equal(t, RidgeStepFit, res.Ridge)
			require.Len(t, res.StepFitted, 1)
			assert.Less(t, res.StepFitted[0].MeanAbs(), 0.02, "the step fit alone reproduces the requests")
			for i, pv := range res.Params {
				assert.InEpsilon(t, 1/off[i], pv.Multiplier, 0.05, "%s", pv.Name)
				assert.InEpsilon(t, sf.Multipliers[i], pv.StepFit, 1e-9)
			}
			a, err := res.Artifact(nil, nil, "test")
			require.NoError(t, err)
			assert.Contains(t, a.Notes[0], "step fit on")
		})
	}
}

// Without a dataset directory (or with NoStepFit) there is no step fit:
// the ridge pulls toward the start, and a note
// and a warning say so.
func TestCalibrateWithoutSteps(t *testing.T) {
	dir, p := simulated(t, "async")
	d, err := datasets.Open(dir)
	require.NoError(t, err)
	tr, err := LoadTrace(d)
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		set  CalibSet
		opts CalibOptions
		why  string
	}{
		{"no dir", CalibSet{Name: "sim", Trace: tr, Plan: p.Plan}, CalibOptions{}, "no fitted run is a dataset directory"},
		{"not asked", CalibSet{Name: "sim", Dir: dir, Trace: tr, Plan: p.Plan}, CalibOptions{NoStepFit: true}, "not asked for"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := c.opts
			o.Start, o.Host, o.HostParams, o.MaxEvals = p.Engine().FPM.(fpm.Scalable), p.Engine().Host, []string{}, 1
			res, err := Calibrate([]CalibSet{c.set}, o)
			require.NoError(t, err)
			assert.Nil(t, res.StepFit)
			assert.Equal(t, RidgeStart, res.Ridge)
			require.NotEmpty(t, res.Notes)
			assert.Contains(t, res.Notes[0], c.why)
			assert.Contains(t, res.Warnings, "4 FPM terms fitted to request metrics alone, which do not separate them: their split is what the ridge left, not a measurement")
			assert.Contains(t, res.Warnings[len(res.Warnings)-1], "did not converge")
		})
	}
}

// warn flags each multiplier outside PlausibleBand, and only those.
func TestCalibWarnBand(t *testing.T) {
	r := &CalibResult{Status: StatusConverged, StepFit: &StepFit{}, Params: []ParamValue{
		{Name: "fpm.gemm", Multiplier: 1.96}, {Name: "fpm.prefill_attn", Multiplier: 0.16},
		{Name: "fpm.decode_attn", Multiplier: 2.01}, {Name: "host.prep_fixed", Multiplier: 0.5}}}
	r.warn()
	require.Len(t, r.Warnings, 2)
	assert.Contains(t, r.Warnings[0], "fpm.prefill_attn: fitted multiplier 0.16 is outside")
	assert.Contains(t, r.Warnings[1], "fpm.decode_attn: fitted multiplier 2.01 is outside")
}

// Two parts whose step times move together are reported as not
// identifiable; independent ones are not.
func TestCorrelatedTerms(t *testing.T) {
	ds := &fit.Design{Terms: []string{"a", "b", "c"}}
	for i := 0; i < 50; i++ {
		x := float64(1 + i%7)
		ds.X = append(ds.X, x, 2*x+0.01*float64(i%2), float64((i*13)%11))
		ds.Y = append(ds.Y, 1)
		ds.W = append(ds.W, 1)
	}
	got := correlatedTerms(ds, []bool{true, true, true})
	require.Len(t, got, 1)
	assert.Equal(t, [2]int{0, 1}, [2]int{got[0].a, got[0].b})
	assert.Empty(t, correlatedTerms(ds, []bool{true, false, true}), "an unused column is not compared")
}

// On the H200 Llama capture the step fit separates the ops prior's parts
// that the request metrics traded and the host fit measures the serial
// worker's host path (docs/replay.md): fitted at 5 req/s, the 12 req/s run
// it never saw comes within 3% on mean E2E and ITL and 5% on mean TTFT,
// and the prefill-attention multiplier, outside the plausible band (the
// worker's Triton prefill against FlashAttention), is warned about.
func TestCalibrateH200StepFitHoldout(t *testing.T) {
	const dir = "../datasets/h200/"
	run, err := CalibSpec{Datasets: []string{dir + "traffic-azure-5rps"}, HoldoutDatasets: []string{dir + "traffic-azure-12rps"}}.Setup()
	require.NoError(t, err)
	res, err := Calibrate(run.Sets, run.Opts)
	require.NoError(t, err)
	require.NotNil(t, res.StepFit)
	assert.Less(t, res.StepFit.MAPEAfter, 5.0)
	assert.Greater(t, res.StepFit.MAPEBefore, 25.0)
	assert.Positive(t, res.StepFit.DecodeStepNs, "the ops prior's engine step costs are fitted beside the multipliers")
	require.NotNil(t, res.HostFit, "the capture records the worker's host windows")
	assert.Positive(t, res.HostFit.Model.OutputFixedNs, "a serial worker's output path is measured")
	require.Len(t, res.Holdout, 1)
	h := res.Holdout[0]
	for m, target := range map[string]float64{"e2e_mean": 0.03, "itl_mean": 0.03, "ttft_mean": 0.05} {
		assert.Less(t, math.Abs(h.RelErr[m]), target, "held-out %s %+.1f%%", m, 100*h.RelErr[m])
	}
	var band []string
	for _, w := range res.Warnings {
		if strings.Contains(w, "plausible band") {
			band = append(band, w[:strings.Index(w, ":")])
		}
	}
	assert.Equal(t, []string{"fpm.prefill_attn"}, band)
}

// A serial worker's host phases are recovered from a run simulated with
// them: each phase from its own window, the output path from what the
// inter-update period holds beyond the others. The worker's steps are
// longer than an overlapping worker's by exactly those phases.
func TestHostFitRecoversSerialWorker(t *testing.T) {
	dir, p := simulated(t, "serial")
	want := p.Engine().Host
	require.Positive(t, want.OutputFixedNs)
	run, err := CalibSpec{Datasets: []string{dir}}.Setup()
	require.NoError(t, err)
	require.True(t, run.Sets[0].Plan.Pools[0].Engine.SerialWorker, "the manifest records the serial worker")
	hf, note, err := fitHostSteps(run.Sets, fpm.DefaultHostModel())
	require.NoError(t, err)
	require.NotNil(t, hf, note)
	assert.Contains(t, note, "a serial worker")
	coef := func(h fpm.HostModel) map[string]float64 {
		b, err := json.Marshal(h)
		require.NoError(t, err)
		var m map[string]float64
		require.NoError(t, json.Unmarshal(b, &m))
		return m
	}
	got, exp := coef(hf.Model), coef(want)
	for _, k := range []string{"output_fixed_ns", "output_per_req_ns", "prep_fixed_ns", "prep_per_new_req_ns", "ship_fixed_ns", "update_fixed_ns"} {
		assert.InEpsilon(t, exp[k], got[k], 0.02, k)
	}
	// The same run with a worker that overlaps its host phases with the
	// previous step's device time: its steps are shorter.
	async, _ := simulated(t, "async")
	mean := func(dir string) float64 {
		d, err := datasets.Open(dir)
		require.NoError(t, err)
		steps, err := datasets.ReadAll[datasets.Step](d, datasets.TableSteps)
		require.NoError(t, err)
		var s float64
		for i := range steps {
			s += float64(steps[i].WallTimeNs - steps[i].GPUTimeNs)
		}
		return s / float64(len(steps))
	}
	assert.Greater(t, mean(dir), mean(async)+want.OutputFixedNs, "a serial worker's period holds its host phases")
}
