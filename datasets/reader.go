package datasets

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"iter"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// Dataset is an opened dataset directory.
type Dataset struct {
	Dir      string
	Manifest *Manifest
	// Assumptions lists, one line each, what Open filled in for a minimal
	// manifest (no status: complete; no table list: the tables on disk).
	// validate and inspect print them as warnings.
	Assumptions []string

	listedMu sync.Mutex
	listed   map[string]map[string]int64 // listedRows, per table
}

// ErrNoManifest is wrapped by Open's error for a directory of tables
// without a manifest.json.
var ErrNoManifest = errors.New("no " + ManifestFile)

// Open opens the dataset at dir, checking its schema version. A directory
// of Parquet tables without a manifest is refused with an error that says
// how to make one.
func Open(dir string) (*Dataset, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s: not a dataset directory: %s", dir, FileHint(dir))
	}
	d := &Dataset{Dir: dir}
	m, err := ReadManifest(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		var tables []string
		for _, t := range Tables {
			if d.Has(t) {
				tables = append(tables, t)
			}
		}
		if len(tables) == 0 {
			parent := filepath.Dir(filepath.Clean(dir))
			if _, err := os.Stat(filepath.Join(parent, ManifestFile)); err == nil && strings.HasSuffix(filepath.Clean(dir), ".parquet") {
				return nil, fmt.Errorf("%s: a table of the dataset %s: give the dataset's directory, %s", dir, parent, parent)
			}
			return nil, fmt.Errorf("%s: not a dataset: no %s and no table files (%s.parquet, ...)", dir, ManifestFile, TableSteps)
		}
		return nil, fmt.Errorf("%s: %w beside the tables (%s): say what ran in a %s with at least "+
			"{\"schema_version\": %d, \"hardware\": {\"gpu_name\": ...}, \"model\": {\"name\": ...}, \"measurement_policy\": {...}}, "+
			"or wrap a table into a new dataset: steplab import table %s -o DATASET --table %s --hardware GPU --model MODEL",
			dir, ErrNoManifest, strings.Join(tables, ", "), ManifestFile, SchemaVersion, TableDir(dir, tables[0]), tables[0])
	case err != nil:
		return nil, err
	}
	d.Manifest = m
	d.assume()
	return d, nil
}

// Has reports whether the dataset holds table.
func (d *Dataset) Has(table string) bool {
	_, err := os.Stat(TableDir(d.Dir, table))
	return err == nil
}

// Parts lists the part files of table in order. A table is either one
// Parquet file <table>.parquet or a directory of Parquet files: the
// part-NNNNNN.parquet files steplab writes, or any *.parquet files, also in
// the key=value subdirectories of a partitioned write (pandas
// partition_cols, DuckDB PARTITION_BY, Spark partitionBy), in the order of
// their paths, partition values in their key's order (comparePartPaths). Hidden files and those starting with "_" (Spark's
// _SUCCESS, _metadata) are not parts; neither are the temporary parts of
// an interrupted writer.
func (d *Dataset) Parts(table string) ([]string, error) {
	path := TableDir(d.Dir, table)
	parts, err := TableFiles(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: dataset has no %s table (%s)", d.Dir, table, filepath.Base(path))
	}
	for _, p := range parts {
		if err := d.checkInside(p); err != nil {
			return nil, err
		}
	}
	return parts, err
}

// TableFiles lists the Parquet files of a table at path, whatever its
// name: path itself for a file, the files Parts would list for a folder.
func TableFiles(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return []string{path}, nil
	}
	parts, _, err := tableFiles(path)
	return parts, err
}

// tableFiles walks a table directory: its parts, and the temporary parts
// of interrupted writers, each list sorted.
func tableFiles(dir string) (parts, temps []string, err error) {
	err = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := e.Name()
		if p == dir {
			return nil
		}
		if e.IsDir() {
			if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".tmp"):
			temps = append(temps, p)
		case strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || !strings.HasSuffix(name, ".parquet"):
		default:
			parts = append(parts, p)
		}
		return nil
	})
	slices.SortFunc(parts, comparePartPaths)
	sort.Strings(temps)
	return parts, temps, err
}

