package opdb

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/fpm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestShipped(t *testing.T) {
	names := Names()
	require.Contains(t, names, h200)
	require.Contains(t, names, h200Worker)
	a, err := Open(h200)
	require.NoError(t, err)
	b, err := Open(h200)
	require.NoError(t, err)
	require.Same(t, a, b, "a shipped database is read once")
	// Both were measured on the H200; "ops" there means vLLM's.
	db, err := ForHardware(h200HW, "vllm", "")
	require.NoError(t, err)
	require.Same(t, a, db)
	w, err := Open(h200Worker)
	require.NoError(t, err)
	gpu, err := DatabaseGPU(w)
	require.NoError(t, err)
	require.Equal(t, h200HW.Name, gpu, "the worker's database is an H200's too")
	_, err = ForHardware(must(catalog.LookupHardware("RTX-4090")), "vllm", "")
	require.ErrorContains(t, err, "no vllm database shipped with steplab was measured on RTX-4090")
}

// Every shipped database loads, names a GPU the catalogue knows, and is
// the one "ops" picks for that GPU at its own version.
func TestShippedEveryGPU(t *testing.T) {
	gpus := map[string]bool{}
	for _, n := range Names() {
		db, err := Open(n)
		require.NoError(t, err, n)
		gpu, err := DatabaseGPU(db)
		require.NoError(t, err, n)
		gpus[gpu] = true
		if db.Framework != "vllm" {
			continue
		}
		require.Equal(t, n, fmt.Sprintf("%s-vllm-%s", strings.ReplaceAll(db.System.GPU, "_", "-"), db.Version), "a shipped database is named for its system and version")
		hw := must(catalog.LookupHardware(gpu))
		got, err := ForHardware(hw, "vllm", db.Version)
		require.NoError(t, err)
		require.Equal(t, n, got.Name)
	}
	for _, want := range []string{"A100-SXM-80GB", "H100-SXM", "H200-SXM", "B200", "B300", "GB200", "GB300", "L40S", "RTX-PRO-6000-Server"} {
		require.True(t, gpus[want], "a database for %s", want)
	}
	// The run's version picks the nearest; none known, the newest.
	pro := must(catalog.LookupHardware("RTX-PRO-6000-Server"))
	for version, want := range map[string]string{"0.19.0": "0.19.0", "0.18.2": "0.19.0", "0.22.0": "0.24.0", "": "0.24.0", "0.30.1": "0.24.0"} {
		db, err := ForHardware(pro, "vllm", version)
		require.NoError(t, err)
		require.Equal(t, want, db.Version, "run version %q", version)
	}
}

// The worker's database has what the vLLM one lacks: eager rows in every
// table, an element-wise table and the SM count.
func TestShippedWorker(t *testing.T) {
	db, err := Open(h200Worker)
	require.NoError(t, err)
	require.Equal(t, h200Worker, db.Name)
	require.Equal(t, "steplab-worker", db.Framework)
	require.Equal(t, 132.0, db.System.SMs)
	require.Empty(t, db.AllReduce)
	launches := func(eager []bool) (graph, eagerRows int) {
		for _, e := range eager {
			if e {
				eagerRows++
			} else {
				graph++
			}
		}
		return graph, eagerRows
	}
	tables := map[string][]bool{}
	for _, r := range db.GEMM {
		tables["gemm"] = append(tables["gemm"], r.Eager)
	}
	for _, r := range db.ContextAttention {
		tables["context"] = append(tables["context"], r.Eager)
	}
	for _, r := range db.GenerationAttention {
		tables["generation"] = append(tables["generation"], r.Eager)
	}
	for _, r := range db.Elementwise {
		tables["elementwise"] = append(tables["elementwise"], r.Eager)
	}
	// Since the worker recorded its generation it has fused element-wise
	// kernels and a mixture of experts (capture/worker/opbench.py).
	fused := db.Generation != ""
	if fused {
		for _, r := range db.MoE {
			tables["moe"] = append(tables["moe"], r.Eager)
		}
	}
	require.Len(t, tables, map[bool]int{false: 4, true: 5}[fused])
	for name, eager := range tables {
		g, e := launches(eager)
		require.Positive(t, g, "%s: graph rows", name)
		require.Positive(t, e, "%s: eager rows", name)
	}
	ops := map[string]bool{}
	for _, r := range db.Elementwise {
		ops[r.Op] = true
	}
	want := []string{fpm.OpRMSNorm, fpm.OpResidualAdd, fpm.OpRoPE, fpm.OpKVWrite, fpm.OpSiLUMul, fpm.OpEmbedding}
	if fused {
		want = []string{fpm.OpAddRMSNorm, fpm.OpRMSNorm, fpm.OpResidualAdd, fpm.OpRoPEKVWrite, fpm.OpSiLUMul, fpm.OpEmbedding}
	}
	require.ElementsMatch(t, want, slices.Collect(maps.Keys(ops)), "every element-wise step of the worker's pass is measured, and only those")
	_, err = fpm.NewOps(db, llama8B)
	require.NoError(t, err)

	v, err := Open(h200)
	require.NoError(t, err)
	require.Equal(t, "vllm", v.Framework)
	require.Zero(t, v.System.SMs, "AIConfigurator's system file has no SM count")
	require.Nil(t, v.Elementwise)
	for _, r := range v.GEMM {
		require.False(t, r.Eager, "%+v", r)
	}
	for _, r := range append(slices.Clone(v.ContextAttention), v.GenerationAttention...) {
		require.False(t, r.Eager, "%+v", r)
	}
}

