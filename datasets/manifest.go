package datasets

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// ManifestFile is the name of a dataset's manifest inside its directory.
const ManifestFile = "manifest.json"

// Dataset statuses (Manifest.Status).
const (
	// DatasetComplete: every writer closed cleanly.
	DatasetComplete = "complete"
	// DatasetPartial: the writer was interrupted (or a capture failed);
	// the parts listed on disk are intact, the last open one is lost.
	DatasetPartial = "partial"
)

// Measurement policies (MeasurementPolicy fields).
const (
	PolicySteadyStateSecondStep = "steady_state_second_step"
	PolicyAdmissionStep         = "admission_step"
	PolicyProduction            = "production"
	PolicySingleStep            = "single_step"
)

// Manifest is the provenance of a dataset: manifest.json.
// Sections a source does not have are nil and omitted.
type Manifest struct {
	SchemaVersion int    `json:"schema_version"`
	Name          string `json:"name"`
	Status        string `json:"status"`
	// Created is supplied by the caller (a capture's wall clock, an
	// importer's source file); the simulator leaves it empty so that its
	// output is byte-identical across runs.
	Created string `json:"created,omitempty"`

	Tool              Tool               `json:"tool"`
	Source            Source             `json:"source"`
	Hardware          *Hardware          `json:"hardware,omitempty"`
	Model             *ModelShape        `json:"model,omitempty"`
	Engine            *EngineConfig      `json:"engine,omitempty"`
	CUDAGraphSizes    []int              `json:"cuda_graph_capture_sizes,omitempty"`
	Workload          *Workload          `json:"workload,omitempty"`
	MeasurementPolicy *MeasurementPolicy `json:"measurement_policy,omitempty"`
	// Cluster describes the engines beyond one: pools, router and links
	// (package sim/cluster; the model section holds the experts). Absent
	// for one engine.
	Cluster *Cluster `json:"cluster,omitempty"`

	// Tables records, for each table written, its parts and row counts.
	// The writer fills it; readers use it to detect missing parts.
	Tables map[string]TableInfo `json:"tables"`
	Notes  []string             `json:"notes,omitempty"`
}

// Tool names the program and command that wrote the dataset.
type Tool struct {
	Name    string   `json:"name"`
	Version string   `json:"version"`
	Command []string `json:"command,omitempty"`
}

// DetailVLLMVersion is the Source.Detail key of the vLLM release a
// recorded run ran under (an ops prior prices it with the kernels measured
// nearest that release).
const DetailVLLMVersion = "vllm_version"

// DetailAttentionBackend is the Source.Detail key of the attention
// backend a recorded run's engine ran (a capture's worker: "triton").
const DetailAttentionBackend = "attention_backend"

// The Source.Detail keys of a capture whose worker runs the Triton
// attention: its decode attention's launch rule, as the worker reports it
// at handshake (capture/worker/PROTOCOL.md, ready.decode_attention; fpm.DecodeKernel
// prices it). A
// decode-only batch of B requests over a model of KVH KV heads splits each
// request's KV walk into min(split_max, next_pow2(ceil(split_programs /
// (B·KVH)))) parts, 1 where B·KVH ≥ split_programs, and walks it in tiles
// of kv_tile_tokens. Absent for the torch attention, which has no such rule.
const (
	DetailDecodeKVTileTokens  = "decode_kv_tile_tokens" // KV tokens per tile (64)
	DetailDecodeSplitPrograms = "decode_split_programs" // the programs the split aims for (2 × the GPU's SMs)
	DetailDecodeSplitMax      = "decode_split_max"      // the most parts (16)
	DetailDecodeSplitRounding = "decode_split_rounding" // how the part count rounds up: "pow2", to a power of two
)

// DetailMixedCUDAGraphMode is the Source.Detail key of the CUDA-graph mode
// of a capture's prefill and mixed steps ("piecewise", "full").
const DetailMixedCUDAGraphMode = "mixed_cuda_graph_mode"

