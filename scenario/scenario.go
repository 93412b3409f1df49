package scenario

import (
	"errors"
	"fmt"

	"github.com/steplab/steplab/internal/yamldoc"
	"github.com/steplab/steplab/sim"
	"github.com/steplab/steplab/sim/cluster"
	"github.com/steplab/steplab/sim/sched"
	"github.com/steplab/steplab/sim/workload"
)

// Scenario is what `steplab simulate` runs: an engine on a GPU and model, a
// forward-pass model, a workload, and the cluster the engines form. It is
// read from YAML (field names as below) and every field can be overridden
// by flags. A scenario without a cluster block is one engine.
type Scenario struct {
	Name     string `yaml:"name"`
	Seed     uint64 `yaml:"seed"`
	Hardware string `yaml:"hardware"` // catalogue name (H200, RTX 4090, ...) or a spec file: catalog.LookupHardware
	Model    string `yaml:"model"`    // catalogue name (Llama-3.1-8B, Llama-3.1-70B-TP4, ...) or a config.json: catalog.LookupModel
	// TensorParallel runs the model over that many GPUs (0: the model's
	// own degree, 1 unless its name ends in -TP<n>).
	TensorParallel int `yaml:"tensor_parallel"`
	// WeightDType and KVCacheDType override the checkpoint's weight and
	// KV-cache dtypes (bf16, fp16, fp8; "" or auto keeps them), as vLLM's
	// --quantization fp8 and --kv-cache-dtype fp8 do.
	WeightDType  string `yaml:"weight_dtype"`
	KVCacheDType string `yaml:"kv_cache_dtype"`
	// FPM is "roofline" (the prior from hardware and shape), an ops spec
	// ("ops", "ops:NAME" or "ops:DIR": the measured-operations prior of
	// package fpm/opdb for the shape) or the path of a model artifact
	// (steplab fit, steplab calibrate).
	FPM string `yaml:"fpm"`
	// Host is "" (the default prior, fpm.DefaultHostModel) or the path
	// of a host-overhead model in JSON: a fpm.HostModel, or an object
	// holding one under "model" (as datasets/h200/models/host.json, fitted
	// from captures).
	Host string `yaml:"host"`

	Engine   EngineSpec   `yaml:"engine"`
	Workload WorkloadSpec `yaml:"workload"`
	Output   OutputSpec   `yaml:"output"`
	// Cluster places the engines: pools, the router and the links (none:
	// one aggregated engine).
	Cluster Spec `yaml:"cluster"`
	// SLO, when set, is the objective a run reports its attainment of
	// (and an autoscale policy slo keeps headroom to).
	SLO cluster.SLOSpec `yaml:"slo"`
}

// EngineSpec holds the engine limits of docs/architecture.md#scheduler-semantics.
type EngineSpec struct {
	MaxNumSeqs                int     `yaml:"max_num_seqs"`
	MaxNumBatchedTokens       int     `yaml:"max_num_batched_tokens"`
	BlockSize                 int     `yaml:"block_size"`
	NumGPUBlocks              int     `yaml:"num_gpu_blocks"` // 0: from GPU memory
	GPUMemoryUtilization      float64 `yaml:"gpu_memory_utilization"`
	MaxModelLen               int     `yaml:"max_model_len"`
	ChunkedPrefill            bool    `yaml:"chunked_prefill"`
	PrefixCaching             bool    `yaml:"prefix_caching"`
	LongPrefillTokenThreshold int     `yaml:"long_prefill_token_threshold"`
	AsyncScheduling           bool    `yaml:"async_scheduling"`
	// SerialWorker runs the worker one step at a time: its receive, input
	// preparation and sampling add to every step even under async
	// scheduling (steplab's GPU worker; vLLM's model runner overlaps them
	// with the previous step: false).
	SerialWorker   bool  `yaml:"serial_worker"`
	CUDAGraphSizes []int `yaml:"cuda_graph_sizes"`
	// VLLMVersion is the vLLM release the engine stands for ("": not
	// said): an ops prior prices it with the kernels measured nearest it.
	VLLMVersion string `yaml:"vllm_version"`
	// AttentionBackend is the engine's attention backend ("": the ops
	// database's kernels); "triton" prices an ops prior's ragged decode
	// batches by their longest request (pricing.Spec.AttentionBackend).
	AttentionBackend string `yaml:"attention_backend"`
}

