package datasets

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unsafe"
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
	WorkerID string `parquet:"worker_id,dict"`
	DPRank   int32  `parquet:"dp_rank,delta"`

	Kind          string `parquet:"kind,dict"`
	Role          string `parquet:"role,dict"`
	BenchmarkID   int64  `parquet:"benchmark_id,delta"`
	SampleReason  string `parquet:"sample_reason,dict"`
	Valid         bool   `parquet:"valid"`
	InvalidReason string `parquet:"invalid_reason,dict"`

	NumNewReqs           int32   `parquet:"num_new_reqs,delta"`
	NumCachedReqs        int32   `parquet:"num_cached_reqs,delta"`
	NumResumedReqs       int32   `parquet:"num_resumed_reqs,delta"`
	NumPreempted         int32   `parquet:"num_preempted,delta"`
	NumFinished          int32   `parquet:"num_finished,delta"`
	NumPrefillRequests   int32   `parquet:"num_prefill_requests,delta"`
	SumPrefillTokens     int64   `parquet:"sum_prefill_tokens,delta"`
	VarPrefillLength     float64 `parquet:"var_prefill_length"`
	SumPrefillKVTokens   int64   `parquet:"sum_prefill_kv_tokens,delta"`
	NumDecodeRequests    int32   `parquet:"num_decode_requests,delta"`
	SumDecodeKVTokens    int64   `parquet:"sum_decode_kv_tokens,delta"`
	VarDecodeKVTokens    float64 `parquet:"var_decode_kv_tokens"`
	TotalScheduledTokens int64   `parquet:"total_scheduled_tokens,delta"`
	PaddedTokens         int64   `parquet:"padded_tokens,delta"`
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

	PayloadBytes       int64 `parquet:"payload_bytes,delta"`
	PayloadNewBytes    int64 `parquet:"payload_new_bytes,delta"`
	PayloadCachedBytes int64 `parquet:"payload_cached_bytes,delta"`

	TScheduleStart int64 `parquet:"t_schedule_start,delta"`
	TScheduleEnd   int64 `parquet:"t_schedule_end,delta"`
	TDispatch      int64 `parquet:"t_dispatch,delta"`
	TOutput        int64 `parquet:"t_output,delta"`
	TUpdateEnd     int64 `parquet:"t_update_end,delta"`
	WallTimeNs     int64 `parquet:"wall_time_ns,delta"`
	NarrowTimeNs   int64 `parquet:"narrow_time_ns,delta"`
	GPUTimeNs      int64 `parquet:"gpu_time_ns,delta"`
	HostPrepNs     int64 `parquet:"host_prep_ns,delta"`
	// Worker-side receive/decode of the payload and sampling, where the
	// executor reports them (a capture); Unknown otherwise.
	WorkerRecvNs int64 `parquet:"worker_recv_ns,delta" default:"-1"`
	SampleNs     int64 `parquet:"sample_ns,delta" default:"-1"`
	Overlapped   bool  `parquet:"overlapped"`

	NumWaiting    int32 `parquet:"num_waiting,delta"`
	NumRunning    int32 `parquet:"num_running,delta"`
	KVBlocksUsed  int64 `parquet:"kv_blocks_used,delta"`
	KVBlocksTotal int64 `parquet:"kv_blocks_total,delta"`
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
	PayloadBytes       int64  `parquet:"payload_bytes,delta"`
}

// Request is one request of a run or trace: one row of requests.parquet.
// Event times are Unknown when the request never reached that event or the
// source (an imported trace) does not have them.
type Request struct {
	ReqID            string  `parquet:"req_id"`
	ArrivalNs        int64   `parquet:"arrival_ns,delta"`
	PromptTokens     int64   `parquet:"prompt_tokens,delta"`
	OutputTokens     int64   `parquet:"output_tokens,delta"`
	PrefixHashIDs    []int64 `parquet:"prefix_hash_ids,list" default:""`
	FirstScheduledNs int64   `parquet:"first_scheduled_ns,delta"`
	FirstTokenNs     int64   `parquet:"first_token_ns,delta"`
	FinishNs         int64   `parquet:"finish_ns,delta"`
	NumPreemptions   int32   `parquet:"num_preemptions,delta"`
	Status           string  `parquet:"status,dict"`
}

