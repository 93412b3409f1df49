package fit

import (
	"bytes"
	"encoding/xml"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/scenario"
)

// truth is the decode model the synthetic datasets are drawn from.
var truth = []float64{4e6, 20e3, 30} // const, decode_requests, decode_kv_tokens (ns)

// synthDecode draws n decode steps from truth with 2% multiplicative noise.
func synthDecode(n int, seed uint64) []datasets.Step {
	rng := rand.New(rand.NewPCG(seed, 1))
	out := make([]datasets.Step, n)
	for i := range out {
		b := 1 + rng.IntN(256)
		ctx := 128 + rng.IntN(4096)
		y := (truth[0] + truth[1]*float64(b) + truth[2]*float64(b*ctx)) * (1 + 0.02*rng.NormFloat64())
		out[i] = datasets.Step{StepID: int64(i), Kind: datasets.KindDecode, Role: datasets.RoleProduction, Valid: true, BenchmarkID: -1,
			NumCachedReqs: int32(b), NumDecodeRequests: int32(b), SumDecodeKVTokens: int64(b * ctx), TotalScheduledTokens: int64(b),
			WallTimeNs: int64(y), GPUTimeNs: -1, NarrowTimeNs: int64(y)}
	}
	return out
}

// writeDataset writes steps as a dataset (manifest policy optional).
func writeDataset(t *testing.T, dir string, steps []datasets.Step, decodePolicy string) string {
	t.Helper()
	m := datasets.Manifest{Name: filepath.Base(dir), Source: datasets.Source{Kind: "test"}}
	if decodePolicy != "" {
		m.MeasurementPolicy = &datasets.MeasurementPolicy{Decode: decodePolicy}
	}
	return writeManifestDataset(t, dir, steps, m)
}

// writeManifestDataset writes steps as a dataset with manifest m.
func writeManifestDataset(t *testing.T, dir string, steps []datasets.Step, m datasets.Manifest) string {
	t.Helper()
	w, err := datasets.Create(dir, m, datasets.CreateOptions{})
	require.NoError(t, err)
	tw, err := datasets.NewTableWriter[datasets.Step](w, datasets.TableSteps, datasets.TableOptions{})
	require.NoError(t, err)
	require.NoError(t, tw.Write(steps))
	require.NoError(t, tw.Close())
	require.NoError(t, w.Close())
	return dir
}

func truthModel(t *testing.T, scaleKV float64) *fpm.Linear {
	m, err := fpm.NewLinear(DecodeTerms, []float64{truth[0], truth[1], truth[2] * scaleKV})
	require.NoError(t, err)
	return m
}

func decodeData(t *testing.T, steps []datasets.Step) *Data {
	d, err := DataFromSteps(steps, TargetWall)
	require.NoError(t, err)
	return d
}

