package importers

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/steplab/steplab/datasets"
)

// The table wrapper.
//
// The trace importers parse one published format into fixed rows. A
// table a user already has (pandas, DuckDB, Polars, Spark, a spreadsheet's
// CSV) holds rows of the schema under its own column names and types; the
// wrapper renames its columns (--map theirs=ours), reads it through the
// datasets reader (which converts integer widths, floats, TIMESTAMPs and
// nulls, and fills the defaults of absent columns), and writes a dataset
// with the provenance the table cannot carry: hardware, model and
// measurement policy. It takes options the trace formats do not, so it is
// its own entry point (ImportTable, `steplab import table`) beside the
// format table.

// Extra-column policies (TableOptions.Extra).
const (
	ExtraDrop = "drop" // columns the schema does not know are left out (and named in a note)
	ExtraKeep = "keep" // they are kept in <table>_extra.parquet, row for row
)

// Time origins (TableOptions.TimeOrigin).
const (
	OriginFirst = "first" // instants move so that the table's earliest is 0
	OriginKeep  = "keep"  // instants stay as the table has them
)

// TableOptions tune ImportTable.
type TableOptions struct {
	// Table is the table the source holds: datasets.TableSteps or
	// datasets.TableRequests.
	Table string
	// Map renames the source's columns: theirs -> ours.
	Map map[string]string
	// Extra says what becomes of columns the schema does not know:
	// ExtraDrop (default) or ExtraKeep.
	Extra string
	// TimeOrigin: OriginFirst (default) or OriginKeep.
	TimeOrigin string
	// Hardware and Model name what ran; a preset name (see the model
	// package) fills the shape in the manifest.
	Hardware, Model string
	// PolicyDecode and PolicyPrefill are the measurement policy.
	PolicyDecode, PolicyPrefill string

	Options // overwrite, and the tool recorded in the manifest
}

// TableFormat is the Source.Format of a wrapped table.
const TableFormat = "table"

