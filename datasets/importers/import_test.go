package importers

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/datasets/embedded"
)

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}

func fileSHA(t testing.TB, path string) string {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func TestImportWritesDatasetWithProvenance(t *testing.T) {
	dir := t.TempDir()
	src := dir + "/trace.csv"
	const content = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,396,109\n"
	writeFile(t, src, content)
	out := dir + "/ds"
	var progressed int64
	res, err := Import("azure", src, out, Options{ToolVersion: "v0.1.0", Command: []string{"steplab", "import", "azure", src, "-o", out},
		Progress: func(n int64) { progressed = n }})
	require.NoError(t, err)
	require.Equal(t, int64(2), res.Rows)
	require.Equal(t, int64(4_314_579_000), res.SpanNs)
	require.Equal(t, fileSHA(t, src), res.SHA256)
	require.Equal(t, int64(len(content)), progressed, "progress reports every byte read")

	d, err := datasets.Open(out)
	require.NoError(t, err)
	m := d.Manifest
	require.Equal(t, datasets.DatasetComplete, m.Status)
	require.Equal(t, "ds", m.Name)
	require.Equal(t, datasets.Source{Kind: "import", Format: "azure", Path: src, SHA256: res.SHA256,
		Detail: map[string]string{"first_arrival_utc": "2023-11-16T18:15:46.68059Z"}}, m.Source)
	require.Equal(t, datasets.Tool{Name: "steplab", Version: "v0.1.0", Command: []string{"steplab", "import", "azure", src, "-o", out}}, m.Tool)
	require.Equal(t, res.SHA256, m.Workload.InputSHA256)
	require.Equal(t, int64(2), m.Tables[datasets.TableRequests].Rows)
	rows, err := datasets.ReadAll[datasets.Request](d, datasets.TableRequests)
	require.NoError(t, err)
	rows = emptyListsNil(rows)
	require.Equal(t, []datasets.Request{
		{ReqID: "000000", ArrivalNs: 0, PromptTokens: 374, OutputTokens: 44, FirstScheduledNs: -1, FirstTokenNs: -1, FinishNs: -1, Status: "not_run"},
		{ReqID: "000001", ArrivalNs: 4_314_579_000, PromptTokens: 396, OutputTokens: 109, FirstScheduledNs: -1, FirstTokenNs: -1, FinishNs: -1, Status: "not_run"},
	}, rows)

	// Existing output: refused without Overwrite, replaced with it.
	_, err = Import("azure", src, out, Options{})
	require.ErrorContains(t, err, "already exists and is not empty (use --force to overwrite)")
	_, err = Import("azure", src, out, Options{Overwrite: true})
	require.NoError(t, err)
	// A failed import with Overwrite keeps the old dataset.
	writeFile(t, dir+"/bad.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,x,1\n")
	_, err = Import("azure", dir+"/bad.csv", out, Options{Overwrite: true})
	require.ErrorContains(t, err, `bad.csv:2: ContextTokens: "x" is not an integer`)
	_, err = datasets.Open(out)
	require.NoError(t, err, "the previous dataset survives a failed --force import")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		require.NotContains(t, e.Name(), ".importing-", "no temporary directory left behind")
	}
}

func TestImportStepsDataset(t *testing.T) {
	out := t.TempDir() + "/ds"
	res, err := Import("dynamo-fpm-artifact", "testdata/artifact_complete.json", out, Options{})
	require.NoError(t, err)
	require.Equal(t, int64(8), res.Rows)
	d, err := datasets.Open(out)
	require.NoError(t, err)
	require.True(t, d.Has(datasets.TableSteps))
	require.False(t, d.Has(datasets.TableRequests))
	steps, err := datasets.ReadAll[datasets.Step](d, datasets.TableSteps)
	require.NoError(t, err)
	require.Len(t, steps, 8)
	require.Equal(t, int64(412_733_000), steps[0].WallTimeNs)
	require.Equal(t, &datasets.MeasurementPolicy{Decode: "steady_state_second_step", Prefill: "single_step"}, d.Manifest.MeasurementPolicy)
}

func TestImportArgumentErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct{ format, src, out, want string }{
		{"csv", "x", dir + "/a", `unknown import format "csv" (have: azure, mooncake, vllm-requests, dynamo-fpm-artifact, dynamo-fpm, vllm-bench, sglang-bench, aiperf, burstgpt, blis; a Parquet or CSV table of your own: steplab import table)`},
		{"azure", dir + "/missing.csv", dir + "/a", "no such file or directory"},
		{"azure", dir, dir + "/a", "is a directory; the azure importer reads one file"},
		{"azure", "embedded:nope", dir + "/a", `no embedded dataset "nope"`},
		{"mooncake", "embedded:azure-conv-2023", dir + "/a", "embedded:azure-conv-2023 is a azure trace, not mooncake (try: steplab import azure embedded:azure-conv-2023)"},
		{"azure", "embedded:azure-conv-2023", "", "no output directory"},
	}
	for _, tt := range tests {
		_, err := Import(tt.format, tt.src, tt.out, Options{})
		require.ErrorContains(t, err, tt.want, "%s %s", tt.format, tt.src)
	}
	// A non-dataset directory is never overwritten.
	require.NoError(t, os.MkdirAll(dir+"/notds", 0o755))
	writeFile(t, dir+"/notds/keep.txt", "x")
	_, err := Import("azure", "embedded:azure-conv-2023", dir+"/notds", Options{Overwrite: true})
	require.ErrorContains(t, err, "refusing to overwrite a directory that is not a steplab dataset")
	require.FileExists(t, dir+"/notds/keep.txt")
}

func TestEmbeddedSourcesImport(t *testing.T) {
	for _, name := range embedded.Names() {
		d, err := embedded.Lookup(name)
		require.NoError(t, err)
		out := t.TempDir() + "/ds"
		res, err := Import(d.Format, embedded.Prefix+name, out, Options{})
		require.NoError(t, err, name)
		require.Positive(t, res.Rows)
		require.Len(t, res.SHA256, 64)
		require.Equal(t, embedded.Prefix+name, res.Source)
	}
}
