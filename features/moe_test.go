package features

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
)

// TestExpertsTerm: the experts-reached term is written from the manifest's
// mixture of experts and routing; a manifest that does not record the
// routing is priced as uniform and says so; one whose routing cannot be
// priced gives no term and says why; a dense model none and nothing.
func TestExpertsTerm(t *testing.T) {
	skew, none := 0.3, 0.0
	moe := func(e datasets.ModelMoE) *datasets.Manifest {
		return &datasets.Manifest{Model: &datasets.ModelShape{Name: "M", MoE: &e}}
	}
	tests := []struct {
		name, term, note string
		m                *datasets.Manifest
	}{
		{"no manifest", "", "", nil},
		{"dense", "", "", &datasets.Manifest{Model: &datasets.ModelShape{Name: "D"}}},
		{"routing not recorded: uniform, said", "experts_reached(experts=128,top_k=8)", "records no moe.routing_skew",
			moe(datasets.ModelMoE{Experts: 128, TopK: 8})},
		{"recorded untilted", "experts_reached(experts=128,top_k=8)", "", moe(datasets.ModelMoE{Experts: 128, TopK: 8, RoutingSkew: &none, RouterLogitStd: 0.9})},
		{"recorded tilt", "experts_reached(experts=128,top_k=8,skew=0.3,logit_std=0.9)", "",
			moe(datasets.ModelMoE{Experts: 128, TopK: 8, RoutingSkew: &skew, RouterLogitStd: 0.9})},
		{"tilt without its logit spread: refused", "", "needs the router logits' standard deviation",
			moe(datasets.ModelMoE{Experts: 128, TopK: 8, RoutingSkew: &skew})},
		{"top_k above experts: refused", "", "want 1 <= top_k <= experts", moe(datasets.ModelMoE{Experts: 4, TopK: 8, RoutingSkew: &none})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			term, note := ExpertsTerm(tc.m)
			require.Equal(t, tc.term, term)
			if tc.note == "" {
				require.Empty(t, note)
			} else {
				require.Contains(t, note, tc.note)
			}
		})
	}
}
