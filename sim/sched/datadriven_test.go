package sched

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestDataDriven runs the scripts in testdata/. Commands:
//
//	config [max-seqs=N] [max-tokens=N] [block=N] [blocks=N] [max-len=N]
//	       [chunked=bool] [prefix=bool] [threshold=N]   new scheduler
//	add id=a prompt=N output=N [hashes=(h1,h2,...)] [pre=N]
//	     (or one such line per input line)
//	schedule            Schedule once; the output joins the in-flight FIFO
//	update              Update the oldest in-flight output
//	step [n=1]          n synchronous Schedule+Update rounds
//	run [max=N]         synchronous rounds until nothing is unfinished, one line per step
//	abort id=a
//	state               queues, requests and KV blocks
//
// Every command checks the scheduler's invariants afterwards.
// Regenerate expectations with: go test ./sim/sched -run TestDataDriven -rewrite
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var s *Scheduler
		var inflight []*Output
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			var out string
			switch td.Cmd {
			case "config":
				cfg := Config{MaxNumSeqs: 4, MaxNumBatchedTokens: 64, BlockSize: 16, NumGPUBlocks: 17,
					MaxModelLen: 256, ChunkedPrefill: true, PrefixCaching: true}
				td.MaybeScanArgs(t, "max-seqs", &cfg.MaxNumSeqs)
				td.MaybeScanArgs(t, "max-tokens", &cfg.MaxNumBatchedTokens)
				td.MaybeScanArgs(t, "block", &cfg.BlockSize)
				td.MaybeScanArgs(t, "blocks", &cfg.NumGPUBlocks)
				if !td.MaybeScanArgs(t, "max-len", &cfg.MaxModelLen) && cfg.NumGPUBlocks > 1 && cfg.BlockSize > 0 {
					// Default: 256 or the KV capacity, whichever is smaller.
					cfg.MaxModelLen = min(256, (cfg.NumGPUBlocks-1)*cfg.BlockSize)
				}
				td.MaybeScanArgs(t, "chunked", &cfg.ChunkedPrefill)
				td.MaybeScanArgs(t, "prefix", &cfg.PrefixCaching)
				td.MaybeScanArgs(t, "threshold", &cfg.LongPrefillTokenThreshold)
				var err error
				s, err = New(cfg)
				if err != nil {
					s = nil
				}
				inflight = nil
				if err != nil {
					return err.Error()
				}
				return fmt.Sprintf("ok: %d usable blocks of %d tokens", s.KVBlocksTotal(), cfg.BlockSize)
			case "add":
				var lines []string
				if strings.TrimSpace(td.Input) != "" {
					lines = strings.Split(strings.TrimSpace(td.Input), "\n")
				} else {
					lines = []string{argsLine(td)}
				}
				var b strings.Builder
				for _, l := range lines {
					r := parseRequest(t, l)
					if err := s.Add(r); err != nil {
						fmt.Fprintf(&b, "%s: %v\n", r.ID, err)
					}
				}
				out = b.String()
			case "schedule":
				o := s.Schedule()
				out = formatOutput(o)
				if !o.Empty() {
					inflight = append(inflight, o)
				}
			case "update":
				if len(inflight) == 0 {
					td.Fatalf(t, "nothing in flight")
				}
				o := inflight[0]
				inflight = inflight[1:]
				id := o.StepID
				out = formatUpdate(id, s.Update(o))
			case "step":
				n := 1
				td.MaybeScanArgs(t, "n", &n)
				var b strings.Builder
				for i := 0; i < n; i++ {
					if len(inflight) > 0 {
						td.Fatalf(t, "step with outputs in flight")
					}
					o := s.Schedule()
					b.WriteString(formatOutput(o))
					id := o.StepID
					b.WriteString(formatUpdate(id, s.Update(o)))
					if err := s.CheckInvariants(); err != nil {
						td.Fatalf(t, "invariant: %v", err)
					}
				}
				out = b.String()
			case "run":
				max := 1000
				td.MaybeScanArgs(t, "max", &max)
				var b strings.Builder
				for i := 0; i < max && s.HasUnfinished(); i++ {
					o := s.Schedule()
					b.WriteString(formatCompact(o))
					id := o.StepID
					res := s.Update(o)
					if res.Sampled > 0 || len(res.FinishedIDs) > 0 {
						fmt.Fprintf(&b, " | sampled=%d", res.Sampled)
						if len(res.FinishedIDs) > 0 {
							fmt.Fprintf(&b, " done=%v", res.FinishedIDs)
						}
					}
					_ = id
					b.WriteString("\n")
					if err := s.CheckInvariants(); err != nil {
						td.Fatalf(t, "invariant: %v", err)
					}
				}
				out = b.String()
			case "abort":
				var id string
				td.ScanArgs(t, "id", &id)
				out = fmt.Sprintf("%v", s.Abort(id))
			case "state":
				out = formatState(s)
			default:
				td.Fatalf(t, "unknown command %s", td.Cmd)
			}
			if s != nil {
				if err := s.CheckInvariants(); err != nil {
					td.Fatalf(t, "invariant: %v", err)
				}
			}
			if out == "" {
				out = "ok"
			}
			return out
		})
	})
}

func argsLine(td *datadriven.TestData) string {
	var parts []string
	for _, a := range td.CmdArgs {
		parts = append(parts, a.Key+"="+strings.Join(a.Vals, ","))
	}
	return strings.Join(parts, " ")
}