func TestSpec(t *testing.T) {
	for s, want := range map[string]bool{"ops": true, "ops:" + h200: true, "ops:/some/dir": true, "ops:aic:/x,version=0.19.0": true,
		"ops,any-gpu": true, "opsx": false, "roofline": false, "model.json": false} {
		require.Equal(t, want, IsSpec(s), s)
	}
	q := Query{Hardware: h200HW, Shape: llama8B}
	for _, spec := range []string{"ops", "ops:" + h200, "ops,version=0.24.0"} {
		o, notes, err := Prior(spec, q)
		require.NoError(t, err, spec)
		require.Equal(t, h200, o.Database())
		if spec == "ops" {
			require.Equal(t, []string{"ops: database " + h200 + ", shipped for H200-SXM"}, notes)
		}
	}
	for _, c := range []struct{ spec, want string }{
		{"ops:nope", `"nope" is neither`},
		{"roofline", "not an ops spec"},
		{"ops,fast", `unknown option "fast"`},
		{"ops,version=", `unknown option "version="`},
	} {
		_, _, err := Prior(c.spec, q)
		require.ErrorContains(t, err, c.want, c.spec)
	}

	// Another GPU's kernels are refused, unless asked for, then noted.
	h100 := Query{Hardware: h100HW, Shape: llama8B}
	_, _, err := Prior("ops:"+h200, h100)
	require.ErrorContains(t, err, "database "+h200+" was measured on H200-SXM, the run's GPU is H100-SXM: pricing one GPU with another's kernels is refused")
	o, notes, err := Prior("ops:"+h200+",any-gpu", h100)
	require.NoError(t, err)
	require.Equal(t, h200, o.Database())
	require.Len(t, notes, 1)
	require.Contains(t, notes[0], "H100-SXM priced with kernels measured on H200-SXM")
	o, notes, err = Prior("ops", h100)
	require.NoError(t, err)
	require.Equal(t, "h100-sxm-vllm-0.24.0", o.Database(), "ops means the run's own GPU's database")
	require.Len(t, notes, 1)

	// The run's version is compared with the database's.
	_, notes, err = Prior("ops:"+h200, Query{Hardware: h200HW, Shape: llama8B, Version: "0.19.0"})
	require.NoError(t, err)
	require.Equal(t, []string{"ops: " + h200 + " measured under vllm 0.24.0, the run's version is 0.19.0"}, notes)
}

// An ops artifact names its database, shape and engine; FromArtifact
// builds the prior from it, reading a relative database directory next to
// the artifact.
func TestArtifact(t *testing.T) {
	dir := t.TempDir()
	e := fpm.OpsEngine{Name: "test", GEMMScale: 1.5, GraphStepNs: 1e6}
	f := fpm.Features{DecodeRequests: 8, PaddedBatch: 8, DecodeKVTokens: 8 * 1000}
	want, _, err := Prior("ops", Query{Hardware: h200HW, Shape: llama8B})
	require.NoError(t, err)
	want, err = want.WithEngine(e)
	require.NoError(t, err)

	require.NoError(t, os.CopyFS(filepath.Join(dir, "db"), shippedFS(h200)))
	for _, database := range []string{h200, "db"} {
		a, err := fpm.OpsArtifact(database, llama8B, e)
		require.NoError(t, err)
		path := filepath.Join(dir, "ops.json")
		require.NoError(t, a.Save(path))
		got, err := fpm.ReadArtifact(path)
		require.NoError(t, err)
		require.Equal(t, fpm.FormOps, got.Form)
		m, err := FromArtifact(got)
		require.NoError(t, err, database)
		require.Equal(t, want.PredictNs(f), m.PredictNs(f), database)
		require.Equal(t, e, m.(*fpm.Ops).Engine())
	}
	for _, c := range []struct{ params, want string }{
		{`{"database": ""}`, "params.database is empty"},
		{`{"database": "nope"}`, `"nope" is neither`},
		{`{"database": "` + h200 + `", "shape": {"name": "x"}}`, "layers must be > 0"},
		{`{"database": "` + h200 + `", "shape": ` + tinyShapeJSON + `, "engine": {"eager_step_ns": -1}}`, "eager_step_ns = -1"},
		{`[1]`, "ops artifact: params"},
	} {
		a := &fpm.Artifact{ArtifactVersion: 1, Form: fpm.FormOps, Params: []byte(c.params)}
		_, err := FromArtifact(a)
		require.ErrorContains(t, err, c.want, c.params)
	}
}

