package datasets

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unsafe"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// Dataset is an opened dataset directory.
type Dataset struct {
	Dir string
	// Manifest is nil for a directory that only holds tables (a table a
	// pandas user wrote); such a directory is read as the current schema.
	Manifest *Manifest
}

// Open opens the dataset at dir, checking its schema version.
func Open(dir string) (*Dataset, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s: not a dataset directory (for a single Parquet file use `steplab inspect`)", dir)
	}
	m, err := ReadManifest(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		m = nil
	case err != nil:
		return nil, err
	}
	d := &Dataset{Dir: dir, Manifest: m}
	if m == nil {
		found := false
		for _, t := range Tables {
			if d.Has(t) {
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("%s: not a dataset: no %s and no table files (%s.parquet, ...)", dir, ManifestFile, TableSteps)
		}
	}
	return d, nil
}

// Has reports whether the dataset holds table.
func (d *Dataset) Has(table string) bool {
	_, err := os.Stat(TableDir(d.Dir, table))
	return err == nil
}

// Parts lists the part files of table in order. A table is either one
// Parquet file <table>.parquet or a directory of part-NNNNNN.parquet files.
// Temporary parts of an interrupted writer are not listed.
func (d *Dataset) Parts(table string) ([]string, error) {
	path := TableDir(d.Dir, table)
	st, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: dataset has no %s table (%s)", d.Dir, table, filepath.Base(path))
		}
		return nil, err
	}
	if !st.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var parts []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".parquet") {
			continue
		}
		parts = append(parts, filepath.Join(path, name))
	}
	sort.Strings(parts)
	return parts, nil
}

// OpenParquet opens one Parquet file, turning every failure into an error
// that names the file and the problem.
func OpenParquet(path string) (*parquet.File, *os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	pf, err := OpenParquetAt(path, f, st.Size())
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if v, ok := pf.Lookup("steplab.schema_version"); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("%s: bad steplab.schema_version %q", path, v)
		}
		if err := CheckSchemaVersion(path, n); err != nil {
			f.Close()
			return nil, nil, err
		}
	}
	return pf, f, nil
}

// OpenParquetAt opens Parquet held by r (size bytes; an embedded or
// in-memory file as well as an open one), turning every failure, panics of
// the decoder included, into an error that names the file.
func OpenParquetAt(name string, r io.ReaderAt, size int64) (*parquet.File, error) {
	if size == 0 {
		return nil, fmt.Errorf("%s: empty file, not Parquet", name)
	}
	if err := checkFraming(r, size); err != nil {
		return nil, fmt.Errorf("%s: not a readable Parquet file (corrupt or truncated): %v", name, err)
	}
	pf, err := openParquetSafe(r, size)
	if err != nil {
		return nil, fmt.Errorf("%s: not a readable Parquet file (corrupt or truncated): %v", name, err)
	}
	return pf, nil
}

// checkFraming checks the magic bytes and the footer length before
// parquet-go allocates a buffer of the length the file claims.
func checkFraming(r io.ReaderAt, size int64) error {
	if size < 12 {
		return fmt.Errorf("%d bytes is too short for Parquet", size)
	}
	var head, tail [8]byte
	if _, err := r.ReadAt(head[:4], 0); err != nil {
		return err
	}
	if _, err := r.ReadAt(tail[:], size-8); err != nil {
		return err
	}
	if string(head[:4]) != "PAR1" {
		return fmt.Errorf("no Parquet magic at the start (%q)", head[:4])
	}
	if string(tail[4:]) != "PAR1" {
		if string(tail[4:]) == "PARE" {
			return errors.New("encrypted Parquet is not supported")
		}
		return fmt.Errorf("no Parquet magic at the end (%q): truncated?", tail[4:])
	}
	if n := int64(binary.LittleEndian.Uint32(tail[:4])); n > size-12 {
		return fmt.Errorf("footer claims %d bytes, the file has %d", n, size)
	}
	return nil
}

