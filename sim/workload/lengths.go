package workload

import (
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/sim/rng"
)

// Length distribution kinds (LengthDist.Kind).
const (
	LengthFixed     = "fixed"
	LengthUniform   = "uniform"
	LengthLognormal = "lognormal"
	LengthEmpirical = "empirical"
)

// LengthDist is a distribution of token counts (prompt or output lengths).
// Every draw is an integer >= 1.
type LengthDist struct {
	// Kind is fixed | uniform | lognormal | empirical.
	Kind string
	// Value is the length of a fixed distribution.
	Value int
	// Min and Max bound a uniform distribution (inclusive). For lognormal
	// they clamp draws when set (Max 0 = no upper clamp; Min below 1 = 1).
	Min, Max int
	// Mean and Sigma parameterize lognormal: Mean is the mean length in
	// tokens (not of its logarithm) and Sigma the standard deviation of
	// ln(length); mu = ln(Mean) − Sigma²/2.
	Mean, Sigma float64
	// Samples is the population of an empirical distribution, drawn with
	// replacement. Prefer Empirical (joint prompt/output pairs from a
	// dataset) to keep the correlation between the two lengths.
	Samples []int
}

// Fixed is the distribution that always returns n.
func Fixed(n int) LengthDist { return LengthDist{Kind: LengthFixed, Value: n} }

// Uniform draws uniformly from [lo, hi].
func Uniform(lo, hi int) LengthDist { return LengthDist{Kind: LengthUniform, Min: lo, Max: hi} }

// Lognormal draws round(exp(N(mu, sigma))) with mean `mean` tokens.
func Lognormal(mean, sigma float64) LengthDist {
	return LengthDist{Kind: LengthLognormal, Mean: mean, Sigma: sigma}
}

// validate names the field (field is the caller's path, e.g. "PromptLen").
func (d LengthDist) validate(field string) error {
	switch d.Kind {
	case LengthFixed:
		if d.Value < 1 {
			return fmt.Errorf("%s: fixed length Value=%d: must be >= 1 token", field, d.Value)
		}
	case LengthUniform:
		if d.Min < 1 {
			return fmt.Errorf("%s: uniform Min=%d: must be >= 1 token", field, d.Min)
		}
		if d.Max < d.Min {
			return fmt.Errorf("%s: uniform Max=%d < Min=%d: set Max >= Min", field, d.Max, d.Min)
		}
	case LengthLognormal:
		if !(d.Mean >= 1) || math.IsInf(d.Mean, 0) {
			return fmt.Errorf("%s: lognormal Mean=%v: must be a finite length >= 1 token", field, d.Mean)
		}
		if !(d.Sigma >= 0) || math.IsInf(d.Sigma, 0) {
			return fmt.Errorf("%s: lognormal Sigma=%v: must be finite and >= 0", field, d.Sigma)
		}
		if d.Max != 0 && d.Max < max(1, d.Min) {
			return fmt.Errorf("%s: lognormal Max=%d < Min=%d: set Max >= Min, or 0 for no clamp", field, d.Max, max(1, d.Min))
		}
	case LengthEmpirical:
		if len(d.Samples) == 0 {
			return fmt.Errorf("%s: empirical distribution has no Samples", field)
		}
		for i, v := range d.Samples {
			if v < 1 {
				return fmt.Errorf("%s: empirical Samples[%d]=%d: lengths must be >= 1 token", field, i, v)
			}
		}
	case "":
		return fmt.Errorf("%s: Kind is empty: choose fixed, uniform, lognormal or empirical", field)
	default:
		return fmt.Errorf("%s: unknown Kind %q: choose fixed, uniform, lognormal or empirical", field, d.Kind)
	}
	return nil
}

// draw assumes validate passed.
func (d *LengthDist) draw(s *rng.Stream) int {
	switch d.Kind {
	case LengthFixed:
		return d.Value
	case LengthUniform:
		return d.Min + s.IntN(d.Max-d.Min+1)
	case LengthLognormal:
		mu := math.Log(d.Mean) - d.Sigma*d.Sigma/2
		x := math.Exp(mu + d.Sigma*s.NormFloat64())
		lo := max(1, d.Min)
		if x < float64(lo) {
			return lo
		}
		if d.Max > 0 && x > float64(d.Max) {
			return d.Max
		}
		if x > math.MaxInt32 {
			return math.MaxInt32
		}
		return int(math.Round(x))
	case LengthEmpirical:
		return d.Samples[s.IntN(len(d.Samples))]
	}
	panic("workload: draw from an unvalidated LengthDist")
}

