package fpm

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/catalog"
)

// TestExpertsReached: the experts term counts the distinct experts a
// step's tokens (prefill tokens plus one a decode) reach under the named
// routing, and its name round-trips.
func TestExpertsReached(t *testing.T) {
	uniform := catalog.Routing{Experts: 128, TopK: 8}
	skewed := catalog.Routing{Experts: 128, TopK: 8, Skew: 0.3, LogitStd: 0.905}
	tests := []struct {
		name     string
		r        catalog.Routing
		term     string
		f        Features
		tokens   float64
		noTokens bool
	}{
		{"uniform, batch-1 decode: top_k", uniform, "experts_reached(experts=128,top_k=8)", Features{DecodeRequests: 1, DecodeKVTokens: 500}, 1, false},
		{"uniform, decode batch of 16", uniform, "experts_reached(experts=128,top_k=8)", Features{DecodeRequests: 16}, 16, false},
		{"uniform, mixed: chunk and decodes", uniform, "experts_reached(experts=128,top_k=8)", Features{PrefillTokens: 30, PrefillRequests: 1, DecodeRequests: 4}, 34, false},
		{"skewed, decode batch of 16", skewed, "experts_reached(experts=128,top_k=8,skew=0.3,logit_std=0.905)", Features{DecodeRequests: 16}, 16, false},
		{"no tokens", uniform, "experts_reached(experts=128,top_k=8)", Features{}, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.term, ExpertsReached(tc.r))
			fn, err := Term(tc.term)
			require.NoError(t, err)
			got := fn(tc.f)
			if tc.noTokens {
				require.Zero(t, got)
				return
			}
			require.InDelta(t, tc.r.Reached(tc.r.PickProbs(), tc.tokens), got, 1e-9)
		})
	}
	f := Features{DecodeRequests: 16}
	u, _ := Term(ExpertsReached(uniform))
	s, _ := Term(ExpertsReached(skewed))
	require.InDelta(t, 8, u(Features{DecodeRequests: 1}), 1e-9)
	require.Less(t, s(f), u(f), "a skewed router reaches fewer experts")
	for _, bad := range []string{"experts_reached(experts=128)", "experts_reached(experts=128,top_k=0)", "experts_reached(experts=8,top_k=9)",
		"experts_reached(top_k=8,experts=128)", "experts_reached(experts=128,top_k=8,skew=0.3)", "experts_reached(experts=128,top_k=8,skew=0,logit_std=1)",
		"experts_reached(experts=128,top_k=8)x", "experts_reached(experts=128, top_k=8)", "experts_reached(experts=128,top_k=8,skew=-1,logit_std=1)"} {
		_, err := Term(bad)
		require.Error(t, err, bad)
		require.Contains(t, err.Error(), bad)
	}
	_, err := Term(TermExpertsReached)
	require.ErrorContains(t, err, "unknown term", "the bare name is the recipe's placeholder, not a term")
}
