package capture

// Messages of the worker protocol (capture/worker/PROTOCOL.md, version 1).
// Field names are the protocol's; encoding is msgpack maps.

// InitMsg starts the worker.
type InitMsg struct {
	Type                 string       `msgpack:"type"`
	ProtocolVersion      int          `msgpack:"protocol_version"`
	Model                string       `msgpack:"model"`
	ModelConfig          *ModelConfig `msgpack:"model_config"`
	Seed                 int64        `msgpack:"seed"`
	Device               string       `msgpack:"device"`
	NumGPUBlocks         int          `msgpack:"num_gpu_blocks"`
	GPUMemoryUtilization float64      `msgpack:"gpu_memory_utilization"`
	BlockSize            int          `msgpack:"block_size"`
	MaxNumSeqs           int          `msgpack:"max_num_seqs"`
	MaxNumBatchedTokens  int          `msgpack:"max_num_batched_tokens"`
	MaxModelLen          int          `msgpack:"max_model_len"`
	CUDAGraphSizes       []int        `msgpack:"cuda_graph_sizes"`
	AttentionBackend     string       `msgpack:"attention_backend"`
}

// ModelConfig is an explicit decoder shape. RopeTheta and RMSEps (0:
// the worker's defaults) do not change what a step costs with random
// weights.
type ModelConfig struct {
	Layers            int     `msgpack:"layers"`
	Hidden            int     `msgpack:"hidden"`
	Heads             int     `msgpack:"heads"`
	KVHeads           int     `msgpack:"kv_heads"`
	HeadDim           int     `msgpack:"head_dim"`
	Intermediate      int     `msgpack:"intermediate"`
	Vocab             int     `msgpack:"vocab"`
	DType             string  `msgpack:"dtype"`
	TieWordEmbeddings bool    `msgpack:"tie_word_embeddings"`
	QKVBias           bool    `msgpack:"qkv_bias"`
	RopeTheta         float64 `msgpack:"rope_theta,omitempty"`
	RMSEps            float64 `msgpack:"rms_eps,omitempty"`
	// Experts > 0 replaces every dense MLP by Experts routed experts of
	// ExpertIntermediate, TopK a token; RoutingSkew tilts the router
	// towards the first experts (PROTOCOL.md).
	Experts            int     `msgpack:"experts,omitempty"`
	TopK               int     `msgpack:"top_k,omitempty"`
	ExpertIntermediate int     `msgpack:"expert_intermediate,omitempty"`
	RoutingSkew        float64 `msgpack:"routing_skew,omitempty"`
}

// ReadyMsg is the worker's answer to init.
type ReadyMsg struct {
	Type                string      `msgpack:"type"`
	Message             string      `msgpack:"message"` // on error
	Device              string      `msgpack:"device"`
	GPUName             string      `msgpack:"gpu_name"`
	TorchVersion        string      `msgpack:"torch_version"`
	TritonVersion       string      `msgpack:"triton_version"`
	AttentionBackend    string      `msgpack:"attention_backend"`
	ModelConfig         ModelConfig `msgpack:"model_config"`
	NumGPUBlocks        int         `msgpack:"num_gpu_blocks"`
	BlockSize           int         `msgpack:"block_size"`
	MaxNumSeqs          int         `msgpack:"max_num_seqs"`
	MaxNumBatchedTokens int         `msgpack:"max_num_batched_tokens"`
	MaxModelLen         int         `msgpack:"max_model_len"`
	KVBytes             int64       `msgpack:"kv_bytes"`
	WeightBytes         int64       `msgpack:"weight_bytes"`
	CUDAGraphSizes      []int       `msgpack:"cuda_graph_sizes"`
	// RouterLogitStd is the MoE router's logit spread, the scale
	// ModelConfig.RoutingSkew is measured against (0: dense, or a worker
	// before it was reported).
	RouterLogitStd float64 `msgpack:"router_logit_std"`
	// MixedCUDAGraphSizes are the token sizes the worker captured for
	// prefill and mixed steps (absent from workers before them).
	MixedCUDAGraphSizes []int `msgpack:"mixed_cuda_graph_sizes"`
	// MixedCUDAGraphMode says how those steps replay them: "piecewise"
	// (attention eager between graphs of the other layers' work) or "full"
	// (absent from workers before piecewise graphs, which ran full ones).
	MixedCUDAGraphMode string `msgpack:"mixed_cuda_graph_mode"`
	// DecodeAttention is the Triton attention's decode launch rule (nil
	// for the torch attention, and from workers before it was reported).
	DecodeAttention *DecodeAttentionRule `msgpack:"decode_attention"`
	BuildNs         int64                `msgpack:"build_ns"`
	GraphCaptureNs  int64                `msgpack:"graph_capture_ns"`
	Memory          map[string]any       `msgpack:"memory"`
}

