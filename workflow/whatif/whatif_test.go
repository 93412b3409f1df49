package whatif

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/workflow"
)

const example = "../../examples/whatif/encoder-ensemble.yaml"

func compile(t testing.TB, path string, sets ...string) *Scenario {
	t.Helper()
	d, err := Load(path)
	require.NoError(t, err)
	for _, s := range sets {
		require.NoError(t, d.Set(s))
	}
	sc, err := Compile(d)
	require.NoError(t, err)
	return sc
}

// TestEncoderEnsembleR4 is R4 (docs/architecture.md#r4-offered-load-of-a-serving-workflow) on the bundled scenario: at an
// uncapped 50 req/s (1,000 measured requests after 20 warm-ups, three
// fresh-server repetitions) the workflow sustains the offered load whether
// the response join runs inline or remote, the remote hop costs a fraction
// of a percent of request-window throughput, and the request window's
// throughput exceeds the full process's.
func TestEncoderEnsembleR4(t *testing.T) {
	sc := compile(t, example)
	out, err := Run(sc, Options{})
	require.NoError(t, err)
	a := out.Audit
	require.Equal(t, 50.0, a.OfferedRPS)
	require.Equal(t, 3, a.Repetitions)
	require.Len(t, a.Placements, 2)
	byName := map[string]PlacementAudit{}
	for _, p := range a.Placements {
		byName[p.Placement] = p
		t.Logf("%s: request-window runs %v req/s, mean %.3f, achieved/offered %.2f%%; full-process runs %v, from mean wall %.3f req/s; e2e p50/p90/p99 %.1f/%.1f/%.1f ms",
			p.Placement, windowRuns(p), p.WindowMeanRPS, p.AchievedOverOffered*100, fullRuns(p), p.FullProcessFromMeanWallRPS,
			p.E2E.P50Ms, p.E2E.P90Ms, p.E2E.P99Ms)
		require.Len(t, p.Runs, 3)
		assert.Equal(t, 3000, p.Valid, "every measured request answered")
		assert.Zero(t, p.Errors)
		assert.Zero(t, p.Cancelled)
		assert.GreaterOrEqual(t, p.AchievedOverOffered, 0.995, "%s sustains the offered load", p.Placement)
		for _, r := range p.Runs {
			assert.Equal(t, 1000, r.Measured)
			assert.GreaterOrEqual(t, r.WindowRPS, 49.0, "the published qualification's >= 49 req/s gate")
			assert.Greater(t, r.WindowRPS, r.FullProcessRPS, "request window above full process")
		}
		assert.Greater(t, p.WindowMeanRPS, p.FullProcessMeanRPS)
	}
	in, re := byName["inline"], byName["remote"]
	cost := (in.WindowMeanRPS - re.WindowMeanRPS) / in.WindowMeanRPS * 100
	t.Logf("remote join costs %.4f%% of mean request-window throughput (%.3f -> %.3f req/s); e2e mean +%.3f ms",
		cost, in.WindowMeanRPS, re.WindowMeanRPS, re.E2E.MeanMs-in.E2E.MeanMs)
	assert.Greater(t, cost, 0.0, "the remote hop costs something")
	assert.Less(t, cost, 1.0, "and only a fraction of a percent")
	// The remote hop adds exactly one network hop to every response.
	hop := float64(sc.Placements[0].Graph.Network.HopNs(4096)) / 1e6
	assert.InDelta(t, hop, re.E2E.MeanMs-in.E2E.MeanMs, 1e-3)
}

func windowRuns(p PlacementAudit) []float64 {
	var v []float64
	for _, r := range p.Runs {
		v = append(v, r.WindowRPS)
	}
	return v
}

func fullRuns(p PlacementAudit) []float64 {
	var v []float64
	for _, r := range p.Runs {
		v = append(v, r.FullProcessRPS)
	}
	return v
}

func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		if !d.IsDir() {
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			rel, _ := filepath.Rel(dir, p)
			files[rel] = b
		}
		return nil
	}))
	return files
}

