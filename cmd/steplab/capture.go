package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/steplab/steplab/capture"
	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim"
)

func init() { register(newCaptureCmd) }

// captureFlags are shared by capture bench and capture traffic.
type captureFlags struct {
	scenario, out, device, preset, python, workerScript, attention string
	sets                                                           []string
	seed                                                           uint64
	workerSeed                                                     int64
	asJSON, force, verbose                                         bool
	checkpoint                                                     int
}

func (f *captureFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&f.scenario, "scenario", "f", "", "YAML scenario (as for simulate)")
	cmd.Flags().StringVarP(&f.out, "output", "o", "", "dataset directory to write")
	cmd.Flags().StringArrayVar(&f.sets, "set", nil, "override a scenario field, KEY=VALUE (repeatable)")
	cmd.Flags().Uint64Var(&f.seed, "seed", 1, "workload seed")
	cmd.Flags().Int64Var(&f.workerSeed, "worker-seed", 0, "seed of the worker's random weights")
	cmd.Flags().StringVar(&f.device, "device", "cuda", "worker device: cuda, cuda:N or cpu")
	cmd.Flags().StringVar(&f.preset, "preset", "", "worker model preset (llama-8b, tiny); default: the scenario's model shape")
	cmd.Flags().StringVar(&f.python, "python", "", "Python interpreter with PyTorch (default: $STEPLAB_PYTHON, else python3)")
	cmd.Flags().StringVar(&f.workerScript, "worker", "", "path of capture/worker/worker.py (default: found from the working directory)")
	cmd.Flags().StringVar(&f.attention, "attention", "auto", "attention backend: auto, triton or torch")
	cmd.Flags().IntVar(&f.checkpoint, "checkpoint-steps", 256, "make the dataset durable every N steps")
	cmd.Flags().BoolVar(&f.asJSON, "json", false, "print the report as JSON")
	cmd.Flags().BoolVar(&f.force, "force", false, "overwrite an existing dataset")
	cmd.Flags().BoolVar(&f.verbose, "worker-log", false, "copy the worker's stderr to ours")
}

func (f *captureFlags) run(cmd *cobra.Command, plan *scenario.Plan, out string) (*sim.Result, error) {
	bar := newProgress(cmd, -1, "capturing "+out)
	opts := capture.Options{
		Worker: capture.WorkerOptions{Python: f.python, Script: f.workerScript},
		Device: f.device, Preset: f.preset, AttentionBackend: f.attention, Seed: f.workerSeed,
		CheckpointSteps: f.checkpoint,
		Run: sim.RunOptions{Overwrite: f.force, Command: os.Args, Stop: cmd.Context().Done(),
			Progress: func(n int64) { bar.Set64(n) }},
	}
	if f.verbose {
		opts.Stderr = cmd.ErrOrStderr()
	}
	res, err := capture.Capture(plan, out, opts)
	bar.Finish()
	if err != nil {
		if errors.Is(err, sim.ErrInterrupted) {
			return nil, interrupted("capture", out, err)
		}
		at := out
		if staging := datasets.StagingPath(out, "replacing"); isDir(staging) {
			at = staging // --force: the old dataset at out is untouched
		}
		if _, serr := os.Stat(filepath.Join(at, datasets.ManifestFile)); serr != nil {
			return nil, fmt.Errorf("capture failed before anything was measured (no dataset written): %w", err)
		}
		return nil, fmt.Errorf("capture failed (the dataset at %s keeps what was measured and is marked partial): %w", at, err)
	}
	if f.asJSON {
		return res, writeJSON(cmd.OutOrStdout(), res)
	}
	printReport(cmd.OutOrStdout(), res)
	return res, nil
}

// cpuDefaults keeps a CPU capture small: the KV cache would otherwise take
// most of the host's memory. They apply before the --set overrides.
func (f *captureFlags) cpuDefaults(sc scenario.Scenario) []string {
	if f.device == "cpu" && sc.Engine.NumGPUBlocks == 0 {
		return []string{"engine.num_gpu_blocks=1024", "engine.max_model_len=4096", "engine.cuda_graph_sizes=null"}
	}
	return nil
}

func newCaptureCmd() *cobra.Command {
	c := &cobra.Command{
		Use:         "capture",
		Annotations: map[string]string{stopsOnCancel: ""},
		Short:       "Capture ground truth from a real GPU worker",
		Long: `capture drives a real GPU worker (capture/worker/worker.py: a Llama-architecture
decoder on PyTorch with a paged KV cache, ragged attention and CUDA graphs)
through the same scheduler the simulator runs, and records what really
happened per step: the batch, the bytes shipped, every timing window, the
worker's own timings and NVML samples of the GPU.

  capture bench    the self-benchmark grid under a measurement policy
  capture traffic  a workload through the real scheduler and worker
  capture fpm      the ForwardPassMetrics stream of a running Dynamo worker
  capture ops      the worker's operations, alone, into a database the ops prior reads

A capture writes as it goes: if the worker dies, hangs or answers garbage,
the error shows its last stderr lines and the dataset keeps every completed
part, marked partial.`,
	}
	c.AddCommand(newCaptureBenchCmd(), newCaptureTrafficCmd(), newCaptureFPMCmd(), newCaptureOpsCmd())
	return group(c)
}

