package importers

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"github.com/steplab/steplab/datasets"
)

// FPMVersion is the ForwardPassMetrics schema version this package reads.
const FPMVersion = 1

// FPM is one Dynamo ForwardPassMetrics message (schema version 1), as
// defined by ai-dynamo/dynamo components/src/dynamo/common/forward_pass_metrics.py
// (read at 2712426f; version and counter_id since dynamo #7501, 17abc9de).
// The JSON names are Dynamo's, so the same type reads the "fpms" of a
// self-benchmark artifact.
type FPM struct {
	Version   int64  `json:"version"`
	WorkerID  string `json:"worker_id"`
	DPRank    int64  `json:"dp_rank"`
	CounterID int64  `json:"counter_id"`
	// TimingScope is set only by vLLM's proposed native publisher
	// (vllm-project/vllm#52061, "execute_model_cuda"), where it sits between
	// counter_id and wall_time.
	TimingScope string `json:"timing_scope,omitempty"`
	// WallTime is the iteration time in seconds; 0 for an idle heartbeat.
	WallTime  float64           `json:"wall_time"`
	Scheduled ScheduledRequests `json:"scheduled_requests"`
	Queued    QueuedRequests    `json:"queued_requests"`
}

// ScheduledRequests is FPM.scheduled_requests, in Dynamo's field order.
type ScheduledRequests struct {
	NumPrefillRequests int64   `json:"num_prefill_requests"`
	SumPrefillTokens   int64   `json:"sum_prefill_tokens"`
	VarPrefillLength   float64 `json:"var_prefill_length"`
	SumPrefillKVTokens int64   `json:"sum_prefill_kv_tokens"`
	NumDecodeRequests  int64   `json:"num_decode_requests"`
	SumDecodeKVTokens  int64   `json:"sum_decode_kv_tokens"`
	VarDecodeKVTokens  float64 `json:"var_decode_kv_tokens"`
}

// QueuedRequests is FPM.queued_requests, in Dynamo's field order (no
// sum_prefill_kv_tokens: prefix hits are unknown before scheduling).
type QueuedRequests struct {
	NumPrefillRequests int64   `json:"num_prefill_requests"`
	SumPrefillTokens   int64   `json:"sum_prefill_tokens"`
	VarPrefillLength   float64 `json:"var_prefill_length"`
	NumDecodeRequests  int64   `json:"num_decode_requests"`
	SumDecodeKVTokens  int64   `json:"sum_decode_kv_tokens"`
	VarDecodeKVTokens  float64 `json:"var_decode_kv_tokens"`
}

// IsHeartbeat reports an idle heartbeat: no wall time and nothing scheduled.
func (f FPM) IsHeartbeat() bool { return f.WallTime == 0 && f.IsEmpty() }

// IsEmpty reports a message with nothing scheduled (a heartbeat, or an
// empty batch, which Dynamo does not publish).
func (f FPM) IsEmpty() bool {
	return f.Scheduled.NumPrefillRequests == 0 && f.Scheduled.NumDecodeRequests == 0
}

// Kind classifies the step by what was scheduled: prefill, decode or mixed;
// "" when nothing was.
func (f FPM) Kind() string {
	p, d := f.Scheduled.NumPrefillRequests > 0, f.Scheduled.NumDecodeRequests > 0
	switch {
	case p && d:
		return datasets.KindMixed
	case p:
		return datasets.KindPrefill
	case d:
		return datasets.KindDecode
	}
	return ""
}

