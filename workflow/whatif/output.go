package whatif

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/workflow"
)

// Table names of the dataset Write creates.
const (
	// TableRequests holds every placement's and repetition's requests in
	// one table: not the data contract's requests table of one run, whose
	// arrival rate and latencies tools would read as one run's.
	TableRequests      = "whatif_requests" // one row per request
	TableRequestStages = "request_stages"  // one row per request and stage
)

// RequestRow is one request of one repetition of one placement. The first
// columns are named as the data contract's requests table's, so a reader
// that knows that table knows them; the rest are the what-if's.
type RequestRow struct {
	// ReqID is "<placement>/<rep>/<load id>".
	ReqID            string `parquet:"req_id"`
	ArrivalNs        int64  `parquet:"arrival_ns,delta"`
	PromptTokens     int64  `parquet:"prompt_tokens,delta"`
	OutputTokens     int64  `parquet:"output_tokens,delta"`
	FirstScheduledNs int64  `parquet:"first_scheduled_ns,delta"`
	FirstTokenNs     int64  `parquet:"first_token_ns,delta"`
	FinishNs         int64  `parquet:"finish_ns,delta"`
	NumPreemptions   int32  `parquet:"num_preemptions,delta"`
	// Status in the contract's terms: finished | aborted | unfinished.
	Status    string `parquet:"status,dict"`
	Placement string `parquet:"placement,dict"`
	Rep       int32  `parquet:"rep,delta"`
	Warmup    bool   `parquet:"warmup"`
	// Outcome: ok | timeout | rejected | unfinished; RejectedBy the stage.
	Outcome    string `parquet:"outcome,dict"`
	RejectedBy string `parquet:"rejected_by,dict"`
	// ResponseNs: response (or timeout, or rejection) at the client; E2ENs
	// = ResponseNs − ArrivalNs for an ok request, else -1.
	ResponseNs int64 `parquet:"response_ns,delta"`
	E2ENs      int64 `parquet:"e2e_ns,delta"`
}

// StageRow is a request's passage through one stage.
type StageRow struct {
	ReqID     string `parquet:"req_id"`
	Placement string `parquet:"placement,dict"`
	Rep       int32  `parquet:"rep,delta"`
	Stage     string `parquet:"stage,dict"`
	Kind      string `parquet:"kind,dict"`
	Host      string `parquet:"host,dict"`
	// Times in ns since the run's start, -1 where it did not happen.
	ArriveNs     int64 `parquet:"arrive_ns,delta"`
	StartNs      int64 `parquet:"start_ns,delta"`
	EndNs        int64 `parquet:"end_ns,delta"`
	FirstTokenNs int64 `parquet:"first_token_ns,delta"`
	// LatencyNs = EndNs − ArriveNs (queueing included), or -1.
	LatencyNs int64 `parquet:"latency_ns,delta"`
}

// WriteOptions tune Write.
type WriteOptions struct {
	Overwrite bool
	// Command is recorded in the manifest.
	Command []string
}

// Files Write creates beside the dataset tables.
const (
	AuditJSON = "audit.json"
	AuditMD   = "audit.md"
)

// Write stores the outputs in dir: a dataset (manifest.json, requests and
// request_stages tables) plus audit.json and audit.md.
func Write(dir string, out *Output, opts WriteOptions) error {
	sc := out.Scenario
	l := sc.File.Load
	params := map[string]string{
		"repetitions": strconv.Itoa(l.Repetitions), "requests": strconv.Itoa(l.Requests),
		"warmup_requests": strconv.Itoa(l.Warmup), "startup_s": fmtF(l.StartupS), "drain_s": fmtF(l.DrainS),
	}
	if l.Kind == workflow.LoadClosed {
		params["users"] = strconv.Itoa(l.Users)
	} else {
		params["rate_rps"] = fmtF(l.RateRPS)
	}
	var pls []string
	for _, p := range sc.Placements {
		pls = append(pls, p.Name)
	}
	m := datasets.Manifest{
		Name:     sc.File.Name,
		Tool:     datasets.Tool{Name: "steplab", Version: "dev", Command: opts.Command},
		Source:   datasets.Source{Kind: "simulate", Format: "whatif", Detail: map[string]string{"placements": strings.Join(pls, ",")}},
		Workload: &datasets.Workload{Kind: l.Kind, Params: params, Seed: sc.File.Seed},
		Notes: append([]string{"what-if workflow simulation: whatif_requests holds one row per request of every placement and repetition " +
			"(req_id = placement/rep/id); request_stages one row per request and stage; see audit.json"}, sc.Notes...),
	}
	w, err := datasets.Create(dir, m, datasets.CreateOptions{Overwrite: opts.Overwrite})
	if err != nil {
		return err
	}
	if err := writeTables(w, out); err != nil {
		_ = w.Abort(err.Error())
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	var js strings.Builder
	if err := WriteJSON(&js, &out.Audit); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, AuditJSON), []byte(js.String()), 0o644); err != nil {
		return err
	}
	var md strings.Builder
	WriteMarkdown(&md, &out.Audit)
	return os.WriteFile(filepath.Join(dir, AuditMD), []byte(md.String()), 0o644)
}