// GPUSample is one NVML reading taken during a capture: one row of
// gpu_samples.parquet.
type GPUSample struct {
	TNs            int64   `parquet:"t_ns,delta"`
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
// A column added to a table after schema version 1, or one a source may
// legitimately leave out, carries a `default:"..."` struct tag next to its
// parquet tag. When a file lacks such a column, readers fill the default
// instead of failing; every other column is required and its absence is an
// error that names it (see CheckColumns). Readers that predate a column
// ignore it, so adding one keeps the schema version. The defaults of schema
// version 1:
//
//	steps.worker_recv_ns          -1 (Unknown)
//	steps.sample_ns               -1 (Unknown)
//	steps.max_decode_kv_tokens    -1 (Unknown)
//	steps.sum_prefill_attn        -1 (Unknown)
//	steps.new_req_tokens          -1 (Unknown)
//	steps.cuda_graph_size         -1 (Unknown)
//	step_requests.is_resumed      false
//	requests.prefix_hash_ids      empty list
//	engine_samples.dp_rank        -1 (every rank)
//	engine_samples.kv_usage       -1 (not recorded)
//	engine_samples.prompt_tokens_per_s, generation_tokens_per_s  -1
//	engine_samples.window_ns      0
//
// A null value in a nullable column (a file written by pandas) reads as the
// column's default when it has one, and as the zero value otherwise.

// ColumnDefault is one column that may be absent from a table.
type ColumnDefault struct {
	Column  string
	Default string // the value read when the column is absent, as text
}

// DefaultedColumns lists the columns of table that may be absent, with
// the values readers fill in. Tools (the validator, inspect) use it to tell
// a defaulted column from a missing required one.
func DefaultedColumns(table string) []ColumnDefault {
	var c *rowCodec
	switch table {
	case TableSteps:
		c, _ = codecFor(reflect.TypeFor[Step]())
	case TableStepRequests:
		c, _ = codecFor(reflect.TypeFor[StepRequest]())
	case TableRequests:
		c, _ = codecFor(reflect.TypeFor[Request]())
	case TableGPUSamples:
		c, _ = codecFor(reflect.TypeFor[GPUSample]())
	case TableEngineSamples:
		c, _ = codecFor(reflect.TypeFor[EngineSample]())
	}
	if c == nil {
		return nil
	}
	var out []ColumnDefault
	for _, f := range c.fields {
		if f.hasDefault {
			out = append(out, ColumnDefault{Column: f.name, Default: f.defText})
		}
	}
	return out
}

// fieldKind is the Go type of a field the columnar codec handles.
type fieldKind uint8

const (
	kindInt32 fieldKind = iota + 1
	kindInt64
	kindFloat64
	kindBool
	kindString
	kindInt64List
)

func (k fieldKind) String() string {
	switch k {
	case kindInt32:
		return "int32"
	case kindInt64:
		return "int64"
	case kindFloat64:
		return "float64"
	case kindBool:
		return "bool"
	case kindString:
		return "string"
	case kindInt64List:
		return "list<int64>"
	}
	return "?"
}

// codecField is one struct field mapped to one top-level column.
type codecField struct {
	name   string
	kind   fieldKind
	offset uintptr
	index  int // struct field index

	delta, dict, split bool // encodings asked by the parquet tag

	hasDefault bool
	defText    string
	defInt     int64
	defFloat   float64
	defBool    bool
	defString  string
}

// rowCodec describes a flat struct (int32, int64, float64, bool, string and
// []int64 list fields) that the columnar fast paths read and write through
// field offsets, with no per-value reflection. Other structs go through
// parquet-go's generic reader and writer.
type rowCodec struct {
	typ     reflect.Type
	size    uintptr
	fields  []codecField
	hasList bool
}

var codecCache sync.Map // reflect.Type -> codecResult

type codecResult struct {
	c   *rowCodec
	err error
}

// codecFor returns the columnar codec of t, or an error saying why t needs
// the generic path.
func codecFor(t reflect.Type) (*rowCodec, error) {
	if v, ok := codecCache.Load(t); ok {
		r := v.(codecResult)
		return r.c, r.err
	}
	c, err := buildCodec(t)
	codecCache.Store(t, codecResult{c, err})
	return c, err
}

func buildCodec(t reflect.Type) (*rowCodec, error) {
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("%s is not a struct", t)
	}
	c := &rowCodec{typ: t, size: t.Size()}
	seen := map[string]bool{}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		tag, hasTag := sf.Tag.Lookup("parquet")
		parts := strings.Split(tag, ",")
		name := parts[0]
		if name == "-" {
			continue
		}
		if !hasTag || name == "" {
			name = sf.Name
		}
		f := codecField{name: name, offset: sf.Offset, index: i}
		list := false
		for _, opt := range parts[1:] {
			switch opt {
			case "delta":
				f.delta = true
			case "dict":
				f.dict = true
			case "split":
				f.split = true
			case "plain", "zstd", "":
			case "list":
				list = true
			default:
				return nil, fmt.Errorf("field %s: tag option %q", sf.Name, opt)
			}
		}
		switch sf.Type {
		case reflect.TypeFor[int32]():
			f.kind = kindInt32
		case reflect.TypeFor[int64]():
			f.kind = kindInt64
		case reflect.TypeFor[float64]():
			f.kind = kindFloat64
		case reflect.TypeFor[bool]():
			f.kind = kindBool
		case reflect.TypeFor[string]():
			f.kind = kindString
		case reflect.TypeFor[[]int64]():
			if !list {
				return nil, fmt.Errorf("field %s: []int64 without the list tag", sf.Name)
			}
			f.kind = kindInt64List
			c.hasList = true
		default:
			return nil, fmt.Errorf("field %s: type %s", sf.Name, sf.Type)
		}
		if list && f.kind != kindInt64List {
			return nil, fmt.Errorf("field %s: list tag on %s", sf.Name, sf.Type)
		}
		if (f.delta && f.kind != kindInt32 && f.kind != kindInt64) || (f.split && f.kind != kindFloat64) || (f.dict && f.kind != kindString) {
			return nil, fmt.Errorf("field %s: encoding not supported by the columnar path", sf.Name)
		}
		if d, ok := sf.Tag.Lookup("default"); ok {
			if err := f.setDefault(d); err != nil {
				return nil, fmt.Errorf("field %s: %w", sf.Name, err)
			}
		}
		if seen[name] {
			return nil, fmt.Errorf("column %s twice", name)
		}
		seen[name] = true
		c.fields = append(c.fields, f)
	}
	if len(c.fields) == 0 {
		return nil, fmt.Errorf("%s has no columns", t)
	}
	return c, nil
}