// Validate checks the ranges a well-formed message has: version 1,
// non-negative counts that fit the steps table, finite non-negative
// variances and wall time.
func (f FPM) Validate() error {
	if f.Version != FPMVersion {
		return fmt.Errorf("version %d is not supported (this steplab reads ForwardPassMetrics version %d)", f.Version, FPMVersion)
	}
	if !finiteNonNeg(f.WallTime) || f.WallTime > 1e6 {
		return fmt.Errorf("wall_time: %v is not a duration in seconds", f.WallTime)
	}
	if f.DPRank < 0 || f.DPRank > math.MaxInt32 {
		return fmt.Errorf("dp_rank: %d is out of range", f.DPRank)
	}
	if f.CounterID < 0 {
		return fmt.Errorf("counter_id: %d is negative", f.CounterID)
	}
	s, q := f.Scheduled, f.Queued
	for _, c := range []struct {
		name  string
		v     int64
		small bool // a request count: must fit int32
	}{
		{"scheduled_requests.num_prefill_requests", s.NumPrefillRequests, true},
		{"scheduled_requests.sum_prefill_tokens", s.SumPrefillTokens, false},
		{"scheduled_requests.sum_prefill_kv_tokens", s.SumPrefillKVTokens, false},
		{"scheduled_requests.num_decode_requests", s.NumDecodeRequests, true},
		{"scheduled_requests.sum_decode_kv_tokens", s.SumDecodeKVTokens, false},
		{"queued_requests.num_prefill_requests", q.NumPrefillRequests, true},
		{"queued_requests.sum_prefill_tokens", q.SumPrefillTokens, false},
		{"queued_requests.num_decode_requests", q.NumDecodeRequests, true},
		{"queued_requests.sum_decode_kv_tokens", q.SumDecodeKVTokens, false},
	} {
		if c.v < 0 {
			return fmt.Errorf("%s: %d is negative", c.name, c.v)
		}
		if (c.small && c.v > math.MaxInt32/2) || c.v > math.MaxInt64/4 {
			return fmt.Errorf("%s: %d is out of range", c.name, c.v)
		}
	}
	for _, c := range []struct {
		name string
		v    float64
	}{
		{"scheduled_requests.var_prefill_length", s.VarPrefillLength},
		{"scheduled_requests.var_decode_kv_tokens", s.VarDecodeKVTokens},
		{"queued_requests.var_prefill_length", q.VarPrefillLength},
		{"queued_requests.var_decode_kv_tokens", q.VarDecodeKVTokens},
	} {
		if !finiteNonNeg(c.v) {
			return fmt.Errorf("%s: %v is not a finite non-negative variance", c.name, c.v)
		}
	}
	return nil
}

func finiteNonNeg(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 }

// Step converts the message to a steps row: identity, kind, composition,
// wall time and waiting queue. It is a production step (role production,
// benchmark_id -1, valid unless it has no wall time or nothing scheduled,
// when kind is ""); step_id is counter_id.
// Fields an FPM does not carry (the §4 timing windows, payload sizes,
// new/cached/finished counts, running requests, KV blocks, the longest
// decode context, prefill attention pairs, new-request tokens, CUDA-graph
// size) are datasets.Unknown. total_scheduled_tokens assumes one token per decode
// request (no speculative decoding).
func (f FPM) Step() datasets.Step {
	u, u32 := datasets.Unknown, int32(datasets.Unknown)
	wall, ok := secondsToNs(f.WallTime)
	if !ok {
		wall = u
	}
	s := f.Scheduled
	st := datasets.Step{
		StepID:      f.CounterID,
		WorkerID:    f.WorkerID,
		DPRank:      int32(f.DPRank),
		Kind:        f.Kind(),
		Role:        datasets.RoleProduction,
		BenchmarkID: -1,
		Valid:       f.WallTime > 0,

		NumNewReqs: u32, NumCachedReqs: u32, NumResumedReqs: u32, NumPreempted: u32, NumFinished: u32,
		NumPrefillRequests:   int32(s.NumPrefillRequests),
		SumPrefillTokens:     s.SumPrefillTokens,
		VarPrefillLength:     s.VarPrefillLength,
		SumPrefillKVTokens:   s.SumPrefillKVTokens,
		NumDecodeRequests:    int32(s.NumDecodeRequests),
		SumDecodeKVTokens:    s.SumDecodeKVTokens,
		VarDecodeKVTokens:    s.VarDecodeKVTokens,
		TotalScheduledTokens: s.SumPrefillTokens + s.NumDecodeRequests,
		PaddedTokens:         u,
		MaxDecodeKVTokens:    u, SumPrefillAttn: float64(u), NewReqTokens: u, CUDAGraphSize: u32,

		PayloadBytes: u, PayloadNewBytes: u, PayloadCachedBytes: u,

		TScheduleStart: u, TScheduleEnd: u, TDispatch: u, TOutput: u, TUpdateEnd: u,
		WallTimeNs:   wall,
		NarrowTimeNs: u, GPUTimeNs: u, HostPrepNs: u, WorkerRecvNs: u, SampleNs: u,

		NumWaiting:    int32(f.Queued.NumPrefillRequests + f.Queued.NumDecodeRequests),
		NumRunning:    u32,
		KVBlocksUsed:  u,
		KVBlocksTotal: u,
	}
	switch {
	case f.IsEmpty():
		st.Valid, st.InvalidReason = false, "empty_batch"
	case !st.Valid:
		st.InvalidReason = "no_wall_time"
	}
	return st
}