func openParquetSafe(r io.ReaderAt, size int64) (pf *parquet.File, err error) {
	defer func() {
		if p := recover(); p != nil {
			pf, err = nil, fmt.Errorf("%v", p)
		}
	}()
	return parquet.OpenFile(r, size, parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
}

// CheckColumns verifies that the file has every column the Go type T
// reads, naming every missing one. Columns with a documented default (see
// DefaultedColumns) may be absent.
func CheckColumns[T any](path string, pf *parquet.File) error {
	var missing []string
	if c, err := codecFor(reflect.TypeFor[T]()); err == nil {
		for i := range c.fields {
			f := &c.fields[i]
			if !f.hasDefault && fileColumn(pf, f.name) == nil {
				missing = append(missing, strconv.Quote(f.name))
			}
		}
	} else {
		defaults := map[string]bool{}
		t := reflect.TypeFor[T]()
		if t.Kind() == reflect.Struct {
			for i := 0; i < t.NumField(); i++ {
				if _, ok := t.Field(i).Tag.Lookup("default"); ok {
					name, _, _ := strings.Cut(t.Field(i).Tag.Get("parquet"), ",")
					defaults[name] = true
				}
			}
		}
		have := pf.Schema()
		for _, col := range parquet.SchemaOf(new(T)).Columns() {
			if defaults[col[0]] {
				continue
			}
			if _, ok := have.Lookup(col...); !ok {
				missing = append(missing, strconv.Quote(strings.Join(col, ".")))
			}
		}
	}
	switch len(missing) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("%s: missing column %s", path, missing[0])
	default:
		return fmt.Errorf("%s: missing columns %s", path, strings.Join(missing, ", "))
	}
}

// fileColumn is the top-level column name of pf, or nil.
func fileColumn(pf *parquet.File, name string) *parquet.Column {
	for _, c := range pf.Root().Columns() {
		if c.Name() == name {
			return c
		}
	}
	return nil
}

// Scanner reads a table as rows of T, part after part. T may be any struct
// whose parquet tags name a subset of the table's columns: only those
// columns are read (column projection). Columns with a default (a `default`
// tag) may be absent from a file and read as their default.
//
// Flat row types (int32, int64, float64, bool, string and []int64 list
// fields) are decoded column by column straight into the rows; others go
// through parquet-go's generic reader. String values of one page share one
// allocation, and dictionary-encoded strings share one string per
// dictionary entry.
type Scanner[T any] struct {
	parts []string
	next  int
	path  string
	f     *os.File

	// generic path
	r *parquet.GenericReader[T]

	// columnar path
	codec  *rowCodec
	pf     *parquet.File
	size   int64
	cols   []*colReader
	rg     int
	rgLeft int64

	err error
}

// Scan starts reading table from d.
func Scan[T any](d *Dataset, table string) (*Scanner[T], error) {
	parts, err := d.Parts(table)
	if err != nil {
		return nil, err
	}
	return ScanFiles[T](parts), nil
}

// ScanFiles reads the given Parquet files as one table.
func ScanFiles[T any](parts []string) *Scanner[T] {
	c, _ := codecFor(reflect.TypeFor[T]())
	return &Scanner[T]{parts: parts, codec: c}
}

// Read fills buf and returns the number of rows read; io.EOF after the
// last. Unlike parquet-go's readers, Read never returns rows together with
// io.EOF. Errors name the file; after an error Read keeps returning it.
func (s *Scanner[T]) Read(buf []T) (n int, err error) {
	if s.err != nil {
		return 0, s.err
	}
	if len(buf) == 0 {
		return 0, nil
	}
	for {
		if s.f == nil {
			if s.next >= len(s.parts) {
				return 0, io.EOF
			}
			if err := s.openNext(); err != nil {
				s.err = err
				return 0, err
			}
		}
		if s.pf != nil {
			n, err = s.readColumns(buf)
		} else {
			n, err = s.readSafe(buf)
			if errors.Is(err, io.EOF) {
				err = nil
				if n == 0 {
					s.closePart()
					continue
				}
			}
		}
		if err != nil {
			s.err = fmt.Errorf("%s: %v", s.path, err)
			s.closePart()
			return 0, s.err
		}
		if n == 0 {
			s.closePart()
			continue
		}
		return n, nil
	}
}

