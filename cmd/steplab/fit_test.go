package main

import (
	"encoding/json"
	"encoding/xml"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fit"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/pricing"
)

// decodeSteps draws n decode steps of 4 ms + 20 µs/request + 30 ns/KV token
// with 2% noise; mod edits each row.
func decodeSteps(n int, seed uint64, mod func(i int, s *datasets.Step)) []datasets.Step {
	rng := rand.New(rand.NewPCG(seed, 2))
	out := make([]datasets.Step, n)
	for i := range out {
		b, ctx := 1+rng.IntN(256), 128+rng.IntN(4096)
		y := (4e6 + 20e3*float64(b) + 30*float64(b*ctx)) * (1 + 0.02*rng.NormFloat64())
		out[i] = datasets.Step{StepID: int64(i), Kind: datasets.KindDecode, Role: datasets.RoleProduction, Valid: true, BenchmarkID: -1,
			NumCachedReqs: int32(b), NumDecodeRequests: int32(b), SumDecodeKVTokens: int64(b * ctx), TotalScheduledTokens: int64(b),
			WallTimeNs: int64(y), NarrowTimeNs: int64(y), GPUTimeNs: -1}
		if mod != nil {
			mod(i, &out[i])
		}
	}
	return out
}

func stepsDataset(t *testing.T, dir string, steps []datasets.Step, policy string) string {
	t.Helper()
	m := datasets.Manifest{Name: filepath.Base(dir), Source: datasets.Source{Kind: "test"}}
	if policy != "" {
		m.MeasurementPolicy = &datasets.MeasurementPolicy{Decode: policy}
	}
	w, err := datasets.Create(dir, m, datasets.CreateOptions{})
	require.NoError(t, err)
	tw, err := datasets.NewTableWriter[datasets.Step](w, datasets.TableSteps, datasets.TableOptions{})
	require.NoError(t, err)
	require.NoError(t, tw.Write(steps))
	require.NoError(t, tw.Close())
	require.NoError(t, w.Close())
	return dir
}

