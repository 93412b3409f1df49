package importers

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"github.com/steplab/steplab/internal/rewrite"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/steplab/steplab/datasets"
)

func sampleFPM(counter int64) FPM {
	return FPM{Version: 1, WorkerID: "7587891376465402128", DPRank: 1, CounterID: counter, WallTime: 0.0123456789,
		Scheduled: ScheduledRequests{NumPrefillRequests: 1, SumPrefillTokens: 2048, VarPrefillLength: 0, SumPrefillKVTokens: 512,
			NumDecodeRequests: 31, SumDecodeKVTokens: 40000, VarDecodeKVTokens: 1234.5},
		Queued: QueuedRequests{NumPrefillRequests: 3, SumPrefillTokens: 9000, VarPrefillLength: 10.25, NumDecodeRequests: 1, SumDecodeKVTokens: 700}}
}

func TestFPMRoundTrip(t *testing.T) {
	for _, f := range []FPM{sampleFPM(7), {Version: 1}, func() FPM { f := sampleFPM(1); f.TimingScope = "execute_model_cuda"; return f }()} {
		b := EncodeFPM(f)
		got, err := DecodeFPM(b)
		require.NoError(t, err)
		require.Equal(t, f, got)
	}
}

// The keyed form is what msgspec writes for a Struct by default; Dynamo's
// consumers read either, and so does DecodeFPM.
func TestDecodeFPMKeyedForm(t *testing.T) {
	b, err := msgpack.Marshal(map[string]any{
		"version": 1, "worker_id": "w", "dp_rank": 0, "counter_id": 9, "wall_time": 0.5, "observed_at_unix_ms": 123,
		"scheduled_requests": map[string]any{"num_decode_requests": 4, "sum_decode_kv_tokens": 4096, "var_decode_kv_tokens": 0.0},
		"queued_requests":    map[string]any{"num_prefill_requests": 2},
	})
	require.NoError(t, err)
	f, err := DecodeFPM(b)
	require.NoError(t, err)
	require.Equal(t, FPM{Version: 1, WorkerID: "w", CounterID: 9, WallTime: 0.5,
		Scheduled: ScheduledRequests{NumDecodeRequests: 4, SumDecodeKVTokens: 4096},
		Queued:    QueuedRequests{NumPrefillRequests: 2}}, f)
}

func TestDecodeFPMShortArrayTakesDefaults(t *testing.T) {
	// msgspec array_like decoding fills absent trailing fields with defaults.
	b, err := msgpack.Marshal([]any{1, "w", 0, 3, 0.25, []any{2, 100}})
	require.NoError(t, err)
	f, err := DecodeFPM(b)
	require.NoError(t, err)
	require.Equal(t, FPM{Version: 1, WorkerID: "w", CounterID: 3, WallTime: 0.25, Scheduled: ScheduledRequests{NumPrefillRequests: 2, SumPrefillTokens: 100}}, f)
}

func TestDecodeFPMErrors(t *testing.T) {
	enc := func(v any) []byte { b, err := msgpack.Marshal(v); require.NoError(t, err); return b }
	good := EncodeFPM(sampleFPM(1))
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "truncated message"},
		{"truncated", good[:len(good)-3], "truncated message"},
		{"trailing", append(append([]byte{}, good...), 0xc0), "1 trailing bytes after the message"},
		{"not a struct", enc(42), "not a msgpack array or map (code 0x2a)"},
		{"version", enc([]any{2, "w"}), "version 2 is not supported (this steplab reads ForwardPassMetrics version 1)"},
		{"worker type", enc([]any{1, 5}), "worker_id: not a string (msgpack code 0x05)"},
		{"negative", enc([]any{1, "w", 0, 1, 0.1, []any{-1}}), "scheduled_requests.num_prefill_requests: -1 is negative"},
		{"bad int", enc([]any{1, "w", 0, 1, 0.1, []any{1.5}}), "scheduled_requests: num_prefill_requests: 1.5 is not an integer"},
		{"nan wall", enc([]any{1, "w", 0, 1, "scope", "x"}), "wall_time: not a number"},
		{"negative wall", enc([]any{1, "w", 0, 1, -0.5}), "wall_time: -0.5 is not a duration in seconds"},
		{"negative var", enc([]any{1, "w", 0, 1, 0.5, []any{1, 1, -2.0}}), "scheduled_requests.var_prefill_length: -2 is not a finite non-negative variance"},
		{"map key", enc(map[int]any{1: 2}), "map key 0 is not a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeFPM(tt.in)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestFPMStep(t *testing.T) {
	st := sampleFPM(42).Step()
	require.Equal(t, int64(42), st.StepID)
	require.Equal(t, "mixed", st.Kind)
	require.Equal(t, "production", st.Role)
	require.Equal(t, int64(-1), st.BenchmarkID)
	require.True(t, st.Valid)
	require.Equal(t, int64(12_345_679), st.WallTimeNs, "seconds rounded to ns")
	require.Equal(t, int64(2048+31), st.TotalScheduledTokens)
	require.Equal(t, int32(4), st.NumWaiting)
	require.Equal(t, int32(1), st.DPRank)
	require.Equal(t, datasets.Unknown, st.NarrowTimeNs)
	require.Equal(t, int32(-1), st.NumRunning)
	hb := FPM{Version: 1}
	require.True(t, hb.IsHeartbeat())
	require.Equal(t, "", hb.Kind())
	require.False(t, hb.Step().Valid)
	require.Equal(t, "empty_batch", hb.Step().InvalidReason)
}

