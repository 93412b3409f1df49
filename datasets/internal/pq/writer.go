package pq

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/bits"
	"reflect"
	"slices"
	"unsafe"

	kzstd "github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/encoding/bytestreamsplit"
	"github.com/parquet-go/parquet-go/encoding/delta"
	"github.com/parquet-go/parquet-go/encoding/plain"
	"github.com/parquet-go/parquet-go/encoding/rle"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

const (
	// PageRows is the number of rows per data page.
	PageRows = 32768
	// GatherRows bounds one pass of a column over the rows, so that the rows
	// read stay in cache while each column gathers its field.
	GatherRows = 256
)

// Writer writes one Parquet file from rows of a flat struct (see
// Codec), column by column through field offsets. It produces plain
// Parquet: data pages v1, zstd, DELTA_BINARY_PACKED for int columns tagged
// delta, dictionary encoding for string columns tagged dict, PLAIN
// otherwise, min/max statistics and page indexes (pageindex.go), no
// extension types and no timestamps, so equal rows give byte-identical
// files. A Writer is not safe for concurrent use; Reset
// starts the next file with its buffers.
type Writer struct {
	createdBy string
	out       io.Writer
	pos       int64
	codec     *Codec
	cols      []*colEnc
	rgMax     int
	pageFill  int
	rgFill    int
	rowGroups []format.RowGroup
	indexes   [][]chunkIndex // per row group, per column
	numRows   int64
	kv        []format.KeyValue
	zstd      *kzstd.Encoder
	hdr       bytes.Buffer
	enc       *thrift.Encoder
	body, tmp []byte
	comp      []byte
	err       error
}

type colEnc struct {
	f    *codecField
	typ  format.Type
	path []string

	// values of the page being filled
	i64 []int64
	i32 []int32 // int32 columns, and int64 delta columns while narrow
	// narrow: an int64 delta column, gathered into i32 while its page fits
	// (gatherNarrow); wide: the open page did not fit and is in i64.
	narrow, wide bool
	f64          []float64
	bools        []byte
	plain        []byte
	idx          []int32
	defs         []byte
	reps         []byte
	ents         int
	// Bounds of the open page, kept as its values are gathered so that
	// closing the page does not read them again: integers in lo/hi, floats
	// in flo/fhi (nan: the page holds a NaN), bools as the AND and OR of
	// the page's bytes; nulls counts the empty lists of a list column.
	lo, hi   int64
	flo, fhi float64
	nan      bool
	bAnd     byte
	bOr      byte
	nulls    int64

	// dictionary of the row group (string columns tagged dict)
	dict             map[string]int32
	dictVals         []string
	dictMin, dictMax string // bounds of dictVals
	// recent maps a string's data pointer and length to its dictionary
	// index: rows name the same few hundred strings over and over (the
	// requests of running steps), each time through the same string
	// header, and comparing a pointer is much cheaper than hashing bytes.
	recent *[dictRecent]dictSlot

	// encoded data pages of the row group
	chunk        []byte
	uncompressed int64
	numValues    int64
	valueEnc     format.Encoding
	skip         int              // pages left to store without trying zstd
	pages        []pageIndexEntry // the row group's pages so far
}

// pageEncoder is the column writer's zstd encoder: the fastest level
// without the entropy stage. Its pages are already bit-packed (delta, RLE,
// dictionary indexes), so zstd earns its ratio from long repeats (the same
// requests step after step); Huffman-coding the literals left over took a
// fifth of the compression time for about 1.5% of the size. parquet-go's
// codec does not expose the option, so the encoder it wraps is used
// directly.
func pageEncoder() *kzstd.Encoder {
	e, err := kzstd.NewWriter(nil, kzstd.WithEncoderLevel(kzstd.SpeedFastest), kzstd.WithEncoderConcurrency(1),
		kzstd.WithZeroFrames(true), kzstd.WithEncoderCRC(false), kzstd.WithNoEntropyCompression(true))
	if err != nil {
		panic(err) // only for invalid options
	}
	return e
}

// WriterOptions say what a Writer puts into every file it writes.
type WriterOptions struct {
	RowGroupRows int // rows per row group
	// CreatedBy is the footer's created_by; a file whose created_by
	// starts with "steplab " must carry a CRC-32 on every page (this
	// writer's files do), which readers then demand.
	CreatedBy string
	Metadata  []format.KeyValue // the footer's key-value metadata
}

