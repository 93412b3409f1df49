package fpm

import (
	"testing"

	"github.com/steplab/steplab/catalog"
	"github.com/stretchr/testify/require"
)

// Synthetic laws of the test database, in ms: power laws, so that the
// log-space lookup is exact between measured points and every expected
// value below can be written out by hand.
func gemmMs(m, n, k float64) float64   { return 1e-7 * m * n * k }
func ctxMs(batch, seq float64) float64 { return 1e-6 * batch * seq * seq }
func genMs(batch, seq float64) float64 { return 1e-5 * batch * seq }

const (
	testBW       = 1e12 // bytes/s
	testScaling  = 0.5
	testMemConst = 2e-6 // s
)

// memOpMs is the database's price of an unmeasured op moving b bytes.
func memOpMs(b float64) float64 { return (b/(testBW*testScaling) + testMemConst) * 1e3 }

// tinyDB measures the GEMMs, attention and all-reduce of the tiny shape
// (and of tiny at TP=2) on small grids.
func tinyDB() *OpDB {
	db := &OpDB{Name: "synthetic", System: OpSystem{GPU: "test", MemBandwidth: testBW, BF16FLOPS: 1e15,
		MemBWScaling: testScaling, MemConstantS: testMemConst, IntraNodeBandwidth: 1e11}}
	for _, n := range []int{32, 64, 128, 256} {
		for _, k := range []int{32, 64, 128, 256} {
			for _, m := range []int{1, 4, 16, 64, 256} {
				db.GEMM = append(db.GEMM, GEMMRow{DType: "bfloat16", M: m, N: n, K: k, LatencyMs: gemmMs(float64(m), float64(n), float64(k))})
			}
		}
	}
	for _, h := range [][2]int{{4, 2}, {2, 1}} { // (heads, kv heads): TP 1 and 2
		for _, b := range []int{1, 2, 4} {
			for _, s := range []int{1, 16, 64, 256} {
				db.ContextAttention = append(db.ContextAttention, AttentionRow{Batch: b, SeqLen: s, Heads: h[0], KVHeads: h[1], HeadDim: 16,
					DType: "bfloat16", KVDType: "bfloat16", LatencyMs: ctxMs(float64(b), float64(s))})
			}
		}
		for _, b := range []int{1, 4, 16, 64} {
			for _, s := range []int{1, 16, 128, 1024} {
				db.GenerationAttention = append(db.GenerationAttention, AttentionRow{Batch: b, SeqLen: s, Heads: h[0], KVHeads: h[1], HeadDim: 16,
					DType: "bfloat16", KVDType: "bfloat16", LatencyMs: genMs(float64(b), float64(s))})
			}
		}
	}
	for _, msg := range []int64{128, 1024, 8192, 65536} {
		db.AllReduce = append(db.AllReduce, AllReduceRow{DType: "bfloat16", GPUs: 2, MessageBytes: msg, Graph: true, LatencyMs: 1e-3 + float64(msg)*1e-9})
	}
	return db
}

func tinyOps(t *testing.T, s catalog.Shape) *Ops {
	t.Helper()
	o, err := NewOps(tinyDB(), s)
	require.NoError(t, err)
	return o
}

// tiny: hidden 64, 4 heads, 2 KV heads of 16, intermediate 128, vocab 256,
// 2 layers. Its layer GEMMs: qkv 64→128, o 64→64, gate+up 64→256, down
// 128→64; the LM head 64→256.
func tinyLayerGEMMMs(rows float64) float64 {
	return gemmMs(rows, 128, 64) + gemmMs(rows, 64, 64) + gemmMs(rows, 256, 64) + gemmMs(rows, 64, 128)
}

// tinyElementwiseMs is the database's element-wise work over rows tokens:
// per layer two add+norm passes (4·64 elements of 2 bytes per token) and
// the activation (3·128), once the embedding gather (64) and final norm.
func tinyElementwiseMs(rows float64) float64 {
	addNorm := memOpMs(rows * 4 * 64 * 2)
	return 2*(2*addNorm+memOpMs(rows*3*128*2)) + memOpMs(rows*64*2) + addNorm
}