func TestCheckGate(t *testing.T) {
	d := decodeData(t, synthDecode(400, 1))
	good, bad := truthModel(t, 1), truthModel(t, 1.5)

	r, err := Check(good, d, CheckOptions{MaxMAPE: 5, MaxP90: 8})
	require.NoError(t, err)
	require.True(t, r.Passed, "%+v", r.Checks)
	require.NoError(t, r.Err())
	require.Len(t, r.Checks, 2, "overall only: one kind")

	r, err = Check(bad, d, CheckOptions{MaxMAPE: 5, MaxP90: 8})
	require.NoError(t, err)
	require.False(t, r.Passed)
	require.ErrorIs(t, r.Err(), ErrCheckFailed)
	var cf *CheckFailedError
	require.True(t, errors.As(r.Err(), &cf))
	require.Len(t, cf.Failed, 2)
	var buf bytes.Buffer
	r.WriteTable(&buf, true)
	require.Contains(t, buf.String(), "FAIL")
	require.Contains(t, buf.String(), "mape_pct")
	t.Logf("bad model: MAPE %.1f%%, p90 %.1f%%\n%s", r.Report.Overall.MAPE, r.Report.Overall.P90APE, buf.String())

	// Baseline: a slightly worse model (+~3 pp) regresses past 1 pp but
	// not past 10 pp.
	worse := truthModel(t, 1.05)
	r, err = Check(worse, d, CheckOptions{Baseline: good, MaxRegression: 1})
	require.NoError(t, err)
	require.False(t, r.Passed, "%+v", r.Checks)
	reg := r.Checks[0]
	require.Equal(t, "mape_regression_pp", reg.Metric)
	require.Greater(t, reg.Value, 1.0)
	r, err = Check(worse, d, CheckOptions{Baseline: good, MaxRegression: 10})
	require.NoError(t, err)
	require.True(t, r.Passed)
	// The baseline itself never regresses against itself.
	r, err = Check(good, d, CheckOptions{Baseline: good, MaxMAPE: 5})
	require.NoError(t, err)
	require.True(t, r.Passed)

	// Bad options are errors, not passes.
	_, err = Check(good, d, CheckOptions{})
	require.ErrorContains(t, err, "nothing to check")
	_, err = Check(good, d, CheckOptions{MaxMAPE: -1})
	require.Error(t, err)
	_, err = Check(good, &Data{}, CheckOptions{MaxMAPE: 5})
	require.ErrorIs(t, err, ErrEmptySelection)
}

func TestCheckJUnitParses(t *testing.T) {
	d := decodeData(t, append(synthDecode(200, 2), prefillSteps(50)...))
	r, err := Check(truthModel(t, 1.5), d, CheckOptions{MaxMAPE: 5, MaxP90: 10, Baseline: truthModel(t, 1), MaxRegression: 1})
	require.NoError(t, err)
	r.Model = "model.json"
	var buf bytes.Buffer
	require.NoError(t, r.WriteJUnit(&buf))
	var back JUnitSuites
	require.NoError(t, xml.Unmarshal(buf.Bytes(), &back), buf.String())
	require.Len(t, back.Suites, 1)
	s := back.Suites[0]
	require.Equal(t, len(r.Checks), s.Tests)
	require.Len(t, s.Cases, len(r.Checks), "one testcase per check")
	require.Equal(t, 9, len(r.Checks), "3 checks × (overall, decode, prefill)")
	fails := 0
	for _, c := range s.Cases {
		if c.Failure != nil {
			fails++
			require.NotEmpty(t, c.Failure.Message)
		}
	}
	require.Equal(t, len(r.Failures()), fails)
	require.Equal(t, fails, s.Failures)
	require.Greater(t, fails, 0)
	require.Contains(t, s.Cases[0].Name, "overall")
}

// prefillSteps are steps of another kind the decode truth prices at its
// const only (so any model checks them badly: a second scope).
func prefillSteps(n int) []datasets.Step {
	out := make([]datasets.Step, n)
	for i := range out {
		out[i] = datasets.Step{StepID: int64(10000 + i), Kind: datasets.KindPrefill, Role: datasets.RoleProduction, Valid: true,
			NumNewReqs: 1, NumPrefillRequests: 1, SumPrefillTokens: 512, WallTimeNs: int64(9e6 + 1e3*float64(i)), GPUTimeNs: -1}
	}
	return out
}

func TestLoadDatasetsWarnsOnAdmission(t *testing.T) {
	dir := t.TempDir()
	steady := writeDataset(t, filepath.Join(dir, "steady"), synthDecode(50, 3), datasets.PolicySteadyStateSecondStep)
	adm := writeDataset(t, filepath.Join(dir, "adm"), synthDecode(50, 4), datasets.PolicyAdmissionStep)
	l, err := LoadDatasets([]string{steady}, LoadOptions{})
	require.NoError(t, err)
	require.Empty(t, l.Warnings)
	require.Equal(t, datasets.PolicySteadyStateSecondStep, l.Policy)
	l, err = LoadDatasets([]string{steady, adm}, LoadOptions{})
	require.NoError(t, err)
	require.Len(t, l.Warnings, 1)
	require.Contains(t, l.Warnings[0], "admission_step")
	require.Contains(t, l.Warnings[0], "steady_state_second_step")
	require.Equal(t, "mixed", l.Policy)
	require.Equal(t, 100, l.Data.Len())
	require.Len(t, l.Refs, 2)
	require.Len(t, l.Refs[0].SHA256, 64)
	require.Equal(t, "adm", l.DatasetOf(60))
	require.Equal(t, TargetWall, l.Data.Target, "no gpu_time_ns: auto falls back to wall time")
}

