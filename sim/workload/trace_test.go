package workload

import (
	"path/filepath"
	"testing"

	"github.com/steplab/steplab/datasets"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeTrace writes a requests-only dataset (as an importer would, with
// 512-token prefix hash blocks) with small parts so that streaming crosses
// part boundaries.
func writeTrace(t *testing.T, rows []datasets.Request) string {
	return writeTraceParams(t, rows, map[string]string{datasets.ParamHashBlockSize: "512"})
}

// writeTraceParams is writeTrace with the manifest's workload.params.
func writeTraceParams(t *testing.T, rows []datasets.Request, params map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "trace")
	m := datasets.Manifest{Source: datasets.Source{Kind: "import", Format: "test"}}
	if params != nil {
		m.Workload = &datasets.Workload{Kind: "trace", Params: params}
	}
	w, err := datasets.Create(dir, m, datasets.CreateOptions{})
	require.NoError(t, err)
	tw, err := datasets.NewTableWriter[datasets.Request](w, datasets.TableRequests, datasets.TableOptions{RowGroupRows: 3, PartRows: 4})
	require.NoError(t, err)
	require.NoError(t, tw.Write(rows))
	require.NoError(t, tw.Close())
	require.NoError(t, w.Close())
	return dir
}

func traceRows(n int) []datasets.Request {
	rows := make([]datasets.Request, n)
	for i := range rows {
		rows[i] = datasets.Request{
			ReqID:        "r" + itoa(i),
			ArrivalNs:    int64(1000 + 100*i),
			PromptTokens: int64(600 + i),
			OutputTokens: int64(1 + i),
			Status:       datasets.StatusNotRun,
		}
		if i%2 == 0 {
			rows[i].PrefixHashIDs = []int64{1, 2, int64(i)}
		}
	}
	return rows
}

func trace(t *testing.T, cfg TraceConfig) *TraceSource {
	t.Helper()
	s, err := NewTrace(cfg)
	require.NoError(t, err)
	return s
}

func TestTraceAsRecorded(t *testing.T) {
	dir := writeTrace(t, traceRows(10))
	s := trace(t, TraceConfig{Dir: dir, WarmupRequests: 2})
	assert.False(t, s.InMemory())
	assert.Equal(t, 10, s.Len())
	assert.Equal(t, 512, s.BlockSize(), "the manifest's hash block size")
	arr := drain(t, s)
	require.Len(t, arr, 10)
	for i, a := range arr {
		assert.Equal(t, "r"+itoa(i), a.ID)
		assert.Equal(t, int64(1000+100*i), a.AtNs)
		assert.Equal(t, 600+i, a.PromptTokens)
		assert.Equal(t, 1+i, a.OutputTokens)
		assert.Equal(t, i < 2, a.Warmup)
		if i%2 == 0 {
			require.Len(t, a.PrefixHashes, 3)
			assert.Equal(t, chainHashes([]int64{1, 2, int64(i)}, nil), a.PrefixHashes)
		} else {
			assert.Nil(t, a.PrefixHashes)
		}
	}
	// Shared prefix ids give shared chain entries.
	assert.Equal(t, arr[0].PrefixHashes[:2], arr[2].PrefixHashes[:2])
	_, st := s.NextAt()
	assert.Equal(t, Exhausted, st)
	assert.NoError(t, s.Complete("r0", 0))
}

// The hash block size is the configured one, else the manifest's; a trace
// with prefix hashes and neither is refused rather than given a guess.
func TestTraceHashBlockSize(t *testing.T) {
	plain := traceRows(4)
	for i := range plain {
		plain[i].PrefixHashIDs = nil
	}
	for _, tc := range []struct {
		name       string
		rows       []datasets.Request
		params     map[string]string
		configured int
		want       int
		err        string
	}{
		{name: "configured wins", rows: traceRows(4), params: map[string]string{datasets.ParamHashBlockSize: "512"}, configured: 16, want: 16},
		{name: "manifest", rows: traceRows(4), params: map[string]string{datasets.ParamHashBlockSize: "16"}, want: 16},
		{name: "unknown", rows: traceRows(4), err: "requests carry prefix_hash_ids but the manifest records no workload.params.hash_block_size"},
		{name: "bad manifest", rows: traceRows(4), params: map[string]string{datasets.ParamHashBlockSize: "0"}, err: `workload.params.hash_block_size="0": must be a token count >= 1`},
		{name: "no hashes", rows: plain, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewTrace(TraceConfig{Dir: writeTraceParams(t, tc.rows, tc.params), BlockSize: tc.configured})
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, s.BlockSize())
		})
	}
}

func TestTraceWindowLimitRebase(t *testing.T) {
	dir := writeTrace(t, traceRows(10))
	s := trace(t, TraceConfig{Dir: dir, StartNs: 1200, EndNs: 1800, Limit: 3, Rebase: true, BlockSize: 16})
	assert.Equal(t, 16, s.BlockSize())
	arr := drain(t, s)
	require.Len(t, arr, 3)
	assert.Equal(t, []string{"r2", "r3", "r4"}, []string{arr[0].ID, arr[1].ID, arr[2].ID})
	assert.Equal(t, []int64{0, 100, 200}, []int64{arr[0].AtNs, arr[1].AtNs, arr[2].AtNs})
}

