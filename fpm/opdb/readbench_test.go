package opdb

import (
	"strings"
	"testing"

	"github.com/steplab/steplab/fpm"
	"github.com/stretchr/testify/require"
)

// benchInput is a small run of capture/worker/opbench.py as it writes it
// (json.dumps with sorted keys): the meta line, then each operation
// launched both ways.
const benchInput = `{"attention_backend": "triton", "device": "cuda:0", "gpu": "NVIDIA H200", "launches": ["graph", "eager"], "sm_count": 132, "table": "meta", "torch": "2.11.0+cu130", "triton": "3.6.0", "worker_generation": "piecewise"}
{"dtype": "bfloat16", "k": 64, "latency_ms": 0.004, "launch": "graph", "m": 8, "n": 128, "table": "gemm"}
{"dtype": "bfloat16", "host_ms": 0.009, "k": 64, "latency_ms": 0.011, "launch": "eager", "m": 8, "n": 128, "table": "gemm"}
{"dtype": "bfloat16", "latency_ms": 0.002, "launch": "graph", "m": 8, "n": 4096, "op": "rmsnorm", "table": "elementwise"}
{"dtype": "bfloat16", "latency_ms": 0.009, "launch": "eager", "m": 16, "n": 6144, "op": "rope", "table": "elementwise"}

{"batch_size": 2, "dtype": "bfloat16", "head_dim": 128, "isl": 512, "kv_cache_dtype": "bfloat16", "latency_ms": 0.05, "launch": "graph", "num_heads": 32, "num_key_value_heads": 8, "table": "context_attention"}
{"batch_size": 4, "dtype": "bfloat16", "head_dim": 128, "isl": 1024, "kv_cache_dtype": "bfloat16", "latency_ms": 0.03, "launch": "eager", "num_heads": 32, "num_key_value_heads": 8, "table": "generation_attention"}
{"distribution": "routing_skew_0", "dtype": "bfloat16", "ep": 1, "experts": 128, "hidden": 2048, "host_ms": 0.12, "inter": 768, "latency_ms": 0.2, "launch": "eager", "table": "moe", "tokens": 16, "top_k": 8, "tp": 1}
`

func TestReadBench(t *testing.T) {
	db, meta, err := ReadBench(strings.NewReader(benchInput))
	require.NoError(t, err)
	require.Equal(t, BenchMeta{GPU: "NVIDIA H200", Device: "cuda:0", Torch: "2.11.0+cu130", Triton: "3.6.0", SMCount: 132,
		Launches: []string{"graph", "eager"}, WorkerGeneration: "piecewise", AttentionBackend: "triton"}, meta)
	require.Equal(t, []fpm.GEMMRow{
		{DType: "bfloat16", M: 8, N: 128, K: 64, LatencyMs: 0.004},
		{DType: "bfloat16", M: 8, N: 128, K: 64, Eager: true, LatencyMs: 0.011, HostMs: 0.009},
	}, db.GEMM)
	require.Equal(t, []fpm.ElementwiseRow{
		{Op: fpm.OpRMSNorm, M: 8, N: 4096, DType: "bfloat16", LatencyMs: 0.002},
		{Op: fpm.OpRoPE, M: 16, N: 6144, DType: "bfloat16", Eager: true, LatencyMs: 0.009},
	}, db.Elementwise)
	require.Equal(t, []fpm.AttentionRow{{Batch: 2, SeqLen: 512, Heads: 32, KVHeads: 8, HeadDim: 128,
		DType: "bfloat16", KVDType: "bfloat16", LatencyMs: 0.05}}, db.ContextAttention)
	require.Equal(t, []fpm.AttentionRow{{Batch: 4, SeqLen: 1024, Heads: 32, KVHeads: 8, HeadDim: 128,
		DType: "bfloat16", KVDType: "bfloat16", Eager: true, LatencyMs: 0.03}}, db.GenerationAttention,
		"a generation row's isl is the KV length it attends to")
	require.Equal(t, []fpm.MoERow{{DType: "bfloat16", Tokens: 16, Hidden: 2048, Inter: 768, TopK: 8, Experts: 128, TP: 1, EP: 1,
		Distribution: "routing_skew_0", Eager: true, LatencyMs: 0.2, HostMs: 0.12}}, db.MoE)
	require.Empty(t, db.AllReduce)
	require.Zero(t, db.System, "the system is the caller's to fill")
}

// An interrupted run leaves a partial last line: what came before it is
// still a database.
func TestReadBenchTruncated(t *testing.T) {
	whole, _, err := ReadBench(strings.NewReader(benchInput))
	require.NoError(t, err)
	extra := `{"batch_size": 4, "dtype": "bfloat16", "head_dim": 128, "isl": 2048, "kv_cache_dtype": "bfloat16", "latency_ms": 0.04, "launch": "graph", "num_heads": 32, "num_key_value_heads": 8, "table": "generation_attention"}`
	for _, cut := range []int{1, 40, len(extra) - 1} {
		db, _, err := ReadBench(strings.NewReader(benchInput + extra[:cut]))
		require.NoError(t, err, "cut at %d", cut)
		require.Equal(t, whole, db, "cut at %d", cut)
	}
	// The same line complete is read.
	db, _, err := ReadBench(strings.NewReader(benchInput + extra))
	require.NoError(t, err)
	require.Len(t, db.GenerationAttention, 2)
}