func TestOpsComposition(t *testing.T) {
	o := tinyOps(t, tiny)
	const L = 2
	cases := []struct {
		name string
		f    Features
		want OpsBreakdown // ms
	}{
		{
			// 4 requests at 100 KV tokens each in an 8-row CUDA graph: GEMMs
			// over the padded rows, the LM head over the 4 requests,
			// attention at 101 keys each.
			name: "decode",
			f:    Features{DecodeRequests: 4, PaddedBatch: 8, DecodeKVTokens: 400},
			want: OpsBreakdown{GEMMNs: L * tinyLayerGEMMMs(8), LMHeadNs: gemmMs(4, 256, 64),
				GenerationAttnNs: L * genMs(4, 101), ElementwiseNs: tinyElementwiseMs(8)},
		},
		{
			// A 64-token chunk after 64 cached tokens: causal attention over
			// 128 tokens, of which the chunk computes 64·(64+32) of 128²/2.
			name: "prefill chunk",
			f:    Features{PrefillTokens: 64, PrefillKVTokens: 64, PrefillRequests: 1, PrefillAttn: 64 * 96},
			want: OpsBreakdown{GEMMNs: L * tinyLayerGEMMMs(64), LMHeadNs: gemmMs(1, 256, 64),
				ContextAttnNs: L * ctxMs(1, 128) * (64 * 96) / (128 * 128 / 2), ElementwiseNs: tinyElementwiseMs(64)},
		},
		{
			// Both in one pass: the GEMMs see 64 + 8 rows once, each
			// attention kernel prices its own requests.
			name: "mixed",
			f:    Features{PrefillTokens: 64, PrefillKVTokens: 64, PrefillRequests: 1, PrefillAttn: 64 * 96, DecodeRequests: 4, PaddedBatch: 8, DecodeKVTokens: 400},
			want: OpsBreakdown{GEMMNs: L * tinyLayerGEMMMs(72), LMHeadNs: gemmMs(5, 256, 64),
				ContextAttnNs: L * ctxMs(1, 128) * (64 * 96) / (128 * 128 / 2), GenerationAttnNs: L * genMs(4, 101),
				ElementwiseNs: tinyElementwiseMs(72)},
		},
		{
			// Two fresh 32-token prompts: 2 requests of 32, the whole
			// causal triangle.
			name: "two prompts",
			f:    Features{PrefillTokens: 64, PrefillRequests: 2, PrefillAttn: 2 * 32 * 16},
			want: OpsBreakdown{GEMMNs: L * tinyLayerGEMMMs(64), LMHeadNs: gemmMs(2, 256, 64),
				ContextAttnNs: L * ctxMs(2, 32), ElementwiseNs: tinyElementwiseMs(64)},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := o.Breakdown(c.f)
			w := c.want
			for _, p := range []struct {
				name      string
				got, want float64
			}{{"gemm", got.GEMMNs, w.GEMMNs}, {"lm_head", got.LMHeadNs, w.LMHeadNs}, {"context", got.ContextAttnNs, w.ContextAttnNs},
				{"generation", got.GenerationAttnNs, w.GenerationAttnNs}, {"elementwise", got.ElementwiseNs, w.ElementwiseNs}} {
				require.InDelta(t, p.want*1e6, p.got, 1e-9*p.want*1e6+1e-9, p.name)
			}
			total := (w.GEMMNs + w.LMHeadNs + w.ContextAttnNs + w.GenerationAttnNs + w.ElementwiseNs) * 1e6
			require.InDelta(t, total, got.TotalNs, 1e-9*total)
			require.Equal(t, got.TotalNs, o.PredictNs(c.f))
			require.Empty(t, got.Extrapolated, "every lookup is inside the grid")
		})
	}
	require.Zero(t, o.PredictNs(Features{}), "an empty step costs nothing")
}