// WorkloadSpec selects and parameterises a workload (package workload).
type WorkloadSpec struct {
	// Kind: trace | poisson | constant | gamma | closed | benchmark.
	Kind string `yaml:"kind"`
	// Trace: a dataset directory with a requests table, or embedded:NAME.
	Trace     string  `yaml:"trace"`
	Limit     int     `yaml:"limit"`
	StartS    float64 `yaml:"start_s"`
	EndS      float64 `yaml:"end_s"`
	BlockSize int     `yaml:"hash_block_size"` // tokens per prefix hash of the trace (0: the manifest's, workload.HashBlockSize)
	// Open and closed loop.
	RateRPS float64 `yaml:"rate_rps"` // trace: rescale to this rate (0 = as recorded)
	// RateCurve (poisson, constant, gamma; rate_rps 0) varies the rate
	// over time: linear between points, the last point's rate after it.
	RateCurve []RatePointSpec `yaml:"rate_curve"`
	CV        float64         `yaml:"cv"`
	Requests  int             `yaml:"requests"`
	DurationS float64         `yaml:"duration_s"`
	Warmup    int             `yaml:"warmup_requests"`
	Prompt    LengthSpec      `yaml:"prompt"`
	Output    LengthSpec      `yaml:"output"`
	// LengthsFrom samples (prompt, output) pairs from a dataset's requests.
	LengthsFrom string  `yaml:"lengths_from"`
	Users       int     `yaml:"users"`
	ThinkS      float64 `yaml:"think_s"`
	Think       string  `yaml:"think"` // fixed | exponential
	// Benchmark grid (Dynamo's forward-pass-metrics self-benchmark).
	Benchmark BenchmarkSpec `yaml:"benchmark"`
}

// RatePointSpec is one point of a rate curve.
type RatePointSpec struct {
	TS  float64 `yaml:"t_s"` // seconds since the start
	RPS float64 `yaml:"rps"`
}

// LengthSpec is a token-length distribution.
type LengthSpec struct {
	Kind  string  `yaml:"kind"` // fixed | uniform | lognormal
	Value int     `yaml:"value"`
	Min   int     `yaml:"min"`
	Max   int     `yaml:"max"`
	Mean  float64 `yaml:"mean"`
	Sigma float64 `yaml:"sigma"`
}

// BenchmarkSpec configures a self-benchmark grid.
type BenchmarkSpec struct {
	Mode              string  `yaml:"mode"`   // agg | prefill | decode
	Policy            string  `yaml:"policy"` // steady_state_second_step | admission_step
	DecodeBatchSizes  []int   `yaml:"decode_batch_sizes"`
	DecodeContexts    []int   `yaml:"decode_contexts"`
	PrefillTokens     []int   `yaml:"prefill_tokens"`
	PrefillBatchSizes []int   `yaml:"prefill_batch_sizes"`
	Warmups           *int    `yaml:"warmups"`
	GapS              float64 `yaml:"gap_s"` // idle time between points
	// Heterogeneous-context decode points (none unless ragged_batch_sizes
	// is set): B requests whose contexts spread around a mean.
	RaggedBatchSizes []int        `yaml:"ragged_batch_sizes"`
	RaggedContexts   []int        `yaml:"ragged_contexts"` // mean context per request
	RaggedSpreads    []SpreadSpec `yaml:"ragged_spreads"`
	// Mixed points (none unless mixed_prefill_tokens is set): a prefill
	// chunk of P tokens after C cached ones riding with B decodes at a
	// context (B = 0: the chunk alone).
	MixedPrefillTokens    []int `yaml:"mixed_prefill_tokens"`
	MixedPrefillContexts  []int `yaml:"mixed_prefill_contexts"` // default [0]: a fresh prompt
	MixedDecodeBatchSizes []int `yaml:"mixed_decode_batch_sizes"`
	MixedDecodeContexts   []int `yaml:"mixed_decode_contexts"`
}