// DecodeAttentionRule is how the worker's decode attention launches: the
// KV tile, and the split of a decode-only batch's KV walk (the manifest
// records it under datasets.DetailDecodeKVTileTokens and the keys beside
// it).
type DecodeAttentionRule struct {
	KVTileTokens  int    `msgpack:"kv_tile_tokens"`
	SplitPrograms int    `msgpack:"split_programs"`
	SplitMax      int    `msgpack:"split_max"`
	SplitRounding string `msgpack:"split_rounding"`
}

// NewRequestData ships a request in full (its first step, or a resume).
type NewRequestData struct {
	ReqID             string         `msgpack:"req_id"`
	PromptTokenIDs    []int32        `msgpack:"prompt_token_ids"`
	BlockIDs          []int          `msgpack:"block_ids"`
	NumComputedTokens int            `msgpack:"num_computed_tokens"`
	SamplingParams    SamplingParams `msgpack:"sampling_params"`
}

// SamplingParams of a request.
type SamplingParams struct {
	Temperature float64 `msgpack:"temperature"`
	TopP        float64 `msgpack:"top_p"`
	TopK        int     `msgpack:"top_k"`
	MaxTokens   int     `msgpack:"max_tokens"`
	Seed        *int64  `msgpack:"seed"`
}

// CachedRequestData ships deltas of continuing requests, as parallel lists.
type CachedRequestData struct {
	ReqIDs            []string `msgpack:"req_ids"`
	ResumedReqIDs     []string `msgpack:"resumed_req_ids"`
	NewTokenIDs       [][]int  `msgpack:"new_token_ids"`
	NewBlockIDs       [][]int  `msgpack:"new_block_ids"`
	NumComputedTokens []int    `msgpack:"num_computed_tokens"`
	NumOutputTokens   []int    `msgpack:"num_output_tokens"`
}

// OutputMsg is the worker's answer to a step.
type OutputMsg struct {
	Type            string           `msgpack:"type"`
	Message         string           `msgpack:"message"` // on error
	StepID          int64            `msgpack:"step_id"`
	SampledTokenIDs map[string]int64 `msgpack:"sampled_token_ids"`
	Timings         Timings          `msgpack:"timings"`
	TWorkerDoneNs   int64            `msgpack:"t_worker_done_ns"`
}

// Timings are the worker's own measurements of a step, in ns.
type Timings struct {
	RecvNs       int64 `msgpack:"recv_ns"`
	PrepNs       int64 `msgpack:"prep_ns"`
	DeviceNs     int64 `msgpack:"device_ns"`
	SampleNs     int64 `msgpack:"sample_ns"`
	TotalNs      int64 `msgpack:"total_ns"`
	Graph        int64 `msgpack:"graph"`
	NumReqs      int64 `msgpack:"num_reqs"`
	NumTokens    int64 `msgpack:"num_tokens"`
	PaddedTokens int64 `msgpack:"padded_tokens"`
}
