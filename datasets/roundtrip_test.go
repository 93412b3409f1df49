package datasets

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var flagSeed = flag.Uint64("datasets.seed", 0, "seed for the randomized tests (0: a fresh one)")

// seededRand is the random source of a randomized test: a fresh seed, or
// -datasets.seed; the seed is logged so that a failure can be replayed.
func seededRand(t *testing.T) *rand.Rand {
	t.Helper()
	seed := *flagSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (replay with -datasets.seed=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, 0))
}

// writeTable writes rows as one table of a new dataset under t.TempDir(),
// through Write (batches of 100) or Append, and returns the dataset dir.
func writeTable[T any](t testing.TB, dir, table string, rows []T, opts TableOptions, append1 bool) {
	t.Helper()
	w, err := Create(dir, Manifest{Source: Source{Kind: "test"}}, CreateOptions{})
	require.NoError(t, err)
	tw, err := NewTableWriter[T](w, table, opts)
	require.NoError(t, err)
	if append1 {
		for _, r := range rows {
			require.NoError(t, tw.Append(r))
		}
	} else {
		for i := 0; i < len(rows); i += 100 {
			require.NoError(t, tw.Write(rows[i:min(i+100, len(rows))]))
		}
	}
	require.Equal(t, int64(len(rows)), tw.Rows())
	require.NoError(t, tw.Close())
	require.NoError(t, w.Close())
}

func readTable[T any](t testing.TB, dir, table string) []T {
	t.Helper()
	d, err := Open(dir)
	require.NoError(t, err)
	got, err := ReadAll[T](d, table)
	require.NoError(t, err)
	return got
}

// roundTrip writes rows and reads them back through Scanner and through
// parquet-go's own generic reader (a second decoder of the same files).
func roundTrip[T any](t *testing.T, table string, rows []T, normalize func([]T) []T) {
	for _, tc := range []struct {
		name    string
		opts    TableOptions
		append1 bool
	}{
		{"one part", TableOptions{}, false},
		{"small parts and row groups", TableOptions{RowGroupRows: 70, PartRows: 250}, false},
		{"append", TableOptions{RowGroupRows: 64, PartRows: 300}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "ds")
			writeTable(t, dir, table, rows, tc.opts, tc.append1)
			got := readTable[T](t, dir, table)
			require.True(t, assert.ObjectsAreEqual(rows, got), "rows read back differ from rows written")

			d, err := Open(dir)
			require.NoError(t, err)
			require.Equal(t, DatasetComplete, d.Manifest.Status)
			parts, err := d.Parts(table)
			require.NoError(t, err)
			wantParts := 1
			if tc.opts.PartRows > 0 {
				wantParts = (len(rows) + int(tc.opts.PartRows) - 1) / int(tc.opts.PartRows)
			}
			require.Len(t, parts, wantParts)
			require.Len(t, d.Manifest.Tables[table].Parts, wantParts)
			require.Equal(t, int64(len(rows)), d.Manifest.Tables[table].Rows)

			var viaParquetGo []T
			for _, p := range parts {
				r, err := parquet.ReadFile[T](p)
				require.NoError(t, err, p)
				viaParquetGo = append(viaParquetGo, r...)
			}
			if normalize != nil {
				viaParquetGo = normalize(viaParquetGo)
			}
			require.True(t, assert.ObjectsAreEqual(rows, viaParquetGo), "parquet-go's generic reader disagrees")
		})
	}
}

func TestRoundTripTables(t *testing.T) {
	t.Run("steps", func(t *testing.T) { roundTrip(t, TableSteps, simSteps(1000, 3), nil) })
	t.Run("step_requests", func(t *testing.T) { roundTrip(t, TableStepRequests, simStepRequests(1000, 3), nil) })
	t.Run("requests", func(t *testing.T) { roundTrip(t, TableRequests, normalizeLists(simRequests(1000, 3)), normalizeLists) })
	t.Run("gpu_samples", func(t *testing.T) { roundTrip(t, TableGPUSamples, simGPUSamples(1000, 3), nil) })
	t.Run("engine_samples", func(t *testing.T) { roundTrip(t, TableEngineSamples, simEngineSamples(1000, 3), nil) })
}

// normalizeLists maps empty lists to nil: Parquet does not tell an empty
// list from an absent one in a required list column, and readers return nil.
func normalizeLists(rs []Request) []Request {
	for i := range rs {
		if len(rs[i].PrefixHashIDs) == 0 {
			rs[i].PrefixHashIDs = nil
		}
	}
	return rs
}

