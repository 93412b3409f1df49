package datasets

// SchemaVersion is the version of the data contract this build writes.
// Readers accept this version and every older one; a newer one is refused
// (see CheckSchemaVersion).
const SchemaVersion = 1

// Unknown marks an integer field whose value the source did not record
// (a timing window an importer cannot know, a GPU time the executor cannot
// measure). Validation treats it as absent, never as a negative value.
const Unknown int64 = -1

// Table names of a dataset directory.
const (
	TableSteps        = "steps"
	TableStepRequests = "step_requests"
	TableRequests     = "requests"
	TableGPUSamples   = "gpu_samples"
)

// Tables lists every table of schema version 1 in the order tools report them.
var Tables = []string{TableSteps, TableStepRequests, TableRequests, TableGPUSamples}

// Step kinds (Step.Kind).
const (
	KindPrefill = "prefill"
	KindDecode  = "decode"
	KindMixed   = "mixed"
)

// Step roles (Step.Role).
const (
	RoleProduction  = "production"
	RoleMeasured    = "measured"
	RoleScaffolding = "scaffolding"
)

// Request statuses (Request.Status).
const (
	StatusFinished   = "finished"   // produced all its output tokens
	StatusAborted    = "aborted"    // cancelled or rejected by the engine
	StatusUnfinished = "unfinished" // still running or waiting when the run ended
	StatusNotRun     = "not_run"    // an imported trace: arrivals and lengths only
)

// Step is one engine step (forward pass): one row of steps.parquet.
// Column names follow Dynamo's ForwardPassMetrics where one exists.
// Times are int64 nanoseconds since the run's start on one monotonic clock;
// Unknown (-1) where the source did not record them.
type Step struct {
	StepID   int64  `parquet:"step_id,delta"`
	WorkerID string `parquet:"worker_id,dict"`
	DPRank   int32  `parquet:"dp_rank"`

	Kind          string `parquet:"kind,dict"`
	Role          string `parquet:"role,dict"`
	BenchmarkID   int64  `parquet:"benchmark_id"`
	SampleReason  string `parquet:"sample_reason,dict"`
	Valid         bool   `parquet:"valid"`
	InvalidReason string `parquet:"invalid_reason,dict"`

	NumNewReqs           int32   `parquet:"num_new_reqs"`
	NumCachedReqs        int32   `parquet:"num_cached_reqs"`
	NumResumedReqs       int32   `parquet:"num_resumed_reqs"`
	NumPreempted         int32   `parquet:"num_preempted"`
	NumFinished          int32   `parquet:"num_finished"`
	NumPrefillRequests   int32   `parquet:"num_prefill_requests"`
	SumPrefillTokens     int64   `parquet:"sum_prefill_tokens"`
	VarPrefillLength     float64 `parquet:"var_prefill_length"`
	SumPrefillKVTokens   int64   `parquet:"sum_prefill_kv_tokens"`
	NumDecodeRequests    int32   `parquet:"num_decode_requests"`
	SumDecodeKVTokens    int64   `parquet:"sum_decode_kv_tokens"`
	VarDecodeKVTokens    float64 `parquet:"var_decode_kv_tokens"`
	TotalScheduledTokens int64   `parquet:"total_scheduled_tokens"`
	PaddedTokens         int64   `parquet:"padded_tokens"`

	PayloadBytes       int64 `parquet:"payload_bytes"`
	PayloadNewBytes    int64 `parquet:"payload_new_bytes"`
	PayloadCachedBytes int64 `parquet:"payload_cached_bytes"`

	TScheduleStart int64 `parquet:"t_schedule_start,delta"`
	TScheduleEnd   int64 `parquet:"t_schedule_end,delta"`
	TDispatch      int64 `parquet:"t_dispatch,delta"`
	TOutput        int64 `parquet:"t_output,delta"`
	TUpdateEnd     int64 `parquet:"t_update_end,delta"`
	WallTimeNs     int64 `parquet:"wall_time_ns"`
	NarrowTimeNs   int64 `parquet:"narrow_time_ns"`
	GPUTimeNs      int64 `parquet:"gpu_time_ns"`
	HostPrepNs     int64 `parquet:"host_prep_ns"`
	// Worker-side receive/decode of the payload and sampling, where the
	// executor reports them (a capture); Unknown otherwise.
	WorkerRecvNs int64 `parquet:"worker_recv_ns"`
	SampleNs     int64 `parquet:"sample_ns"`
	Overlapped   bool  `parquet:"overlapped"`

	NumWaiting    int32 `parquet:"num_waiting"`
	NumRunning    int32 `parquet:"num_running"`
	KVBlocksUsed  int64 `parquet:"kv_blocks_used"`
	KVBlocksTotal int64 `parquet:"kv_blocks_total"`
}

// StepRequest is one request scheduled in one step: one row of
// step_requests.parquet.
type StepRequest struct {
	StepID             int64  `parquet:"step_id,delta"`
	ReqID              string `parquet:"req_id"`
	IsNew              bool   `parquet:"is_new"`
	IsResumed          bool   `parquet:"is_resumed"`
	IsPrefill          bool   `parquet:"is_prefill"`
	NumScheduledTokens int64  `parquet:"num_scheduled_tokens"`
	NumComputedTokens  int64  `parquet:"num_computed_tokens"`
	PromptLen          int64  `parquet:"prompt_len"`
	PayloadBytes       int64  `parquet:"payload_bytes"`
}

// Request is one request of a run or trace: one row of requests.parquet.
// Event times are Unknown when the request never reached that event or the
// source (an imported trace) does not have them.
type Request struct {
	ReqID            string  `parquet:"req_id"`
	ArrivalNs        int64   `parquet:"arrival_ns,delta"`
	PromptTokens     int64   `parquet:"prompt_tokens"`
	OutputTokens     int64   `parquet:"output_tokens"`
	PrefixHashIDs    []int64 `parquet:"prefix_hash_ids,list"`
	FirstScheduledNs int64   `parquet:"first_scheduled_ns"`
	FirstTokenNs     int64   `parquet:"first_token_ns"`
	FinishNs         int64   `parquet:"finish_ns"`
	NumPreemptions   int32   `parquet:"num_preemptions"`
	Status           string  `parquet:"status,dict"`
}

// GPUSample is one NVML reading taken during a capture: one row of
// gpu_samples.parquet.
type GPUSample struct {
	TNs            int64   `parquet:"t_ns,delta"`
	GPUIndex       int32   `parquet:"gpu_index"`
	SMClockMHz     int32   `parquet:"sm_clock_mhz"`
	MemClockMHz    int32   `parquet:"mem_clock_mhz"`
	PowerW         float64 `parquet:"power_w"`
	PowerLimitW    float64 `parquet:"power_limit_w"`
	TemperatureC   int32   `parquet:"temperature_c"`
	MemUsedBytes   int64   `parquet:"mem_used_bytes"`
	MemTotalBytes  int64   `parquet:"mem_total_bytes"`
	UtilGPUPercent int32   `parquet:"util_gpu_percent"`
	UtilMemPercent int32   `parquet:"util_mem_percent"`
}
