package scenario_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/scenario"
)

// TestDataDriven runs the scripts in testdata/plans: scenario documents
// and what planning them gives. Commands:
//
//	plan            the input is a YAML scenario over the defaults; the
//	                output is the plan (engines, router, each pool's GPU,
//	                model and limits) or the refusal, one line
//	set             the input is --set overrides (KEY=VALUE), one a line,
//	                over the defaults (LoadWith, as the CLI reads them);
//	                output as for plan
//	manifest        the input is a dataset manifest (JSON); the output is
//	                the plan PlanFromManifest rebuilds and its warnings,
//	                or the refusal
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, filepath.Join("testdata", "plans"), func(t *testing.T, path string) {
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			var sc scenario.Scenario
			var err error
			switch td.Cmd {
			case "plan":
				f := filepath.Join(t.TempDir(), "scenario.yaml")
				require.NoError(t, os.WriteFile(f, []byte(td.Input), 0o644))
				sc, err = scenario.Load(f)
				if err != nil {
					return "error: " + strings.ReplaceAll(err.Error(), f, "scenario.yaml") + "\n"
				}
			case "set":
				sc, err = scenario.LoadWith("", strings.Split(strings.TrimSpace(td.Input), "\n"), nil)
				if err != nil {
					return "error: " + err.Error() + "\n"
				}
			case "manifest":
				var m datasets.Manifest
				require.NoError(t, json.Unmarshal([]byte(td.Input), &m))
				p, warn, err := scenario.PlanFromManifest(&m, scenario.ManifestOptions{})
				if err != nil {
					return "error: " + err.Error() + "\n"
				}
				out := describe(p)
				for _, w := range warn {
					out += "warning: " + w + "\n"
				}
				return out
			default:
				t.Fatalf("unknown command %q", td.Cmd)
			}
			p, err := sc.Plan()
			if err != nil {
				return "error: " + strings.ReplaceAll(err.Error(), "\n", "\n       ") + "\n"
			}
			return describe(p)
		})
	})
}

// describe is a plan in a few lines: what a reader checks of it.
func describe(p *scenario.Plan) string {
	var b strings.Builder
	fmt.Fprintf(&b, "engines %d, gpus %d, router %s, model %s\n", p.Engines(), p.GPUs(), p.Router.Name, p.Shape.Name)
	for _, pp := range p.Pools {
		e := pp.Engine
		fmt.Fprintf(&b, "pool %s: role %s, replicas %d, expert_parallel %d, %s, %s TP%d, fpm %s, num_gpu_blocks %d, max_num_seqs %d, max_model_len %d\n",
			pp.Name, pp.Role, pp.Replicas, pp.ExpertParallel, e.HW.Name, e.Shape.Name, max(1, e.Shape.TP), e.FPMName,
			e.Sched.NumGPUBlocks, e.Sched.MaxNumSeqs, e.Sched.MaxModelLen)
	}
	return b.String()
}
