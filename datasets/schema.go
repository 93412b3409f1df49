package datasets

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
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
	for _, f := range c.fields {
		if f.hasDefault {
			out = append(out, ColumnDefault{Column: f.name, Default: f.defText})
		}
	}
	return out
}

// schemaCodec is the codec of a table's row type, or nil for a table the
// schema does not know.
func schemaCodec(table string) *rowCodec {
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
	return c
}

var tableDefaultsCache sync.Map // tableCodecKey -> *rowCodec

type tableCodecKey struct {
	c     *rowCodec
	table string
}

// withTableDefaults returns c with the default the schema declares for
// table given to each field of c that declares none (a projection type),
// when the default converts to the field's kind.
func withTableDefaults(c *rowCodec, table string) *rowCodec {
	key := tableCodecKey{c, table}
	if v, ok := tableDefaultsCache.Load(key); ok {
		return v.(*rowCodec)
	}
	out := c
	if sc := schemaCodec(table); sc != nil {
		for i := range c.fields {
			f := &c.fields[i]
			if f.hasDefault {
				continue
			}
			for _, sf := range sc.fields {
				if sf.name != f.name || !sf.hasDefault {
					continue
				}
				nf := *f
				if nf.setDefault(sf.defText) != nil {
					break
				}
				if out == c {
					cp := *c
					cp.fields = slices.Clone(c.fields)
					out = &cp
				}
				out.fields[i] = nf
			}
		}
	}
	tableDefaultsCache.Store(key, out)
	return out
}

// TableColumns lists the columns of a table of the schema, in order.
func TableColumns(table string) []string {
	c := schemaCodec(table)
	if c == nil {
		return nil
	}
	out := make([]string, len(c.fields))
	for i, f := range c.fields {
		out[i] = f.name
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

	delta, dict, split bool // encodings asked by the parquet tag
	timestamp          bool // an instant: TIMESTAMP columns read into it (the timestamp tag)

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
	if err := c.addFields(t, 0, map[string]bool{}); err != nil {
		return nil, err
	}
	if len(c.fields) == 0 {
		return nil, fmt.Errorf("%s has no columns", t)
	}
	return c, nil
}

// addFields adds the fields of struct t, found at offset base of the row;
// an embedded struct without a parquet tag contributes its own fields, as
// in parquet-go.
func (c *rowCodec) addFields(t reflect.Type, base uintptr, seen map[string]bool) error {
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag, hasTag := sf.Tag.Lookup("parquet")
		if sf.Anonymous && !hasTag && sf.Type.Kind() == reflect.Struct {
			if err := c.addFields(sf.Type, base+sf.Offset, seen); err != nil {
				return err
			}
			continue
		}
		if !sf.IsExported() {
			continue
		}
		parts := strings.Split(tag, ",")
		name := parts[0]
		if name == "-" {
			continue
		}
		if !hasTag || name == "" {
			name = sf.Name
		}
		f := codecField{name: name, offset: base + sf.Offset}
		if err := f.parseTags(sf, parts[1:]); err != nil {
			return err
		}
		if f.kind == kindInt64List {
			c.hasList = true
		}
		if seen[name] {
			return fmt.Errorf("column %s twice", name)
		}
		seen[name] = true
		c.fields = append(c.fields, f)
	}
	return nil
}

// parseTags sets the kind, encodings, default and timestamp flag of f from
// the struct field and its parquet tag options.
func (f *codecField) parseTags(sf reflect.StructField, opts []string) error {
	list := false
	for _, opt := range opts {
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
			return fmt.Errorf("field %s: tag option %q", sf.Name, opt)
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
			return fmt.Errorf("field %s: []int64 without the list tag", sf.Name)
		}
		f.kind = kindInt64List
	default:
		return fmt.Errorf("field %s: type %s", sf.Name, sf.Type)
	}
	if list && f.kind != kindInt64List {
		return fmt.Errorf("field %s: list tag on %s", sf.Name, sf.Type)
	}
	if (f.delta && f.kind != kindInt32 && f.kind != kindInt64) || (f.split && f.kind != kindFloat64) || (f.dict && f.kind != kindString) {
		return fmt.Errorf("field %s: encoding not supported by the columnar path", sf.Name)
	}
	if ts, ok := sf.Tag.Lookup("timestamp"); ok {
		if ts != "ns" || f.kind != kindInt64 {
			return fmt.Errorf("field %s: the timestamp tag is \"ns\" on an int64 field", sf.Name)
		}
		f.timestamp = true
	}
	if d, ok := sf.Tag.Lookup("default"); ok {
		if err := f.setDefault(d); err != nil {
			return fmt.Errorf("field %s: %w", sf.Name, err)
		}
	}
	return nil
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

// EarliestInstant is the smallest known instant (a field with the
// timestamp tag, not Unknown) of rows; ok is false when there is none.
// Rows of a type the columnar codec does not handle have none.
func EarliestInstant[T any](rows []T) (earliest int64, ok bool) {
	forInstants(rows, func(p *int64) {
		if !ok || *p < earliest {
			earliest, ok = *p, true
		}
	})
	return earliest, ok
}

// ShiftInstants subtracts by from every known instant of rows, moving
// their clock's origin (Unknown stays Unknown).
func ShiftInstants[T any](rows []T, by int64) {
	forInstants(rows, func(p *int64) { *p -= by })
}

// forInstants calls f on every known instant of rows.
func forInstants[T any](rows []T, f func(*int64)) {
	c, err := codecFor(reflect.TypeFor[T]())
	if err != nil || len(rows) == 0 {
		return
	}
	base := unsafe.Pointer(unsafe.SliceData(rows))
	for i := range c.fields {
		if !c.fields[i].timestamp {
			continue
		}
		for r := range rows {
			if p := (*int64)(unsafe.Add(base, uintptr(r)*c.size+c.fields[i].offset)); *p >= 0 {
				f(p)
			}
		}
	}
}