// DecodeFPM decodes one msgpack ForwardPassMetrics message (the last frame
// of a message on Dynamo's FPM ZMQ socket). Dynamo sends the keyed
// encoding (each struct a map from field name: msgspec's default for a
// Struct, see EncodeFPM); unknown keys are ignored and absent ones take
// Dynamo's defaults, so a publisher from before dynamo #7501 (no version,
// no counter_id) reads as version 1 with counter_id 0. The positional
// encoding (each struct an array in field order, msgspec's array_like
// form; absent trailing fields take their defaults) is accepted too. The
// message is validated (see FPM.Validate); trailing bytes are an error.
func DecodeFPM(b []byte) (FPM, error) {
	r := bytes.NewReader(b)
	dec := msgpack.NewDecoder(r)
	f, err := decodeFPM(dec)
	if err != nil {
		return FPM{}, err
	}
	if r.Len() > 0 {
		return FPM{}, fmt.Errorf("%d trailing bytes after the message", r.Len())
	}
	return f, f.Validate()
}

// EncodeFPM encodes f as Dynamo's publisher does: msgspec encodes each
// Struct (ForwardPassMetrics, ScheduledRequestMetrics,
// QueuedRequestMetrics; none is array_like) as a msgpack map of every field
// in declaration order, ints in their smallest form, floats as float64 and
// strings as str. The bytes are identical to Dynamo's for the same values
// (testdata/dynamo_fpm_publisher.msgpack, written by the script beside it,
// checks this). TimingScope is written only when set, between counter_id
// and wall_time, where vLLM's native publisher declares it.
func EncodeFPM(f FPM) []byte {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	// Writes to a bytes.Buffer cannot fail.
	key := func(k string) { _ = enc.EncodeString(k) }
	n := 7
	if f.TimingScope != "" {
		n = 8
	}
	_ = enc.EncodeMapLen(n)
	key("version")
	_ = enc.EncodeInt(f.Version)
	key("worker_id")
	_ = enc.EncodeString(f.WorkerID)
	key("dp_rank")
	_ = enc.EncodeInt(f.DPRank)
	key("counter_id")
	_ = enc.EncodeInt(f.CounterID)
	if f.TimingScope != "" {
		key("timing_scope")
		_ = enc.EncodeString(f.TimingScope)
	}
	key("wall_time")
	_ = enc.EncodeFloat64(f.WallTime)
	s := f.Scheduled
	key("scheduled_requests")
	_ = enc.EncodeMapLen(7)
	key("num_prefill_requests")
	_ = enc.EncodeInt(s.NumPrefillRequests)
	key("sum_prefill_tokens")
	_ = enc.EncodeInt(s.SumPrefillTokens)
	key("var_prefill_length")
	_ = enc.EncodeFloat64(s.VarPrefillLength)
	key("sum_prefill_kv_tokens")
	_ = enc.EncodeInt(s.SumPrefillKVTokens)
	key("num_decode_requests")
	_ = enc.EncodeInt(s.NumDecodeRequests)
	key("sum_decode_kv_tokens")
	_ = enc.EncodeInt(s.SumDecodeKVTokens)
	key("var_decode_kv_tokens")
	_ = enc.EncodeFloat64(s.VarDecodeKVTokens)
	q := f.Queued
	key("queued_requests")
	_ = enc.EncodeMapLen(6)
	key("num_prefill_requests")
	_ = enc.EncodeInt(q.NumPrefillRequests)
	key("sum_prefill_tokens")
	_ = enc.EncodeInt(q.SumPrefillTokens)
	key("var_prefill_length")
	_ = enc.EncodeFloat64(q.VarPrefillLength)
	key("num_decode_requests")
	_ = enc.EncodeInt(q.NumDecodeRequests)
	key("sum_decode_kv_tokens")
	_ = enc.EncodeInt(q.SumDecodeKVTokens)
	key("var_decode_kv_tokens")
	_ = enc.EncodeFloat64(q.VarDecodeKVTokens)
	return buf.Bytes()
}

