package workload

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func baseGrid() GridConfig {
	return GridConfig{
		MaxModelLen: 8192, MaxNumSeqs: 64, MaxNumBatchedTokens: 2048,
		BlockSize: 16, NumGPUBlocks: 4000,
		CaptureSizes: []int{1, 2, 4, 8, 16, 32},
	}
}

func decodeOnly(pts []Point) []Point {
	var out []Point
	for _, p := range pts {
		if p.Type == PointDecode && !p.Warmup {
			out = append(out, p)
		}
	}
	return out
}

func TestGridValidation(t *testing.T) {
	cases := []struct {
		name string
		edit func(*GridConfig)
		want string
	}{
		{"policy", func(c *GridConfig) { c.Policy = "first_step" }, `unknown Policy "first_step"`},
		{"mode", func(c *GridConfig) { c.Mode = "mixed" }, `unknown Mode "mixed"`},
		{"max model len", func(c *GridConfig) { c.MaxModelLen = 0 }, "MaxModelLen=0"},
		{"seqs", func(c *GridConfig) { c.MaxNumSeqs = -1 }, "MaxNumSeqs=-1"},
		{"blocks", func(c *GridConfig) { c.NumGPUBlocks = 0 }, "NumGPUBlocks=0"},
		{"capture", func(c *GridConfig) { c.CaptureSizes = []int{8, 0} }, "CaptureSizes[1]=0"},
		{"samples", func(c *GridConfig) { c.DecodeMaxKVSamples = 1 }, "DecodeMaxKVSamples=1"},
		// Seed 004: the degenerate max_model_len==3 configuration must be
		// refused, not crash the engine (clamp-aware bound max(ctx,2)+2).
		{"max_model_len 3 steady", func(c *GridConfig) { c.MaxModelLen = 3 }, "MaxModelLen=3: the steady_state_second_step decode grid needs >= 4"},
		{"batch over seqs", func(c *GridConfig) { c.DecodeBatchSizes = []int{8, 65} }, "DecodeBatchSizes[1]=65 exceeds MaxNumSeqs=64"},
		{"batch over kv", func(c *GridConfig) {
			c.MaxNumSeqs = 4096
			c.MaxNumBatchedTokens = 8192
			c.DecodeBatchSizes = []int{4001}
		}, "DecodeBatchSizes[0]=4001 does not fit the KV cache"},
		{"context over len", func(c *GridConfig) { c.DecodeContexts = []int{8191} }, "DecodeContexts[0]=8191: needs 8191+2 <= MaxModelLen=8192"},
		{"prefill over budget", func(c *GridConfig) { c.PrefillTokens = []int{4096} }, "PrefillTokens[0]=4096 exceeds MaxNumBatchedTokens=2048"},
		{"prefill batch", func(c *GridConfig) { c.PrefillBatchSizes = []int{100} }, "PrefillBatchSizes[0]=100 exceeds MaxNumSeqs=64"},
		{"warmups", func(c *GridConfig) { c.Warmups = -1 }, "Warmups=-1"},
		{"empty decode", func(c *GridConfig) {
			c.DecodeBatchSizes = []int{64}
			c.DecodeContexts = []int{4000}
		}, "no decode point fits"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := baseGrid()
			tc.edit(&c)
			_, err := BuildGrid(c)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	// max_model_len 3 is fine for the admission policy and for prefill only.
	c := baseGrid()
	c.MaxModelLen = 3
	c.Policy = PolicyAdmissionStep
	_, err := BuildGrid(c)
	assert.NoError(t, err)
	c.Policy, c.Mode = "", ModePrefill
	_, err = BuildGrid(c)
	assert.NoError(t, err)
}

func TestGridSteadyClamping(t *testing.T) {
	c := baseGrid()
	c.Mode = ModeDecode
	c.DecodeBatchSizes = []int{4}
	c.DecodeContexts = []int{1, 2, 100}
	pts, err := BuildGrid(c)
	require.NoError(t, err)
	require.Len(t, pts, 3)

	ctx1 := pts[0]
	assert.True(t, ctx1.Clamped)
	assert.Equal(t, []int{1, 1, 1, 1}, ctx1.RequestedContextPerReq)
	assert.Equal(t, []int{2, 2, 2, 2}, ctx1.ContextPerReq)
	assert.Equal(t, 4*1+4, ctx1.TotalKVReadTokens, "sum(max(1,ctx-1)) + B")
	assert.Contains(t, ctx1.SampleReasons, ReasonContextClamped)
	assert.Equal(t, []int{1, 1, 1, 1}, ctx1.Plan.PrecomputedTokens)

	ctx2 := pts[1]
	assert.False(t, ctx2.Clamped)
	assert.NotContains(t, ctx2.SampleReasons, ReasonContextClamped)
	assert.Equal(t, []int{2, 2, 2, 2}, ctx2.ContextPerReq)
	assert.Equal(t, []int{1, 1, 1, 1}, ctx2.Plan.PrecomputedTokens)

	ctx100 := pts[2]
	assert.Equal(t, PolicySteadyStateSecondStep, ctx100.Plan.Policy)
	assert.Equal(t, 1, ctx100.Plan.MeasuredStep)
	assert.Equal(t, 2, ctx100.Plan.Steps())
	assert.Equal(t, []int{99, 99, 99, 99}, ctx100.Plan.PrecomputedTokens)
	assert.Equal(t, []int{1, 1, 1, 1}, ctx100.Plan.AdmitTokens)
	assert.Equal(t, 400, ctx100.TotalKVReadTokens)
	assert.Equal(t, []string{ReasonCapture, ReasonExplicit}, ctx100.SampleReasons)
	assert.Equal(t, 4, ctx100.ExpectedCaptureSize)

	// The injection: new requests one token short, finishing with the
	// measured (second) step.
	arr := ctx100.Arrivals("b3-", 77)
	require.Len(t, arr, 4)
	for i, a := range arr {
		assert.Equal(t, "b3-"+itoa(i), a.ID)
		assert.Equal(t, int64(77), a.AtNs)
		assert.Equal(t, 99, a.PrecomputedTokens)
		assert.Equal(t, 100, a.PromptTokens)
		assert.Equal(t, 2, a.OutputTokens)
	}
}

func TestGridAdmissionPolicy(t *testing.T) {
	c := baseGrid()
	c.Mode = ModeDecode
	c.Policy = PolicyAdmissionStep
	c.DecodeBatchSizes = []int{2}
	c.DecodeContexts = []int{1, 50}
	pts, err := BuildGrid(c)
	require.NoError(t, err)
	require.Len(t, pts, 2)
	for _, p := range pts {
		assert.False(t, p.Clamped, "the admission step can measure ctx=1")
		assert.Equal(t, p.RequestedContextPerReq, p.ContextPerReq)
		assert.Equal(t, p.ContextPerReq, p.Plan.PrecomputedTokens)
		assert.Equal(t, 0, p.Plan.MeasuredStep)
		assert.Equal(t, PolicyAdmissionStep, p.Plan.Policy)
	}
	arr := pts[1].Arrivals("x", 0)
	assert.Equal(t, 50, arr[0].PrecomputedTokens)
	assert.Equal(t, 51, arr[0].PromptTokens)
	assert.Equal(t, 1, arr[0].OutputTokens)
}

func TestGridDerivedAxes(t *testing.T) {
	pts, err := BuildGrid(baseGrid())
	require.NoError(t, err)
	// Prefill first, largest first; then decode.
	firstDecode := slices.IndexFunc(pts, func(p Point) bool { return p.Type == PointDecode })
	require.Greater(t, firstDecode, 0)
	for i, p := range pts {
		assert.Equal(t, int64(i+1), p.BenchmarkID)
		if i < firstDecode {
			require.Equal(t, PointPrefill, p.Type)
			if i > 0 {
				require.LessOrEqual(t, p.TotalPrefillTokens, pts[i-1].TotalPrefillTokens)
			}
		} else {
			require.Equal(t, PointDecode, p.Type)
		}
	}
	assert.Equal(t, 2048, pts[0].TotalPrefillTokens)
	assert.ElementsMatch(t, []string{ReasonEagerTail, ReasonEngineLimit}, pts[0].SampleReasons)

	// Decode batch axis: captures C and C+1, ×2 tail, KV-feasible maximum.
	var batches []int
	for _, p := range decodeOnly(pts) {
		if len(batches) == 0 || batches[len(batches)-1] != p.BatchSize {
			batches = append(batches, p.BatchSize)
		}
	}
	assert.Equal(t, []int{1, 2, 3, 4, 5, 8, 9, 16, 17, 32, 33, 64}, batches)

	reasons := map[int][]string{}
	kv := map[int][]int{}
	for _, p := range decodeOnly(pts) {
		if !p.Clamped {
			reasons[p.BatchSize] = p.SampleReasons
		}
		kv[p.BatchSize] = append(kv[p.BatchSize], p.TotalKVReadTokens)
	}
	assert.Equal(t, []string{ReasonCapture}, reasons[32])
	assert.Equal(t, []string{ReasonPostCapture, ReasonEagerTail, ReasonGeometricTail}, reasons[33])
	assert.Equal(t, []string{ReasonEagerTail, ReasonEngineLimit}, reasons[64])
	assert.Equal(t, []string{ReasonCapture, ReasonPostCapture}, reasons[2])
	// KV axis of B=8 under the steady policy: {B (clamped to 2B), 2^k >= B, max}.
	assert.Equal(t, 16, kv[8][0])
	assert.Equal(t, []int{16, 32, 64, 128}, kv[8][1:5])
	// B=1 max feasible: max(ctx,2)+2 <= 8192.
	assert.Equal(t, 8190, kv[1][len(kv[1])-1])

	// Eager warm-up replicas: once per eager shape.
	var eager []int
	for _, p := range decodeOnly(pts) {
		if p.EagerWarmup {
			eager = append(eager, p.BatchSize)
		}
		if p.ExpectedCaptureSize != 0 {
			assert.False(t, p.EagerWarmup)
		}
	}
	assert.Equal(t, []int{33, 64}, eager)
}

func TestGridFeasibility(t *testing.T) {
	c := baseGrid()
	c.Mode = ModeDecode
	pts, err := BuildGrid(c)
	require.NoError(t, err)
	for _, p := range pts {
		blocks := 0
		for _, ctx := range p.ContextPerReq {
			require.LessOrEqual(t, max(ctx, 2)+2, c.MaxModelLen)
			blocks += ceilDiv(ctx+1, c.BlockSize)
		}
		require.LessOrEqual(t, blocks, c.NumGPUBlocks, "point %d", p.BenchmarkID)
		require.LessOrEqual(t, p.BatchSize, c.MaxNumSeqs)
		// balanced partition: contexts differ by at most 1
		lo, hi := slices.Min(p.RequestedContextPerReq), slices.Max(p.RequestedContextPerReq)
		require.LessOrEqual(t, hi-lo, 1)
	}
	// The maximum point of B=64 uses (nearly) the whole cache.
	last := pts[len(pts)-1]
	assert.Equal(t, 64, last.BatchSize)
	used := 0
	for _, ctx := range last.ContextPerReq {
		used += ceilDiv(ctx+1, c.BlockSize)
	}
	assert.Greater(t, used, c.NumGPUBlocks-64)
}

func TestGridNoCUDAGraphs(t *testing.T) {
	c := baseGrid()
	c.CaptureSizes = nil
	c.Mode = ModeDecode
	c.DecodeMaxKVSamples = 2
	pts, err := BuildGrid(c)
	require.NoError(t, err)
	var batches []int
	for _, p := range pts {
		if !slices.Contains(batches, p.BatchSize) {
			batches = append(batches, p.BatchSize)
		}
		assert.Contains(t, p.SampleReasons, ReasonCUDAGraphDisabled)
		assert.Equal(t, 0, p.ExpectedCaptureSize)
	}
	assert.Equal(t, []int{1, 2, 4, 8, 16, 32, 64}, batches)
	assert.Len(t, pts, 14, "KV axis limited to its two endpoints")
	assert.Equal(t, []string{ReasonCUDAGraphDisabled, ReasonGeometricAxis, ReasonContextClamped}, pts[0].SampleReasons)
	assert.Equal(t, []string{ReasonCUDAGraphDisabled, ReasonEngineLimit}, pts[13].SampleReasons)
}

func TestGridPrefillBatches(t *testing.T) {
	c := baseGrid()
	c.Mode = ModePrefill
	c.PrefillTokens = []int{3, 1000}
	pts, err := BuildGrid(c)
	require.NoError(t, err)
	var got [][2]int
	for _, p := range pts {
		got = append(got, [2]int{p.TotalPrefillTokens, p.BatchSize})
		assert.Equal(t, PolicySingleStep, p.Plan.Policy)
		assert.Contains(t, p.SampleReasons, ReasonExplicit)
		sum := 0
		for _, n := range p.PrefillTokensPerReq {
			sum += n
		}
		assert.Equal(t, p.TotalPrefillTokens, sum)
	}
	assert.Equal(t, [][2]int{{1000, 1}, {1000, 2}, {1000, 4}, {3, 1}, {3, 2}, {3, 3}}, got)
	arr := pts[1].Arrivals("p", 5)
	assert.Equal(t, 500, arr[0].PromptTokens)
	assert.Equal(t, 0, arr[0].PrecomputedTokens)
	assert.Equal(t, 1, arr[0].OutputTokens)
}

func TestGridWarmups(t *testing.T) {
	c := baseGrid()
	c.Warmups = 5
	pts, err := BuildGrid(c)
	require.NoError(t, err)
	require.True(t, len(pts) > 6)
	assert.Equal(t, PointPrefill, pts[0].Type)
	assert.Equal(t, 256, pts[0].TotalPrefillTokens)
	for i := 0; i < 6; i++ {
		assert.True(t, pts[i].Warmup)
		assert.Equal(t, int64(-1), pts[i].BenchmarkID)
		assert.Equal(t, []string{ReasonWarmup}, pts[i].SampleReasons)
		assert.True(t, pts[i].Arrivals("w", 0)[0].Warmup)
	}
	assert.False(t, pts[6].Warmup)
	assert.Equal(t, int64(1), pts[6].BenchmarkID)
}

func TestGridSampleLimits(t *testing.T) {
	c := baseGrid()
	c.Mode = ModeDecode
	c.MaxNumSeqs = 1024
	c.MaxNumBatchedTokens = 8192
	c.NumGPUBlocks = 1 << 20
	c.CaptureSizes = nil
	for i := 1; i <= 512; i++ {
		c.CaptureSizes = append(c.CaptureSizes, i)
	}
	c.DecodeMaxBatchSizeSamples = 10
	c.DecodeMaxKVSamples = 3
	pts, err := BuildGrid(c)
	require.NoError(t, err)
	var batches []int
	for _, p := range pts {
		if !slices.Contains(batches, p.BatchSize) {
			batches = append(batches, p.BatchSize)
		}
	}
	require.Len(t, batches, 10)
	// The eager tail (513, 1024) is kept whole; the graph budget is spread.
	assert.Equal(t, []int{513, 1024}, batches[8:])
	assert.Equal(t, 1, batches[0])
	assert.LessOrEqual(t, len(pts), 30)
}

func TestGridDeterministic(t *testing.T) {
	a, err := BuildGrid(baseGrid())
	require.NoError(t, err)
	b, err := BuildGrid(baseGrid())
	require.NoError(t, err)
	assert.Equal(t, a, b)
}

func TestAxisHelpers(t *testing.T) {
	assert.Equal(t, []int{3, 2, 2}, balancedPartition(7, 3))
	assert.Equal(t, []int{1, 1}, balancedPartition(2, 2))
	assert.Equal(t, []int{1, 2, 3, 4, 5, 8, 9, 16, 32, 64, 100}, cudagraphAxis([]int{1, 2, 4, 8}, 100))
	assert.Equal(t, []int{4}, cudagraphAxis([]int{8, 16}, 4))
	assert.Equal(t, []int{1, 2, 4, 6}, cudagraphAxis(nil, 6))
	assert.Equal(t, []int{1, 6, 10}, uniformlyLimitAxis([]int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 3))
	capSize, pad, reasons := cudagraphMetadata(5, []int{1, 2, 4, 8}, 100)
	assert.Equal(t, 8, capSize)
	assert.Equal(t, 3, pad)
	assert.Equal(t, []string{ReasonPostCapture}, reasons)
}

// FuzzBuildGrid: no panic, and every returned grid keeps its invariants.
func FuzzBuildGrid(f *testing.F) {
	f.Add(8192, 64, 2048, 16, 4000, uint8(5), uint16(0x2f), false, 0, 0, uint8(0))
	f.Add(3, 1, 1, 1, 1, uint8(0), uint16(0), false, 0, 1, uint8(1))
	f.Add(4, 2, 2, 1, 8, uint8(3), uint16(1), true, 1, 0, uint8(2))
	f.Add(32768, 512, 8192, 32, 100000, uint8(9), uint16(0xffff), false, 2, 3, uint8(0))
	f.Fuzz(func(t *testing.T, mml, seqs, mnbt, bs, blocks int, nCaps uint8, capMask uint16, admission bool, explicitB, explicitCtx int, mode uint8) {
		// Bound sizes so a run stays fast; negative and zero values are
		// exercised (they must error, not panic).
		if mml > 1<<16 || seqs > 2048 || mnbt > 1<<15 || bs > 1024 || blocks > 1<<20 {
			t.Skip()
		}
		c := GridConfig{MaxModelLen: mml, MaxNumSeqs: seqs, MaxNumBatchedTokens: mnbt, BlockSize: bs, NumGPUBlocks: blocks,
			Warmups: int(nCaps % 3), DecodeMaxKVSamples: 8, DecodeMaxBatchSizeSamples: 16, PrefillMaxTokenSamples: 8}
		for i := 0; i < 16; i++ {
			if capMask&(1<<i) != 0 {
				c.CaptureSizes = append(c.CaptureSizes, 1<<(i%int(1+nCaps%12)))
			}
		}
		if admission {
			c.Policy = PolicyAdmissionStep
		}
		c.Mode = []string{"", ModePrefill, ModeDecode, ModeAgg}[mode%4]
		if explicitB != 0 {
			c.DecodeBatchSizes = []int{explicitB}
		}
		if explicitCtx != 0 {
			c.DecodeContexts = []int{explicitCtx, explicitCtx * 3}
		}
		pts, err := BuildGrid(c)
		if err != nil {
			require.NotEmpty(t, err.Error())
			return
		}
		require.NotEmpty(t, pts)
		steady := c.Policy != PolicyAdmissionStep
		id := int64(0)
		seenDecode := false
		for _, p := range pts {
			if p.Warmup {
				require.Equal(t, int64(-1), p.BenchmarkID)
			} else {
				id++
				require.Equal(t, id, p.BenchmarkID)
			}
			require.NotEmpty(t, p.SampleReasons)
			require.GreaterOrEqual(t, p.BatchSize, 1)
			require.LessOrEqual(t, p.BatchSize, c.MaxNumSeqs)
			require.Len(t, p.Plan.PrecomputedTokens, p.BatchSize)
			require.Len(t, p.Plan.AdmitTokens, p.BatchSize)
			require.Len(t, p.Arrivals("f", 0), p.BatchSize)
			switch p.Type {
			case PointPrefill:
				require.False(t, seenDecode && !p.Warmup, "prefill after decode")
				require.Len(t, p.PrefillTokensPerReq, p.BatchSize)
				require.LessOrEqual(t, p.TotalPrefillTokens, c.MaxNumBatchedTokens)
				for _, n := range p.PrefillTokensPerReq {
					require.GreaterOrEqual(t, n, 1)
					require.LessOrEqual(t, n+1, c.MaxModelLen)
				}
			case PointDecode:
				if !p.Warmup {
					seenDecode = true
				}
				require.Len(t, p.ContextPerReq, p.BatchSize)
				require.Len(t, p.RequestedContextPerReq, p.BatchSize)
				sum, used, clamped := 0, 0, false
				for i, ctx := range p.RequestedContextPerReq {
					require.GreaterOrEqual(t, ctx, 1)
					want := ctx
					if steady {
						want = max(ctx, 2)
						clamped = clamped || ctx == 1
						require.Equal(t, max(1, ctx-1), p.Plan.PrecomputedTokens[i])
					}
					require.Equal(t, want, p.ContextPerReq[i])
					require.LessOrEqual(t, want+2, c.MaxModelLen)
					sum += p.ContextPerReq[i]
					used += ceilDiv(p.ContextPerReq[i]+1, c.BlockSize)
				}
				require.Equal(t, clamped, p.Clamped)
				require.Equal(t, clamped, slices.Contains(p.SampleReasons, ReasonContextClamped))
				require.Equal(t, sum, p.TotalKVReadTokens)
				require.LessOrEqual(t, used, c.NumGPUBlocks)
			default:
				t.Fatalf("type %q", p.Type)
			}
		}
	})
}
