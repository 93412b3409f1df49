package importers

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"
)

// A CSV table becomes a typed Parquet file, so that it reads through the
// same path as a Parquet table (the datasets reader's conversions,
// defaults and errors). Each column gets the narrowest type every cell
// fits: integer (also "3.0"), float, boolean (true/false), date-time
// (RFC 3339, or "2006-01-02 15:04:05.999999999", read as UTC) as a
// TIMESTAMP, else string. An empty cell is a null, which reads as the
// column's default.

type csvType uint8

const (
	csvInt csvType = iota
	csvFloat
	csvBool
	csvTime
	csvString
)

// csvTimeLayouts are the date-time layouts a CSV cell may use.
var csvTimeLayouts = []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999", "2006-01-02T15:04:05.999999999"}

func parseCSVTime(s string) (int64, bool) {
	for _, l := range csvTimeLayouts {
		if t, err := time.Parse(l, s); err == nil {
			if y := t.Year(); y < 1678 || y > 2261 { // the int64 nanosecond range
				return 0, false
			}
			return t.UnixNano(), true
		}
	}
	return 0, false
}

func csvInteger(s string) (int64, bool) {
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		return v, true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int64(f), true
}

// fits reports whether cell s (not empty) is of type t (csvString fits
// every cell).
func (t csvType) fits(s string) bool {
	switch t {
	case csvInt:
		_, ok := csvInteger(s)
		return ok
	case csvFloat:
		_, err := strconv.ParseFloat(s, 64)
		return err == nil
	case csvBool:
		_, err := strconv.ParseBool(s)
		return err == nil && !strings.ContainsAny(s, "01")
	case csvTime:
		_, ok := parseCSVTime(s)
		return ok
	}
	return true
}

func (t csvType) node() parquet.Node {
	switch t {
	case csvInt:
		return parquet.Optional(parquet.Int(64))
	case csvFloat:
		return parquet.Optional(parquet.Leaf(parquet.DoubleType))
	case csvBool:
		return parquet.Optional(parquet.Leaf(parquet.BooleanType))
	case csvTime:
		return parquet.Optional(parquet.Timestamp(parquet.Nanosecond))
	}
	return parquet.Optional(parquet.String())
}

// value is cell s as a Parquet value of type t.
func (t csvType) value(s string) parquet.Value {
	switch t {
	case csvInt:
		v, _ := csvInteger(s)
		return parquet.Int64Value(v)
	case csvFloat:
		v, _ := strconv.ParseFloat(s, 64)
		return parquet.DoubleValue(v)
	case csvBool:
		v, _ := strconv.ParseBool(s)
		return parquet.BooleanValue(v)
	case csvTime:
		v, _ := parseCSVTime(s)
		return parquet.Int64Value(v)
	}
	return parquet.ByteArrayValue([]byte(s))
}

// csvToParquet converts the CSV file src to a Parquet file at out.
func csvToParquet(src, out string) error {
	open := func() (io.ReadCloser, error) { return os.Open(src) }
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	err = convertCSV(open, src, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// convertCSV reads the CSV twice through open: once to type its columns,
// once to write them to w as Parquet. Errors name the file and line.
func convertCSV(open func() (io.ReadCloser, error), name string, w io.Writer) error {
	var header []string
	var possible []uint8 // per column, a bit per csvType every cell so far fits
	err := readCSV(open, name, func(line int, rec []string) error {
		if header == nil {
			header = append([]string(nil), rec...)
			seen := map[string]bool{}
			for _, h := range header {
				if h == "" || seen[h] {
					return lineError(name, line, "header: empty or repeated column name %q", h)
				}
				seen[h] = true
			}
			possible = make([]uint8, len(header))
			for i := range possible {
				possible[i] = 1<<(csvString+1) - 1
			}
			return nil
		}
		for i, cell := range rec {
			if cell == "" {
				continue
			}
			for t := csvInt; t < csvString; t++ {
				if possible[i]&(1<<t) != 0 && !t.fits(cell) {
					possible[i] &^= 1 << t
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if header == nil {
		return fmt.Errorf("%s: empty file: a CSV table starts with a header of column names", name)
	}
	types := make([]csvType, len(header))
	fields := parquet.Group{}
	for i, h := range header {
		for possible[i]&(1<<types[i]) == 0 {
			types[i]++ // the narrowest type left; csvString is always left
		}
		fields[h] = types[i].node()
	}
	schema := parquet.NewSchema("csv", fields)
	// The schema orders its columns by name: col[i] is the leaf of header[i].
	col := make([]int, len(header))
	for i, h := range header {
		leaf, _ := schema.Lookup(h)
		col[i] = leaf.ColumnIndex
	}
	pw := parquet.NewWriter(w, schema, parquet.Compression(&parquet.Zstd))
	row := make(parquet.Row, len(header))
	first := true
	err = readCSV(open, name, func(line int, rec []string) error {
		if first {
			first = false
			return nil
		}
		for i, cell := range rec {
			v := parquet.Value{}.Level(0, 0, col[i])
			if cell != "" {
				v = types[i].value(cell).Level(0, 1, col[i])
			}
			row[col[i]] = v
		}
		_, err := pw.WriteRows([]parquet.Row{row})
		return err
	})
	if err != nil {
		return err
	}
	return pw.Close()
}

// readCSV calls f on every record of the CSV, with its line; records must
// have the header's length.
func readCSV(open func() (io.ReadCloser, error), name string, f func(line int, rec []string) error) error {
	rc, err := open()
	if err != nil {
		return err
	}
	defer rc.Close()
	r := csv.NewReader(rc)
	r.ReuseRecord = true
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %v", name, err)
		}
		line, _ := r.FieldPos(0)
		for i := range rec {
			rec[i] = strings.TrimSpace(rec[i])
		}
		if err := f(line, rec); err != nil {
			return err
		}
	}
}