// The ops prior's calibration terms are its engine's GEMM and attention
// scales: ones leave it as it is, a scaled prior with residuals is saved
// as an ops artifact that points at its database (shipped, or a
// directory), and Load reads back the same predictions and intervals.
func TestScaledArtifact(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	require.NoError(t, os.CopyFS(dir, shippedFS(h200)))
	fromDir, err := LoadDir(dir)
	require.NoError(t, err)
	steps := []fpm.Features{{DecodeRequests: 8, PaddedBatch: 8, DecodeKVTokens: 8 * 1000},
		{PrefillTokens: 2048, PrefillRequests: 1, PrefillAttn: 2048 * 1024, DecodeRequests: 4, DecodeKVTokens: 4000}}
	q := &fpm.ResidualQuantiles{Scale: fpm.ScaleRelative, P: []float64{0.05, 0.5, 0.95}, Values: []float64{-0.1, 0, 0.2}}
	shipped, _, err := Prior("ops", Query{Hardware: h200HW, Shape: llama8B})
	require.NoError(t, err)
	viaDir, err := fpm.NewOps(fromDir, llama8B)
	require.NoError(t, err)
	for name, o := range map[string]*fpm.Ops{"shipped": shipped, "directory": viaDir} {
		assert.Equal(t, []float64{1, 1, 1}, o.ScaleValues(), name)
		ones, err := o.Scaled([]float64{1, 1, 1})
		require.NoError(t, err)
		for _, f := range steps {
			assert.Equal(t, o.PredictNs(f), ones.PredictNs(f), "%s: ones are the prior", name)
		}
		s, err := o.Scaled([]float64{1.3, 0.7, 1.1})
		require.NoError(t, err)
		assert.Equal(t, []float64{1.3, 0.7, 1.1}, s.ScaleValues())
		assert.Greater(t, s.PredictNs(steps[0]), o.PredictNs(steps[0]), name)
		s = s.WithResiduals(q)
		a, err := s.Artifact()
		require.NoError(t, err)
		path := filepath.Join(t.TempDir(), "cal.json")
		require.NoError(t, a.Save(path))
		ra, err := fpm.ReadArtifact(path)
		require.NoError(t, err)
		back, err := FromArtifact(ra)
		require.NoError(t, err, name)
		for _, f := range steps {
			m, lo, hi := s.(fpm.IntervalFPM).PredictIntervalNs(f, 0.9)
			bm, blo, bhi := back.(fpm.IntervalFPM).PredictIntervalNs(f, 0.9)
			assert.Equal(t, []float64{m, lo, hi}, []float64{bm, blo, bhi}, name)
			assert.Less(t, lo, hi)
		}
		assert.Empty(t, fpm.NoUncertainty(back, "cal.json"))
	}
	assert.Contains(t, fpm.NoUncertainty(shipped, "ops"), "a prior with no prediction intervals")
	built, err := fpm.NewOps(&fpm.OpDB{Name: "mem", System: fromDir.System, GEMM: fromDir.GEMM, ContextAttention: fromDir.ContextAttention,
		GenerationAttention: fromDir.GenerationAttention}, llama8B)
	require.NoError(t, err)
	_, err = built.Artifact()
	require.ErrorContains(t, err, "no artifact can point at it")
}

const tinyShapeJSON = `{"name": "tiny", "layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "head_dim": 16, "intermediate": 128, "vocab": 256, "dtype": "bf16", "tp": 1}`

