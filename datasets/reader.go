package datasets

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
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

	"github.com/parquet-go/parquet-go"

	"github.com/steplab/steplab/datasets/internal/pq"
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
			return cmp.Compare(x, y)
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
	if c, err := pq.CodecFor(reflect.TypeFor[T]()); err == nil {
		rd, err := c.NewReader(path, nil, 0, pf, partitionsOf(path), nil)
		if err != nil {
			return nil, err
		}
		defer rd.Close()
		return rd.Defaulted(), nil
	}
	var missing []string
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
		missing = append(missing, strings.Join(col, "."))
	}
	if len(missing) > 0 {
		reads := map[string]bool{}
		for _, col := range parquet.SchemaOf(new(T)).Columns() {
			reads[col[0]] = true
		}
		return nil, pq.MissingColumns(path, pf, missing, reads)
	}
	return defaulted, nil
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
	codec *pq.Codec
	names map[string]string // a field's column name in the files, where not its own
	rd    *pq.Reader

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
	c, _ := pq.CodecFor(reflect.TypeFor[T]())
	return &Scanner[T]{parts: parts, codec: c}
}

// ScanTable reads Parquet files written by another tool as rows of the
// schema type T of table: a column of the files named like one of
// rename's keys reads into the field of the column the key maps to
// (theirs=ours, as `steplab import table --map` takes them), and T's
// fields without a default tag take the schema's defaults (as with Scan).
// T must be a flat row type.
func ScanTable[T any](parts []string, table string, rename map[string]string) (*Scanner[T], error) {
	c, err := pq.CodecFor(reflect.TypeFor[T]())
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
		if s.rd != nil {
			n, err = pq.ReadRows(s.rd, buf)
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
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return err
		}
		rd, err := s.codec.NewReader(path, f, st.Size(), pf, partitionsOf(path), s.names)
		if err != nil {
			f.Close()
			return err
		}
		s.path, s.f, s.rd, s.read = path, f, rd, 0
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
	if s.rd != nil {
		s.rd.Close()
		s.rd = nil
	}
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

// CheckPages checks every page header of every column chunk of pf (open
// as f, size bytes) as the dataset scanner does before it decodes a page,
// and the pages' CRC-32s: for readers that decode with parquet-go, which
// allocates what a header claims and does not check a dictionary page's
// CRC. The error names the file.
func CheckPages(path string, f io.ReaderAt, size int64, pf *parquet.File) error {
	return pq.CheckPages(path, f, size, pf)
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

// MissingColumnsError is the error of a reader for a file that lacks
// required columns: it names every one of them, with the file's columns
// whose names are close (SimilarColumns).
type MissingColumnsError = pq.MissingColumnsError

// ColumnTypeError is the error of a reader for a column whose type does not
// convert to the field's.
type ColumnTypeError = pq.ColumnTypeError

// SimilarColumns returns the names in have that look like name once case,
// punctuation, counting prefixes, abbreviations and unit suffixes are set
// aside, closest first, at most three: the table wrapper and the readers
// use it to suggest a rename.
func SimilarColumns(name string, have []string) []string { return pq.SimilarColumns(name, have) }
