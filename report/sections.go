package report

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/steplab/steplab/datasets/inspect"
	"github.com/steplab/steplab/fit"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/pricing"
	"github.com/steplab/steplab/replay"
	"github.com/steplab/steplab/sweep"
	"github.com/steplab/steplab/workflow/whatif"
)

// Section titles (the page's h2 headings).
const (
	TitleDatasets = "Dataset summary"
	TitleFit      = "Fit quality"
	TitleReplay   = "Replay comparison"
	TitleWhatIf   = "What-if results"
)

type builder struct {
	opts     Options
	res      *Result
	sections []*section
	figures  int
	err      error
	seq      int
	// begun and parts count the parts of the page for Options.Progress.
	begun, parts int
}

func (b *builder) note(s string) { b.res.Notes = append(b.res.Notes, s) }

// begin marks the start of one part of the page.
func (b *builder) begin() {
	b.begun++
	if b.opts.Progress != nil {
		b.opts.Progress(b.begun, b.parts)
	}
}

func (b *builder) workDir(name string) string {
	b.seq++
	return filepath.Join(b.opts.WorkDir, fmt.Sprintf("%02d-%s", b.seq, name))
}

func (b *builder) addFig(bl *block, f *figure) {
	if f != nil {
		bl.Figures = append(bl.Figures, f)
		b.figures++
	}
}

func label(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err == nil {
		var m struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(b, &m) == nil && m.Name != "" {
			return m.Name
		}
	}
	return filepath.Base(filepath.Clean(dir))
}

// ---- dataset summary ----