func (f *codecField) setDefault(d string) error {
	f.hasDefault, f.defText = true, d
	var err error
	switch f.kind {
	case kindInt32:
		f.defInt, err = strconv.ParseInt(d, 10, 32)
	case kindInt64:
		f.defInt, err = strconv.ParseInt(d, 10, 64)
	case kindFloat64:
		f.defFloat, err = strconv.ParseFloat(d, 64)
	case kindBool:
		f.defBool, err = strconv.ParseBool(d)
	case kindString:
		f.defString = d
	case kindInt64List:
		if d != "" {
			err = errors.New("a list default must be empty")
		}
	}
	if err != nil {
		return fmt.Errorf("bad default %q: %w", d, err)
	}
	return nil
}

// fillDefault sets field f of n rows starting at base to its default (or
// zero value).
func (f *codecField) fillDefault(base unsafe.Pointer, stride uintptr, n int) {
	p := unsafe.Add(base, f.offset)
	switch f.kind {
	case kindInt32:
		for i := 0; i < n; i++ {
			*(*int32)(unsafe.Add(p, uintptr(i)*stride)) = int32(f.defInt)
		}
	case kindInt64:
		for i := 0; i < n; i++ {
			*(*int64)(unsafe.Add(p, uintptr(i)*stride)) = f.defInt
		}
	case kindFloat64:
		for i := 0; i < n; i++ {
			*(*float64)(unsafe.Add(p, uintptr(i)*stride)) = f.defFloat
		}
	case kindBool:
		for i := 0; i < n; i++ {
			*(*bool)(unsafe.Add(p, uintptr(i)*stride)) = f.defBool
		}
	case kindString:
		for i := 0; i < n; i++ {
			*(*string)(unsafe.Add(p, uintptr(i)*stride)) = f.defString
		}
	case kindInt64List:
		for i := 0; i < n; i++ {
			*(*[]int64)(unsafe.Add(p, uintptr(i)*stride)) = nil
		}
	}
}
