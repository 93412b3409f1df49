package validate

import (
	"errors"
	"io"
	"path/filepath"

	"github.com/steplab/steplab/datasets"
)

// The row types below are the columns validate checks. They mirror the
// schema structs of package datasets, split so that a column the data
// contract as first written (docs/architecture.md#data-contract) did not list (worker_recv_ns, sample_ns,
// is_resumed: added by later writers) may be absent: such a table is read
// without it and the checks that need it are skipped with a warning.
// Columns validate does not know (prefix_hash_ids, extra pandas columns) are
// never read.

type stepBase struct {
	StepID   int64  `parquet:"step_id"`
	WorkerID string `parquet:"worker_id"`
	DPRank   int32  `parquet:"dp_rank"`

	Kind          string `parquet:"kind"`
	Role          string `parquet:"role"`
	BenchmarkID   int64  `parquet:"benchmark_id"`
	SampleReason  string `parquet:"sample_reason"`
	Valid         bool   `parquet:"valid"`
	InvalidReason string `parquet:"invalid_reason"`

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

	TScheduleStart int64 `parquet:"t_schedule_start"`
	TScheduleEnd   int64 `parquet:"t_schedule_end"`
	TDispatch      int64 `parquet:"t_dispatch"`
	TOutput        int64 `parquet:"t_output"`
	TUpdateEnd     int64 `parquet:"t_update_end"`
	WallTimeNs     int64 `parquet:"wall_time_ns"`
	NarrowTimeNs   int64 `parquet:"narrow_time_ns"`
	GPUTimeNs      int64 `parquet:"gpu_time_ns"`
	HostPrepNs     int64 `parquet:"host_prep_ns"`
	Overlapped     bool  `parquet:"overlapped"`

	NumWaiting    int32 `parquet:"num_waiting"`
	NumRunning    int32 `parquet:"num_running"`
	KVBlocksUsed  int64 `parquet:"kv_blocks_used"`
	KVBlocksTotal int64 `parquet:"kv_blocks_total"`
}

type stepExtra struct {
	WorkerRecvNs int64 `parquet:"worker_recv_ns"`
	SampleNs     int64 `parquet:"sample_ns"`
}

type stepFull struct {
	stepBase
	stepExtra
}

type stepRequestBase struct {
	StepID             int64  `parquet:"step_id"`
	ReqID              string `parquet:"req_id"`
	IsNew              bool   `parquet:"is_new"`
	IsPrefill          bool   `parquet:"is_prefill"`
	NumScheduledTokens int64  `parquet:"num_scheduled_tokens"`
	NumComputedTokens  int64  `parquet:"num_computed_tokens"`
	PromptLen          int64  `parquet:"prompt_len"`
	PayloadBytes       int64  `parquet:"payload_bytes"`
}

type stepRequestExtra struct {
	IsResumed bool `parquet:"is_resumed"`
}

type stepRequestFull struct {
	stepRequestBase
	stepRequestExtra
}

type requestRow struct {
	ReqID            string `parquet:"req_id"`
	ArrivalNs        int64  `parquet:"arrival_ns"`
	PromptTokens     int64  `parquet:"prompt_tokens"`
	OutputTokens     int64  `parquet:"output_tokens"`
	FirstScheduledNs int64  `parquet:"first_scheduled_ns"`
	FirstTokenNs     int64  `parquet:"first_token_ns"`
	FinishNs         int64  `parquet:"finish_ns"`
	NumPreemptions   int32  `parquet:"num_preemptions"`
	Status           string `parquet:"status"`
}

// stream reads a table part by part as rows of R, converted to F, and knows
// the 0-based row index across parts and the part file of the row it
// returned last. Memory: one buffer of rows.
type stream[R, F any] struct {
	dir   string
	parts []string
	rel   []string // parts relative to dir
	conv  func(*R, *F)

	pi   int
	sc   *datasets.Scanner[R]
	buf  []R
	n, i int

	next int64 // index of the next row
	cur  F
	row  int64
	part string
	err  error
	// errPart is the part being read when err happened.
	errPart string
}

const streamBuf = 1024

func newStream[R, F any](dir string, parts []string, conv func(*R, *F)) *stream[R, F] {
	rel := make([]string, len(parts))
	for i, p := range parts {
		rel[i] = relPart(dir, p)
	}
	return &stream[R, F]{dir: dir, parts: parts, rel: rel, conv: conv, buf: make([]R, streamBuf), row: -1}
}

// Next returns the next row, or nil at the end or on error (see err).
func (s *stream[R, F]) Next() *F {
	for s.i >= s.n {
		if s.err != nil {
			return nil
		}
		if s.sc == nil {
			if s.pi >= len(s.parts) {
				return nil
			}
			s.sc = datasets.ScanFiles[R]([]string{s.parts[s.pi]})
			s.pi++
		}
		n, err := s.sc.Read(s.buf)
		s.n, s.i = n, 0
		if err != nil {
			s.sc.Close()
			s.sc = nil
			if !errors.Is(err, io.EOF) {
				s.err = err
				s.errPart = s.rel[s.pi-1]
				s.n = 0
				return nil
			}
		}
	}
	s.conv(&s.buf[s.i], &s.cur)
	s.i++
	s.row = s.next
	s.next++
	s.part = s.rel[s.pi-1]
	return &s.cur
}

func (s *stream[R, F]) Close() {
	if s.sc != nil {
		s.sc.Close()
		s.sc = nil
	}
}

func relPart(dir, path string) string {
	if rel, err := filepath.Rel(dir, path); err == nil {
		return filepath.ToSlash(rel)
	}
	return path
}