func TestTraceRescale(t *testing.T) {
	// Recorded rate: 10 arrivals 100 ns apart = 1e7 rps; target 1000 rps.
	dir := writeTrace(t, traceRows(10))
	s := trace(t, TraceConfig{Dir: dir, RateRPS: 1000})
	assert.InEpsilon(t, 1e4, s.Scale(), 1e-9)
	arr := drain(t, s)
	require.Len(t, arr, 10)
	assert.Equal(t, int64(1000), arr[0].AtNs, "first arrival keeps its time")
	rate := float64(len(arr)-1) / (float64(arr[9].AtNs-arr[0].AtNs) / 1e9)
	assert.InEpsilon(t, 1000, rate, 1e-9)
	for i := 1; i < len(arr); i++ {
		assert.Equal(t, int64(1e6), arr[i].AtNs-arr[i-1].AtNs)
	}
}

func TestTraceUnsortedIsSorted(t *testing.T) {
	rows := traceRows(9)
	// A capture writes requests as they finish: shuffle deterministically.
	rows[0], rows[5] = rows[5], rows[0]
	rows[2], rows[7] = rows[7], rows[2]
	rows[3].ArrivalNs = rows[4].ArrivalNs // a tie keeps table order
	dir := writeTrace(t, rows)
	s := trace(t, TraceConfig{Dir: dir, Limit: 6})
	assert.True(t, s.InMemory())
	arr := drain(t, s)
	require.Len(t, arr, 6)
	for i := 1; i < len(arr); i++ {
		require.GreaterOrEqual(t, arr[i].AtNs, arr[i-1].AtNs)
	}
	assert.Equal(t, "r0", arr[0].ID)
	assert.Equal(t, "r3", arr[3].ID)
	assert.Equal(t, "r4", arr[4].ID)
}

func TestTraceErrors(t *testing.T) {
	good := writeTrace(t, traceRows(3))
	bad := traceRows(3)
	bad[1].PromptTokens = 0
	badDir := writeTrace(t, bad)
	badOut := traceRows(3)
	badOut[2].OutputTokens = -1
	badOutDir := writeTrace(t, badOut)
	emptyDir := writeTrace(t, nil)
	one := writeTrace(t, traceRows(1))

	cases := []struct {
		name string
		cfg  TraceConfig
		want string
	}{
		{"no dir", TraceConfig{}, "Dir is empty"},
		{"missing", TraceConfig{Dir: filepath.Join(t.TempDir(), "nope")}, "no such file"},
		{"negative rate", TraceConfig{Dir: good, RateRPS: -2}, "RateRPS=-2"},
		{"bad window", TraceConfig{Dir: good, StartNs: 10, EndNs: 5}, "window [StartNs=10, EndNs=5) is empty"},
		{"negative limit", TraceConfig{Dir: good, Limit: -1}, "Limit=-1"},
		{"zero prompt", TraceConfig{Dir: badDir}, `row 1 (req_id "r1"): prompt_tokens=0`},
		{"negative output", TraceConfig{Dir: badOutDir}, "output_tokens=-1"},
		{"empty", TraceConfig{Dir: emptyDir}, "no requests in the window"},
		{"window misses", TraceConfig{Dir: good, StartNs: 1e9}, "no requests in the window"},
		{"rescale one", TraceConfig{Dir: one, RateRPS: 5}, "cannot rescale"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewTrace(tc.cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	// A bad row outside the window does not matter.
	s, err := NewTrace(TraceConfig{Dir: badDir, EndNs: 1050})
	require.NoError(t, err)
	assert.Len(t, drain(t, s), 1)
}

func TestLoadEmpirical(t *testing.T) {
	dir := writeTrace(t, traceRows(5))
	e, err := LoadEmpirical(dir)
	require.NoError(t, err)
	assert.Equal(t, 5, e.Len())
	assert.Equal(t, []int32{600, 601, 602, 603, 604}, e.Prompt)
	assert.Equal(t, []int32{1, 2, 3, 4, 5}, e.Output)

	bad := traceRows(2)
	bad[1].OutputTokens = 0
	_, err = LoadEmpirical(writeTrace(t, bad))
	assert.ErrorContains(t, err, `row 1 (req_id "r1")`)
	_, err = LoadEmpirical(writeTrace(t, nil))
	assert.ErrorContains(t, err, "requests table is empty")
}

// A trace with requests the engine's max_model_len cannot hold is refused
// before it runs, naming the longest; the window's limit decides which
// requests count, in sorted and unsorted tables alike.
func TestTraceBeyondMaxModelLen(t *testing.T) {
	rows := traceRows(10) // request i needs 601 + 2i tokens
	unsorted := append([]datasets.Request(nil), rows...)
	unsorted[0], unsorted[9] = unsorted[9], unsorted[0]
	for _, c := range []struct {
		name  string
		rows  []datasets.Request
		limit int
		max   int
		err   string
	}{
		{"all fit", rows, 0, 619, ""},
		{"two too long", rows, 0, 616, `2 requests need more than max_model_len 616 tokens (the longest, "r9", has 609 prompt + 10 output tokens): raise engine.max_model_len to 619`},
		{"limit excludes them", rows, 8, 616, ""},
		{"unsorted", unsorted, 0, 616, `"r9"`},
		{"unsorted, limited", unsorted, 8, 616, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewTrace(TraceConfig{Dir: writeTrace(t, c.rows), Limit: c.limit, MaxModelLen: c.max})
			if c.err == "" {
				assert.NoError(t, err)
			} else {
				assert.ErrorContains(t, err, c.err)
			}
		})
	}
}
