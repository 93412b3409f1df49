package validate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/steplab/steplab/datasets"
	"github.com/stretchr/testify/require"
)

// fixture is a small consistent dataset: three steps of one worker
// (a first prefill, an overlapped decode, a mixed step after idle), their
// step_requests and three requests. Cases mutate it to break one invariant.
type fixture struct {
	steps []datasets.Step
	srs   []datasets.StepRequest
	reqs  []datasets.Request
	es    []datasets.EngineSample
	// post edits the written directory (manifest, part files).
	post func(t *testing.T, dir string)
	// abort leaves the dataset partial.
	abort bool
	// source is the manifest's source kind ("test" when empty).
	source string
}

// withPayload records the steps' payload consistently with the
// step_requests rows (100 bytes each): new and cached bytes are the rows'
// shares, payload_bytes adds 600 bytes of the step's own.
func (f *fixture) withPayload(source string) {
	f.source = source
	for i := range f.steps {
		st := &f.steps[i]
		st.PayloadNewBytes, st.PayloadCachedBytes = 0, 0
		for _, r := range f.srs {
			if r.StepID != st.StepID {
				continue
			}
			if r.IsNew {
				st.PayloadNewBytes += r.PayloadBytes
			} else {
				st.PayloadCachedBytes += r.PayloadBytes
			}
		}
		st.PayloadBytes = st.PayloadNewBytes + st.PayloadCachedBytes + 600
	}
}

func baseFixture() *fixture {
	step := func(id int64, kind string, tss, tse, td, to, tue, wall int64, overlapped bool) datasets.Step {
		return datasets.Step{
			StepID: id, WorkerID: "w0", Kind: kind, Role: datasets.RoleProduction, BenchmarkID: -1, Valid: true,
			TScheduleStart: tss, TScheduleEnd: tse, TDispatch: td, TOutput: to, TUpdateEnd: tue,
			WallTimeNs: wall, NarrowTimeNs: to - tss, GPUTimeNs: datasets.Unknown, HostPrepNs: 50,
			WorkerRecvNs: datasets.Unknown, SampleNs: datasets.Unknown, Overlapped: overlapped,
			KVBlocksUsed: 4, KVBlocksTotal: 100,
		}
	}
	s0 := step(0, datasets.KindPrefill, 1000, 1100, 1200, 2000, 2100, 1000, false)
	s0.NumNewReqs, s0.NumPrefillRequests, s0.SumPrefillTokens, s0.TotalScheduledTokens = 2, 2, 16, 16
	s0.VarPrefillLength = 4
	s1 := step(1, datasets.KindDecode, 1500, 1600, 2150, 3000, 3100, 900, true) // overlapped: 3000-2100
	s1.NumCachedReqs, s1.NumDecodeRequests, s1.SumDecodeKVTokens, s1.TotalScheduledTokens = 2, 2, 16, 2
	s2 := step(2, datasets.KindMixed, 5000, 5100, 5200, 6000, 6100, 1000, false) // after idle: 6000-5000
	s2.NumNewReqs, s2.NumCachedReqs, s2.NumPrefillRequests, s2.NumDecodeRequests = 1, 1, 1, 1
	s2.SumPrefillTokens, s2.TotalScheduledTokens = 8, 9
	sr := func(step int64, req string, isNew, prefill bool, tokens, computed int64) datasets.StepRequest {
		return datasets.StepRequest{StepID: step, ReqID: req, IsNew: isNew, IsPrefill: prefill, NumScheduledTokens: tokens, NumComputedTokens: computed, PromptLen: 10, PayloadBytes: 100}
	}
	req := func(id string, arrival, sched, first, finish int64) datasets.Request {
		return datasets.Request{ReqID: id, ArrivalNs: arrival, PromptTokens: 10, OutputTokens: 3,
			FirstScheduledNs: sched, FirstTokenNs: first, FinishNs: finish, Status: datasets.StatusFinished}
	}
	return &fixture{
		steps: []datasets.Step{s0, s1, s2},
		srs: []datasets.StepRequest{
			sr(0, "r0", true, true, 10, 0), sr(0, "r1", true, true, 6, 0),
			sr(1, "r0", false, false, 1, 10), sr(1, "r1", false, false, 1, 6),
			sr(2, "r2", true, true, 8, 0), sr(2, "r0", false, false, 1, 11),
		},
		reqs: []datasets.Request{
			req("r0", 500, 1000, 2000, 6000), req("r1", 600, 1000, 2000, 3000), req("r2", 4000, 5000, 6000, 6000),
		},
	}
}