// A checkpoint's weight precision picks its own GEMM table: nvfp4 weights
// on a database that measured nvfp4 GEMMs price a decode step below bf16's,
// and a precision no table measured (int4) is refused, never priced as
// bf16.
func TestShippedWeightPrecision(t *testing.T) {
	db, err := Open("b200-sxm-vllm-0.24.0")
	require.NoError(t, err)
	shape := must(catalog.LookupModel("Llama-3.1-8B"))
	step := fpm.Features{DecodeRequests: 64, DecodeKVTokens: 64 * 2048, DecodeMaxKVTokens: 2048, PaddedBatch: 64}
	price := func(dtype string) (float64, error) {
		s := shape
		s.WeightDType = dtype
		o, err := fpm.NewOps(db, s)
		if err != nil {
			return 0, err
		}
		return o.PredictNs(step), nil
	}
	bf16, err := price(catalog.DTypeBF16)
	require.NoError(t, err)
	fp4, err := price(catalog.DTypeNVFP4)
	require.NoError(t, err)
	require.Less(t, fp4, 0.9*bf16, "nvfp4 GEMMs are faster than bf16 ones on a B200")
	_, err = price(catalog.DTypeINT4)
	require.ErrorContains(t, err, "no int4 GEMMs measured")
}

// A checkpoint with 4-bit experts beside bf16 attention (MiniMax-M2.7's
// NVFP4 release) is priced on a B200 with each part at its dtype and the
// routed experts read from the shipped fused-MoE table at the model's own
// configuration: a decode step's MoE part is the 62 layers' measured
// latency of that many tokens.
func TestShippedMoE(t *testing.T) {
	s, err := catalog.LoadModelConfig("../../catalog/testdata/aiconfigurator/nvidia--MiniMax-M2.7-NVFP4_config.json")
	require.NoError(t, err)
	s = s.WithTP(4)
	hw := must(catalog.LookupHardware("B200"))
	ops, notes, err := Prior("ops", Query{Hardware: hw, Shape: s})
	require.NoError(t, err)
	require.Contains(t, strings.Join(notes, "\n"), "attention projections bfloat16, MLP nvfp4, experts nvfp4, LM head bfloat16")
	require.Contains(t, strings.Join(notes, "\n"), "fused MoE table (nvfp4, 256 experts, top-8, TP 4) under power_law_1.01 routing")
	db, err := Open("b200-sxm-vllm-0.24.0")
	require.NoError(t, err)
	var oneToken float64
	for _, r := range db.MoE {
		if r.DType == "nvfp4" && r.Hidden == 3072 && r.Inter == 1536 && r.TopK == 8 && r.Experts == 256 && r.TP == 4 && r.EP == 1 &&
			r.Distribution == "power_law_1.01" && r.Tokens == 1 {
			oneToken = r.LatencyMs
		}
	}
	require.Positive(t, oneToken)
	step := fpm.Features{DecodeRequests: 1, DecodeKVTokens: 1024, DecodeMaxKVTokens: 1024, PaddedBatch: 1}
	b := ops.Breakdown(step)
	// The cross-head QK norm all-reduces two fp32 variances a token, 8
	// bytes at one token: below the table's smallest message (128 B),
	// priced at that message's latency and flagged.
	require.Equal(t, []string{"allreduce"}, b.Extrapolated)
	require.True(t, s.QKNormAcrossHeads, "config.json: use_qk_norm, qk_norm_type per_layer")
	perHead := s
	perHead.QKNormAcrossHeads = false
	ph, _, err := Prior("ops", Query{Hardware: hw, Shape: perHead})
	require.NoError(t, err)
	b0 := ph.Breakdown(step)
	var floor float64
	for _, r := range db.AllReduce {
		if r.GPUs == 4 && r.Graph && r.MessageBytes == 128 {
			floor = r.LatencyMs * 1e6
		}
	}
	require.Positive(t, floor)
	assert.InDelta(t, 62*floor, b.AllReduceNs-b0.AllReduceNs, 1, "one variance all-reduce a layer")
	assert.Greater(t, b.ElementwiseNs, b0.ElementwiseNs, "the norms' own passes")
	// GEMMNs holds the attention projections too: the MoE part is at least
	// the table's, and most of the layers' GEMM time at one token.
	moe := 62 * oneToken * 1e6
	require.Greater(t, b.GEMMNs, moe)
	require.Greater(t, moe, 0.5*b.GEMMNs)
}

// Every shipped vLLM database carries its GPU's fused-MoE table, and the
// H200's prices the routed experts of a Qwen3-30B-A3B decode step from it
// rather than from expert GEMMs.
func TestShippedMoETables(t *testing.T) {
	for _, name := range Names() {
		if !strings.Contains(name, "-vllm-") {
			continue // the worker's own database measures no MoE kernel
		}
		db, err := Open(name)
		require.NoError(t, err, name)
		require.NotEmpty(t, db.MoE, "%s ships its fused-MoE table", name)
	}
	s := must(catalog.LookupModel("Qwen3-30B-A3B"))
	_, notes, err := Prior("ops", Query{Hardware: must(catalog.LookupHardware("H200")), Shape: s})
	require.NoError(t, err)
	require.Contains(t, strings.Join(notes, "\n"), "fused MoE table (bfloat16, 128 experts, top-8, TP 1)")
}