// fpmStream builds the dynamo-fpm fixture: 6 messages on two ranks with a
// heartbeat, a counter gap, a length-prefixed message and a positional one.
func fpmStream(t testing.TB) []byte {
	var out []byte
	add := func(f FPM) { out = append(out, EncodeFPM(f)...) }
	f := sampleFPM(1)
	add(f)
	f.CounterID, f.Scheduled.NumPrefillRequests, f.Scheduled.SumPrefillTokens, f.Scheduled.SumPrefillKVTokens, f.WallTime = 2, 0, 0, 0, 0.010
	add(f)
	add(FPM{Version: 1, WorkerID: f.WorkerID, DPRank: 1, CounterID: 3})  // idle heartbeat
	add(FPM{Version: 1, WorkerID: f.WorkerID, DPRank: 1, WallTime: 0.5}) // unstamped, empty: skipped
	f.CounterID, f.WallTime = 6, 0.011                                   // 4 and 5 dropped
	msg := EncodeFPM(f)
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(msg)))
	out = append(append(out, hdr[:]...), msg...)
	// msgspec's array_like form, which DecodeFPM also reads.
	pos, err := msgpack.Marshal([]any{1, f.WorkerID, 0, 1, 0.2, []any{1, 8192}})
	require.NoError(t, err)
	return append(out, pos...)
}

func TestDynamoFPMStream(t *testing.T) {
	b := fpmStream(t)
	golden, err := os.ReadFile("testdata/fpm_stream.msgpack")
	if rewrite.Requested() || os.IsNotExist(err) {
		require.NoError(t, os.WriteFile("testdata/fpm_stream.msgpack", b, 0o644))
		golden = b
	}
	require.Equal(t, b, golden, "testdata/fpm_stream.msgpack is out of date: go test ./datasets/importers -rewrite")
	rows, s, err := parseSteps("dynamo-fpm", b)
	require.NoError(t, err)
	checkSteps(t, rows)
	require.Len(t, rows, 4)
	require.Equal(t, int64(2), s.skipped)
	require.Contains(t, s.m.Notes, "1 messages with wall time but nothing scheduled skipped")
	require.Equal(t, []int64{1, 2, 6, 1}, []int64{rows[0].StepID, rows[1].StepID, rows[2].StepID, rows[3].StepID})
	require.Equal(t, []string{"mixed", "decode", "decode", "prefill"}, []string{rows[0].Kind, rows[1].Kind, rows[2].Kind, rows[3].Kind})
	require.Equal(t, int32(0), rows[3].DPRank)
	require.Equal(t, int64(8192), rows[3].SumPrefillTokens)
	require.Contains(t, s.m.Notes, "1 idle heartbeats (wall_time 0, nothing scheduled) skipped")
	require.Contains(t, s.m.Notes, "1 messages were length-prefixed")
	require.Contains(t, s.m.Notes, `counter_id gaps on worker "7587891376465402128" dp_rank 1: 1 gaps, 2 messages missing (first 3->6 at record 5); the publisher drops messages when its queue is full`)
	require.Equal(t, "6", s.m.Source.Detail["messages"])
	require.Equal(t, int64(12_345_679+10_000_000+11_000_000+200_000_000), s.last, "span = summed wall time")
}

func TestDynamoFPMStreamErrors(t *testing.T) {
	good := EncodeFPM(sampleFPM(1))
	bad, _ := msgpack.Marshal([]any{1, "w", 0, 2, 0.1, []any{1, -5}})
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"second record invalid", append(append([]byte{}, good...), bad...), fmt.Sprintf("in: record 2 (byte %d): scheduled_requests.sum_prefill_tokens: -5 is negative", len(good))},
		{"truncated", append(append([]byte{}, good...), good[:10]...), fmt.Sprintf("in: record 2 (byte %d): truncated message", len(good))},
		{"garbage", []byte{0xc1}, "in: record 1 (byte 0): not a msgpack array or map (code 0xc1)"},
		{"bad prefix", []byte{0, 0xff, 0, 0, 1}, "in: record 1 (byte 0): length prefix 16711680 is out of range"},
		{"short prefixed", []byte{0, 0, 0, 9, 0x90}, "in: record 1 (byte 0): truncated: 9-byte message announced"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := parseSteps("dynamo-fpm", tt.in)
			require.ErrorContains(t, err, tt.want)
			require.False(t, strings.Contains(err.Error(), "panic"))
		})
	}
	rows, _, err := parseSteps("dynamo-fpm", nil)
	require.NoError(t, err, "an empty stream is an empty table")
	require.Empty(t, rows)
}