func TestProjectionAndIterator(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ds")
	rows := simSteps(3000, 5)
	writeTable(t, dir, TableSteps, rows, TableOptions{RowGroupRows: 1000, PartRows: 2500}, false)

	got := readTable[stepTimes](t, dir, TableSteps)
	require.Len(t, got, len(rows))
	for i, r := range rows {
		want := stepTimes{StepID: r.StepID, SumPrefillTokens: r.SumPrefillTokens, NumDecodeRequests: r.NumDecodeRequests,
			SumDecodeKVTokens: r.SumDecodeKVTokens, WallTimeNs: r.WallTimeNs, Valid: r.Valid, Kind: r.Kind}
		require.Equal(t, want, got[i], "row %d", i)
	}

	d, err := Open(dir)
	require.NoError(t, err)
	s, err := Scan[Step](d, TableSteps)
	require.NoError(t, err)
	n := 0
	for row, err := range s.All() {
		require.NoError(t, err)
		require.Equal(t, rows[n], *row)
		n++
	}
	require.Equal(t, len(rows), n)
	require.NoError(t, s.Close())
}

// Columns a generic-path type (one the columnar codec does not handle)
// still reads, by parquet-go's reader.
func TestGenericPathProjection(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ds")
	rows := simSteps(500, 6)
	writeTable(t, dir, TableSteps, rows, TableOptions{}, false)
	type withPointer struct {
		StepID int64  `parquet:"step_id"`
		GPU    *int64 `parquet:"gpu_time_ns,optional"`
	}
	got := readTable[withPointer](t, dir, TableSteps)
	require.Len(t, got, len(rows))
	assert.Equal(t, rows[499].StepID, got[499].StepID)
}

func TestEmptyTable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ds")
	writeTable[Request](t, dir, TableRequests, nil, TableOptions{}, false)
	d, err := Open(dir)
	require.NoError(t, err)
	parts, err := d.Parts(TableRequests)
	require.NoError(t, err)
	require.Len(t, parts, 1, "an empty table still has one part holding its schema")
	got, err := ReadAll[Request](d, TableRequests)
	require.NoError(t, err)
	require.Empty(t, got)
	pf, f, err := OpenParquet(parts[0])
	require.NoError(t, err)
	defer f.Close()
	_, ok := pf.Schema().Lookup("prefix_hash_ids", "list", "element")
	require.True(t, ok, "schema of an empty part names the list column")
}

