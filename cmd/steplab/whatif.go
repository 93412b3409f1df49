package main

import (
	"fmt"
	"os"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/steplab/steplab/workflow/whatif"
)

func init() { register(newWhatifCmd) }

func newWhatifCmd() *cobra.Command {
	var out string
	var sets []string
	var asJSON, force bool
	var jobs int
	var level float64
	cmd := &cobra.Command{
		Use:   "whatif SCENARIO.yaml -o DIR",
		Short: "Simulate a workflow of stages placed on hosts and print its offered-load audit",
		Long: `whatif simulates a serving workflow without a GPU: a graph of stages (a
frontend, orchestrators, vLLM-style engines priced by a forward-pass model,
services such as classifiers or encoders with their own service-time models,
and joins that wait for all their inputs) placed on hosts. Stages on one host
call each other in-process; stages on different hosts pay a network hop
(latency + bytes/bandwidth + serialization). Each placement of the scenario
is run for every repetition on a fresh simulated server, under an open loop
(constant, Poisson or gamma rate; warm-ups, then measured requests) or a
closed loop.

It prints the audit table of an offered-load qualification, per placement:
  request-window throughput  valid measured requests / (last measured
                             response − first measured request), AIPerf's
                             request_throughput; per repetition and mean
  achieved/offered           mean request-window throughput / offered rate
  full-process throughput    valid measured requests / process wall
                             (start-up + warm-up + window + drain)
  errors, cancelled          rejected or unanswered; past the deadline
  latency                    p50/p90/p99 and mean, per stage and end to end

When an engine's FPM has prediction intervals (a recipe, linear or grid
artifact), every run is repeated with each engine step at the lower and at
the upper edge of its interval at --level, and the latencies get a lo – hi
interval.

It writes DIR/audit.md, DIR/audit.json and a dataset (DIR/manifest.json,
DIR/whatif_requests.parquet: one row per request; DIR/request_stages.parquet: one
row per request and stage). The same scenario and seed give byte-identical
outputs. See docs/whatif.md for every scenario key.

Examples, from the repository root:
  # the published encoder-ensemble qualification: join inline vs remote at 50 req/s
  steplab whatif examples/whatif/encoder-ensemble.yaml -o out/whatif-help

  # the same at 60 req/s with a Poisson source, as JSON
  steplab whatif examples/whatif/encoder-ensemble.yaml -o out/p60 --json \
      --set load.kind=poisson --set load.rate_rps=60

  # a slower classifier with two workers and a bounded queue
  steplab whatif examples/whatif/encoder-ensemble.yaml -o out/cls \
      --set stages.classifier.workers=2 --set stages.classifier.max_queue=16 \
      --set 'stages.classifier.service={kind: lognormal, mean_ms: 30, sigma: 0.4}'

--set KEY=VALUE overrides any key by its dotted path; list items of stages
are addressed by name (stages.NAME.KEY), and VALUE is YAML.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return &exitError{code: 2, msg: "whatif: no output directory: use -o DIR"}
			}
			sc, err := compileScenario(args[0], sets)
			if err != nil {
				return err
			}
			bar := newProgress(cmd, -1, "simulating")
			res, err := whatif.Run(sc, whatif.Options{Jobs: jobs, Level: level, Progress: func(done, total int) {
				bar.Describe(fmt.Sprintf("run %d/%d", done, total))
			}})
			bar.Finish()
			if err != nil {
				return err
			}
			if err := whatif.Write(out, res, whatif.WriteOptions{Overwrite: force, Command: os.Args}); err != nil {
				return &exitError{code: 2, msg: "whatif: " + err.Error()}
			}
			if asJSON {
				return whatif.WriteJSON(cmd.OutOrStdout(), &res.Audit)
			}
			whatif.WriteMarkdown(cmd.OutOrStdout(), &res.Audit)
			fmt.Fprintf(cmd.OutOrStdout(), "\nwrote %s (audit.md, audit.json, whatif_requests.parquet, request_stages.parquet)\n", out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&out, "output", "o", "", "output directory (a dataset plus audit.md and audit.json)")
	f.StringArrayVar(&sets, "set", nil, "override a scenario key: KEY=VALUE (repeatable), e.g. load.rate_rps=60")
	f.BoolVar(&asJSON, "json", false, "print the audit as JSON")
	f.BoolVar(&force, "force", false, "overwrite an existing output dataset")
	f.IntVar(&jobs, "jobs", runtime.GOMAXPROCS(0), "repetitions simulated at once (results do not depend on it)")
	levelFlag(cmd, &level)
	return cmd
}

// compileScenario loads a scenario, applies --set overrides and checks it.
func compileScenario(path string, sets []string) (*whatif.Scenario, error) {
	d, err := loadScenarioDoc(path, sets)
	if err != nil {
		return nil, err
	}
	sc, err := whatif.Compile(d)
	if err != nil {
		return nil, &exitError{code: 2, msg: "bad scenario:\n" + err.Error()}
	}
	return sc, nil
}

func loadScenarioDoc(path string, sets []string) (*whatif.Doc, error) {
	d, err := whatif.Load(path)
	if err != nil {
		return nil, &exitError{code: 2, msg: "scenario: " + err.Error()}
	}
	for _, s := range sets {
		if err := d.Set(s); err != nil {
			return nil, &exitError{code: 2, msg: err.Error()}
		}
	}
	return d, nil
}
