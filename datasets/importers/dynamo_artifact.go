package importers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/steplab/steplab/datasets"
)

// ArtifactSchemaVersion is the Dynamo self-benchmark artifact version the
// dynamo-fpm-artifact importer reads.
const ArtifactSchemaVersion = 2

// maxArtifactBytes bounds the artifact read into memory (a 64-point prefill
// plus 128x128 decode grid is a few MB).
const maxArtifactBytes = 1 << 30

// artifactPoint is one benchmark point (results[].point, skipped_points[].point).
type artifactPoint struct {
	PointType             string          `json:"point_type"`
	BenchmarkID           *int64          `json:"benchmark_id"`
	TotalPrefillTokens    *int64          `json:"total_prefill_tokens"`
	TotalKVReadTokens     *int64          `json:"total_kv_read_tokens"`
	BatchSize             *int64          `json:"batch_size"`
	ExpectedCUDAGraphMode json.RawMessage `json:"expected_cudagraph_mode"`
	ExpectedCaptureSize   *int64          `json:"expected_capture_size"`
	PaddingTokens         *int64          `json:"padding_tokens"`
	SampleReasons         []string        `json:"sample_reasons"`
}

type artifact struct {
	SchemaVersion *int            `json:"schema_version"`
	ArtifactType  string          `json:"artifact_type"`
	Status        string          `json:"status"`
	Valid         *bool           `json:"valid"`
	Usable        *bool           `json:"usable"`
	StopReason    json.RawMessage `json:"stop_reason"`
	TimingValid   *bool           `json:"timing_valid"`
	RunID         string          `json:"run_id"`
	GridDigest    string          `json:"grid_digest"`
	Timing        *struct {
		StartedAt                json.RawMessage `json:"started_at"`
		CompletedAt              json.RawMessage `json:"completed_at"`
		BenchmarkElapsedSeconds  *float64        `json:"benchmark_elapsed_seconds"`
		MeasuredIterationSeconds *float64        `json:"measured_iteration_seconds"`
	} `json:"timing"`
	DP *struct {
		Rank *int64 `json:"rank"`
		Size *int64 `json:"size"`
	} `json:"dp"`
	Coverage *struct {
		ExpectedPoints  *int64 `json:"expected_points"`
		CompletedPoints *int64 `json:"completed_points"`
		SkippedPoints   *int64 `json:"skipped_points"`
	} `json:"coverage"`
	Config map[string]json.RawMessage `json:"config"`
	Limits *struct {
		MaxNumScheduledTokens  *int64 `json:"max_num_scheduled_tokens"`
		MaxNumRunningReqs      *int64 `json:"max_num_running_reqs"`
		MaxModelLen            *int64 `json:"max_model_len"`
		BlockSize              *int64 `json:"block_size"`
		NumGPUBlocks           *int64 `json:"num_gpu_blocks"`
		ConfiguredMaxBatchSize *int64 `json:"configured_max_batch_size"`
		FeasibleMaxBatchSize   *int64 `json:"feasible_max_batch_size"`
	} `json:"limits"`
	MeasurementPolicy *struct {
		Decode  string `json:"decode"`
		Prefill string `json:"prefill"`
	} `json:"measurement_policy"`
	CUDAGraph *struct {
		Mode           json.RawMessage `json:"mode"`
		PrefillMode    json.RawMessage `json:"prefill_mode"`
		DecodeMode     json.RawMessage `json:"decode_mode"`
		MaxCaptureSize *int64          `json:"max_capture_size"`
		CaptureSizes   []int           `json:"capture_sizes"`
	} `json:"cudagraph"`
	Results []struct {
		Point *artifactPoint `json:"point"`
		FPMs  []FPM          `json:"fpms"`
	} `json:"results"`
	IterationGroups []json.RawMessage `json:"iteration_groups"`
	SkippedPoints   []struct {
		Point  *artifactPoint  `json:"point"`
		Reason json.RawMessage `json:"reason"`
	} `json:"skipped_points"`
	MissingPhases []string        `json:"missing_phases"`
	Error         json.RawMessage `json:"error"`
}

