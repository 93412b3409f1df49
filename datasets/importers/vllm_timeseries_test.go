package importers

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
)

// synthRun is a run of n requests, one every 0.3 s, each queued 0.2 s and
// running 2 s, and the timeseries.csv a logger created `lead` seconds
// before the first arrival would write, ticking every second.
func synthRun(n int, lead float64) (reqs string, ts string) {
	var rq, tb strings.Builder
	for i := range n {
		q := 1000 + 0.3*float64(i)
		fmt.Fprintf(&rq, `{"request_id": "r%d", "input_toks": 100, "output_toks": 10, "queued_ts": %.6f, "scheduled_ts": %.6f, "first_token_ts": %.6f, "last_token_ts": %.6f}`+"\n",
			i, q, q+0.2, q+0.3, q+2.2)
	}
	tb.WriteString("t,prompt_throughput,gen_throughput,running,waiting,kv_cache_pct\n")
	end := 0.3*float64(n-1) + 2.2
	for k := 1; float64(k)-lead <= end+1; k++ {
		at := float64(k) - lead // on the requests' clock
		run, wait := 0, 0
		for i := range n {
			q := 0.3 * float64(i)
			switch {
			case q <= at && at < q+0.2:
				wait++
			case q+0.2 <= at && at < q+2.2:
				run++
			}
		}
		fmt.Fprintf(&tb, "%d.0,%d.0,%d.0,%d,%d,%.2f\n", k, 100*run, 10*run, run, wait, 2.5*float64(run))
	}
	return rq.String(), tb.String()
}

func TestVLLMTimeseriesAlignment(t *testing.T) {
	for _, lead := range []float64{0.137, 0.8, 3.25} {
		t.Run(fmt.Sprint(lead), func(t *testing.T) {
			reqs, ts := synthRun(40, lead)
			var got []datasets.EngineSample
			f, _ := LookupFormat("vllm-requests")
			s := &sink{request: func(datasets.Request) error { return nil }}
			s.openSamples = func() (func(datasets.EngineSample) error, func() error, error) {
				return func(r datasets.EngineSample) error { got = append(got, r); return nil }, func() error { return nil }, nil
			}
			meta := `{"engine_kwargs": {}, "tick_seconds": 1.0}`
			err := f.run(bytesInput("in", []byte(reqs), map[string][]byte{"meta.json": []byte(meta), "timeseries.csv": []byte(ts)}), s)
			require.NoError(t, err)
			require.NotEmpty(t, got)
			// The counts only change every 0.1 s (arrivals 0.3 s apart,
			// 0.2 s and 2 s phases), so the best offsets form an interval
			// that holds the true one; the first of it is found.
			off := -lead
			d, err := strconv.ParseFloat(s.m.Source.Detail["timeseries_offset_s"], 64)
			require.NoError(t, err)
			require.InDelta(t, off, d, 0.1, "offset")
			// A tick may fall on the very instant a count changes.
			require.Regexp(t, `mean \|difference\| after alignment: running 0\.0\d, waiting 0\.0\d`, strings.Join(s.m.Notes, "\n"))
			for _, es := range got {
				require.GreaterOrEqual(t, es.TNs, int64(0))
				require.InDelta(t, 0.025*float64(es.NumRunning), es.KVUsage, 1e-12)
				require.Equal(t, 10*float64(es.NumRunning), es.GenerationTokensPerS)
				require.Equal(t, int64(1e9), es.WindowNs)
			}
		})
	}
}

func TestVLLMTimeseriesErrors(t *testing.T) {
	reqs, _ := synthRun(3, 0.5)
	tests := []struct{ name, ts, want string }{
		{"no header", "", "timeseries.csv: empty file (want a header with t,running,waiting)"},
		{"no running", "t,waiting\n1,0\n", `timeseries.csv:1: header has no running column (got "t,waiting"; want t,running,waiting)`},
		{"bad count", "t,running,waiting\n1,x,0\n", `timeseries.csv:2: running: "x" is not a request count`},
		{"bad time", "t,running,waiting\n-1,0,0\n", `timeseries.csv:2: t: "-1" is not a time in seconds`},
		{"bad kv", "t,running,waiting,kv_cache_pct\n1,0,0,250\n", `timeseries.csv:2: kv_cache_pct: "250" is not a percentage in [0, 100]`},
		{"order", "t,running,waiting\n2,0,0\n1,0,0\n", "timeseries.csv:3: t: 1 is earlier than the previous row's 2; rows must be in time order"},
		{"short row", "t,running,waiting\n1,0\n", "timeseries.csv:2: 2 fields, want at least 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := parseRequests("vllm-requests", []byte(reqs), map[string][]byte{"meta.json": []byte(`{}`), "timeseries.csv": []byte(tt.ts)})
			require.ErrorContains(t, err, tt.want)
		})
	}
	_, s, err := parseRequests("vllm-requests", []byte(reqs), map[string][]byte{"timeseries.csv": []byte("t,running,waiting\n")})
	require.NoError(t, err)
	require.Contains(t, s.m.Notes, "timeseries.csv has no rows: no engine_samples")
}

func TestVLLMTimeseriesEmbedded(t *testing.T) {
	res, err := Import("vllm-requests", "embedded:llmservingsim-llama-3.1-8b", t.TempDir()+"/ds", Options{})
	require.NoError(t, err)
	require.Equal(t, int64(67), res.EngineSamples)
	require.Contains(t, strings.Join(res.Notes, "\n"), "KV usage was not recorded (kv_usage -1)")
}
