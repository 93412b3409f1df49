package sweep

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/workflow/whatif"
)

const example = "../examples/whatif/encoder-ensemble.yaml"

func TestParseVary(t *testing.T) {
	tests := []struct {
		in   string
		want Vary
		err  bool
	}{
		{in: "load.rate_rps=10,20,30", want: Vary{"load.rate_rps", []string{"10", "20", "30"}}},
		{in: "placements.remote.response=head, resp0", want: Vary{"placements.remote.response", []string{"head", "resp0"}}},
		{in: "stages.classifier.service={kind: fixed, ms: 2},{kind: fixed, ms: 4}",
			want: Vary{"stages.classifier.service", []string{"{kind: fixed, ms: 2}", "{kind: fixed, ms: 4}"}}},
		{in: "load.rate_rps", err: true},
		{in: "load.rate_rps=1,,2", err: true},
		{in: "=1", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			v, err := ParseVary(tt.in)
			if tt.err {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, v)
		})
	}
}

func TestGridFirstKeySlowest(t *testing.T) {
	g := Grid([]Vary{{"a", []string{"1", "2"}}, {"b", []string{"x", "y", "z"}}})
	assert.Equal(t, [][]string{{"1", "x"}, {"1", "y"}, {"1", "z"}, {"2", "x"}, {"2", "y"}, {"2", "z"}}, g)
}

func load(t *testing.T, sets ...string) *whatif.Doc {
	t.Helper()
	d, err := whatif.Load(example)
	require.NoError(t, err)
	for _, s := range sets {
		require.NoError(t, d.Set(s))
	}
	return d
}

func files(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	out := map[string][]byte{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		out[e.Name()] = b
	}
	return out
}

// TestSweepSameOnOneAndManyCores runs the example over rates on 1 and 4
// goroutines: every output file (table, JSON, PNG and SVG figures) is
// byte-identical.
func TestSweepSameOnOneAndManyCores(t *testing.T) {
	doc := load(t, "load.requests=150", "load.repetitions=2", "load.warmup_requests=10")
	vary := []Vary{{"load.rate_rps", []string{"25", "50", "150", "300"}}}
	var outs []map[string][]byte
	var res *Result
	for _, jobs := range []int{1, 4} {
		r, err := Run(doc, vary, Options{Jobs: jobs})
		require.NoError(t, err)
		dir := t.TempDir()
		require.NoError(t, Write(dir, r))
		outs = append(outs, files(t, dir))
		res = r
	}
	for _, name := range []string{TableFile, JSONFile, Throughput + ".png", Throughput + ".svg", LatencyP90 + ".png", LatencyP90 + ".svg"} {
		require.Contains(t, outs[0], name)
		assert.True(t, bytes.Equal(outs[0][name], outs[1][name]), "%s differs between 1 and 4 jobs", name)
	}
	// Seeds derive from the scenario seed and the point index.
	for i, p := range res.Points {
		assert.Equal(t, PointSeed(13316, i), p.Seed)
	}
	assert.NotEqual(t, res.Points[0].Seed, res.Points[1].Seed)
	// Below saturation the workflow keeps up; far above it, it cannot.
	for _, p := range res.Points {
		for _, pl := range p.Audit.Placements {
			t.Logf("offered %g req/s, %s: window %.2f req/s, p90 %.1f ms", p.Audit.OfferedRPS, pl.Placement, pl.WindowMeanRPS, pl.Runs[0].E2E.P90Ms)
			if p.Audit.OfferedRPS <= 50 {
				// 150 requests make a 3 s window, in which the last
				// response's ~0.1 s latency weighs about 3%.
				assert.Greater(t, pl.AchievedOverOffered, 0.97)
			}
		}
	}
	last := res.Points[len(res.Points)-1].Audit.Placements[0]
	assert.Less(t, last.AchievedOverOffered, 0.5, "300 req/s saturates one generator")
}

