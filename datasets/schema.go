package datasets

import (
	"reflect"

	"github.com/steplab/steplab/datasets/internal/pq"
)

// SchemaVersion is the version of the data contract this build writes.
// Readers accept this version and every older one; a newer one is refused
// (see CheckSchemaVersion).
const SchemaVersion = 1

// Unknown marks an integer field whose value the source did not record
// (a timing window an importer cannot know, a GPU time the executor cannot
// measure; sum_prefill_attn, a float column, uses −1 the same way).
// Validation treats it as absent, never as a negative value.
const Unknown int64 = -1

// Table names of a dataset directory.
const (
	TableSteps        = "steps"
	TableStepRequests = "step_requests"
	TableRequests     = "requests"
	TableGPUSamples   = "gpu_samples"
	// TableEngineSamples is optional, like gpu_samples: a run's scheduler
	// state sampled over time (an engine's stats logger), where the source
	// records one.
	TableEngineSamples = "engine_samples"
)

// Tables a cluster simulation adds (package sim/cluster documents their
// columns): one row per routing decision, and one per prompt KV moved from
// a prefill to a decode engine.
const (
	TableRoutes    = "routes"
	TableTransfers = "transfers"
)

// ClusterTables are the tables a cluster simulation adds.
var ClusterTables = []string{TableRoutes, TableTransfers}

// KnownTables is every table name steplab writes: Tables, then
// ClusterTables.
func KnownTables() []string { return append(append([]string(nil), Tables...), ClusterTables...) }

// Tables lists every table of schema version 1 in the order tools report them.
var Tables = []string{TableSteps, TableStepRequests, TableRequests, TableGPUSamples, TableEngineSamples}

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
	WorkerID string `parquet:"worker_id,dict" default:""`
	DPRank   int32  `parquet:"dp_rank,delta" default:"0"`

	Kind          string `parquet:"kind,dict"`
	Role          string `parquet:"role,dict" default:"production"`
	BenchmarkID   int64  `parquet:"benchmark_id,delta" default:"-1"`
	SampleReason  string `parquet:"sample_reason,dict" default:""`
	Valid         bool   `parquet:"valid" default:"true"`
	InvalidReason string `parquet:"invalid_reason,dict" default:""`

	NumNewReqs           int32   `parquet:"num_new_reqs,delta" default:"-1"`
	NumCachedReqs        int32   `parquet:"num_cached_reqs,delta" default:"-1"`
	NumResumedReqs       int32   `parquet:"num_resumed_reqs,delta" default:"-1"`
	NumPreempted         int32   `parquet:"num_preempted,delta" default:"-1"`
	NumFinished          int32   `parquet:"num_finished,delta" default:"-1"`
	NumPrefillRequests   int32   `parquet:"num_prefill_requests,delta"`
	SumPrefillTokens     int64   `parquet:"sum_prefill_tokens,delta"`
	VarPrefillLength     float64 `parquet:"var_prefill_length" default:"-1"`
	SumPrefillKVTokens   int64   `parquet:"sum_prefill_kv_tokens,delta"`
	NumDecodeRequests    int32   `parquet:"num_decode_requests,delta"`
	SumDecodeKVTokens    int64   `parquet:"sum_decode_kv_tokens,delta"`
	VarDecodeKVTokens    float64 `parquet:"var_decode_kv_tokens" default:"-1"`
	TotalScheduledTokens int64   `parquet:"total_scheduled_tokens,delta" default:"-1"`
	PaddedTokens         int64   `parquet:"padded_tokens,delta" default:"-1"`
	// Composition detail added after the first release (a file without
	// these columns reads them as Unknown; package features derives them
	// from step_requests where it can). MaxDecodeKVTokens is the longest
	// context one decode request reads; SumPrefillAttn is Σ over prefill
	// requests of chunk·(computed + chunk/2), the causal attention pairs of
	// the prefill chunks; NewReqTokens is the tokens the new requests ship
	// in full (their prompts; a resumed request's outputs too);
	// CUDAGraphSize is the CUDA-graph batch size the step ran at, 0 when it
	// ran eagerly.
	MaxDecodeKVTokens int64   `parquet:"max_decode_kv_tokens,delta" default:"-1"`
	SumPrefillAttn    float64 `parquet:"sum_prefill_attn" default:"-1"`
	NewReqTokens      int64   `parquet:"new_req_tokens,delta" default:"-1"`
	CUDAGraphSize     int32   `parquet:"cuda_graph_size,delta" default:"-1"`

	PayloadBytes       int64 `parquet:"payload_bytes,delta" default:"-1"`
	PayloadNewBytes    int64 `parquet:"payload_new_bytes,delta" default:"-1"`
	PayloadCachedBytes int64 `parquet:"payload_cached_bytes,delta" default:"-1"`

	TScheduleStart int64 `parquet:"t_schedule_start,delta" default:"-1" timestamp:"ns"`
	TScheduleEnd   int64 `parquet:"t_schedule_end,delta" default:"-1" timestamp:"ns"`
	TDispatch      int64 `parquet:"t_dispatch,delta" default:"-1" timestamp:"ns"`
	TOutput        int64 `parquet:"t_output,delta" default:"-1" timestamp:"ns"`
	TUpdateEnd     int64 `parquet:"t_update_end,delta" default:"-1" timestamp:"ns"`
	WallTimeNs     int64 `parquet:"wall_time_ns,delta"`
	NarrowTimeNs   int64 `parquet:"narrow_time_ns,delta" default:"-1"`
	GPUTimeNs      int64 `parquet:"gpu_time_ns,delta" default:"-1"`
	HostPrepNs     int64 `parquet:"host_prep_ns,delta" default:"-1"`
	// Worker-side receive/decode of the payload and sampling, where the
	// executor reports them (a capture); Unknown otherwise.
	WorkerRecvNs int64 `parquet:"worker_recv_ns,delta" default:"-1"`
	SampleNs     int64 `parquet:"sample_ns,delta" default:"-1"`
	Overlapped   bool  `parquet:"overlapped" default:"false"`

	NumWaiting    int32 `parquet:"num_waiting,delta" default:"-1"`
	NumRunning    int32 `parquet:"num_running,delta" default:"-1"`
	KVBlocksUsed  int64 `parquet:"kv_blocks_used,delta" default:"-1"`
	KVBlocksTotal int64 `parquet:"kv_blocks_total,delta" default:"-1"`
}

