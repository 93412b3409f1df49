package rng

import (
	"math"
	"math/rand/v2"
	"strconv"
)

// Stream is a deterministic random stream. It is not safe for concurrent use;
// give each goroutine its own stream (Derive).
type Stream struct {
	name string
	seed uint64
	pcg  rand.PCG
	r    *rand.Rand
}

// New returns the stream of subsystem name under the root seed.
func New(seed uint64, name string) *Stream {
	return newStream(derive(seed, name), name)
}

func newStream(seed uint64, name string) *Stream {
	s := &Stream{name: name, seed: seed}
	s.pcg.Seed(mix(seed^0x6a09e667f3bcc908), mix(seed^0xbb67ae8584caa73b))
	s.r = rand.New(&s.pcg)
	return s
}

// Name is the stream's path: the names it was derived through, joined by "/"
// (DeriveN adds "#i").
func (s *Stream) Name() string { return s.name }

// Seed is the stream's derived seed: two streams with the same Seed produce the
// same numbers. Record it where a run's provenance is kept.
func (s *Stream) Seed() uint64 { return s.seed }

// Derive returns a child stream for a sub-consumer, independent of s's own
// draws: deriving does not consume from s, and the child does not depend on how
// many numbers s has produced.
func (s *Stream) Derive(name string) *Stream {
	return newStream(derive(s.seed, name), s.name+"/"+name)
}

// DeriveN returns the i-th child stream (a repetition, a sweep point). It does
// not consume from s.
func (s *Stream) DeriveN(i int) *Stream {
	return newStream(mix(mix(s.seed)^mix(uint64(i)+0x3c6ef372fe94f82b)), s.name+"#"+strconv.Itoa(i))
}

// Uint64 returns a uniformly distributed 64-bit value.
func (s *Stream) Uint64() uint64 { return s.pcg.Uint64() }

// Float64 returns a uniform value in [0, 1).
func (s *Stream) Float64() float64 { return s.r.Float64() }

// IntN returns a uniform value in [0, n). It panics if n <= 0.
func (s *Stream) IntN(n int) int { return s.r.IntN(n) }

// ExpFloat64 returns an exponentially distributed value with rate 1 (mean 1).
func (s *Stream) ExpFloat64() float64 { return s.r.ExpFloat64() }

// NormFloat64 returns a standard normal value.
func (s *Stream) NormFloat64() float64 { return s.r.NormFloat64() }

// Gamma returns a Gamma(shape, 1) value (mean = shape), by Marsaglia and
// Tsang's method; shape < 1 uses the boost Gamma(shape+1)·U^(1/shape). It
// panics if shape <= 0. Scale the result for another scale parameter.
func (s *Stream) Gamma(shape float64) float64 {
	if !(shape > 0) {
		panic("rng: Gamma shape must be > 0")
	}
	if shape == 1 {
		return s.r.ExpFloat64()
	}
	boost := 1.0
	if shape < 1 {
		// U in (0,1]: avoid 0^(1/shape) = 0 which would return an exact 0.
		boost = math.Pow(1-s.r.Float64(), 1/shape)
		shape++
	}
	d := shape - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := s.r.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := s.r.Float64()
		x2 := x * x
		if u < 1-0.0331*x2*x2 {
			return d * v * boost
		}
		if math.Log(u) < 0.5*x2+d*(1-v+math.Log(v)) {
			return d * v * boost
		}
	}
}

// derive mixes a parent seed with a name. FNV-1a is stable across Go
// versions (unlike hash/maphash), so derived seeds are too.
func derive(parent uint64, name string) uint64 {
	return mix(mix(parent) ^ fnv1a64(name))
}

func fnv1a64(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// mix is SplitMix64's finalizer (Steele, Lea, Flood 2014): a bijection on
// uint64 with good avalanche, so nearby seeds give unrelated streams.
func mix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Mix64 exposes the SplitMix64 finalizer for deterministic hashing (hash
// chains of prefix blocks, stable tie-breaks). It is part of the same
// compatibility promise as the streams.
func Mix64(z uint64) uint64 { return mix(z) }
