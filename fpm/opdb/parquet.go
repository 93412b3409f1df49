package opdb

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/steplab/steplab/datasets"
)

// columns is one Parquet file read column by column: only the columns a
// table needs, each checked for its type and for nulls. The first failed
// read is kept in err and the reads after it return nil, so that a table
// reads its columns and checks err once.
type columns struct {
	name string // the file, as errors name it
	pf   *parquet.File
	rows int
	err  error
}

func openColumns(fsys fs.FS, name string) (*columns, error) {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, err
	}
	pf, err := datasets.OpenParquetAt(name, bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, err
	}
	return &columns{name: name, pf: pf, rows: int(pf.NumRows())}, nil
}

// has reports whether the file has a column.
func (c *columns) has(col string) bool {
	_, ok := c.pf.Schema().Lookup(col)
	return ok
}

// values reads a whole column, refusing a missing column, one of another
// physical type than kinds, and a null in any row.
func (c *columns) values(col string, what string, kinds ...parquet.Kind) (vals []parquet.Value, err error) {
	leaf, ok := c.pf.Schema().Lookup(col)
	if !ok {
		return nil, fmt.Errorf("%s: no column %q (%s)", c.name, col, what)
	}
	kind := leaf.Node.Type().Kind()
	okKind := false
	for _, k := range kinds {
		okKind = okKind || k == kind
	}
	if !okKind || leaf.MaxRepetitionLevel > 0 {
		return nil, fmt.Errorf("%s: column %q is %v: want %s", c.name, col, leaf.Node.Type(), what)
	}
	defer func() {
		if p := recover(); p != nil {
			vals, err = nil, fmt.Errorf("%s: column %q: corrupt data: %v", c.name, col, p)
		}
	}()
	vals = make([]parquet.Value, 0, c.rows)
	buf := make([]parquet.Value, 1024)
	for _, rg := range c.pf.RowGroups() {
		pages := rg.ColumnChunks()[leaf.ColumnIndex].Pages()
		for {
			p, err := pages.ReadPage()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				pages.Close()
				return nil, fmt.Errorf("%s: column %q: %w", c.name, col, err)
			}
			r := p.Values()
			for {
				n, err := r.ReadValues(buf)
				for _, v := range buf[:n] {
					if v.IsNull() {
						return nil, fmt.Errorf("%s: column %q row %d is null: every row needs a value", c.name, col, len(vals))
					}
					vals = append(vals, v.Clone())
				}
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					pages.Close()
					return nil, fmt.Errorf("%s: column %q: %w", c.name, col, err)
				}
			}
			parquet.Release(p)
		}
		pages.Close()
	}
	if len(vals) != c.rows {
		return nil, fmt.Errorf("%s: column %q has %d values for %d rows", c.name, col, len(vals), c.rows)
	}
	return vals, nil
}

// column reads a whole column of one of kinds and converts its values
// (nil after an earlier failed read, or on failing: see c.err).
func column[T any](c *columns, col, what string, conv func(parquet.Value) T, kinds ...parquet.Kind) []T {
	if c.err != nil {
		return nil
	}
	vals, err := c.values(col, what, kinds...)
	if err != nil {
		c.err = err
		return nil
	}
	out := make([]T, len(vals))
	for i, v := range vals {
		out[i] = conv(v)
	}
	return out
}

// fail records a bad value of a column (the first error wins).
func (c *columns) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%s: "+format, append([]any{c.name}, args...)...)
	}
}

// ints reads an integer column.
func (c *columns) ints(col string) []int64 {
	return column(c, col, "an integer", func(v parquet.Value) int64 {
		if v.Kind() == parquet.Int32 {
			return int64(v.Int32())
		}
		return v.Int64()
	}, parquet.Int64, parquet.Int32)
}

// floats reads a floating-point column.
// A DECIMAL stored in 32 or 64 bits is read at its scale: DuckDB writes
// a column of literals such as 0.02 as DECIMAL(3,2).
func (c *columns) floats(col string) []float64 {
	if leaf, ok := c.pf.Schema().Lookup(col); ok {
		if lt := leaf.Node.Type().LogicalType(); lt != nil {
			if d, ok := lt.Value.(*format.DecimalType); ok {
				return c.decimals(col, d.Scale)
			}
		}
	}
	return column(c, col, "a float", func(v parquet.Value) float64 {
		if v.Kind() == parquet.Float {
			return float64(v.Float())
		}
		return v.Double()
	}, parquet.Double, parquet.Float)
}

// decimals reads a DECIMAL column stored in 32 or 64 bits at its scale.
func (c *columns) decimals(col string, scale int32) []float64 {
	unit := math.Pow10(-int(scale))
	return column(c, col, "a float or a 32/64-bit decimal", func(v parquet.Value) float64 {
		if v.Kind() == parquet.Int32 {
			return float64(v.Int32()) * unit
		}
		return float64(v.Int64()) * unit
	}, parquet.Int32, parquet.Int64)
}

// strings reads a string column.
func (c *columns) strings(col string) []string {
	return column(c, col, "a string", func(v parquet.Value) string { return string(v.ByteArray()) }, parquet.ByteArray)
}

// stringsOr reads an optional string column, "" in every row when absent.
func (c *columns) stringsOr(col string) []string {
	if c.has(col) {
		return c.strings(col)
	}
	return make([]string, c.rows)
}

// intsOr reads an optional integer column, def in every row when absent.
func (c *columns) intsOr(col string, def int64) []int64 {
	if c.has(col) {
		return c.ints(col)
	}
	out := make([]int64, c.rows)
	for i := range out {
		out[i] = def
	}
	return out
}
