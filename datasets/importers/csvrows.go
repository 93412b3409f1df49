package importers

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"strings"
)

// csvRows reads a CSV whose first row names the columns: the formats look
// their fields up by name, so column order and extra columns do not matter.
// A UTF-8 byte-order mark and blank lines are skipped; errors name the file
// and line.
type csvRows struct {
	name   string
	cr     *csv.Reader
	header []string
	col    map[string]int
	rec    []string
	line   int   // of the current row
	err    error // that stopped scan
}

// newCSVRows reads the header row of r (file name for errors) and checks
// that it names every required column.
func newCSVRows(name string, r io.Reader, required ...string) (*csvRows, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	if b, err := br.Peek(3); err == nil && bytes.Equal(b, []byte("\xef\xbb\xbf")) {
		_, _ = br.Discard(3)
	}
	c := &csvRows{name: name, cr: csv.NewReader(br), col: map[string]int{}}
	c.cr.FieldsPerRecord = -1
	c.cr.ReuseRecord = true
	c.cr.TrimLeadingSpace = true
	header, err := c.cr.Read()
	if err == io.EOF {
		return nil, fmt.Errorf("%s: empty file (want a header with %s)", name, strings.Join(required, ","))
	}
	if err != nil {
		return nil, csvError(name, err)
	}
	c.header = append([]string(nil), header...)
	for i, h := range c.header {
		c.col[strings.TrimSpace(h)] = i
	}
	for _, want := range required {
		if !c.has(want) {
			return nil, lineError(name, 1, "header has no %s column (got %q; want %s)", want, strings.Join(c.header, ","), strings.Join(required, ","))
		}
	}
	return c, nil
}

// scan reads the next non-blank row: false at the end or on an error,
// which err then holds (bufio.Scanner's pattern).
func (c *csvRows) scan() bool {
	for c.err == nil {
		rec, err := c.cr.Read()
		if err == io.EOF {
			return false
		}
		if err != nil {
			c.err = csvError(c.name, err)
			return false
		}
		c.rec = rec
		c.line, _ = c.cr.FieldPos(0)
		if len(rec) > 1 || strings.TrimSpace(rec[0]) != "" {
			return true
		}
	}
	return false
}

func (c *csvRows) has(col string) bool { _, ok := c.col[col]; return ok }

// field is the trimmed value of col in the current row, false when the
// header has no such column; a row too short to hold it is an error.
func (c *csvRows) field(col string) (string, bool, error) {
	i, ok := c.col[col]
	if !ok {
		return "", false, nil
	}
	if i >= len(c.rec) {
		return "", false, c.errorf("%d fields, want at least %d", len(c.rec), i+1)
	}
	return strings.TrimSpace(c.rec[i]), true, nil
}

// optional is the value of col in the current row, empty where the header
// has no such column or the row is too short (a format's defaults).
func (c *csvRows) optional(col string) string {
	v, _, _ := c.field(col)
	return v
}

// errorf is an error located at the current row.
func (c *csvRows) errorf(format string, args ...any) error {
	return lineError(c.name, c.line, format, args...)
}
