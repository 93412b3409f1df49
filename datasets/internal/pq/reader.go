package pq

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// Reader decodes one Parquet file, row group after row group, column by
// column straight into rows of its Codec's struct. Every column chunk is
// checked (checkChunk) before its first page is read.
type Reader struct {
	codec  *Codec
	r      io.ReaderAt
	size   int64
	pf     *parquet.File
	cols   []*colReader
	rg     int
	rgLeft int64
}

// NewReader binds the fields of c to the columns of pf, the file held by r
// (size bytes; path names it in errors), planning each column's
// conversion. A field whose column the file lacks (or holds as the Null
// type) reads the value of a key=value directory the file lies in
// (partitions), or its default; names gives a field's column name in the
// file where it is not the field's own. A file that lacks a column with
// neither gets one MissingColumnsError naming all of them; a column that
// does not convert, a ColumnTypeError. A reader that only checks the
// columns (Defaulted) may have no r.
func (c *Codec) NewReader(path string, r io.ReaderAt, size int64, pf *parquet.File, partitions, names map[string]string) (*Reader, error) {
	cols, err := bindColumns(path, pf, c, partitions, names)
	if err != nil {
		return nil, err
	}
	return &Reader{codec: c, r: r, size: size, pf: pf, cols: cols}, nil
}

// Defaulted lists the columns the file lacks that read as their defaults.
func (rd *Reader) Defaulted() []string {
	var out []string
	for _, cr := range rd.cols {
		if cr.missing && !cr.partition {
			out = append(out, cr.name)
		}
	}
	return out
}

// ReadRows fills buf with the next rows of the file and returns how many;
// 0 after the last. T must be the struct rd's codec describes.
func ReadRows[T any](rd *Reader, buf []T) (int, error) {
	if reflect.TypeFor[T]() != rd.codec.typ {
		return 0, fmt.Errorf("reading %s with the codec of %s", reflect.TypeFor[T](), rd.codec.typ)
	}
	if len(buf) == 0 {
		return 0, nil
	}
	return rd.read(unsafe.Pointer(unsafe.SliceData(buf)), len(buf))
}

// read fills up to n rows at base from the open row group, opening the
// next when it is done.
func (rd *Reader) read(base unsafe.Pointer, n int) (int, error) {
	for rd.rgLeft == 0 {
		groups := rd.pf.RowGroups()
		if rd.rg >= len(groups) {
			return 0, nil
		}
		rg := groups[rd.rg]
		rd.rg++
		rd.rgLeft = rg.NumRows()
		if rd.rgLeft < 0 {
			return 0, fmt.Errorf("row group %d: negative row count", rd.rg-1)
		}
		if rd.rgLeft == 0 {
			continue
		}
		md := rd.pf.Metadata()
		for _, c := range rd.cols {
			if c.missing {
				continue
			}
			if rd.rg-1 >= len(md.RowGroups) || c.leaf >= len(md.RowGroups[rd.rg-1].Columns) {
				return 0, fmt.Errorf("row group %d: no metadata for column %q", rd.rg-1, c.name)
			}
			cmd := &md.RowGroups[rd.rg-1].Columns[c.leaf].MetaData
			pages := chunkCheck{rgRows: rd.rgLeft, repeated: c.maxRep > 0, needCRC: writtenBySteplab(rd.pf)}
			if err := checkChunk(rd.r, rd.size, cmd, pages); err != nil {
				return 0, fmt.Errorf("row group %d, column %q: corrupt column chunk: %v", rd.rg-1, c.name, err)
			}
		}
		for _, c := range rd.cols {
			if !c.missing {
				c.startRowGroup(rd.r, &md.RowGroups[rd.rg-1].Columns[c.leaf].MetaData)
			}
		}
	}
	k := int(min(int64(n), rd.rgLeft))
	for _, c := range rd.cols {
		if err := c.fillSafe(base, rd.codec.size, k); err != nil {
			return 0, err
		}
	}
	rd.rgLeft -= int64(k)
	return k, nil
}

// Close gives the reader's page buffers back for the next file.
func (rd *Reader) Close() {
	for _, c := range rd.cols {
		c.release()
	}
	rd.cols = nil
}

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
func bindColumns(path string, pf *parquet.File, c *Codec, partitions, names map[string]string) ([]*colReader, error) {
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

// fileColumn is the top-level column name of pf, or nil.
func fileColumn(pf *parquet.File, name string) *parquet.Column {
	for _, c := range pf.Root().Columns() {
		if c.Name() == name {
			return c
		}
	}
	return nil
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
// as f, size bytes) as Reader does before it decodes a page,
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