func TestFitDatasetsRecoversTruth(t *testing.T) {
	dir := t.TempDir()
	ds := writeDataset(t, filepath.Join(dir, "ds"), synthDecode(600, 5), "")
	plots := filepath.Join(dir, "plots")
	rep, art, _, err := FitDatasets([]string{ds}, FitConfig{Form: fpm.FormLinear, Load: LoadOptions{Target: TargetWall}, Linear: Options{Terms: DecodeTerms, Bootstrap: 100},
		CV: 5, Seed: 1, PlotsDir: plots, CreatedBy: "test"})
	require.NoError(t, err)
	for i, c := range rep.Coefficients {
		t.Logf("%s = %.4g [%.4g, %.4g] (truth %.4g)", c.Term, c.Value, c.Lo, c.Hi, truth[i])
		require.InEpsilon(t, truth[i], c.Value, 0.2)
	}
	require.NotNil(t, rep.CV)
	require.Less(t, rep.CV.Report.Overall.MAPE, 3.0)
	require.Equal(t, TargetWall, art.Training.Target)
	require.Len(t, art.Training.Datasets, 1)
	require.Equal(t, int64(600), art.Training.Datasets[0].Rows)
	require.NotEmpty(t, art.Metrics)
	path := filepath.Join(dir, "m.json")
	require.NoError(t, art.Save(path))
	ev, _, err := EvalDatasets(path, []string{ds}, EvalConfig{})
	require.NoError(t, err)
	require.Equal(t, TargetWall, ev.Target)
	require.InDelta(t, rep.Training.Overall.MAPE, ev.Report.Overall.MAPE, 1e-9)
	var buf bytes.Buffer
	rep.WriteText(&buf)
	require.Contains(t, buf.String(), "decode_kv_tokens")
	require.Contains(t, buf.String(), "cross-validation")
	ev.WriteText(&buf)

	// Grid form on the same rows.
	_, gart, _, err := FitDatasets([]string{ds}, FitConfig{Form: fpm.FormGrid, Load: LoadOptions{Target: TargetWall}, CV: 0})
	require.NoError(t, err)
	require.Equal(t, fpm.FormGrid, gart.Form)
	_, err = gart.Model()
	require.NoError(t, err)
}

func TestPlotsWritten(t *testing.T) {
	d := decodeData(t, append(synthDecode(300, 6), prefillSteps(30)...))
	m := truthModel(t, 1)
	pred := make([]float64, d.Len())
	for i, f := range d.Features {
		pred[i] = m.PredictNs(f)
	}
	dir := filepath.Join(t.TempDir(), "figs")
	files, err := WritePlots(dir, d, pred, m, PlotOptions{Title: "test"})
	require.NoError(t, err)
	require.Len(t, files, 10, "5 figures × png, svg")
	labels := map[string][]string{
		"predicted_vs_measured": {LabelMeasured, LabelPredicted},
		"residuals_vs_batch":    {LabelBatch, "measured (%)"},
		"residuals_vs_kv":       {LabelKVTokens},
		"time_vs_batch":         {LabelBatch, LabelStepTime},
		"error_cdf":             {LabelAPE},
	}
	for _, f := range files {
		st, err := os.Stat(f)
		require.NoError(t, err)
		require.Greater(t, st.Size(), int64(1000), f)
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		name := strings.TrimSuffix(filepath.Base(f), filepath.Ext(f))
		if strings.HasSuffix(f, ".png") {
			require.Equal(t, "\x89PNG", string(b[:4]), f)
			continue
		}
		require.Contains(t, string(b), "<svg", f)
		for _, l := range labels[name] {
			require.Contains(t, string(b), l, "%s has its axis label", f)
		}
	}
	_, err = WritePlots(dir, d, pred[:3], m, PlotOptions{})
	require.Error(t, err)
}