// fieldDecoder decodes one field of a struct into its destination.
type fieldDecoder struct {
	name string
	dec  func(d *msgpack.Decoder) error
	// optional: in the positional form, present only when the element at
	// its position is a string; otherwise the next field takes the position.
	optional bool
}

func intField(name string, dst *int64) fieldDecoder {
	return fieldDecoder{name: name, dec: func(d *msgpack.Decoder) error {
		c, err := d.PeekCode()
		if err != nil {
			return err
		}
		if c == msgpcode.Float || c == msgpcode.Double {
			v, err := d.DecodeFloat64()
			if err != nil {
				return err
			}
			if v != math.Trunc(v) || math.Abs(v) > 1<<62 {
				return fmt.Errorf("%v is not an integer", v)
			}
			*dst = int64(v)
			return nil
		}
		v, err := d.DecodeInt64()
		if err != nil {
			if isEOF(err) {
				return err
			}
			return fmt.Errorf("not an integer (msgpack code 0x%02x)", c)
		}
		if c == msgpcode.Uint64 && v < 0 {
			return fmt.Errorf("%d does not fit int64", uint64(v))
		}
		*dst = v
		return nil
	}}
}

func floatField(name string, dst *float64) fieldDecoder {
	return fieldDecoder{name: name, dec: func(d *msgpack.Decoder) error {
		c, err := d.PeekCode()
		if err != nil {
			return err
		}
		v, err := d.DecodeFloat64()
		if err != nil {
			if isEOF(err) {
				return err
			}
			return fmt.Errorf("not a number (msgpack code 0x%02x)", c)
		}
		*dst = v
		return nil
	}}
}

func stringField(name string, dst *string) fieldDecoder {
	return fieldDecoder{name: name, dec: func(d *msgpack.Decoder) error {
		c, err := d.PeekCode()
		if err != nil {
			return err
		}
		if c == msgpcode.Nil {
			_ = d.Skip()
			*dst = ""
			return nil
		}
		if !msgpcode.IsString(c) {
			return fmt.Errorf("not a string (msgpack code 0x%02x)", c)
		}
		v, err := d.DecodeString()
		if err != nil {
			return err
		}
		*dst = v
		return nil
	}}
}

func structField(name string, fields []fieldDecoder) fieldDecoder {
	return fieldDecoder{name: name, dec: func(d *msgpack.Decoder) error { return decodeStruct(d, fields) }}
}