// Empirical is a population of (prompt, output) length pairs taken from a
// dataset's requests table and drawn jointly with replacement, so that the
// correlation between prompt and output lengths is kept. It holds 8 bytes a
// row in memory: it is a distribution, not a stream.
type Empirical struct {
	Prompt, Output []int32
	// Source names where the pairs came from (for provenance).
	Source string
}

// Len is the number of pairs.
func (e *Empirical) Len() int { return len(e.Prompt) }

func (e *Empirical) validate(field string) error {
	if e == nil || len(e.Prompt) == 0 {
		return fmt.Errorf("%s: empirical population is empty: load one with LoadEmpirical from a dataset with a requests table", field)
	}
	if len(e.Prompt) != len(e.Output) {
		return fmt.Errorf("%s: empirical population has %d prompt and %d output lengths: they must pair up", field, len(e.Prompt), len(e.Output))
	}
	return nil
}

// requestLengths reads only the two length columns (column projection).
type requestLengths struct {
	ReqID        string `parquet:"req_id"`
	PromptTokens int64  `parquet:"prompt_tokens"`
	OutputTokens int64  `parquet:"output_tokens"`
}

// LoadEmpirical reads the (prompt_tokens, output_tokens) pairs of the
// requests table of the dataset at dir. A row with a length below 1 is an
// error naming it.
func LoadEmpirical(dir string) (*Empirical, error) {
	d, err := datasets.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("workload: empirical lengths: %w", err)
	}
	sc, err := datasets.Scan[requestLengths](d, datasets.TableRequests)
	if err != nil {
		return nil, fmt.Errorf("workload: empirical lengths: %w", err)
	}
	defer sc.Close()
	e := &Empirical{Source: dir}
	buf := make([]requestLengths, 4096)
	row := 0
	for {
		n, err := sc.Read(buf)
		for _, r := range buf[:n] {
			if r.PromptTokens < 1 || r.OutputTokens < 1 || r.PromptTokens > math.MaxInt32 || r.OutputTokens > math.MaxInt32 {
				return nil, fmt.Errorf("workload: empirical lengths: %s requests row %d (req_id %q): prompt_tokens=%d output_tokens=%d: both must be in [1, 2^31)",
					dir, row, r.ReqID, r.PromptTokens, r.OutputTokens)
			}
			e.Prompt = append(e.Prompt, int32(r.PromptTokens))
			e.Output = append(e.Output, int32(r.OutputTokens))
			row++
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("workload: empirical lengths: %w", err)
		}
	}
	if len(e.Prompt) == 0 {
		return nil, fmt.Errorf("workload: empirical lengths: %s: requests table is empty", dir)
	}
	return e, nil
}

// Lengths says how a generator draws prompt and output lengths: either
// jointly from an Empirical population, or independently from Prompt and
// Output.
type Lengths struct {
	Prompt, Output LengthDist
	// Joint, when set, replaces Prompt and Output.
	Joint *Empirical
}

func (l Lengths) validate(field string) error {
	if l.Joint != nil {
		return l.Joint.validate(field + ".Joint")
	}
	if err := l.Prompt.validate(field + ".Prompt"); err != nil {
		return err
	}
	return l.Output.validate(field + ".Output")
}

// lengthSampler draws lengths from their own streams, so that changing the
// length distribution never changes arrival times (and vice versa).
type lengthSampler struct {
	l              Lengths
	prompt, output *rng.Stream
}

func newLengthSampler(l Lengths, root *rng.Stream) lengthSampler {
	return lengthSampler{l: l, prompt: root.Derive("prompt"), output: root.Derive("output")}
}

func (s *lengthSampler) draw() (prompt, output int) {
	if j := s.l.Joint; j != nil {
		i := s.prompt.IntN(len(j.Prompt))
		return int(j.Prompt[i]), int(j.Output[i])
	}
	return s.l.Prompt.draw(s.prompt), s.l.Output.draw(s.output)
}
