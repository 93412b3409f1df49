package validate

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/steplab/steplab/datasets"
)

// Level is the severity of a violation.
type Level string

const (
	// Error: the dataset breaks the contract; `steplab validate` exits 1.
	Error Level = "error"
	// Warning: worth knowing (a partial dataset, no manifest), not a failure.
	Warning Level = "warning"
)

// TableManifest is the pseudo table name of violations about manifest.json.
const TableManifest = "manifest"

// Violation is one broken rule.
type Violation struct {
	Table string `json:"table"`
	// Row is the 0-based row index across the table's parts; -1 for a
	// violation about a table, a part or the manifest.
	Row int64 `json:"row"`
	// Part is the part file, relative to the dataset directory.
	Part    string `json:"part,omitempty"`
	Field   string `json:"field,omitempty"`
	Level   Level  `json:"level"`
	Message string `json:"message"`
}

func (v Violation) String() string {
	loc := v.Table
	if v.Row >= 0 {
		loc += fmt.Sprintf("[%d]", v.Row)
	}
	if v.Field != "" {
		loc += "." + v.Field
	}
	if v.Part != "" {
		loc += " (" + v.Part + ")"
	}
	return fmt.Sprintf("%s: %s: %s", v.Level, loc, v.Message)
}

// Options tune Dataset.
type Options struct {
	// Max keeps at most this many violations in the report (0: all). Counting
	// continues past it, so Errors and Warnings stay exact.
	Max int
	// Settings, when set, checks the manifest's settings (model sizes,
	// hardware, KV cache, CUDA graphs) against what the models allow:
	// package catalog/manifest's Check, which this package, below the
	// models, cannot import.
	Settings func(*datasets.Manifest) []Violation
}

// Count is the number of violations of one table, field and level.
type Count struct {
	Table string `json:"table"`
	Field string `json:"field,omitempty"`
	Level Level  `json:"level"`
	N     int64  `json:"n"`
}

// Report is the outcome of Dataset.
type Report struct {
	Dir        string      `json:"dir"`
	Violations []Violation `json:"violations"`
	// Truncated is set when Options.Max dropped violations.
	Truncated bool  `json:"truncated,omitempty"`
	Errors    int64 `json:"errors"`
	Warnings  int64 `json:"warnings"`
	// Counts sums the violations by table, field and level (all of them,
	// also those Max dropped).
	Counts []Count `json:"counts,omitempty"`
	// Partial is set when the manifest says the writer was interrupted.
	Partial bool `json:"partial"`
	// Completed lists, per table, the parts and rows the manifest records
	// (for a partial dataset: what survived).
	Completed map[string]datasets.TableInfo `json:"completed,omitempty"`
	// RowsChecked is the number of rows read per table.
	RowsChecked map[string]int64 `json:"rows_checked"`
}

// OK reports whether the dataset has no error-level violation.
func (r *Report) OK() bool { return r.Errors == 0 }

type countKey struct {
	table, field string
	level        Level
}

type checker struct {
	d      *datasets.Dataset
	opts   Options
	r      *Report
	counts map[countKey]int64

	// per table: parts and whether the rows can be read
	parts    map[string][]string
	readable map[string]bool
	// optional columns present per table
	// columns read as their defaults in some part, per table
	defaulted map[string]map[string]bool

	reqIDs map[string]struct{}
}

// Dataset validates the dataset at dir. The error is for a directory that
// cannot be read at all or is no dataset; everything else is a violation.
func Dataset(dir string, opts Options) (*Report, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s: not a dataset directory (validate checks a directory): %s", dir, datasets.FileHint(dir))
	}
	c := &checker{
		opts:      opts,
		r:         &Report{Dir: dir, RowsChecked: map[string]int64{}},
		counts:    map[countKey]int64{},
		parts:     map[string][]string{},
		readable:  map[string]bool{},
		defaulted: map[string]map[string]bool{},
	}
	d, err := datasets.Open(dir)
	if err != nil {
		if _, serr := os.Stat(filepath.Join(dir, datasets.ManifestFile)); serr != nil {
			return nil, err // no manifest and no tables: not a dataset
		}
		field := ""
		if errors.Is(err, datasets.ErrNewerSchema) || strings.Contains(err.Error(), "schema version") {
			field = "schema_version"
		}
		c.add(TableManifest, -1, datasets.ManifestFile, field, Error, err.Error())
		return c.finish(), nil
	}
	c.d = d
	c.checkManifest()
	if opts.Settings != nil {
		for _, v := range opts.Settings(d.Manifest) {
			c.add(v.Table, v.Row, v.Part, v.Field, v.Level, v.Message)
		}
	}
	c.checkLeftovers()
	for _, t := range datasets.Tables {
		c.checkStructure(t)
	}
	c.checkRequests()
	c.checkSteps()
	c.checkGPUSamples()
	c.checkEngineSamples()
	return c.finish(), nil
}