func TestFitEvalCheckCLI(t *testing.T) {
	dir := t.TempDir()
	train := stepsDataset(t, filepath.Join(dir, "train"), decodeSteps(500, 1, nil), datasets.PolicyAdmissionStep)
	held := stepsDataset(t, filepath.Join(dir, "held"), decodeSteps(300, 2, nil), "")
	mpath := filepath.Join(dir, "model.json")
	plots := filepath.Join(dir, "plots")

	out, err := runCLI(t, "fit", train, "-o", mpath, "--terms", "decode", "--bootstrap", "50", "--cv", "4", "--plots", plots, "--json")
	require.NoError(t, err, out)
	var rep fit.FitReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	require.Len(t, rep.Coefficients, 3)
	require.InEpsilon(t, 30, rep.Coefficients[2].Value, 0.1)
	require.Greater(t, rep.Coefficients[2].Level, 0.0, "coefficients carry intervals")
	require.Len(t, rep.Warnings, 1, "admission_step manifest: warning in the JSON result")
	require.NotNil(t, rep.CV)
	require.Len(t, rep.Plots, 10)
	_, art, err := pricing.Load(mpath)
	require.NoError(t, err)
	require.Len(t, art.Training.Datasets, 1)
	require.Len(t, art.Training.Datasets[0].SHA256, 64)
	require.Equal(t, []string{"measured", "production"}, art.Training.Selection.Roles)
	require.Equal(t, datasets.PolicyAdmissionStep, art.Training.Selection.Policy)

	out, err = runCLI(t, "fit", train, "-o", mpath, "--terms", "decode", "--bootstrap", "20", "--force")
	require.NoError(t, err, out)
	require.Contains(t, out, "WARNING")
	require.Contains(t, out, "decode_kv_tokens")
	require.Contains(t, out, "MAPE")
	require.Contains(t, out, "worst steps")

	out, err = runCLI(t, "eval", mpath, held, "--json")
	require.NoError(t, err, out)
	var ev fit.EvalReport
	require.NoError(t, json.Unmarshal([]byte(out), &ev))
	require.Equal(t, 300, ev.Rows)
	require.Less(t, ev.Report.Overall.MAPE, 3.0)
	out, err = runCLI(t, "eval", mpath, held)
	require.NoError(t, err, out)
	require.Contains(t, out, "batch 129-256")

	// check: pass, fail on a bound, fail on a regression against a better
	// baseline, JUnit written and parseable.
	junit := filepath.Join(dir, "report.xml")
	out, err = runCLI(t, "check", mpath, held, "--max-mape", "8", "--max-p90", "15", "--junit", junit)
	require.NoError(t, err, out)
	require.Equal(t, 0, exitCode(err))
	require.Contains(t, out, "PASS")
	out, err = runCLI(t, "check", mpath, held, "--max-mape", "0.5")
	require.Equal(t, 1, exitCode(err), out)
	require.Contains(t, out, "FAILED")
	require.Contains(t, out, "mape_pct")

	// A worse model: the same artifact with the KV cost doubled.
	worse := *art
	worse.Coefficients = append([]fpm.Coefficient(nil), art.Coefficients...)
	worse.Coefficients[2].Value *= 2
	wpath := filepath.Join(dir, "worse.json")
	require.NoError(t, worse.Save(wpath))
	out, err = runCLI(t, "check", wpath, held, "--max-mape", "1000", "--baseline", mpath, "--max-regression", "1", "--junit", junit)
	require.Equal(t, 1, exitCode(err), out)
	require.Contains(t, out, "mape_regression_pp")
	b, rerr := os.ReadFile(junit)
	require.NoError(t, rerr)
	var suites fit.JUnitSuites
	require.NoError(t, xml.Unmarshal(b, &suites))
	require.Equal(t, 2, suites.Tests, "one testcase per check: MAPE bound and regression")
	require.Equal(t, 1, suites.Failures)
	out, err = runCLI(t, "check", mpath, held, "--baseline", wpath, "--max-regression", "1", "--json")
	require.NoError(t, err, out)
	var cr fit.CheckReport
	require.NoError(t, json.Unmarshal([]byte(out), &cr))
	require.True(t, cr.Passed)

	// Usage errors exit 2.
	_, err = runCLI(t, "check", mpath, held)
	require.Equal(t, 2, exitCode(err))
	_, err = runCLI(t, "check", mpath, held, "--max-mape", "5", "--max-regression", "1")
	require.Equal(t, 2, exitCode(err))
	_, err = runCLI(t, "check", filepath.Join(dir, "missing.json"), held, "--max-mape", "5")
	require.Equal(t, 2, exitCode(err))
	_, err = runCLI(t, "fit", train)
	require.Equal(t, 2, exitCode(err))
}

// Degenerate input gets a clear error through the CLI path (exit 2) and no
// model file.
func TestFitCLIDegenerate(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name  string
		steps []datasets.Step
		args  []string
		want  string
	}{
		{"too-few", decodeSteps(3, 1, nil), nil, "too few rows"},
		{"constant", decodeSteps(50, 2, func(_ int, s *datasets.Step) { s.NumDecodeRequests = 8 }), nil, "constant term (terms decode_requests)"},
		{"bad-timing", decodeSteps(50, 3, func(i int, s *datasets.Step) {
			if i == 7 {
				s.WallTimeNs = -1
			}
		}), nil, "bad timing at row 7 (step_id 7)"},
		{"empty-scaffolding", decodeSteps(50, 4, func(_ int, s *datasets.Step) { s.Role = datasets.RoleScaffolding }), nil, "empty selection"},
		{"empty-kind", decodeSteps(50, 5, nil), []string{"--kinds", "prefill"}, "empty selection"},
		{"scaffolding-role", decodeSteps(50, 6, nil), []string{"--roles", "scaffolding"}, "never fitted"},
		{"bad-target", decodeSteps(50, 7, nil), []string{"--target", "gpu_time_ns"}, "gpu_time_ns is -1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ds := stepsDataset(t, filepath.Join(dir, c.name), c.steps, "")
			mpath := filepath.Join(dir, c.name+".json")
			args := append([]string{"fit", ds, "-o", mpath, "--terms", "decode", "--bootstrap", "0", "--cv", "0"}, c.args...)
			_, err := runCLI(t, args...)
			require.Equal(t, 2, exitCode(err), "%v", err)
			require.ErrorContains(t, err, c.want)
			require.NoFileExists(t, mpath)
		})
	}
}

