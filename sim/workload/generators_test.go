package workload

import (
	"math"
	"testing"

	"github.com/steplab/steplab/sim/rng"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func fixedLengths() Lengths { return Lengths{Prompt: Fixed(100), Output: Fixed(10)} }

func drain(t testing.TB, s Source) []Arrival {
	t.Helper()
	var out []Arrival
	for {
		a, ok := s.Next()
		if !ok {
			break
		}
		out = append(out, a)
	}
	require.NoError(t, s.Err())
	return out
}

func openLoop(t testing.TB, cfg OpenLoopConfig) *OpenLoop {
	t.Helper()
	g, err := NewOpenLoop(cfg)
	require.NoError(t, err)
	return g
}

func TestOpenLoopValidation(t *testing.T) {
	ok := OpenLoopConfig{Process: ProcessPoisson, RateRPS: 10, Requests: 5, Lengths: fixedLengths()}
	require.NoError(t, ok.Validate())
	cases := []struct {
		name string
		edit func(*OpenLoopConfig)
		want string
	}{
		{"negative rate", func(c *OpenLoopConfig) { c.RateRPS = -1 }, "RateRPS=-1"},
		{"zero rate", func(c *OpenLoopConfig) { c.RateRPS = 0 }, "RateRPS=0"},
		{"nan rate", func(c *OpenLoopConfig) { c.RateRPS = math.NaN() }, "RateRPS=NaN"},
		{"gamma cv zero", func(c *OpenLoopConfig) { c.Process = ProcessGamma; c.CV = 0 }, "CV=0"},
		{"gamma cv negative", func(c *OpenLoopConfig) { c.Process = ProcessGamma; c.CV = -2 }, "CV=-2"},
		{"unknown process", func(c *OpenLoopConfig) { c.Process = "weibull" }, `unknown Process "weibull"`},
		{"no process", func(c *OpenLoopConfig) { c.Process = "" }, "Process is empty"},
		{"no end", func(c *OpenLoopConfig) { c.Requests = 0 }, "neither Requests nor DurationNs"},
		{"negative requests", func(c *OpenLoopConfig) { c.Requests = -3 }, "Requests=-3"},
		{"negative warmups", func(c *OpenLoopConfig) { c.WarmupRequests = -1 }, "WarmupRequests=-1"},
		{"prompt zero", func(c *OpenLoopConfig) { c.Lengths.Prompt = Fixed(0) }, "Lengths.Prompt: fixed length Value=0"},
		{"output uniform inverted", func(c *OpenLoopConfig) { c.Lengths.Output = Uniform(5, 2) }, "Lengths.Output: uniform Max=2 < Min=5"},
		{"uniform min zero", func(c *OpenLoopConfig) { c.Lengths.Output = Uniform(0, 2) }, "uniform Min=0"},
		{"lognormal mean", func(c *OpenLoopConfig) { c.Lengths.Prompt = Lognormal(0.5, 1) }, "lognormal Mean=0.5"},
		{"lognormal sigma", func(c *OpenLoopConfig) { c.Lengths.Prompt = Lognormal(100, -1) }, "lognormal Sigma=-1"},
		{"empty kind", func(c *OpenLoopConfig) { c.Lengths.Prompt = LengthDist{} }, "Kind is empty"},
		{"empirical empty", func(c *OpenLoopConfig) { c.Lengths.Joint = &Empirical{} }, "empirical population is empty"},
		{"empirical samples", func(c *OpenLoopConfig) {
			c.Lengths.Prompt = LengthDist{Kind: LengthEmpirical, Samples: []int{3, 0}}
		}, "Samples[1]=0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			_, err := NewOpenLoop(c)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestOpenLoopDeterminism(t *testing.T) {
	for _, proc := range []string{ProcessConstant, ProcessPoisson, ProcessGamma} {
		t.Run(proc, func(t *testing.T) {
			cfg := OpenLoopConfig{Process: proc, RateRPS: 50, CV: 2, Requests: 500, Seed: 7,
				Lengths: Lengths{Prompt: Lognormal(500, 1), Output: Uniform(1, 200)}}
			a := drain(t, openLoop(t, cfg))
			b := drain(t, openLoop(t, cfg))
			require.Equal(t, a, b)
			require.Len(t, a, 500)
			cfg.Seed = 8
			c := drain(t, openLoop(t, cfg))
			assert.NotEqual(t, a, c)
			for i := 1; i < len(a); i++ {
				require.GreaterOrEqual(t, a[i].AtNs, a[i-1].AtNs)
			}
		})
	}
}

// Changing the length distribution must not move a single arrival.
func TestOpenLoopStreamsIndependent(t *testing.T) {
	cfg := OpenLoopConfig{Process: ProcessPoisson, RateRPS: 20, Requests: 200, Seed: 1, Lengths: fixedLengths()}
	a := drain(t, openLoop(t, cfg))
	cfg.Lengths = Lengths{Prompt: Lognormal(1000, 1.5), Output: Uniform(1, 50)}
	b := drain(t, openLoop(t, cfg))
	for i := range a {
		require.Equal(t, a[i].AtNs, b[i].AtNs)
	}
	// A repetition stream gives a different, reproducible sequence.
	cfg.Rand = rng.New(1, "workload").DeriveN(1)
	c := drain(t, openLoop(t, cfg))
	assert.NotEqual(t, a[5].AtNs, c[5].AtNs)
}

func TestOpenLoopConstant(t *testing.T) {
	g := openLoop(t, OpenLoopConfig{Process: ProcessConstant, RateRPS: 3, Requests: 4, WarmupRequests: 2, StartNs: 100, Lengths: fixedLengths()})
	arr := drain(t, g)
	require.Len(t, arr, 6)
	want := []int64{100, 100 + 333333333, 100 + 666666667, 100 + 1e9, 100 + 1333333333, 100 + 1666666667}
	for i, a := range arr {
		assert.Equal(t, want[i], a.AtNs, "arrival %d", i)
		assert.Equal(t, i < 2, a.Warmup)
		assert.Equal(t, "req-"+string(rune('0'+i)), a.ID)
		assert.Equal(t, 100, a.PromptTokens)
		assert.Equal(t, 10, a.OutputTokens)
	}
	_, st := g.NextAt()
	assert.Equal(t, Exhausted, st)
	assert.NoError(t, g.Complete("req-0", 5)) // ignored
}

func TestOpenLoopDuration(t *testing.T) {
	g := openLoop(t, OpenLoopConfig{Process: ProcessConstant, RateRPS: 10, DurationNs: 1e9, Lengths: fixedLengths(), IDPrefix: "x"})
	arr := drain(t, g)
	require.Len(t, arr, 10) // 0, 0.1 s, ..., 0.9 s; 1.0 s is excluded
	assert.Equal(t, int64(900_000_000), arr[9].AtNs)
	assert.Equal(t, "x9", arr[9].ID)
}

func TestOpenLoopPeek(t *testing.T) {
	g := openLoop(t, OpenLoopConfig{Process: ProcessPoisson, RateRPS: 10, Requests: 3, Lengths: fixedLengths()})
	for i := 0; i < 3; i++ {
		at, st := g.NextAt()
		require.Equal(t, Ready, st)
		at2, _ := g.NextAt() // peeking does not consume
		require.Equal(t, at, at2)
		a, ok := g.Next()
		require.True(t, ok)
		require.Equal(t, at, a.AtNs)
	}
	_, st := g.NextAt()
	assert.Equal(t, Exhausted, st)
}

func TestPoissonRate(t *testing.T) {
	const n = 100_000
	g := openLoop(t, OpenLoopConfig{Process: ProcessPoisson, RateRPS: 250, Requests: n, Seed: 2024, Lengths: fixedLengths()})
	arr := drain(t, g)
	rate := float64(n-1) / (float64(arr[n-1].AtNs-arr[0].AtNs) / 1e9)
	assert.InEpsilon(t, 250, rate, 0.02)
	assert.InDelta(t, 1.0, gapCV(arr), 0.03)
}

func gapCV(arr []Arrival) float64 {
	var s, sq float64
	n := float64(len(arr) - 1)
	for i := 1; i < len(arr); i++ {
		g := float64(arr[i].AtNs - arr[i-1].AtNs)
		s += g
		sq += g * g
	}
	m := s / n
	return math.Sqrt(sq/n-m*m) / m
}

func TestGammaCV(t *testing.T) {
	for _, cv := range []float64{0.5, 1, 2, 4} {
		const n = 100_000
		g := openLoop(t, OpenLoopConfig{Process: ProcessGamma, RateRPS: 100, CV: cv, Requests: n, Seed: 99, Lengths: fixedLengths()})
		arr := drain(t, g)
		rate := float64(n-1) / (float64(arr[n-1].AtNs-arr[0].AtNs) / 1e9)
		assert.InEpsilon(t, 100, rate, 0.03, "cv %v rate", cv)
		assert.InEpsilon(t, cv, gapCV(arr), 0.03, "cv %v", cv)
	}
}

func TestGammaCV1IsPoisson(t *testing.T) {
	p := drain(t, openLoop(t, OpenLoopConfig{Process: ProcessPoisson, RateRPS: 40, Requests: 1000, Seed: 5, Lengths: fixedLengths()}))
	g := drain(t, openLoop(t, OpenLoopConfig{Process: ProcessGamma, CV: 1, RateRPS: 40, Requests: 1000, Seed: 5, Lengths: fixedLengths()}))
	assert.Equal(t, p, g)
}

func TestLengthDistributions(t *testing.T) {
	s := rng.New(3, "len")
	const n = 200_000
	mean := func(d LengthDist) (float64, int, int) {
		require.NoError(t, d.validate("d"))
		var sum float64
		lo, hi := math.MaxInt, 0
		for i := 0; i < n; i++ {
			v := d.draw(s)
			sum += float64(v)
			lo, hi = min(lo, v), max(hi, v)
		}
		return sum / n, lo, hi
	}
	m, lo, hi := mean(Uniform(10, 20))
	assert.InDelta(t, 15, m, 0.05)
	assert.Equal(t, 10, lo)
	assert.Equal(t, 20, hi)
	m, lo, _ = mean(Lognormal(800, 0.8))
	assert.InEpsilon(t, 800, m, 0.02)
	assert.GreaterOrEqual(t, lo, 1)
	_, lo, hi = mean(LengthDist{Kind: LengthLognormal, Mean: 800, Sigma: 2, Min: 50, Max: 4000})
	assert.Equal(t, 50, lo)
	assert.Equal(t, 4000, hi)
	m, _, _ = mean(LengthDist{Kind: LengthEmpirical, Samples: []int{1, 3}})
	assert.InDelta(t, 2, m, 0.02)
}

func TestJointEmpirical(t *testing.T) {
	e := &Empirical{Prompt: []int32{10, 1000}, Output: []int32{1, 99}}
	g := openLoop(t, OpenLoopConfig{Process: ProcessPoisson, RateRPS: 5, Requests: 500, Lengths: Lengths{Joint: e}})
	seen := map[[2]int]int{}
	for _, a := range drain(t, g) {
		seen[[2]int{a.PromptTokens, a.OutputTokens}]++
	}
	assert.Len(t, seen, 2, "pairs stay joint")
	assert.Greater(t, seen[[2]int{10, 1}], 150)
	assert.Greater(t, seen[[2]int{1000, 99}], 150)
}

func closedLoop(t testing.TB, cfg ClosedLoopConfig) *ClosedLoop {
	t.Helper()
	c, err := NewClosedLoop(cfg)
	require.NoError(t, err)
	return c
}

func TestClosedLoopValidation(t *testing.T) {
	ok := ClosedLoopConfig{Users: 2, Requests: 3, Lengths: fixedLengths()}
	require.NoError(t, ok.Validate())
	cases := []struct {
		name string
		edit func(*ClosedLoopConfig)
		want string
	}{
		{"zero users", func(c *ClosedLoopConfig) { c.Users = 0 }, "Users=0"},
		{"negative think", func(c *ClosedLoopConfig) { c.ThinkNs = -1 }, "ThinkNs=-1"},
		{"unknown think", func(c *ClosedLoopConfig) { c.Think = "pareto" }, `unknown Think "pareto"`},
		{"no end", func(c *ClosedLoopConfig) { c.Requests = 0 }, "neither Requests nor DurationNs"},
		{"bad output", func(c *ClosedLoopConfig) { c.Lengths.Output = Fixed(-2) }, "Lengths.Output: fixed length Value=-2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			_, err := NewClosedLoop(c)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestClosedLoopProtocol(t *testing.T) {
	c := closedLoop(t, ClosedLoopConfig{Users: 2, ThinkNs: 1000, Requests: 4, WarmupRequests: 1, RampNs: 10, Lengths: fixedLengths()})
	at, st := c.NextAt()
	require.Equal(t, Ready, st)
	assert.Equal(t, int64(0), at)
	a0, _ := c.Next()
	a1, _ := c.Next()
	assert.Equal(t, int64(0), a0.AtNs)
	assert.Equal(t, int64(5), a1.AtNs) // user 1 ramps in at RampNs/Users
	assert.True(t, a0.Warmup)
	assert.False(t, a1.Warmup)

	// Both users wait: Next says false, NextAt says Waiting, not done.
	_, ok := c.Next()
	assert.False(t, ok)
	_, st = c.NextAt()
	assert.Equal(t, Waiting, st)
	assert.NoError(t, c.Err())
	assert.Equal(t, 2, c.Outstanding())

	require.NoError(t, c.Complete(a1.ID, 500))
	at, st = c.NextAt()
	require.Equal(t, Ready, st)
	assert.Equal(t, int64(1500), at) // 500 + think
	// A completion of user 0 with an earlier next send reorders the queue.
	require.NoError(t, c.Complete(a0.ID, 400))
	at, _ = c.NextAt()
	assert.Equal(t, int64(1400), at)
	a2, _ := c.Next()
	a3, _ := c.Next()
	assert.Equal(t, []int64{1400, 1500}, []int64{a2.AtNs, a3.AtNs})

	// Protocol errors.
	assert.ErrorContains(t, c.Complete(a0.ID, 2000), "not an outstanding request")
	assert.ErrorContains(t, c.Complete("nope", 2000), "not an outstanding request")
	assert.ErrorContains(t, c.Complete(a2.ID, 10), "precedes the last arrival")

	require.NoError(t, c.Complete(a2.ID, 2000))
	require.NoError(t, c.Complete(a3.ID, 2000))
	// 4 measured + 1 warm-up = 5 in all: one left, then done even though a
	// user is still thinking.
	a4, ok := c.Next()
	require.True(t, ok)
	assert.Equal(t, "req-4", a4.ID)
	_, st = c.NextAt()
	assert.Equal(t, Exhausted, st)
	require.NoError(t, c.Complete(a4.ID, 9000))
	_, ok = c.Next()
	assert.False(t, ok)
}

// simulateClosed runs a closed loop against a fixed service time engine
// with unlimited parallelism, using the documented protocol.
func simulateClosed(t testing.TB, c *ClosedLoop, serviceNs int64) []Arrival {
	type inflight struct {
		id   string
		done int64
	}
	var fly []inflight
	var out []Arrival
	now := int64(0)
	for {
		for {
			at, st := c.NextAt()
			if st != Ready || at > now {
				break
			}
			a, _ := c.Next()
			out = append(out, a)
			fly = append(fly, inflight{a.ID, now + serviceNs})
		}
		// next event: earliest completion or next arrival
		next := int64(math.MaxInt64)
		at, st := c.NextAt()
		if st == Ready {
			next = at
		}
		for _, f := range fly {
			next = min(next, f.done)
		}
		if next == math.MaxInt64 {
			require.Equal(t, Exhausted, st)
			return out
		}
		now = next
		rest := fly[:0]
		for _, f := range fly {
			if f.done <= now {
				require.NoError(t, c.Complete(f.id, now))
			} else {
				rest = append(rest, f)
			}
		}
		fly = rest
	}
}

func TestClosedLoopThroughput(t *testing.T) {
	// U users, service S, think Z: each user cycles every S+Z.
	c := closedLoop(t, ClosedLoopConfig{Users: 4, ThinkNs: 3e6, Requests: 400, Lengths: fixedLengths()})
	arr := simulateClosed(t, c, 1e6)
	require.Len(t, arr, 400)
	span := float64(arr[len(arr)-1].AtNs-arr[0].AtNs) / 1e9
	assert.InEpsilon(t, 4/4e-3, float64(len(arr)-4)/span, 0.02)
	for i := 1; i < len(arr); i++ {
		require.GreaterOrEqual(t, arr[i].AtNs, arr[i-1].AtNs)
	}
}

func TestClosedLoopDeterminismAndDuration(t *testing.T) {
	cfg := ClosedLoopConfig{Users: 8, Think: ThinkExponential, ThinkNs: 2e6, DurationNs: 1e9, Seed: 3,
		Lengths: Lengths{Prompt: Uniform(1, 100), Output: Fixed(5)}}
	a := simulateClosed(t, closedLoop(t, cfg), 1e6)
	b := simulateClosed(t, closedLoop(t, cfg), 1e6)
	require.Equal(t, a, b)
	assert.Less(t, a[len(a)-1].AtNs, int64(1e9))
	assert.Greater(t, len(a), 1000)
	cfg.Seed = 4
	c := simulateClosed(t, closedLoop(t, cfg), 1e6)
	assert.NotEqual(t, a, c)
}

func TestEngineBlockHashes(t *testing.T) {
	x := chainHashes([]int64{7, 8, 9}, nil)
	y := chainHashes([]int64{7, 8, 10}, nil)
	z := chainHashes([]int64{6, 8, 9}, nil)
	assert.Equal(t, x[:2], y[:2])
	assert.NotEqual(t, x[2], y[2])
	assert.NotEqual(t, x[1], z[1], "same id after a different prefix is a different block")

	// 512-token source blocks to 16-token engine blocks.
	ex := EngineBlockHashes(x, 512, 16, 1500, nil)
	ey := EngineBlockHashes(y, 512, 16, 1500, nil)
	require.Len(t, ex, 1500/16) // 93 full blocks
	assert.Equal(t, ex[:64], ey[:64], "first 1024 tokens shared")
	assert.NotEqual(t, ex[64], ey[64])
	// A chain shorter than the prompt caps the hashes.
	assert.Len(t, EngineBlockHashes(x[:1], 512, 16, 1500, nil), 32)
	// Engine blocks larger than source blocks.
	assert.Len(t, EngineBlockHashes(x, 512, 1024, 1536, nil), 1)
	assert.Empty(t, EngineBlockHashes(x, 0, 16, 100, nil))
}

func TestIDArenaStable(t *testing.T) {
	var a idArena
	a.prefix = "r"
	ids := make([]string, 0, 5000)
	for i := 0; i < 5000; i++ {
		ids = append(ids, a.id(int64(i)))
	}
	for i, id := range ids {
		require.Equal(t, "r"+itoa(i), id)
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

func BenchmarkPoisson1M(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		g, err := NewOpenLoop(OpenLoopConfig{Process: ProcessPoisson, RateRPS: 1000, Requests: 1_000_000, Lengths: fixedLengths()})
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for {
			if _, ok := g.Next(); !ok {
				break
			}
			n++
		}
		if n != 1_000_000 {
			b.Fatal(n)
		}
	}
}

// BenchmarkPoissonArrival reports ns and allocations per arrival.
func BenchmarkPoissonArrival(b *testing.B) {
	g, err := NewOpenLoop(OpenLoopConfig{Process: ProcessPoisson, RateRPS: 1000, Requests: math.MaxInt32, Lengths: Lengths{Prompt: Lognormal(1000, 1), Output: Uniform(1, 512)}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := g.Next(); !ok {
			b.Fatal("ended")
		}
	}
}