// ImportTable turns a Parquet table (a file, or a folder of files as
// pandas, DuckDB or Spark write them) or a CSV file into a dataset at dir,
// written like every import: under a temporary name, renamed into place
// when complete. Errors name the column and say what to change: a --map
// key the source lacks, a required column missing after the mapping (with
// the source's columns closest to it), a column whose type does not
// convert.
func ImportTable(src, dir string, opts TableOptions) (*Result, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	dir, err := outputDir(dir, opts.Overwrite)
	if err != nil {
		return nil, err
	}
	csvOut := datasets.StagingPath(dir, "csv") + ".parquet"
	defer os.Remove(csvOut)
	files, sum, err := tableSource(src, csvOut)
	if err != nil {
		return nil, err
	}
	m := opts.manifest(dir, TableFormat, src)
	m.Source.SHA256 = sum
	if err := opts.describe(&m); err != nil {
		return nil, err
	}
	var notes []string
	have, err := sourceColumns(files)
	if err != nil {
		return nil, err
	}
	extra, err := opts.planColumns(have)
	if err != nil {
		return nil, err
	}
	res := &Result{Dir: dir, Format: TableFormat, Source: src, SHA256: sum, Table: opts.Table}
	err = stage(dir, opts.Overwrite, m, func(w *datasets.Writer) error {
		var err error
		switch opts.Table {
		case datasets.TableSteps:
			err = copyTable[datasets.Step](w, files, &opts, res)
		default:
			err = copyTable[datasets.Request](w, files, &opts, res)
		}
		if err != nil {
			return err
		}
		switch {
		case len(extra) == 0:
		case opts.Extra == ExtraKeep:
			keep := extra
			if k := opts.key(have); k != "" {
				keep = append([]string{k}, extra...)
			}
			name := opts.Table + "_extra.parquet"
			if err := keepColumns(files, keep, filepath.Join(w.Dir(), name)); err != nil {
				return err
			}
			notes = append(notes, fmt.Sprintf("columns steplab does not know kept in %s, row for row with %s: %s",
				name, opts.Table, strings.Join(extra, ", ")))
		default:
			notes = append(notes, "columns steplab does not know, left out: "+strings.Join(extra, ", "))
		}
		if res.timeOrigin != 0 {
			notes = append(notes, fmt.Sprintf("instants moved by -%d ns: the earliest is 0", res.timeOrigin))
		}
		res.Notes = notes
		return w.UpdateManifest(func(m *datasets.Manifest) {
			m.Notes = append(m.Notes, notes...)
			if res.timeOrigin != 0 {
				m.Source.Detail = map[string]string{"time_origin_ns": strconv.FormatInt(res.timeOrigin, 10)}
			}
		})
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

func (o *TableOptions) check() error {
	switch o.Table {
	case datasets.TableSteps, datasets.TableRequests:
	case "":
		return fmt.Errorf("no table: say which table the source holds (--table %s or --table %s)", datasets.TableSteps, datasets.TableRequests)
	default:
		return fmt.Errorf("table %q: the wrapper writes %s or %s", o.Table, datasets.TableSteps, datasets.TableRequests)
	}
	if err := choose("--extra", &o.Extra, ExtraDrop, ExtraKeep); err != nil {
		return err
	}
	if err := choose("--time-origin", &o.TimeOrigin, OriginFirst, OriginKeep); err != nil {
		return err
	}
	policies := []string{datasets.PolicySteadyStateSecondStep, datasets.PolicyAdmissionStep, datasets.PolicyProduction, datasets.PolicySingleStep}
	for _, p := range []string{o.PolicyDecode, o.PolicyPrefill} {
		if p != "" && !slices.Contains(policies, p) {
			return fmt.Errorf("measurement policy %q: want one of %s", p, strings.Join(policies, ", "))
		}
	}
	return nil
}

// choose checks that *v is def (then also when empty) or other.
func choose(flag string, v *string, def, other string) error {
	switch *v {
	case "":
		*v = def
	case def, other:
	default:
		return fmt.Errorf("%s %q: want %s or %s", flag, *v, def, other)
	}
	return nil
}

// describe fills the manifest's hardware, model and policy. The names are
// recorded as given: the tools that need the GPU's or the model's figures
// look them up in the catalogue (or in the spec file or config.json a name
// points at) when they read the dataset.
func (o *TableOptions) describe(m *datasets.Manifest) error {
	if o.Hardware == "" || o.Model == "" {
		return errors.New("say what ran: --hardware GPU and --model MODEL (a catalogue name, a hardware spec file, a config.json)")
	}
	m.Hardware = &datasets.Hardware{GPUName: o.Hardware}
	m.Model = &datasets.ModelShape{Name: o.Model}
	if o.PolicyDecode != "" || o.PolicyPrefill != "" {
		m.MeasurementPolicy = &datasets.MeasurementPolicy{Decode: o.PolicyDecode, Prefill: o.PolicyPrefill}
	}
	return nil
}

// key is the source column that becomes the table's key (step_id,
// req_id), or "".
func (o *TableOptions) key(have []string) string {
	want := "step_id"
	if o.Table == datasets.TableRequests {
		want = "req_id"
	}
	for _, h := range have {
		if o.ours(h) == want {
			return h
		}
	}
	return ""
}

// ours is the schema name a source column takes.
func (o *TableOptions) ours(theirs string) string {
	if n, ok := o.Map[theirs]; ok {
		return n
	}
	return theirs
}

// planColumns checks the mapping against the source's columns and the
// schema, and returns the source columns the schema does not know.
func (o *TableOptions) planColumns(have []string) (extra []string, err error) {
	schema := datasets.TableColumns(o.Table)
	var bad []string
	for _, theirs := range sortedKeys(o.Map) {
		ours := o.Map[theirs]
		bad = appendUnknown(bad, theirs, have, fmt.Sprintf("--map %s=%s: the source has no column %q", theirs, ours, theirs))
		bad = appendUnknown(bad, ours, schema, fmt.Sprintf("--map %s=%s: %s has no column %q", theirs, ours, o.Table, ours))
	}
	if len(bad) > 0 {
		return nil, errors.New(strings.Join(bad, "; "))
	}
	got := map[string]bool{}
	var free []string // source columns that map to nothing in the schema
	for _, h := range have {
		n := o.ours(h)
		if slices.Contains(schema, n) {
			got[n] = true
		} else {
			free = append(free, h)
		}
	}
	defaulted := map[string]bool{}
	for _, d := range datasets.DefaultedColumns(o.Table) {
		defaulted[d.Column] = true
	}
	var missing []string
	for _, c := range schema {
		if got[c] || defaulted[c] {
			continue
		}
		s := fmt.Sprintf("%q", c)
		if close := datasets.SimilarColumns(c, free); len(close) > 0 {
			s += fmt.Sprintf(" (closest: %q, --map %s=%s)", close[0], close[0], c)
		}
		missing = append(missing, s)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s needs columns the source lacks after the mapping: %s; the source has %s",
			o.Table, strings.Join(missing, ", "), strings.Join(have, ", "))
	}
	return free, nil
}

// appendUnknown adds msg to bad when name is not one of names, with the
// closest of names as a suggestion.
func appendUnknown(bad []string, name string, names []string, msg string) []string {
	if slices.Contains(names, name) {
		return bad
	}
	if s := datasets.SimilarColumns(name, names); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %q?)", s[0])
	}
	return append(bad, msg)
}