func (c *checker) add(table string, row int64, part, field string, level Level, msg string) {
	c.counts[countKey{table, field, level}]++
	if level == Error {
		c.r.Errors++
	} else {
		c.r.Warnings++
	}
	if c.opts.Max > 0 && len(c.r.Violations) >= c.opts.Max {
		c.r.Truncated = true
		return
	}
	c.r.Violations = append(c.r.Violations, Violation{Table: table, Row: row, Part: part, Field: field, Level: level, Message: msg})
}

func (c *checker) errorf(table string, row int64, part, field, format string, args ...any) {
	c.add(table, row, part, field, Error, fmt.Sprintf(format, args...))
}

func (c *checker) warnf(table string, row int64, part, field, format string, args ...any) {
	c.add(table, row, part, field, Warning, fmt.Sprintf(format, args...))
}

func (c *checker) finish() *Report {
	for k, n := range c.counts {
		c.r.Counts = append(c.r.Counts, Count{Table: k.table, Field: k.field, Level: k.level, N: n})
	}
	sort.Slice(c.r.Counts, func(i, j int) bool {
		a, b := c.r.Counts[i], c.r.Counts[j]
		if a.Table != b.Table {
			return a.Table < b.Table
		}
		if a.Field != b.Field {
			return a.Field < b.Field
		}
		return a.Level < b.Level
	})
	if c.r.Violations == nil {
		c.r.Violations = []Violation{}
	}
	return c.r
}

// ---- manifest and parts ----

func (c *checker) checkManifest() {
	m := c.d.Manifest
	for _, a := range c.d.Assumptions {
		c.warnf(TableManifest, -1, datasets.ManifestFile, "", "%s", a)
	}
	switch m.Status {
	case datasets.DatasetComplete:
	case datasets.DatasetPartial:
		c.r.Partial = true
	default:
		c.errorf(TableManifest, -1, datasets.ManifestFile, "status", "unknown status %q (want %s or %s)", m.Status, datasets.DatasetComplete, datasets.DatasetPartial)
	}
	c.r.Completed = map[string]datasets.TableInfo{}
	names := make([]string, 0, len(m.Tables))
	for t := range m.Tables {
		names = append(names, t)
	}
	sort.Strings(names)
	var summary []string
	for _, t := range names {
		ti := m.Tables[t]
		c.r.Completed[t] = ti
		summary = append(summary, fmt.Sprintf("%s: %d parts, %d rows", t, len(ti.Parts), ti.Rows))
		c.checkListedParts(t, ti)
	}
	if c.r.Partial {
		s := "no completed parts"
		if len(summary) > 0 {
			s = "completed " + strings.Join(summary, "; ")
		}
		c.warnf(TableManifest, -1, datasets.ManifestFile, "status", "partial dataset (writer interrupted): %s", s)
	}
	if len(m.Tables) == 0 {
		return // a minimal manifest: the assumption says it
	}
	for _, t := range datasets.Tables {
		if _, listed := m.Tables[t]; !listed && c.d.Has(t) {
			c.warnf(t, -1, "", "", "table on disk but not listed in %s", datasets.ManifestFile)
		}
	}
}