// NewWriter starts a file of rows of c's struct on out.
func (c *Codec) NewWriter(out io.Writer, o WriterOptions) (*Writer, error) {
	rowGroupRows := o.RowGroupRows
	w := &Writer{createdBy: o.CreatedBy, out: out, codec: c, rgMax: rowGroupRows, kv: o.Metadata, zstd: pageEncoder()}
	w.enc = thrift.NewEncoder(new(thrift.CompactProtocol).NewWriter(&w.hdr))
	for i := range c.fields {
		f := &c.fields[i]
		ce := &colEnc{f: f, path: []string{f.name}}
		// Page buffers get their full size at once: growing them by
		// doubling would copy each one a dozen times per part.
		page := min(PageRows, rowGroupRows)
		switch f.kind {
		case kindInt32:
			ce.typ, ce.valueEnc = format.Int32, format.Plain
			if f.delta {
				ce.valueEnc = format.DeltaBinaryPacked
			}
			ce.i32 = make([]int32, 0, page)
		case kindInt64:
			ce.typ, ce.valueEnc = format.Int64, format.Plain
			if f.delta {
				ce.valueEnc = format.DeltaBinaryPacked
				ce.narrow = true
				ce.i32 = make([]int32, 0, page)
			} else {
				ce.i64 = make([]int64, 0, page)
			}
		case kindInt64List:
			ce.typ, ce.valueEnc = format.Int64, format.Plain
			ce.path = []string{f.name, "list", "element"}
		case kindFloat64:
			ce.typ, ce.valueEnc = format.Double, format.Plain
			if f.split {
				ce.valueEnc = format.ByteStreamSplit
			}
			ce.f64 = make([]float64, 0, page)
		case kindBool:
			ce.typ, ce.valueEnc = format.Boolean, format.Plain
			ce.bools = make([]byte, 0, page)
		case kindString:
			ce.typ, ce.valueEnc = format.ByteArray, format.Plain
			if f.dict {
				ce.valueEnc = format.RLEDictionary
				ce.dict = map[string]int32{}
				ce.recent = new([dictRecent]dictSlot)
				ce.idx = make([]int32, 0, page)
			}
		}
		ce.clearPage()
		w.cols = append(w.cols, ce)
	}
	if err := w.write([]byte("PAR1")); err != nil {
		return nil, err
	}
	return w, nil
}

// Reset starts a new file on out with w's options, keeping its buffers.
func (w *Writer) Reset(out io.Writer) error {
	w.out, w.pos, w.err = out, 0, nil
	w.pageFill, w.rgFill, w.numRows, w.rowGroups, w.indexes = 0, 0, 0, nil, nil
	for _, c := range w.cols {
		c.clearPage()
		c.chunk, c.uncompressed, c.numValues, c.skip, c.pages = c.chunk[:0], 0, 0, 0, c.pages[:0]
		if c.dict != nil {
			c.resetDict()
		}
	}
	return w.write([]byte("PAR1"))
}

func (w *Writer) write(b []byte) error {
	if w.err != nil {
		return w.err
	}
	n, err := w.out.Write(b)
	w.pos += int64(n)
	w.err = err
	return err
}

// WriteRows adds rows to the file; T must be the struct w's codec
// describes.
func WriteRows[T any](w *Writer, rows []T) error {
	if err := w.check(reflect.TypeFor[T]()); err != nil {
		return err
	}
	return w.appendRows(unsafe.Pointer(unsafe.SliceData(rows)), len(rows))
}

// WriteRow adds the row at row, as WriteRows does.
func WriteRow[T any](w *Writer, row *T) error {
	if err := w.check(reflect.TypeFor[T]()); err != nil {
		return err
	}
	return w.appendRows(unsafe.Pointer(row), 1)
}

func (w *Writer) check(t reflect.Type) error {
	if t != w.codec.typ {
		return fmt.Errorf("writing %s with the codec of %s", t, w.codec.typ)
	}
	return nil
}