// eval builds a prior from the first dataset's manifest: the roofline or
// the measured-operations prior by spec, evaluated on device time.
func TestEvalPriorCLI(t *testing.T) {
	ds := filepath.Join("..", "..", "datasets", "h200", "traffic-azure-12rps")
	for spec, name := range map[string]string{"ops": "ops(h200-sxm-vllm-0.24.0, Llama-3.1-8B)", "roofline": "roofline(H200-SXM, Llama-3.1-8B)"} {
		out, err := runCLI(t, "eval", spec, ds, "--kinds", "decode", "--json")
		require.NoError(t, err, out)
		var ev fit.EvalReport
		require.NoError(t, json.Unmarshal([]byte(out), &ev), out)
		require.Equal(t, name, ev.Model)
		require.Equal(t, "prior", ev.Form)
		require.Equal(t, fit.TargetGPU, ev.Target)
		require.Equal(t, 2785, ev.Rows)
		require.Greater(t, ev.Report.Overall.MAPE, 20.0, "no prior knows steplab's worker")
		// check takes the same specs and sees the same error.
		out, err = runCLI(t, "check", spec, ds, "--kinds", "decode", "--max-mape", "1000", "--baseline", "roofline", "--json")
		require.NoError(t, err, out)
		var ck fit.CheckReport
		require.NoError(t, json.Unmarshal([]byte(out), &ck), out)
		require.True(t, ck.Passed)
		require.Equal(t, name, ck.Model)
		require.InDelta(t, ev.Report.Overall.MAPE, ck.Report.Overall.MAPE, 1e-9)
		_, err = runCLI(t, "check", spec, ds, "--kinds", "decode", "--max-mape", "1")
		require.Equal(t, 1, exitCode(err), "a prior that misses the bound fails the gate")
	}
	for _, args := range [][]string{{"eval", "ops:nope", ds}, {"check", "ops:nope", ds, "--max-mape", "10"}} {
		_, err := runCLI(t, args...)
		require.Equal(t, 2, exitCode(err), args)
		require.Contains(t, err.Error(), "h200-sxm-vllm-0.24.0", "%v names the databases it knows", args)
	}
	noGPU := stepsDataset(t, filepath.Join(t.TempDir(), "nogpu"), decodeSteps(20, 1, nil), "")
	_, err := runCLI(t, "eval", "ops", noGPU)
	require.Equal(t, 2, exitCode(err))
	require.ErrorContains(t, err, "manifest names no GPU")
}

