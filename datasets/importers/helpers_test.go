package importers

import (
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
)

// Real published inputs the repository carries, each folder with its
// ATTRIBUTION.md and LICENSE.
const (
	azureConv     = "../embedded/azure-conv-2023/AzureLLMInferenceTrace_conv.csv"
	azureCode     = "testdata/azure-code-2023/AzureLLMInferenceTrace_code_head200.csv"
	mooncakeConv  = "testdata/mooncake-fast25/conversation_trace_head300.jsonl"
	mooncakeSynth = "testdata/mooncake-fast25/synthetic_trace_head300.jsonl"
	vllmLlama     = "../embedded/llmservingsim-llama-3.1-8b"
	vllmQwen      = "testdata/llmservingsim-qwen3-30b-a3b"
)

// realFile is a published file the repository carries for the importer
// tests: under testdata/ (with its ATTRIBUTION.md) or embedded/.
func realFile(t testing.TB, rel string) string {
	t.Helper()
	_, err := os.Stat(rel)
	require.NoError(t, err, "real input %s is part of the repository", rel)
	return rel
}

// parseRequests runs a request importer on in-memory bytes.
func parseRequests(format string, b []byte, siblings map[string][]byte) ([]datasets.Request, *sink, error) {
	f, err := LookupFormat(format)
	if err != nil {
		return nil, nil, err
	}
	var rows []datasets.Request
	s := &sink{request: func(r datasets.Request) error { rows = append(rows, r); return nil }}
	err = f.run(bytesInput("in", b, siblings), s)
	return rows, s, err
}

func parseSteps(format string, b []byte) ([]datasets.Step, *sink, error) {
	f, err := LookupFormat(format)
	if err != nil {
		return nil, nil, err
	}
	var rows []datasets.Step
	s := &sink{step: func(r datasets.Step) error { rows = append(rows, r); return nil }}
	err = f.run(bytesInput("in", b, nil), s)
	return rows, s, err
}

// checkRequests asserts the invariants every imported request row holds.
func checkRequests(t testing.TB, rows []datasets.Request, sorted bool) {
	t.Helper()
	ids := map[string]bool{}
	for i, r := range rows {
		require.NotEmpty(t, r.ReqID, "row %d", i)
		require.False(t, ids[r.ReqID], "duplicate req_id %q", r.ReqID)
		ids[r.ReqID] = true
		require.GreaterOrEqual(t, r.ArrivalNs, int64(0), "row %d arrival", i)
		require.GreaterOrEqual(t, r.PromptTokens, int64(0), "row %d prompt", i)
		require.GreaterOrEqual(t, r.OutputTokens, int64(0), "row %d output", i)
		if sorted && i > 0 {
			require.GreaterOrEqual(t, r.ArrivalNs, rows[i-1].ArrivalNs, "row %d arrivals sorted", i)
		}
		prev := r.ArrivalNs
		for _, ev := range []int64{r.FirstScheduledNs, r.FirstTokenNs, r.FinishNs} {
			if ev == datasets.Unknown {
				continue
			}
			require.GreaterOrEqual(t, ev, prev, "row %d event order", i)
			prev = ev
		}
		require.Contains(t, []string{datasets.StatusNotRun, datasets.StatusFinished, datasets.StatusUnfinished, datasets.StatusAborted}, r.Status)
		if r.Status == datasets.StatusFinished && r.FinishNs == datasets.Unknown {
			t.Fatalf("row %d: finished without a finish time", i)
		}
	}
}

func checkSteps(t testing.TB, rows []datasets.Step) {
	t.Helper()
	for i, s := range rows {
		if s.Valid || s.Kind != "" {
			require.Contains(t, []string{datasets.KindPrefill, datasets.KindDecode, datasets.KindMixed}, s.Kind, "row %d", i)
		}
		require.GreaterOrEqual(t, s.NumPrefillRequests, int32(0))
		require.GreaterOrEqual(t, s.NumDecodeRequests, int32(0))
		require.GreaterOrEqual(t, s.SumPrefillTokens, int64(0))
		require.GreaterOrEqual(t, s.SumDecodeKVTokens, int64(0))
		require.GreaterOrEqual(t, s.NumWaiting, int32(0))
		require.True(t, s.WallTimeNs == datasets.Unknown || s.WallTimeNs >= 0, "row %d wall %d", i, s.WallTimeNs)
		require.Equal(t, s.Valid, s.InvalidReason == "", "row %d: valid iff no invalid_reason", i)
		require.Equal(t, datasets.Unknown, s.TScheduleStart)
		require.Equal(t, datasets.Unknown, s.GPUTimeNs)
	}
}

// emptyListsNil normalises read-back rows: a Parquet reader may return an
// empty list as nil or as []int64{}; both mean "no prefix hashes".
func emptyListsNil(rows []datasets.Request) []datasets.Request {
	for i := range rows {
		if len(rows[i].PrefixHashIDs) == 0 {
			rows[i].PrefixHashIDs = nil
		}
	}
	return rows
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// importRequests imports src into a temporary dataset and reads its
// requests back.
func importRequests(t *testing.T, format, src string) (*Result, *datasets.Dataset, []datasets.Request) {
	t.Helper()
	res, err := Import(format, src, t.TempDir()+"/ds", Options{})
	require.NoError(t, err)
	d, err := datasets.Open(res.Dir)
	require.NoError(t, err)
	rows, err := datasets.ReadAll[datasets.Request](d, datasets.TableRequests)
	require.NoError(t, err)
	rows = emptyListsNil(rows)
	checkRequests(t, rows, true)
	return res, d, rows
}

// requestCase parses in: with wantErr, an error containing it; otherwise
// rows that hold the invariants and equal want. It returns the sink.
func requestCase(t *testing.T, format, in string, siblings map[string][]byte, want []datasets.Request, wantErr string) *sink {
	t.Helper()
	rows, s, err := parseRequests(format, []byte(in), siblings)
	if wantErr != "" {
		require.ErrorContains(t, err, wantErr)
		return nil
	}
	require.NoError(t, err)
	checkRequests(t, rows, true)
	require.Equal(t, want, rows)
	return s
}