// decodeStruct reads a msgpack array (positional) or map (keyed) into fields.
func decodeStruct(d *msgpack.Decoder, fields []fieldDecoder) error {
	c, err := d.PeekCode()
	if err != nil {
		return err
	}
	switch {
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		n, err := d.DecodeArrayLen()
		if err != nil {
			return err
		}
		fi := 0
		for i := 0; i < n; i++ {
			if fi < len(fields) && fields[fi].optional {
				c, err := d.PeekCode()
				if err != nil {
					return err
				}
				if !msgpcode.IsString(c) {
					fi++
				}
			}
			if fi >= len(fields) {
				if err := d.Skip(); err != nil {
					return fmt.Errorf("extra element %d: %w", i, err)
				}
				continue
			}
			if err := fields[fi].dec(d); err != nil {
				return fmt.Errorf("%s: %w", fields[fi].name, err)
			}
			fi++
		}
		return nil
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		n, err := d.DecodeMapLen()
		if err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			kc, err := d.PeekCode()
			if err != nil {
				return err
			}
			if !msgpcode.IsString(kc) {
				return fmt.Errorf("map key %d is not a string", i)
			}
			k, err := d.DecodeString()
			if err != nil {
				return err
			}
			found := false
			for _, f := range fields {
				if f.name == k {
					found = true
					if err := f.dec(d); err != nil {
						return fmt.Errorf("%s: %w", k, err)
					}
					break
				}
			}
			if !found {
				if err := d.Skip(); err != nil {
					return fmt.Errorf("%s: %w", k, err)
				}
			}
		}
		return nil
	}
	return fmt.Errorf("not a msgpack array or map (code 0x%02x)", c)
}

func decodeFPM(d *msgpack.Decoder) (FPM, error) {
	var f FPM
	s, q := &f.Scheduled, &f.Queued
	sched := structField("scheduled_requests", []fieldDecoder{
		intField("num_prefill_requests", &s.NumPrefillRequests),
		intField("sum_prefill_tokens", &s.SumPrefillTokens),
		floatField("var_prefill_length", &s.VarPrefillLength),
		intField("sum_prefill_kv_tokens", &s.SumPrefillKVTokens),
		intField("num_decode_requests", &s.NumDecodeRequests),
		intField("sum_decode_kv_tokens", &s.SumDecodeKVTokens),
		floatField("var_decode_kv_tokens", &s.VarDecodeKVTokens),
	})
	queued := structField("queued_requests", []fieldDecoder{
		intField("num_prefill_requests", &q.NumPrefillRequests),
		intField("sum_prefill_tokens", &q.SumPrefillTokens),
		floatField("var_prefill_length", &q.VarPrefillLength),
		intField("num_decode_requests", &q.NumDecodeRequests),
		intField("sum_decode_kv_tokens", &q.SumDecodeKVTokens),
		floatField("var_decode_kv_tokens", &q.VarDecodeKVTokens),
	})
	// vLLM's native publisher inserts timing_scope (a string) between
	// counter_id and wall_time; in the positional form it is recognised by
	// its type (optional), in the keyed form by its name.
	scope := stringField("timing_scope", &f.TimingScope)
	scope.optional = true
	fields := []fieldDecoder{
		intField("version", &f.Version),
		stringField("worker_id", &f.WorkerID),
		intField("dp_rank", &f.DPRank),
		intField("counter_id", &f.CounterID),
		scope,
		floatField("wall_time", &f.WallTime),
		sched,
		queued,
	}
	f.Version = FPMVersion
	if err := decodeStruct(d, fields); err != nil {
		if isEOF(err) {
			return FPM{}, fmt.Errorf("truncated message (%v)", err)
		}
		return FPM{}, err
	}
	return f, nil
}

func isEOF(err error) bool { return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) }

// maxPrefixedMessage bounds a length-prefixed message (a real FPM is about
// 100 bytes).
const maxPrefixedMessage = 1 << 20