func TestSameScenarioAndSeedGiveByteIdenticalOutputs(t *testing.T) {
	sc := compile(t, example, "load.requests=200", "load.repetitions=2")
	var dirs []string
	for _, jobs := range []int{1, 4} {
		out, err := Run(sc, Options{Jobs: jobs})
		require.NoError(t, err)
		dir := filepath.Join(t.TempDir(), "out")
		require.NoError(t, Write(dir, out, WriteOptions{}))
		dirs = append(dirs, dir)
	}
	a, b := readDir(t, dirs[0]), readDir(t, dirs[1])
	require.Contains(t, a, AuditJSON)
	require.Contains(t, a, AuditMD)
	require.Contains(t, a, "manifest.json")
	assert.Equal(t, len(a), len(b))
	for name, content := range a {
		assert.True(t, bytes.Equal(content, b[name]), "%s differs", name)
	}
	// Another seed changes the result.
	sc2 := compile(t, example, "load.requests=200", "load.repetitions=2", "seed=7")
	out2, err := Run(sc2, Options{})
	require.NoError(t, err)
	var js bytes.Buffer
	require.NoError(t, WriteJSON(&js, &out2.Audit))
	assert.NotEqual(t, string(a[AuditJSON]), js.String())
}

func TestRequestsTableIsAReadableDataset(t *testing.T) {
	sc := compile(t, example, "load.requests=50", "load.warmup_requests=5", "load.repetitions=2")
	out, err := Run(sc, Options{})
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "out")
	require.NoError(t, Write(dir, out, WriteOptions{}))
	d, err := datasets.Open(dir)
	require.NoError(t, err)
	rows, err := datasets.ReadAll[RequestRow](d, TableRequests)
	require.NoError(t, err)
	require.Len(t, rows, 2*2*55, "placements × repetitions × (measured + warm-up)")
	assert.Equal(t, "inline/0/req-0", rows[0].ReqID)
	assert.True(t, rows[0].Warmup)
	for _, r := range rows {
		assert.Equal(t, datasets.StatusFinished, r.Status)
		assert.Equal(t, r.FinishNs-r.ArrivalNs, r.E2ENs)
		assert.Greater(t, r.FirstTokenNs, r.FirstScheduledNs)
	}
	stages, err := datasets.ReadAll[StageRow](d, TableRequestStages)
	require.NoError(t, err)
	assert.Len(t, stages, len(rows)*len(sc.StageNames))
	// The contract's reader sees the contract's columns.
	std, err := datasets.ReadAll[datasets.Request](d, TableRequests)
	require.NoError(t, err)
	assert.Equal(t, rows[3].ArrivalNs, std[3].ArrivalNs)
}

const good = `name: t
seed: 1
network: {latency_us: 100}
load:
  kind: constant
  rate_rps: 10
  requests: 5
  prompt: {kind: fixed, value: 10}
  output: {kind: fixed, value: 2}
stages:
  - name: fe
    kind: frontend
    host: h
    to: [svc]
  - name: svc
    kind: service
    host: h
    service: {kind: fixed, ms: 1}
    to: [j]
  - name: j
    kind: join
    host: h
    to: [fe]
`