// FormatGPUWorker is the Source.Format of a capture by steplab's GPU
// worker (capture/worker), whose loop runs one step at a time
// (EngineConfig.SerialWorker).
const FormatGPUWorker = "gpu-worker"

// Source says where the rows came from.
type Source struct {
	Kind   string            `json:"kind"`             // capture | simulate | import
	Format string            `json:"format,omitempty"` // importer name, executor name, ...
	Path   string            `json:"path,omitempty"`
	SHA256 string            `json:"sha256,omitempty"` // of the source file, for imports
	Detail map[string]string `json:"detail,omitempty"`
}

// Hardware describes the GPU (or simulated GPU) the steps ran on.
type Hardware struct {
	GPUName       string  `json:"gpu_name,omitempty"`
	GPUUUID       string  `json:"gpu_uuid,omitempty"`
	GPUCount      int     `json:"gpu_count,omitempty"`
	Driver        string  `json:"driver,omitempty"`
	SMClockMHz    int     `json:"sm_clock_mhz,omitempty"`
	MemClockMHz   int     `json:"mem_clock_mhz,omitempty"`
	PowerLimitW   float64 `json:"power_limit_w,omitempty"`
	MemTotalBytes int64   `json:"mem_total_bytes,omitempty"`
	Simulated     bool    `json:"simulated,omitempty"`
	// Spec is the hardware spec file a simulation priced the GPU from,
	// when it was a file rather than a catalogue name.
	Spec string `json:"spec,omitempty"`
	// Nodes is how a simulated tensor-parallel group spans nodes; absent
	// on one node.
	Nodes *Nodes `json:"nodes,omitempty"`
}

// Nodes is how a group of GPUs (a tensor-parallel group, an
// expert-parallel instance) spans nodes: Nodes nodes of GPUsPerNode GPUs,
// joined within a node by Link and between nodes by Network, as the
// hardware catalogue states them (figures of a spec, not measured).
type Nodes struct {
	Nodes       int      `json:"nodes"`
	GPUsPerNode int      `json:"gpus_per_node"`
	Link        NodeLink `json:"link"`
	Network     NodeLink `json:"network"`
}

// NodeLink is one kind of link of a node layout: per GPU and direction,
// and its latency (a small all-reduce within a node, one hop between
// nodes).
type NodeLink struct {
	Kind         string  `json:"kind"`
	BandwidthGBs float64 `json:"bandwidth_gbs"`
	LatencyUs    float64 `json:"latency_us"`
}