func newCaptureBenchCmd() *cobra.Command {
	var f captureFlags
	var policy string
	cmd := &cobra.Command{
		Use:   "bench -o DIR [--policy admission_step|steady_state_second_step|both]",
		Short: "Run the self-benchmark grid (decode B × context, prefill tokens) on the worker",
		Long: `bench runs the self-benchmark on the real worker: decode points
(B × context) and prefill points, after warm-ups, with one discarded warm-up
replica for shapes outside the CUDA graphs and contexts clamped (tagged
context_clamped) where the steady policy cannot give up a token. Listing
workload.benchmark.ragged_* adds decode points whose contexts spread around
a mean, and mixed_* adds prefill chunks riding with decodes
(docs/capture.md).

  --policy admission_step           measure the step that admits the batch
  --policy steady_state_second_step measure the request's second step; the
                                    admission step is kept as scaffolding
  --policy both                     both, as DIR/admission_step and
                                    DIR/steady_state_second_step

  # needs: gpu (an NVIDIA GPU with CUDA, and PyTorch in the worker's Python)
  steplab capture bench -o out/bench-both --policy both \
      --set 'workload.benchmark.decode_batch_sizes=[1,8,64,256,512]' \
      --set 'workload.benchmark.decode_contexts=[128,1024,4096,8192]'

  # needs: torch (the CPU path: PyTorch and msgpack in the worker's Python)
  steplab capture bench -o out/cpu-bench --device cpu --preset tiny \
      --set 'workload.benchmark.decode_batch_sizes=[1,4]' --set 'workload.benchmark.decode_contexts=[16,64]'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := refuseExisting("capture bench", f.out, f.force); err != nil {
				return err
			}
			policies := []string{policy}
			if policy == "both" {
				policies = []string{datasets.PolicyAdmissionStep, datasets.PolicySteadyStateSecondStep}
			} else if policy != datasets.PolicyAdmissionStep && policy != datasets.PolicySteadyStateSecondStep {
				return &exitError{code: 2, msg: fmt.Sprintf("capture bench: --policy %q: use admission_step, steady_state_second_step or both", policy)}
			}
			for _, pol := range policies {
				plan, err := loadEngine(f.scenario, f.sets, cmd.Flags().Changed("seed"), f.seed, func(sc scenario.Scenario) []string {
					return append([]string{"workload.kind=benchmark", "workload.benchmark.policy=" + pol}, f.cpuDefaults(sc)...)
				})
				if err != nil {
					return err
				}
				plan.Scenario.Workload.Benchmark.Policy = pol
				out := f.out
				if len(policies) > 1 {
					out = filepath.Join(f.out, pol)
				}
				if _, err := f.run(cmd, plan, out); err != nil {
					return err
				}
			}
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&policy, "policy", datasets.PolicySteadyStateSecondStep, "decode measurement policy: admission_step, steady_state_second_step or both")
	return cmd
}

func newCaptureTrafficCmd() *cobra.Command {
	var f captureFlags
	cmd := &cobra.Command{
		Use:   "traffic -o DIR [-f SCENARIO.yaml] [--set ...]",
		Short: "Run a workload (trace or generator) through the real scheduler and worker",
		Long: `traffic runs a workload, as simulate would, but on the real worker and the
wall clock: arrivals wait for their time, every step is recorded with its
production role.

  # needs: gpu (an NVIDIA GPU with CUDA, and PyTorch in the worker's Python)
  steplab capture traffic -o datasets/h200-poisson-4 --set workload.kind=poisson \
      --set workload.rate_rps=4 --set workload.requests=400 \
      --set workload.prompt.kind=lognormal --set workload.prompt.mean=1500 --set workload.prompt.sigma=0.8 \
      --set workload.output.kind=lognormal --set workload.output.mean=200 --set workload.output.sigma=0.6

  # needs: torch (the CPU path: PyTorch and msgpack in the worker's Python)
  steplab capture traffic -o out/cpu-traffic --device cpu --preset tiny --set workload.limit=20`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := refuseExisting("capture traffic", f.out, f.force); err != nil {
				return err
			}
			plan, err := loadEngine(f.scenario, f.sets, cmd.Flags().Changed("seed"), f.seed, f.cpuDefaults)
			if err != nil {
				return err
			}
			if plan.Scenario.Workload.Kind == "benchmark" {
				return &exitError{code: 2, msg: "capture traffic: the workload is a benchmark grid: use capture bench"}
			}
			_, err = f.run(cmd, plan, f.out)
			return err
		},
	}
	f.add(cmd)
	return cmd
}