func TestScenarioErrorsNameTheLine(t *testing.T) {
	tests := []struct {
		name     string
		old, new string
		want     string
	}{
		{"unknown key", "    host: h\n    to: [svc]", "    host: h\n    colour: red\n    to: [svc]", "t.yaml:14: unknown key \"colour\" in stages[fe]"},
		{"unknown nested key", "network: {latency_us: 100}", "network: {latency_ms: 100}", "t.yaml:3: unknown key \"latency_ms\" in network"},
		{"cycle", "    to: [svc]\n  - name: svc", "    to: [j]\n  - name: svc", "t.yaml:23: stage j, to: the graph has a cycle: j -> svc -> j"},
		{"unplaced stage", "    kind: service\n    host: h\n", "    kind: service\n", "t.yaml:15: stage svc, host: the stage is not placed"},
		{"join without inputs", "    to: [j]\n", "    to: [fe]\n", "t.yaml:20: stage j: the join has no inputs"},
		{"edge to unknown stage", "    to: [j]\n", "    to: [jj]\n", "t.yaml:19: stage svc, edge 0: edge to unknown stage \"jj\""},
		{"negative rate", "rate_rps: 10", "rate_rps: -10", "t.yaml:6: load.rate_rps is -10"},
		{"negative latency", "latency_us: 100", "latency_us: -1", "t.yaml:3: network.latency_us is -1"},
		{"negative service time", "{kind: fixed, ms: 1}", "{kind: fixed, ms: -1}", "t.yaml:18: stage svc, service: service time is negative"},
		{"unknown placement stage", "    to: [fe]\n", "    to: [fe]\nplacements:\n  a: {nope: h}\n", "t.yaml:25: placement a places unknown stage \"nope\""},
		{"bad load kind", "kind: constant", "kind: burst", "t.yaml:5: load.kind \"burst\""},
		{"trace without a trace", "kind: constant", "kind: trace", "t.yaml:5: load.kind trace needs load.trace"},
		{"negative slo", "network: {latency_us: 100}", "network: {latency_us: 100}\nslo: {ttft_ms: -5}", "slo.ttft_ms is -5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := strings.Replace(good, tt.old, tt.new, 1)
			if tt.name == "cycle" { // and close the loop: svc -> j -> svc, svc -> fe
				src = strings.Replace(src, "    to: [j]\n  - name: j", "    to: [j, fe]\n  - name: j", 1)
				src = strings.Replace(src, "    kind: join\n    host: h\n    to: [fe]", "    kind: join\n    host: h\n    to: [svc]", 1)
			}
			require.NotEqual(t, good, src, "the edit applies")
			d, err := Parse("t.yaml", []byte(src))
			require.NoError(t, err)
			_, err = Compile(d)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	d, err := Parse("t.yaml", []byte(good))
	require.NoError(t, err)
	_, err = Compile(d)
	require.NoError(t, err)
}

func TestUnplacedInOnePlacementNamesIt(t *testing.T) {
	src := strings.Replace(good, "    kind: join\n    host: h\n", "    kind: join\n", 1) + "placements:\n  a: {j: h}\n  b: {svc: h}\n"
	d, err := Parse("t.yaml", []byte(src))
	require.NoError(t, err)
	_, err = Compile(d)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "t.yaml:20: placement b: stage j, host: the stage is not placed")
	assert.NotContains(t, err.Error(), "placement a:")
}

func TestSet(t *testing.T) {
	tests := []struct {
		set   string
		check func(t *testing.T, sc *Scenario)
		err   string
	}{
		{set: "load.rate_rps=20", check: func(t *testing.T, sc *Scenario) { assert.Equal(t, 20.0, sc.Load.RateRPS) }},
		{set: "stages.svc.workers=3", check: func(t *testing.T, sc *Scenario) {
			assert.Equal(t, 3, sc.Placements[0].Graph.Stages[1].Workers)
		}},
		{set: "stages.svc.service={kind: lognormal, mean_ms: 2, sigma: 0.1}", check: func(t *testing.T, sc *Scenario) {
			assert.Equal(t, workflow.ServiceLognormal, sc.Placements[0].Graph.Stages[1].Service.Kind)
		}},
		{set: "load.timeout_s=2", check: func(t *testing.T, sc *Scenario) { assert.Equal(t, int64(2e9), sc.Load.TimeoutNs) }},
		{set: "stages.nope.workers=3", err: "no item named \"nope\""},
		{set: "load.rate=3", err: "--set load.rate=3: unknown key \"rate\" in load"},
		{set: "novalue", err: "want KEY=VALUE"},
	}
	for _, tt := range tests {
		t.Run(tt.set, func(t *testing.T) {
			d, err := Parse("t.yaml", []byte(good))
			require.NoError(t, err)
			err = d.Set(tt.set)
			var sc *Scenario
			if err == nil {
				sc, err = Compile(d)
			}
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				return
			}
			require.NoError(t, err)
			tt.check(t, sc)
		})
	}
}

func TestTimeoutsAndRejectionsAreAudited(t *testing.T) {
	// A single slow worker with a short queue at 10 req/s: some requests are
	// rejected, some time out, and they leave the window's valid count.
	sc := compile(t, example, "load.requests=200", "load.repetitions=1",
		"stages.classifier.workers=1", "stages.classifier.max_queue=2",
		"stages.classifier.service={kind: fixed, ms: 60}", "load.timeout_s=0.25")
	out, err := Run(sc, Options{})
	require.NoError(t, err)
	for _, p := range out.Audit.Placements {
		assert.Positive(t, p.Errors, "rejections")
		assert.Equal(t, 200, p.Valid+p.Errors+p.Cancelled)
		assert.Less(t, p.AchievedOverOffered, 0.995)
	}
}