// ModelShape is the decoder architecture the steps ran. The fields past
// the dense ones are optional: mixture-of-experts MLPs, latent attention,
// sliding windows and per-part dtypes, as the model catalogue states them.
type ModelShape struct {
	Name           string  `json:"name,omitempty"`
	Architecture   string  `json:"architecture,omitempty"`
	Layers         int     `json:"layers"`
	Hidden         int     `json:"hidden"`
	Heads          int     `json:"heads"`
	KVHeads        int     `json:"kv_heads"`
	HeadDim        int     `json:"head_dim"`
	Intermediate   int     `json:"intermediate"`
	Vocab          int     `json:"vocab"`
	DType          string  `json:"dtype"`
	TensorParallel int     `json:"tensor_parallel,omitempty"`
	ParamsBillion  float64 `json:"params_billion,omitempty"`
	// WeightDType is the linear layers' weight dtype when it differs from
	// DType (an fp8 checkpoint); KVDType the KV cache's (an fp8 cache).
	WeightDType    string `json:"weight_dtype,omitempty"`
	KVDType        string `json:"kv_dtype,omitempty"`
	TiedEmbeddings bool   `json:"tied_embeddings,omitempty"`
	QKVBias        bool   `json:"qkv_bias,omitempty"`
	// QKNormAcrossHeads: the q and k norms span every head (catalog.Shape's).
	QKNormAcrossHeads bool `json:"qk_norm_across_heads,omitempty"`
	// SlidingLayers layers attend over at most SlidingWindow tokens.
	SlidingWindow int       `json:"sliding_window,omitempty"`
	SlidingLayers int       `json:"sliding_layers,omitempty"`
	MLA           *ModelMLA `json:"mla,omitempty"`
	MoE           *ModelMoE `json:"moe,omitempty"`
	// AttnDType is the token mixers' weight dtype where it differs from
	// WeightDType (an NVFP4 checkpoint's bf16 attention); the experts'
	// is MoE.DType: with WeightDType and KVDType, the precision of each
	// part of the model.
	AttnDType      string `json:"attn_dtype,omitempty"`
	AttnOutputGate bool   `json:"attn_output_gate,omitempty"`
	MLPMatrices    int    `json:"mlp_matrices,omitempty"`
	// Stack is the per-layer layout of a hybrid model (runs of layers by
	// token mixer and MLP kind), with its state-space and indexer
	// geometry; absent for a uniform one.
	Stack      []ModelLayer     `json:"stack,omitempty"`
	StateMixer *ModelStateMixer `json:"state_mixer,omitempty"`
	Indexer    *ModelIndexer    `json:"indexer,omitempty"`
	LowRank    *ModelLowRank    `json:"low_rank,omitempty"`
	// Notes say what the model's source did not state and was derived or
	// assumed.
	Notes []string `json:"notes,omitempty"`
	// Config is where the shape was read: a catalogue entry
	// ("builtin:models/...") or a config.json path.
	Config string `json:"config,omitempty"`
}

// ModelLayer is a run of Count identical layers: the token mixer
// (full, sliding, chunked, mla, dsa, linear, mamba2, none) with its
// window or top-k and any geometry of its own, and the MLP (dense, moe,
// none).
type ModelLayer struct {
	Count        int    `json:"count"`
	Attention    string `json:"attention"`
	Window       int    `json:"window,omitempty"`
	TopK         int    `json:"top_k,omitempty"`
	Heads        int    `json:"heads,omitempty"`
	KVHeads      int    `json:"kv_heads,omitempty"`
	HeadDim      int    `json:"head_dim,omitempty"`
	VHeadDim     int    `json:"v_head_dim,omitempty"`
	Compress     int    `json:"compress,omitempty"`
	MLP          string `json:"mlp"`
	Intermediate int    `json:"intermediate,omitempty"`
}

// ModelStateMixer is the geometry of linear-attention or Mamba-2 layers.
type ModelStateMixer struct {
	Heads      int    `json:"heads"`
	KeyHeads   int    `json:"key_heads,omitempty"`
	KeyDim     int    `json:"key_dim"`
	ValueDim   int    `json:"value_dim"`
	Groups     int    `json:"groups,omitempty"`
	ConvKernel int    `json:"conv_kernel"`
	StateDType string `json:"state_dtype,omitempty"`
}

// ModelLowRank is attention's low-rank projections (DeepSeek-V4).
type ModelLowRank struct {
	QLoraRank int  `json:"q_lora_rank,omitempty"`
	OLoraRank int  `json:"o_lora_rank,omitempty"`
	OGroups   int  `json:"o_groups,omitempty"`
	SharedKV  bool `json:"shared_kv,omitempty"`
}

// ModelIndexer is a sparse-attention key indexer's heads and width.
type ModelIndexer struct {
	Heads   int `json:"heads"`
	HeadDim int `json:"head_dim"`
}

// ModelMLA is multi-head latent attention (DeepSeek): the KV cache holds a
// compressed latent of KVLoraRank plus a shared rotary key per token.
type ModelMLA struct {
	QLoraRank     int `json:"q_lora_rank,omitempty"`
	KVLoraRank    int `json:"kv_lora_rank"`
	QKNopeHeadDim int `json:"qk_nope_head_dim"`
	QKRopeHeadDim int `json:"qk_rope_head_dim"`
	VHeadDim      int `json:"v_head_dim"`
}

