package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/model"
	"github.com/steplab/steplab/sim/sched"
	"github.com/steplab/steplab/sim/workload"
)

// Scenario is what `steplab simulate` runs: an engine on a GPU and model, a
// forward-pass model, and a workload. It is read from YAML (field names as
// below) and every field can be overridden by flags.
type Scenario struct {
	Name     string `yaml:"name"`
	Seed     uint64 `yaml:"seed"`
	Hardware string `yaml:"hardware"` // preset: H200, H100 (model.HardwareNames)
	Model    string `yaml:"model"`    // preset shape: Llama-3.1-8B, Llama-3.1-70B-TP4, ... (model.ShapeNames)
	// FPM is "roofline" (the prior from hardware and shape) or the path of
	// a fitted model artifact (steplab fit).
	FPM string `yaml:"fpm"`
	// Host is "" (the default prior, model.DefaultHostModel) or the path
	// of a host-overhead model in JSON: a model.HostModel, or an object
	// holding one under "model" (as datasets/h200/models/host.json, fitted
	// from captures).
	Host string `yaml:"host"`

	Engine   EngineSpec   `yaml:"engine"`
	Workload WorkloadSpec `yaml:"workload"`
	Output   OutputSpec   `yaml:"output"`
}

// EngineSpec holds the engine limits of DESIGN.md §3.
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
	CUDAGraphSizes            []int   `yaml:"cuda_graph_sizes"`
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
	BlockSize int     `yaml:"hash_block_size"` // tokens per prefix hash of the trace (Mooncake: 512)
	// Open and closed loop.
	RateRPS   float64    `yaml:"rate_rps"` // trace: rescale to this rate (0 = as recorded)
	CV        float64    `yaml:"cv"`
	Requests  int        `yaml:"requests"`
	DurationS float64    `yaml:"duration_s"`
	Warmup    int        `yaml:"warmup_requests"`
	Prompt    LengthSpec `yaml:"prompt"`
	Output    LengthSpec `yaml:"output"`
	// LengthsFrom samples (prompt, output) pairs from a dataset's requests.
	LengthsFrom string  `yaml:"lengths_from"`
	Users       int     `yaml:"users"`
	ThinkS      float64 `yaml:"think_s"`
	Think       string  `yaml:"think"` // fixed | exponential
	// Benchmark grid (seed 004).
	Benchmark BenchmarkSpec `yaml:"benchmark"`
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