// BenchmarkEncoderEnsembleRepetition simulates one 1,000-request repetition
// (plus 20 warm-ups) of the bundled scenario's inline placement.
func BenchmarkEncoderEnsembleRepetition(b *testing.B) {
	sc := compile(b, example)
	pl := sc.Placements[0]
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := workflow.Run(pl.Graph, sc.Load, RepStream(sc.File.Seed, 0)); err != nil {
			b.Fatal(err)
		}
	}
}

// An engine whose FPM has prediction intervals gives the audit a latency
// interval: every run re-simulated with each engine step at the two edges.
// Stages without an FPM are unchanged between the edges.
func TestEngineIntervalsInTheAudit(t *testing.T) {
	sc := compile(t, example, "load.requests=100", "load.repetitions=1")
	lin, err := fpm.NewLinear([]string{fpm.TermConst, fpm.TermPrefillTokens, fpm.TermDecodeRequests, fpm.TermDecodeKVTokens},
		[]float64{5e6, 2e4, 3e4, 40})
	require.NoError(t, err)
	lin.Residuals = &fpm.ResidualQuantiles{Scale: fpm.ScaleRelative, P: []float64{0.05, 0.5, 0.95}, Values: []float64{-0.1, 0, 0.2}}
	engines := 0
	for _, pl := range sc.Placements {
		for i, st := range pl.Graph.Stages {
			if st.Engine != nil {
				pl.Graph.Stages[i].Engine = st.Engine.WithModels(lin, st.Engine.Pools[0].Engine.Host)
				engines++
			}
		}
	}
	require.Positive(t, engines)
	out, err := Run(sc, Options{})
	require.NoError(t, err)
	require.Equal(t, 0.9, out.Audit.IntervalLevel)
	for _, p := range out.Audit.Placements {
		require.NotNil(t, p.Interval, p.Placement)
		require.Less(t, p.Interval.E2E.Lo.P50Ms, p.E2E.P50Ms)
		require.Greater(t, p.Interval.E2E.Hi.P50Ms, p.E2E.P50Ms)
		for i, s := range p.Interval.Stages {
			if s.Stage == "frontend" {
				require.Equal(t, s.Lo, s.Hi, "no FPM, no interval")
				require.Equal(t, p.Stages[i].Latency, s.Lo)
			}
		}
	}
	var md strings.Builder
	WriteMarkdown(&md, &out.Audit)
	require.Contains(t, md.String(), "90% prediction interval")

	none, err := Run(sc, Options{Level: -1})
	require.NoError(t, err)
	require.Zero(t, none.Audit.IntervalLevel)
	require.Nil(t, none.Audit.Placements[0].Interval)
	require.Equal(t, out.Audit.Placements[0].E2E, none.Audit.Placements[0].E2E, "the point runs do not depend on the interval")
}

const placement = "../../examples/placement/azure-slo.yaml"

// An engine stage can be a cluster, the load a trace, and the audit counts
// goodput at the scenario's objective per GPU: more replicas raise it, and
// a tighter objective lowers it.
func TestClusterStageTraceAndGoodput(t *testing.T) {
	run := func(sets ...string) PlacementAudit {
		sc := compile(t, placement, append([]string{"load.requests=1500"}, sets...)...)
		out, err := Run(sc, Options{Jobs: 1})
		require.NoError(t, err)
		a := out.Audit
		require.NotNil(t, a.SLO)
		require.Len(t, a.Placements, 1)
		p := a.Placements[0]
		require.Equal(t, 1500, p.Valid)
		require.NotNil(t, p.GoodputMeanRPS, "an SLO gives goodput")
		require.NotNil(t, p.GoodputPerGPU)
		assert.InDelta(t, *p.GoodputMeanRPS/float64(a.GPUs), *p.GoodputPerGPU, 1e-6)
		assert.LessOrEqual(t, p.Runs[0].Goodput, p.Valid)
		var md strings.Builder
		WriteMarkdown(&md, &a)
		assert.Contains(t, md.String(), fmt.Sprintf("Goodput at TTFT ≤ 250 ms and ITL ≤ %s ms on %d GPUs", fmtF(a.SLO.ITLMs), a.GPUs))
		return p
	}
	one := run("stages.gen.engine.cluster.pools.agg.replicas=1")
	four := run("stages.gen.engine.cluster.pools.agg.replicas=4")
	tight := run("stages.gen.engine.cluster.pools.agg.replicas=4", "slo.itl_ms=5")
	assert.Greater(t, four.Runs[0].Goodput, one.Runs[0].Goodput)
	assert.Less(t, tight.Runs[0].Goodput, four.Runs[0].Goodput)
	pd := run("stages.gen.engine.cluster.pools={prefill: {role: prefill, replicas: 2}, decode: {role: decode, replicas: 2}}")
	assert.Positive(t, pd.Runs[0].Goodput)
}