func engineSamples() []datasets.EngineSample {
	return []datasets.EngineSample{
		{TNs: 1000, NumRunning: 2, KVUsage: 0.04, PromptTokensPerS: -1, GenerationTokensPerS: -1, WindowNs: 1000},
		{TNs: 2000, NumRunning: 2, KVUsage: -1, PromptTokensPerS: 16, GenerationTokensPerS: 2, WindowNs: 1000},
		{TNs: 3000, NumWaiting: 1, KVUsage: 0, PromptTokensPerS: 0, GenerationTokensPerS: 0, WindowNs: 1000},
	}
}

func writeTable[T any](t testing.TB, w *datasets.Writer, table string, rows []T) {
	t.Helper()
	if rows == nil {
		return
	}
	tw, err := datasets.NewTableWriter[T](w, table, datasets.TableOptions{RowGroupRows: 2, PartRows: 2})
	require.NoError(t, err)
	require.NoError(t, tw.Write(rows))
	require.NoError(t, tw.Close())
}

func (f *fixture) write(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ds")
	source := f.source
	if source == "" {
		source = "test"
	}
	w, err := datasets.Create(dir, datasets.Manifest{Source: datasets.Source{Kind: source}}, datasets.CreateOptions{})
	require.NoError(t, err)
	writeTable(t, w, datasets.TableSteps, f.steps)
	writeTable(t, w, datasets.TableStepRequests, f.srs)
	writeTable(t, w, datasets.TableRequests, f.reqs)
	writeTable(t, w, datasets.TableEngineSamples, f.es)
	if f.abort {
		require.NoError(t, w.Abort("test interrupt"))
	} else {
		require.NoError(t, w.Close())
	}
	return dir
}

func keys(r *Report, level Level) []string {
	out := []string{}
	for _, v := range r.Violations {
		if v.Level == level {
			out = append(out, fmt.Sprintf("%s[%d].%s", v.Table, v.Row, v.Field))
		}
	}
	sort.Strings(out)
	return out
}