func writeTables(w *datasets.Writer, out *Output) error {
	rt, err := datasets.NewTableWriter[RequestRow](w, TableRequests, datasets.DefaultTableOptions)
	if err != nil {
		return err
	}
	st, err := datasets.NewTableWriter[StageRow](w, TableRequestStages, datasets.DefaultTableOptions)
	if err != nil {
		return err
	}
	var rows []RequestRow
	var srows []StageRow
	for _, r := range out.Runs {
		g := graphOf(out.Scenario, r.Placement)
		rows, srows = rows[:0], srows[:0]
		for i := range r.Result.Requests {
			q := &r.Result.Requests[i]
			id := r.Placement + "/" + strconv.Itoa(r.Rep) + "/" + q.ID
			row := RequestRow{ReqID: id, ArrivalNs: q.ArrivalNs, PromptTokens: int64(q.PromptTokens),
				OutputTokens: int64(q.OutputTokens), FirstScheduledNs: -1, FirstTokenNs: -1, FinishNs: -1,
				Placement: r.Placement, Rep: int32(r.Rep), Warmup: q.Warmup, Outcome: q.Status, RejectedBy: q.RejectedBy,
				ResponseNs: q.ResponseNs, E2ENs: q.E2ENs()}
			switch q.Status {
			case workflow.StatusOK:
				row.Status, row.FinishNs = datasets.StatusFinished, q.ResponseNs
			case workflow.StatusUnfinished:
				row.Status = datasets.StatusUnfinished
			default:
				row.Status = datasets.StatusAborted
			}
			for k, s := range q.Stages {
				stg := &g.Stages[k]
				if stg.Kind == workflow.KindEngine && row.FirstScheduledNs < 0 && s.StartNs >= 0 {
					row.FirstScheduledNs, row.FirstTokenNs = s.StartNs, s.FirstTokenNs
				}
				srows = append(srows, StageRow{ReqID: id, Placement: r.Placement, Rep: int32(r.Rep), Stage: stg.Name,
					Kind: string(stg.Kind), Host: stg.Host, ArriveNs: s.ArriveNs, StartNs: s.StartNs, EndNs: s.EndNs,
					FirstTokenNs: s.FirstTokenNs, LatencyNs: s.LatencyNs()})
			}
			rows = append(rows, row)
		}
		if err := rt.Write(rows); err != nil {
			return err
		}
		if err := st.Write(srows); err != nil {
			return err
		}
	}
	if err := rt.Close(); err != nil {
		return err
	}
	return st.Close()
}

func graphOf(sc *Scenario, placement string) *workflow.Graph {
	for _, p := range sc.Placements {
		if p.Name == placement {
			return p.Graph
		}
	}
	return nil
}

func fmtF(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// WriteJSON writes the audit as indented JSON.
func WriteJSON(w io.Writer, a *Audit) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(a)
}