// appendRows adds n rows of the codec's struct type starting at base.
func (w *Writer) appendRows(base unsafe.Pointer, n int) error {
	stride := w.codec.size
	for done := 0; done < n; {
		if w.err != nil {
			return w.err
		}
		k := min(n-done, GatherRows, PageRows-w.pageFill, w.rgMax-w.rgFill)
		// Never form a pointer past the last row: the GC would see it.
		p := unsafe.Add(base, uintptr(done)*stride)
		for _, c := range w.cols {
			c.gather(p, stride, k)
		}
		w.pageFill += k
		w.rgFill += k
		w.numRows += int64(k)
		done += k
		if w.rgFill >= w.rgMax {
			if err := w.flushRowGroup(); err != nil {
				return err
			}
		} else if w.pageFill >= PageRows {
			if err := w.flushPages(); err != nil {
				return err
			}
		}
	}
	return w.err
}

// gather appends n rows' values of the column's field, read at stride
// from base, one function per column kind.
func (c *colEnc) gather(base unsafe.Pointer, stride uintptr, n int) {
	p := unsafe.Add(base, c.f.offset)
	switch c.f.kind {
	case kindInt64:
		if c.narrow && !c.wide {
			c.gatherNarrow(p, stride, n)
		} else {
			c.gatherInt64(p, stride, n)
		}
	case kindInt32:
		c.gatherInt32(p, stride, n)
	case kindFloat64:
		c.gatherFloat64(p, stride, n)
	case kindBool:
		c.gatherBool(p, stride, n)
	case kindString:
		c.gatherString(p, stride, n)
	case kindInt64List:
		c.gatherInt64List(p, stride, n) // counts its entries itself
		return
	}
	c.ents += n
}

func (c *colEnc) gatherInt32(p unsafe.Pointer, stride uintptr, n int) {
	l := len(c.i32)
	c.i32 = slices.Grow(c.i32, n)[:l+n]
	dst := c.i32[l:]
	lo, hi := c.lo, c.hi
	off := uintptr(0)
	for i := range dst {
		v := *(*int32)(unsafe.Add(p, off))
		off += stride
		dst[i] = v
		lo, hi = min(lo, int64(v)), max(hi, int64(v))
	}
	c.lo, c.hi = lo, hi
}

func (c *colEnc) gatherFloat64(p unsafe.Pointer, stride uintptr, n int) {
	l := len(c.f64)
	c.f64 = slices.Grow(c.f64, n)[:l+n]
	dst := c.f64[l:]
	lo, hi, nan := c.flo, c.fhi, c.nan
	off := uintptr(0)
	for i := range dst {
		v := *(*float64)(unsafe.Add(p, off))
		off += stride
		dst[i] = v
		// Plain comparisons (a NaN passes both; the sign of a zero
		// bound is set when the page closes) spare the builtin
		// min/max their NaN and signed-zero cases.
		if v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
		nan = nan || v != v
	}
	c.flo, c.fhi, c.nan = lo, hi, nan
}

func (c *colEnc) gatherBool(p unsafe.Pointer, stride uintptr, n int) {
	l := len(c.bools)
	c.bools = slices.Grow(c.bools, n)[:l+n]
	dst := c.bools[l:]
	and, or := c.bAnd, c.bOr
	off := uintptr(0)
	for i := range dst {
		// A Go bool is the byte 0 or 1: copying it avoids a branch
		// that random flags mispredict.
		b := *(*byte)(unsafe.Add(p, off))
		off += stride
		dst[i] = b
		and, or = and&b, or|b
	}
	c.bAnd, c.bOr = and, or
}

func (c *colEnc) gatherString(p unsafe.Pointer, stride uintptr, n int) {
	if c.dict == nil {
		for i := 0; i < n; i++ {
			s := *(*string)(unsafe.Add(p, uintptr(i)*stride))
			c.plain = binary.LittleEndian.AppendUint32(c.plain, uint32(len(s)))
			c.plain = append(c.plain, s...)
		}
		return
	}
	l := len(c.idx)
	c.idx = slices.Grow(c.idx, n)[:l+n]
	dst := c.idx[l:]
	off := uintptr(0)
	for i := range dst {
		s := *(*string)(unsafe.Add(p, off))
		off += stride
		ptr := uintptr(unsafe.Pointer(unsafe.StringData(s)))
		slot := &c.recent[(ptr*0x9E3779B97F4A7C15)>>(64-dictRecentBits)]
		if slot.p == ptr && int(slot.n) == len(s)+1 {
			dst[i] = slot.id
			continue
		}
		id, ok := c.dict[s]
		if !ok {
			id = int32(len(c.dictVals))
			c.dict[s] = id
			c.dictVals = append(c.dictVals, s)
			c.noteDictValue(s)
		}
		// Only the bytes dictVals holds are cached: they stay alive,
		// so no other string can take their address while the slot
		// names it (the cache is cleared with the dictionary).
		if unsafe.StringData(c.dictVals[id]) == unsafe.StringData(s) {
			*slot = dictSlot{p: ptr, n: int32(len(s)) + 1, id: id}
		}
		dst[i] = id
	}
}

