package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets/importers"
)

// Every format has its own help page: what it reads and an example that
// imports its committed sample into its own out/ folder.
func TestImportFormatPages(t *testing.T) {
	for _, f := range importers.Formats() {
		t.Run(f.Name, func(t *testing.T) {
			h, ok := importHelp[f.Name]
			require.True(t, ok, "no help page for import %s", f.Name)
			assert.Contains(t, h.example, "steplab import "+f.Name+" datasets/importers/testdata/"+importSamples[f.Name][:strings.IndexAny(importSamples[f.Name], "/.")])
			assert.Contains(t, h.example, "-o out/import-"+f.Name)
			page := steplab(t, "import", f.Name, "--help")
			require.Equal(t, 0, page.code, page.stderr)
			assert.Contains(t, page.stdout, h.example)
			assert.Contains(t, page.stdout, "Usage:\n  steplab import "+f.Name+" SRC -o DIR")
			assert.NotContains(t, page.stdout, "Formats (steplab import FORMAT --help", "the generic page")
		})
	}
}

// A dataset that cannot be replayed says why and what to do: a summary has
// no requests, an import without a GPU needs --hardware.
func TestImportReplayHints(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, format, src, says string
	}{
		{"summary", "sglang-bench", "bench-serving/h200-benchmarks-sglang/deepseek_dp_mla_output.jsonl", "holds the summary of a benchmark run, no requests to replay: re-run the benchmark with its per-request output"},
		{"lengths without times", "vllm-bench", "bench-serving/inferencex-glm-5.2/sglang_fp4_mtp_tp4_conc1_isl8192_osl1024.json", "holds the summary of a benchmark run, no requests to replay: re-run the benchmark with its per-request output"},
		{"detailed without a gpu", "vllm-bench", "bench-serving/vllm_bench_serve.json", "was imported from a file that does not say what ran: import it again with --hardware GPU --model MODEL (steplab import vllm-bench --help)"},
		{"no gpu", "aiperf", "aiperf/profile_export.jsonl", "was imported from a file that does not say what ran: import it again with --hardware GPU --model MODEL (steplab import aiperf --help)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := filepath.Join(dir, tt.name)
			r := steplab(t, "import", tt.format, filepath.Join("..", "..", "datasets", "importers", "testdata", tt.src), "-o", ds)
			require.Equal(t, 0, r.code, r.stderr)
			r = steplab(t, "replay", "requests", "roofline", ds, "-o", filepath.Join(dir, tt.name+"-replay"))
			assert.Equal(t, 2, r.code)
			assert.Contains(t, r.stderr, tt.says)
		})
	}
}