func (s *Scanner[T]) readColumns(buf []T) (n int, err error) {
	for s.rgLeft == 0 {
		groups := s.pf.RowGroups()
		if s.rg >= len(groups) {
			return 0, nil
		}
		rg := groups[s.rg]
		s.rg++
		s.rgLeft = rg.NumRows()
		if s.rgLeft < 0 {
			return 0, fmt.Errorf("row group %d: negative row count", s.rg-1)
		}
		if s.rgLeft == 0 {
			continue
		}
		chunks := rg.ColumnChunks()
		md := s.pf.Metadata()
		for _, c := range s.cols {
			if c.missing {
				continue
			}
			if s.rg-1 >= len(md.RowGroups) || c.leaf >= len(md.RowGroups[s.rg-1].Columns) {
				return 0, fmt.Errorf("row group %d: no metadata for column %q", s.rg-1, c.name)
			}
			cmd := &md.RowGroups[s.rg-1].Columns[c.leaf].MetaData
			if err := checkChunk(s.f, s.size, cmd, s.rgLeft, c.maxRep > 0); err != nil {
				return 0, fmt.Errorf("row group %d, column %q: corrupt column chunk: %v", s.rg-1, c.name, err)
			}
		}
		for _, c := range s.cols {
			if err := c.startRowGroup(chunks); err != nil {
				return 0, fmt.Errorf("row group %d: %w", s.rg-1, err)
			}
		}
	}
	k := int(min(int64(len(buf)), s.rgLeft))
	base := unsafe.Pointer(unsafe.SliceData(buf))
	for _, c := range s.cols {
		if err := c.fillSafe(base, s.codec.size, k); err != nil {
			return 0, err
		}
	}
	s.rgLeft -= int64(k)
	return k, nil
}

func (s *Scanner[T]) readSafe(buf []T) (n int, err error) {
	defer func() {
		if p := recover(); p != nil {
			n, err = 0, fmt.Errorf("corrupt data: %v", p)
		}
	}()
	return s.r.Read(buf)
}

func (s *Scanner[T]) openNext() error {
	path := s.parts[s.next]
	s.next++
	pf, f, err := OpenParquet(path)
	if err != nil {
		return err
	}
	if s.codec != nil {
		cols, err := bindColumns(path, pf, s.codec)
		if err != nil {
			f.Close()
			return err
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return err
		}
		s.path, s.f, s.pf, s.cols, s.rg, s.rgLeft, s.size = path, f, pf, cols, 0, 0, st.Size()
		return nil
	}
	if err := CheckColumns[T](path, pf); err != nil {
		f.Close()
		return err
	}
	r, err := newGenericReaderSafe[T](pf)
	if err != nil {
		f.Close()
		return fmt.Errorf("%s: %v", path, err)
	}
	s.path, s.f, s.r = path, f, r
	return nil
}

func newGenericReaderSafe[T any](pf *parquet.File) (r *parquet.GenericReader[T], err error) {
	defer func() {
		if p := recover(); p != nil {
			r, err = nil, fmt.Errorf("cannot read as %s: %v", reflect.TypeFor[T](), p)
		}
	}()
	return parquet.NewGenericReader[T](pf), nil
}

func (s *Scanner[T]) closePart() {
	if s.r != nil {
		s.r.Close()
		s.r = nil
	}
	for _, c := range s.cols {
		c.close()
	}
	s.cols, s.pf = nil, nil
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
}

// Close releases the open part.
func (s *Scanner[T]) Close() error {
	s.closePart()
	s.next = len(s.parts)
	return nil
}

// All returns an iterator over the remaining rows, for range loops:
//
//	for row, err := range s.All() { ... }
//
// The row pointer is valid until the next iteration. An error ends the
// sequence.
func (s *Scanner[T]) All() iter.Seq2[*T, error] {
	return func(yield func(*T, error) bool) {
		buf := make([]T, 1024)
		for {
			n, err := s.Read(buf)
			if err == io.EOF {
				return
			}
			if err != nil {
				yield(nil, err)
				return
			}
			for i := range buf[:n] {
				if !yield(&buf[i], nil) {
					return
				}
			}
		}
	}
}