// The same rows give byte-identical files: no timestamps, no map order.
func TestDeterministicFiles(t *testing.T) {
	write := func(dir string) {
		w, err := Create(dir, Manifest{Source: Source{Kind: "simulate"}}, CreateOptions{})
		require.NoError(t, err)
		steps, err := NewTableWriter[Step](w, TableSteps, TableOptions{RowGroupRows: 300, PartRows: 1000})
		require.NoError(t, err)
		require.NoError(t, steps.Write(simSteps(2500, 9)))
		require.NoError(t, steps.Close())
		reqs, err := NewTableWriter[Request](w, TableRequests, TableOptions{})
		require.NoError(t, err)
		require.NoError(t, reqs.Write(simRequests(700, 9)))
		require.NoError(t, reqs.Close())
		require.NoError(t, w.Close())
	}
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	write(a)
	write(b)
	files := 0
	err := filepath.Walk(a, func(p string, info os.FileInfo, err error) error {
		require.NoError(t, err)
		if info.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(a, p)
		x, err := os.ReadFile(p)
		require.NoError(t, err)
		y, err := os.ReadFile(filepath.Join(b, rel))
		require.NoError(t, err)
		if rel == ManifestFile {
			// the manifest names its directory
			x = bytes.ReplaceAll(x, []byte(`"name": "a"`), []byte(`"name": "b"`))
		}
		require.True(t, bytes.Equal(x, y), "%s differs between two writes of the same rows", rel)
		files++
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 5, files, "manifest + 3 steps parts + 1 requests part")
}

// A file a pandas user writes: one file <table>.parquet, nullable columns,
// dictionary-encoded integers, int32 where steplab uses int64, and no
// worker_recv_ns/sample_ns (columns with defaults).
type pandasStep struct {
	StepID            *int64  `parquet:"step_id,optional"`
	WorkerID          *string `parquet:"worker_id,optional"`
	Kind              string  `parquet:"kind,dict"`
	NumDecodeRequests int32   `parquet:"num_decode_requests,dict"`
	SumDecodeKVTokens int32   `parquet:"sum_decode_kv_tokens"`
	WallTimeNs        *int64  `parquet:"wall_time_ns,optional,dict"`
	GPUTimeNs         *int64  `parquet:"gpu_time_ns,optional"`
	VarDecodeKVTokens float32 `parquet:"var_decode_kv_tokens"`
	Valid             bool    `parquet:"valid"`
	Extra             string  `parquet:"extra"` // unknown columns are ignored
}

type pandasProjection struct {
	StepID            int64   `parquet:"step_id"`
	WorkerID          string  `parquet:"worker_id"`
	Kind              string  `parquet:"kind"`
	NumDecodeRequests int32   `parquet:"num_decode_requests"`
	SumDecodeKVTokens int64   `parquet:"sum_decode_kv_tokens"`
	WallTimeNs        int64   `parquet:"wall_time_ns"`
	GPUTimeNs         int64   `parquet:"gpu_time_ns" default:"-1"`
	VarDecodeKVTokens float64 `parquet:"var_decode_kv_tokens"`
	Valid             bool    `parquet:"valid"`
	WorkerRecvNs      int64   `parquet:"worker_recv_ns" default:"-1"`
	SampleNs          int64   `parquet:"sample_ns" default:"-1"`
}

func TestForeignSingleFileTable(t *testing.T) {
	dir := t.TempDir()
	ptr := func(v int64) *int64 { return &v }
	worker := "w0"
	var rows []pandasStep
	for i := range 5000 {
		r := pandasStep{StepID: ptr(int64(i)), Kind: []string{KindDecode, KindMixed}[i%2], NumDecodeRequests: int32(i % 7),
			SumDecodeKVTokens: int32(i * 3), WallTimeNs: ptr(int64(1000 + i%13)), VarDecodeKVTokens: float32(i) / 4, Valid: i%3 != 0, Extra: "x"}
		if i%10 != 0 {
			r.WorkerID = &worker
		}
		if i%4 == 0 {
			r.GPUTimeNs = ptr(int64(i))
		}
		rows = append(rows, r)
	}
	f, err := os.Create(filepath.Join(dir, "steps.parquet"))
	require.NoError(t, err)
	pw := parquet.NewGenericWriter[pandasStep](f, parquet.MaxRowsPerRowGroup(1500), parquet.PageBufferSize(4096))
	_, err = pw.Write(rows)
	require.NoError(t, err)
	require.NoError(t, pw.Close())
	require.NoError(t, f.Close())

	writeMinimalManifest(t, dir)
	d, err := Open(dir)
	require.NoError(t, err)
	got, err := ReadAll[pandasProjection](d, TableSteps)
	require.NoError(t, err)
	require.Len(t, got, len(rows))
	for i, r := range rows {
		want := pandasProjection{StepID: *r.StepID, Kind: r.Kind, NumDecodeRequests: r.NumDecodeRequests,
			SumDecodeKVTokens: int64(r.SumDecodeKVTokens), WallTimeNs: *r.WallTimeNs, GPUTimeNs: -1,
			VarDecodeKVTokens: float64(r.VarDecodeKVTokens), Valid: r.Valid, WorkerRecvNs: -1, SampleNs: -1}
		if r.WorkerID != nil {
			want.WorkerID = *r.WorkerID
		}
		if r.GPUTimeNs != nil {
			want.GPUTimeNs = *r.GPUTimeNs
		}
		require.Equal(t, want, got[i], "row %d", i)
	}

	// The full Step type needs columns this file lacks: the error names the
	// required ones, not the defaulted worker_recv_ns and sample_ns.
	_, err = ReadAll[Step](d, TableSteps)
	require.Error(t, err)
	assert.Contains(t, err.Error(), filepath.Join(dir, "steps.parquet"))
	assert.Contains(t, err.Error(), `missing columns "num_prefill_requests", "sum_prefill_tokens", "sum_prefill_kv_tokens"`)
	assert.NotContains(t, err.Error(), `"kv_blocks_total"`)
	assert.NotContains(t, err.Error(), `"worker_recv_ns"`)
	assert.NotContains(t, err.Error(), `"sample_ns"`)
}

// Lists written by another writer: optional list, optional elements, and
// page boundaries inside a row's list.
func TestForeignListColumn(t *testing.T) {
	type foreignRequest struct {
		ReqID         string   `parquet:"req_id"`
		PrefixHashIDs []*int64 `parquet:"prefix_hash_ids,list"`
	}
	type want struct {
		ReqID         string  `parquet:"req_id"`
		PrefixHashIDs []int64 `parquet:"prefix_hash_ids,list"`
	}
	r := rand.New(rand.NewPCG(1, 2))
	var rows []foreignRequest
	var exp []want
	for i := range 3000 {
		var ids []*int64
		var e []int64
		for k := range r.IntN(40) {
			v := int64(i*100 + k)
			ids = append(ids, &v)
			e = append(e, v)
		}
		rows = append(rows, foreignRequest{ReqID: fmt.Sprint(i), PrefixHashIDs: ids})
		exp = append(exp, want{ReqID: fmt.Sprint(i), PrefixHashIDs: e})
	}
	path := filepath.Join(t.TempDir(), "requests.parquet")
	require.NoError(t, parquet.WriteFile(path, rows, parquet.PageBufferSize(512), parquet.DataPageVersion(1)))
	got, err := readAllFiles[want]([]string{path})
	require.NoError(t, err)
	require.Equal(t, exp, got)
}

func readAllFiles[T any](paths []string) ([]T, error) {
	s := ScanFiles[T](paths)
	defer s.Close()
	var out []T
	buf := make([]T, 333)
	for {
		n, err := s.Read(buf)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, buf[:n]...)
	}
}

