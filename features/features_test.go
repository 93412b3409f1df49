package features

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fpm"
)

// older returns st as a dataset written before the feature columns: they
// read as Unknown.
func older(st datasets.Step) datasets.Step {
	u := datasets.Unknown
	st.MaxDecodeKVTokens, st.SumPrefillAttn, st.NewReqTokens, st.CUDAGraphSize = u, float64(u), u, int32(u)
	return st
}

func TestOf(t *testing.T) {
	decode := datasets.Step{Kind: datasets.KindDecode, NumDecodeRequests: 30, SumDecodeKVTokens: 30 * 700, VarDecodeKVTokens: 2500,
		MaxDecodeKVTokens: 900, CUDAGraphSize: 32, PaddedTokens: 2, SumPrefillAttn: 0, NewReqTokens: 0}
	mixed := datasets.Step{Kind: datasets.KindMixed, NumPrefillRequests: 1, SumPrefillTokens: 512, SumPrefillKVTokens: 1024,
		SumPrefillAttn: 512 * (1024 + 256), NumDecodeRequests: 3, SumDecodeKVTokens: 3000, VarDecodeKVTokens: 0, MaxDecodeKVTokens: 1000,
		NumNewReqs: 1, NewReqTokens: 1536, PayloadNewBytes: 9999, CUDAGraphSize: 0}
	twoPrefills := datasets.Step{Kind: datasets.KindPrefill, NumPrefillRequests: 2, SumPrefillTokens: 400, VarPrefillLength: 10000,
		SumPrefillKVTokens: 1000, NumNewReqs: 1, PayloadNewBytes: 1000}
	nan := math.NaN()
	cases := []struct {
		name    string
		st      datasets.Step
		want    fpm.Features
		unknown []string
	}{
		{"recorded decode step ran in a graph", decode,
			fpm.Features{DecodeRequests: 30, DecodeKVTokens: 21000, DecodeMaxKVTokens: 900, DecodeKVVar: 2500, PaddedBatch: 32}, nil},
		{"older decode step: padding implies the graph", older(decode),
			fpm.Features{DecodeRequests: 30, DecodeKVTokens: 21000, DecodeMaxKVTokens: nan, DecodeKVVar: 2500, PaddedBatch: 32}, []string{"max_decode_kv_tokens"}},
		{"zero-valued columns a writer did not know read as unknown", func() datasets.Step { s := decode; s.MaxDecodeKVTokens = 0; return s }(),
			fpm.Features{DecodeRequests: 30, DecodeKVTokens: 21000, DecodeMaxKVTokens: nan, DecodeKVVar: 2500, PaddedBatch: 32}, []string{"max_decode_kv_tokens"}},
		{"older step of one decode: the longest is the sum",
			older(datasets.Step{Kind: datasets.KindDecode, NumDecodeRequests: 1, SumDecodeKVTokens: 77}),
			fpm.Features{DecodeRequests: 1, DecodeKVTokens: 77, DecodeMaxKVTokens: 77, PaddedBatch: 1}, nil},
		{"older step of equal contexts: the longest is the mean",
			older(datasets.Step{Kind: datasets.KindDecode, NumDecodeRequests: 4, SumDecodeKVTokens: 400}),
			fpm.Features{DecodeRequests: 4, DecodeKVTokens: 400, DecodeMaxKVTokens: 100, PaddedBatch: 4}, nil},
		{"recorded mixed step: eager, the decode count is the batch", mixed,
			fpm.Features{PrefillTokens: 512, PrefillKVTokens: 1024, PrefillAttn: 512 * 1280, PrefillRequests: 1, DecodeRequests: 3,
				DecodeKVTokens: 3000, DecodeMaxKVTokens: 1000, PaddedBatch: 3, NewRequests: 1, NewReqTokens: 1536}, nil},
		{"older mixed step: one prefill is exact, new tokens from the payload", older(mixed),
			fpm.Features{PrefillTokens: 512, PrefillKVTokens: 1024, PrefillAttn: 512 * 1280, PrefillRequests: 1, DecodeRequests: 3,
				DecodeKVTokens: 3000, DecodeMaxKVTokens: 1000, PaddedBatch: 3, NewRequests: 1, NewReqTokens: math.Round(9999 / PayloadBytesPerToken)}, nil},
		{"older step of two prefills: attention approximated", older(twoPrefills),
			fpm.Features{PrefillTokens: 400, PrefillKVTokens: 1000, PrefillAttn: 400.0*1000/2 + (2*10000+400*400/2)/2, PrefillRequests: 2,
				NewRequests: 1, NewReqTokens: math.Round(1000 / PayloadBytesPerToken)}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Of(&c.st)
			require.Equal(t, c.unknown, got.Unknown())
			if c.unknown != nil {
				require.True(t, math.IsNaN(got.DecodeMaxKVTokens))
				got.DecodeMaxKVTokens, c.want.DecodeMaxKVTokens = 0, 0
			}
			require.Equal(t, c.want, got)
			require.Equal(t, c.st.Kind, got.Kind())
		})
	}
}