// ModelMoE is a mixture-of-experts MLP: Experts routed experts of
// ExpertIntermediate width, TopK per token, shared experts always active,
// and the first DenseLayers layers dense.
type ModelMoE struct {
	Experts            int    `json:"experts"`
	TopK               int    `json:"top_k"`
	ExpertIntermediate int    `json:"expert_intermediate"`
	SharedExperts      int    `json:"shared_experts,omitempty"`
	SharedIntermediate int    `json:"shared_intermediate,omitempty"`
	DenseLayers        int    `json:"dense_layers,omitempty"`
	DType              string `json:"dtype,omitempty"`
	// Latent is the width routed experts run at (0: the hidden size).
	Latent int `json:"latent,omitempty"`
	// RoutingSkew is how the capture's router was tilted (the GPU
	// worker's routing_skew: −skew·ln(1+e) on expert e's logit, 0 for
	// none), on logits of spread RouterLogitStd; nil where the source did
	// not record it, and the experts a step reaches are then unknown
	// beyond uniform routing (fit warns).
	RoutingSkew    *float64 `json:"routing_skew,omitempty"`
	RouterLogitStd float64  `json:"router_logit_std,omitempty"`
}

// EngineConfig holds the scheduler limits of docs/architecture.md#scheduler-semantics.
type EngineConfig struct {
	MaxNumSeqs                int  `json:"max_num_seqs"`
	MaxNumBatchedTokens       int  `json:"max_num_batched_tokens"`
	BlockSize                 int  `json:"block_size"`
	NumGPUBlocks              int  `json:"num_gpu_blocks"`
	MaxModelLen               int  `json:"max_model_len"`
	ChunkedPrefill            bool `json:"chunked_prefill"`
	PrefixCaching             bool `json:"prefix_caching"`
	LongPrefillTokenThreshold int  `json:"long_prefill_token_threshold"`
	AsyncScheduling           bool `json:"async_scheduling"`
	BatchQueueDepth           int  `json:"batch_queue_depth,omitempty"`
	WorkerCount               int  `json:"worker_count,omitempty"`
	// SerialWorker: the worker ran each step to its end (the sampled
	// tokens on the host) before it read the next step, so its receive,
	// input preparation and sampling were not hidden behind the device
	// under async scheduling (steplab's GPU worker; a capture before this
	// field is known by its source format, FormatGPUWorker). False: vLLM's
	// model runner, which prepares step N+1 while the GPU runs step N.
	SerialWorker bool `json:"serial_worker,omitempty"`

	// What a serving engine's run records beside its limits (an imported
	// vLLM run); zero when unknown.
	//
	// GPUMemoryUtilization is the fraction of device memory the engine was
	// allowed (vLLM's gpu_memory_utilization), from which it sized the KV
	// cache; NumKVTokens is the KV capacity it allocated, in tokens
	// (num_gpu_blocks × block_size).
	GPUMemoryUtilization float64 `json:"gpu_memory_utilization,omitempty"`
	NumKVTokens          int     `json:"num_kv_tokens,omitempty"`
	// KVCacheDType is the KV cache's element type ("auto": the model's).
	KVCacheDType string `json:"kv_cache_dtype,omitempty"`
	// Parallelism: tensor, pipeline and data parallel sizes, and whether
	// experts were sharded across the data-parallel ranks. NumGPUBlocks is
	// per data-parallel rank: each rank has its own scheduler and KV cache.
	TensorParallelSize   int  `json:"tensor_parallel_size,omitempty"`
	PipelineParallelSize int  `json:"pipeline_parallel_size,omitempty"`
	DataParallelSize     int  `json:"data_parallel_size,omitempty"`
	ExpertParallel       bool `json:"expert_parallel,omitempty"`
}

