package validate

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/steplab/steplab/datasets"
	"github.com/stretchr/testify/require"
)

// FuzzValidate writes a steps-only dataset whose second step takes
// fuzz-chosen values, and checks that validate does not panic, reports each
// invariant the oracle below sees broken on the field it names, and reports
// no error when the oracle sees none.
//
//	go test ./datasets/validate -run '^$' -fuzz FuzzValidate -fuzztime 30s
func FuzzValidate(f *testing.F) {
	f.Add(int64(3000), int64(3100), int64(3200), int64(4000), int64(4100), int64(1000), int64(1000), uint8(1), int32(0), int32(4), 0.0, false)
	f.Add(int64(1500), int64(1600), int64(2150), int64(3000), int64(3100), int64(900), int64(1500), uint8(1), int32(0), int32(2), 1.5, true)
	f.Add(int64(-1), int64(-1), int64(-1), int64(-1), int64(-1), int64(-1), int64(-1), uint8(0), int32(3), int32(0), 0.0, false)
	f.Add(int64(5), int64(4), int64(-7), int64(3), int64(2), int64(-2), int64(9), uint8(7), int32(-3), int32(0), math.NaN(), true)
	f.Add(int64(2500), int64(2600), int64(2700), int64(2650), int64(2800), int64(150), int64(150), uint8(2), int32(1), int32(1), math.Inf(1), false)
	f.Add(int64(3000), int64(3100), int64(3200), int64(4000), int64(4100), int64(1000), int64(1000), uint8(1), int32(0), int32(4), -1.0, false)
	f.Fuzz(func(t *testing.T, tss, tse, td, to, tue, wall, narrow int64, kindIdx uint8, nPrefill, nDecode int32, variance float64, overlapped bool) {
		kinds := []string{datasets.KindPrefill, datasets.KindDecode, datasets.KindMixed, "", "decode "}
		kind := kinds[int(kindIdx)%len(kinds)]
		// Step 0 is fixed and consistent: update ends at 2100.
		s0 := datasets.Step{StepID: 0, WorkerID: "w", Kind: datasets.KindPrefill, Role: datasets.RoleMeasured, BenchmarkID: -1, Valid: true,
			NumPrefillRequests: 1, TScheduleStart: 1000, TScheduleEnd: 1100, TDispatch: 1200, TOutput: 2000, TUpdateEnd: 2100,
			WallTimeNs: 1000, NarrowTimeNs: 1000, GPUTimeNs: -1, HostPrepNs: -1, WorkerRecvNs: -1, SampleNs: -1,
			NumNewReqs: -1, NumCachedReqs: -1, NumResumedReqs: -1, TotalScheduledTokens: -1}
		s1 := s0
		s1.StepID, s1.Kind = 1, kind
		s1.TScheduleStart, s1.TScheduleEnd, s1.TDispatch, s1.TOutput, s1.TUpdateEnd = tss, tse, td, to, tue
		s1.WallTimeNs, s1.NarrowTimeNs = wall, narrow
		s1.NumPrefillRequests, s1.NumDecodeRequests = nPrefill, nDecode
		s1.VarDecodeKVTokens = variance
		s1.Overlapped = overlapped

		dir := filepath.Join(t.TempDir(), "ds")
		w, err := datasets.Create(dir, datasets.Manifest{}, datasets.CreateOptions{})
		require.NoError(t, err)
		writeTable(t, w, datasets.TableSteps, []datasets.Step{s0, s1})
		require.NoError(t, w.Close())

		r, err := Dataset(dir, Options{})
		require.NoError(t, err)
		got := map[string]bool{}
		for _, v := range r.Violations {
			require.Equal(t, datasets.TableSteps, v.Table, "%v", v)
			require.Equal(t, int64(1), v.Row, "step 0 is consistent: %v", v)
			if v.Level == Error {
				got[v.Field] = true
			}
		}

		// The oracle: each broken invariant and the field it is reported on.
		want := map[string]bool{}
		fields := []string{"t_schedule_start", "t_schedule_end", "t_dispatch", "t_output", "t_update_end"}
		times := []int64{tss, tse, td, to, tue}
		for i, v := range times {
			if v < -1 {
				want[fields[i]] = true
			}
		}
		for _, x := range []struct {
			name string
			v    int64
		}{{"wall_time_ns", wall}, {"narrow_time_ns", narrow}, {"num_prefill_requests", int64(nPrefill)}, {"num_decode_requests", int64(nDecode)}} {
			if x.v < -1 {
				want[x.name] = true
			}
		}
		for i := range times {
			for j := i + 1; j < len(times); j++ {
				if times[i] >= 0 && times[j] >= 0 && times[j] < times[i] {
					// reported on j against the latest known earlier time,
					// which is at least as large as times[i] or itself out of order
					want["order"] = true
				}
			}
		}
		if narrow >= 0 && to >= 0 && tss >= 0 && narrow != to-tss {
			want["narrow_time_ns"] = true
		}
		if tss >= 0 {
			idle := int64(2100) <= tss
			if overlapped && idle {
				want["overlapped"] = true
			}
			if wall >= 0 && to >= 0 {
				// Inter-update period; after idle the narrow window is
				// accepted too.
				ok := wall == to-2100 || (idle && wall == to-tss)
				if !ok {
					want["wall_time_ns"] = true
				}
			}
		}
		if math.IsNaN(variance) || math.IsInf(variance, 0) || (variance < 0 && variance != float64(datasets.Unknown)) {
			want["var_decode_kv_tokens"] = true
		}
		switch {
		case kind != datasets.KindPrefill && kind != datasets.KindDecode && kind != datasets.KindMixed:
			want["kind"] = true
		case nPrefill == -1 || nDecode == -1:
		case nPrefill > 0 && nDecode > 0:
			want["kind"] = kind != datasets.KindMixed
		case nPrefill > 0:
			want["kind"] = kind != datasets.KindPrefill
		case nDecode > 0:
			want["kind"] = kind != datasets.KindDecode
		default:
			want["kind"] = true // no requests
		}
		if !want["kind"] {
			delete(want, "kind")
		}

		for field := range want {
			if field == "order" {
				require.True(t, anyTimeField(got), "timing order broken but not reported: %v", r.Violations)
				continue
			}
			require.True(t, got[field], "%s broken but not reported: %v", field, r.Violations)
		}
		// And nothing else is reported.
		for field := range got {
			allowed := want[field] || (want["order"] && field != "t_schedule_start" && contains(fields, field))
			require.True(t, allowed, "%s reported but the oracle sees it intact: %v", field, r.Violations)
		}
	})
}

func anyTimeField(got map[string]bool) bool {
	for _, f := range []string{"t_schedule_end", "t_dispatch", "t_output", "t_update_end"} {
		if got[f] {
			return true
		}
	}
	return false
}