// ReadAll reads a whole table into memory. Prefer Scan for large tables.
func ReadAll[T any](d *Dataset, table string) ([]T, error) {
	s, err := Scan[T](d, table)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	var out []T
	buf := make([]T, 4096)
	for {
		n, err := s.Read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// ---- columnar reader ------------------------------------------------------

// colReader decodes one column of a file into one field of the rows.
type colReader struct {
	f       *codecField
	missing bool // absent from the file: filled with the field's default
	name    string
	leaf    int
	phys    parquet.Kind
	maxDef  byte
	maxRep  byte
	nullEl  int // definition level of a null list element; -1 if none

	pages parquet.Pages
	page  parquet.Page

	// the current page, converted to the field's Go type
	n, pos, vpos int
	defs, reps   []byte
	i64          []int64
	i32          []int32
	f64          []float64
	bools        []bool
	strs         []string

	// scratch for conversions
	sI64  []int64
	sI32  []int32
	sF64  []float64
	sBool []bool
	sStr  []string

	// decoded dictionary of the column chunk
	dict     parquet.Dictionary
	dictI64  []int64
	dictI32  []int32
	dictF64  []float64
	dictBool []bool
	dictStr  []string
}

// bindColumns maps the fields of c onto the columns of pf, checking types.
func bindColumns(path string, pf *parquet.File, c *rowCodec) ([]*colReader, error) {
	cols := make([]*colReader, 0, len(c.fields))
	var missing []string
	for i := range c.fields {
		f := &c.fields[i]
		cr := &colReader{f: f, name: f.name}
		col := fileColumn(pf, f.name)
		if col == nil {
			if !f.hasDefault {
				missing = append(missing, strconv.Quote(f.name))
			}
			cr.missing = true
			cols = append(cols, cr)
			continue
		}
		leaf := col
		if f.kind == kindInt64List {
			for !leaf.Leaf() {
				kids := leaf.Columns()
				if len(kids) != 1 {
					return nil, fmt.Errorf("%s: column %q is not a list of integers (steplab reads it as %s)", path, f.name, f.kind)
				}
				leaf = kids[0]
			}
			if leaf.MaxRepetitionLevel() != 1 {
				return nil, fmt.Errorf("%s: column %q is not a list of integers (steplab reads it as %s)", path, f.name, f.kind)
			}
		} else if !col.Leaf() || col.MaxRepetitionLevel() != 0 {
			return nil, fmt.Errorf("%s: column %q is nested or repeated, steplab reads it as %s", path, f.name, f.kind)
		}
		cr.leaf = leaf.Index()
		cr.phys = leaf.Type().Kind()
		cr.maxDef = byte(leaf.MaxDefinitionLevel())
		cr.maxRep = byte(leaf.MaxRepetitionLevel())
		cr.nullEl = -1
		if f.kind == kindInt64List && leaf.Optional() {
			cr.nullEl = int(cr.maxDef) - 1
		}
		ok := false
		switch f.kind {
		case kindInt64, kindInt64List:
			ok = cr.phys == parquet.Int64 || cr.phys == parquet.Int32
		case kindInt32:
			ok = cr.phys == parquet.Int32
		case kindFloat64:
			ok = cr.phys == parquet.Double || cr.phys == parquet.Float
		case kindBool:
			ok = cr.phys == parquet.Boolean
		case kindString:
			ok = cr.phys == parquet.ByteArray
		}
		if !ok {
			return nil, fmt.Errorf("%s: column %q has type %s, steplab reads it as %s", path, f.name, physName(cr.phys), f.kind)
		}
		cols = append(cols, cr)
	}
	switch len(missing) {
	case 0:
		return cols, nil
	case 1:
		return nil, fmt.Errorf("%s: missing column %s", path, missing[0])
	default:
		return nil, fmt.Errorf("%s: missing columns %s", path, strings.Join(missing, ", "))
	}
}

// physName names a physical type; a byte array is what steplab strings are.
func physName(k parquet.Kind) string {
	if k == parquet.ByteArray {
		return "BYTE_ARRAY (string)"
	}
	return k.String()
}

func (c *colReader) startRowGroup(chunks []parquet.ColumnChunk) error {
	c.close()
	if c.missing {
		return nil
	}
	if c.leaf >= len(chunks) {
		return fmt.Errorf("column %q: no column chunk", c.name)
	}
	c.pages = chunks[c.leaf].Pages()
	c.dict = nil
	return nil
}

func (c *colReader) close() {
	if c.page != nil {
		parquet.Release(c.page)
		c.page = nil
	}
	if c.pages != nil {
		c.pages.Close()
		c.pages = nil
	}
	c.n, c.pos, c.vpos = 0, 0, 0
}

// nextPage loads the next page of the chunk; io.EOF at its end.
func (c *colReader) nextPage() error {
	if c.page != nil {
		parquet.Release(c.page)
		c.page = nil
	}
	c.n, c.pos, c.vpos = 0, 0, 0
	for {
		p, err := c.pages.ReadPage()
		if err != nil {
			return err
		}
		if p.NumValues() == 0 {
			parquet.Release(p)
			continue
		}
		c.page = p
		return c.decodePage(p)
	}
}

func (c *colReader) decodePage(p parquet.Page) error {
	c.n = int(p.NumValues())
	c.defs, c.reps = nil, nil
	if c.maxDef > 0 {
		c.defs = p.DefinitionLevels()
		if len(c.defs) != c.n {
			return fmt.Errorf("column %q: %d definition levels for %d values", c.name, len(c.defs), c.n)
		}
	}
	if c.maxRep > 0 {
		c.reps = p.RepetitionLevels()
		if len(c.reps) != c.n {
			return fmt.Errorf("column %q: %d repetition levels for %d values", c.name, len(c.reps), c.n)
		}
	}
	data := p.Data()
	if d := p.Dictionary(); d != nil {
		return c.decodeIndexed(d, data.Int32())
	}
	switch c.f.kind {
	case kindInt64, kindInt64List:
		if c.phys == parquet.Int32 {
			c.i64 = widen(c.sI64[:0], data.Int32())
			c.sI64 = c.i64
		} else {
			c.i64 = data.Int64()
		}
	case kindInt32:
		c.i32 = data.Int32()
	case kindFloat64:
		if c.phys == parquet.Float {
			c.f64 = c.sF64[:0]
			for _, v := range data.Float() {
				c.f64 = append(c.f64, float64(v))
			}
			c.sF64 = c.f64
		} else {
			c.f64 = data.Double()
		}
	case kindBool:
		nv := c.n - countNulls(c.defs, c.maxDef)
		bits := data.Boolean()
		if len(bits)*8 < nv {
			return fmt.Errorf("column %q: %d bits for %d values", c.name, len(bits)*8, nv)
		}
		c.bools = slices.Grow(c.sBool[:0], nv)[:nv]
		for i := range c.bools {
			c.bools[i] = bits[i>>3]>>(i&7)&1 != 0
		}
		c.sBool = c.bools
	case kindString:
		b, offs := data.ByteArray()
		if len(offs) == 0 {
			c.strs = c.sStr[:0]
			break
		}
		all := string(b) // one allocation for the page
		c.strs = slices.Grow(c.sStr[:0], len(offs)-1)[:len(offs)-1]
		for i := range c.strs {
			lo, hi := offs[i], offs[i+1]
			if lo > hi || int(hi) > len(all) {
				return fmt.Errorf("column %q: bad string offsets", c.name)
			}
			c.strs[i] = all[lo:hi]
		}
		c.sStr = c.strs
	}
	return nil
}

func widen(dst []int64, src []int32) []int64 {
	dst = slices.Grow(dst[:0], len(src))[:len(src)]
	for i, v := range src {
		dst[i] = int64(v)
	}
	return dst
}

// dictLookup returns dict[i] for each index, reusing dst's storage; the
// indexes must already be checked against len(dict).
func dictLookup[T any](dst, dict []T, idx []int32) []T {
	dst = slices.Grow(dst[:0], len(idx))[:len(idx)]
	for j, i := range idx {
		dst[j] = dict[i]
	}
	return dst
}

func countNulls(defs []byte, maxDef byte) int {
	n := 0
	for _, d := range defs {
		if d != maxDef {
			n++
		}
	}
	return n
}

// decodeIndexed looks dictionary indexes up, decoding the dictionary once
// per column chunk.
func (c *colReader) decodeIndexed(d parquet.Dictionary, idx []int32) error {
	if d != c.dict {
		c.dict = d
		data := d.Page().Data()
		c.dictI64, c.dictI32, c.dictF64, c.dictBool, c.dictStr = nil, nil, nil, nil, nil
		switch c.f.kind {
		case kindInt64, kindInt64List:
			if c.phys == parquet.Int32 {
				c.dictI64 = widen(nil, data.Int32())
			} else {
				c.dictI64 = slices.Clone(data.Int64())
			}
		case kindInt32:
			c.dictI32 = slices.Clone(data.Int32())
		case kindFloat64:
			if c.phys == parquet.Float {
				for _, v := range data.Float() {
					c.dictF64 = append(c.dictF64, float64(v))
				}
			} else {
				c.dictF64 = slices.Clone(data.Double())
			}
		case kindString:
			b, offs := data.ByteArray()
			all := string(b)
			for i := 0; i+1 < len(offs); i++ {
				lo, hi := offs[i], offs[i+1]
				if lo > hi || int(hi) > len(all) {
					return fmt.Errorf("column %q: bad dictionary offsets", c.name)
				}
				c.dictStr = append(c.dictStr, all[lo:hi])
			}
		default:
			return fmt.Errorf("column %q: dictionary encoding not supported for %s", c.name, c.f.kind)
		}
	}
	size := 0
	switch {
	case c.dictI64 != nil:
		size = len(c.dictI64)
	case c.dictI32 != nil:
		size = len(c.dictI32)
	case c.dictF64 != nil:
		size = len(c.dictF64)
	case c.dictStr != nil:
		size = len(c.dictStr)
	}
	for _, i := range idx {
		if uint32(i) >= uint32(size) {
			return fmt.Errorf("column %q: dictionary index %d out of range (%d entries)", c.name, i, size)
		}
	}
	switch c.f.kind {
	case kindInt64, kindInt64List:
		c.i64 = dictLookup(c.sI64, c.dictI64, idx)
		c.sI64 = c.i64
	case kindInt32:
		c.i32 = dictLookup(c.sI32, c.dictI32, idx)
		c.sI32 = c.i32
	case kindFloat64:
		c.f64 = dictLookup(c.sF64, c.dictF64, idx)
		c.sF64 = c.f64
	case kindString:
		c.strs = dictLookup(c.sStr, c.dictStr, idx)
		c.sStr = c.strs
	}
	return nil
}

func (c *colReader) valueCount() int {
	switch c.f.kind {
	case kindInt64, kindInt64List:
		return len(c.i64)
	case kindInt32:
		return len(c.i32)
	case kindFloat64:
		return len(c.f64)
	case kindBool:
		return len(c.bools)
	case kindString:
		return len(c.strs)
	}
	return 0
}

func (c *colReader) fillSafe(base unsafe.Pointer, stride uintptr, n int) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("column %q: corrupt data: %v", c.name, p)
		}
	}()
	if c.missing {
		c.f.fillDefault(base, stride, n)
		return nil
	}
	if c.f.kind == kindInt64List {
		return c.fillList(base, stride, n)
	}
	return c.fill(base, stride, n)
}