func (c *checker) checkListedParts(table string, ti datasets.TableInfo) {
	var sum int64
	for _, p := range ti.Parts {
		sum += p.Rows
		path := filepath.Join(c.d.Dir, filepath.FromSlash(p.File))
		f, st, err := c.d.OpenPart(p.File)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				c.errorf(table, -1, p.File, "", "part listed in %s is missing", datasets.ManifestFile)
			} else {
				c.errorf(table, -1, p.File, "", "part listed in %s: %v", datasets.ManifestFile, err)
			}
			continue
		}
		if p.Bytes > 0 && st.Size() != p.Bytes {
			c.errorf(table, -1, p.File, "", "size %d bytes, %s records %d", st.Size(), datasets.ManifestFile, p.Bytes)
		}
		if p.SHA256 != "" {
			h := sha256.New()
			if _, err := io.Copy(h, io.LimitReader(f, st.Size())); err != nil {
				c.errorf(table, -1, p.File, "", "reading for sha256: %v", err)
			} else if sum := hex.EncodeToString(h.Sum(nil)); !strings.EqualFold(sum, p.SHA256) {
				c.errorf(table, -1, p.File, "", "sha256 %s does not match %s (%s): the part changed after it was written", sum, datasets.ManifestFile, p.SHA256)
			}
		}
		f.Close()
		pf, f, err := datasets.OpenParquet(path)
		if err != nil {
			continue // reported by checkStructure
		}
		if pf.NumRows() != p.Rows {
			c.errorf(table, -1, p.File, "", "%d rows, %s records %d", pf.NumRows(), datasets.ManifestFile, p.Rows)
		}
		f.Close()
	}
	if sum != ti.Rows {
		c.errorf(table, -1, "", "", "%s records %d rows for the table but its parts sum to %d", datasets.ManifestFile, ti.Rows, sum)
	}
	// Parts on disk the manifest does not list.
	if !c.d.Has(table) {
		return
	}
	onDisk, err := c.d.Parts(table)
	if err != nil {
		return
	}
	listed := map[string]bool{}
	for _, p := range ti.Parts {
		listed[filepath.ToSlash(filepath.Clean(filepath.FromSlash(p.File)))] = true
	}
	for _, path := range onDisk {
		rel := relPart(c.d.Dir, path)
		if !listed[rel] {
			c.warnf(table, -1, rel, "", "part on disk but not listed in %s", datasets.ManifestFile)
		}
	}
}

// checkColumns checks the columns of one part of a table against the
// schema's row type, returning the columns read as their defaults.
var checkColumns = map[string]func(path string, pf *parquet.File) ([]string, error){
	datasets.TableSteps:         datasets.CheckColumns[datasets.Step],
	datasets.TableStepRequests:  datasets.CheckColumns[datasets.StepRequest],
	datasets.TableRequests:      datasets.CheckColumns[datasets.Request],
	datasets.TableGPUSamples:    datasets.CheckColumns[datasets.GPUSample],
	datasets.TableEngineSamples: datasets.CheckColumns[datasets.EngineSample],
}

// checkStructure opens every part of table and checks its columns: a
// missing required column, or one whose type does not convert, is an error
// (and the rows are not checked); columns read as their defaults are one
// warning per table.
func (c *checker) checkStructure(table string) {
	if !c.d.Has(table) {
		return
	}
	parts, err := c.d.Parts(table)
	if err != nil {
		c.errorf(table, -1, "", "", "%v", err)
		return
	}
	if len(parts) == 0 {
		where := relPart(c.d.Dir, datasets.TableDir(c.d.Dir, table))
		if c.r.Partial { // stopped before its first part was complete
			c.warnf(table, -1, where, "", "table directory holds no part files: the writer stopped before the first was complete")
			return
		}
		c.errorf(table, -1, where, "", "table directory holds no part files")
		return
	}
	ok := true
	defaulted := map[string]bool{}
	for _, path := range parts {
		rel := relPart(c.d.Dir, path)
		pf, f, err := datasets.OpenParquet(path)
		if err != nil {
			c.errorf(table, -1, rel, "", "%v", err)
			ok = false
			continue
		}
		cols, err := checkColumns[table](path, pf)
		f.Close()
		var missing *datasets.MissingColumnsError
		var typ *datasets.ColumnTypeError
		switch {
		case errors.As(err, &missing):
			for i, col := range missing.Columns {
				msg := fmt.Sprintf("missing column %q", col)
				if missing.Notes[i] != "" {
					msg += " (" + missing.Notes[i] + ")"
				}
				if len(missing.Similar[i]) > 0 {
					msg += fmt.Sprintf("; the part has %q: rename it", missing.Similar[i][0])
				}
				c.errorf(table, -1, rel, col, "%s", msg)
			}
			ok = false
		case errors.As(err, &typ):
			c.errorf(table, -1, rel, typ.Column, "%s", strings.TrimPrefix(err.Error(), path+": "))
			ok = false
		case err != nil:
			c.errorf(table, -1, rel, "", "%s", strings.TrimPrefix(err.Error(), path+": "))
			ok = false
		}
		for _, col := range cols {
			defaulted[col] = true
		}
	}
	if !ok {
		c.warnf(table, -1, "", "", "rows not checked: the table cannot be read")
	}
	if len(defaulted) > 0 {
		var names []string
		for _, d := range datasets.DefaultedColumns(table) {
			if defaulted[d.Column] {
				names = append(names, fmt.Sprintf("%s (%s)", d.Column, orQuoted(d.Default)))
			}
		}
		c.warnf(table, -1, "", "", "columns absent or all null in some parts, read as their defaults (checks that need them skipped): %s", strings.Join(names, ", "))
	}
	c.parts[table] = parts
	c.readable[table] = ok
	c.defaulted[table] = defaulted
}