// splitMsgpack cuts a stream of concatenated msgpack values into values.
func splitMsgpack(t testing.TB, b []byte) [][]byte {
	var out [][]byte
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	for {
		raw, err := dec.DecodeRaw()
		if err != nil {
			require.ErrorIs(t, err, io.EOF)
			return out
		}
		out = append(out, raw)
	}
}

// The fixture holds payloads written the way Dynamo's publisher writes them
// (testdata/dynamo_fpm_publisher.py mirrors its msgspec Structs). Each
// decodes to the values the script put in, and EncodeFPM reproduces every
// message of the current schema byte for byte.
func TestDynamoPublisherBytes(t *testing.T) {
	b, err := os.ReadFile("testdata/dynamo_fpm_publisher.msgpack")
	require.NoError(t, err)
	msgs := splitMsgpack(t, b)
	require.Len(t, msgs, 8)
	w := "7587891376465402128"
	want := []FPM{
		{Version: 1, WorkerID: w, CounterID: 0, WallTime: 0.0183,
			Scheduled: ScheduledRequests{NumPrefillRequests: 1, SumPrefillTokens: 2048},
			Queued:    QueuedRequests{NumPrefillRequests: 2, SumPrefillTokens: 3100, VarPrefillLength: 2500}},
		{Version: 1, WorkerID: w, CounterID: 1, WallTime: 0.0241,
			Scheduled: ScheduledRequests{NumPrefillRequests: 2, SumPrefillTokens: 1500, VarPrefillLength: 90000.25, SumPrefillKVTokens: 2048,
				NumDecodeRequests: 1, SumDecodeKVTokens: 2300}},
		{Version: 1, WorkerID: w, CounterID: 2, WallTime: 0.0112,
			Scheduled: ScheduledRequests{NumDecodeRequests: 3, SumDecodeKVTokens: 6120, VarDecodeKVTokens: 160000.5}},
		{Version: 1, WorkerID: w, DPRank: 1, WallTime: 0.0095,
			Scheduled: ScheduledRequests{NumDecodeRequests: 40, SumDecodeKVTokens: 65536, VarDecodeKVTokens: 1.5e6},
			Queued:    QueuedRequests{NumDecodeRequests: 1, SumDecodeKVTokens: 900}},
		{Version: 1, WorkerID: w, CounterID: 3},
		{Version: 1, WorkerID: w, CounterID: 5, WallTime: 0.0131,
			Scheduled: ScheduledRequests{NumPrefillRequests: 1, SumPrefillTokens: 300, NumDecodeRequests: 2, SumDecodeKVTokens: 4100, VarDecodeKVTokens: 4}},
		{Version: 1, WorkerID: w, DPRank: 2, WallTime: 0.0201, Scheduled: ScheduledRequests{NumPrefillRequests: 1, SumPrefillTokens: 512}},
		{Version: 1, WorkerID: strings.Repeat("w", 300), WallTime: 0.5,
			Scheduled: ScheduledRequests{NumDecodeRequests: 70000, SumDecodeKVTokens: 5_000_000_000}},
	}
	for i, m := range msgs {
		require.Equal(t, byte(0x80), m[0]&0xf0, "message %d: Dynamo sends a map (fixmap), not an array", i)
		f, err := DecodeFPM(m)
		require.NoError(t, err, "message %d", i)
		require.Equal(t, want[i], f, "message %d", i)
		if i == 6 {
			require.Equal(t, byte(0x85), m[0], "the pre-#7501 schema has 5 fields")
			continue
		}
		require.Equal(t, m, EncodeFPM(f), "message %d: EncodeFPM differs from Dynamo's bytes", i)
	}

	rows, s, err := parseSteps("dynamo-fpm", b)
	require.NoError(t, err)
	checkSteps(t, rows)
	require.Len(t, rows, 7)
	require.Equal(t, int64(1), s.skipped, "the heartbeat")
	require.Contains(t, s.m.Notes, `counter_id gaps on worker "7587891376465402128" dp_rank 0: 1 gaps, 1 messages missing (first 3->5 at record 6); the publisher drops messages when its queue is full`)
	require.Equal(t, []string{"prefill", "mixed", "decode", "decode", "mixed", "prefill", "decode"},
		[]string{rows[0].Kind, rows[1].Kind, rows[2].Kind, rows[3].Kind, rows[4].Kind, rows[5].Kind, rows[6].Kind})
	require.Equal(t, int32(2), rows[0].NumWaiting, "queued prefill requests")
	require.Equal(t, int64(18_300_000), rows[0].WallTimeNs)
	require.Equal(t, []int64{0, 1, 2, 0, 5, 0, 0}, []int64{rows[0].StepID, rows[1].StepID, rows[2].StepID, rows[3].StepID,
		rows[4].StepID, rows[5].StepID, rows[6].StepID}, "step_id = counter_id")
	require.Equal(t, []int32{0, 0, 0, 1, 0, 2, 0}, []int32{rows[0].DPRank, rows[1].DPRank, rows[2].DPRank, rows[3].DPRank,
		rows[4].DPRank, rows[5].DPRank, rows[6].DPRank})
}
