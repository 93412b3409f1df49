package fpm

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// DecodeKernel is the launch rule of a split-KV decode attention kernel
// (steplab's worker: capture/worker/attention.py, TritonAttention): one
// program per (request, KV head, split) walks its share of the request's
// KV in tiles of TileTokens; a decode-only batch of B rows (its CUDA
// graph's padded size) is split into next_pow2(⌈SplitPrograms/(B × KV
// heads)⌉) ways, at most SplitMax, when that is more than one, so that
// the launch has SplitPrograms programs or more. Each split walks
// ⌈⌈context/splits⌉/tile⌉ tiles. The zero value is a kernel that never
// splits and walks token by token.
type DecodeKernel struct {
	TileTokens    int
	SplitPrograms int
	SplitMax      int
}

// Validate refuses negative fields, and a split target without a most
// splits (or the reverse).
func (k DecodeKernel) Validate() error {
	if k.TileTokens < 0 || k.SplitPrograms < 0 || k.SplitMax < 0 || (k.SplitPrograms > 0) != (k.SplitMax > 0) {
		return fmt.Errorf("fpm: decode kernel tile=%d split_programs=%d split_max=%d: want non-negative, split_programs and split_max both set or both 0",
			k.TileTokens, k.SplitPrograms, k.SplitMax)
	}
	return nil
}

// Splits is how many ways the kernel splits the KV walk of a decode-only
// batch launched with rows requests of kvHeads KV heads.
func (k DecodeKernel) Splits(rows, kvHeads float64) float64 {
	if k.SplitPrograms <= 0 || !(rows*kvHeads > 0) {
		return 1
	}
	want := math.Ceil(float64(k.SplitPrograms) / (rows * kvHeads))
	if !(want > 1) {
		return 1
	}
	if want >= float64(k.SplitMax) {
		return float64(k.SplitMax)
	}
	return float64(uint64(1) << bits.Len64(uint64(want)-1))
}

// walkClass is one context of a batch's contexts: count requests of
// context tokens each.
type walkClass struct{ count, context float64 }

// DecodeWalk is what a decode batch's attention costs in KV tokens per KV
// head, the kernel's programs sharing the GPU's memory bandwidth: a
// program streams its share of one request's KV (a split of it, in whole
// tiles, k's rule), the memory is saturated while wave programs or more
// stream at once, and a program alone streams no faster than 1/wave of
// it (processor sharing with a per-program cap). With m(u) the programs
// per KV head still walking after u tokens of their walk, the batch takes
//
//	∫ max(m(u), wave/kvHeads) du
//
// tokens' worth of the saturated bandwidth: Σ contexts while the batch
// keeps the memory saturated (a uniform batch that fills a wave:
// decode_kv_tokens), and the longest program's walk at 1/wave of it once
// fewer programs are left (a ragged batch's long requests, a small
// batch, a short context's last tile). The step records the count, mean,
// variance and longest of its contexts, not each one: they are taken as
// the two-point distribution with those moments (the longest context and
// one shorter one). The launch follows the batch the CUDA graph ran
// (PaddedBatch): its splits and, for the padding rows, nothing to walk.
func DecodeWalk(f Features, wave, kvHeads float64, k DecodeKernel) float64 {
	b := f.DecodeRequests
	if !(b > 0) {
		return 0
	}
	mean := f.DecodeKVTokens / b
	longest := f.DecodeMaxKVTokens
	if !(longest >= mean) {
		longest = mean
	}
	classes := twoPoint(b, mean, longest, f.DecodeKVVar)
	rows := f.PaddedBatch
	if !(rows >= b) {
		rows = b
	}
	s := k.Splits(rows, kvHeads)
	a := wave / kvHeads
	// Each class's programs: full splits walk per tokens, the last one
	// what is left (in whole tiles).
	var progs [4]walkProg
	n := 0
	for _, c := range classes {
		if !(c.count > 0) || !(c.context > 0) {
			continue
		}
		per, full, last := splitWalk(c.context, s, float64(k.TileTokens))
		if full > 0 {
			progs[n] = walkProg{c.count * full, per}
			n++
		}
		progs[n] = walkProg{c.count, last}
		n++
	}
	// Integrate max(m(u), a) over the walk: m is piecewise constant, dropping
	// at each program's end.
	walks := progs[:n]
	slices.SortFunc(walks, func(x, y walkProg) int { return cmp.Compare(x.walk, y.walk) })
	var total, u float64
	left := 0.0
	for _, p := range walks {
		left += p.count
	}
	for _, p := range walks {
		total += (p.walk - u) * math.Max(left, a)
		u = p.walk
		left -= p.count
	}
	return total
}

// walkProg is count programs (per KV head) that each walk walk tokens.
type walkProg struct{ count, walk float64 }

// splitWalk splits a request's walk of context tokens s ways in tiles of
// tile tokens (0: token by token): full splits walk per tokens each, the
// last walk is what is left rounded up to a tile.
func splitWalk(context, s, tile float64) (per, full, last float64) {
	if !(tile > 0) {
		return context / s, s - 1, context / s
	}
	per = math.Ceil(math.Ceil(context/s)/tile) * tile
	full = math.Ceil(context/per) - 1
	last = math.Ceil((context-full*per)/tile) * tile
	return per, full, last
}

// twoPoint is the two-point distribution of b contexts of the given mean,
// longest and population variance: a share p = var/(var + (longest −
// mean)²) of the batch at the longest, the rest at the context that keeps
// the mean. A batch whose longest is above its mean with no variance
// recorded is taken as one request at the longest.
func twoPoint(b, mean, longest, variance float64) [2]walkClass {
	d := longest - mean
	if !(d > 0) {
		return [2]walkClass{{b, mean}}
	}
	p := 1 / b
	if variance > 0 {
		p = variance / (variance + d*d)
	}
	short := (mean - p*longest) / (1 - p)
	return [2]walkClass{{b * (1 - p), math.Max(short, 0)}, {b * p, longest}}
}