// comparePartPaths orders part paths folder by folder, the values of
// key=value folders in their key's order: integers by value (dp_rank=2
// before dp_rank=10), the rest as strings.
func comparePartPaths(a, b string) int {
	as, bs := strings.Split(filepath.ToSlash(a), "/"), strings.Split(filepath.ToSlash(b), "/")
	for i := range min(len(as), len(bs)) {
		if c := comparePathElem(as[i], bs[i]); c != 0 {
			return c
		}
	}
	return len(as) - len(bs)
}

func comparePathElem(a, b string) int {
	ka, va, oka := strings.Cut(a, "=")
	kb, vb, okb := strings.Cut(b, "=")
	if oka && okb && ka == kb {
		x, errx := strconv.ParseInt(va, 10, 64)
		y, erry := strconv.ParseInt(vb, 10, 64)
		if errx == nil && erry == nil && x != y {
			return cmpOrdered(x, y)
		}
	}
	return strings.Compare(a, b)
}

// PartitionDir is the key=value folders right above a part, as one
// slash-separated path ("" outside a partitioned table). A partitioned
// write keeps the row order within a partition only.
func PartitionDir(path string) string {
	var keys []string
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		if k, _, ok := strings.Cut(filepath.Base(dir), "="); !ok || k == "" {
			break
		}
		keys = append(keys, filepath.Base(dir))
	}
	slices.Reverse(keys)
	return strings.Join(keys, "/")
}

// partitionsOf reads the key=value directories right above a part (the
// values a partitioned write moved out of the files). Hive's name for a
// null, __HIVE_DEFAULT_PARTITION__, is left out (the column then reads its
// default).
func partitionsOf(path string) map[string]string {
	var out map[string]string
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		k, v, ok := strings.Cut(filepath.Base(dir), "=")
		if !ok || k == "" {
			return out
		}
		if u, err := url.PathUnescape(v); err == nil {
			v = u
		}
		if out == nil {
			out = map[string]string{}
		}
		if _, inner := out[k]; !inner && v != "__HIVE_DEFAULT_PARTITION__" {
			out[k] = v
		}
	}
}