// runDynamoFPM reads a file of ForwardPassMetrics messages: msgpack values
// concatenated back to back, as a subscriber would append them. A message
// may instead be preceded by a 4-byte big-endian length (a record cannot
// start with byte 0x00, so the two framings are told apart per message).
// Idle heartbeats are counted and skipped; counter_id gaps and restarts
// per (worker_id, dp_rank) are recorded in the manifest notes.
func runDynamoFPM(in *input, s *sink) error {
	br := bufio.NewReaderSize(in, 1<<16)
	dec := msgpack.NewDecoder(br)
	type key struct {
		worker string
		rank   int64
	}
	type gapStat struct {
		gaps, missing, restarts int64
		first                   string
	}
	last := map[key]int64{}
	gaps := map[key]*gapStat{}
	var keys []key
	var heartbeats, empty, cumWall int64
	prefixed := 0
	for rec := 1; ; rec++ {
		offset := in.n - int64(br.Buffered())
		c, err := br.Peek(1)
		if err == io.EOF || (err == nil && len(c) == 0) {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: record %d (byte %d): %v", in.name, rec, offset, err)
		}
		var f FPM
		if c[0] == 0x00 {
			var hdr [4]byte
			if _, err := io.ReadFull(br, hdr[:]); err != nil {
				return fmt.Errorf("%s: record %d (byte %d): truncated length prefix", in.name, rec, offset)
			}
			n := binary.BigEndian.Uint32(hdr[:])
			if n == 0 || n > maxPrefixedMessage {
				return fmt.Errorf("%s: record %d (byte %d): length prefix %d is out of range (1..%d)", in.name, rec, offset, n, maxPrefixedMessage)
			}
			msg := make([]byte, n)
			if _, err := io.ReadFull(br, msg); err != nil {
				return fmt.Errorf("%s: record %d (byte %d): truncated: %d-byte message announced", in.name, rec, offset, n)
			}
			if f, err = DecodeFPM(msg); err != nil {
				return fmt.Errorf("%s: record %d (byte %d): %v", in.name, rec, offset, err)
			}
			prefixed++
		} else {
			if f, err = decodeFPM(dec); err != nil {
				return fmt.Errorf("%s: record %d (byte %d): %v", in.name, rec, offset, err)
			}
			if err := f.Validate(); err != nil {
				return fmt.Errorf("%s: record %d (byte %d): %v", in.name, rec, offset, err)
			}
		}
		k := key{f.WorkerID, f.DPRank}
		if f.CounterID > 0 {
			if prev, ok := last[k]; ok {
				g := gaps[k]
				if g == nil {
					g = &gapStat{}
					gaps[k] = g
					keys = append(keys, k)
				}
				switch {
				case f.CounterID > prev+1:
					g.gaps++
					g.missing += f.CounterID - prev - 1
					if g.first == "" {
						g.first = fmt.Sprintf("%d->%d at record %d", prev, f.CounterID, rec)
					}
				case f.CounterID <= prev:
					g.restarts++
				}
			}
			last[k] = f.CounterID
		}
		if f.IsHeartbeat() {
			heartbeats++
			s.skipped++
			continue
		}
		if f.IsEmpty() {
			empty++
			s.skipped++
			continue
		}
		st := f.Step()
		if st.WallTimeNs > 0 {
			cumWall += st.WallTimeNs
		}
		if err := s.addStep(st, cumWall); err != nil {
			return err
		}
	}
	s.note("dynamo-fpm: one row per ForwardPassMetrics message; step_id = counter_id; wall_time_ns from wall_time (s); other timing windows unknown (-1); num_waiting = queued prefill + queued decode requests")
	if heartbeats > 0 {
		s.note("%d idle heartbeats (wall_time 0, nothing scheduled) skipped", heartbeats)
	}
	if empty > 0 {
		s.note("%d messages with wall time but nothing scheduled skipped", empty)
	}
	if prefixed > 0 {
		s.note("%d messages were length-prefixed", prefixed)
	}
	for _, k := range keys {
		g := gaps[k]
		if g.gaps > 0 {
			s.note("counter_id gaps on worker %q dp_rank %d: %d gaps, %d messages missing (first %s); the publisher drops messages when its queue is full", k.worker, k.rank, g.gaps, g.missing, g.first)
		}
		if g.restarts > 0 {
			s.note("counter_id went backwards %d times on worker %q dp_rank %d (publisher restarted?)", g.restarts, k.worker, k.rank)
		}
	}
	s.detail("messages", strconv.FormatInt(s.rows+heartbeats+empty, 10))
	s.detail("heartbeats", strconv.FormatInt(heartbeats, 10))
	return nil
}