func TestSweepTableHasVariedColumns(t *testing.T) {
	doc := load(t, "load.requests=40", "load.repetitions=2", "load.warmup_requests=0")
	vary := []Vary{{"load.rate_rps", []string{"10", "20"}}, {"placements.remote.response", []string{"resp0", "head"}}}
	r, err := Run(doc, vary, Options{})
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, Write(dir, r))
	f, err := os.Open(filepath.Join(dir, TableFile))
	require.NoError(t, err)
	defer f.Close()
	st, err := f.Stat()
	require.NoError(t, err)
	pf, err := parquet.OpenFile(f, st.Size())
	require.NoError(t, err)
	assert.Equal(t, int64(4*2*2), pf.NumRows(), "points × placements × repetitions")
	var cols []string
	for _, c := range pf.Schema().Columns() {
		cols = append(cols, c[0])
	}
	assert.Equal(t, []string{"load.rate_rps", "placements.remote.response", "point", "placement", "rep"}, cols[:5])
	type row struct {
		Rate     float64 `parquet:"load.rate_rps"`
		Response string  `parquet:"placements.remote.response"`
		Point    int32   `parquet:"point"`
		Place    string  `parquet:"placement"`
		Window   float64 `parquet:"window_rps"`
	}
	rows, err := parquet.Read[row](f, st.Size())
	require.NoError(t, err)
	assert.Equal(t, row{Rate: 10, Response: "resp0", Point: 0, Place: "inline", Window: rows[0].Window}, rows[0])
	assert.Equal(t, "head", rows[len(rows)-1].Response)
	assert.Equal(t, 20.0, rows[len(rows)-1].Rate)
	// With the remote join placed on the head host, the two placements are
	// the same graph: identical results.
	p := r.Points[1].Audit.Placements
	assert.Equal(t, p[0].WindowMeanRPS, p[1].WindowMeanRPS)
}

func TestSweepRefusesABadPointNamingIt(t *testing.T) {
	doc := load(t)
	_, err := Run(doc, []Vary{{"load.rate_rps", []string{"10", "-5"}}}, Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "sweep point 1 (load.rate_rps=-5)")
	assert.Contains(t, err.Error(), "load.rate_rps is -5")
	_, err = Run(doc, nil, Options{})
	assert.Error(t, err)
	_, err = Run(doc, []Vary{{"seed", []string{"1"}}, {"seed", []string{"2"}}}, Options{})
	assert.ErrorContains(t, err, "varied twice")
}

// A document's keys tell what its points run; a point that does not
// compile is refused, naming it.
func TestKinds(t *testing.T) {
	for body, want := range map[string]string{
		"stages: []\nload: {kind: constant}\n": KindWhatif,
		"datasets: [a]\n":                      KindCalibrate,
		"workload: {kind: poisson}\n":          KindSimulate,
		"seed: 3\n":                            KindSimulate,
	} {
		d, err := whatif.Parse("x.yaml", []byte(body))
		require.NoError(t, err)
		assert.Equal(t, want, KindOf(d), body)
	}
	d, err := whatif.Parse("s.yaml", []byte("workload: {kind: poisson, rate_rps: 5, requests: 10, prompt: {kind: fixed, value: 10}, output: {kind: fixed, value: 10}}\n"))
	require.NoError(t, err)
	_, err = Run(d, []Vary{{Key: "cluster.pools.sim.replicas", Values: []string{"1", "0"}}}, Options{Jobs: 1})
	require.ErrorContains(t, err, "sweep point 1 (cluster.pools.sim.replicas=0)")
	require.ErrorContains(t, err, "cluster.pools.sim.replicas is 0")
	_, err = Run(d, []Vary{{Key: "engine.max_num_seqz", Values: []string{"1"}}}, Options{Jobs: 1})
	require.ErrorContains(t, err, "max_num_seqz")
}

// Without an SLO the goodput columns are null, not 0: nothing was counted.
// With one they hold the goodput.
func TestGoodputEmptyWithoutSLO(t *testing.T) {
	for _, tt := range []struct {
		name string
		sets []string
		want bool
	}{
		{"no slo", nil, false},
		{"slo", []string{"slo.ttft_ms=500", "slo.itl_ms=50"}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := load(t, append([]string{"load.requests=30", "load.warmup_requests=2", "load.repetitions=1"}, tt.sets...)...)
			r, err := Run(d, []Vary{{"load.rate_rps", []string{"20"}}}, Options{Jobs: 1})
			require.NoError(t, err)
			path := filepath.Join(t.TempDir(), TableFile)
			require.NoError(t, WriteTable(path, r))
			rows, err := parquet.ReadFile[struct {
				Goodput *float64 `parquet:"goodput_rps,optional"`
				PerGPU  *float64 `parquet:"goodput_per_gpu_rps,optional"`
			}](path)
			require.NoError(t, err)
			require.NotEmpty(t, rows)
			for _, row := range rows {
				assert.Equal(t, tt.want, row.Goodput != nil)
				assert.Equal(t, tt.want, row.PerGPU != nil)
			}
		})
	}
}