// An engine scales the database's kernels and adds its per-step work:
// the graph term to a decode-only step, the eager term to one with
// prefill work.
func TestOpsEngine(t *testing.T) {
	base := tinyOps(t, tiny)
	e := OpsEngine{Name: "test", GEMMScale: 2, ContextAttnScale: 3, GenerationAttnScale: 4, GraphStepNs: 1000, EagerStepNs: 5000}
	o, err := base.WithEngine(e)
	require.NoError(t, err)
	require.Equal(t, e, o.Engine())
	require.Equal(t, OpsEngine{}, base.Engine(), "WithEngine copies")

	dec := Features{DecodeRequests: 4, PaddedBatch: 4, DecodeKVTokens: 400}
	mix := Features{PrefillTokens: 64, PrefillRequests: 1, PrefillAttn: 64 * 32, DecodeRequests: 4, PaddedBatch: 4, DecodeKVTokens: 400}
	for _, c := range []struct {
		f    Features
		step float64
	}{{dec, 1000}, {mix, 5000}} {
		b, s := base.Breakdown(c.f), o.Breakdown(c.f)
		require.InDelta(t, 2*b.GEMMNs, s.GEMMNs, 1e-9)
		require.InDelta(t, 2*b.LMHeadNs, s.LMHeadNs, 1e-9)
		require.InDelta(t, 3*b.ContextAttnNs, s.ContextAttnNs, 1e-9)
		require.InDelta(t, 4*b.GenerationAttnNs, s.GenerationAttnNs, 1e-9)
		require.Equal(t, b.ElementwiseNs, s.ElementwiseNs, "element-wise work is the database's")
		require.Equal(t, c.step, s.EngineStepNs)
	}
	_, err = base.WithEngine(OpsEngine{Name: "bad", GEMMScale: -1})
	require.ErrorContains(t, err, "gemm_scale = -1")
}

// Past the measured grid the lookup is flagged: 2,000 KV tokens a request
// is beyond the 1,024 measured, 512 rows beyond 256, and the LM head of
// tiny at 512 requests beyond both.
func TestOpsExtrapolated(t *testing.T) {
	o := tinyOps(t, tiny)
	b := o.Breakdown(Features{DecodeRequests: 4, PaddedBatch: 4, DecodeKVTokens: 4 * 2000})
	require.Equal(t, []string{OpTableGenerationAttention}, b.Extrapolated)
	inside := o.Breakdown(Features{DecodeRequests: 4, PaddedBatch: 4, DecodeKVTokens: 4 * 1000}).GenerationAttnNs
	require.Greater(t, b.GenerationAttnNs, inside, "longer contexts cost more past the grid too")
	f := Features{DecodeRequests: 512, PaddedBatch: 512, DecodeKVTokens: 512 * 100}
	b = o.Breakdown(f)
	require.ElementsMatch(t, []string{OpTableGEMM, "lm_head", OpTableGenerationAttention}, b.Extrapolated)
	// PredictExtNs counts what Breakdown names, at PredictNs's price.
	ns, n := o.PredictExtNs(f)
	require.Equal(t, 3, n)
	require.Equal(t, o.PredictNs(f), ns)
	_, n = o.PredictExtNs(Features{DecodeRequests: 4, PaddedBatch: 4, DecodeKVTokens: 4 * 1000})
	require.Zero(t, n)
}