// A batch fills the composition columns exactly; Complete fills only the
// columns an older row lacks, and then Of gives what the batch's own row
// gives.
func TestBatchFillAndComplete(t *testing.T) {
	rows := []datasets.StepRequest{
		{IsPrefill: true, IsNew: true, NumScheduledTokens: 100, NumComputedTokens: 0, PromptLen: 100},
		{IsPrefill: true, NumScheduledTokens: 300, NumComputedTokens: 1000, PromptLen: 5000},
		{IsPrefill: false, NumScheduledTokens: 1, NumComputedTokens: 900, PromptLen: 800},
		{IsPrefill: false, NumScheduledTokens: 1, NumComputedTokens: 100, PromptLen: 90},
		{IsPrefill: false, IsNew: true, IsResumed: true, NumScheduledTokens: 1, NumComputedTokens: 300, PromptLen: 200},
	}
	var b Batch
	for i := range rows {
		b.Add(&rows[i])
	}
	st := datasets.Step{Kind: datasets.KindMixed, NumNewReqs: 2}
	b.Fill(&st)
	assert.Equal(t, int32(2), st.NumPrefillRequests)
	assert.Equal(t, int64(400), st.SumPrefillTokens)
	assert.Equal(t, int64(1000), st.SumPrefillKVTokens)
	assert.Equal(t, 100*(0+50.0)+300*(1000+150.0), st.SumPrefillAttn)
	assert.Equal(t, float64((5000-100)*(5000-100))/4, st.VarPrefillLength, "over prompt lengths")
	assert.Equal(t, int32(3), st.NumDecodeRequests)
	assert.Equal(t, int64(1300), st.SumDecodeKVTokens)
	assert.Equal(t, int64(900), st.MaxDecodeKVTokens)
	assert.InDelta(t, (900.0*900+100*100+300*300)/3-(1300.0/3)*(1300.0/3), st.VarDecodeKVTokens, 1e-6)
	assert.Equal(t, int64(100+301), st.NewReqTokens, "a resumed request ships its computed tokens too")
	assert.Equal(t, int64(0), st.PaddedTokens, "no graph, no padding")

	old := older(st)
	old.SumPrefillAttn = 0 // a writer that left it at zero
	var again Batch
	for i := range rows {
		again.Add(&rows[i])
	}
	again.Complete(&old)
	assert.Equal(t, Of(&st), Of(&old))

	kept := older(st)
	kept.MaxDecodeKVTokens = 123 // recorded columns win over the rows
	again.Complete(&kept)
	assert.Equal(t, int64(123), kept.MaxDecodeKVTokens)

	g := datasets.Step{CUDAGraphSize: 8}
	var d Batch
	for range 5 {
		d.Decode(64)
	}
	d.Fill(&g)
	assert.Equal(t, int64(3), g.PaddedTokens, "the padding of the graph")

	m := datasets.Step{CUDAGraphSize: 32} // a mixed step's graph counts tokens
	d.Prefill(20, 0, 20)
	d.Fill(&m)
	assert.Equal(t, int64(32-20-5), m.PaddedTokens, "the padding of a mixed graph")
}