func editManifest(t *testing.T, dir string, f func(m map[string]any)) {
	t.Helper()
	path := filepath.Join(dir, datasets.ManifestFile)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	f(m)
	b, err = json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

func TestInvariants(t *testing.T) {
	cases := []struct {
		name       string
		mut        func(f *fixture)
		wantErrors []string
		wantWarns  []string
	}{
		{name: "consistent dataset", mut: func(f *fixture) {}},
		{name: "engine samples", mut: func(f *fixture) { f.es = engineSamples() }},
		{name: "engine samples: KV usage over 1", mut: func(f *fixture) { f.es = engineSamples(); f.es[1].KVUsage = 1.5 },
			wantErrors: []string{"engine_samples[1].kv_usage"}},
		{name: "engine samples: time goes back on one rank", mut: func(f *fixture) { f.es = engineSamples(); f.es[2].TNs = 1500 },
			wantErrors: []string{"engine_samples[2].t_ns"}},
		{name: "engine samples: ranks are independent", mut: func(f *fixture) { f.es = engineSamples(); f.es[2].TNs, f.es[2].DPRank = 1500, 1 }},
		{name: "engine samples: bad rank and rate", mut: func(f *fixture) {
			f.es = engineSamples()
			f.es[0].DPRank, f.es[1].GenerationTokensPerS = -2, math.Inf(1)
		}, wantErrors: []string{"engine_samples[0].dp_rank", "engine_samples[1].generation_tokens_per_s"}},
		{name: "unknown times are skipped", mut: func(f *fixture) {
			f.steps[0].TScheduleEnd, f.steps[0].TDispatch = -1, -1
			f.steps[1].WallTimeNs, f.steps[1].NarrowTimeNs = -1, -1
		}},
		{name: "timing order", mut: func(f *fixture) { f.steps[0].TDispatch = 1050 },
			wantErrors: []string{"steps[0].t_dispatch"}},
		{name: "timing order across an unknown", mut: func(f *fixture) {
			f.steps[2].TDispatch = -1
			f.steps[2].TOutput = 5050
			f.steps[2].NarrowTimeNs = 50
			f.steps[2].WallTimeNs = 50
		},
			wantErrors: []string{"steps[2].t_output"}},
		{name: "narrow time", mut: func(f *fixture) { f.steps[1].NarrowTimeNs = 1 },
			wantErrors: []string{"steps[1].narrow_time_ns"}},
		{name: "wall time of the first step", mut: func(f *fixture) { f.steps[0].WallTimeNs = 999 },
			wantErrors: []string{"steps[0].wall_time_ns"}},
		{name: "wall time of an overlapped step is the inter-update period", mut: func(f *fixture) { f.steps[1].WallTimeNs = 1500 },
			wantErrors: []string{"steps[1].wall_time_ns"}},
		{name: "wall time after idle is its own window or the inter-update period", mut: func(f *fixture) { f.steps[2].WallTimeNs = 6000 - 5100 },
			wantErrors: []string{"steps[2].wall_time_ns"}},
		{name: "previous update ending exactly at schedule start is idle", mut: func(f *fixture) {
			f.steps[2].TScheduleStart, f.steps[2].NarrowTimeNs, f.steps[2].WallTimeNs = 3100, 2900, 2900
		}},
		{name: "non-overlapped step that follows without idle", mut: func(f *fixture) { f.steps[1].Overlapped = false }},
		{name: "overlapped flag contradicts the times", mut: func(f *fixture) { f.steps[2].Overlapped = true },
			wantErrors: []string{"steps[2].overlapped"}},
		{name: "negative int", mut: func(f *fixture) { f.steps[0].PaddedTokens = -5 },
			wantErrors: []string{"steps[0].padded_tokens"}},
		{name: "NaN variance", mut: func(f *fixture) { f.steps[1].VarDecodeKVTokens = math.NaN() },
			wantErrors: []string{"steps[1].var_decode_kv_tokens"}},
		{name: "infinite variance", mut: func(f *fixture) { f.steps[0].VarPrefillLength = math.Inf(1) },
			wantErrors: []string{"steps[0].var_prefill_length"}},
		{name: "unknown variance", mut: func(f *fixture) { f.steps[0].VarPrefillLength = float64(datasets.Unknown) }},
		{name: "negative variance", mut: func(f *fixture) { f.steps[0].VarPrefillLength = -2 },
			wantErrors: []string{"steps[0].var_prefill_length"}},
		{name: "kind disagrees with composition", mut: func(f *fixture) { f.steps[1].Kind = datasets.KindPrefill },
			wantErrors: []string{"steps[1].kind"}},
		{name: "kind not in enum", mut: func(f *fixture) { f.steps[1].Kind = "bogus" },
			wantErrors: []string{"steps[1].kind"}},
		{name: "role not in enum", mut: func(f *fixture) { f.steps[0].Role = "" },
			wantErrors: []string{"steps[0].role"}},
		{name: "invalid row without reason", mut: func(f *fixture) { f.steps[0].Valid = false },
			wantErrors: []string{"steps[0].invalid_reason"}},
		{name: "invalid row with reason", mut: func(f *fixture) { f.steps[0].Valid, f.steps[0].InvalidReason = false, "warmup" }},
		{name: "kv blocks over total", mut: func(f *fixture) { f.steps[2].KVBlocksUsed = 101 },
			wantErrors: []string{"steps[2].kv_blocks_used"}},
		{name: "step_id not increasing per worker", mut: func(f *fixture) {
			// (a repeated step_id would merge its step_requests rows with
			// the step before: rows are joined by step_id)
			f.steps[2].StepID = 0
			f.srs[4].StepID, f.srs[5].StepID = 0, 0
		}, wantErrors: []string{"steps[2].step_id"}},
		{name: "step ids of two workers are independent", mut: func(f *fixture) { f.steps[2].WorkerID = "w1"; f.steps[2].WallTimeNs = 1000 }},
		{name: "new plus cached vs rows", mut: func(f *fixture) { f.steps[0].NumCachedReqs = 1 },
			wantErrors: []string{"steps[0].num_new_reqs+num_cached_reqs"}},
		{name: "new vs is_new rows", mut: func(f *fixture) { f.steps[0].NumNewReqs, f.steps[0].NumCachedReqs = 1, 1 },
			wantErrors: []string{"steps[0].num_new_reqs"}},
		{name: "resumed vs is_resumed rows", mut: func(f *fixture) { f.steps[2].NumResumedReqs = 1 },
			wantErrors: []string{"steps[2].num_resumed_reqs"}},
		{name: "resumed rows counted", mut: func(f *fixture) { f.steps[2].NumResumedReqs = 1; f.srs[4].IsResumed = true }},
		{name: "prefill count vs rows", mut: func(f *fixture) { f.steps[2].NumPrefillRequests = 2 },
			wantErrors: []string{"steps[2].num_prefill_requests"}},
		{name: "decode count vs rows", mut: func(f *fixture) { f.steps[1].NumDecodeRequests = 3 },
			wantErrors: []string{"steps[1].num_decode_requests"}},
		{name: "total scheduled tokens", mut: func(f *fixture) { f.steps[2].TotalScheduledTokens = 10 },
			wantErrors: []string{"steps[2].total_scheduled_tokens"}},
		{name: "sum prefill tokens", mut: func(f *fixture) { f.steps[0].SumPrefillTokens = 15 },
			wantErrors: []string{"steps[0].sum_prefill_tokens"}},
		{name: "simulated payload shares add up", mut: func(f *fixture) { f.withPayload("simulate") }},
		{name: "simulated payload shares disagree with new + cached", mut: func(f *fixture) {
			f.withPayload("simulate")
			f.srs[3].PayloadBytes = 50 // step 1: a request's share lost (a buffer reused too early)
		}, wantErrors: []string{"steps[1].payload_new_bytes+payload_cached_bytes"}},
		{name: "captured payload shares need not add up to new + cached", mut: func(f *fixture) {
			f.withPayload("capture")
			f.steps[0].PayloadNewBytes += 3 // the list's framing
			f.srs[3].PayloadBytes = 50      // an estimated cached share
		}},
		{name: "payload shares exceed the whole step", mut: func(f *fixture) {
			f.withPayload("capture")
			f.steps[2].PayloadBytes = 150
		}, wantErrors: []string{"steps[2].payload_bytes"}},
		{name: "payload not recorded per request is not checked", mut: func(f *fixture) {
			f.withPayload("simulate")
			for i := range f.srs {
				f.srs[i].PayloadBytes = 0
			}
		}},
		{name: "payload not recorded per step is not checked", mut: func(f *fixture) {
			f.withPayload("simulate")
			f.steps[1].PayloadBytes, f.steps[1].PayloadNewBytes, f.steps[1].PayloadCachedBytes = -1, -1, -1
		}},
		{name: "unknown counts skip the join", mut: func(f *fixture) {
			f.steps[0].NumNewReqs, f.steps[0].NumCachedReqs, f.steps[0].TotalScheduledTokens = -1, -1, -1
		}},
		{name: "step_requests row of no step", mut: func(f *fixture) {
			f.srs = append(f.srs, datasets.StepRequest{StepID: 7, ReqID: "r1", NumScheduledTokens: 1})
		}, wantErrors: []string{"step_requests[6].step_id"}},
		{name: "step_requests row behind its step", mut: func(f *fixture) {
			// a row of step 0 after step 1's rows: orphan, step 0 loses one row
			f.srs = append(f.srs[:4:4], append([]datasets.StepRequest{{StepID: 0, ReqID: "r2", NumScheduledTokens: 1}}, f.srs[4:]...)...)
		}, wantErrors: []string{"step_requests[4].step_id"}},
		{name: "unknown req_id", mut: func(f *fixture) { f.srs[4].ReqID = "rX" },
			wantErrors: []string{"step_requests[4].req_id"}},
		{name: "request twice in one step", mut: func(f *fixture) { f.srs[3].ReqID = "r0" },
			wantErrors: []string{"step_requests[3].req_id"}},
		{name: "negative scheduled tokens", mut: func(f *fixture) { f.srs[1].NumComputedTokens = -3 },
			wantErrors: []string{"step_requests[1].num_computed_tokens"}},
		{name: "duplicate req_id", mut: func(f *fixture) { f.reqs[2].ReqID = "r1" },
			wantErrors: []string{"requests[2].req_id", "step_requests[4].req_id"}},
		{name: "negative arrival", mut: func(f *fixture) { f.reqs[1].ArrivalNs = -1 },
			wantErrors: []string{"requests[1].arrival_ns"}},
		{name: "negative prompt tokens", mut: func(f *fixture) { f.reqs[0].PromptTokens = -1 },
			wantErrors: []string{"requests[0].prompt_tokens"}},
		{name: "negative output tokens", mut: func(f *fixture) { f.reqs[0].OutputTokens = -2 },
			wantErrors: []string{"requests[0].output_tokens"}},
		{name: "scheduled before arrival", mut: func(f *fixture) { f.reqs[2].FirstScheduledNs = 3999 },
			wantErrors: []string{"requests[2].first_scheduled_ns"}},
		{name: "first token before scheduled", mut: func(f *fixture) { f.reqs[0].FirstTokenNs = 900 },
			wantErrors: []string{"requests[0].first_token_ns"}},
		{name: "finish before first token", mut: func(f *fixture) { f.reqs[1].FinishNs = 1999 },
			wantErrors: []string{"requests[1].finish_ns"}},
		{name: "unknown request times skipped", mut: func(f *fixture) {
			f.reqs[1].FirstScheduledNs, f.reqs[1].FirstTokenNs, f.reqs[1].FinishNs = -1, -1, -1
			f.reqs[1].Status = datasets.StatusNotRun
		}},
		{name: "status not in enum", mut: func(f *fixture) { f.reqs[1].Status = "done" },
			wantErrors: []string{"requests[1].status"}},
		{name: "partial dataset", mut: func(f *fixture) { f.abort = true },
			wantWarns: []string{"manifest[-1].status"}},
		{name: "sha256 mismatch", mut: func(f *fixture) {
			f.post = func(t *testing.T, dir string) {
				editManifest(t, dir, func(m map[string]any) {
					p := m["tables"].(map[string]any)["steps"].(map[string]any)["parts"].([]any)[1].(map[string]any)
					p["sha256"] = "00"
				})
			}
		}, wantErrors: []string{"steps[-1]."}},
		{name: "row count mismatch", mut: func(f *fixture) {
			f.post = func(t *testing.T, dir string) {
				editManifest(t, dir, func(m map[string]any) {
					ti := m["tables"].(map[string]any)["requests"].(map[string]any)
					ti["parts"].([]any)[0].(map[string]any)["rows"] = 3
					ti["rows"] = 4
				})
			}
		}, wantErrors: []string{"requests[-1]."}},
		{name: "listed part missing", mut: func(f *fixture) {
			f.post = func(t *testing.T, dir string) {
				require.NoError(t, os.Remove(filepath.Join(dir, "requests.parquet", "part-000001.parquet")))
			}
		}, wantErrors: []string{"requests[-1].", "step_requests[4].req_id"}},
		{name: "minimal manifest", mut: func(f *fixture) {
			f.post = func(t *testing.T, dir string) { writeMinimalManifest(t, dir) }
		}, wantWarns: []string{"manifest[-1].", "manifest[-1]."}},
		{name: "unknown manifest status", mut: func(f *fixture) {
			f.post = func(t *testing.T, dir string) { editManifest(t, dir, func(m map[string]any) { m["status"] = "done" }) }
		}, wantErrors: []string{"manifest[-1].status"}},
		{name: "newer schema version", mut: func(f *fixture) {
			f.post = func(t *testing.T, dir string) {
				editManifest(t, dir, func(m map[string]any) { m["schema_version"] = 99 })
			}
		}, wantErrors: []string{"manifest[-1].schema_version"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := baseFixture()
			tc.mut(f)
			dir := f.write(t)
			if f.post != nil {
				f.post(t, dir)
			}
			r, err := Dataset(dir, Options{})
			require.NoError(t, err)
			want := tc.wantErrors
			if want == nil {
				want = []string{}
			}
			require.Equal(t, want, keys(r, Error), "violations: %v", r.Violations)
			wantW := tc.wantWarns
			if wantW == nil {
				wantW = []string{}
			}
			require.Equal(t, wantW, keys(r, Warning), "violations: %v", r.Violations)
			require.Equal(t, int64(len(want)), r.Errors)
			require.Equal(t, len(want) == 0, r.OK())
		})
	}
}

func TestReportDetails(t *testing.T) {
	t.Run("rows checked and part of a violation", func(t *testing.T) {
		f := baseFixture()
		f.steps[2].TotalScheduledTokens = 10
		r, err := Dataset(f.write(t), Options{})
		require.NoError(t, err)
		require.Equal(t, map[string]int64{"steps": 3, "step_requests": 6, "requests": 3}, r.RowsChecked)
		require.Len(t, r.Violations, 1)
		v := r.Violations[0]
		// PartRows is 2: row 2 is the first row of the second part.
		require.Equal(t, "steps.parquet/part-000001.parquet", v.Part)
		require.Contains(t, v.Message, "total_scheduled_tokens 10")
		require.Contains(t, v.Message, "9 tokens")
		require.Equal(t, []Count{{Table: "steps", Field: "total_scheduled_tokens", Level: Error, N: 1}}, r.Counts)
	})
	t.Run("partial lists completed parts", func(t *testing.T) {
		f := baseFixture()
		f.abort = true
		r, err := Dataset(f.write(t), Options{})
		require.NoError(t, err)
		require.True(t, r.Partial)
		require.True(t, r.OK())
		require.Len(t, r.Completed["steps"].Parts, 2)
		require.Equal(t, int64(3), r.Completed["steps"].Rows)
		require.Contains(t, r.Violations[0].Message, "steps: 2 parts, 3 rows")
	})
	t.Run("max keeps counting", func(t *testing.T) {
		f := baseFixture()
		f.steps[0].PaddedTokens, f.steps[1].PaddedTokens, f.steps[2].PaddedTokens = -2, -2, -2
		r, err := Dataset(f.write(t), Options{Max: 2})
		require.NoError(t, err)
		require.Len(t, r.Violations, 2)
		require.True(t, r.Truncated)
		require.Equal(t, int64(3), r.Errors)
		require.Equal(t, []Count{{Table: "steps", Field: "padded_tokens", Level: Error, N: 3}}, r.Counts)
	})
	t.Run("sha256 mismatch names the part", func(t *testing.T) {
		f := baseFixture()
		dir := f.write(t)
		editManifest(t, dir, func(m map[string]any) {
			m["tables"].(map[string]any)["steps"].(map[string]any)["parts"].([]any)[1].(map[string]any)["sha256"] = "00"
		})
		r, err := Dataset(dir, Options{})
		require.NoError(t, err)
		require.Len(t, r.Violations, 1)
		require.Equal(t, "steps.parquet/part-000001.parquet", r.Violations[0].Part)
		require.Contains(t, r.Violations[0].Message, "sha256")
	})
	t.Run("not a directory", func(t *testing.T) {
		_, err := Dataset(filepath.Join(t.TempDir(), "nope"), Options{})
		require.Error(t, err)
	})
}

// writeMinimalManifest replaces a dataset's manifest with the one a user
// writes by hand: schema version, hardware, model, measurement policy.
func writeMinimalManifest(t *testing.T, dir string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, datasets.ManifestFile), []byte(`{"schema_version": 1,
  "hardware": {"gpu_name": "H200"}, "model": {"name": "Llama-3.1-8B"},
  "measurement_policy": {"decode": "production", "prefill": "production"}}`), 0o644))
}