// orQuoted shows an empty default as "".
func orQuoted(s string) string {
	if s == "" {
		return `""`
	}
	return s
}

func (c *checker) readErr(table string, row int64, part string, err error) {
	c.errorf(table, row, part, "", "cannot read: %v (rest of the table not checked)", err)
}

// ---- generic field checks ----

func (c *checker) nonNegInt(table string, row int64, part, field string, v int64) {
	if v < 0 && v != datasets.Unknown {
		c.errorf(table, row, part, field, "negative value %d (only %d, Unknown, may be negative)", v, datasets.Unknown)
	}
}

// finiteNonNeg checks a float that may be Unknown (-1).
func (c *checker) finiteNonNeg(table string, row int64, part, field string, v float64) {
	switch {
	case v == float64(datasets.Unknown):
	case math.IsNaN(v):
		c.errorf(table, row, part, field, "NaN")
	case math.IsInf(v, 0):
		c.errorf(table, row, part, field, "infinite value %v", v)
	case v < 0:
		c.errorf(table, row, part, field, "negative value %v", v)
	}
}

func known(v int64) bool { return v != datasets.Unknown }

// ---- requests ----

var requestStatuses = []string{datasets.StatusFinished, datasets.StatusAborted, datasets.StatusUnfinished, datasets.StatusNotRun}