// The committed H200 captures predate the feature columns; their
// step_requests complete every row, and a copy without step_requests
// derives what the steps table determines.
func TestCompleteStepsOlderDataset(t *testing.T) {
	dir := filepath.Join("..", "datasets", "h200", "bench-steady")
	d, err := datasets.Open(dir)
	require.NoError(t, err)
	steps, err := datasets.ReadAll[datasets.Step](d, datasets.TableSteps)
	require.NoError(t, err)
	reqs, err := datasets.ReadAll[datasets.StepRequest](d, datasets.TableStepRequests)
	require.NoError(t, err)
	for i := range steps {
		require.False(t, Known(&steps[i]) && steps[i].NumDecodeRequests > 1 && steps[i].VarDecodeKVTokens > 0, "the fixture predates the columns")
	}
	n, matched, err := CompleteSteps(d, steps)
	require.NoError(t, err)
	require.True(t, matched)
	require.Equal(t, len(steps), n)
	longest := map[int64]int64{}
	for _, r := range reqs {
		if !r.IsPrefill {
			longest[r.StepID] = max(longest[r.StepID], r.NumComputedTokens)
		}
	}
	for i := range steps {
		st := &steps[i]
		require.True(t, Known(st), "step %d", st.StepID)
		f := Of(st)
		require.Equal(t, float64(longest[st.StepID]), f.DecodeMaxKVTokens, "step %d", st.StepID)
		require.Empty(t, f.Unknown())
	}

	// Without step_requests: the uniform-context grid still determines the
	// longest context (zero variance), CompleteSteps has nothing to join.
	bare := t.TempDir()
	require.NoError(t, os.CopyFS(filepath.Join(bare, "steps.parquet"), os.DirFS(filepath.Join(dir, "steps.parquet"))))
	require.NoError(t, os.WriteFile(filepath.Join(bare, datasets.ManifestFile), []byte(`{"schema_version": 1,
  "hardware": {"gpu_name": "H200"}, "model": {"name": "Llama-3.1-8B"},
  "measurement_policy": {"decode": "steady_state_second_step", "prefill": "single_step"}}`), 0o644))
	db, err := datasets.Open(bare)
	require.NoError(t, err)
	steps, err = datasets.ReadAll[datasets.Step](db, datasets.TableSteps)
	require.NoError(t, err)
	n, matched, err = CompleteSteps(db, steps)
	require.NoError(t, err)
	require.True(t, matched)
	require.Zero(t, n)
	for i := range steps {
		f := Of(&steps[i])
		require.Equal(t, longest[steps[i].StepID], int64(f.DecodeMaxKVTokens), "step %d", steps[i].StepID)
	}
}

func TestDefinitionsNameKnownTerms(t *testing.T) {
	// A term written with parameters (experts_reached(experts=…)) is
	// defined under its bare name.
	known := append(fpm.KnownTerms(), fpm.TermExpertsReached)
	seen := map[string]bool{}
	for _, d := range Definitions {
		require.Contains(t, known, d.Name)
		require.False(t, seen[d.Name], d.Name)
		seen[d.Name] = true
	}
	for _, term := range known {
		if term != fpm.TermConst && term != fpm.TermPrefillStep {
			require.True(t, seen[term], "term %s has no definition", term)
		}
	}
}

// Features prices a batch as Of prices the row Fill fills, bit for bit,
// unknown (NaN) features included: for engine-made batches and for
// degenerate ones whose columns Of reads as unrecorded.
func TestBatchFeaturesIsOfFill(t *testing.T) {
	type req struct {
		prefill, isNew  bool
		chunk, computed int64
	}
	cases := []struct {
		name    string
		reqs    []req
		newReqs int32
	}{
		{"empty", nil, 0},
		{"decodes", []req{{computed: 700}, {computed: 900}, {computed: 12}}, 0},
		{"a new prompt's first chunk", []req{{prefill: true, isNew: true, chunk: 512}}, 1},
		{"mixed", []req{{prefill: true, isNew: true, chunk: 256, computed: 64}, {prefill: true, chunk: 100, computed: 1000},
			{computed: 4000}, {computed: 4000}}, 1},
		{"decodes of no context", []req{{computed: 0}, {computed: 0}}, 0},
		{"a longest decode that reads as unrecorded", []req{{computed: 0}, {computed: -4}}, 0},
		{"an empty chunk", []req{{prefill: true, chunk: 0, computed: 30}}, 0},
		{"attention that reads as unrecorded", []req{{prefill: true, chunk: 1, computed: -1}, {prefill: true, chunk: 3, computed: -2}}, 0},
		{"new requests the batch does not hold", []req{{computed: 5}}, 2},
		{"a new request of no tokens", []req{{prefill: true, isNew: true, chunk: 0}}, 1},
		{"new tokens without new requests", []req{{prefill: true, isNew: true, chunk: 8}}, 0},
		{"a negative count", []req{{computed: 5}}, -1},
	}
	bits := func(f fpm.Features) []uint64 {
		v := []float64{f.PrefillTokens, f.PrefillKVTokens, f.PrefillAttn, f.PrefillRequests, f.DecodeRequests, f.DecodeKVTokens,
			f.DecodeMaxKVTokens, f.DecodeKVVar, f.PaddedBatch, f.NewRequests, f.NewReqTokens}
		out := make([]uint64, len(v))
		for i, x := range v {
			out[i] = math.Float64bits(x)
		}
		return out
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b Batch
			for _, r := range c.reqs {
				if r.isNew {
					b.New(r.chunk + r.computed)
				}
				if r.prefill {
					b.Prefill(r.chunk, r.computed, r.chunk+r.computed)
				} else {
					b.Decode(r.computed)
				}
			}
			st := datasets.Step{NumNewReqs: c.newReqs}
			b.Fill(&st)
			require.Equal(t, bits(Of(&st)), bits(b.Features(c.newReqs)))
		})
	}
}