// SpreadSpec is how a ragged point's contexts spread around their mean:
// shape ramp (evenly from (2 − r)·mean to r·mean, r ≤ 2) or tail (⌈B/8⌉
// requests at r·mean, the rest shorter), r = max_ratio.
type SpreadSpec struct {
	Shape    string  `yaml:"shape"`
	MaxRatio float64 `yaml:"max_ratio"`
}

// OutputSpec says what the dataset holds.
type OutputSpec struct {
	StepRequests bool `yaml:"step_requests"`
}

// DefaultTrace is the embedded trace a scenario replays when it names none.
const DefaultTrace = "embedded:azure-conv-2023"

// Default is the README's main job: the Azure conversation trace on
// Llama-3.1-8B on one H200 under vLLM-like defaults, one engine.
func Default() Scenario {
	return Scenario{
		Name: "default", Seed: 1, Hardware: "H200", Model: "Llama-3.1-8B", FPM: "roofline",
		Engine: EngineSpec{
			MaxNumSeqs: 256, MaxNumBatchedTokens: 8192, BlockSize: 16, GPUMemoryUtilization: 0.9,
			MaxModelLen: 32768, ChunkedPrefill: true, PrefixCaching: true, AsyncScheduling: true,
			CUDAGraphSizes: DefaultCUDAGraphSizes(512),
		},
		// Lengths for the generator kinds: a scenario that switches kind to
		// poisson, constant, gamma or closed runs without naming them.
		Workload: WorkloadSpec{Kind: "trace", Trace: DefaultTrace, Think: "fixed",
			Prompt: LengthSpec{Kind: "lognormal", Mean: 1000, Sigma: 0.8, Min: 1, Max: 8000},
			Output: LengthSpec{Kind: "fixed", Value: 128}},
		Output: OutputSpec{StepRequests: true},
	}
}

// DefaultCUDAGraphSizes are vLLM's default decode capture sizes up to max:
// 1, 2, 4, then every multiple of 8.
func DefaultCUDAGraphSizes(max int) []int {
	var s []int
	for _, b := range []int{1, 2, 4} {
		if b <= max {
			s = append(s, b)
		}
	}
	for b := 8; b <= max; b += 8 {
		s = append(s, b)
	}
	return s
}

// Load reads a YAML scenario over the defaults; an empty file is the
// defaults. Unknown keys are refused with their line and the keys valid
// there.
func Load(path string) (Scenario, error) {
	sc := Default()
	return sc, decodeFile(path, &sc)
}

// LoadSpec reads a placement file: the keys of a scenario's cluster block
// (pools, router, links, engine). Unknown keys are refused with their
// line.
func LoadSpec(path string) (Spec, error) {
	var s Spec
	return s, decodeFile(path, &s)
}

// LoadWith reads the scenario at path (the defaults for "") with
// overrides applied to its document, as one document: first those pre
// asks for given the scenario as the file has it (nil: none), then sets
// (--set KEY=VALUE, dotted paths), so a later key wins. A file that does
// not read or decode is refused as "scenario: ..."; an override, with its
// own message.
func LoadWith(path string, sets []string, pre func(Scenario) []string) (Scenario, error) {
	d, err := yamldoc.Overrides()
	if path != "" {
		d, err = yamldoc.ReadFile(path)
	}
	sc := Default()
	if err == nil {
		err = d.Decode(&sc)
	}
	if err != nil {
		return sc, fmt.Errorf("scenario: %w", err)
	}
	if pre != nil {
		sets = append(pre(sc), sets...)
	}
	for _, s := range sets {
		if err := d.Set(s); err != nil {
			return sc, err
		}
	}
	sc = Default()
	return sc, d.Decode(&sc)
}

func decodeFile(path string, dst any) error {
	d, err := yamldoc.ReadFile(path)
	if err != nil {
		return err
	}
	return d.Decode(dst)
}

// Set applies one override KEY=VALUE with a dotted YAML path
// (engine.max_num_seqs=128, workload.rate_rps=20) over the scenario: keys
// left out keep their values, and unknown keys are refused with the keys
// valid there; pools are addressed by name
// (cluster.pools.decode.replicas=3).
func (sc *Scenario) Set(kv string) error {
	d, err := yamldoc.Overrides(kv)
	if err == nil {
		err = d.Decode(sc)
	}
	return err
}

