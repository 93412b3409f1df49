package planner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/internal/rewrite"
)

// The launch settings of an aggregated and of a disaggregated
// expert-parallel configuration, against golden files.
func TestLaunchGolden(t *testing.T) {
	tests := []struct {
		name string
		c    Config
	}{
		{"agg", Config{Hardware: "H100-SXM", Model: "Llama-3.1-70B", TensorParallel: 4, KVCacheDType: "fp8", MaxNumSeqs: 128,
			MaxNumBatchedTokens: 8192, Router: "least_requests", Pools: []PoolConfig{{Name: "agg", Role: "both", Replicas: 2}}}},
		{"disagg-ep", Config{Hardware: "B200", Model: "Qwen/Qwen3-235B-A22B-FP8", TensorParallel: 1, WeightDType: "fp8", MaxNumSeqs: 256,
			MaxNumBatchedTokens: 8192, Router: "kv", Pools: []PoolConfig{{Name: "prefill", Role: "prefill", Replicas: 4, ExpertParallel: 4},
				{Name: "decode", Role: "decode", Replicas: 8, ExpertParallel: 8}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := tt.c.Graph(tt.name)
			require.NoError(t, err)
			got := tt.c.Layout() + "\n\n" + strings.Join(tt.c.VLLMArgs(), "\n") + "\n\n" + string(g)
			path := filepath.Join("testdata", "launch", tt.name+".txt")
			if rewrite.Requested() {
				require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
				require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run go test ./planner -run TestLaunchGolden -rewrite")
			assert.Equal(t, string(want), got)
		})
	}
}