func TestReadBenchRefuses(t *testing.T) {
	lines := strings.Split(strings.TrimSuffix(benchInput, "\n"), "\n")
	const gemm = 1 // index of the first GEMM line
	// with replaces line i (0-based) of the valid input by s.
	with := func(i int, s string) string {
		l := append([]string(nil), lines...)
		l[i] = s
		return strings.Join(l, "\n") + "\n"
	}
	// without drops the lines of a table.
	without := func(table string) string {
		var l []string
		for _, s := range lines {
			if !strings.Contains(s, `"table": "`+table+`"`) {
				l = append(l, s)
			}
		}
		require.Less(t, len(l), len(lines), table)
		return strings.Join(l, "\n") + "\n"
	}
	gemmLine := func(fields string) string {
		return `{"table": "gemm", "launch": "graph", "dtype": "bfloat16", ` + fields + `}`
	}
	cases := []struct {
		name, input, want string
	}{
		{"bad line in the middle", with(gemm, `{"table": "gemm", "m": 8,`), "opbench line 2: "},
		{"bad line before a blank line", with(4, `{"table": "gemm"`), "opbench line 5: "},
		{"bad meta", with(0, `{"table": "meta", "sm_count": "many"}`), "opbench line 1: "},
		{"unknown table", with(gemm, `{"table": "mla", "launch": "graph", "latency_ms": 0.1}`), `opbench line 2: unknown table "mla"`},
		{"zero experts", with(8, strings.Replace(lines[8], `"experts": 128`, `"experts": 0`, 1)), "opbench line 9: moe: experts must be a positive int32, got 0"},
		{"more picks than experts", with(8, strings.Replace(lines[8], `"top_k": 8`, `"top_k": 129`, 1)), "opbench line 9: moe: top_k 129 of 128 experts"},
		{"no routing", with(8, strings.Replace(lines[8], `"distribution": "routing_skew_0", `, ``, 1)), `distribution ""`},
		{"unknown launch", with(gemm, gemmLine(`"m": 8, "n": 8, "k": 8, "latency_ms": 0.1, "launch": "stream"`)), `opbench line 2: gemm: launch "stream"`},
		{"no launch", with(gemm, `{"table": "gemm", "m": 8, "n": 8, "k": 8, "latency_ms": 0.1}`), `opbench line 2: gemm: launch ""`},
		{"unknown element-wise op", with(3, `{"table": "elementwise", "launch": "graph", "op": "softmax", "m": 8, "n": 8, "latency_ms": 0.1}`),
			`opbench line 4: elementwise: op "softmax"`},
		{"host time on a graph row", with(gemm, gemmLine(`"m": 8, "n": 8, "k": 8, "latency_ms": 0.1, "host_ms": 0.05`)),
			"opbench line 2: gemm: host_ms must be a non-negative number, on eager rows only"},
		{"negative host time", with(gemm+1, `{"table": "gemm", "launch": "eager", "m": 8, "n": 8, "k": 8, "latency_ms": 0.1, "host_ms": -1}`),
			"opbench line 3: gemm: host_ms must be"},
		{"missing latency", with(gemm, gemmLine(`"m": 8, "n": 8, "k": 8`)), "opbench line 2: gemm: latency_ms must be a positive number"},
		{"null latency", with(gemm, gemmLine(`"m": 8, "n": 8, "k": 8, "latency_ms": null`)), "opbench line 2: gemm: latency_ms must be"},
		{"zero latency", with(gemm, gemmLine(`"m": 8, "n": 8, "k": 8, "latency_ms": 0`)), "opbench line 2: gemm: latency_ms must be"},
		{"negative latency", with(gemm, gemmLine(`"m": 8, "n": 8, "k": 8, "latency_ms": -0.1`)), "opbench line 2: gemm: latency_ms must be"},
		{"zero gemm size", with(gemm, gemmLine(`"m": 8, "n": 0, "k": 8, "latency_ms": 0.1`)), "opbench line 2: gemm: n must be a positive int32, got 0"},
		{"missing gemm size", with(gemm, gemmLine(`"m": 8, "n": 8, "latency_ms": 0.1`)), "opbench line 2: gemm: k must be a positive int32, got 0"},
		{"size past int32", with(gemm, gemmLine(`"m": 3000000000, "n": 8, "k": 8, "latency_ms": 0.1`)), "opbench line 2: gemm: m must be a positive int32"},
		{"negative attention size", with(6, strings.Replace(lines[6], `"num_key_value_heads": 8`, `"num_key_value_heads": -8`, 1)),
			"opbench line 7: context_attention: num_key_value_heads must be a positive int32, got -8"},
		{"zero isl", with(7, strings.Replace(lines[7], `"isl": 1024`, `"isl": 0`, 1)),
			"opbench line 8: generation_attention: isl must be a positive int32, got 0"},
		{"zero element-wise width", with(3, strings.Replace(lines[3], `"n": 4096`, `"n": 0`, 1)), "opbench line 4: elementwise: n must be a positive int32, got 0"},
		{"fractional size", with(gemm, gemmLine(`"m": 1.5, "n": 8, "k": 8, "latency_ms": 0.1`)), "opbench line 2: "},
		{"no gemm", without("gemm"), "no GEMM, context or generation attention"},
		{"no context attention", without("context_attention"), "no GEMM, context or generation attention"},
		{"no generation attention", without("generation_attention"), "no GEMM, context or generation attention"},
		{"only meta", lines[0] + "\n", "no GEMM"},
		{"empty", "", "no GEMM"},
		{"line too long", benchInput + `{"table": "` + strings.Repeat("x", 2<<20) + `"}` + "\n" + lines[gemm] + "\n", "opbench: "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db, _, err := ReadBench(strings.NewReader(c.input))
			require.ErrorContains(t, err, c.want)
			require.Nil(t, db)
		})
	}
	// Without the element-wise table the run is still a database (the
	// table is optional), so the cases above fail for what they name.
	db, _, err := ReadBench(strings.NewReader(without("elementwise")))
	require.NoError(t, err)
	require.Empty(t, db.Elementwise)
}