func (c *colEnc) gatherInt64List(p unsafe.Pointer, stride uintptr, n int) {
	for i := 0; i < n; i++ {
		l := *(*[]int64)(unsafe.Add(p, uintptr(i)*stride))
		if len(l) == 0 {
			c.reps = append(c.reps, 0)
			c.defs = append(c.defs, 0)
			c.ents++
			c.nulls++
			continue
		}
		c.reps = append(c.reps, 0)
		for range len(l) - 1 {
			c.reps = append(c.reps, 1)
		}
		for range l {
			c.defs = append(c.defs, 1)
		}
		c.i64 = append(c.i64, l...)
		c.ents += len(l)
		for _, v := range l {
			c.lo, c.hi = min(c.lo, v), max(c.hi, v)
		}
	}
}

func (c *colEnc) gatherInt64(p unsafe.Pointer, stride uintptr, n int) {
	l := len(c.i64)
	c.i64 = slices.Grow(c.i64, n)[:l+n]
	dst := c.i64[l:]
	lo, hi := c.lo, c.hi
	off := uintptr(0)
	for i := range dst {
		v := *(*int64)(unsafe.Add(p, off))
		off += stride
		dst[i] = v
		lo, hi = min(lo, v), max(hi, v)
	}
	c.lo, c.hi = lo, hi
}

// gatherNarrow gathers an int64 delta column into i32 while the page's
// values fit (see narrowBound). The bounds say whether they did: checking
// them once after the pass spares a compare and branch a value. When a
// value does not fit, the page turns wide: what it holds moves to i64, and
// the rows are gathered again there.
func (c *colEnc) gatherNarrow(p unsafe.Pointer, stride uintptr, n int) {
	l := len(c.i32)
	c.i32 = slices.Grow(c.i32, n)[:l+n]
	dst := c.i32[l:]
	lo, hi := c.lo, c.hi
	off := uintptr(0)
	for i := range dst {
		v := *(*int64)(unsafe.Add(p, off))
		off += stride
		dst[i] = int32(v)
		lo, hi = min(lo, v), max(hi, v)
	}
	if lo < -narrowBound || hi >= narrowBound {
		c.i64 = widen(c.i64, c.i32[:l])
		c.i32 = c.i32[:0]
		c.wide = true
		c.gatherInt64(p, stride, n)
		return
	}
	c.lo, c.hi = lo, hi
}

// narrowBound bounds the int64 values a delta page may hold to be encoded
// through parquet-go's int32 path: within ±2^29, every delta and every delta
// less its block's minimum fits in 31 bits, so the int32 encoder writes the
// very bytes the int64 one would (the format does not depend on the
// physical type), and parquet-go vectorizes the int32 path for more bit
// widths. Counts, tokens, bytes and durations qualify; absolute timestamps
// do not.
const narrowBound = 1 << 29

// dictRecent is the size of a dictionary column's pointer cache, direct
// mapped by a multiplicative hash of the pointer: 8192 slots keep the few
// hundred strings of a row group mostly out of each other's way.
const (
	dictRecentBits = 13
	dictRecent     = 1 << dictRecentBits
)

// dictSlot names a string by its data pointer p and its length plus one
// (n): a cleared slot then matches no string, not even an unset one (its
// pointer is nil), which the cache serves like any other: columns such as
// worker_id hold nothing else.
type dictSlot struct {
	p     uintptr
	n, id int32
}

func (c *colEnc) resetDict() {
	clear(c.dict)
	clear(c.recent[:])
	c.dictVals = c.dictVals[:0]
	c.dictMin, c.dictMax = "", ""
}

// flushPages encodes the open page of every column.
func (w *Writer) flushPages() error {
	if w.pageFill == 0 {
		return w.err
	}
	for _, c := range w.cols {
		if err := w.flushPage(c); err != nil {
			w.err = err
			return err
		}
	}
	w.pageFill = 0
	return nil
}