// foreignStepsTable writes what another tool would: one steps.parquet file
// beside the minimal manifest a user writes by hand, prefill, decode and
// mixed steps timed by wall clock only, the admission columns
// (num_new_reqs, payload) left Unknown.
func foreignStepsTable(t *testing.T, dir string) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	rng := rand.New(rand.NewPCG(7, 3))
	u := datasets.Unknown
	var rows []datasets.Step
	for i := range 400 {
		s := datasets.Step{StepID: int64(i), Kind: datasets.KindDecode, Role: datasets.RoleProduction, Valid: true, BenchmarkID: -1,
			NumNewReqs: int32(u), NumCachedReqs: int32(u), NumResumedReqs: int32(u), NumPreempted: int32(u), NumFinished: int32(u),
			PaddedTokens: u, PayloadBytes: u, PayloadNewBytes: u, PayloadCachedBytes: u, GPUTimeNs: u, NarrowTimeNs: u, HostPrepNs: u,
			TScheduleStart: u, TScheduleEnd: u, TDispatch: u, TOutput: u, TUpdateEnd: u}
		y := 4e6
		if i%5 != 0 {
			b, ctx := 1+rng.IntN(128), 128+rng.IntN(4096)
			s.NumDecodeRequests, s.SumDecodeKVTokens = int32(b), int64(b*ctx)
			y += 20e3*float64(b) + 30*float64(b*ctx)
		}
		if i%5 == 0 || i%7 == 0 {
			c := 64 + rng.IntN(4096)
			s.NumPrefillRequests, s.SumPrefillTokens = 1, int64(c)
			y += 25e3 * float64(c)
			s.Kind = datasets.KindPrefill
			if s.NumDecodeRequests > 0 {
				s.Kind = datasets.KindMixed
			}
		}
		s.TotalScheduledTokens = s.SumPrefillTokens + int64(s.NumDecodeRequests)
		s.WallTimeNs = int64(y * (1 + 0.02*rng.NormFloat64()))
		rows = append(rows, s)
	}
	f, err := os.Create(filepath.Join(dir, "steps.parquet"))
	require.NoError(t, err)
	pw := parquet.NewGenericWriter[datasets.Step](f)
	_, err = pw.Write(rows)
	require.NoError(t, err)
	require.NoError(t, pw.Close())
	require.NoError(t, f.Close())
	require.NoError(t, os.WriteFile(filepath.Join(dir, datasets.ManifestFile), []byte(`{"schema_version": 1,
  "hardware": {"gpu_name": "H200"}, "model": {"name": "Llama-3.1-8B"},
  "measurement_policy": {"decode": "production", "prefill": "production"}}`), 0o644))
	return dir
}