func TestDegenerateInputThroughLoad(t *testing.T) {
	dir := t.TempDir()
	fitIt := func(steps []datasets.Step, name string, sel Selection) error {
		ds := writeDataset(t, filepath.Join(dir, name), steps, "")
		_, _, _, err := FitDatasets([]string{ds}, FitConfig{Form: fpm.FormLinear, Load: LoadOptions{Selection: sel, Target: TargetWall}, Linear: Options{Terms: DecodeTerms}, CV: 0})
		return err
	}
	// Too few rows.
	err := fitIt(synthDecode(3, 7), "few", Selection{})
	require.ErrorIs(t, err, ErrTooFewRows)
	// A constant feature: every step has the same batch.
	steps := synthDecode(50, 8)
	for i := range steps {
		steps[i].NumDecodeRequests = 8
	}
	err = fitIt(steps, "const", Selection{})
	require.ErrorIs(t, err, ErrConstantColumn)
	require.ErrorContains(t, err, "decode_requests")
	// Unknown or negative timings (the schema stores int64 ns, so an
	// unknown timing is -1 rather than NaN).
	steps = synthDecode(50, 9)
	steps[17].WallTimeNs = -1
	err = fitIt(steps, "nan", Selection{})
	require.ErrorIs(t, err, ErrBadTarget)
	require.ErrorContains(t, err, "step_id 17")
	// NaN timings in memory (a Data built by a library user).
	d := decodeData(t, synthDecode(50, 10))
	d.Y[5] = math.NaN()
	_, err = Linear(d, Options{Terms: DecodeTerms})
	require.ErrorIs(t, err, ErrBadTarget)
	// Empty selection: only scaffolding rows, or a kind not present.
	steps = synthDecode(50, 11)
	for i := range steps {
		steps[i].Role = datasets.RoleScaffolding
	}
	err = fitIt(steps, "scaffold", Selection{})
	require.ErrorIs(t, err, ErrEmptySelection)
	err = fitIt(synthDecode(50, 12), "nokind", Selection{Kinds: []string{datasets.KindPrefill}})
	require.ErrorIs(t, err, ErrEmptySelection)
	require.ErrorContains(t, err, "prefill")
	_, err = LoadDatasets([]string{filepath.Join(dir, "few")}, LoadOptions{Selection: Selection{Roles: []string{datasets.RoleScaffolding}}})
	require.ErrorContains(t, err, "never fitted")
}

