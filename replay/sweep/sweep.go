package sweep

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/steplab/steplab/replay/whatif"
	"github.com/steplab/steplab/sim/rng"
)

// Vary is one swept key and its values (YAML scalars or flow values).
type Vary struct {
	Key    string
	Values []string
}

// ParseVary reads KEY=V1,V2,...; commas inside [] or {} do not split.
func ParseVary(s string) (Vary, error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" || v == "" {
		return Vary{}, fmt.Errorf("--vary %q: want KEY=V1,V2,...", s)
	}
	var vals []string
	depth, start := 0, 0
	for i := 0; i <= len(v); i++ {
		if i < len(v) {
			switch v[i] {
			case '[', '{':
				depth++
			case ']', '}':
				depth--
			}
		}
		if i == len(v) || (v[i] == ',' && depth == 0) {
			x := strings.TrimSpace(v[start:i])
			if x == "" {
				return Vary{}, fmt.Errorf("--vary %q: empty value", s)
			}
			vals = append(vals, x)
			start = i + 1
		}
	}
	return Vary{Key: k, Values: vals}, nil
}

// Point is one scenario of the grid.
type Point struct {
	Index int
	// Values, one per Vary, in order.
	Values []string
	// Seed of the point's scenario: derived from the scenario's seed and
	// the index.
	Seed uint64
}

// PointResult is a point's audit.
type PointResult struct {
	Point
	Audit whatif.Audit
}

// Result is a sweep.
type Result struct {
	Scenario string
	Vary     []Vary
	Points   []PointResult
}

// Options tune Run.
type Options struct {
	// Jobs is the number of points simulated at once (0 = GOMAXPROCS).
	Jobs int
	// Progress, when set, hears each finished point.
	Progress func(done, total int)
}

// Grid enumerates the cartesian product, the first key slowest.
func Grid(vary []Vary) [][]string {
	out := [][]string{nil}
	for _, v := range vary {
		var next [][]string
		for _, prefix := range out {
			for _, x := range v.Values {
				next = append(next, append(append([]string(nil), prefix...), x))
			}
		}
		out = next
	}
	return out
}

// PointSeed derives point i's seed from the scenario's.
func PointSeed(seed uint64, i int) uint64 { return rng.New(seed, "sweep").DeriveN(i).Seed() }

// Run compiles every point (refusing the sweep if any is invalid, naming
// it) and simulates them.
func Run(doc *whatif.Doc, vary []Vary, opts Options) (*Result, error) {
	if len(vary) == 0 {
		return nil, fmt.Errorf("sweep: nothing to vary: give --vary KEY=V1,V2,...")
	}
	seen := map[string]bool{}
	for _, v := range vary {
		if seen[v.Key] {
			return nil, fmt.Errorf("sweep: %s is varied twice", v.Key)
		}
		seen[v.Key] = true
	}
	grid := Grid(vary)
	scs := make([]*whatif.Scenario, len(grid))
	res := &Result{Vary: vary, Points: make([]PointResult, len(grid))}
	for i, vals := range grid {
		d := doc.Clone()
		var desc []string
		for k, v := range vary {
			if err := d.Set(v.Key + "=" + vals[k]); err != nil {
				return nil, fmt.Errorf("sweep point %d: %w", i, err)
			}
			desc = append(desc, v.Key+"="+vals[k])
		}
		sc, err := d.Compile()
		if err != nil {
			return nil, fmt.Errorf("sweep point %d (%s): %w", i, strings.Join(desc, ", "), err)
		}
		seed := PointSeed(sc.File.Seed, i)
		sc.File.Seed = seed
		scs[i] = sc
		res.Points[i].Point = Point{Index: i, Values: vals, Seed: seed}
		res.Scenario = sc.File.Name
	}
	n := opts.Jobs
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	n = min(n, len(grid))
	errs := make([]error, len(grid))
	var wg sync.WaitGroup
	var mu sync.Mutex
	next, done := 0, 0
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if next >= len(grid) {
					mu.Unlock()
					return
				}
				i := next
				next++
				mu.Unlock()
				out, err := whatif.Run(scs[i], whatif.Options{Jobs: 1})
				if err != nil {
					errs[i] = fmt.Errorf("sweep point %d: %w", i, err)
				} else {
					res.Points[i].Audit = out.Audit
				}
				mu.Lock()
				done++
				if opts.Progress != nil {
					opts.Progress(done, len(grid))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return res, nil
}

// numeric reports whether every value of v parses as a number.
func numeric(v Vary) bool {
	for _, x := range v.Values {
		if _, err := strconv.ParseFloat(x, 64); err != nil {
			return false
		}
	}
	return true
}