// dropColumns rewrites every part of a table without the named columns,
// with parquet-go, as a tool that never had them would write it.
func dropColumns(t *testing.T, dir, table string, drop ...string) {
	t.Helper()
	d, err := datasets.Open(dir)
	require.NoError(t, err)
	parts, err := d.Parts(table)
	require.NoError(t, err)
	for _, path := range parts {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		pf, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
		require.NoError(t, err)
		fields := parquet.Group{}
		for _, f := range pf.Schema().Fields() {
			if !slices.Contains(drop, f.Name()) {
				fields[f.Name()] = f
			}
		}
		schema := parquet.NewSchema("schema", fields)
		conv, err := parquet.Convert(schema, pf.Schema())
		require.NoError(t, err)
		var out bytes.Buffer
		w := parquet.NewWriter(&out, schema)
		for _, rg := range pf.RowGroups() {
			_, err := parquet.CopyRows(w, parquet.ConvertRowGroup(rg, conv).Rows())
			require.NoError(t, err)
		}
		require.NoError(t, w.Close())
		require.NoError(t, os.WriteFile(path, out.Bytes(), 0o644))
	}
	writeMinimalManifest(t, dir)
}

// A steps table written by another tool: kind missing.
type pandasStep struct {
	StepID         int64  `parquet:"step_id"`
	WorkerID       string `parquet:"worker_id"`
	TScheduleStart int64  `parquet:"t_schedule_start"`
}