// The payload and host-overhead fits recover the simulator's priors from
// a simulated production trace (the simulator prices payload and host
// windows with fpm.DefaultPayloadModel and fpm.DefaultHostModel).
func TestFitOverheadsRecoversSimulatorPriors(t *testing.T) {
	sc := scenario.Default()
	// A small token budget chunks long prompts, so scheduled tokens and
	// admitted prompt tokens vary apart (with every prompt admitted whole,
	// total_scheduled_tokens = prompt tokens + decode requests, and the
	// fit rightly refuses prep_per_token_ns and prep_per_new_token_ns as
	// collinear).
	sc.Engine.MaxNumBatchedTokens = 2048
	sc.Workload = scenario.WorkloadSpec{Kind: "poisson", RateRPS: 20, Requests: 600,
		Prompt: scenario.LengthSpec{Kind: "lognormal", Mean: 1200, Sigma: 0.8, Min: 16, Max: 8000},
		Output: scenario.LengthSpec{Kind: "lognormal", Mean: 200, Sigma: 0.8, Min: 4, Max: 1000}}
	dir := simulateTo(t, filepath.Join(t.TempDir(), "prod"), sc)
	// A deliberately wrong prior: the fit must move away from it.
	pp := fpm.DefaultPayloadModel()
	pp.TokenIDBytes, pp.NewReqFixedBytes = 1, 1
	hp := fpm.DefaultHostModel()
	hp.PrepPerNewTokenNs, hp.PrepFixedNs, hp.ShipMBps = 1, 1, 1000
	of, err := FitOverheads([]string{dir}, pp, hp)
	require.NoError(t, err)
	require.NotNil(t, of.Payload)
	want := fpm.DefaultPayloadModel()
	t.Logf("payload fit: %+v (prior kept for %v), MAPE %.3f%%", of.Payload.Model, of.Payload.Fit.Prior, of.Payload.Fit.Metrics.MAPE)
	require.InEpsilon(t, want.TokenIDBytes, of.Payload.Model.TokenIDBytes, 0.05)
	require.InEpsilon(t, want.NewReqFixedBytes, of.Payload.Model.NewReqFixedBytes, 0.1)
	require.Less(t, of.Payload.Fit.Metrics.MAPE, 2.0)
	// finished_req_bytes is not recovered (≈0 against 8): the simulator
	// ships a step's finished ids with the next scheduler output, which
	// num_finished of the same row does not line up with; the term is a
	// few bytes per step either way.
	wh := fpm.DefaultHostModel()
	for _, f := range of.Host.Fits {
		t.Logf("host %s: %v = %.4g (prior kept for %v), MAPE %.3f%%", f.Window, f.Terms, f.Coef, f.Prior, f.Metrics.MAPE)
	}
	t.Logf("host fit: %+v", of.Host.Model)
	require.InEpsilon(t, wh.PrepFixedNs, of.Host.Model.PrepFixedNs, 0.05)
	require.InEpsilon(t, wh.PrepPerNewTokenNs, of.Host.Model.PrepPerNewTokenNs, 0.1)
	require.InEpsilon(t, wh.PrepPerNewReqNs, of.Host.Model.PrepPerNewReqNs, 0.1)
	require.InEpsilon(t, wh.ShipMBps, of.Host.Model.ShipMBps, 0.05)
	require.InEpsilon(t, wh.ShipFixedNs, of.Host.Model.ShipFixedNs, 0.05)
}

// An admission-step decode point recorded as the prefill step it is (B new
// requests computing one token each) is read at its benchmark coordinate
// under BenchmarkCoords, and left alone otherwise.
func TestBenchmarkCoords(t *testing.T) {
	steps := synthDecode(30, 13)
	for i := range steps {
		s := &steps[i]
		n := s.NumDecodeRequests
		s.Role, s.BenchmarkID, s.Kind = datasets.RoleMeasured, int64(i+1), datasets.KindPrefill
		s.NumNewReqs, s.NumCachedReqs, s.NumPrefillRequests, s.SumPrefillTokens = n, 0, n, int64(n)
		s.SumPrefillKVTokens, s.NumDecodeRequests, s.SumDecodeKVTokens = s.SumDecodeKVTokens, 0, 0
	}
	ds := writeDataset(t, filepath.Join(t.TempDir(), "adm"), steps, datasets.PolicyAdmissionStep)
	dec := Selection{Kinds: []string{datasets.KindDecode}}
	_, err := LoadDatasets([]string{ds}, LoadOptions{Selection: dec})
	require.ErrorIs(t, err, ErrEmptySelection, "without BenchmarkCoords they are prefill steps")
	l, err := LoadDatasets([]string{ds}, LoadOptions{Selection: dec, BenchmarkCoords: true})
	require.NoError(t, err)
	require.Equal(t, 30, l.Relabelled)
	orig := synthDecode(30, 13)
	for i, f := range l.Data.Features {
		require.EqualValues(t, orig[i].NumDecodeRequests, f.DecodeRequests)
		require.EqualValues(t, orig[i].SumDecodeKVTokens, f.DecodeKVTokens)
		require.Zero(t, f.PrefillTokens)
		require.EqualValues(t, orig[i].NumDecodeRequests, f.NewRequests, "the admission is still visible")
	}
}