// StepRequest is one request scheduled in one step: one row of
// step_requests.parquet.
type StepRequest struct {
	StepID             int64  `parquet:"step_id,delta"`
	ReqID              string `parquet:"req_id,dict"`
	IsNew              bool   `parquet:"is_new"`
	IsResumed          bool   `parquet:"is_resumed" default:"false"`
	IsPrefill          bool   `parquet:"is_prefill"`
	NumScheduledTokens int64  `parquet:"num_scheduled_tokens,delta"`
	NumComputedTokens  int64  `parquet:"num_computed_tokens,delta"`
	PromptLen          int64  `parquet:"prompt_len,delta"`
	PayloadBytes       int64  `parquet:"payload_bytes,delta" default:"-1"`
}

// Request is one request of a run or trace: one row of requests.parquet.
// Event times are Unknown when the request never reached that event or the
// source (an imported trace) does not have them.
type Request struct {
	ReqID            string  `parquet:"req_id"`
	ArrivalNs        int64   `parquet:"arrival_ns,delta" timestamp:"ns"`
	PromptTokens     int64   `parquet:"prompt_tokens,delta"`
	OutputTokens     int64   `parquet:"output_tokens,delta"`
	PrefixHashIDs    []int64 `parquet:"prefix_hash_ids,list" default:""`
	FirstScheduledNs int64   `parquet:"first_scheduled_ns,delta" default:"-1" timestamp:"ns"`
	FirstTokenNs     int64   `parquet:"first_token_ns,delta" default:"-1" timestamp:"ns"`
	FinishNs         int64   `parquet:"finish_ns,delta" default:"-1" timestamp:"ns"`
	NumPreemptions   int32   `parquet:"num_preemptions,delta" default:"-1"`
	Status           string  `parquet:"status,dict" default:"not_run"`
}

// GPUSample is one NVML reading taken during a capture: one row of
// gpu_samples.parquet.
type GPUSample struct {
	TNs            int64   `parquet:"t_ns,delta" timestamp:"ns"`
	GPUIndex       int32   `parquet:"gpu_index,delta"`
	SMClockMHz     int32   `parquet:"sm_clock_mhz,delta"`
	MemClockMHz    int32   `parquet:"mem_clock_mhz,delta"`
	PowerW         float64 `parquet:"power_w"`
	PowerLimitW    float64 `parquet:"power_limit_w"`
	TemperatureC   int32   `parquet:"temperature_c,delta"`
	MemUsedBytes   int64   `parquet:"mem_used_bytes,delta"`
	MemTotalBytes  int64   `parquet:"mem_total_bytes,delta"`
	UtilGPUPercent int32   `parquet:"util_gpu_percent,delta"`
	UtilMemPercent int32   `parquet:"util_mem_percent,delta"`
}