// Cluster is a run's placement when it had more than one engine.
type Cluster struct {
	Router string        `json:"router"`
	Pools  []ClusterPool `json:"pools"`
	// KVTransfer is the prefill-to-decode link of a disaggregated cluster.
	KVTransfer *Link `json:"kv_transfer,omitempty"`
	// Sequential says why the engines were simulated one event at a time
	// rather than side by side between routing decisions; absent, they
	// step side by side on as many goroutines as the run had (the dataset
	// is the same for any number).
	Sequential string `json:"sequential,omitempty"`
}

// ClusterPool is one pool of identical engines.
type ClusterPool struct {
	Name     string `json:"name"`
	Role     string `json:"role"` // both | prefill | decode
	Replicas int    `json:"replicas"`
	// ExpertParallel is the engines per data-parallel + expert-parallel
	// instance (0: none).
	ExpertParallel int `json:"expert_parallel,omitempty"`
	// ExpertLink is the all-to-all link between an instance's ranks;
	// ExpertNodes, for an instance spanning nodes, its layout (ExpertLink
	// is then the link within a node).
	ExpertLink  *Link  `json:"expert_link,omitempty"`
	ExpertNodes *Nodes `json:"expert_nodes,omitempty"`
	// Hardware is the pool's GPU and Engine its limits, where they differ
	// from the manifest's.
	Hardware string        `json:"hardware,omitempty"`
	Engine   *EngineConfig `json:"engine,omitempty"`
	// Workers are the engines' worker_id values in the steps table (of an
	// autoscaled pool, every engine that ran).
	Workers []string `json:"workers"`
	// Autoscale is the policy of a pool whose replica count changed during
	// the run, and its replicas over time.
	Autoscale *PoolScaling `json:"autoscale,omitempty"`
}

// PoolScaling is an autoscaled pool's record: its policy (the scenario's
// cluster.pools.NAME.autoscale, defaults resolved), each change of its
// replicas, and the GPU time they held.
type PoolScaling struct {
	Pool          string  `json:"pool"`
	Policy        string  `json:"policy"`
	IntervalS     float64 `json:"interval_s"`
	MinReplicas   int     `json:"min_replicas"`
	MaxReplicas   int     `json:"max_replicas"`
	TargetLoad    float64 `json:"target_load"`
	Headroom      float64 `json:"headroom,omitempty"`
	ScaleUpDelayS float64 `json:"scale_up_delay_s"`
	LoadTimeS     float64 `json:"load_time_s"`
	CooldownS     float64 `json:"cooldown_s"`
	// SLOTTFTMs and SLOITLMs are the objective a policy slo kept headroom to.
	SLOTTFTMs float64 `json:"slo_ttft_ms,omitempty"`
	SLOITLMs  float64 `json:"slo_itl_ms,omitempty"`
	// GPUHours counts every engine × its GPUs from its start to its
	// removal (or the end of the run), loading included.
	GPUHours float64 `json:"gpu_hours"`
	// Timeline is every change of the pool's engines, in time order.
	Timeline []ReplicaEvent `json:"timeline"`
}

// ReplicaEvent is one change of an autoscaled pool: an engine starts
// (holds its GPUs, loads the model), becomes ready (routable), drains (no
// new requests) or is removed. Serving and Live are the pool's routable
// and GPU-holding engines after it.
type ReplicaEvent struct {
	AtS     float64 `json:"at_s"`
	Worker  string  `json:"worker"`
	Event   string  `json:"event"` // start | ready | drain | remove
	Serving int     `json:"serving"`
	Live    int     `json:"live"`
}

// Link is a link between GPUs.
type Link struct {
	BandwidthGBs float64 `json:"bandwidth_gbs"`
	LatencyUs    float64 `json:"latency_us"`
}

// Workload describes the arrivals that drove the run.
type Workload struct {
	Kind        string            `json:"kind"`
	Params      map[string]string `json:"params,omitempty"`
	Seed        uint64            `json:"seed"`
	InputSHA256 string            `json:"input_sha256,omitempty"`
}

