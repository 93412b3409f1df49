package cluster

// Pool roles (PoolPlan.Role).
const (
	RoleBoth    = "both"    // aggregated: a request prefills and decodes on one engine
	RolePrefill = "prefill" // disaggregated: prefills only (max_tokens = 1)
	RoleDecode  = "decode"  // disaggregated: decodes from a transferred prompt KV
)

// DefaultPool is the name of the pool of a scenario that names none: one
// engine, which simulate has always called sim-0.
const DefaultPool = "sim"

// SLOSpec is a latency objective on every request: TTFT and mean
// inter-token latency (0: none on that metric).
type SLOSpec struct {
	TTFTMs float64 `yaml:"ttft_ms"`
	ITLMs  float64 `yaml:"itl_ms"`
}

// RouterSpec names the router and its parameters.
type RouterSpec struct {
	// Name: round_robin (default), least_requests, least_kv, session, kv,
	// vllm_dp.
	Name string `yaml:"name"`
	// OverlapWeight (kv) weighs the prefill blocks a worker would compute
	// against its decode blocks: Dynamo's kv_overlap_score_weight, default 1.
	OverlapWeight *float64 `yaml:"overlap_weight"`
	// Temperature (kv) of the softmax over normalised logits: Dynamo's
	// router_temperature, default 0 (the lowest cost wins).
	Temperature float64 `yaml:"temperature"`
	// SessionTokens (session) is the prompt depth whose prefix hash keys a
	// request's session when the trace has no session key; default 1024.
	SessionTokens int `yaml:"session_tokens"`
	// StatsIntervalMs (vllm_dp) is how often the engines' queue counts
	// reach the router: vLLM's coordinator publishes every 100 ms.
	StatsIntervalMs *float64 `yaml:"stats_interval_ms"`
}

// Links are the links between GPUs a placement uses. Each defaults to the
// hardware's GPU-to-GPU interconnect (DefaultLink).
type Links struct {
	// KVTransfer carries a prompt's KV from a prefill engine to a decode
	// engine.
	KVTransfer LinkSpec `yaml:"kv_transfer"`
	// Expert carries the all-to-all of expert parallelism between the
	// ranks of an instance.
	Expert LinkSpec `yaml:"expert"`
}

// LinkSpec is one link: bandwidth per direction and one-way latency. What
// it leaves out is the hardware interconnect's (see DefaultLink); a stated
// bandwidth must be positive.
type LinkSpec struct {
	BandwidthGBs *float64 `yaml:"bandwidth_gbs"` // GB/s (1e9 bytes/s) per direction
	LatencyUs    *float64 `yaml:"latency_us"`
}