// check refuses workloads that cannot run on the engine before anything
// is simulated.
func (w WorkloadSpec) check(c sched.Config) error {
	if len(w.RateCurve) > 0 && w.Kind != "poisson" && w.Kind != "constant" && w.Kind != "gamma" {
		return fmt.Errorf("rate_curve is for kind poisson, constant or gamma, not %s: remove it, or use kind: poisson", w.Kind)
	}
	switch w.Kind {
	case "trace":
		if w.Trace == "" {
			return errors.New("kind trace needs trace: a dataset directory or embedded:NAME")
		}
		if w.RateRPS < 0 {
			return fmt.Errorf("rate_rps is %g: use a positive rate, or 0 to replay as recorded", w.RateRPS)
		}
		if w.BlockSize > 0 && w.BlockSize%c.BlockSize != 0 {
			return fmt.Errorf("engine block_size %d does not divide the trace's hash_block_size %d: prefix hashes could not be mapped; use a block size that divides %d",
				c.BlockSize, w.BlockSize, w.BlockSize)
		}
	case "poisson", "constant", "gamma":
		if len(w.RateCurve) > 0 {
			if w.RateRPS != 0 {
				return fmt.Errorf("rate_rps is %g with a rate_curve: the curve sets the rate; remove rate_rps", w.RateRPS)
			}
			if err := workload.CheckRateCurve(w.rateCurve(), "rate_curve"); err != nil {
				return err
			}
		} else if w.RateRPS <= 0 {
			return fmt.Errorf("rate_rps is %g: an open-loop workload needs a positive rate", w.RateRPS)
		}
		if err := w.checkLengths(c); err != nil {
			return err
		}
	case "closed":
		if w.Users < 1 {
			return fmt.Errorf("users is %d: a closed loop needs at least one user", w.Users)
		}
		if err := w.checkLengths(c); err != nil {
			return err
		}
	case "benchmark":
	default:
		return fmt.Errorf("kind %q: use trace, poisson, constant, gamma, closed or benchmark", w.Kind)
	}
	return nil
}

// rateCurve is the curve in the generator's terms (nil: none).
func (w WorkloadSpec) rateCurve() []workload.RatePoint {
	var out []workload.RatePoint
	for _, p := range w.RateCurve {
		out = append(out, workload.RatePoint{AtS: p.TS, RPS: p.RPS})
	}
	return out
}

func (w WorkloadSpec) checkLengths(c sched.Config) error {
	if w.LengthsFrom != "" {
		return nil
	}
	return checkLengths(w.Prompt, w.Output, c)
}

// CheckLengths refuses prompt and output length distributions whose
// longest request could not fit the engine's max_model_len.
func CheckLengths(p *sim.Plan, prompt, output LengthSpec) error {
	return checkLengths(prompt, output, p.Sched)
}

func checkLengths(prompt, output LengthSpec, c sched.Config) error {
	most := func(l LengthSpec) int {
		switch l.Kind {
		case "fixed":
			return l.Value
		case "uniform", "lognormal":
			return l.Max
		}
		return 0
	}
	if p, o := most(prompt), most(output); p+o > c.MaxModelLen {
		return fmt.Errorf("prompt (up to %d) + output (up to %d) tokens exceed max_model_len %d: shorten the lengths or raise engine.max_model_len",
			p, o, c.MaxModelLen)
	}
	return nil
}

func (l LengthSpec) dist(field string) (workload.LengthDist, error) {
	switch l.Kind {
	case "fixed":
		return workload.Fixed(l.Value), nil
	case "uniform":
		return workload.Uniform(l.Min, l.Max), nil
	case "lognormal":
		d := workload.Lognormal(l.Mean, l.Sigma)
		d.Min, d.Max = l.Min, l.Max
		return d, nil
	case "":
		return workload.LengthDist{}, fmt.Errorf("%s: no length distribution (kind: fixed|uniform|lognormal)", field)
	}
	return workload.LengthDist{}, fmt.Errorf("%s.kind %q: use fixed, uniform or lognormal", field, l.Kind)
}
