package fit

import (
	"encoding/xml"
	"errors"
	"fmt"
	"github.com/steplab/steplab/fpm"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
)

// ErrCheckFailed is wrapped by the error of a failed regression gate
// (CheckReport.Err): the CLI maps it to exit status 1.
var ErrCheckFailed = errors.New("model check failed")

// CheckOptions are the bounds of the regression gate. A bound of 0 is not
// checked. Percentages are percent of the actual step time; MaxRegression
// is in percentage points of MAPE.
type CheckOptions struct {
	// MaxMAPE bounds the mean absolute percentage error, overall and for
	// each step kind present.
	MaxMAPE float64
	// MaxP90 bounds the 90th percentile of the absolute percentage error,
	// overall and per kind.
	MaxP90 float64
	// Baseline is another model evaluated on the same rows (e.g. the last
	// release); nil for none. The check fails when the model's MAPE exceeds
	// the baseline's by more than MaxRegression percentage points, overall
	// or on any kind.
	Baseline      fpm.FPM
	BaselineName  string
	MaxRegression float64
	// Worst is the number of worst steps kept in the report (default 10).
	Worst int
}

// CheckResult is one check of the gate.
type CheckResult struct {
	Name   string  `json:"name"`   // e.g. "mape overall"
	Metric string  `json:"metric"` // mape_pct, p90_ape_pct, mape_regression_pp
	Scope  string  `json:"scope"`  // overall, kind=decode, ...
	Value  float64 `json:"value"`
	Bound  float64 `json:"bound"`
	// Op is how Value must compare with Bound: "<=" (the default when
	// empty) or ">=".
	Op     string `json:"op,omitempty"`
	Passed bool   `json:"passed"`
	// Detail says what the value was compared with (the baseline's MAPE).
	Detail string `json:"detail,omitempty"`
	Rows   int    `json:"rows"`
}

// CheckReport is the outcome of the gate: every check, whether all
// passed, and the evaluation behind them.
type CheckReport struct {
	Passed   bool          `json:"passed"`
	Checks   []CheckResult `json:"checks"`
	Report   Report        `json:"report"`
	Baseline *Report       `json:"baseline,omitempty"`
	// Filled by the caller (CLI): what was checked on what.
	Model        string           `json:"model,omitempty"`
	BaselineName string           `json:"baseline_name,omitempty"`
	Datasets     []fpm.DatasetRef `json:"datasets,omitempty"`
	Warnings     []string         `json:"warnings,omitempty"`
}

// Check evaluates m on d and applies the bounds. It refuses options that
// check nothing, negative bounds, and a regression bound without a
// baseline (or the reverse); an evaluation whose value is not a number
// (no rows) fails its check rather than passing it.
func Check(m fpm.FPM, d *Data, opt CheckOptions) (*CheckReport, error) {
	if m == nil {
		return nil, fmt.Errorf("check: no model")
	}
	for name, v := range map[string]float64{"max MAPE": opt.MaxMAPE, "max p90": opt.MaxP90, "max regression": opt.MaxRegression} {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("check: %s is %v: want a finite bound >= 0", name, v)
		}
	}
	if opt.MaxMAPE == 0 && opt.MaxP90 == 0 && opt.Baseline == nil {
		return nil, fmt.Errorf("check: nothing to check: give a MAPE bound, a p90 bound or a baseline")
	}
	if d == nil || d.Len() == 0 {
		return nil, dataErr(ErrEmptySelection, "no rows to check the model on")
	}
	worst := opt.Worst
	if worst == 0 {
		worst = 10
	}
	r := &CheckReport{Passed: true, Report: Evaluate(m, d, worst), BaselineName: opt.BaselineName}
	add := func(c CheckResult) {
		c.Passed = !math.IsNaN(c.Value) && c.Value <= c.Bound
		if c.Name == "" {
			c.Name = c.Metric + " " + c.Scope
		}
		r.Passed = r.Passed && c.Passed
		r.Checks = append(r.Checks, c)
	}
	scopes := []struct {
		name string
		m    Metrics
		base *Metrics
	}{{name: "overall", m: r.Report.Overall}}
	kinds := make([]string, 0, len(r.Report.ByKind))
	for k := range r.Report.ByKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	if len(kinds) > 1 {
		for _, k := range kinds {
			scopes = append(scopes, struct {
				name string
				m    Metrics
				base *Metrics
			}{name: "kind=" + k, m: r.Report.ByKind[k]})
		}
	}
	if opt.Baseline != nil {
		b := Evaluate(opt.Baseline, d, 0)
		r.Baseline = &b
		scopes[0].base = &b.Overall
		for i := 1; i < len(scopes); i++ {
			bm := b.ByKind[strings.TrimPrefix(scopes[i].name, "kind=")]
			scopes[i].base = &bm
		}
	}
	for _, s := range scopes {
		if opt.MaxMAPE > 0 {
			add(CheckResult{Metric: "mape_pct", Scope: s.name, Value: s.m.MAPE, Bound: opt.MaxMAPE, Rows: s.m.Count})
		}
		if opt.MaxP90 > 0 {
			add(CheckResult{Metric: "p90_ape_pct", Scope: s.name, Value: s.m.P90APE, Bound: opt.MaxP90, Rows: s.m.Count})
		}
		if s.base != nil {
			add(CheckResult{Metric: "mape_regression_pp", Scope: s.name, Value: s.m.MAPE - s.base.MAPE, Bound: opt.MaxRegression, Rows: s.m.Count,
				Detail: fmt.Sprintf("MAPE %.3f%% vs baseline %.3f%%", s.m.MAPE, s.base.MAPE)})
		}
	}
	return r, nil
}