// ParamHashBlockSize is the workload.params key under which an importer
// records the prompt tokens behind each prefix_hash_ids entry of its
// requests (Mooncake: 512, BLIS prefix groups: 16).
const ParamHashBlockSize = "hash_block_size"

// SerialWorker reports whether the run's worker ran each step to its end
// before reading the next (EngineConfig.SerialWorker, or a capture by
// steplab's GPU worker, which recorded none before the field existed).
func (m *Manifest) SerialWorker() bool {
	if m == nil {
		return false
	}
	return (m.Engine != nil && m.Engine.SerialWorker) || m.Source.Format == FormatGPUWorker
}

// HashBlockSize is the tokens behind each prefix_hash_ids entry the
// manifest records (workload.params.hash_block_size); 0 when it records
// none.
func (m *Manifest) HashBlockSize() (int, error) {
	if m == nil || m.Workload == nil {
		return 0, nil
	}
	v, ok := m.Workload.Params[ParamHashBlockSize]
	if !ok {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("manifest workload.params.%s=%q: must be a token count >= 1", ParamHashBlockSize, v)
	}
	return n, nil
}

// MeasurementPolicy says how benchmark points were measured: a decode point
// on its admission step or on the requests' steady second step
// (docs/architecture.md#why-it-exists).
type MeasurementPolicy struct {
	Decode  string `json:"decode,omitempty"`
	Prefill string `json:"prefill,omitempty"`
}

// TableInfo lists the parts of one table.
type TableInfo struct {
	Rows  int64      `json:"rows"`
	Parts []PartInfo `json:"parts"`
}