// TermTimes prices each part on its own: the ops prior's GEMMs (LM head
// included), context and generation attention, as Breakdown prices them;
// AddStepCosts adds the engine's per-step times.
func TestOpsTermTimes(t *testing.T) {
	o := tinyOps(t, tiny)
	f := Features{PrefillTokens: 64, PrefillKVTokens: 64, PrefillRequests: 1, PrefillAttn: 64 * 96, DecodeRequests: 4, PaddedBatch: 8, DecodeKVTokens: 400}
	tt, err := NewTermTimes(o, []int{0, 1, 2})
	require.NoError(t, err)
	parts := make([]float64, 3)
	total := tt.Of(f, parts)
	b := o.Breakdown(f)
	require.Equal(t, b.TotalNs, total)
	require.InDelta(t, b.GEMMNs+b.LMHeadNs, parts[0], 1e-6*b.GEMMNs)
	require.InDelta(t, b.ContextAttnNs, parts[1], 1e-6*b.ContextAttnNs)
	require.InDelta(t, b.GenerationAttnNs, parts[2], 1e-6*b.GenerationAttnNs)
	_, err = NewTermTimes(o, []int{3})
	require.Error(t, err)

	c, err := o.AddStepCosts(1e6, 2e6)
	require.NoError(t, err)
	require.InDelta(t, o.PredictNs(f)+2e6, c.PredictNs(f), 1e-6, "a step with prefill work takes the eager step's cost")
	d := Features{DecodeRequests: 4, PaddedBatch: 4, DecodeKVTokens: 400}
	require.InDelta(t, o.PredictNs(d)+1e6, c.PredictNs(d), 1e-6, "a decode-only step the graph step's")
}

// TP=2 halves the heads and the MLP per GPU and adds two all-reduces of
// the step's activations per layer, priced from the comm table.
func TestOpsTensorParallel(t *testing.T) {
	o := tinyOps(t, tiny.WithTP(2))
	f := Features{DecodeRequests: 4, PaddedBatch: 4, DecodeKVTokens: 400}
	b := o.Breakdown(f)
	msg := 4.0 * 64 * 2                 // rows · hidden · bf16 bytes = 512, between 128 and 1024
	lo, hi := 1e-3+128e-9, 1e-3+1024e-9 // ms at the neighbouring messages
	ar, ext := o.allReduceNs(msg)
	require.False(t, ext)
	require.Greater(t, ar, lo*1e6)
	require.Less(t, ar, hi*1e6)
	require.InDelta(t, 2*2*ar, b.AllReduceNs, 1e-9)
	require.InDelta(t, 2*(gemmMs(4, 64, 64)+gemmMs(4, 32, 64)+gemmMs(4, 128, 64)+gemmMs(4, 64, 64))*1e6, b.GEMMNs, 1e-6,
		"per GPU: qkv 64→(2+2·1)·16, o 32→64, gate+up 64→2·64, down 64→64")
}

// A mixture of experts runs the expert GEMMs at the expected rows per
// expert touched: 1 token routed to 2 of 8 experts touches
// 8·(1 − (7/8)²) = 1.875 of them in expectation; many tokens touch all.
func TestOpsMixtureOfExperts(t *testing.T) {
	touched, per := expertLoad(1, 8, 2)
	require.InDelta(t, 2, touched, 1e-12, "one token reads its top-k experts")
	require.InDelta(t, 1, per, 1e-12)
	touched, per = expertLoad(4096, 8, 2)
	require.InDelta(t, 8, touched, 1e-9)
	require.InDelta(t, 4096*2/8.0, per, 1e-6)

	o := tinyOps(t, tiny)
	o.shape.experts, o.shape.topK, o.shape.expertInter, o.shape.denseLayers = 8, 2, 32, 0
	ns, ext := o.mlpNs(&o.db.launch[launchGraph], 64)
	require.False(t, ext)
	touched, per = expertLoad(64, 8, 2)
	layers := float64(o.shape.layers)
	require.InDelta(t, layers*touched*(gemmMs(per, 64, 64)+gemmMs(per, 64, 32))*1e6, ns, 1e-6)
	// A first dense layer (DeepSeek's first_k_dense_replace) and a shared
	// expert beside the routed ones in the others.
	o.shape.denseLayers, o.shape.shared = 1, 32
	ns, _ = o.mlpNs(&o.db.launch[launchGraph], 64)
	dense := (gemmMs(64, 256, 64) + gemmMs(64, 64, 128)) * 1e6
	shared := (gemmMs(64, 64, 64) + gemmMs(64, 64, 32)) * 1e6
	require.InDelta(t, dense+(layers-1)*(touched*(gemmMs(per, 64, 64)+gemmMs(per, 64, 32))*1e6+shared), ns, 1e-6)
	require.Equal(t, 64, o.shape.activationWidth(), "the activation runs over topK experts' width")
	// Every MoE layer routes: a GEMM of its tokens to one logit per expert.
	li := &o.db.launch[launchGraph]
	router, _ := o.routerNs(li, 64)
	one, _ := o.gemmNs(li, roleHead, 64, 8, 64)
	require.Positive(t, one)
	require.InDelta(t, (layers-1)*one, router, 1e-6, "the MoE layers' routers, 64 rows × 64 → 8 experts")
	o.shape.experts = 0
	router, _ = o.routerNs(li, 64)
	require.Zero(t, router, "a dense model has no router")
}

