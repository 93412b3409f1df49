package fit

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fpm"
)

// moeRouting is the routing of the synthetic mixture of experts.
var moeRouting = catalog.Routing{Experts: 128, TopK: 8}

// moeTruth is a decode step of a mixture of experts: a fixed cost, GEMM
// work per token, 150 µs per expert reached (its weights read once) and
// the KV walk, in ns.
func moeTruth(b, ctx float64) float64 {
	return 5e6 + 2e4*b + 1.5e5*moeRouting.Reached(nil, b) + 30*b*ctx
}

// moeGrid is a uniform decode grid of the synthetic mixture of experts,
// with 1% noise.
func moeGrid(seed uint64) []datasets.Step {
	rng := rand.New(rand.NewPCG(seed, 5))
	var out []datasets.Step
	for _, b := range []int{1, 2, 4, 8, 16, 32, 64, 128, 256} {
		for _, ctx := range []int{128, 512, 2048} {
			y := moeTruth(float64(b), float64(ctx)) * (1 + 0.01*rng.NormFloat64())
			out = append(out, datasets.Step{StepID: int64(len(out)), Kind: datasets.KindDecode, Role: datasets.RoleMeasured, Valid: true,
				BenchmarkID: int64(len(out)), NumCachedReqs: int32(b), NumDecodeRequests: int32(b), SumDecodeKVTokens: int64(b * ctx),
				MaxDecodeKVTokens: int64(ctx), TotalScheduledTokens: int64(b), WallTimeNs: int64(y), GPUTimeNs: -1})
		}
	}
	return out
}

// TestFitRecipeExpertsReached: on a mixture of experts' grid the decode
// form prices the expert reads by the experts reached, recovering their
// cost and pricing batches between the grid's sizes; the data's routing
// notes become the fit's warnings; without a routing (a dense model) the
// placeholder is left out and the recipe is the one fitted without it.
func TestFitRecipeExpertsReached(t *testing.T) {
	d := decodeData(t, moeGrid(1))
	d.Experts, d.ExpertsNotes = fpm.ExpertsReached(moeRouting), []string{"uniform routing assumed"}
	res, err := FitRecipe(d, RecipeOptions{Seed: 1, Kinds: ExpertsKindSpecs()})
	require.NoError(t, err)
	require.Equal(t, []string{"uniform routing assumed"}, res.Warnings)
	k := res.Model.Kind(datasets.KindDecode)
	for _, b := range []float64{3, 6, 12, 24, 48, 96} {
		f := dec(b, 1000)
		lin := k.Linear(f)
		require.Contains(t, lin.Terms, d.Experts)
		got, want := lin.PredictNs(f), moeTruth(b, 1000)
		require.InEpsilon(t, want, got, 0.03, "B=%g between the grid's sizes", b)
	}
	lin := k.Linear(dec(16, 1000))
	coef := lin.Coef[slices.Index(lin.Terms, d.Experts)]
	t.Logf("per expert reached: fitted %.0f ns, truth 150000 ns", coef)
	require.InEpsilon(t, 1.5e5, coef, 0.15)

	dense := *d
	dense.Experts, dense.ExpertsNotes = "", nil
	got, err := FitRecipe(&dense, RecipeOptions{Seed: 1, Kinds: ExpertsKindSpecs()})
	require.NoError(t, err)
	require.Empty(t, got.Warnings)
	want, err := FitRecipe(&dense, RecipeOptions{Seed: 1})
	require.NoError(t, err)
	gj, err := json.Marshal(got.Model)
	require.NoError(t, err)
	wj, err := json.Marshal(want.Model)
	require.NoError(t, err)
	require.JSONEq(t, string(wj), string(gj), "a dense model's recipe is the one without the term")
}

// TestEngineSettingsExperts: the datasets' manifests give the data its
// experts-reached term when they agree, none (and a note saying why) when
// they record different mixtures, and none for dense models.
func TestEngineSettingsExperts(t *testing.T) {
	none := 0.0
	moe := func(experts int, skew *float64) *datasets.Manifest {
		return &datasets.Manifest{Model: &datasets.ModelShape{Name: "M", MoE: &datasets.ModelMoE{Experts: experts, TopK: 8, RoutingSkew: skew, RouterLogitStd: 0.9}}}
	}
	dense := &datasets.Manifest{Model: &datasets.ModelShape{Name: "D"}}
	tests := []struct {
		name  string
		ms    []*datasets.Manifest
		term  string
		notes []string
	}{
		{"dense", []*datasets.Manifest{dense, dense}, "", nil},
		{"recorded routing", []*datasets.Manifest{moe(128, &none), moe(128, &none)}, "experts_reached(experts=128,top_k=8)", nil},
		{"unrecorded routing: uniform, noted once", []*datasets.Manifest{moe(128, nil), moe(128, nil)}, "experts_reached(experts=128,top_k=8)", []string{"records no moe.routing_skew"}},
		{"different mixtures: none", []*datasets.Manifest{moe(128, &none), moe(64, &none)}, "", []string{"record different mixtures of experts"}},
		{"a mixture beside a dense model: none", []*datasets.Manifest{moe(128, &none), dense}, "", []string{"record different mixtures of experts"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var e engineSettings
			for _, m := range tc.ms {
				e.add(m)
			}
			var d Data
			e.apply(&d)
			require.Equal(t, tc.term, d.Experts)
			require.Len(t, d.ExpertsNotes, len(tc.notes))
			for i, n := range tc.notes {
				require.Contains(t, d.ExpertsNotes[i], n)
			}
		})
	}
}