// PartInfo is one completed part file of a table.
type PartInfo struct {
	File   string `json:"file"` // relative to the dataset directory
	Rows   int64  `json:"rows"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// ErrNewerSchema is wrapped by errors for data written by a newer steplab.
var ErrNewerSchema = errors.New("newer schema version")

// CheckSchemaVersion refuses data written with a newer schema than this build
// understands. Older versions are accepted: their missing columns read as the
// defaults documented in the schema.
func CheckSchemaVersion(where string, v int) error {
	if v > SchemaVersion {
		return fmt.Errorf("%s: schema version %d is newer than this steplab understands (%d): upgrade steplab: %w",
			where, v, SchemaVersion, ErrNewerSchema)
	}
	if v < 1 {
		return fmt.Errorf("%s: invalid schema version %d (want 1..%d)", where, v, SchemaVersion)
	}
	return nil
}

// ReadManifest reads and checks dir/manifest.json.
func ReadManifest(dir string) (*Manifest, error) {
	path := filepath.Join(dir, ManifestFile)
	b, err := readCapped(path, MaxManifestBytes)
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: not a valid manifest: %w", path, err)
	}
	if m.SchemaVersion == 0 {
		var probe map[string]json.RawMessage
		if json.Unmarshal(b, &probe) == nil && probe["schema_version"] == nil {
			return nil, fmt.Errorf("%s: no schema_version: add \"schema_version\": %d for tables written to this steplab's schema", path, SchemaVersion)
		}
	}
	if err := CheckSchemaVersion(path, m.SchemaVersion); err != nil {
		return nil, err
	}
	if err := checkPartPaths(path, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// A minimal manifest names what a dataset's rows cannot say (schema
// version, hardware, model, measurement policy) and leaves out what a
// steplab writer records for itself. Open fills the rest in and says so in
// Dataset.Assumptions.
const (
	// AssumedComplete: no status; the tables are read as complete.
	AssumedComplete = "no status in %s: read as complete"
	// AssumedTables: no table list; the tables on disk are read.
	AssumedTables = "no tables listed in %s: read %s from disk"
)

// assume fills in what a minimal manifest leaves out and lists, one line
// each, what it assumed.
func (d *Dataset) assume() {
	m := d.Manifest
	if m.Status == "" {
		m.Status = DatasetComplete
		d.Assumptions = append(d.Assumptions, fmt.Sprintf(AssumedComplete, ManifestFile))
	}
	if m.Name == "" {
		m.Name = filepath.Base(filepath.Clean(d.Dir))
	}
	if len(m.Tables) > 0 {
		return
	}
	var found []string
	for _, t := range Tables {
		parts, err := d.Parts(t)
		if err != nil {
			continue
		}
		files := "files"
		if len(parts) == 1 {
			files = "file"
		}
		found = append(found, fmt.Sprintf("%s (%d %s)", t, len(parts), files))
	}
	if len(found) > 0 {
		d.Assumptions = append(d.Assumptions, fmt.Sprintf(AssumedTables, ManifestFile, strings.Join(found, ", ")))
	}
}

// WriteManifest writes dir/manifest.json atomically (temporary name, then
// rename), so a reader never sees half a manifest.
func WriteManifest(dir string, m *Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return WriteFileAtomic(filepath.Join(dir, ManifestFile), append(b, '\n'))
}

// Part states reported by Dataset.PartsStatus and Dataset.Check.
const (
	// PartOK: listed in the manifest; on disk with the listed size, SHA-256
	// and row count.
	PartOK = "ok"
	// PartMissing: listed in the manifest but not on disk.
	PartMissing = "missing"
	// PartMismatch: listed and on disk, but its size, SHA-256 or row count
	// differs from the manifest (the file changed or is damaged).
	PartMismatch = "mismatch"
	// PartUnlisted: a completed part on disk that the manifest does not list
	// (a writer killed between renaming the part and rewriting the
	// manifest, or a minimal manifest that lists no parts). Readers read it.
	PartUnlisted = "unlisted"
	// PartTemporary: the hidden .tmp part an interrupted writer left open.
	// Readers ignore it; it holds at most TableOptions.PartRows rows.
	PartTemporary = "temporary"
)

// PartStatus is the state of one part file of a table.
type PartStatus struct {
	Table string `json:"table"`
	File  string `json:"file"` // relative to the dataset directory, slash-separated
	State string `json:"state"`
	Rows  int64  `json:"rows"`  // from the manifest, or from the file's footer
	Bytes int64  `json:"bytes"` // on disk
	// Detail says what is wrong for PartMismatch, PartUnlisted parts that
	// are not readable Parquet, and PartTemporary.
	Detail string `json:"detail,omitempty"`
}

// CheckReport is the result of Dataset.Check.
type CheckReport struct {
	Dir string `json:"dir"`
	// Status is the manifest's status (DatasetComplete or DatasetPartial),
	// or "" for a Dataset built without one.
	Status string       `json:"status"`
	Parts  []PartStatus `json:"parts"`
}

// OK reports whether every part the manifest lists is intact. Unlisted and
// temporary parts do not count against it; a partial dataset can be OK.
func (r *CheckReport) OK() bool {
	for _, p := range r.Parts {
		if p.State == PartMissing || p.State == PartMismatch {
			return false
		}
		if p.State == PartUnlisted && p.Detail != "" {
			return false
		}
	}
	return true
}

// Problems lists one line per part that is not intact.
func (r *CheckReport) Problems() []string {
	var out []string
	for _, p := range r.Parts {
		switch {
		case p.State == PartMissing, p.State == PartMismatch:
			out = append(out, fmt.Sprintf("%s: %s %s", p.File, p.State, p.Detail))
		case p.State == PartUnlisted && p.Detail != "":
			out = append(out, fmt.Sprintf("%s: %s", p.File, p.Detail))
		}
	}
	return out
}

// Check verifies every part of every table against the manifest: presence,
// size, SHA-256 (the whole file is read) and row count (from the Parquet
// footer). It returns an error only when the directory cannot be read;
// damaged parts are reported in the CheckReport. The validator uses it to
// report partial and damaged datasets.
func (d *Dataset) Check() (*CheckReport, error) {
	r := &CheckReport{Dir: d.Dir}
	if d.Manifest != nil {
		r.Status = d.Manifest.Status
	}
	names := append([]string(nil), Tables...)
	if d.Manifest != nil {
		for t := range d.Manifest.Tables {
			if !slices.Contains(names, t) {
				names = append(names, t)
			}
		}
		sort.Strings(names[len(Tables):])
	}
	for _, t := range names {
		listed := d.Manifest != nil && len(d.Manifest.Tables[t].Parts) > 0
		if !d.Has(t) && !listed {
			continue
		}
		ps, err := d.PartsStatus(t)
		if err != nil {
			return nil, err
		}
		r.Parts = append(r.Parts, ps...)
	}
	return r, nil
}

// PartsStatus reports the state of every part of table: those the
// manifest lists, completed parts on disk it does not list, and temporary
// parts of an interrupted writer. Like Check, it reads every part in full.
func (d *Dataset) PartsStatus(table string) ([]PartStatus, error) {
	var out []PartStatus
	seen := map[string]bool{}
	if d.Manifest != nil {
		for _, p := range d.Manifest.Tables[table].Parts {
			seen[p.File] = true
			out = append(out, checkListedPart(d.Dir, table, p))
		}
	}
	path := TableDir(d.Dir, table)
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return out, nil
	case err != nil:
		return nil, err
	}
	files, temps := []string{path}, []string(nil)
	if st.IsDir() {
		if files, temps, err = tableFiles(path); err != nil {
			return nil, err
		}
	}
	rel := func(f string) string {
		r, _ := filepath.Rel(d.Dir, f)
		return filepath.ToSlash(r)
	}
	for _, f := range temps {
		info, err := os.Stat(f)
		if err != nil {
			return nil, err
		}
		out = append(out, PartStatus{Table: table, File: rel(f), State: PartTemporary, Bytes: info.Size(),
			Detail: "left open by an interrupted writer; ignored by readers"})
	}
	for _, f := range files {
		if seen[rel(f)] {
			continue
		}
		info, err := os.Stat(f)
		if err != nil {
			return nil, err
		}
		ps := PartStatus{Table: table, File: rel(f), State: PartUnlisted, Bytes: info.Size()}
		if rows, err := parquetRows(f); err != nil {
			ps.Detail = err.Error()
		} else {
			ps.Rows = rows
		}
		out = append(out, ps)
	}
	return out, nil
}

func checkListedPart(dir, table string, p PartInfo) PartStatus {
	ps := PartStatus{Table: table, File: p.File, State: PartOK, Rows: p.Rows}
	path := filepath.Join(dir, filepath.FromSlash(p.File))
	f, _, err := (&Dataset{Dir: dir}).OpenPart(p.File)
	if err != nil {
		ps.State, ps.Detail = PartMissing, err.Error()
		return ps
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	ps.Bytes = n
	var bad []string
	switch {
	case err != nil:
		bad = append(bad, "read: "+err.Error())
	case n != p.Bytes:
		bad = append(bad, fmt.Sprintf("%d bytes, manifest says %d", n, p.Bytes))
	case hex.EncodeToString(h.Sum(nil)) != p.SHA256:
		bad = append(bad, "sha256 differs from the manifest")
	}
	if len(bad) == 0 {
		rows, err := parquetRows(path)
		switch {
		case err != nil:
			bad = append(bad, err.Error())
		case rows != p.Rows:
			bad = append(bad, fmt.Sprintf("%d rows, manifest says %d", rows, p.Rows))
		}
	}
	if len(bad) > 0 {
		ps.State, ps.Detail = PartMismatch, strings.Join(bad, "; ")
	}
	return ps
}

// parquetRows is the row count in a Parquet file's footer.
func parquetRows(path string) (int64, error) {
	pf, f, err := OpenParquet(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return pf.NumRows(), nil
}