// fill sets the field of n rows from the column's next n values.
func (c *colReader) fill(base unsafe.Pointer, stride uintptr, n int) error {
	p := unsafe.Add(base, c.f.offset)
	for done := 0; done < n; {
		if c.pos >= c.n {
			if err := c.nextPage(); err != nil {
				if err == io.EOF {
					return fmt.Errorf("column %q: fewer values than rows (corrupt or truncated)", c.name)
				}
				return fmt.Errorf("column %q: corrupt page: %v", c.name, err)
			}
		}
		k := min(n-done, c.n-c.pos)
		q := unsafe.Add(p, uintptr(done)*stride)
		if c.defs == nil {
			if c.vpos+k > c.valueCount() {
				return fmt.Errorf("column %q: page holds fewer values than it declares", c.name)
			}
			c.copyValues(q, stride, c.vpos, k)
			c.vpos += k
		} else {
			defs := c.defs[c.pos : c.pos+k]
			for i, d := range defs {
				r := unsafe.Add(q, uintptr(i)*stride)
				if d == c.maxDef {
					if c.vpos >= c.valueCount() {
						return fmt.Errorf("column %q: page holds fewer values than it declares", c.name)
					}
					c.copyValues(r, stride, c.vpos, 1)
					c.vpos++
				} else {
					c.f.fillDefault(unsafe.Add(r, -c.f.offset), stride, 1)
				}
			}
		}
		c.pos += k
		done += k
	}
	return nil
}