// stepGen produces steps that look like a simulated trace: step ids and
// timestamps increase, counts are small, strings repeat. It streams, so a
// benchmark can write many rows from a small, cache-resident buffer, as the
// simulator does.
type stepGen struct {
	r          *rand.Rand
	i          int64
	t          int64
	running    int32
	kvUsed     int64
	prevUpdate int64
}

func newStepGen(seed uint64) *stepGen {
	return &stepGen{r: rand.New(rand.NewPCG(seed, 7)), t: 1_000_000, prevUpdate: 1_000_000}
}

func (g *stepGen) fill(out []Step) {
	r := g.r
	for i := range out {
		s := &out[i]
		*s = Step{}
		s.StepID = g.i
		s.WorkerID = "worker-0"
		s.Kind = KindDecode
		s.Role = RoleProduction
		s.BenchmarkID = -1
		s.Valid = true
		newReqs := int32(0)
		if r.IntN(8) == 0 {
			newReqs = int32(1 + r.IntN(3))
			s.Kind = KindMixed
		}
		fin := int32(0)
		if g.running > 4 && r.IntN(6) == 0 {
			fin = int32(1 + r.IntN(2))
		}
		if r.IntN(50) == 0 {
			s.Valid = false
			s.InvalidReason = "preempted"
		}
		s.NumNewReqs = newReqs
		s.NumCachedReqs = g.running
		s.NumFinished = fin
		s.NumPrefillRequests = newReqs
		if newReqs > 0 {
			s.SumPrefillTokens = int64(newReqs) * int64(200+r.IntN(1800))
			s.SumPrefillKVTokens = s.SumPrefillTokens / 4
			s.VarPrefillLength = float64(r.IntN(50000))
		}
		s.NumDecodeRequests = g.running
		s.SumDecodeKVTokens = g.kvUsed * 16
		s.VarDecodeKVTokens = float64(r.IntN(100000)) / 3
		s.TotalScheduledTokens = s.SumPrefillTokens + int64(g.running)
		s.PaddedTokens = int64((g.running+7)&^7) - int64(g.running)
		s.CUDAGraphSize = (g.running + 7) &^ 7
		if g.running > 0 {
			s.MaxDecodeKVTokens = s.SumDecodeKVTokens/int64(g.running) + int64(r.IntN(1000))
		}
		s.SumPrefillAttn = float64(s.SumPrefillTokens)*float64(s.SumPrefillKVTokens) + 0.5*float64(r.IntN(3))
		s.NewReqTokens = s.SumPrefillTokens
		s.PayloadCachedBytes = int64(g.running) * 24
		s.PayloadNewBytes = s.SumPrefillTokens * 4
		s.PayloadBytes = s.PayloadCachedBytes + s.PayloadNewBytes + 128
		s.TScheduleStart = g.t
		g.t += int64(20_000 + r.IntN(10_000))
		s.TScheduleEnd = g.t
		g.t += int64(5_000 + r.IntN(3_000))
		s.TDispatch = g.t
		gpu := 4_000_000 + int64(g.running)*20_000 + s.SumPrefillTokens*150 + int64(r.IntN(50_000))
		g.t += gpu
		s.TOutput = g.t
		s.WallTimeNs = s.TOutput - g.prevUpdate
		s.NarrowTimeNs = s.TOutput - s.TScheduleStart
		g.t += int64(30_000 + r.IntN(20_000))
		s.TUpdateEnd = g.t
		g.prevUpdate = g.t
		s.GPUTimeNs = gpu
		s.HostPrepNs = int64(50_000 + r.IntN(20_000))
		s.WorkerRecvNs = Unknown
		s.SampleNs = Unknown
		s.Overlapped = g.i > 0
		g.running += newReqs - fin
		g.running = min(g.running, 256)
		g.kvUsed = min(g.kvUsed+int64(g.running)/16, 40000)
		s.NumWaiting = int32(r.IntN(4))
		s.NumRunning = g.running
		s.KVBlocksUsed = g.kvUsed
		s.KVBlocksTotal = 40000
		g.i++
	}
}