func appendLevels(dst, tmp []byte, levels []byte) ([]byte, []byte, error) {
	var err error
	tmp, err = (&rle.Encoding{BitWidth: 1}).EncodeLevels(tmp, levels)
	if err != nil {
		return dst, tmp, err
	}
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(tmp)))
	return append(dst, tmp...), tmp, nil
}

func (w *Writer) flushPage(c *colEnc) error {
	var err error
	body := w.body[:0]
	tmp := w.tmp
	switch c.f.kind {
	case kindInt64List:
		if body, tmp, err = appendLevels(body, tmp, c.reps); err != nil {
			return err
		}
		if body, tmp, err = appendLevels(body, tmp, c.defs); err != nil {
			return err
		}
		tmp, err = (&plain.Encoding{}).EncodeInt64(tmp, c.i64)
		body = append(body, tmp...)
	// The values alone make the page of a required column: they are
	// encoded straight into body (the encoders overwrite their dst).
	case kindInt64:
		switch {
		case c.narrow && !c.wide:
			body, err = (&delta.BinaryPackedEncoding{}).EncodeInt32(body, c.i32)
		case c.valueEnc == format.DeltaBinaryPacked:
			body, err = (&delta.BinaryPackedEncoding{}).EncodeInt64(body, c.i64)
		default:
			body, err = (&plain.Encoding{}).EncodeInt64(body, c.i64)
		}
	case kindInt32:
		if c.valueEnc == format.DeltaBinaryPacked {
			body, err = (&delta.BinaryPackedEncoding{}).EncodeInt32(body, c.i32)
		} else {
			body, err = (&plain.Encoding{}).EncodeInt32(body, c.i32)
		}
	case kindFloat64:
		if c.valueEnc == format.ByteStreamSplit {
			body, err = (&bytestreamsplit.Encoding{}).EncodeDouble(body, c.f64)
		} else {
			body, err = (&plain.Encoding{}).EncodeDouble(body, c.f64)
		}
	case kindBool:
		body = packBools(body, c.bools)
	case kindString:
		if c.dict == nil {
			body = append(body, c.plain...)
			break
		}
		bw := max(1, bits.Len32(uint32(len(c.dictVals)-1)))
		body = append(body, byte(bw))
		tmp, err = (&rle.Encoding{BitWidth: bw}).EncodeInt32(tmp, c.idx)
		body = append(body, tmp...)
	}
	if err != nil {
		return fmt.Errorf("column %s: encoding page: %w", c.f.name, err)
	}
	w.body, w.tmp = body, tmp
	entry := c.pageBounds()
	entry.offset, entry.firstRow = int64(len(c.chunk)), int64(w.rgFill-w.pageFill)
	hdr := format.PageHeader{
		Type:                 format.DataPage,
		UncompressedPageSize: int32(len(body)),
		DataPageHeader: thrift.New(format.DataPageHeader{
			NumValues:               int32(c.ents),
			Encoding:                c.valueEnc,
			DefinitionLevelEncoding: format.RLE,
			RepetitionLevelEncoding: format.RLE,
		}),
	}
	if err := w.appendPage(&c.chunk, &c.uncompressed, &hdr, body, &c.skip); err != nil {
		return fmt.Errorf("column %s: %w", c.f.name, err)
	}
	entry.size = int32(int64(len(c.chunk)) - entry.offset)
	c.pages = append(c.pages, entry)
	c.numValues += int64(c.ents)
	c.clearPage()
	return nil
}

// packBools appends flags (bytes 0 or 1) to dst as a PLAIN boolean
// bitmap, least significant bit first. Eight flags are read as one word
// and the multiply moves byte k's bit to bit 56+k: no two partial products
// meet, so nothing carries into the top byte. A flag at a time cost as
// much as the rest of the page's encoding.
func packBools(dst, flags []byte) []byte {
	full := len(flags) &^ 7
	for i := 0; i < full; i += 8 {
		dst = append(dst, byte(binary.LittleEndian.Uint64(flags[i:])*0x0102040810204080>>56))
	}
	if full < len(flags) {
		var b byte
		for i, f := range flags[full:] {
			b |= f << i
		}
		dst = append(dst, b)
	}
	return dst
}

// clearPage empties the open page.
func (c *colEnc) clearPage() {
	c.i64, c.i32, c.f64, c.bools, c.plain, c.idx = c.i64[:0], c.i32[:0], c.f64[:0], c.bools[:0], c.plain[:0], c.idx[:0]
	c.defs, c.reps, c.ents, c.wide = c.defs[:0], c.reps[:0], 0, false
	c.lo, c.hi, c.flo, c.fhi, c.nan = math.MaxInt64, math.MinInt64, math.Inf(1), math.Inf(-1), false
	c.bAnd, c.bOr, c.nulls = 1, 0, 0
}

