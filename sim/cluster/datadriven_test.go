package cluster_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim"
	"github.com/steplab/steplab/sim/cluster"
)

// TestDataDriven runs the scripts in testdata/runs: clusters built from
// --set overrides over the default scenario, driven over their workload on
// one DES clock, and what each engine did. One command:
//
//	run [max-steps=N]   the input is KEY=VALUE overrides, one a line; the
//	                    output is the run's requests and latencies, then
//	                    one line per engine (its steps by kind, requests
//	                    finished, prefix-cache hits), or the error, one line
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, filepath.Join("testdata", "runs"), func(t *testing.T, path string) {
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			require.Equal(t, "run", td.Cmd)
			sc, err := scenario.LoadWith("", strings.Split(strings.TrimSpace(td.Input), "\n"), nil)
			if err != nil {
				return "error: " + err.Error() + "\n"
			}
			p, err := sc.Plan()
			if err != nil {
				return "error: " + err.Error() + "\n"
			}
			if td.HasArg("max-steps") {
				td.ScanArgs(t, "max-steps", &p.Plan.MaxSteps)
			}
			src, _, cleanup, err := p.Source()
			require.NoError(t, err)
			defer cleanup()
			metrics := sim.NewRunMetrics()
			c, err := p.Plan.New(cluster.Tee{metrics}, nil)
			require.NoError(t, err)
			end, err := cluster.Drive(c, src)
			if err == nil {
				err = c.Finish(end)
			}
			if err != nil {
				return "error: " + err.Error() + "\n"
			}
			r := metrics.Report()
			var b strings.Builder
			fmt.Fprintf(&b, "requests %d, finished %d; TTFT p50 %.1f ms, ITL p50 %.2f ms, E2E p50 %.0f ms\n",
				r.Requests, r.Finished, r.TTFT.P50, r.ITL.P50, r.E2E.P50)
			for i, e := range c.Engines() {
				s := e.Stats()
				fmt.Fprintf(&b, "engine %d: steps %d (prefill %d, mixed %d, decode %d), finished %d, prefix hits %d of %d tokens\n",
					i, s.Steps, s.PrefillSteps, s.MixedSteps, s.DecodeSteps, s.Finished, s.PrefixHitTokens, s.PromptTokens)
			}
			return b.String()
		})
	})
}