func simSteps(n int, seed uint64) []Step {
	out := make([]Step, n)
	newStepGen(seed).fill(out)
	return out
}

// simStepRequests, simRequests and simGPUSamples give small, varied rows of
// the other tables for round-trip tests.
func simStepRequests(n int, seed uint64) []StepRequest {
	r := rand.New(rand.NewPCG(seed, 11))
	out := make([]StepRequest, n)
	for i := range out {
		out[i] = StepRequest{
			StepID:             int64(i / 4),
			ReqID:              fmt.Sprintf("req-%d", r.IntN(n)),
			IsNew:              r.IntN(5) == 0,
			IsResumed:          r.IntN(20) == 0,
			IsPrefill:          r.IntN(3) == 0,
			NumScheduledTokens: int64(1 + r.IntN(512)),
			NumComputedTokens:  int64(r.IntN(8192)),
			PromptLen:          int64(r.IntN(4096)),
			PayloadBytes:       int64(r.IntN(1 << 16)),
		}
	}
	return out
}

func simRequests(n int, seed uint64) []Request {
	r := rand.New(rand.NewPCG(seed, 13))
	out := make([]Request, n)
	t := int64(0)
	for i := range out {
		t += int64(r.IntN(1_000_000))
		var ids []int64
		switch r.IntN(4) {
		case 0: // no list
		case 1:
			ids = []int64{}
		default:
			for k := range 1 + r.IntN(12) {
				ids = append(ids, int64(k)*1000+int64(r.IntN(1000)))
			}
		}
		st := []string{StatusFinished, StatusAborted, StatusUnfinished, StatusNotRun}[r.IntN(4)]
		out[i] = Request{
			ReqID: fmt.Sprintf("r%05d", i), ArrivalNs: t, PromptTokens: int64(r.IntN(4000)), OutputTokens: int64(r.IntN(500)),
			PrefixHashIDs: ids, FirstScheduledNs: t + 10, FirstTokenNs: t + 5000, FinishNs: Unknown,
			NumPreemptions: int32(r.IntN(3)), Status: st,
		}
	}
	return out
}

func simEngineSamples(n int, seed uint64) []EngineSample {
	r := rand.New(rand.NewPCG(seed, 19))
	out := make([]EngineSample, n)
	for i := range out {
		out[i] = EngineSample{TNs: int64(i) * 1_000_000_000, DPRank: int32(i%3) - 1, NumRunning: int32(r.IntN(256)),
			NumWaiting: int32(r.IntN(500)), KVUsage: r.Float64(), PromptTokensPerS: 1e4 * r.Float64(),
			GenerationTokensPerS: 2e3 * r.Float64(), WindowNs: 1_000_000_000}
	}
	return out
}

func simGPUSamples(n int, seed uint64) []GPUSample {
	r := rand.New(rand.NewPCG(seed, 17))
	out := make([]GPUSample, n)
	for i := range out {
		out[i] = GPUSample{
			TNs: int64(i) * 100_000_000, GPUIndex: int32(i % 2), SMClockMHz: 1980, MemClockMHz: 2619,
			PowerW: 300 + r.Float64()*400, PowerLimitW: 700, TemperatureC: int32(40 + r.IntN(30)),
			MemUsedBytes: int64(r.IntN(1 << 40)), MemTotalBytes: 143_771_000_000, UtilGPUPercent: int32(r.IntN(101)),
			UtilMemPercent: int32(r.IntN(101)),
		}
	}
	return out
}