func (c *colReader) copyValues(q unsafe.Pointer, stride uintptr, from, k int) {
	switch c.f.kind {
	case kindInt64:
		for i, v := range c.i64[from : from+k] {
			*(*int64)(unsafe.Add(q, uintptr(i)*stride)) = v
		}
	case kindInt32:
		for i, v := range c.i32[from : from+k] {
			*(*int32)(unsafe.Add(q, uintptr(i)*stride)) = v
		}
	case kindFloat64:
		for i, v := range c.f64[from : from+k] {
			*(*float64)(unsafe.Add(q, uintptr(i)*stride)) = v
		}
	case kindBool:
		for i, v := range c.bools[from : from+k] {
			*(*bool)(unsafe.Add(q, uintptr(i)*stride)) = v
		}
	case kindString:
		for i, v := range c.strs[from : from+k] {
			*(*string)(unsafe.Add(q, uintptr(i)*stride)) = v
		}
	}
}

// fillList reads n list rows. Each row's values go into one backing array
// shared by the batch (capacity-limited, so appending to a row's slice
// never overwrites the next row).
func (c *colReader) fillList(base unsafe.Pointer, stride uintptr, n int) error {
	p := unsafe.Add(base, c.f.offset)
	var backing []int64
	for r := 0; r < n; r++ {
		if c.pos >= c.n {
			if err := c.nextPage(); err != nil {
				if err == io.EOF {
					return fmt.Errorf("column %q: fewer values than rows (corrupt or truncated)", c.name)
				}
				return fmt.Errorf("column %q: corrupt page: %v", c.name, err)
			}
		}
		if c.reps[c.pos] != 0 {
			return fmt.Errorf("column %q: list row does not start at repetition level 0", c.name)
		}
		start := len(backing)
		first := true
		for {
			if c.pos >= c.n {
				err := c.nextPage()
				if err == io.EOF {
					break
				}
				if err != nil {
					return fmt.Errorf("column %q: corrupt page: %v", c.name, err)
				}
			}
			if !first && c.reps[c.pos] == 0 {
				break
			}
			first = false
			d := c.defs[c.pos]
			switch {
			case d == c.maxDef:
				if c.vpos >= len(c.i64) {
					return fmt.Errorf("column %q: page holds fewer values than it declares", c.name)
				}
				if backing == nil {
					backing = make([]int64, 0, 16*n)
				}
				backing = append(backing, c.i64[c.vpos])
				c.vpos++
			case int(d) == c.nullEl:
				return fmt.Errorf("column %q: null list element", c.name)
			}
			c.pos++
		}
		var row []int64
		if len(backing) > start {
			row = backing[start:len(backing):len(backing)]
		}
		*(*[]int64)(unsafe.Add(p, uintptr(r)*stride)) = row
	}
	return nil
}

