package export

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/datasets/importers"
)

func readRequests(t *testing.T, dir string) []datasets.Request {
	t.Helper()
	d, err := datasets.Open(dir)
	require.NoError(t, err)
	rows, err := datasets.ReadAll[datasets.Request](d, datasets.TableRequests)
	require.NoError(t, err)
	for i := range rows {
		if len(rows[i].PrefixHashIDs) == 0 {
			rows[i].PrefixHashIDs = nil
		}
	}
	return rows
}

// A trace BLIS wrote, imported and exported again, imports to the same
// requests: arrivals, lengths, chunk times, statuses and prefix groups.
func TestBLISRoundTrip(t *testing.T) {
	for _, name := range []string{"qwen3-14b-run", "prefix-affinity-run"} {
		t.Run(name, func(t *testing.T) {
			tmp := t.TempDir()
			src := filepath.Join("..", "importers", "testdata", "blis", name+".csv")
			_, err := importers.Import("blis", src, filepath.Join(tmp, "a"), importers.Options{})
			require.NoError(t, err)
			res, err := BLISTrace(filepath.Join(tmp, "a"), filepath.Join(tmp, "trace"))
			require.NoError(t, err)
			require.Equal(t, filepath.Join(tmp, "trace.csv"), res.Data)
			_, err = importers.Import("blis", res.Data, filepath.Join(tmp, "b"), importers.Options{})
			require.NoError(t, err)
			require.Equal(t, readRequests(t, filepath.Join(tmp, "a")), readRequests(t, filepath.Join(tmp, "b")))

			f, err := os.Open(res.Data)
			require.NoError(t, err)
			defer f.Close()
			recs, err := csv.NewReader(f).ReadAll()
			require.NoError(t, err)
			require.Equal(t, importers.BLISColumns, recs[0], "BLIS's column order")
			require.Len(t, recs, 1+res.Requests)
		})
	}
}

// A vLLM run exports its model and engine limits into the header and its
// measured times into the chunk columns (mode real).
func TestBLISExportOfARecordedRun(t *testing.T) {
	tmp := t.TempDir()
	_, err := importers.Import("vllm-requests", "embedded:llmservingsim-llama-3.1-8b", filepath.Join(tmp, "ds"), importers.Options{})
	require.NoError(t, err)
	res, err := BLISTrace(filepath.Join(tmp, "ds"), filepath.Join(tmp, "llama"))
	require.NoError(t, err)
	require.Equal(t, 300, res.Requests)
	hdr, err := os.ReadFile(res.Header)
	require.NoError(t, err)
	for _, want := range []string{"trace_version: 2", "time_unit: microseconds", "mode: real", "model: meta-llama/Llama-3.1-8B", "max_num_seqs: 128", "workload_seed: 42"} {
		require.Contains(t, string(hdr), want)
	}
	data, err := os.ReadFile(res.Data)
	require.NoError(t, err)
	// bench-0: arrival 0, first token 170.723478 ms, finish 15.714600107 s.
	require.Contains(t, strings.Split(string(data), "\n")[1], ",0,0,170723,15714600,0,ok,,")

	_, err = BLISTrace(filepath.Join(tmp, "nope"), filepath.Join(tmp, "x"))
	require.Error(t, err)
}