// WriteMarkdown writes the audit as the qualification's markdown tables.
func WriteMarkdown(w io.Writer, a *Audit) {
	fmt.Fprintf(w, "# What-if audit: %s\n\n", a.Scenario)
	if a.OfferedRPS > 0 {
		fmt.Fprintf(w, "%s open loop at %s req/s (offered), ", a.Load, fmtF(a.OfferedRPS))
	} else {
		fmt.Fprintf(w, "closed loop, %d users, ", a.Users)
	}
	fmt.Fprintf(w, "%d measured requests after %d warm-ups, %d fresh-server repetitions per placement, seed %d. "+
		"Process start-up %ss before the first request, drain %ss after the last response.\n\n",
		a.Requests, a.Warmup, a.Repetitions, a.Seed, fmtF(a.StartupS), fmtF(a.DrainS))
	fmt.Fprintln(w, "| Placement | Request-window runs (req/s) | Mean | Achieved/offered | Δ vs first | Full-process runs (req/s) | From mean wall | Valid | Errors | Cancelled | E2E p50 / p90 / p99 (ms) |")
	fmt.Fprintln(w, "| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | --- |")
	for _, p := range a.Placements {
		var win, full []string
		for _, r := range p.Runs {
			win = append(win, fmt.Sprintf("%.3f", r.WindowRPS))
			full = append(full, fmt.Sprintf("%.3f", r.FullProcessRPS))
		}
		ao := "n/a"
		if a.OfferedRPS > 0 {
			ao = fmt.Sprintf("%.2f%%", p.AchievedOverOffered*100)
		}
		fmt.Fprintf(w, "| %s | %s | %.3f | %s | %+.3f%% | %s | %.3f | %d | %d | %d | %.1f / %.1f / %.1f |\n",
			p.Placement, strings.Join(win, ", "), p.WindowMeanRPS, ao, p.WindowDeltaPct, strings.Join(full, ", "),
			p.FullProcessFromMeanWallRPS, p.Valid, p.Errors, p.Cancelled, p.E2E.P50Ms, p.E2E.P90Ms, p.E2E.P99Ms)
	}
	fmt.Fprintln(w)
	if a.SLO != nil {
		fmt.Fprintf(w, "Goodput at TTFT ≤ %s ms and ITL ≤ %s ms on %d GPUs (0 ms: no bound): valid measured requests meeting both, over the request window.\n\n",
			fmtF(a.SLO.TTFTMs), fmtF(a.SLO.ITLMs), a.GPUs)
		fmt.Fprintln(w, "| Placement | Goodput runs (req/s) | Mean | Per GPU |")
		fmt.Fprintln(w, "| --- | --- | ---: | ---: |")
		for _, p := range a.Placements {
			var g []string
			for _, r := range p.Runs {
				g = append(g, fmt.Sprintf("%.3f", r.GoodputRPS))
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s |\n", p.Placement, strings.Join(g, ", "), orDash(p.GoodputMeanRPS, "%.3f"), orDash(p.GoodputPerGPU, "%.4f"))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "Stage latency, ms (input arrival to end of the stage's work, queueing included; valid measured requests of all repetitions):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| Placement | Stage | Mean | p50 | p90 | p99 | Max |")
	fmt.Fprintln(w, "| --- | --- | ---: | ---: | ---: | ---: | ---: |")
	for _, p := range a.Placements {
		for _, s := range append(p.Stages, StageLatency{Stage: "end to end", Latency: p.E2E}) {
			fmt.Fprintf(w, "| %s | %s | %.3f | %.3f | %.3f | %.3f | %.3f |\n", p.Placement, s.Stage, s.MeanMs, s.P50Ms, s.P90Ms, s.P99Ms, s.MaxMs)
		}
	}
	fmt.Fprintln(w)
	if a.NoUncertainty != "" {
		fmt.Fprintf(w, "Latency intervals: %s.\n\n", a.NoUncertainty)
	}
	if a.IntervalLevel > 0 {
		fmt.Fprintf(w, "Latency at the edges of the engines' %.0f%% prediction interval, ms, lo – hi (%s):\n\n", 100*a.IntervalLevel, a.IntervalMethod)
		fmt.Fprintln(w, "| Placement | Stage | Mean | p50 | p90 | p99 |")
		fmt.Fprintln(w, "| --- | --- | ---: | ---: | ---: | ---: |")
		for _, p := range a.Placements {
			if p.Interval == nil {
				continue
			}
			for _, s := range append(p.Interval.Stages, StageBounds{Stage: "end to end", LatencyBounds: p.Interval.E2E}) {
				fmt.Fprintf(w, "| %s | %s | %.3f – %.3f | %.3f – %.3f | %.3f – %.3f | %.3f – %.3f |\n", p.Placement, s.Stage,
					s.Lo.MeanMs, s.Hi.MeanMs, s.Lo.P50Ms, s.Hi.P50Ms, s.Lo.P90Ms, s.Hi.P90Ms, s.Lo.P99Ms, s.Hi.P99Ms)
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "Request-window throughput = valid measured requests / (last measured response − first measured request) (AIPerf). "+
		"Full-process throughput = valid measured requests / process wall (start-up, warm-up, window and drain). "+
		"Errors: rejected or unanswered; cancelled: past the client's deadline.")
}

// orDash formats *v, or "-" for a figure that does not apply (nil).
func orDash(v *float64, format string) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf(format, *v)
}
