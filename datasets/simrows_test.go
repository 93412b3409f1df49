package datasets

import (
	"fmt"
	"math/rand/v2"
)

// stepGen produces steps that look like a simulated trace: step ids and
// timestamps increase, counts are small, strings repeat. It streams, so a
// benchmark can write many rows from a small, cache-resident buffer, as the
// simulator does.
type stepGen struct {
	r          *rand.Rand
	i          int64
	t          int64
	running    int32
	kvUsed     int64
	prevUpdate int64
}

func newStepGen(seed uint64) *stepGen {
	return &stepGen{r: rand.New(rand.NewPCG(seed, 7)), t: 1_000_000, prevUpdate: 1_000_000}
}

func (g *stepGen) fill(out []Step) {
	r := g.r
	for i := range out {
		s := &out[i]
		*s = Step{}
		s.StepID = g.i
		s.WorkerID = "worker-0"
		s.Kind = KindDecode
		s.Role = RoleProduction
		s.BenchmarkID = -1
		s.Valid = true
		newReqs := int32(0)
		if r.IntN(8) == 0 {
			newReqs = int32(1 + r.IntN(3))
			s.Kind = KindMixed
		}
		fin := int32(0)
		if g.running > 4 && r.IntN(6) == 0 {
			fin = int32(1 + r.IntN(2))
		}
		if r.IntN(50) == 0 {
			s.Valid = false
			s.InvalidReason = "preempted"
		}
		s.NumNewReqs = newReqs
		s.NumCachedReqs = g.running
		s.NumFinished = fin
		s.NumPrefillRequests = newReqs
		if newReqs > 0 {
			s.SumPrefillTokens = int64(newReqs) * int64(200+r.IntN(1800))
			s.SumPrefillKVTokens = s.SumPrefillTokens / 4
			s.VarPrefillLength = float64(r.IntN(50000))
		}
		s.NumDecodeRequests = g.running
		s.SumDecodeKVTokens = g.kvUsed * 16
		s.VarDecodeKVTokens = float64(r.IntN(100000)) / 3
		s.TotalScheduledTokens = s.SumPrefillTokens + int64(g.running)
		s.PaddedTokens = int64((g.running+7)&^7) - int64(g.running)
		s.PayloadCachedBytes = int64(g.running) * 24
		s.PayloadNewBytes = s.SumPrefillTokens * 4
		s.PayloadBytes = s.PayloadCachedBytes + s.PayloadNewBytes + 128
		s.TScheduleStart = g.t
		g.t += int64(20_000 + r.IntN(10_000))
		s.TScheduleEnd = g.t
		g.t += int64(5_000 + r.IntN(3_000))
		s.TDispatch = g.t
		gpu := 4_000_000 + int64(g.running)*20_000 + s.SumPrefillTokens*150 + int64(r.IntN(50_000))
		g.t += gpu
		s.TOutput = g.t
		s.WallTimeNs = s.TOutput - g.prevUpdate
		s.NarrowTimeNs = s.TOutput - s.TScheduleStart
		g.t += int64(30_000 + r.IntN(20_000))
		s.TUpdateEnd = g.t
		g.prevUpdate = g.t
		s.GPUTimeNs = gpu
		s.HostPrepNs = int64(50_000 + r.IntN(20_000))
		s.WorkerRecvNs = Unknown
		s.SampleNs = Unknown
		s.Overlapped = g.i > 0
		g.running += newReqs - fin
		g.running = min(g.running, 256)
		g.kvUsed = min(g.kvUsed+int64(g.running)/16, 40000)
		s.NumWaiting = int32(r.IntN(4))
		s.NumRunning = g.running
		s.KVBlocksUsed = g.kvUsed
		s.KVBlocksTotal = 40000
		g.i++
	}
}

func simSteps(n int, seed uint64) []Step {
	out := make([]Step, n)
	newStepGen(seed).fill(out)
	return out
}

// simStepRequests, simRequests and simGPUSamples give small, varied rows of
// the other tables for round-trip tests.
func simStepRequests(n int, seed uint64) []StepRequest {
	r := rand.New(rand.NewPCG(seed, 11))
	out := make([]StepRequest, n)
	for i := range out {
		out[i] = StepRequest{
			StepID:             int64(i / 4),
			ReqID:              fmt.Sprintf("req-%d", r.IntN(n)),
			IsNew:              r.IntN(5) == 0,
			IsResumed:          r.IntN(20) == 0,
			IsPrefill:          r.IntN(3) == 0,
			NumScheduledTokens: int64(1 + r.IntN(512)),
			NumComputedTokens:  int64(r.IntN(8192)),
			PromptLen:          int64(r.IntN(4096)),
			PayloadBytes:       int64(r.IntN(1 << 16)),
		}
	}
	return out
}

func simRequests(n int, seed uint64) []Request {
	r := rand.New(rand.NewPCG(seed, 13))
	out := make([]Request, n)
	t := int64(0)
	for i := range out {
		t += int64(r.IntN(1_000_000))
		var ids []int64
		switch r.IntN(4) {
		case 0: // no list
		case 1:
			ids = []int64{}
		default:
			for k := range 1 + r.IntN(12) {
				ids = append(ids, int64(k)*1000+int64(r.IntN(1000)))
			}
		}
		st := []string{StatusFinished, StatusAborted, StatusUnfinished, StatusNotRun}[r.IntN(4)]
		out[i] = Request{
			ReqID: fmt.Sprintf("r%05d", i), ArrivalNs: t, PromptTokens: int64(r.IntN(4000)), OutputTokens: int64(r.IntN(500)),
			PrefixHashIDs: ids, FirstScheduledNs: t + 10, FirstTokenNs: t + 5000, FinishNs: Unknown,
			NumPreemptions: int32(r.IntN(3)), Status: st,
		}
	}
	return out
}

func simGPUSamples(n int, seed uint64) []GPUSample {
	r := rand.New(rand.NewPCG(seed, 17))
	out := make([]GPUSample, n)
	for i := range out {
		out[i] = GPUSample{
			TNs: int64(i) * 100_000_000, GPUIndex: int32(i % 2), SMClockMHz: 1980, MemClockMHz: 2619,
			PowerW: 300 + r.Float64()*400, PowerLimitW: 700, TemperatureC: int32(40 + r.IntN(30)),
			MemUsedBytes: int64(r.IntN(1 << 40)), MemTotalBytes: 143_771_000_000, UtilGPUPercent: int32(r.IntN(101)),
			UtilMemPercent: int32(r.IntN(101)),
		}
	}
	return out
}