func (c *checker) checkRequests() {
	const T = datasets.TableRequests
	if !c.readable[T] {
		return
	}
	c.reqIDs = map[string]struct{}{}
	s := newStream[datasets.Request](c.d.Dir, c.parts[T])
	defer s.Close()
	for r := s.Next(); r != nil; r = s.Next() {
		c.r.RowsChecked[T]++
		row, part := s.row, s.part
		if r.ReqID == "" {
			c.errorf(T, row, part, "req_id", "empty req_id")
		} else if _, dup := c.reqIDs[r.ReqID]; dup {
			c.errorf(T, row, part, "req_id", "duplicate req_id %q", r.ReqID)
		} else {
			c.reqIDs[r.ReqID] = struct{}{}
		}
		if r.ArrivalNs < 0 {
			c.errorf(T, row, part, "arrival_ns", "arrival_ns %d < 0 (every request needs its arrival)", r.ArrivalNs)
		}
		if r.PromptTokens < 0 {
			c.errorf(T, row, part, "prompt_tokens", "prompt_tokens %d < 0", r.PromptTokens)
		}
		if r.OutputTokens < 0 {
			c.errorf(T, row, part, "output_tokens", "output_tokens %d < 0", r.OutputTokens)
		}
		c.nonNegInt(T, row, part, "first_scheduled_ns", r.FirstScheduledNs)
		c.nonNegInt(T, row, part, "first_token_ns", r.FirstTokenNs)
		c.nonNegInt(T, row, part, "finish_ns", r.FinishNs)
		c.nonNegInt(T, row, part, "num_preemptions", int64(r.NumPreemptions))
		// Event order, each against the latest known earlier event.
		events := []struct {
			name string
			v    int64
		}{{"arrival_ns", r.ArrivalNs}, {"first_scheduled_ns", r.FirstScheduledNs}, {"first_token_ns", r.FirstTokenNs}, {"finish_ns", r.FinishNs}}
		prev := -1
		for i, e := range events {
			if e.v < 0 {
				continue
			}
			if prev >= 0 && e.v < events[prev].v {
				c.errorf(T, row, part, e.name, "%s %d is before %s %d", e.name, e.v, events[prev].name, events[prev].v)
			}
			prev = i
		}
		if !contains(requestStatuses, r.Status) {
			c.errorf(T, row, part, "status", "status %q not one of %s", r.Status, strings.Join(requestStatuses, ", "))
		}
	}
	if s.err != nil {
		c.readErr(T, s.next, s.errPart, s.err)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ---- engine_samples ----

// checkEngineSamples: counts and times non-negative, times in order per
// rank, KV usage a fraction (or -1, not recorded), throughputs finite and
// non-negative (or -1).
func (c *checker) checkEngineSamples() {
	const T = datasets.TableEngineSamples
	if !c.readable[T] {
		return
	}
	s := newStream[datasets.EngineSample](c.d.Dir, c.parts[T])
	defer s.Close()
	last := map[int32]int64{}
	for r := s.Next(); r != nil; r = s.Next() {
		c.r.RowsChecked[T]++
		row, part := s.row, s.part
		c.nonNegInt(T, row, part, "t_ns", r.TNs)
		c.nonNegInt(T, row, part, "num_running", int64(r.NumRunning))
		c.nonNegInt(T, row, part, "num_waiting", int64(r.NumWaiting))
		c.nonNegInt(T, row, part, "window_ns", r.WindowNs)
		if r.DPRank < -1 {
			c.errorf(T, row, part, "dp_rank", "dp_rank %d (want a rank, or -1 for every rank)", r.DPRank)
		}
		if prev, ok := last[r.DPRank]; ok && r.TNs < prev {
			c.errorf(T, row, part, "t_ns", "t_ns %d is earlier than the previous sample of dp_rank %d (%d)", r.TNs, r.DPRank, prev)
		}
		last[r.DPRank] = r.TNs
		if r.KVUsage != -1 && !(r.KVUsage >= 0 && r.KVUsage <= 1) {
			c.errorf(T, row, part, "kv_usage", "kv_usage %v is not a fraction in [0, 1] (or -1, not recorded)", r.KVUsage)
		}
		for _, f := range []struct {
			name string
			v    float64
		}{{"prompt_tokens_per_s", r.PromptTokensPerS}, {"generation_tokens_per_s", r.GenerationTokensPerS}} {
			if f.v != -1 {
				c.finiteNonNeg(T, row, part, f.name, f.v)
			}
		}
	}
	if s.err != nil {
		c.readErr(T, s.next, s.errPart, s.err)
	}
}

// ---- gpu_samples ----

func (c *checker) checkGPUSamples() {
	const T = datasets.TableGPUSamples
	if !c.readable[T] {
		return
	}
	s := newStream[datasets.GPUSample](c.d.Dir, c.parts[T])
	defer s.Close()
	for r := s.Next(); r != nil; r = s.Next() {
		c.r.RowsChecked[T]++
		row, part := s.row, s.part
		c.nonNegInt(T, row, part, "t_ns", r.TNs)
		c.nonNegInt(T, row, part, "gpu_index", int64(r.GPUIndex))
		c.nonNegInt(T, row, part, "sm_clock_mhz", int64(r.SMClockMHz))
		c.nonNegInt(T, row, part, "mem_clock_mhz", int64(r.MemClockMHz))
		c.nonNegInt(T, row, part, "temperature_c", int64(r.TemperatureC))
		c.nonNegInt(T, row, part, "mem_used_bytes", r.MemUsedBytes)
		c.nonNegInt(T, row, part, "mem_total_bytes", r.MemTotalBytes)
		c.nonNegInt(T, row, part, "util_gpu_percent", int64(r.UtilGPUPercent))
		c.nonNegInt(T, row, part, "util_mem_percent", int64(r.UtilMemPercent))
		for _, f := range []struct {
			name string
			v    float64
		}{{"power_w", r.PowerW}, {"power_limit_w", r.PowerLimitW}} {
			if math.IsNaN(f.v) || math.IsInf(f.v, 0) || (f.v < 0 && f.v != -1) {
				c.errorf(T, row, part, f.name, "%s %v is not a finite non-negative number", f.name, f.v)
			}
		}
	}
	if s.err != nil {
		c.readErr(T, s.next, s.errPart, s.err)
	}
}