// Failures returns the checks that failed.
func (r *CheckReport) Failures() []CheckResult { return failures(r.Checks) }

func failures(checks []CheckResult) []CheckResult {
	var out []CheckResult
	for _, c := range checks {
		if !c.Passed {
			out = append(out, c)
		}
	}
	return out
}

func (c *CheckResult) op() string {
	if c.Op == "" {
		return "<="
	}
	return c.Op
}

// CheckFailedError lists the failed checks; it wraps ErrCheckFailed.
type CheckFailedError struct{ Failed []CheckResult }

func (e *CheckFailedError) Error() string {
	parts := make([]string, len(e.Failed))
	for i, c := range e.Failed {
		breach := map[string]string{"<=": ">", ">=": "<"}[c.op()]
		parts[i] = fmt.Sprintf("%s = %.3f %s %.3f", c.Name, c.Value, breach, c.Bound)
	}
	return fmt.Sprintf("%d check(s) failed: %s", len(e.Failed), strings.Join(parts, "; "))
}

func (e *CheckFailedError) Unwrap() error { return ErrCheckFailed }

// Err is nil when every check passed, else a *CheckFailedError.
func (r *CheckReport) Err() error { return checksErr(r.Checks) }

func checksErr(checks []CheckResult) error {
	if f := failures(checks); len(f) > 0 {
		return &CheckFailedError{Failed: f}
	}
	return nil
}

// WriteTable prints every check (or, with failedOnly, the failed ones) as
// a table: metric, scope, value, bound, result.
func (r *CheckReport) WriteTable(w io.Writer, failedOnly bool) { writeChecks(w, r.Checks, failedOnly) }

func writeChecks(w io.Writer, checks []CheckResult, failedOnly bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "result\tcheck\tvalue\tbound\trows\tdetail")
	for _, c := range checks {
		if failedOnly && c.Passed {
			continue
		}
		res := "ok"
		if !c.Passed {
			res = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.3f\t%s %.3f\t%d\t%s\n", res, c.Name, c.Value, c.op(), c.Bound, c.Rows, c.Detail)
	}
	tw.Flush()
}

// JUnit XML (the subset CI systems read: testsuites > testsuite >
// testcase, with a failure element on a failed case).
type (
	JUnitSuites struct {
		XMLName  xml.Name     `xml:"testsuites"`
		Name     string       `xml:"name,attr"`
		Tests    int          `xml:"tests,attr"`
		Failures int          `xml:"failures,attr"`
		Suites   []JUnitSuite `xml:"testsuite"`
	}
	JUnitSuite struct {
		Name     string      `xml:"name,attr"`
		Tests    int         `xml:"tests,attr"`
		Failures int         `xml:"failures,attr"`
		Errors   int         `xml:"errors,attr"`
		Time     string      `xml:"time,attr"`
		Cases    []JUnitCase `xml:"testcase"`
	}
	JUnitCase struct {
		Name      string        `xml:"name,attr"`
		Classname string        `xml:"classname,attr"`
		Time      string        `xml:"time,attr"`
		Failure   *JUnitFailure `xml:"failure,omitempty"`
		SystemOut string        `xml:"system-out,omitempty"`
	}
	JUnitFailure struct {
		Message string `xml:"message,attr"`
		Type    string `xml:"type,attr"`
		Text    string `xml:",chardata"`
	}
)

// JUnit returns the checks as a JUnit report: one testcase per check,
// named "metric scope", in a suite named after the model.
func (r *CheckReport) JUnit() *JUnitSuites { return junitOf(r.Model, r.Checks) }

func junitOf(model string, checks []CheckResult) *JUnitSuites {
	name := "steplab check"
	if model != "" {
		name += " " + model
	}
	s := JUnitSuite{Name: name, Time: "0"}
	for _, c := range checks {
		tc := JUnitCase{Name: c.Name, Classname: "steplab.check", Time: "0",
			SystemOut: fmt.Sprintf("value %.4f bound %s %.4f rows %d %s", c.Value, c.op(), c.Bound, c.Rows, c.Detail)}
		if !c.Passed {
			tc.Failure = &JUnitFailure{Type: c.Metric,
				Message: fmt.Sprintf("%s = %.3f breaks bound %s %.3f", c.Name, c.Value, c.op(), c.Bound),
				Text:    strings.TrimSpace(fmt.Sprintf("%s on %d rows %s", c.Metric, c.Rows, c.Detail))}
			s.Failures++
		}
		s.Cases = append(s.Cases, tc)
		s.Tests++
	}
	return &JUnitSuites{Name: "steplab", Tests: s.Tests, Failures: s.Failures, Suites: []JUnitSuite{s}}
}

// WriteJUnit writes the JUnit XML report.
func (r *CheckReport) WriteJUnit(w io.Writer) error { return writeJUnit(w, r.JUnit()) }

func writeJUnit(w io.Writer, j *JUnitSuites) error {
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(j); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