func TestColumns(t *testing.T) {
	t.Run("missing required column", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "ds")
		w, err := datasets.Create(dir, datasets.Manifest{}, datasets.CreateOptions{})
		require.NoError(t, err)
		writeTable(t, w, datasets.TableSteps, []pandasStep{{StepID: 1}})
		require.NoError(t, w.Close())
		r, err := Dataset(dir, Options{})
		require.NoError(t, err)
		errs := keys(r, Error)
		require.Contains(t, errs, "steps[-1].kind")
		require.Contains(t, errs, "steps[-1].wall_time_ns")
		require.NotContains(t, errs, "steps[-1].step_id")
		require.NotContains(t, errs, "steps[-1].gpu_time_ns", "gpu_time_ns has a default")
		require.Zero(t, r.RowsChecked["steps"], "rows of an unreadable table are not checked")
	})
	t.Run("defaulted columns absent", func(t *testing.T) {
		dir := baseFixture().write(t)
		dropColumns(t, dir, datasets.TableSteps, "worker_recv_ns", "sample_ns", "role", "kv_blocks_used")
		dropColumns(t, dir, datasets.TableStepRequests, "is_resumed")
		r, err := Dataset(dir, Options{})
		require.NoError(t, err)
		require.Equal(t, []string{}, keys(r, Error), "%v", r.Violations)
		require.Equal(t, []string{"manifest[-1].", "manifest[-1].", "step_requests[-1].", "steps[-1]."}, keys(r, Warning))
		for _, v := range r.Violations {
			if v.Table == datasets.TableSteps {
				require.Contains(t, v.Message, "role (production), worker_recv_ns (-1), sample_ns (-1), kv_blocks_used (-1)")
			}
		}
		require.Equal(t, int64(3), r.RowsChecked["steps"])
	})
	t.Run("no manifest", func(t *testing.T) {
		dir := baseFixture().write(t)
		require.NoError(t, os.Remove(filepath.Join(dir, datasets.ManifestFile)))
		_, err := Dataset(dir, Options{})
		require.ErrorIs(t, err, datasets.ErrNoManifest)
		require.ErrorContains(t, err, "steplab import table")
	})
}