func TestNewOpsRefuses(t *testing.T) {
	fp8 := tiny
	fp8.WeightDType = catalog.DTypeFP8
	_, err := NewOps(tinyDB(), fp8)
	require.ErrorContains(t, err, "no fp8 GEMMs measured (have bfloat16)")
	// 4-bit weights are looked up under their own dtype, never as bf16.
	for _, dt := range []string{catalog.DTypeINT4, catalog.DTypeNVFP4, catalog.DTypeMXFP4} {
		q := tiny
		q.WeightDType = dt
		_, err = NewOps(tinyDB(), q)
		require.ErrorContains(t, err, "no "+dt+" GEMMs measured (have bfloat16): price it with fpm: roofline", dt)
	}
	// Each part's GEMMs are looked up at its own dtype.
	attn := tiny
	attn.AttnDType = catalog.DTypeFP8
	_, err = NewOps(tinyDB(), attn)
	require.ErrorContains(t, err, "no fp8 GEMMs measured (have bfloat16)")
	fp16 := tiny
	fp16.DType = catalog.DTypeFP16
	_, err = NewOps(tinyDB(), fp16)
	require.NoError(t, err, "fp16 runs the bf16 tensor-core path")
	fp8kv := tiny
	fp8kv.KVDType = catalog.DTypeFP8
	_, err = NewOps(tinyDB(), fp8kv)
	require.ErrorContains(t, err, "with a fp8 KV cache")
	db := tinyDB()
	db.GEMM[3].LatencyMs = -1
	_, err = NewOps(db, tiny)
	require.ErrorContains(t, err, "synthetic: bfloat16 gemm row 3: latency = -1")
	db = tinyDB()
	db.System.MemBandwidth = 0
	_, err = NewOps(db, tiny)
	require.ErrorContains(t, err, "gpu.mem_bw = 0")
	db = tinyDB()
	db.AllReduce, db.System.IntraNodeBandwidth = nil, 0
	_, err = NewOps(db, tiny.WithTP(2))
	require.ErrorContains(t, err, "TP=2 needs an all-reduce table")
}