// ---- page header checks ------------------------------------------------------

// Limits on what one page of a column chunk may claim. parquet-go allocates
// the sizes a page header claims before it can tell they are wrong, so a
// corrupt header could make it allocate gigabytes; checkChunk refuses such
// headers first.
const (
	maxPageBytes  = 256 << 20
	maxPageValues = 64 << 20
)

// checkChunk walks the page headers of one column chunk, checking that
// every page lies inside the chunk and inside the file, that its sizes and
// value count are plausible, and that a zstd frame does not claim more
// bytes than the page header.
func checkChunk(r io.ReaderAt, fileSize int64, md *format.ColumnMetaData, rgRows int64, repeated bool) error {
	start := md.DataPageOffset
	if md.DictionaryPageOffset > 0 && md.DictionaryPageOffset < start {
		start = md.DictionaryPageOffset
	}
	end := start + md.TotalCompressedSize
	if start < 4 || md.TotalCompressedSize < 0 || end > fileSize-8 || end < start {
		return fmt.Errorf("column chunk [%d, %d) lies outside the file (%d bytes)", start, end, fileSize)
	}
	var buf [1024]byte
	var values int64
	proto := new(thrift.CompactProtocol)
	for pos := start; pos < end; {
		n, err := r.ReadAt(buf[:min(int64(len(buf)), end-pos)], pos)
		if n == 0 && err != nil {
			return fmt.Errorf("page header at %d: %v", pos, err)
		}
		br := bytes.NewReader(buf[:n])
		rd := proto.NewReader(br)
		var h format.PageHeader
		if err := thrift.NewDecoder(rd).Decode(&h); err != nil {
			return fmt.Errorf("page header at %d: %v", pos, err)
		}
		hl := int64(n - br.Len()) // the reader does not buffer
		body := pos + hl
		switch {
		case h.CompressedPageSize < 0 || body+int64(h.CompressedPageSize) > end:
			return fmt.Errorf("page at %d: %d bytes run past the column chunk", pos, h.CompressedPageSize)
		case h.UncompressedPageSize < 0 || h.UncompressedPageSize > maxPageBytes:
			return fmt.Errorf("page at %d: implausible uncompressed size %d", pos, h.UncompressedPageSize)
		}
		var nv int32
		switch {
		case h.DataPageHeader.Valid:
			nv = h.DataPageHeader.V.NumValues
		case h.DataPageHeaderV2.Valid:
			nv = h.DataPageHeaderV2.V.NumValues
		case h.DictionaryPageHeader.Valid:
			nv = h.DictionaryPageHeader.V.NumValues
		}
		if nv < 0 || nv > maxPageValues || (!repeated && !h.DictionaryPageHeader.Valid && int64(nv) > rgRows) {
			return fmt.Errorf("page at %d: implausible value count %d", pos, nv)
		}
		if !h.DictionaryPageHeader.Valid {
			values += int64(nv)
		}
		if md.Codec == format.Zstd && h.CompressedPageSize >= 6 {
			var fh [14]byte
			k, _ := r.ReadAt(fh[:min(int64(len(fh)), int64(h.CompressedPageSize))], body)
			if fcs, ok := zstdContentSize(fh[:k]); ok && fcs > uint64(h.UncompressedPageSize) {
				return fmt.Errorf("page at %d: zstd frame claims %d bytes, page header %d", pos, fcs, h.UncompressedPageSize)
			}
		}
		pos = body + int64(h.CompressedPageSize)
	}
	if !repeated && values != rgRows {
		return fmt.Errorf("column chunk holds %d values for %d rows", values, rgRows)
	}
	return nil
}

// zstdContentSize reads the frame content size of a zstd frame header.
func zstdContentSize(b []byte) (uint64, bool) {
	if len(b) < 6 || b[0] != 0x28 || b[1] != 0xB5 || b[2] != 0x2F || b[3] != 0xFD {
		return 0, false
	}
	fhd := b[4]
	single := fhd&0x20 != 0
	p := 5
	if !single {
		p++ // window descriptor
	}
	p += []int{0, 1, 2, 4}[fhd&3] // dictionary id
	var size int
	switch fhd >> 6 {
	case 0:
		if !single {
			return 0, false
		}
		size = 1
	case 1:
		size = 2
	case 2:
		size = 4
	case 3:
		size = 8
	}
	if p+size > len(b) {
		return 0, false
	}
	var v uint64
	for i := size - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[p+i])
	}
	if size == 2 {
		v += 256
	}
	return v, true
}