// OpenParquet opens one Parquet file, turning every failure into an error
// that names the file and the problem.
func OpenParquet(path string) (*parquet.File, *os.File, error) {
	f, st, err := OpenRegular(path)
	if err != nil {
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
		if h := foreignHint(name); h != "" {
			return nil, fmt.Errorf("%s: not Parquet: %s", name, h)
		}
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
	if n := int64(binary.LittleEndian.Uint32(tail[:4])); n > size-12 || n > MaxFooterBytes {
		return fmt.Errorf("footer claims %d bytes, the file has %d (a reader takes at most %d)", n, size, MaxFooterBytes)
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
// reads, in a type that converts to the field's, naming every missing
// column in one error. Columns with a documented default (see
// DefaultedColumns) may be absent or Null-typed; defaulted lists those that
// are, which readers fill with their defaults.
func CheckColumns[T any](path string, pf *parquet.File) (defaulted []string, err error) {
	if c, err := codecFor(reflect.TypeFor[T]()); err == nil {
		cols, err := bindColumns(path, pf, c, partitionsOf(path), nil)
		if err != nil {
			return nil, err
		}
		for _, cr := range cols {
			if cr.missing && !cr.partition {
				defaulted = append(defaulted, cr.name)
			}
		}
		return defaulted, nil
	}
	var missing []missingColumn
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
		if _, ok := have.Lookup(col...); ok {
			continue
		}
		if defaults[col[0]] {
			defaulted = append(defaulted, col[0])
			continue
		}
		missing = append(missing, missingColumn{name: strings.Join(col, ".")})
	}
	if len(missing) > 0 {
		reads := map[string]bool{}
		for _, col := range parquet.SchemaOf(new(T)).Columns() {
			reads[col[0]] = true
		}
		return nil, missingColumnsError(path, pf, missing, reads)
	}
	return defaulted, nil
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
	names  map[string]string // a field's column name in the files, where not its own
	pf     *parquet.File
	size   int64
	cols   []*colReader
	rg     int
	rgLeft int64

	// read counts the rows of the open part, compared at its end with its
	// footer and, with a dataset (Scan), the manifest.
	read, footer int64
	d            *Dataset
	table        string

	err error
}

// Scan starts reading table from d. A field of T without a default tag
// takes the default the schema declares for its column of table, so a
// projection reads a column a file lacks as the schema's own row type
// would.
func Scan[T any](d *Dataset, table string) (*Scanner[T], error) {
	if err := d.ListedMissing(table); err != nil {
		return nil, err
	}
	parts, err := d.Parts(table)
	if err != nil {
		return nil, err
	}
	s := ScanFiles[T](parts)
	if s.codec != nil {
		s.codec = withTableDefaults(s.codec, table)
	}
	s.d, s.table = d, table
	return s, nil
}

// ScanFiles reads the given Parquet files as one table.
func ScanFiles[T any](parts []string) *Scanner[T] {
	c, _ := codecFor(reflect.TypeFor[T]())
	return &Scanner[T]{parts: parts, codec: c}
}

// ScanTable reads Parquet files written by another tool as rows of the
// schema type T of table: a column of the files named like one of
// rename's keys reads into the field of the column the key maps to
// (theirs=ours, as `steplab import table --map` takes them), and T's
// fields without a default tag take the schema's defaults (as with Scan).
// T must be a flat row type.
func ScanTable[T any](parts []string, table string, rename map[string]string) (*Scanner[T], error) {
	c, err := codecFor(reflect.TypeFor[T]())
	if err != nil {
		return nil, fmt.Errorf("ScanTable: %w", err)
	}
	s := &Scanner[T]{parts: parts, codec: withTableDefaults(c, table)}
	for theirs, ours := range rename {
		if s.names == nil {
			s.names = map[string]string{}
		}
		s.names[ours] = theirs
	}
	return s, nil
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
			}
		}
		if err != nil {
			s.err = fmt.Errorf("%s: %v", s.path, err)
			s.closePart()
			return 0, s.err
		}
		if n == 0 {
			if err := s.endPart(); err != nil {
				s.err = err
				return 0, err
			}
			continue
		}
		s.read += int64(n)
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
		md := s.pf.Metadata()
		for _, c := range s.cols {
			if c.missing {
				continue
			}
			if s.rg-1 >= len(md.RowGroups) || c.leaf >= len(md.RowGroups[s.rg-1].Columns) {
				return 0, fmt.Errorf("row group %d: no metadata for column %q", s.rg-1, c.name)
			}
			cmd := &md.RowGroups[s.rg-1].Columns[c.leaf].MetaData
			pages := chunkCheck{rgRows: s.rgLeft, repeated: c.maxRep > 0, needCRC: writtenBySteplab(s.pf)}
			if err := checkChunk(s.f, s.size, cmd, pages); err != nil {
				return 0, fmt.Errorf("row group %d, column %q: corrupt column chunk: %v", s.rg-1, c.name, err)
			}
		}
		for _, c := range s.cols {
			if !c.missing {
				c.startRowGroup(s.f, &md.RowGroups[s.rg-1].Columns[c.leaf].MetaData)
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
	s.footer = pf.NumRows()
	if s.codec != nil {
		cols, err := bindColumns(path, pf, s.codec, partitionsOf(path), s.names)
		if err != nil {
			f.Close()
			return err
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return err
		}
		s.path, s.f, s.pf, s.cols, s.rg, s.rgLeft, s.size, s.read = path, f, pf, cols, 0, 0, st.Size(), 0
		return nil
	}
	if _, err := CheckColumns[T](path, pf); err != nil {
		f.Close()
		return err
	}
	r, err := newGenericReaderSafe[T](pf)
	if err != nil {
		f.Close()
		return fmt.Errorf("%s: %v", path, err)
	}
	s.path, s.f, s.r, s.read = path, f, r, 0
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

// endPart closes a part read to its end, checking its row count.
func (s *Scanner[T]) endPart() error {
	s.closePart()
	if s.d != nil {
		return s.d.PartRows(s.table, s.path, s.read, s.footer)
	}
	return checkPartRows(s.path, s.read, s.footer, 0, false)
}

func (s *Scanner[T]) closePart() {
	if s.r != nil {
		s.r.Close()
		s.r = nil
	}
	for _, c := range s.cols {
		c.release()
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
	missing bool // absent from the file (or Null-typed): filled with f's default
	// partition: missing, and f is a copy whose default is the value of
	// the key=value directory the part lies in
	partition bool
	name      string
	leaf      int
	conv      conversion
	phys      parquet.Kind
	maxDef    byte
	maxRep    byte
	nullEl    int // definition level of a null list element; -1 if none

	pr *pageReader // from pageReaders; nil when missing

	// the current page: n levels, pos the next level, vpos the next value
	n, pos, vpos int
	defs, reps   []byte
	vals         colValues

	// the column chunk's dictionary, converted to the field's type
	hasDict  bool
	dictVals colValues
}

// bindColumns maps the fields of c onto the columns of pf, planning each
// conversion. A field whose column is absent, or holds nothing but nulls
// (the Null type), reads its default, or the value of a key=value
// directory the part lies in (partitions); without either it is missing,
// and every missing column is named in one error.
func bindColumns(path string, pf *parquet.File, c *rowCodec, partitions, names map[string]string) ([]*colReader, error) {
	cols := make([]*colReader, 0, len(c.fields))
	var missing []missingColumn
	for i := range c.fields {
		f := &c.fields[i]
		cr := &colReader{f: f, name: f.name}
		if n, ok := names[f.name]; ok {
			cr.name = n
		}
		col := fileColumn(pf, cr.name)
		if col != nil && col.Leaf() && col.Type().Kind() < 0 {
			col = nil // the Null type: no values at all
			if !f.hasDefault {
				missing = append(missing, missingColumn{f.name, "Null type: every value is null"})
				continue
			}
		}
		if col == nil {
			if v, ok := partitions[f.name]; ok && f.kind != kindInt64List {
				pc := *f
				if err := pc.setDefault(v); err != nil {
					return nil, fmt.Errorf("%s: partition directory %s=%s: %v", path, f.name, v, err)
				}
				cr.f, cr.partition = &pc, true
			} else if !f.hasDefault {
				missing = append(missing, missingColumn{name: f.name})
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
			return nil, fmt.Errorf("%s: column %q is nested or repeated, steplab reads it as %s", path, f.name, f.expects())
		}
		conv, hint, ok := planConversion(f, leaf.Type())
		if !ok {
			return nil, &ColumnTypeError{Path: path, Column: cr.name, Have: describeType(leaf.Type()), Want: f.expects(), Hint: hint}
		}
		cr.conv, cr.phys = conv, leaf.Type().Kind()
		cr.leaf = leaf.Index()
		cr.maxDef = byte(leaf.MaxDefinitionLevel())
		cr.maxRep = byte(leaf.MaxRepetitionLevel())
		cr.nullEl = -1
		if f.kind == kindInt64List && leaf.Optional() {
			cr.nullEl = int(cr.maxDef) - 1
		}
		cols = append(cols, cr)
	}
	if len(missing) > 0 {
		reads := map[string]bool{}
		for _, f := range c.fields {
			reads[f.name] = true
		}
		return nil, missingColumnsError(path, pf, missing, reads)
	}
	return cols, nil
}

func (c *colReader) startRowGroup(r io.ReaderAt, md *format.ColumnMetaData) {
	c.n, c.pos, c.vpos, c.hasDict = 0, 0, 0, false
	if c.pr == nil {
		c.pr = pageReaders.Get().(*pageReader)
	}
	c.pr.reset(r, md, c.phys, c.maxDef, c.maxRep)
}

// pageReaders keeps the page buffers of closed parts for the next.
var pageReaders = sync.Pool{New: func() any { return new(pageReader) }}

// release gives the page reader back; its values must not be used after.
func (c *colReader) release() {
	if c.pr != nil {
		pageReaders.Put(c.pr)
		c.pr = nil
	}
}

// nextPage loads the next data page of the chunk, converting a dictionary
// page on the way; io.EOF at its end.
func (c *colReader) nextPage() error {
	c.n, c.pos, c.vpos = 0, 0, 0
	for {
		p, err := c.pr.next()
		if err != nil {
			return err
		}
		if p.dict {
			if c.f.kind == kindBool {
				return fmt.Errorf("column %q: dictionary encoding not supported for %s", c.name, c.f.kind)
			}
			if err := c.dictVals.load(c.f, c.conv, p.values, p.n); err != nil {
				return err
			}
			c.dictVals.own()
			c.hasDict = true
			continue
		}
		if p.n == 0 {
			continue
		}
		c.n, c.defs, c.reps = p.n, p.defs, p.reps
		if p.indexed {
			return c.lookup(p.idx)
		}
		return c.vals.load(c.f, c.conv, p.values, p.nv)
	}
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

// lookup resolves a page's dictionary indexes.
func (c *colReader) lookup(idx []int32) error {
	if !c.hasDict {
		return fmt.Errorf("column %q: dictionary-encoded page without a dictionary page", c.name)
	}
	size := c.dictVals.len(c.f.kind)
	for _, i := range idx {
		if uint32(i) >= uint32(size) {
			return fmt.Errorf("column %q: dictionary index %d out of range (%d entries)", c.name, i, size)
		}
	}
	v := &c.vals
	switch c.f.kind {
	case kindInt64, kindInt64List:
		v.i64 = dictLookup(v.sI64, c.dictVals.i64, idx)
		v.sI64 = v.i64
	case kindInt32:
		v.i32 = dictLookup(v.sI32, c.dictVals.i32, idx)
		v.sI32 = v.i32
	case kindFloat64:
		v.f64 = dictLookup(v.sF64, c.dictVals.f64, idx)
		v.sF64 = v.f64
	case kindString:
		v.strs = dictLookup(v.sStr, c.dictVals.strs, idx)
		v.sStr = v.strs
	}
	return nil
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

// valueError is a value that is sound but does not read into its field
// (a DECIMAL with a fraction into an integer): not corruption.
type valueError struct{ error }

// pageError is the error of a page that cannot be loaded.
func pageError(column string, err error) error {
	var ve valueError
	if errors.As(err, &ve) {
		return ve.error
	}
	return fmt.Errorf("column %q: corrupt page: %v", column, err)
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
				return pageError(c.name, err)
			}
		}
		k := min(n-done, c.n-c.pos)
		q := unsafe.Add(p, uintptr(done)*stride)
		if c.defs == nil {
			if c.vpos+k > c.vals.len(c.f.kind) {
				return fmt.Errorf("column %q: page holds fewer values than it declares", c.name)
			}
			c.copyValues(q, stride, c.vpos, k)
			c.vpos += k
		} else {
			defs := c.defs[c.pos : c.pos+k]
			for i, d := range defs {
				r := unsafe.Add(q, uintptr(i)*stride)
				if d == c.maxDef {
					if c.vpos >= c.vals.len(c.f.kind) {
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
		for i, v := range c.vals.i64[from : from+k] {
			*(*int64)(unsafe.Add(q, uintptr(i)*stride)) = v
		}
	case kindInt32:
		for i, v := range c.vals.i32[from : from+k] {
			*(*int32)(unsafe.Add(q, uintptr(i)*stride)) = v
		}
	case kindFloat64:
		for i, v := range c.vals.f64[from : from+k] {
			*(*float64)(unsafe.Add(q, uintptr(i)*stride)) = v
		}
	case kindBool:
		for i, v := range c.vals.bools[from : from+k] {
			*(*bool)(unsafe.Add(q, uintptr(i)*stride)) = v
		}
	case kindString:
		for i, v := range c.vals.strs[from : from+k] {
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
				return pageError(c.name, err)
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
					return pageError(c.name, err)
				}
			}
			if !first && c.reps[c.pos] == 0 {
				break
			}
			first = false
			d := c.defs[c.pos]
			switch {
			case d == c.maxDef:
				if c.vpos >= len(c.vals.i64) {
					return fmt.Errorf("column %q: page holds fewer values than it declares", c.name)
				}
				if backing == nil {
					backing = make([]int64, 0, 16*n)
				}
				backing = append(backing, c.vals.i64[c.vpos])
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
	maxPageBytes   = 256 << 20
	maxPageValues  = 64 << 20
	maxHeaderBytes = 1 << 20
)

// maxDecoded is the most that n bytes of a page compressed with codec can
// decompress to, so that no buffer is sized by a header's claim alone:
// snappy's longest copy is 64 bytes from 3, deflate's best ratio is
// 1032:1, an LZ4 length byte adds at most 255, and a zstd block of 4 bytes
// (a 3-byte header and one RLE byte) holds at most 128 KiB. Brotli has no
// useful bound; its decoder is held to the header's size as it streams.
func maxDecoded(codec format.CompressionCodec, n int64) int64 {
	var ratio int64
	switch codec {
	case format.Uncompressed:
		ratio = 1
	case format.Snappy:
		ratio = 22
	case format.Gzip:
		ratio = 1032
	case format.Lz4Raw, format.Lz4:
		ratio = 256
	case format.Zstd:
		ratio = 32 << 10
	default:
		return maxPageBytes
	}
	return ratio*n + 16 // headers and framing of tiny pages
}

// chunkCheck says what checkChunk holds a column chunk to.
type chunkCheck struct {
	rgRows   int64 // rows of the row group
	repeated bool  // a list column: values are not rows
	// needCRC: every page must carry a CRC-32 (steplab writes one on
	// every page, so a page without is damaged); verifyCRC: check it
	// against the page as stored (for readers that do not).
	needCRC, verifyCRC bool
}

// writtenBySteplab reports whether steplab's writer wrote pf.
func writtenBySteplab(pf *parquet.File) bool {
	return strings.HasPrefix(pf.Metadata().CreatedBy, "steplab ")
}

// checkChunk walks the page headers of one column chunk, checking that
// every page lies inside the chunk and inside the file, that its sizes and
// value count are plausible, that a zstd frame does not claim more bytes
// than the page header, and its CRC as cc says.
func checkChunk(r io.ReaderAt, fileSize int64, md *format.ColumnMetaData, cc chunkCheck) error {
	rgRows, repeated := cc.rgRows, cc.repeated
	start := md.DataPageOffset
	if md.DictionaryPageOffset > 0 && md.DictionaryPageOffset < start {
		start = md.DictionaryPageOffset
	}
	end := start + md.TotalCompressedSize
	if start < 4 || md.TotalCompressedSize < 0 || end > fileSize-8 || end < start {
		return fmt.Errorf("column chunk [%d, %d) lies outside the file (%d bytes)", start, end, fileSize)
	}
	buf := make([]byte, 1024)
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
			// A header with long string statistics may not fit: retry
			// with more of the chunk, up to maxHeaderBytes.
			if n == len(buf) && len(buf) < maxHeaderBytes {
				buf = make([]byte, 4*len(buf))
				continue
			}
			return fmt.Errorf("page header at %d: %v", pos, err)
		}
		hl := int64(n - br.Len()) // the reader does not buffer
		body := pos + hl
		switch {
		case h.CompressedPageSize < 0 || body+int64(h.CompressedPageSize) > end:
			return fmt.Errorf("page at %d: %d bytes run past the column chunk", pos, h.CompressedPageSize)
		case h.UncompressedPageSize < 0 || h.UncompressedPageSize > maxPageBytes:
			return fmt.Errorf("page at %d: implausible uncompressed size %d", pos, h.UncompressedPageSize)
		case int64(h.UncompressedPageSize) > maxDecoded(md.Codec, int64(h.CompressedPageSize)):
			return fmt.Errorf("page at %d: %d bytes of %s cannot decompress to the %d its header claims", pos, h.CompressedPageSize, md.Codec, h.UncompressedPageSize)
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
		if err := checkPageCRC(r, body, &h, cc); err != nil {
			return fmt.Errorf("page at %d: %v", pos, err)
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

// checkPageCRC checks the CRC-32 of the page whose body starts at body.
func checkPageCRC(r io.ReaderAt, body int64, h *format.PageHeader, cc chunkCheck) error {
	switch {
	case h.CRC == 0 && cc.needCRC:
		return errors.New("no CRC-32, which steplab writes on every page (the page header is damaged)")
	case h.CRC == 0 || !cc.verifyCRC:
		return nil
	}
	crc := crc32.NewIEEE()
	if _, err := io.Copy(crc, io.NewSectionReader(r, body, int64(h.CompressedPageSize))); err != nil {
		return err
	}
	if crc.Sum32() != uint32(h.CRC) {
		return errors.New("page CRC-32 mismatch (the page is damaged)")
	}
	return nil
}

// CheckPages checks every page header of every column chunk of pf (open
// as f, size bytes) as the dataset scanner does before it decodes a page,
// and the pages' CRC-32s: for readers that decode with parquet-go, which
// allocates what a header claims and does not check a dictionary page's
// CRC. The error names the file.
func CheckPages(path string, f io.ReaderAt, size int64, pf *parquet.File) error {
	md := pf.Metadata()
	steplab := writtenBySteplab(pf)
	for i, rg := range md.RowGroups {
		for j := range rg.Columns {
			cmd := &rg.Columns[j].MetaData
			leaf, ok := pf.Schema().Lookup(cmd.PathInSchema...)
			if !ok {
				return fmt.Errorf("%s: row group %d: column chunk %q is not in the schema", path, i, strings.Join(cmd.PathInSchema, "."))
			}
			cc := chunkCheck{rgRows: rg.NumRows, repeated: leaf.MaxRepetitionLevel > 0, needCRC: steplab, verifyCRC: true}
			if err := checkChunk(f, size, cmd, cc); err != nil {
				return fmt.Errorf("%s: row group %d, column %q: corrupt column chunk: %v", path, i, strings.Join(cmd.PathInSchema, "."), err)
			}
		}
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

// FileHint says what to run on a file given where a dataset directory was
// expected: a CSV or JSON file is imported, a Parquet table is inspected
// or wrapped into a dataset.
func FileHint(path string) string {
	if h := foreignHint(path); h != "" {
		return h
	}
	return fmt.Sprintf("`steplab inspect %s` reads one Parquet file, and `steplab import table %s -o out/DIR --table steps|requests --hardware GPU --model MODEL` makes a table a dataset", path, path)
}

// foreignHint is the import command for a file whose name says it is a CSV
// or JSON export; "" for any other name.
func foreignHint(path string) string {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".csv", ".tsv":
		return fmt.Sprintf("a CSV table becomes a dataset with `steplab import table %s -o out/DIR --table steps|requests --hardware GPU --model MODEL`", path)
	case ".json", ".jsonl":
		return "a trace or benchmark export becomes a dataset with `steplab import FORMAT` (`steplab import --help` lists the formats)"
	}
	return ""
}
