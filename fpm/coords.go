package fpm

import "fmt"

// Coordinates are the named functions of Features an interpolation Table
// is laid over and its hull drawn in. Every basis term is a coordinate
// (so a term added to the basis is a coordinate too), and so are the
// per-request quantities a benchmark sweeps, which no linear term is.
const (
	// CoordKVPerRequest is the context each decode request reads:
	// DecodeKVTokens / DecodeRequests (0 without decode requests). A decode
	// benchmark sweeps batch × context, so its points lie on a rectangle in
	// (decode_requests, kv_per_request) but not in (decode_requests,
	// decode_kv_tokens).
	CoordKVPerRequest = "kv_per_request"
	// CoordKVMaxRatio is how ragged the decode batch is: the longest
	// context over the mean, DecodeMaxKVTokens / kv_per_request (1 for a
	// uniform batch; 0 without decode requests). A table over it with the
	// single node 1 holds a uniform grid and prices only uniform batches:
	// a ragged one lies outside its hull and goes to the linear form,
	// which prices the longest context.
	CoordKVMaxRatio = "kv_max_ratio"
	// CoordScheduledTokens is the tokens the step computes: prefill
	// tokens plus one a decode request. A CUDA graph for a prefill or
	// mixed step is picked by it, so the step's cost changes regime where
	// it passes the largest captured size.
	CoordScheduledTokens = "scheduled_tokens"
)

var coordFuncs = map[string]TermFunc{
	CoordKVPerRequest: func(f Features) float64 {
		if f.DecodeRequests <= 0 {
			return 0
		}
		return f.DecodeKVTokens / f.DecodeRequests
	},
	CoordKVMaxRatio: func(f Features) float64 {
		if f.DecodeRequests <= 0 || f.DecodeKVTokens <= 0 {
			return 0
		}
		return f.DecodeMaxKVTokens * f.DecodeRequests / f.DecodeKVTokens
	},
	CoordScheduledTokens: func(f Features) float64 { return f.PrefillTokens + f.DecodeRequests },
}

// Coord returns the function of a coordinate name: one of the coordinates
// above, else a basis term.
func Coord(name string) (TermFunc, error) {
	if fn, ok := coordFuncs[name]; ok {
		return fn, nil
	}
	if fn, ok := termFuncs[name]; ok {
		return fn, nil
	}
	return nil, fmt.Errorf("fpm: unknown coordinate %q (known: %s, %s, %s or a term: %v)", name, CoordKVPerRequest, CoordKVMaxRatio, CoordScheduledTokens, KnownTerms())
}
