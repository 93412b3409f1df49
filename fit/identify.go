package fit

import (
	"errors"
	"fmt"
	"github.com/steplab/steplab/fpm"
	"slices"
	"strings"
)

// identifiable splits terms into those the data can price and those it
// cannot, with the reason for each dropped one:
//
//   - not recorded: the source left the column behind it Unknown on some
//     rows (Data.Unrecorded);
//   - zero on every row: the data never exercises the term;
//   - constant on every row (with const in the basis): indistinguishable
//     from the fixed cost;
//   - a linear combination of terms kept before it: e.g. new_requests on
//     admission-step decode points, where every decode request is new, so
//     new_requests equals decode_requests.
//
// Terms are considered in the order given (the basis order, general terms
// first), so of a collinear set the earliest terms stay: the choice is
// deterministic and keeps the term that means the most on other data.
// Bad timings or feature values are errors: no choice of terms repairs them.
func identifiable(d *Data, terms []string, relative bool) (kept []string, dropped []DroppedTerm, err error) {
	// An unrecorded term's column is unknown (NaN), not a value: leave it
	// out before the design is built. Dropped terms are listed in basis
	// order all the same.
	order := slices.Clone(terms)
	defer func() {
		slices.SortStableFunc(dropped, func(a, b DroppedTerm) int {
			return slices.Index(order, a.Term) - slices.Index(order, b.Term)
		})
	}()
	terms = slices.DeleteFunc(slices.Clone(terms), func(t string) bool {
		if n := d.Unrecorded[t]; n > 0 {
			// Unrecorded counts the whole data a kind's rows were taken from.
			reason := fmt.Sprintf("not recorded by the source on %d of %d rows", n, d.Len())
			if n > d.Len() {
				reason = fmt.Sprintf("not recorded by the source on %d rows of the data", n)
			}
			dropped = append(dropped, DroppedTerm{t, reason})
			return true
		}
		return false
	})
	ds, err := d.design(terms, relative)
	if err != nil {
		return nil, nil, err
	}
	if err := checkValues(ds); err != nil {
		return nil, nil, err
	}
	zero, constant := degenerateColumns(ds)
	g := NewGram(ds.X, ds.Y, ds.W, ds.P())
	var idx []int
	for j, t := range terms {
		switch {
		case slices.Contains(zero, t):
			dropped = append(dropped, DroppedTerm{t, withHint(t, "zero on every row")})
			continue
		case slices.Contains(constant, t):
			dropped = append(dropped, DroppedTerm{t, withHint(t, "constant on every row (indistinguishable from const)")})
			continue
		}
		try := append(slices.Clone(idx), j)
		names := make([]string, len(try))
		for a, i := range try {
			names[a] = terms[i]
		}
		var de *DataError
		if err := g.sub(try).CheckRank(names); errors.As(err, &de) {
			reason := "a linear combination of the terms kept before it"
			if others := slices.DeleteFunc(slices.Clone(de.Terms), func(s string) bool { return s == t }); len(others) > 0 {
				reason = "a linear combination of " + strings.Join(others, ", ")
			}
			dropped = append(dropped, DroppedTerm{t, withHint(t, reason+" on these rows")})
			continue
		}
		idx = try
		kept = append(kept, t)
	}
	if len(kept) == 0 {
		return nil, dropped, dataErr(ErrZeroColumn, "every term was dropped", terms...)
	}
	return kept, dropped, nil
}

// identifiedBy says, per term, which points would identify it where the
// rows cannot (a dropped term's reason ends with it).
var identifiedBy = map[string]string{
	fpm.TermDecodeKVTokens:   "ragged decode points (requests of one batch at different contexts) would identify it",
	fpm.TermDecodeMaxKV:      "ragged decode points (requests of one batch at different contexts) would identify it",
	fpm.TermDecodeBatchMaxKV: "ragged decode points (requests of one batch at different contexts) would identify it",
	fpm.TermDecodeKVStd:      "ragged decode points (requests of one batch at different contexts) would identify it",
	fpm.TermPaddedBatch:      "decode batches between two CUDA-graph sizes (padded above their count) would identify it",
	fpm.TermPrefillKVTokens:  "prefill chunks after a context (chunked prefill, prefix-cache hits, mixed points at a context) would identify it",
	fpm.TermPrefillAttn:      "prefill points at several chunk lengths and contexts would identify it",
	fpm.TermPrefillRequests:  "prefill points of several requests at one token count would identify it",
	fpm.TermNewRequests:      "steps that admit requests beside running ones (mixed points) would identify it",
	fpm.TermNewReqTokens:     "mixed points at a context (new prompts beside chunks of running ones) would identify it",
}

// withHint appends to a dropped term's reason which points would identify it.
func withHint(term, reason string) string {
	if h := identifiedBy[term]; h != "" {
		return reason + "; " + h
	}
	return reason
}

// unrecordedError refuses terms the source did not record on some rows
// (the strict policy): a fit would price the zeros FeaturesOf put there.
func unrecordedError(d *Data, terms []string) error {
	for _, t := range terms {
		if n := d.Unrecorded[t]; n > 0 {
			return dataErr(ErrBadFeature, fmt.Sprintf("the source did not record it on %d of %d rows (Unknown, -1); drop the term", n, d.Len()), t)
		}
	}
	return nil
}