// EngineSample is the engine's scheduler state at one moment, as its stats
// logger reported it: one row of engine_samples.parquet. An importer writes
// it beside the requests of a run whose engine logged its queues (vLLM's
// stat loggers, LLMServingSim's timeseries.csv); replay compares it with
// the re-simulated engine's state.
//
// A row may summarise a window (a logger that keeps the last reading of each
// tick): TNs is the end of the window, the counts and KV usage are the last
// reading in it, and the throughputs are averages over it.
type EngineSample struct {
	// TNs is on the clock of the dataset's other tables (the requests'
	// arrival_ns): nanoseconds since the run's start.
	TNs int64 `parquet:"t_ns,delta"`
	// DPRank is the data-parallel rank the reading is from; -1 when it
	// covers every rank (counts summed, KV usage averaged).
	DPRank int32 `parquet:"dp_rank,delta" default:"-1"`
	// NumRunning and NumWaiting are the scheduler's running and waiting
	// requests (the waiting queue includes preempted requests).
	NumRunning int32 `parquet:"num_running,delta"`
	NumWaiting int32 `parquet:"num_waiting,delta"`
	// KVUsage is the fraction of the usable KV-cache blocks held by
	// requests, 0..1 (vLLM's kv_cache_usage: 1 − free/usable; a block kept
	// only for prefix reuse counts as free); −1 when not recorded.
	KVUsage float64 `parquet:"kv_usage" default:"-1"`
	// PromptTokensPerS and GenerationTokensPerS are the prompt tokens
	// prefilled and the output tokens generated per second over the window;
	// −1 when not recorded.
	PromptTokensPerS     float64 `parquet:"prompt_tokens_per_s" default:"-1"`
	GenerationTokensPerS float64 `parquet:"generation_tokens_per_s" default:"-1"`
	// WindowNs is the length of the window ending at TNs (0 for an
	// instantaneous reading).
	WindowNs int64 `parquet:"window_ns,delta" default:"0"`
}

// Columns with defaults.
//
// A column a source may legitimately leave out carries a `default:"..."`
// struct tag next to its parquet tag: a file without it (or with it
// Null-typed, as pyarrow writes a column of nothing but None) reads the
// default; every other column is required (the package documentation
// lists both). A `timestamp:"ns"` tag marks an instant on the run's clock:
// a TIMESTAMP column of any unit, or a legacy INT96 timestamp, reads into
// it as nanoseconds since the Unix epoch. Tools only use differences of
// instants, so any origin works as long as a table keeps to one clock.

// ColumnDefault is one column that may be absent from a table.
type ColumnDefault struct {
	Column  string
	Default string // the value read when the column is absent, as text
}

// DefaultedColumns lists the columns of table that may be absent, with
// the values readers fill in. Tools (the validator, inspect) use it to tell
// a defaulted column from a missing required one.
func DefaultedColumns(table string) []ColumnDefault {
	c := schemaCodec(table)
	if c == nil {
		return nil
	}
	var out []ColumnDefault
	for _, col := range c.Columns() {
		if col.HasDefault {
			out = append(out, ColumnDefault{Column: col.Name, Default: col.Default})
		}
	}
	return out
}

// schemaCodec is the codec of a table's row type, or nil for a table the
// schema does not know.
func schemaCodec(table string) *pq.Codec {
	var c *pq.Codec
	switch table {
	case TableSteps:
		c, _ = pq.CodecFor(reflect.TypeFor[Step]())
	case TableStepRequests:
		c, _ = pq.CodecFor(reflect.TypeFor[StepRequest]())
	case TableRequests:
		c, _ = pq.CodecFor(reflect.TypeFor[Request]())
	case TableGPUSamples:
		c, _ = pq.CodecFor(reflect.TypeFor[GPUSample]())
	case TableEngineSamples:
		c, _ = pq.CodecFor(reflect.TypeFor[EngineSample]())
	}
	return c
}

// withTableDefaults returns c with the default the schema declares for
// table given to each field of c that declares none (a projection type),
// when the default converts to the field's kind.
func withTableDefaults(c *pq.Codec, table string) *pq.Codec {
	if sc := schemaCodec(table); sc != nil {
		return c.WithDefaults(sc)
	}
	return c
}

// TableColumns lists the columns of a table of the schema, in order.
func TableColumns(table string) []string {
	c := schemaCodec(table)
	if c == nil {
		return nil
	}
	var out []string
	for _, col := range c.Columns() {
		out = append(out, col.Name)
	}
	return out
}

// EarliestInstant is the smallest known instant (a field with the
// timestamp tag, not Unknown) of rows; ok is false when there is none.
// Rows of a type the columnar codec does not handle have none.
func EarliestInstant[T any](rows []T) (earliest int64, ok bool) {
	pq.Instants(rows, func(p *int64) {
		if !ok || *p < earliest {
			earliest, ok = *p, true
		}
	})
	return earliest, ok
}

// ShiftInstants subtracts by from every known instant of rows, moving
// their clock's origin (Unknown stays Unknown).
func ShiftInstants[T any](rows []T, by int64) {
	pq.Instants(rows, func(p *int64) { *p -= by })
}
