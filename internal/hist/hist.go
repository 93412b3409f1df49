// Package hist is steplab's one streaming histogram (bounded memory,
// log-linear buckets, quantiles within a known relative error) and its one
// nearest-rank percentile of a sorted sample.
package hist

import (
	"cmp"
	"iter"
	"math"
)

// Buckets is a log-linear bucketing, named by a type so that the zero Hist
// of it is ready to use. Shape returns bits, lo and hi: values below 2^lo
// fall in 2^bits linear buckets of width 2^(lo−bits), each reported by its
// lower edge; a value in [2^lo, 2^(hi+1)) falls in the bucket of its binary
// exponent and its next bits mantissa bits, reported by the bucket's middle
// (relative error at most 2^−(bits+1)); larger values fall in the last
// bucket.
type Buckets interface {
	Shape() (bits, lo, hi int)
}

// Nanos buckets integer quantities such as nanoseconds: exact below 128,
// then 128 buckets per octave up to 2^63 (relative error under 0.4%).
type Nanos struct{}

// Shape implements Buckets.
func (Nanos) Shape() (bits, lo, hi int) { return 7, 7, 62 }

// Ratio buckets ratios such as an |relative error|: 8 buckets per octave
// from 2^−30 to 2^13 (relative error under 6.3%); zero and values under
// 2^−33 share the first bucket, values from 2^13 up the last.
type Ratio struct{}

// Shape implements Buckets.
func (Ratio) Shape() (bits, lo, hi int) { return 3, -30, 12 }

// Hist is a streaming histogram of non-negative values bucketed by B: its
// memory is the buckets', whatever the number of values.
type Hist[B Buckets] struct {
	c   []uint64 // allocated by the first Add
	n   uint64
	sum float64
	max float64
}

func shape[B Buckets]() (bits, lo, hi int) {
	var b B
	return b.Shape()
}

func index(x float64, bits, lo, hi int) int {
	sub := 1 << bits
	if x < math.Ldexp(1, lo) {
		return int(math.Ldexp(x, bits-lo))
	}
	b := math.Float64bits(x)
	e := int(b>>52&0x7ff) - 1023
	if e > hi {
		return sub + (hi-lo+1)<<bits - 1
	}
	return sub + (e-lo)<<bits + int(b>>(52-bits))&(sub-1)
}

func (h *Hist[B]) rep(i int) float64 {
	bits, lo, _ := shape[B]()
	sub := 1 << bits
	if i < sub {
		return math.Ldexp(float64(i), lo-bits)
	}
	i -= sub
	return math.Ldexp(1+(float64(i&(sub-1))+0.5)/float64(sub), lo+i>>bits)
}

// Add records x; negative values and NaN are ignored.
func (h *Hist[B]) Add(x float64) {
	if !(x >= 0) {
		return
	}
	bits, lo, hi := shape[B]()
	if h.c == nil {
		h.c = make([]uint64, (hi-lo+2)<<bits)
	}
	h.c[index(x, bits, lo, hi)]++
	h.n++
	h.sum += x
	h.max = max(h.max, x)
}

// Count is the number of values recorded.
func (h *Hist[B]) Count() uint64 { return h.n }

// Mean of the values recorded (0 without any).
func (h *Hist[B]) Mean() float64 {
	if h.n == 0 {
		return 0
	}
	return h.sum / float64(h.n)
}

// Max is the largest value recorded (0 without any).
func (h *Hist[B]) Max() float64 { return h.max }

// Quantile is the q-quantile (0..1) within the relative error of B: Bucket,
// but never above Max.
func (h *Hist[B]) Quantile(q float64) float64 { return min(h.Bucket(q), h.max) }

// Bucket is the reported value (see Buckets) of the bucket holding the
// value of rank ⌊q·(n−1)⌋+1, the q-quantile (0..1); 0 without any values.
func (h *Hist[B]) Bucket(q float64) float64 {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n-1)) + 1
	var c uint64
	for i, k := range h.c {
		if c += k; c >= rank {
			return h.rep(i)
		}
	}
	return h.rep(len(h.c) - 1)
}

// Buckets yields each non-empty bucket's reported value (see Buckets) and
// count, in increasing order: a cumulative distribution.
func (h *Hist[B]) Buckets() iter.Seq2[float64, uint64] {
	return func(yield func(float64, uint64) bool) {
		for i, k := range h.c {
			if k > 0 && !yield(h.rep(i), k) {
				return
			}
		}
	}
}

// NearestRank is the nearest-rank p-th percentile (p in 0..100) of sorted,
// a non-empty sample in increasing order: its ⌈p/100·n⌉-th value, the
// first at p ≤ 0 and the last at p ≥ 100.
func NearestRank[T cmp.Ordered](sorted []T, p float64) T {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[max(1, min(rank, len(sorted)))-1]
}