// appendPage compresses body and appends its header and bytes to dst.
// skip (may be nil) is the column's adaptive-compression state: a column
// whose last page did not shrink by an eighth under zstd (random timing
// jitter after delta encoding does not) has its next pages stored as zstd
// frames of raw blocks, trying compression again every rawRetry pages.
// Either way the page is a valid zstd frame.
func (w *Writer) appendPage(dst *[]byte, uncompressed *int64, hdr *format.PageHeader, body []byte, skip *int) error {
	var comp []byte
	if skip != nil && *skip > 0 {
		*skip--
		comp = appendZstdRaw(w.comp[:0], body)
	} else {
		comp = w.zstd.EncodeAll(body, w.comp[:0])
		if skip != nil && len(comp) > len(body)-len(body)/8 {
			*skip = rawRetry
		}
	}
	w.comp = comp
	hdr.CompressedPageSize = int32(len(comp))
	// A CRC of the page as stored lets readers (parquet-go checks it) refuse
	// a damaged page before decoding it.
	hdr.CRC = int32(crc32.ChecksumIEEE(comp))
	w.hdr.Reset()
	if err := w.enc.Encode(hdr); err != nil {
		return err
	}
	*dst = append(*dst, w.hdr.Bytes()...)
	*dst = append(*dst, comp...)
	*uncompressed += int64(w.hdr.Len() + len(body))
	return nil
}

func (w *Writer) flushRowGroup() error {
	if w.rgFill == 0 {
		return w.err
	}
	if err := w.flushPages(); err != nil {
		return err
	}
	rg := format.RowGroup{NumRows: int64(w.rgFill), FileOffset: w.pos, Ordinal: int16(len(w.rowGroups))}
	index := make([]chunkIndex, 0, len(w.cols))
	for _, c := range w.cols {
		start := w.pos
		var dictOff int64
		uncompressed := c.uncompressed
		encs := []format.Encoding{c.valueEnc}
		if c.dict != nil {
			body := w.body[:0]
			for _, s := range c.dictVals {
				body = binary.LittleEndian.AppendUint32(body, uint32(len(s)))
				body = append(body, s...)
			}
			w.body = body
			var page []byte
			hdr := format.PageHeader{
				Type:                 format.DictionaryPage,
				UncompressedPageSize: int32(len(body)),
				DictionaryPageHeader: thrift.New(format.DictionaryPageHeader{NumValues: int32(len(c.dictVals)), Encoding: format.Plain}),
			}
			if err := w.appendPage(&page, &uncompressed, &hdr, body, nil); err != nil {
				w.err = err
				return err
			}
			dictOff = w.pos
			if err := w.write(page); err != nil {
				return err
			}
			encs = []format.Encoding{format.Plain, format.RLEDictionary}
		}
		if c.f.kind == kindInt64List {
			encs = append(encs, format.RLE)
		}
		dataOff := w.pos
		if err := w.write(c.chunk); err != nil {
			return err
		}
		ci := chunkIndex{pages: slices.Clone(c.pages), dataAt: dataOff}
		for _, p := range c.pages {
			ci.noBounds = ci.noBounds || p.nan
		}
		index = append(index, ci)
		rg.Columns = append(rg.Columns, format.ColumnChunk{
			FileOffset: start,
			MetaData: format.ColumnMetaData{
				Type:                  c.typ,
				Encoding:              encs,
				PathInSchema:          c.path,
				Codec:                 format.Zstd,
				NumValues:             c.numValues,
				TotalUncompressedSize: uncompressed,
				TotalCompressedSize:   w.pos - start,
				DataPageOffset:        dataOff,
				DictionaryPageOffset:  dictOff,
				Statistics:            ci.statistics(c.f.kind),
			},
		})
		rg.TotalByteSize += uncompressed
		c.chunk, c.uncompressed, c.numValues, c.pages = c.chunk[:0], 0, 0, c.pages[:0]
		if c.dict != nil {
			c.resetDict()
		}
	}
	rg.TotalCompressedSize = w.pos - rg.FileOffset
	w.rowGroups = append(w.rowGroups, rg)
	w.indexes = append(w.indexes, index)
	w.rgFill = 0
	return w.err
}