// runDynamoArtifact reads a Dynamo self-benchmark rank artifact
// (schema_version 2, written by the InstrumentedScheduler's benchmark mode)
// into the steps table: one row per FPM of results[].fpms.
//
// Each row is role "measured" (role "scaffolding" for an eager_warmup
// replica, which Dynamo runs only to warm an eager shape and discards),
// carries its point's benchmark_id and sample_reasons (joined with ","),
// the composition of scheduled_requests and the waiting queue of
// queued_requests. valid is the artifact's verdict: false, with
// invalid_reason, when the artifact is not valid / not timing_valid, when
// the FPM has no wall time, or when its composition is not the point's (the
// checks AIConfigurator's strict reader applies). Every timing field but
// wall_time_ns is Unknown.
//
// A partial or failed artifact is imported with what it has; its status,
// stop reason, error, missing phases and skipped points go into the notes.
func runDynamoArtifact(in *input, s *sink) error {
	a, err := readArtifact(in)
	if err != nil {
		return err
	}
	reason := artifactVerdict(a)
	counts, err := addArtifactSteps(in, a, reason, s)
	if err != nil {
		return err
	}
	artifactDetails(a, s)
	artifactEngine(a, s)
	artifactNotes(a, reason, counts, s)
	return nil
}

// readArtifact reads and decodes a rank artifact, refusing anything but
// schema_version ArtifactSchemaVersion of artifact_type "rank".
func readArtifact(in *input) (*artifact, error) {
	b, err := io.ReadAll(io.LimitReader(in, maxArtifactBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", in.name, err)
	}
	if len(b) > maxArtifactBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes; not a self-benchmark artifact", in.name, maxArtifactBytes)
	}
	where := func(err error) error { return locateJSONError(in.name, b, err) }
	var head struct {
		SchemaVersion json.RawMessage `json:"schema_version"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, where(err)
	}
	if isNull(head.SchemaVersion) {
		return nil, fmt.Errorf("%s: no schema_version: not a Dynamo self-benchmark artifact (want schema_version %d)", in.name, ArtifactSchemaVersion)
	}
	if string(head.SchemaVersion) != strconv.Itoa(ArtifactSchemaVersion) {
		return nil, fmt.Errorf("%s: schema_version %s is not supported: this importer reads Dynamo self-benchmark artifacts with schema_version %d (Dynamo after dynamo#7779 with the rank artifact of PR11509)",
			in.name, head.SchemaVersion, ArtifactSchemaVersion)
	}
	var a artifact
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&a); err != nil {
		return nil, where(err)
	}
	if a.ArtifactType != "" && a.ArtifactType != "rank" {
		return nil, fmt.Errorf("%s: artifact_type %q: import the per-rank artifacts (artifact_type \"rank\"), one dataset each", in.name, a.ArtifactType)
	}
	return &a, nil
}

// artifactVerdict is the invalid_reason of every row when the artifact as
// a whole is not valid or not timing_valid, "" when it is.
func artifactVerdict(a *artifact) string {
	valid := a.Valid == nil || *a.Valid
	timingValid := a.TimingValid == nil || *a.TimingValid
	switch {
	case !valid:
		if a.Status != "" {
			return "artifact_invalid:" + a.Status
		}
		return "artifact_invalid"
	case !timingValid:
		return "timing_invalid"
	}
	return ""
}

// addArtifactSteps adds one steps row per FPM of results[].fpms, judging
// each against its point (artifactReason, when set, overrides), and
// returns how many rows carry each invalid_reason.
func addArtifactSteps(in *input, a *artifact, artifactReason string, s *sink) (map[string]int, error) {
	var rank int64 = -1
	if a.DP != nil && a.DP.Rank != nil {
		rank = *a.DP.Rank
	}
	var cumWall int64
	var stepID int64
	counts := map[string]int{}
	for i, r := range a.Results {
		at := fmt.Sprintf("results[%d]", i)
		if r.Point == nil {
			return nil, fmt.Errorf("%s: %s: no point", in.name, at)
		}
		p := r.Point
		if err := p.check(); err != nil {
			return nil, fmt.Errorf("%s: %s.point: %v", in.name, at, err)
		}
		for j, f := range r.FPMs {
			fat := fmt.Sprintf("%s.fpms[%d]", at, j)
			if f.Version == 0 {
				f.Version = FPMVersion // artifacts of the first FPM schema had no version
			}
			if err := f.Validate(); err != nil {
				return nil, fmt.Errorf("%s: %s: %v", in.name, fat, err)
			}
			st := f.Step()
			st.StepID = stepID
			stepID++
			st.Role = datasets.RoleMeasured
			if p.has("eager_warmup") {
				st.Role = datasets.RoleScaffolding
			}
			st.BenchmarkID = *p.BenchmarkID
			st.SampleReason = strings.Join(p.SampleReasons, ",")
			if st.Kind == "" {
				st.Kind = p.PointType
			}
			if p.PaddingTokens != nil && *p.PaddingTokens >= 0 {
				st.PaddedTokens = *p.PaddingTokens
			}
			if p.ExpectedCaptureSize != nil && *p.ExpectedCaptureSize >= 0 {
				st.CUDAGraphSize = int32(*p.ExpectedCaptureSize)
			}
			if a.Limits != nil && a.Limits.NumGPUBlocks != nil && *a.Limits.NumGPUBlocks >= 0 {
				st.KVBlocksTotal = *a.Limits.NumGPUBlocks
			}
			reason := artifactReason
			if reason == "" {
				switch {
				case f.WallTime <= 0:
					reason = "no_wall_time"
				case f.CounterID != *p.BenchmarkID:
					reason = "counter_mismatch"
				case rank >= 0 && f.DPRank != rank:
					reason = "dp_rank_mismatch"
				default:
					reason = p.mismatch(f)
				}
			}
			st.Valid, st.InvalidReason = reason == "", reason
			counts[reason]++
			if st.WallTimeNs > 0 {
				cumWall += st.WallTimeNs
			}
			if err := s.addStep(st, cumWall); err != nil {
				return nil, err
			}
		}
	}
	return counts, nil
}

// artifactDetails records the artifact's identity, verdicts, data-parallel
// rank, timing, CUDA-graph settings and batch-size limits in the source
// details, and its start time and capture sizes in the manifest.
func artifactDetails(a *artifact, s *sink) {
	m := &s.m
	det := func(k string, v string) {
		if v != "" {
			s.detail(k, v)
		}
	}
	det("schema_version", strconv.Itoa(ArtifactSchemaVersion))
	det("artifact_type", a.ArtifactType)
	det("status", a.Status)
	det("run_id", a.RunID)
	det("grid_digest", a.GridDigest)
	if a.Valid != nil {
		det("valid", strconv.FormatBool(*a.Valid))
	}
	if a.Usable != nil {
		det("usable", strconv.FormatBool(*a.Usable))
	}
	if a.TimingValid != nil {
		det("timing_valid", strconv.FormatBool(*a.TimingValid))
	}
	det("stop_reason", rawText(a.StopReason))
	if a.DP != nil {
		if a.DP.Rank != nil {
			det("dp_rank", strconv.FormatInt(*a.DP.Rank, 10))
		}
		if a.DP.Size != nil {
			det("dp_size", strconv.FormatInt(*a.DP.Size, 10))
		}
	}
	if mode, ok := a.Config["mode"]; ok {
		det("benchmark_mode", rawText(mode))
	}
	if a.Timing != nil {
		det("started_at", rawText(a.Timing.StartedAt))
		det("completed_at", rawText(a.Timing.CompletedAt))
		if a.Timing.BenchmarkElapsedSeconds != nil {
			det("benchmark_elapsed_seconds", strconv.FormatFloat(*a.Timing.BenchmarkElapsedSeconds, 'g', -1, 64))
		}
		if a.Timing.MeasuredIterationSeconds != nil {
			det("measured_iteration_seconds", strconv.FormatFloat(*a.Timing.MeasuredIterationSeconds, 'g', -1, 64))
		}
		if t := rawText(a.Timing.StartedAt); t != "" && a.Timing.StartedAt[0] == '"' {
			m.Created = t
		}
	}
	if a.CUDAGraph != nil {
		det("cudagraph_mode", rawText(a.CUDAGraph.Mode))
		det("cudagraph_prefill_mode", rawText(a.CUDAGraph.PrefillMode))
		det("cudagraph_decode_mode", rawText(a.CUDAGraph.DecodeMode))
		if len(a.CUDAGraph.CaptureSizes) > 0 {
			m.CUDAGraphSizes = a.CUDAGraph.CaptureSizes
		}
	}
	if l := a.Limits; l != nil {
		if l.FeasibleMaxBatchSize != nil {
			det("feasible_max_batch_size", strconv.FormatInt(*l.FeasibleMaxBatchSize, 10))
		}
		if l.ConfiguredMaxBatchSize != nil {
			det("configured_max_batch_size", strconv.FormatInt(*l.ConfiguredMaxBatchSize, 10))
		}
	}
}

// artifactEngine records the engine of the artifact's limits, its
// measurement policy (the pre-steady-state one when absent, noted) and the
// workload in the manifest.
func artifactEngine(a *artifact, s *sink) {
	m := &s.m
	if l := a.Limits; l != nil {
		eng := &datasets.EngineConfig{}
		set := func(dst *int, v *int64) {
			if v != nil && *v >= 0 && *v <= math.MaxInt32 {
				*dst = int(*v)
			}
		}
		set(&eng.MaxNumSeqs, l.MaxNumRunningReqs)
		set(&eng.MaxNumBatchedTokens, l.MaxNumScheduledTokens)
		set(&eng.MaxModelLen, l.MaxModelLen)
		set(&eng.BlockSize, l.BlockSize)
		set(&eng.NumGPUBlocks, l.NumGPUBlocks)
		m.Engine = eng
		s.note("engine: from the artifact's limits (max_num_seqs = max_num_running_reqs, max_num_batched_tokens = max_num_scheduled_tokens); prefix caching, chunked prefill and async scheduling are not recorded there")
	}
	if mp := a.MeasurementPolicy; mp != nil {
		m.MeasurementPolicy = &datasets.MeasurementPolicy{Decode: mp.Decode, Prefill: mp.Prefill}
	} else {
		m.MeasurementPolicy = &datasets.MeasurementPolicy{Decode: datasets.PolicyAdmissionStep, Prefill: datasets.PolicySingleStep}
		s.note("measurement_policy absent: the artifact predates steady-state decode (dynamo#12358), so its decode rows time the admission step, which carries the whole admission payload; policy recorded as decode=admission_step, prefill=single_step")
	}
	m.Workload = &datasets.Workload{Kind: "self-benchmark", Params: map[string]string{"format": "dynamo-fpm-artifact"}}
	if mode := rawText(a.Config["mode"]); mode != "" {
		m.Workload.Params["mode"] = mode
	}
}

// artifactNotes says what a partial artifact lacks and why rows are
// invalid: status, stop reason, error, missing and skipped points.
func artifactNotes(a *artifact, artifactReason string, counts map[string]int, s *sink) {
	s.note("dynamo-fpm-artifact: one row per FPM of results[].fpms; step_id = row index; benchmark_id and sample_reason from the point; wall_time_ns from wall_time (s); other timing windows unknown (-1)")
	if a.Status != "" && a.Status != "complete" {
		s.note("artifact status %s: the benchmark did not finish; rows are what it measured before stopping", a.Status)
	}
	if sr := rawText(a.StopReason); sr != "" {
		s.note("stop_reason: %s", sr)
	}
	if e := rawText(a.Error); e != "" {
		s.note("error: %s", e)
	}
	if len(a.MissingPhases) > 0 {
		s.note("missing phases: %s", strings.Join(a.MissingPhases, ", "))
	}
	if a.Usable != nil && !*a.Usable {
		s.note("artifact marked not usable (skipped points or missing phases)")
	}
	if artifactReason != "" {
		s.note("every row invalid: %s", artifactReason)
	}
	for _, k := range sortedKeys(counts) {
		if k != "" && k != artifactReason {
			s.note("%d rows invalid: %s", counts[k], k)
		}
	}
	if c := a.Coverage; c != nil && c.ExpectedPoints != nil && c.CompletedPoints != nil {
		s.note("coverage: %d of %d points completed", *c.CompletedPoints, *c.ExpectedPoints)
	}
	for i, sp := range a.SkippedPoints {
		reason := rawText(sp.Reason)
		if reason == "" {
			reason = "no reason given"
		}
		desc := "?"
		if sp.Point != nil {
			desc = sp.Point.describe()
		}
		if i == 200 {
			s.note("... %d more skipped points", len(a.SkippedPoints)-i)
			break
		}
		s.note("skipped point %s: %s", desc, reason)
	}
	if len(a.IterationGroups) > 0 {
		s.note("%d iteration_groups (cross-rank max wall time) not imported: import each rank's artifact", len(a.IterationGroups))
	}
}

func (p *artifactPoint) check() error {
	if p.BenchmarkID == nil {
		return errors.New("no benchmark_id")
	}
	switch p.PointType {
	case datasets.KindPrefill, datasets.KindDecode:
	default:
		return fmt.Errorf("point_type %q is neither prefill nor decode", p.PointType)
	}
	for _, f := range []struct {
		name string
		v    *int64
	}{{"total_prefill_tokens", p.TotalPrefillTokens}, {"total_kv_read_tokens", p.TotalKVReadTokens}, {"batch_size", p.BatchSize}} {
		if f.v != nil && *f.v < 0 {
			return fmt.Errorf("%s: %d is negative", f.name, *f.v)
		}
	}
	return nil
}

func (p *artifactPoint) has(reason string) bool {
	for _, r := range p.SampleReasons {
		if r == reason {
			return true
		}
	}
	return false
}

// mismatch compares an FPM's composition with its point, as Dynamo's
// measured_*_mismatch skip reasons and AIConfigurator's reader do.
func (p *artifactPoint) mismatch(f FPM) string {
	s := f.Scheduled
	eq := func(v *int64, got int64) bool { return v == nil || *v == got }
	if p.PointType == datasets.KindPrefill {
		switch {
		case !eq(p.BatchSize, s.NumPrefillRequests) || s.NumDecodeRequests != 0:
			return "measured_batch_size_mismatch"
		case !eq(p.TotalPrefillTokens, s.SumPrefillTokens):
			return "measured_prefill_tokens_mismatch"
		case !eq(p.TotalKVReadTokens, s.SumPrefillKVTokens):
			return "measured_kv_read_mismatch"
		}
		return ""
	}
	switch {
	case !eq(p.BatchSize, s.NumDecodeRequests) || s.NumPrefillRequests != 0:
		return "measured_batch_size_mismatch"
	case !eq(p.TotalKVReadTokens, s.SumDecodeKVTokens):
		return "measured_decode_context_mismatch"
	}
	return ""
}

func (p *artifactPoint) describe() string {
	var b strings.Builder
	b.WriteString(p.PointType)
	if p.BenchmarkID != nil {
		fmt.Fprintf(&b, " benchmark_id=%d", *p.BenchmarkID)
	}
	for _, f := range []struct {
		name string
		v    *int64
	}{{"batch_size", p.BatchSize}, {"total_prefill_tokens", p.TotalPrefillTokens}, {"total_kv_read_tokens", p.TotalKVReadTokens}} {
		if f.v != nil {
			fmt.Fprintf(&b, " %s=%d", f.name, *f.v)
		}
	}
	if len(p.SampleReasons) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(p.SampleReasons, ","))
	}
	return b.String()
}

// rawText renders a JSON value of unknown type for a note: strings
// unquoted, null as "", anything else as compact JSON.
func rawText(raw json.RawMessage) string {
	if isNull(raw) {
		return ""
	}
	var sv string
	if json.Unmarshal(raw, &sv) == nil {
		return sv
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) == nil {
		return buf.String()
	}
	return string(raw)
}

// locateJSONError turns a JSON decoding error into "file:line:col: problem".
func locateJSONError(file string, b []byte, err error) error {
	var off int64 = -1
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		if strings.Contains(se.Error(), "unexpected end of JSON input") {
			return fmt.Errorf("%s: truncated JSON", file)
		}
		off = se.Offset - 1 // Offset counts the offending byte
	case errors.As(err, &te):
		off = te.Offset
		field := te.Field
		if field == "" {
			field = "(top level)"
		}
		err = fmt.Errorf("%s: %s where the format has %s", field, te.Value, jsonKind(te.Type))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%s: truncated JSON", file)
	}
	if off < 0 || off > int64(len(b)) {
		return fmt.Errorf("%s: %v", file, err)
	}
	line := 1 + bytes.Count(b[:off], []byte("\n"))
	col := int(off) - bytes.LastIndexByte(b[:off], '\n')
	return fmt.Errorf("%s:%d:%d: %v", file, line, col, err)
}