// TestPartitionedOrder: a partitioned write keeps each partition's row
// order only; step order is checked within each partition.
func TestPartitionedOrder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ds")
	require.NoError(t, os.CopyFS(dir, os.DirFS(corruptSource)))
	steps := filepath.Join(dir, "steps.parquet")
	parts, err := filepath.Glob(filepath.Join(steps, "part-*.parquet"))
	require.NoError(t, err)
	for i, p := range parts {
		sub := filepath.Join(steps, fmt.Sprintf("shard=%d", 1+i%2*10)) // shard=1 then shard=11 interleaved
		require.NoError(t, os.MkdirAll(sub, 0o755))
		require.NoError(t, os.Rename(p, filepath.Join(sub, filepath.Base(p))))
	}
	m, err := datasets.ReadManifest(dir)
	require.NoError(t, err)
	m.Tables = nil // the tables on disk
	require.NoError(t, datasets.WriteManifest(dir, m))
	rep, err := Dataset(dir, Options{})
	require.NoError(t, err)
	for _, v := range rep.Violations {
		require.False(t, v.Field == "step_id" && v.Level == Error, "%v", v)
	}
	require.Equal(t, int64(6024), rep.RowsChecked[datasets.TableSteps])
}

// TestDuckDBPartitions: DuckDB's PARTITION_BY (kind) splits each worker's
// steps between kind=... folders; validate passes it, checking the step
// order within each.
func TestDuckDBPartitions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ds")
	require.NoError(t, os.CopyFS(filepath.Join(dir, "steps.parquet"), os.DirFS("../testdata/foreign/duckdb/fixtures/steps_by_kind")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, datasets.ManifestFile), []byte(`{"schema_version": 1, "hardware": {"gpu_name": "H200"},
  "model": {"name": "Llama-3.1-8B"}, "measurement_policy": {"decode": "production", "prefill": "production"}}`), 0o644))
	rep, err := Dataset(dir, Options{})
	require.NoError(t, err)
	require.True(t, rep.OK(), "%v", rep.Violations)
	require.Equal(t, int64(1200), rep.RowsChecked[datasets.TableSteps])
}