// Without an SLO goodput means nothing: null in the JSON, not 0.
func TestGoodputNullWithoutSLO(t *testing.T) {
	tests := []struct {
		name string
		sets []string
		null bool
	}{
		{"no SLO", []string{"load.requests=200", "slo.ttft_ms=0", "slo.itl_ms=0"}, true},
		{"an SLO", []string{"load.requests=200"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Run(compile(t, placement, tc.sets...), Options{Jobs: 1})
			require.NoError(t, err)
			b, err := json.Marshal(out.Audit.Placements[0])
			require.NoError(t, err)
			assert.Equal(t, tc.null, strings.Contains(string(b), `"goodput_per_gpu_rps":null`), "%s", b)
			assert.Equal(t, tc.null, out.Audit.SLO == nil)
		})
	}
}

// A vision_encoder stage costs each request its images' encoder time, the
// model's vision tower priced by the roofline on the stage's GPU (one per
// worker, counted in the scenario's GPUs), says so in a note, and refuses
// what it cannot price, naming the key.
func TestVisionEncoderStage(t *testing.T) {
	const cfg = "../../catalog/testdata/aiconfigurator/Qwen--Qwen3-VL-8B-Instruct_config.json"
	vision := "{kind: vision_encoder, model: " + cfg + ", hardware: H200, images: 2, image_px: [1024, 768]}"
	src := strings.Replace(good, "{kind: fixed, ms: 1}", vision, 1)
	src = strings.Replace(src, "    host: h\n    service:", "    host: h\n    workers: 2\n    service:", 1)
	d, err := Parse("t.yaml", []byte(src))
	require.NoError(t, err)
	sc, err := Compile(d)
	require.NoError(t, err)
	v, err := catalog.LoadVisionTower(cfg)
	require.NoError(t, err)
	hw, err := catalog.LookupHardware("H200")
	require.NoError(t, err)
	want := v.ImageCost(hw, 1024, 768)
	st := sc.Placements[0].Graph.Stages[1]
	require.Equal(t, "svc", st.Name)
	assert.InDelta(t, 2*want.TotalNs, st.Service.MeanNs, 1e-6)
	assert.Equal(t, 2, sc.GPUs(), "each encoder worker is a GPU")
	require.Len(t, sc.Notes, 1)
	assert.Contains(t, sc.Notes[0], "3072 patches and 768 tokens per 1024x768 image")

	for _, tc := range []struct{ old, new, want string }{
		{"workers: 2", "workers: 0", "set the stage's workers to its GPU count"},
		{"image_px: [1024, 768]", "image_px: [1024]", "service.image_px: want [width, height]"},
		{"images: 2", "images: -1", "service.images: -1"},
		{"hardware: H200", "hardware: H900", "service.hardware"},
		{cfg, "../../catalog/testdata/aiconfigurator/meta-llama--Meta-Llama-3.1-8B_config.json", "it is a text-only model"},
	} {
		bad := strings.Replace(src, tc.old, tc.new, 1)
		require.NotEqual(t, src, bad)
		d, err := Parse("t.yaml", []byte(bad))
		require.NoError(t, err)
		_, err = Compile(d)
		require.ErrorContains(t, err, tc.want)
		assert.Contains(t, err.Error(), "t.yaml:", "names the line")
	}
}