// DefaultScenario is the README's main job: the Azure conversation trace
// on Llama-3.1-8B on one H200 under vLLM-like defaults.
func DefaultScenario() Scenario {
	return Scenario{
		Name: "default", Seed: 1, Hardware: "H200", Model: "Llama-3.1-8B", FPM: "roofline",
		Engine: EngineSpec{
			MaxNumSeqs: 256, MaxNumBatchedTokens: 8192, BlockSize: 16, GPUMemoryUtilization: 0.9,
			MaxModelLen: 32768, ChunkedPrefill: true, PrefixCaching: true, AsyncScheduling: true,
			CUDAGraphSizes: DefaultCUDAGraphSizes(512),
		},
		Workload: WorkloadSpec{Kind: "trace", Trace: DefaultTrace},
		Output:   OutputSpec{StepRequests: true},
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

// LoadScenario reads a YAML scenario over the defaults. Unknown keys are
// refused with their line.
func LoadScenario(path string) (Scenario, error) {
	sc := DefaultScenario()
	b, err := os.ReadFile(path)
	if err != nil {
		return sc, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&sc); err != nil {
		return sc, fmt.Errorf("%s: %v", path, err)
	}
	return sc, nil
}

// Set applies one override KEY=VALUE with a dotted YAML path
// (engine.max_num_seqs=128, workload.rate_rps=20).
func (sc *Scenario) Set(kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	if !ok {
		return fmt.Errorf("--set %q: want KEY=VALUE", kv)
	}
	// Build a YAML document {a: {b: v}} and decode it over the scenario.
	parts := strings.Split(k, ".")
	var sb strings.Builder
	for i, p := range parts {
		sb.WriteString(strings.Repeat("  ", i) + p + ":")
		if i < len(parts)-1 {
			sb.WriteString("\n")
		}
	}
	sb.WriteString(" " + v + "\n")
	dec := yaml.NewDecoder(strings.NewReader(sb.String()))
	dec.KnownFields(true)
	if err := dec.Decode(sc); err != nil {
		return fmt.Errorf("--set %s: %v", kv, err)
	}
	return nil
}

// Plan is a validated scenario, ready to run.
type Plan struct {
	Scenario Scenario
	HW       model.Hardware
	Shape    model.Shape
	FPM      model.FPM
	FPMName  string
	Sched    sched.Config
	Async    bool
	Graphs   []int
	Payload  model.PayloadModel
	Host     model.HostModel
}

// Plan checks the scenario and resolves presets, refusing anything that
// could not run with a message that says what to change.
func (sc Scenario) Plan() (*Plan, error) {
	var errs []error
	p := &Plan{Scenario: sc, Payload: model.DefaultPayloadModel(), Host: model.DefaultHostModel()}
	hw, err := model.HardwareByName(sc.Hardware)
	if err != nil {
		errs = append(errs, fmt.Errorf("hardware: %w", err))
	}
	shape, err := model.ShapeByName(sc.Model)
	if err != nil {
		errs = append(errs, fmt.Errorf("model: %w", err))
	}
	p.HW, p.Shape = hw, shape
	e := sc.Engine
	if e.BlockSize <= 0 || e.BlockSize&(e.BlockSize-1) != 0 {
		errs = append(errs, fmt.Errorf("engine.block_size is %d: use a power of two such as 16", e.BlockSize))
	}
	if e.GPUMemoryUtilization <= 0 || e.GPUMemoryUtilization > 1 {
		errs = append(errs, fmt.Errorf("engine.gpu_memory_utilization is %g: use a fraction in (0, 1], e.g. 0.9", e.GPUMemoryUtilization))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	blocks := e.NumGPUBlocks
	if blocks == 0 {
		blocks, err = model.KVBlocks(hw, shape, e.BlockSize, e.GPUMemoryUtilization)
		if err != nil {
			return nil, fmt.Errorf("model %s does not fit on %s: %w", shape.Name, hw.Name, err)
		}
	}
	p.Sched = sched.Config{
		MaxNumSeqs: e.MaxNumSeqs, MaxNumBatchedTokens: e.MaxNumBatchedTokens, BlockSize: e.BlockSize,
		NumGPUBlocks: blocks, MaxModelLen: e.MaxModelLen, ChunkedPrefill: e.ChunkedPrefill,
		PrefixCaching: e.PrefixCaching, LongPrefillTokenThreshold: e.LongPrefillTokenThreshold,
	}
	if err := p.Sched.Validate(); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	p.Async = e.AsyncScheduling
	for i, g := range e.CUDAGraphSizes {
		if g < 1 || (i > 0 && g <= e.CUDAGraphSizes[i-1]) {
			return nil, fmt.Errorf("engine.cuda_graph_sizes must be positive and increasing; entry %d is %d", i, g)
		}
	}
	p.Graphs = e.CUDAGraphSizes
	switch sc.FPM {
	case "", "roofline":
		p.FPM, p.FPMName = model.NewRoofline(hw, shape).Prepare(), "roofline"
	default:
		f, _, err := model.Load(sc.FPM)
		if err != nil {
			return nil, fmt.Errorf("fpm: %w", err)
		}
		p.FPM, p.FPMName = f, sc.FPM
	}
	if sc.Host != "" {
		h, err := LoadHostModel(sc.Host)
		if err != nil {
			return nil, fmt.Errorf("host: %w", err)
		}
		p.Host = h
	}
	if err := sc.Workload.check(p.Sched); err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	return p, nil
}

// check refuses workloads that cannot run on the engine before anything
// is simulated.
func (w WorkloadSpec) check(c sched.Config) error {
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
		if w.RateRPS <= 0 {
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

func (w WorkloadSpec) checkLengths(c sched.Config) error {
	if w.LengthsFrom != "" {
		return nil
	}
	most := func(l LengthSpec) int {
		switch l.Kind {
		case "fixed":
			return l.Value
		case "uniform", "lognormal":
			return l.Max
		}
		return 0
	}
	if p, o := most(w.Prompt), most(w.Output); p+o > c.MaxModelLen {
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

// Manifest is the provenance the scenario's dataset carries.
func (p *Plan) Manifest(command []string, inputSHA string) datasets.Manifest {
	sc := p.Scenario
	params := map[string]string{}
	w := sc.Workload
	add := func(k, v string) {
		if v != "" && v != "0" {
			params[k] = v
		}
	}
	add("trace", w.Trace)
	add("rate_rps", strconv.FormatFloat(w.RateRPS, 'g', -1, 64))
	add("requests", strconv.Itoa(w.Requests))
	add("limit", strconv.Itoa(w.Limit))
	add("users", strconv.Itoa(w.Users))
	add("policy", w.Benchmark.Policy)
	// The dataset is named after its directory (the writer fills Name);
	// the scenario's name is provenance.
	m := datasets.Manifest{
		Tool:   datasets.Tool{Name: "steplab", Version: "dev", Command: command},
		Source: datasets.Source{Kind: "simulate", Format: "sim", Detail: map[string]string{"fpm": p.FPMName, "scenario": sc.Name}},
		Hardware: &datasets.Hardware{GPUName: p.HW.Name, GPUCount: max(1, p.Shape.TP), MemTotalBytes: int64(p.HW.MemBytes()),
			Simulated: true},
		Model: &datasets.ModelShape{Name: p.Shape.Name, Layers: p.Shape.Layers, Hidden: p.Shape.Hidden, Heads: p.Shape.Heads,
			KVHeads: p.Shape.KVHeads, HeadDim: p.Shape.HeadDim, Intermediate: p.Shape.Intermediate, Vocab: p.Shape.Vocab,
			DType: "bfloat16", TensorParallel: max(1, p.Shape.TP), TiedEmbeddings: p.Shape.TiedEmbeddings, QKVBias: p.Shape.QKVBias},
		Engine: &datasets.EngineConfig{MaxNumSeqs: p.Sched.MaxNumSeqs, MaxNumBatchedTokens: p.Sched.MaxNumBatchedTokens,
			BlockSize: p.Sched.BlockSize, NumGPUBlocks: p.Sched.NumGPUBlocks, MaxModelLen: p.Sched.MaxModelLen,
			ChunkedPrefill: p.Sched.ChunkedPrefill, PrefixCaching: p.Sched.PrefixCaching,
			LongPrefillTokenThreshold: p.Sched.LongPrefillTokenThreshold, AsyncScheduling: p.Async, BatchQueueDepth: depthOf(p.Async), WorkerCount: 1},
		CUDAGraphSizes: p.Graphs,
		Workload:       &datasets.Workload{Kind: w.Kind, Params: params, Seed: sc.Seed, InputSHA256: inputSHA},
	}
	if w.Kind == "benchmark" {
		pol := w.Benchmark.Policy
		if pol == "" {
			pol = datasets.PolicySteadyStateSecondStep
		}
		m.MeasurementPolicy = &datasets.MeasurementPolicy{Decode: pol, Prefill: datasets.PolicySingleStep}
	} else {
		m.MeasurementPolicy = &datasets.MeasurementPolicy{Decode: datasets.PolicyProduction, Prefill: datasets.PolicyProduction}
	}
	return m
}

func depthOf(async bool) int {
	if async {
		return 2
	}
	return 1
}

// LoadHostModel reads a host-overhead model: a bare model.HostModel JSON
// object, or one wrapped under "model" with provenance beside it.
func LoadHostModel(path string) (model.HostModel, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return model.HostModel{}, err
	}
	var wrapped struct {
		Model *model.HostModel `json:"model"`
	}
	h := model.DefaultHostModel()
	if err := json.Unmarshal(b, &wrapped); err == nil && wrapped.Model != nil {
		h = *wrapped.Model
	} else if err := json.Unmarshal(b, &h); err != nil {
		return h, fmt.Errorf("%s: not a host model: %v", path, err)
	}
	if err := h.Validate(); err != nil {
		return h, fmt.Errorf("%s: %w", path, err)
	}
	return h, nil
}