func (b *builder) datasetSection(dirs []string) {
	s := &section{ID: "datasets", Title: TitleDatasets,
		Intro: "What each dataset holds: where it came from, how its steps divide by kind and role, and how long its steps took by batch size (wall_time_ns, the inter-update period, of every step including scaffolding)."}
	for _, dir := range dirs {
		b.begin()
		bl := &block{Heading: label(dir), Side: true}
		s.Blocks = append(s.Blocks, bl)
		sum, err := inspect.Dataset(dir)
		if err != nil {
			b.err = fmt.Errorf("%s: cannot be read: %w", dir, err)
			return
		}
		bl.Notes = append(bl.Notes, sum.Notes...)
		prov := &table{Caption: "Provenance", Head: []string{"field", "value"}}
		add := func(k, v string) {
			if v != "" {
				prov.Rows = append(prov.Rows, []cell{txt(k), txt(v)})
			}
		}
		add("directory", dir)
		if m := sum.Manifest; m != nil {
			add("source", strings.TrimSpace(m.Source.Kind+" "+paren(m.Source.Format)))
			add("created", m.Created)
			if h := m.Hardware; h != nil {
				hw := h.GPUName
				if h.GPUCount > 1 {
					hw = fmt.Sprintf("%d× %s", h.GPUCount, hw)
				}
				if h.Simulated {
					hw += " (simulated)"
				}
				if h.SMClockMHz > 0 {
					hw += fmt.Sprintf(", SM %d MHz, memory %d MHz", h.SMClockMHz, h.MemClockMHz)
				}
				add("hardware", hw)
			}
			if mo := m.Model; mo != nil {
				add("model", fmt.Sprintf("%s: %d layers, hidden %d, %d heads (%d KV), %s", mo.Name, mo.Layers, mo.Hidden, mo.Heads, mo.KVHeads, mo.DType))
			}
			if e := m.Engine; e != nil {
				add("engine", fmt.Sprintf("max_num_seqs %d, max_num_batched_tokens %d, block %d, %d KV blocks, async %v", e.MaxNumSeqs, e.MaxNumBatchedTokens, e.BlockSize, e.NumGPUBlocks, e.AsyncScheduling))
			}
			if w := m.Workload; w != nil {
				add("workload", fmt.Sprintf("%s, seed %d", w.Kind, w.Seed))
			}
			if p := m.MeasurementPolicy; p != nil {
				add("measurement policy", fmt.Sprintf("decode %s, prefill %s", dash(p.Decode), dash(p.Prefill)))
			}
			for _, n := range m.Notes {
				bl.Notes = append(bl.Notes, n)
			}
		}
		for _, ts := range sum.TimeSpans {
			add("time span ("+ts.Source+")", fmt.Sprintf("%.3f s", ts.Seconds))
		}
		bl.Tables = append(bl.Tables, prov)

		tabs := &table{Caption: "Tables", Head: []string{"table", "rows", "parts", "bytes"}}
		for _, t := range sum.Tables {
			tabs.Rows = append(tabs.Rows, []cell{txt(t.Name), intc(t.Rows), intc(int64(t.Parts)), intc(t.Bytes)})
		}
		bl.Tables = append(bl.Tables, tabs)
		if st := sum.Steps; st != nil {
			kr := &table{Caption: fmt.Sprintf("Steps: %d (invalid %d)", st.Rows, st.Invalid), Head: []string{"kind / role", "steps"}}
			for _, c := range st.ByKind {
				kr.Rows = append(kr.Rows, []cell{txt("kind " + c.Value), intc(c.N)})
			}
			for _, c := range st.ByRole {
				kr.Rows = append(kr.Rows, []cell{txt("role " + c.Value), intc(c.N)})
			}
			bl.Tables = append(bl.Tables, kr)
			if len(st.Payload) > 0 {
				pt := &table{Caption: "Payload shipped per step (bytes)", Head: []string{"kind", "steps", "mean", "max"}}
				for _, p := range st.Payload {
					pt.Rows = append(pt.Rows, []cell{txt(p.Kind), intc(p.Count), num("%.0f", p.MeanBytes), intc(p.MaxBytes)})
				}
				bl.Tables = append(bl.Tables, pt)
			}
		}
		if rq := sum.Requests; rq != nil {
			rt := &table{Caption: fmt.Sprintf("Requests: %d, arrival rate %.2f/s over %.1f s", rq.Rows, rq.ArrivalRatePerS, rq.ArrivalSpanS),
				Head: []string{"tokens", "mean", "p50", "p90", "p99", "max"}}
			for _, r := range []struct {
				n string
				d inspect.Dist
			}{{"prompt", rq.PromptTokens}, {"output", rq.OutputTokens}} {
				rt.Rows = append(rt.Rows, []cell{txt(r.n), num("%.1f", r.d.Mean), num("%.0f", r.d.P50), num("%.0f", r.d.P90), num("%.0f", r.d.P99), num("%.0f", r.d.Max)})
			}
			for _, c := range rq.ByStatus {
				rt.Rows = append(rt.Rows, []cell{txt("status " + c.Value), intc(c.N), txt(""), txt(""), txt(""), txt("")})
			}
			bl.Tables = append(bl.Tables, rt)
		}
		if st := sum.Steps; st != nil {
			wt := &table{Caption: "Step wall time by kind and batch size (ms)", Head: []string{"kind", "batch", "steps", "mean", "p50", "p90", "p99", "max"}}
			for _, g := range st.WallTime {
				d := g.WallMs
				wt.Rows = append(wt.Rows, []cell{txt(g.Kind), txt(g.Batch), intc(d.Count), num("%.2f", d.Mean), num("%.2f", d.P50), num("%.2f", d.P90), num("%.2f", d.P99), num("%.2f", d.Max)})
			}
			if len(wt.Rows) > 0 {
				bl.Tables = append(bl.Tables, wt)
				svg, err := wallTimeFigure(label(dir), st.WallTime)
				fig, err := svgFigure(svg, err, "Step wall time by batch size",
					"x: batch size (requests per step, bucketed); y: step wall time (ms, log scale), median (solid) and p90 (dashed) per step kind.")
				if err != nil {
					b.err = err
					return
				}
				b.addFig(bl, fig)
			}
		}
	}
	b.sections = append(b.sections, s)
}