// schemaElements is the Parquet schema of the codec's struct.
func (c *Codec) schemaElements() []format.SchemaElement {
	els := []format.SchemaElement{{Name: "schema", NumChildren: thrift.New(int32(len(c.fields)))}}
	req := thrift.New(format.Required)
	for _, f := range c.fields {
		switch f.kind {
		case kindInt32:
			els = append(els, format.SchemaElement{Name: f.name, Type: thrift.New(format.Int32), RepetitionType: req})
		case kindInt64:
			els = append(els, format.SchemaElement{Name: f.name, Type: thrift.New(format.Int64), RepetitionType: req})
		case kindFloat64:
			els = append(els, format.SchemaElement{Name: f.name, Type: thrift.New(format.Double), RepetitionType: req})
		case kindBool:
			els = append(els, format.SchemaElement{Name: f.name, Type: thrift.New(format.Boolean), RepetitionType: req})
		case kindString:
			els = append(els, format.SchemaElement{Name: f.name, Type: thrift.New(format.ByteArray), RepetitionType: req,
				ConvertedType: thrift.New(deprecated.UTF8), LogicalType: format.LogicalType{Value: &format.StringType{}}})
		case kindInt64List:
			els = append(els,
				format.SchemaElement{Name: f.name, RepetitionType: req, NumChildren: thrift.New(int32(1)),
					ConvertedType: thrift.New(deprecated.List), LogicalType: format.LogicalType{Value: &format.ListType{}}},
				format.SchemaElement{Name: "list", RepetitionType: thrift.New(format.Repeated), NumChildren: thrift.New(int32(1))},
				format.SchemaElement{Name: "element", Type: thrift.New(format.Int64), RepetitionType: req},
			)
		}
	}
	return els
}

// Close writes the last row group, the page indexes and the footer.
func (w *Writer) Close() error {
	if err := w.flushRowGroup(); err != nil {
		return err
	}
	if err := w.writePageIndexes(); err != nil {
		return err
	}
	orders := make([]format.ColumnOrder, len(w.cols))
	for i := range orders {
		orders[i] = format.ColumnOrder{Value: &format.TypeDefinedOrder{}}
	}
	md := format.FileMetaData{
		Version:          2,
		Schema:           w.codec.schemaElements(),
		NumRows:          w.numRows,
		RowGroups:        w.rowGroups,
		KeyValueMetadata: w.kv,
		CreatedBy:        w.createdBy,
		ColumnOrders:     orders,
	}
	footer, err := thrift.Marshal(new(thrift.CompactProtocol), &md)
	if err != nil {
		return err
	}
	footer = binary.LittleEndian.AppendUint32(footer, uint32(len(footer)))
	footer = append(footer, "PAR1"...)
	return w.write(footer)
}

// rawRetry is the number of pages stored raw after a page that zstd could
// not shrink, before compression is tried again.
const rawRetry = 7

// appendZstdRaw appends src to dst as one zstd frame (RFC 8878) made of raw
// blocks: a valid zstd stream any decoder reads, written at memcpy speed.
func appendZstdRaw(dst, src []byte) []byte {
	dst = append(dst, 0x28, 0xB5, 0x2F, 0xFD) // magic
	// Frame header: single segment, content size in 1, 2, 4 or 8 bytes.
	n := uint64(len(src))
	switch {
	case n < 256:
		dst = append(dst, 0<<6|1<<5, byte(n))
	case n < 65536+256:
		dst = append(dst, 1<<6|1<<5)
		dst = binary.LittleEndian.AppendUint16(dst, uint16(n-256))
	case n <= 0xFFFFFFFF:
		dst = append(dst, 2<<6|1<<5)
		dst = binary.LittleEndian.AppendUint32(dst, uint32(n))
	default:
		dst = append(dst, 3<<6|1<<5)
		dst = binary.LittleEndian.AppendUint64(dst, n)
	}
	const maxBlock = 128 << 10
	for {
		k := min(len(src), maxBlock)
		last := uint32(0)
		if k == len(src) {
			last = 1
		}
		h := last | 0<<1 | uint32(k)<<3 // block type 0: raw
		dst = append(dst, byte(h), byte(h>>8), byte(h>>16))
		dst = append(dst, src[:k]...)
		src = src[k:]
		if last == 1 {
			return dst
		}
	}
}