// The fused-MoE table, where the database measured the shape's experts,
// prices the routed experts as measured (power-law routing preferred to
// balanced), interpolated between token counts and flagged past them;
// experts of a configuration it did not measure are priced as GEMMs, and
// Notes says which.
func TestOpsMoETable(t *testing.T) {
	moe := tiny
	moe.MoE = catalog.MoE{Experts: 8, TopK: 2, ExpertIntermediate: 32}
	db := tinyDB()
	for _, d := range []string{"balanced", "power_law_1.01", "power_law_1.2"} {
		for _, tok := range []int{1, 16, 256} {
			lat := 1e-3 * float64(tok)
			if d != "power_law_1.01" {
				lat *= 3 // must not be read
			}
			db.MoE = append(db.MoE, MoERow{DType: "bfloat16", Tokens: tok, Hidden: 64, Inter: 32, TopK: 2, Experts: 8, TP: 1, EP: 1, Distribution: d, LatencyMs: lat})
		}
	}
	o, err := NewOps(db, moe)
	require.NoError(t, err)
	layers := float64(moe.Layers)
	li := &o.db.launch[launchGraph]
	for _, tok := range []float64{16, 64} { // measured, and between two measured (a linear law: exact)
		ns, ext := o.mlpNs(li, tok)
		require.False(t, ext)
		require.InDelta(t, layers*1e-3*tok*1e6, ns, 1e-6, "tokens %v", tok)
	}
	_, ext := o.mlpNs(li, 1024)
	require.True(t, ext, "past the measured tokens")
	require.Contains(t, o.Notes()[0], "fused MoE table (bfloat16, 8 experts, top-2, TP 1) under power_law_1.01 routing")

	wide := moe
	wide.MoE.ExpertIntermediate = 64
	o, err = NewOps(db, wide)
	require.NoError(t, err)
	require.Contains(t, o.Notes()[0], "routed experts priced as bfloat16 GEMMs")
	touched, per := expertLoad(16, 8, 2)
	ns, _ := o.mlpNs(&o.db.launch[launchGraph], 16)
	require.InDelta(t, layers*touched*(gemmMs(per, 128, 64)+gemmMs(per, 64, 64))*1e6, ns, 1e-6)
}

// A prefill chunk's attention is at least the read of its prefix's KV: a
// token after a 1,000-token prefix costs what a decode over 1,001 keys
// does, where the share of a full causal prefill it computes would price
// it far lower; a fresh prompt is priced by its FLOPs alone.
func TestOpsChunkReadsPrefix(t *testing.T) {
	o := tinyOps(t, tiny)
	li := &o.db.launch[launchGraph]
	after := Features{PrefillTokens: 4, PrefillRequests: 4, PrefillKVTokens: 4 * 1000, PrefillAttn: 4 * 1000.5}
	got, _ := o.contextAttnNs(li, &after)
	want, _ := o.generationAttnNs(li, 4, 1001)
	require.InDelta(t, want, got, 1e-9)
	q, share := o.contextCoords(&after)
	flops, _ := li.ctx.lookup(q, (*contextCost)(o))
	require.Less(t, flops*share, want, "the FLOPs' share alone is cheaper")
	fresh := Features{PrefillTokens: 64, PrefillRequests: 1, PrefillAttn: 64 * 32}
	got, _ = o.contextAttnNs(li, &fresh)
	q, share = o.contextCoords(&fresh)
	flops, _ = li.ctx.lookup(q, (*contextCost)(o))
	require.InDelta(t, flops*share, got, 1e-9)
}

// An engine whose decode kernel does not split a request's KV walk
// (OpsEngine.DecodeWave) prices a ragged batch by its longest request
// where the database's kernel (no SM count) prices its mean.
func TestOpsDecodeWave(t *testing.T) {
	base := tinyOps(t, tiny)
	require.False(t, base.SplitsDecode())
	ragged := Features{DecodeRequests: 4, PaddedBatch: 4, DecodeKVTokens: 4 * 100, DecodeMaxKVTokens: 1000}
	o, err := base.WithEngine(OpsEngine{DecodeWave: 4})
	require.NoError(t, err)
	require.InDelta(t, 101, base.decodeKV(&ragged), 1e-9, "the mean")
	// 4 requests × 2 KV heads = 8 programs on a wave of 4: the longest
	// request's 1,001 keys at half the rate, as a uniform 500.5.
	require.InDelta(t, 1001*4.0/8, o.decodeKV(&ragged), 1e-9)
	require.Greater(t, o.PredictNs(ragged), base.PredictNs(ragged))
	require.False(t, o.calibrated(), "the kernel's wave is no calibration")
	_, err = base.WithEngine(OpsEngine{DecodeWave: -1})
	require.ErrorContains(t, err, "decode_wave = -1")
	for backend, unsplit := range map[string]bool{"triton": true, "TRITON_ATTN": true, "FLASH_ATTN": false, "": false} {
		require.Equal(t, unsplit, UnsplitDecode(backend), backend)
	}
}