func paren(s string) string {
	if s == "" {
		return ""
	}
	return "(" + s + ")"
}

func dash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

// ---- fit quality ----

func coefficientTable(caption string, cs []fpm.Coefficient) *table {
	ct := &table{Caption: caption, Head: []string{"term", "value", "interval"}}
	for _, c := range cs {
		iv := "–"
		if c.Level > 0 {
			iv = fmt.Sprintf("[%.4g, %.4g] %.0f%%", c.Lo, c.Hi, 100*c.Level)
		}
		ct.Rows = append(ct.Rows, []cell{txt(c.Term), num("%.4g", c.Value), txt(iv)})
	}
	return ct
}

func (b *builder) fitSection(modelPath string, dirs []string) {
	s := &section{ID: "fit", Title: TitleFit}
	b.sections = append(b.sections, s)
	b.begin()
	_, art, err := pricing.Load(modelPath)
	if err != nil {
		b.err = err
		return
	}
	var trained []string
	for _, d := range art.Training.Datasets {
		trained = append(trained, d.ID)
	}
	s.Intro = fmt.Sprintf("Model %s: form %s, target %s, fitted by %s on %d rows of %s. Each dataset below is evaluated on its own; a dataset the model was not fitted on shows the error a planner will see on new traffic. APE is the absolute percentage error |predicted − measured| / measured.",
		filepath.Base(modelPath), art.Form, dash(art.Training.Target), dash(art.Training.Method), art.Training.Rows, dash(strings.Join(trained, ", ")))
	card := &block{Heading: "Model"}
	if len(art.Coefficients) > 0 {
		card.Tables = append(card.Tables, coefficientTable("Coefficients (ns per unit of the term)", art.Coefficients))
	}
	if r := art.Recipe; r != nil {
		for _, k := range r.Kinds {
			switch {
			case k.Compose != nil:
				card.Notes = append(card.Notes, fmt.Sprintf("%s steps: composed (%s, context floor %g tokens per request).", k.Kind, k.Compose.Rule, k.Compose.KVFloorPerRequest))
				continue
			case k.Table != nil:
				card.Notes = append(card.Notes, fmt.Sprintf("%s steps: interpolated over %s inside the measured hull, the linear form below outside it.",
					k.Kind, strings.Join(k.Table.Coords(), " × ")))
			}
			if len(k.Coefficients) > 0 {
				card.Tables = append(card.Tables, coefficientTable(fmt.Sprintf("Coefficients of the %s linear form (ns per unit of the term)", k.Kind), k.Coefficients))
			}
			if g := k.Regimes; g != nil {
				for i, p := range g.Pieces {
					card.Tables = append(card.Tables, coefficientTable(fmt.Sprintf("Coefficients of the %s linear form, regime %s (%d rows; ns per unit of the term)",
						k.Kind, g.Range(i), p.Rows), p.Coefficients))
				}
			}
		}
	}
	s.Blocks = append(s.Blocks, card)
	if len(dirs) == 0 {
		card.Notes = append(card.Notes, "No dataset given: pass dataset directories to evaluate the model on them.")
		return
	}
	summary := &table{Caption: "Error per dataset (overall)", Head: []string{"dataset", "rows", "MAPE", "median APE", "p90 APE", "p99 APE", "mean bias", "R²"}}
	card.Tables = append(card.Tables, summary)
	for _, dir := range dirs {
		b.begin()
		bl := &block{Heading: "Evaluated on " + label(dir)}
		s.Blocks = append(s.Blocks, bl)
		plots := b.workDir("fit")
		rep, _, err := fit.EvalDatasets(modelPath, []string{dir}, fit.EvalConfig{Worst: b.opts.Worst, PlotsDir: plots})
		if err != nil {
			bl.Notes = append(bl.Notes, "not evaluated: "+err.Error())
			continue
		}
		bl.Notes = append(bl.Notes, rep.Warnings...)
		o := rep.Report.Overall
		summary.Rows = append(summary.Rows, []cell{txt(label(dir)), intc(int64(o.Count)), pct(o.MAPE), pct(o.MedianAPE), pct(o.P90APE), pct(o.P99APE), pct(o.MeanBias), num("%.3f", o.R2)})
		mt := &table{Caption: fmt.Sprintf("Error of %s (%d rows, selection: roles %s, policy %s)", rep.Target, rep.Rows, strings.Join(rep.Selection.Roles, ","), dash(rep.Selection.Policy)),
			Head: []string{"group", "n", "MAPE", "median APE", "p90 APE", "p99 APE", "RMSE (ms)", "mean bias", "R²"}}
		row := func(name string, m fit.Metrics) {
			mt.Rows = append(mt.Rows, []cell{txt(name), intc(int64(m.Count)), pct(m.MAPE), pct(m.MedianAPE), pct(m.P90APE), pct(m.P99APE), num("%.3f", m.RMSE/1e6), pct(m.MeanBias), num("%.3f", m.R2)})
		}
		row("all", o)
		kinds := make([]string, 0, len(rep.Report.ByKind))
		for k := range rep.Report.ByKind {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		for _, k := range kinds {
			row("kind "+k, rep.Report.ByKind[k])
		}
		for _, bk := range rep.Report.ByBucket {
			row("batch "+bk.Bucket, bk.Metrics)
		}
		bl.Tables = append(bl.Tables, mt)
		if len(rep.Report.Worst) > 0 {
			wt := &table{Caption: "Worst steps", Head: []string{"step", "kind", "batch", "measured (ms)", "predicted (ms)", "APE"}}
			for _, w := range rep.Report.Worst {
				wt.Rows = append(wt.Rows, []cell{intc(w.StepID), txt(w.Kind), intc(int64(w.Batch)), num("%.3f", w.ActualNs/1e6), num("%.3f", w.PredictedNs/1e6), pct(w.APE)})
			}
			bl.Tables = append(bl.Tables, wt)
		}
		for _, f := range []struct{ name, title, caption string }{
			{"predicted_vs_measured", "Predicted vs measured step time",
				"x: " + fit.LabelMeasured + "; y: " + fit.LabelPredicted + "; one point per step, coloured by kind; points on the dashed identity line are predicted exactly, above it over-predicted."},
			{"error_cdf", "Error CDF",
				"x: " + fit.LabelAPE + "; y: " + fit.LabelFractionLE + "; one curve per step kind. The further left the curve rises, the better."},
		} {
			fig, err := loadFigure(filepath.Join(plots, f.name), b.opts.MaxInlineSVG, f.title+" ("+label(dir)+")", f.caption)
			if err != nil {
				b.err = err
				return
			}
			b.addFig(bl, fig)
		}
	}
}

// ---- replay ----

func (b *builder) replaySection(dirs []string) {
	s := &section{ID: "replay", Title: TitleReplay,
		Intro: "A step replay re-prices every recorded step with the model (device time) and the host model (host phases) and compares each timing field with the record. Relative errors are (predicted − recorded) / recorded."}
	b.sections = append(b.sections, s)
	for _, dir := range dirs {
		b.begin()
		bl := &block{Heading: "Step replay " + filepath.Clean(dir)}
		s.Blocks = append(s.Blocks, bl)
		raw, err := os.ReadFile(filepath.Join(dir, "summary.json"))
		if err != nil {
			bl.Notes = append(bl.Notes, err.Error())
			continue
		}
		var sum replay.StepSummary
		if err := json.Unmarshal(raw, &sum); err != nil {
			bl.Notes = append(bl.Notes, "summary.json: "+err.Error())
			continue
		}
		bl.Prose = fmt.Sprintf("Dataset %s replayed with model %s: %d steps; the steps are ranked by %s.", sum.Dataset, sum.Model, sum.Steps, sum.PrimaryField)
		bl.Notes = append(bl.Notes, sum.Notes...)
		ft := &table{Caption: "Error per timing field (all steps)", Head: []string{"field", "n", "recorded mean (ms)", "predicted mean (ms)", "bias (ms)", "MAPE", "error of mean", "p50 |rel err|", "p90 |rel err|", "p99 |rel err|"}}
		for _, f := range sum.Fields {
			e, ok := sum.Overall.Fields[f]
			if !ok {
				continue
			}
			ft.Rows = append(ft.Rows, []cell{txt(f), intc(e.N), num("%.3f", e.RecMeanMs), num("%.3f", e.PredMeanMs), num("%+.3f", e.BiasMs), pct(100 * e.MAPE), pct(100 * e.RelErrOfMean), pct(100 * e.AbsRelP50), pct(100 * e.AbsRelP90), pct(100 * e.AbsRelP99)})
		}
		bl.Tables = append(bl.Tables, ft)
		groups := &table{Caption: "Error of " + sum.PrimaryField + " by kind and batch size", Head: []string{"group", "steps", "recorded mean (ms)", "predicted mean (ms)", "MAPE", "error of mean", "p90 |rel err|"}}
		addGroups := func(prefix string, gs []replay.GroupStats) {
			for _, g := range gs {
				e, ok := g.Fields[sum.PrimaryField]
				if !ok {
					continue
				}
				groups.Rows = append(groups.Rows, []cell{txt(prefix + g.Group), intc(g.Steps), num("%.3f", e.RecMeanMs), num("%.3f", e.PredMeanMs), pct(100 * e.MAPE), pct(100 * e.RelErrOfMean), pct(100 * e.AbsRelP90)})
			}
		}
		addGroups("kind ", sum.ByKind)
		addGroups("batch ", sum.ByBatch)
		bl.Tables = append(bl.Tables, groups)
		if a := sum.Attribution; a != nil && len(a.Terms) > 0 {
			at := &table{Caption: fmt.Sprintf("Where the %s error comes from (R² %.2f)", a.Target, a.R2), Head: []string{"term", "share", "δ coefficient (ns)", "model coefficient (ns)", "relative"}}
			for _, t := range a.Terms {
				mc, rc := txt("–"), txt("–")
				if t.ModelCoef != nil {
					mc = num("%.4g", *t.ModelCoef)
				}
				if t.RelCoef != nil {
					rc = pct(100 * *t.RelCoef)
				}
				at.Rows = append(at.Rows, []cell{txt(t.Term), pct(100 * t.Share), num("%.4g", t.Coef), mc, rc})
			}
			bl.Tables = append(bl.Tables, at)
			if len(a.Collinear) > 0 {
				bl.Notes = append(bl.Notes, fmt.Sprintf("%s is nearly collinear with %s over these steps: the record cannot tell their errors apart.", a.Top, strings.Join(a.Collinear, ", ")))
			}
		}
		if len(sum.Top) > 0 {
			tt := &table{Caption: "Steps where prediction and record part most", Head: []string{"step", "worker", "kind", "field", "recorded (ms)", "predicted (ms)", "error (ms)", "relative", "prefill tokens", "decode reqs", "decode KV tokens"}}
			for i, t := range sum.Top {
				if i >= b.opts.Worst {
					break
				}
				tt.Rows = append(tt.Rows, []cell{intc(t.StepID), txt(t.WorkerID), txt(t.Kind), txt(t.Field), num("%.3f", t.RecMs), num("%.3f", t.PredMs), num("%+.3f", t.ErrMs), pct(100 * t.RelErr),
					num("%.0f", t.Features.PrefillTokens), num("%.0f", t.Features.DecodeRequests), num("%.0f", t.Features.DecodeKVTokens)})
			}
			bl.Tables = append(bl.Tables, tt)
		}
		for _, f := range []struct{ name, title, caption string }{
			{"steps.time", "Recorded vs predicted over time",
				"x: time since the run's start (s); y: the field's mean per bin of consecutive steps (ms), recorded and predicted."},
			{"steps.error_cdf", "Replay error CDF",
				"x: |relative error| of " + sum.PrimaryField + " (%); y: fraction of steps with error ≤ x; one curve per step kind."},
		} {
			fig, err := loadFigure(filepath.Join(dir, f.name), b.opts.MaxInlineSVG, f.title, f.caption)
			if err != nil {
				b.err = err
				return
			}
			b.addFig(bl, fig)
		}
	}
}

// ---- what-if and sweep ----

func (b *builder) whatifSection(whatifs, sweeps []string) {
	s := &section{ID: "whatif", Title: TitleWhatIf,
		Intro: "A what-if run simulates a workflow of stages placed on hosts under an offered load, once per placement and repetition. Request-window throughput is valid measured requests over the window from the first measured request to the last measured response; full-process throughput divides by the whole process wall (start-up, warm-up and drain included)."}
	b.sections = append(b.sections, s)
	for _, dir := range whatifs {
		b.begin()
		bl := &block{Heading: "What-if run " + filepath.Clean(dir)}
		s.Blocks = append(s.Blocks, bl)
		raw, err := os.ReadFile(filepath.Join(dir, "audit.json"))
		if err != nil {
			bl.Notes = append(bl.Notes, err.Error())
			continue
		}
		var a whatif.Audit
		if err := json.Unmarshal(raw, &a); err != nil {
			bl.Notes = append(bl.Notes, "audit.json: "+err.Error())
			continue
		}
		load := fmt.Sprintf("%s load at %.4g req/s", a.Load, a.OfferedRPS)
		if a.OfferedRPS == 0 {
			load = fmt.Sprintf("closed loop with %d users", a.Users)
		}
		bl.Heading = "What-if run of " + a.Scenario
		bl.Prose = fmt.Sprintf("Run %s, scenario %s (seed %d): %s, %d measured requests after %d warm-ups, %d repetitions per placement.", filepath.Clean(dir), a.Scenario, a.Seed, load, a.Requests, a.Warmup, a.Repetitions)
		at := &table{Caption: "Offered-load audit per placement (means over repetitions)", Head: []string{"placement", "window throughput (req/s)", "achieved / offered", "Δ vs first", "full-process throughput (req/s)", "valid", "errors", "cancelled", "e2e p50 (ms)", "e2e p90 (ms)", "e2e p99 (ms)"}}
		for _, p := range a.Placements {
			ao := num("%.2f%%", 100*p.AchievedOverOffered)
			if a.OfferedRPS == 0 {
				ao = txt("–")
			}
			at.Rows = append(at.Rows, []cell{txt(p.Placement), num("%.3f", p.WindowMeanRPS), ao, num("%+.2f%%", p.WindowDeltaPct), num("%.3f", p.FullProcessMeanRPS),
				intc(int64(p.Valid)), intc(int64(p.Errors)), intc(int64(p.Cancelled)), num("%.2f", p.E2E.P50Ms), num("%.2f", p.E2E.P90Ms), num("%.2f", p.E2E.P99Ms)})
		}
		bl.Tables = append(bl.Tables, at)
		lt := &table{Caption: "Stage latency p50 / p90 (ms), queueing included", Head: append([]string{"stage"}, placementNames(a)...)}
		for i, st := range a.Stages {
			row := []cell{txt(st)}
			for _, p := range a.Placements {
				if i < len(p.Stages) {
					row = append(row, txt(fmt.Sprintf("%.2f / %.2f", p.Stages[i].P50Ms, p.Stages[i].P90Ms)))
				} else {
					row = append(row, txt("–"))
				}
			}
			lt.Rows = append(lt.Rows, row)
		}
		bl.Tables = append(bl.Tables, lt)
		for _, f := range []struct {
			draw           func(*whatif.Audit) ([]byte, error)
			title, caption string
		}{
			{stageLatencyFigure, "Latency by stage and placement",
				"x: workflow stage (and end to end); y: p90 latency (ms) over all repetitions' valid measured requests, one bar per placement in its colour."},
			{throughputFigure, "Throughput per placement",
				"x: placement; y: throughput (req/s), mean of repetitions: request window (filled bar) and full process (outlined bar) in the placement's colour; the dashed line is the offered rate."},
		} {
			svg, err := f.draw(&a)
			fig, err := svgFigure(svg, err, f.title, f.caption)
			if err != nil {
				b.err = err
				return
			}
			b.addFig(bl, fig)
		}
	}
	for _, dir := range sweeps {
		b.begin()
		bl := &block{Heading: "Sweep " + filepath.Clean(dir)}
		s.Blocks = append(s.Blocks, bl)
		raw, err := os.ReadFile(filepath.Join(dir, "sweep.json"))
		if err != nil {
			bl.Notes = append(bl.Notes, err.Error())
			continue
		}
		var r sweep.Result
		if err := json.Unmarshal(raw, &r); err != nil {
			bl.Notes = append(bl.Notes, "sweep.json: "+err.Error())
			continue
		}
		var keys []string
		for _, v := range r.Vary {
			keys = append(keys, v.Key)
		}
		bl.Heading = fmt.Sprintf("Sweep of %s over %s", r.Scenario, strings.Join(keys, " × "))
		bl.Prose = fmt.Sprintf("Sweep %s: scenario %s at %d points.", filepath.Clean(dir), r.Scenario, len(r.Points))
		head := append(append([]string{}, keys...), "placement", "offered (req/s)", "window throughput (req/s)", "achieved / offered", "full-process (req/s)", "errors + cancelled", "e2e p90 (ms)")
		st := &table{Caption: "Every point and placement (means over repetitions)", Head: head}
		for _, p := range r.Points {
			for _, pl := range p.Audit.Placements {
				row := []cell{}
				for _, v := range p.Values {
					row = append(row, txt(v))
				}
				ao := pct(100 * pl.AchievedOverOffered)
				ao.Class = ""
				if p.Audit.OfferedRPS > 0 && pl.AchievedOverOffered < 0.995 {
					ao.Class = "bad"
				}
				row = append(row, txt(pl.Placement), num("%.4g", p.Audit.OfferedRPS), num("%.3f", pl.WindowMeanRPS), ao, num("%.3f", pl.FullProcessMeanRPS),
					intc(int64(pl.Errors+pl.Cancelled)), num("%.2f", meanP90(pl)))
				st.Rows = append(st.Rows, row)
			}
		}
		bl.Tables = append(bl.Tables, st)
		for _, f := range []struct{ name, title, caption string }{
			{sweep.Throughput, "Throughput against offered load", "x: offered load (req/s) (closed loop: users); y: mean request-window throughput (req/s), one line per placement; the diagonal is achieved = offered."},
			{sweep.LatencyP90, "p90 latency against offered load", "x: offered load (req/s) (closed loop: users); y: mean p90 end-to-end latency (ms), one line per placement."},
		} {
			fig, err := loadFigure(filepath.Join(dir, f.name), b.opts.MaxInlineSVG, f.title, f.caption)
			if err != nil {
				b.err = err
				return
			}
			b.addFig(bl, fig)
		}
	}
}

func placementNames(a whatif.Audit) []string {
	var out []string
	for _, p := range a.Placements {
		out = append(out, p.Placement)
	}
	return out
}

func meanP90(p whatif.PlacementAudit) float64 {
	if len(p.Runs) == 0 {
		return math.NaN()
	}
	s := 0.0
	for _, r := range p.Runs {
		s += r.E2E.P90Ms
	}
	return s / float64(len(p.Runs))
}