// copyTable reads the source as rows of T and writes them to the table;
// with OriginFirst it reads twice, first for the earliest instant.
func copyTable[T any](w *datasets.Writer, files []string, o *TableOptions, res *Result) error {
	scan := func(f func([]T) error) error {
		s, err := datasets.ScanTable[T](files, o.Table, o.Map)
		if err != nil {
			return err
		}
		defer s.Close()
		buf := make([]T, 4096)
		for {
			n, err := s.Read(buf)
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if err := f(buf[:n]); err != nil {
				return err
			}
		}
	}
	var origin int64
	if o.TimeOrigin == OriginFirst {
		found := false
		err := scan(func(rows []T) error {
			if e, ok := datasets.EarliestInstant(rows); ok && (!found || e < origin) {
				origin, found = e, true
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	tw, err := datasets.NewTableWriter[T](w, o.Table, datasets.DefaultTableOptions)
	if err != nil {
		return err
	}
	err = scan(func(rows []T) error {
		datasets.ShiftInstants(rows, origin)
		res.Rows += int64(len(rows))
		return tw.Write(rows)
	})
	if err != nil {
		return err
	}
	res.timeOrigin = origin
	return tw.Close()
}

// tableSource lists the Parquet files of src (a file, or a folder read
// as a table folder), converting a CSV file to one Parquet file at csvOut
// first; sum is the SHA-256 of the source files in order.
func tableSource(src, csvOut string) (files []string, sum string, err error) {
	if strings.EqualFold(filepath.Ext(src), ".csv") {
		if err := csvToParquet(src, csvOut); err != nil {
			return nil, "", err
		}
		sum, err := hashFiles([]string{src})
		return []string{csvOut}, sum, err
	}
	if files, err = datasets.TableFiles(src); err != nil {
		return nil, "", err
	}
	if len(files) == 0 {
		return nil, "", fmt.Errorf("%s: no Parquet files in this folder", src)
	}
	sum, err = hashFiles(files)
	return files, sum, err
}

func hashFiles(files []string) (string, error) {
	h := sha256.New()
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return "", err
		}
		_, err = io.Copy(h, fh)
		fh.Close()
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// sourceColumns is the union of the top-level columns of the files, in
// order of appearance, with the key=value directories of a partitioned
// table folder.
func sourceColumns(files []string) ([]string, error) {
	var have []string
	for _, f := range files {
		pf, fh, err := datasets.OpenParquet(f)
		if err != nil {
			return nil, err
		}
		for _, c := range pf.Root().Columns() {
			if !slices.Contains(have, c.Name()) {
				have = append(have, c.Name())
			}
		}
		fh.Close()
		for _, seg := range strings.Split(filepath.ToSlash(filepath.Dir(f)), "/") {
			if k, _, ok := strings.Cut(seg, "="); ok && k != "" && !slices.Contains(have, k) {
				have = append(have, k)
			}
		}
	}
	return have, nil
}

// keepColumns writes the named columns of the files, in order, into one
// Parquet file at path.
func keepColumns(files, names []string, path string) error {
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	defer out.Close()
	var w *parquet.Writer
	var schema *parquet.Schema
	for _, f := range files {
		pf, fh, err := datasets.OpenParquet(f)
		if err != nil {
			return err
		}
		if schema == nil {
			fields := parquet.Group{}
			for _, fld := range pf.Schema().Fields() {
				if slices.Contains(names, fld.Name()) {
					fields[fld.Name()] = fld
				}
			}
			schema = parquet.NewSchema("schema", fields)
			w = parquet.NewWriter(out, schema, parquet.Compression(&parquet.Zstd))
		}
		conv, err := parquet.Convert(schema, pf.Schema())
		for _, rg := range pf.RowGroups() {
			if err != nil {
				break
			}
			_, err = parquet.CopyRows(w, parquet.ConvertRowGroup(rg, conv).Rows())
		}
		fh.Close()
		if err != nil {
			return fmt.Errorf("%s: keeping columns %s: %v", f, strings.Join(names, ", "), err)
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	return out.Sync()
}