func parseRequest(t *testing.T, line string) *Request {
	r := &Request{}
	for _, f := range strings.Fields(line) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			t.Fatalf("bad field %q", f)
		}
		atoi := func() int {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("bad %s: %v", k, err)
			}
			return n
		}
		switch k {
		case "id":
			r.ID = v
		case "prompt":
			r.PromptTokens = atoi()
		case "output":
			r.MaxOutputTokens = atoi()
		case "pre":
			r.PrecomputedTokens = atoi()
		case "hashes":
			v = strings.Trim(v, "()")
			for _, h := range strings.Split(v, ",") {
				n, err := strconv.ParseUint(strings.TrimSpace(h), 10, 64)
				if err != nil {
					t.Fatalf("bad hash %q", h)
				}
				r.BlockHashes = append(r.BlockHashes, n)
			}
		default:
			t.Fatalf("unknown field %q", k)
		}
	}
	return r
}

func formatOutput(o *Output) string {
	var b strings.Builder
	if o.Empty() {
		fmt.Fprintf(&b, "empty: running=%d waiting=%d kv=%d/%d\n", o.NumRunning, o.NumWaiting, o.KVBlocksUsed, o.KVBlocksTotal)
	} else {
		fmt.Fprintf(&b, "step %d: %d tokens, running=%d waiting=%d kv=%d/%d\n",
			o.StepID, o.TotalScheduledTokens, o.NumRunning, o.NumWaiting, o.KVBlocksUsed, o.KVBlocksTotal)
	}
	for _, sr := range o.CachedReqs {
		fmt.Fprintf(&b, "  cached %s\n", formatSR(&sr, false))
	}
	for _, sr := range o.NewReqs {
		kind := "new"
		if sr.Resumed {
			kind = "resumed"
		}
		fmt.Fprintf(&b, "  %s %s\n", kind, formatSR(&sr, true))
	}
	if len(o.PreemptedIDs) > 0 {
		fmt.Fprintf(&b, "  preempted %v\n", o.PreemptedIDs)
	}
	if len(o.FinishedIDs) > 0 {
		fmt.Fprintf(&b, "  finished %v\n", o.FinishedIDs)
	}
	return b.String()
}

func formatSR(sr *ScheduledReq, isNew bool) string {
	var b strings.Builder
	phase := "decode"
	if sr.IsPrefill {
		phase = "prefill"
	}
	fmt.Fprintf(&b, "%s: +%d computed=%d out=%d %s", sr.ID(), sr.NumScheduledTokens, sr.NumComputedTokens, sr.NumOutputTokens, phase)
	if sr.Samples {
		b.WriteString(" sample")
	}
	if isNew {
		fmt.Fprintf(&b, " hit=%d blocks=%v", sr.PrefixHitTokens, sr.BlockIDs)
	}
	if len(sr.NewBlockIDs) > 0 {
		fmt.Fprintf(&b, " new=%v", sr.NewBlockIDs)
	}
	fmt.Fprintf(&b, " nblocks=%d ntok=%d", sr.NumBlocks, sr.NumTokens)
	return b.String()
}

// formatCompact prints a step on one line: id:tokens per request (n = new,
// r = resumed, * = samples).
func formatCompact(o *Output) string {
	var b strings.Builder
	if o.Empty() {
		b.WriteString("empty")
	} else {
		fmt.Fprintf(&b, "%d: tok=%d", o.StepID, o.TotalScheduledTokens)
	}
	for _, sr := range o.CachedReqs {
		fmt.Fprintf(&b, " %s:%d", sr.ID(), sr.NumScheduledTokens)
		if sr.Samples {
			b.WriteString("*")
		}
	}
	for _, sr := range o.NewReqs {
		mark := "n"
		if sr.Resumed {
			mark = "r"
		}
		fmt.Fprintf(&b, " %s%s:%d", mark, sr.ID(), sr.NumScheduledTokens)
		if sr.Samples {
			b.WriteString("*")
		}
	}
	if len(o.PreemptedIDs) > 0 {
		fmt.Fprintf(&b, " preempt=%v", o.PreemptedIDs)
	}
	fmt.Fprintf(&b, " kv=%d", o.KVBlocksUsed)
	return b.String()
}

func formatUpdate(step int64, res *UpdateResult) string {
	s := fmt.Sprintf("update %d: sampled=%d", step, res.Sampled)
	if len(res.FinishedIDs) > 0 {
		s += fmt.Sprintf(" finished=%v", res.FinishedIDs)
	}
	return s + "\n"
}

func formatState(s *Scheduler) string {
	var b strings.Builder
	f := func(st *reqState) {
		fmt.Fprintf(&b, "  %s: %v computed=%d out=%d ph=%d", st.r.ID, st.status, st.computed, st.output, st.placeholders)
		if len(st.blocks) > 0 {
			fmt.Fprintf(&b, " blocks=%v cached=%d", st.blocks, st.numCached)
		}
		b.WriteString("\n")
	}
	b.WriteString("running:\n")
	for _, st := range s.running {
		f(st)
	}
	b.WriteString("waiting:\n")
	for i := 0; i < s.waiting.len(); i++ {
		f(s.waiting.at(i))
	}
	fmt.Fprintf(&b, "kv: used=%d free=%d evictable=%d total=%d\n",
		s.KVBlocksUsed(), s.pool.numFree, s.KVBlocksEvictable(), s.KVBlocksTotal())
	return b.String()
}