// `steplab fit DATASET -o model.json` with no other flag succeeds on every
// dataset steplab writes (the H200 captures of capture bench and capture
// traffic, a simulation) and on a foreign steps-only table, leaving out
// the terms each cannot identify and saying so: on stderr, in the report
// (text and --json) and in the artifact's notes. The artifact records the
// kinds the data has.
func TestFitDefaultsOnOwnAndForeignData(t *testing.T) {
	dir := t.TempDir()
	simulated := filepath.Join(dir, "sim")
	out, err := runCLI(t, "simulate", "--set", "workload.limit=500", "-o", simulated)
	require.NoError(t, err, out)
	const h200 = "../../datasets/h200"
	all := []string{"prefill", "decode", "mixed"}
	type fitCase struct {
		name, dataset string
		dropped       []string // in basis order
		kinds         []string
	}
	// Every admitted request is a fresh prompt computed from an empty cache
	// here, so the tokens new requests ship are a linear combination of
	// the prefill (or, on admission-step decode points, decode) work.
	cases := []fitCase{
		// The grids measure single-request prefills from an empty cache
		// and decode batches: no prefill ever reads cached KV.
		{"bench-admission", filepath.Join(h200, "bench-admission"), []string{"prefill_kv_tokens", "new_req_tokens"}, []string{"prefill", "decode"}},
		{"bench-steady", filepath.Join(h200, "bench-steady"), []string{"prefill_kv_tokens", "new_req_tokens"}, []string{"prefill", "decode"}},
		// The Azure conversation trace has no shared prefixes and its
		// prompts fit the token budget: every prefill chunk starts at 0.
		{"traffic-azure-5rps", filepath.Join(h200, "traffic-azure-5rps"), []string{"prefill_kv_tokens", "new_req_tokens"}, all},
		{"traffic-azure-12rps", filepath.Join(h200, "traffic-azure-12rps"), []string{"prefill_kv_tokens", "new_req_tokens"}, all},
		{"simulated", simulated, []string{"prefill_kv_tokens", "new_req_tokens"}, all},
		{"foreign", foreignStepsTable(t, filepath.Join(dir, "foreign")), []string{"prefill_kv_tokens", "new_requests", "new_req_tokens"}, all},
	}
	// Every dataset under datasets/h200 is covered.
	entries, err := os.ReadDir(h200)
	require.NoError(t, err)
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(h200, e.Name(), datasets.ManifestFile)); err == nil {
			require.True(t, slices.ContainsFunc(cases, func(c fitCase) bool { return c.name == e.Name() }), "datasets/h200/%s has no case", e.Name())
		}
	}
	// fitLogged runs one fit and returns stdout and the log (stderr).
	fitLogged := func(t *testing.T, args ...string) (string, string) {
		out, logs, err := runCLILogged(t, append([]string{"fit"}, args...)...)
		require.NoError(t, err, out)
		return out, logs
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// The default form, the recipe: each kind's linear part drops
			// what its rows cannot identify, and every drop is said in the
			// report, on stderr and in the artifact's notes.
			mpath := filepath.Join(dir, c.name+"-recipe.json")
			out, logs := fitLogged(t, c.dataset, "-o", mpath)
			_, a, err := pricing.Load(mpath)
			require.NoError(t, err)
			require.Equal(t, fpm.FormRecipe, a.Form)
			require.Equal(t, c.kinds, a.Training.Selection.Kinds)
			require.Contains(t, out, "dropped term ")
			require.NotRegexp(t, `(?m)^\s+prefill_kv_tokens\s+[-0-9]`, out, "no prefill reads cached KV: no kind prices it")
			require.NotEmpty(t, a.Notes)
			drops := 0
			for _, n := range a.Notes {
				term, reason, ok := strings.Cut(strings.TrimPrefix(n, "term "), " dropped: ")
				if !ok { // what a kind identified or assumed, printed as noted
					require.Equal(t, 1, strings.Count(out, n+"\n"), "said once: %s", out)
					continue
				}
				drops++
				require.Equal(t, 1, strings.Count(out, "dropped term "+term+": "+reason), "said once: %s", out)
			}
			require.NotContains(t, logs, "term dropped", "the report says it; the log does not repeat it")
			js, err := runCLI(t, "fit", c.dataset, "-o", mpath, "--json", "--cv", "0", "--bootstrap", "0", "--force")
			require.NoError(t, err, js)
			var rrep fit.FitReport
			require.NoError(t, json.Unmarshal([]byte(js), &rrep))
			require.Len(t, rrep.Dropped, drops)

			// The linear form drops exactly the terms its one basis cannot
			// identify on these rows.
			mpath = filepath.Join(dir, c.name+".json")
			out, logs = fitLogged(t, c.dataset, "-o", mpath, "--form", "linear")
			var notes []string
			for _, term := range c.dropped {
				require.Contains(t, out, "dropped term "+term+":")
				require.NotContains(t, logs, "term="+term+" ")
				notes = append(notes, "term "+term+" dropped: ")
			}
			require.Equal(t, len(c.dropped), strings.Count(out, "dropped term "), out)
			_, a, err = pricing.Load(mpath)
			require.NoError(t, err)
			require.Len(t, a.Notes, len(notes))
			for i, n := range notes {
				require.True(t, strings.HasPrefix(a.Notes[i], n), "note %q", a.Notes[i])
			}
			require.Equal(t, c.kinds, a.Training.Selection.Kinds)
			for _, term := range c.dropped {
				require.NotContains(t, a.Terms, term)
			}

			out, err = runCLI(t, "fit", c.dataset, "-o", mpath, "--form", "linear", "--json", "--cv", "0", "--bootstrap", "0", "--force")
			require.NoError(t, err, out)
			var rep fit.FitReport
			require.NoError(t, json.Unmarshal([]byte(out), &rep))
			var got []string
			for _, d := range rep.Dropped {
				got = append(got, d.Term)
			}
			require.Equal(t, c.dropped, got)

			// Named terms are held strictly.
			_, err = runCLI(t, "fit", c.dataset, "-o", mpath, "--terms", "default", "--cv", "0", "--bootstrap", "0", "--force")
			require.Equal(t, 2, exitCode(err), "%v", err)
			_, err = runCLI(t, "fit", c.dataset, "-o", mpath, "--degenerate", "error", "--cv", "0", "--bootstrap", "0", "--force")
			require.Equal(t, 2, exitCode(err), "%v", err)
		})
	}
}
