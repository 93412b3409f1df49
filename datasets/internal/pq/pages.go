package pq

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/bits"
	"slices"
	"unsafe"

	"github.com/andybalholm/brotli"
	kgzip "github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/encoding"
	"github.com/parquet-go/parquet-go/encoding/bitpacked"
	"github.com/parquet-go/parquet-go/encoding/plain"
	"github.com/parquet-go/parquet-go/encoding/rle"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// pageReader reads the pages of one column chunk: page headers,
// decompression, definition and repetition levels, and values, with
// parquet-go's encodings. It replaces parquet-go's page reader for the
// columnar path, which cannot read the Hadoop-framed LZ4 codec (Spark's
// "lz4") and loses LZ4_RAW pages whose ratio is under 3. Sizes come from
// page headers that checkChunk has already bounded; every decompressor is
// held to the size its header declares.
type pageReader struct {
	sec   io.SectionReader
	buf   *bufio.Reader
	proto thrift.CompactProtocol
	dec   *thrift.Decoder
	size  int64 // bytes of the chunk

	codec          format.CompressionCodec
	kind           parquet.Kind // physical type of the column
	maxDef, maxRep byte

	body, unz, tmp []byte // page as stored, decompressed, scratch

	// decoded levels and values, reused from page to page
	defs, reps []byte
	idx        []int32
	i32        []int32
	i64        []int64
	i96        []deprecated.Int96
	f32        []float32
	f64        []float64
	bits       []byte
	bytes      []byte
	offs       []uint32
}

// page is one decoded page.
type page struct {
	dict bool // a dictionary page: values are its entries
	// n is the number of levels of a data page (rows of a flat column),
	// the number of entries of a dictionary page; nv the number of values
	// (levels that are not null).
	n, nv      int
	defs, reps []byte
	// values are the page's values, or with indexed its dictionary
	// indexes (idx).
	values  encoding.Values
	indexed bool
	idx     []int32
}

const pageBufferSize = 64 << 10

// reset points the reader at a column chunk of f.
func (p *pageReader) reset(r io.ReaderAt, md *format.ColumnMetaData, kind parquet.Kind, maxDef, maxRep byte) {
	start := md.DataPageOffset
	if md.DictionaryPageOffset > 0 && md.DictionaryPageOffset < start {
		start = md.DictionaryPageOffset
	}
	p.sec = *io.NewSectionReader(r, start, md.TotalCompressedSize)
	p.size = md.TotalCompressedSize
	if p.buf == nil {
		p.buf = bufio.NewReaderSize(&p.sec, pageBufferSize)
		p.dec = thrift.NewDecoder(p.proto.NewReader(p.buf))
	} else {
		p.buf.Reset(&p.sec)
	}
	p.codec, p.kind, p.maxDef, p.maxRep = md.Codec, kind, maxDef, maxRep
}

// next reads the next page; io.EOF after the last.
func (p *pageReader) next() (page, error) {
	pos, _ := p.sec.Seek(0, io.SeekCurrent)
	if pos-int64(p.buf.Buffered()) >= p.size {
		return page{}, io.EOF
	}
	var h format.PageHeader
	if err := p.dec.Decode(&h); err != nil {
		return page{}, fmt.Errorf("page header: %v", err)
	}
	p.body = slices.Grow(p.body[:0], int(h.CompressedPageSize))[:h.CompressedPageSize]
	if _, err := io.ReadFull(p.buf, p.body); err != nil {
		return page{}, fmt.Errorf("page body: %v", err)
	}
	if h.CRC != 0 && uint32(h.CRC) != crc32.ChecksumIEEE(p.body) {
		return page{}, errors.New("page CRC-32 mismatch (the page is damaged)")
	}
	switch h.Type {
	case format.DictionaryPage:
		if !h.DictionaryPageHeader.Valid {
			return page{}, errors.New("dictionary page without its header")
		}
		data, err := p.decompress(p.body, int(h.UncompressedPageSize))
		if err != nil {
			return page{}, err
		}
		n := int(h.DictionaryPageHeader.V.NumValues)
		v, err := p.decodeValues(&plain.Encoding{}, data, n)
		return page{dict: true, n: n, nv: n, values: v}, err
	case format.DataPage:
		if !h.DataPageHeader.Valid {
			return page{}, errors.New("data page without its header")
		}
		return p.dataPageV1(&h.DataPageHeader.V, int(h.UncompressedPageSize))
	case format.DataPageV2:
		if !h.DataPageHeaderV2.Valid {
			return page{}, errors.New("data page v2 without its header")
		}
		return p.dataPageV2(&h.DataPageHeaderV2.V, int(h.UncompressedPageSize))
	}
	return p.next() // an index page: nothing to read
}

func (p *pageReader) dataPageV1(h *format.DataPageHeader, size int) (page, error) {
	data, err := p.decompress(p.body, size)
	if err != nil {
		return page{}, err
	}
	pg := page{n: int(h.NumValues)}
	if p.maxRep > 0 {
		if p.reps, data, err = levelsV1(p.reps, data, h.RepetitionLevelEncoding, p.maxRep, pg.n); err != nil {
			return page{}, fmt.Errorf("repetition levels: %v", err)
		}
		pg.reps = p.reps
	}
	if p.maxDef > 0 {
		if p.defs, data, err = levelsV1(p.defs, data, h.DefinitionLevelEncoding, p.maxDef, pg.n); err != nil {
			return page{}, fmt.Errorf("definition levels: %v", err)
		}
		pg.defs = p.defs
	}
	return pg, p.values(&pg, h.Encoding, data)
}

func (p *pageReader) dataPageV2(h *format.DataPageHeaderV2, size int) (page, error) {
	pg := page{n: int(h.NumValues)}
	rl, dl := int(h.RepetitionLevelsByteLength), int(h.DefinitionLevelsByteLength)
	if rl < 0 || dl < 0 || rl+dl > len(p.body) || rl+dl > size {
		return page{}, fmt.Errorf("level lengths %d and %d do not fit the page's %d bytes", rl, dl, len(p.body))
	}
	var err error
	if p.maxRep > 0 {
		if p.reps, err = decodeLevels(p.reps, &rle.Encoding{BitWidth: bits.Len8(p.maxRep)}, p.body[:rl], pg.n); err != nil {
			return page{}, fmt.Errorf("repetition levels: %v", err)
		}
		pg.reps = p.reps
	}
	if p.maxDef > 0 {
		if p.defs, err = decodeLevels(p.defs, &rle.Encoding{BitWidth: bits.Len8(p.maxDef)}, p.body[rl:rl+dl], pg.n); err != nil {
			return page{}, fmt.Errorf("definition levels: %v", err)
		}
		pg.defs = p.defs
	}
	data := p.body[rl+dl:]
	if !h.IsCompressed.Valid || h.IsCompressed.V {
		if data, err = p.decompress(data, size-rl-dl); err != nil {
			return page{}, err
		}
	}
	return pg, p.values(&pg, h.Encoding, data)
}

// levelsV1 decodes the levels at the start of a v1 page and returns the
// rest of the page.
func levelsV1(dst, data []byte, enc format.Encoding, max byte, n int) ([]byte, []byte, error) {
	w := bits.Len8(max)
	switch enc {
	case format.RLE:
		if len(data) < 4 {
			return dst, data, io.ErrUnexpectedEOF
		}
		k := int(binary.LittleEndian.Uint32(data))
		if k > len(data)-4 {
			return dst, data, fmt.Errorf("%d bytes of levels, the page has %d", k, len(data)-4)
		}
		dst, err := decodeLevels(dst, &rle.Encoding{BitWidth: w}, data[4:4+k], n)
		return dst, data[4+k:], err
	case format.BitPacked:
		k := (n*w + 7) / 8
		if k > len(data) {
			return dst, data, io.ErrUnexpectedEOF
		}
		dst, err := decodeLevels(dst, &bitpacked.Encoding{BitWidth: w}, data[:k], n)
		return dst, data[k:], err
	}
	return dst, data, fmt.Errorf("level encoding %s not supported", enc)
}

func decodeLevels(dst []byte, enc encoding.Encoding, src []byte, n int) ([]byte, error) {
	if r, ok := enc.(*rle.Encoding); ok {
		if err := rleFits(src, r.BitWidth, n); err != nil {
			return dst, err
		}
	}
	dst, err := enc.DecodeLevels(dst[:0], src)
	if err != nil {
		return dst, err
	}
	if len(dst) < n {
		return dst, fmt.Errorf("%d levels for %d values", len(dst), n)
	}
	return dst[:n], nil
}

// values decodes the values of a data page: dictionary indexes, or the
// non-null values in the page's encoding.
func (p *pageReader) values(pg *page, enc format.Encoding, data []byte) error {
	pg.nv = pg.n - countNulls(pg.defs, p.maxDef)
	if enc == format.PlainDictionary || enc == format.RLEDictionary {
		if len(data) > 0 {
			if err := rleFits(data[1:], int(data[0]), pg.nv); err != nil {
				return fmt.Errorf("dictionary indexes: %v", err)
			}
		}
		idx, err := (&rle.DictionaryEncoding{}).DecodeInt32(p.idx[:0], data)
		p.idx = idx
		if err != nil {
			return err
		}
		if len(idx) < pg.nv {
			return fmt.Errorf("%d dictionary indexes for %d values", len(idx), pg.nv)
		}
		pg.indexed, pg.idx = true, idx[:pg.nv]
		return nil
	}
	e := parquet.LookupEncoding(enc)
	if _, unsupported := e.(encoding.NotSupported); unsupported {
		return fmt.Errorf("encoding %s not supported", enc)
	}
	switch enc {
	case format.DeltaBinaryPacked, format.DeltaLengthByteArray, format.DeltaByteArray:
		// The decoder sizes its output by the count in the first block
		// header: hold it to the page's.
		if err := checkDeltaCount(data, pg.nv); err != nil {
			return err
		}
	case format.Plain:
		if v, ok := plainInPlace(p.kind, data, pg.nv); ok {
			pg.values = v
			return nil
		}
	}
	v, err := p.decodeValues(e, data, pg.nv)
	pg.values = v
	return err
}

// checkDeltaCount reads the value count of a DELTA_BINARY_PACKED header
// (block size, miniblocks per block, total count, first value: ULEB128s)
// and refuses one above the page's n values.
func checkDeltaCount(data []byte, n int) error {
	for i := range 3 {
		v, k := binary.Uvarint(data)
		if k <= 0 {
			return errors.New("truncated delta header")
		}
		if i == 2 && v > uint64(n) {
			return fmt.Errorf("delta header claims %d values, the page %d", v, n)
		}
		data = data[k:]
	}
	return nil
}

// plainInPlace reads n PLAIN fixed-width values where they lie, when the
// page holds them aligned (steplab's required columns always are).
func plainInPlace(kind parquet.Kind, data []byte, n int) (encoding.Values, bool) {
	var size int
	switch kind {
	case parquet.Int32, parquet.Float:
		size = 4
	case parquet.Int64, parquet.Double:
		size = 8
	default:
		return encoding.Values{}, false
	}
	if len(data) < n*size || n == 0 || uintptr(unsafe.Pointer(unsafe.SliceData(data)))%uintptr(size) != 0 {
		return encoding.Values{}, false
	}
	b := data[:n*size]
	switch kind {
	case parquet.Int32:
		return encoding.Int32Values(unsafe.Slice((*int32)(unsafe.Pointer(&b[0])), n)), true
	case parquet.Float:
		return encoding.FloatValues(unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n)), true
	case parquet.Int64:
		return encoding.Int64Values(unsafe.Slice((*int64)(unsafe.Pointer(&b[0])), n)), true
	}
	return encoding.DoubleValues(unsafe.Slice((*float64)(unsafe.Pointer(&b[0])), n)), true
}

// decodeValues decodes n values of the column's physical type.
func (p *pageReader) decodeValues(e encoding.Encoding, data []byte, n int) (encoding.Values, error) {
	var err error
	var got int
	var v encoding.Values
	switch p.kind {
	case parquet.Boolean:
		if _, isRLE := e.(*rle.Encoding); isRLE {
			p.bits, got, err = rleBooleans(p.bits[:0], data, n)
		} else {
			p.bits, err = e.DecodeBoolean(p.bits[:0], data)
			got = len(p.bits) * 8
		}
		v = encoding.BooleanValues(p.bits)
	case parquet.Int32:
		p.i32, err = e.DecodeInt32(p.i32[:0], data)
		got, v = len(p.i32), encoding.Int32Values(p.i32)
	case parquet.Int64:
		p.i64, err = e.DecodeInt64(p.i64[:0], data)
		got, v = len(p.i64), encoding.Int64Values(p.i64)
	case parquet.Int96:
		p.i96, err = e.DecodeInt96(p.i96[:0], data)
		got, v = len(p.i96), encoding.Int96Values(p.i96)
	case parquet.Float:
		p.f32, err = e.DecodeFloat(p.f32[:0], data)
		got, v = len(p.f32), encoding.FloatValues(p.f32)
	case parquet.Double:
		p.f64, err = e.DecodeDouble(p.f64[:0], data)
		got, v = len(p.f64), encoding.DoubleValues(p.f64)
	case parquet.ByteArray:
		p.bytes, p.offs, err = e.DecodeByteArray(p.bytes[:0], data, p.offs[:0])
		got, v = max(len(p.offs)-1, 0), encoding.ByteArrayValues(p.bytes, p.offs)
	default:
		return v, fmt.Errorf("physical type %s not supported", p.kind)
	}
	if err != nil {
		return v, err
	}
	if got < n {
		return v, fmt.Errorf("%d values where the page declares %d", got, n)
	}
	return v, nil
}

// decompress returns the page's size bytes, decompressed.
func (p *pageReader) decompress(src []byte, size int) ([]byte, error) {
	var out []byte
	var err error
	switch p.codec {
	case format.Uncompressed:
		out = src
	case format.Snappy:
		n, derr := snappy.DecodedLen(src)
		if derr != nil || n != size {
			return nil, fmt.Errorf("snappy block of %d bytes, page header %d (%v)", n, size, derr)
		}
		out, err = snappy.Decode(p.unz[:cap(p.unz)], src)
	case format.Gzip:
		out, err = gunzip(p.unz[:0], src, size)
	case format.Lz4Raw:
		out, err = lz4Block(p.unz[:0], src, size)
	case format.Lz4:
		out, err = hadoopLZ4(p.unz[:0], src, size, &p.tmp)
	case format.Zstd:
		// The checked page header bounds the frame's content size, which
		// the decoder allocates up front.
		out, err = parquet.LookupCompressionCodec(p.codec).Decode(p.unz[:0], src)
	case format.Brotli:
		out, err = readAtMost(p.unz[:0], brotli.NewReader(bytes.NewReader(src)), size)
	default:
		return nil, fmt.Errorf("compression codec %s not supported (rewrite the file with zstd, snappy, gzip, brotli or lz4_raw)", p.codec)
	}
	if err != nil {
		return nil, fmt.Errorf("%s page: %v", p.codec, err)
	}
	if p.codec != format.Uncompressed {
		p.unz = out
	}
	if len(out) != size {
		return nil, fmt.Errorf("%s page decompressed to %d bytes, its header says %d", p.codec, len(out), size)
	}
	return out, nil
}

// gunzip inflates src, refusing more than size bytes.
func gunzip(dst, src []byte, size int) ([]byte, error) {
	zr, err := kgzip.NewReader(bytes.NewReader(src))
	if err != nil {
		return nil, err
	}
	if dst, err = readAtMost(dst, zr, size); err != nil {
		return nil, err
	}
	return dst, zr.Close()
}

// readAtMost appends what r decodes to dst, stopping one byte past size:
// the buffer grows with what the stream really holds, never to a claim.
func readAtMost(dst []byte, r io.Reader, size int) ([]byte, error) {
	w := bytes.NewBuffer(dst)
	_, err := io.Copy(w, io.LimitReader(r, int64(size)+1))
	return w.Bytes(), err
}

// rleFits refuses RLE / bit-packed hybrid data (width bits a value) whose
// repeated runs hold more than n values: parquet-go's decoder allocates a
// run as its header claims, and three bytes may claim 2^31 values.
// Bit-packed groups are bounded by their bytes (writers pad the last past
// n), save at width 0. Truncated data is left to the decoder.
func rleFits(src []byte, width, n int) error {
	var total uint64
	for i := 0; i < len(src); {
		u, w := binary.Uvarint(src[i:])
		if w <= 0 {
			return nil
		}
		i += w
		count, skip := u>>1, uint64((width+7)/8)
		if u&1 == 1 {
			count, skip = 8*(u>>1), (u>>1)*uint64(width)
		}
		if u&1 == 0 || width == 0 {
			if count > uint64(n+8)-min(total, uint64(n+8)) {
				return fmt.Errorf("RLE runs hold more than the page's %d values", n)
			}
			total += count
		}
		if skip > uint64(len(src)-i) {
			return nil
		}
		i += int(skip)
	}
	return nil
}

// hadoopLZ4 decompresses the deprecated LZ4 codec: Hadoop's framing of LZ4
// blocks (big-endian decompressed and compressed sizes before each), or,
// as some writers produced it, one bare LZ4 block.
func hadoopLZ4(dst, src []byte, size int, tmp *[]byte) ([]byte, error) {
	out := dst[:0]
	rest := src
	for len(rest) >= 8 {
		dn, cn := int(binary.BigEndian.Uint32(rest)), int(binary.BigEndian.Uint32(rest[4:]))
		if cn > len(rest)-8 || dn > size-len(out) {
			break
		}
		block, err := lz4Block((*tmp)[:0], rest[8:8+cn], dn)
		if err != nil {
			break
		}
		*tmp = block
		out = append(out, block...)
		rest = rest[8+cn:]
	}
	if len(rest) == 0 && len(out) == size {
		return out, nil
	}
	return lz4Block(dst[:0], src, size)
}

// lz4Block decompresses one LZ4 block (the LZ4_RAW codec) that must hold
// exactly size bytes, appending them to dst.
func lz4Block(dst, src []byte, size int) ([]byte, error) {
	out := dst[:0] // grown as the block decodes: its size is only claimed
	corrupt := errors.New("corrupt LZ4 block")
	length := func(i *int, n int) (int, error) {
		if n != 15 {
			return n, nil
		}
		for {
			if *i >= len(src) {
				return 0, corrupt
			}
			b := src[*i]
			*i++
			n += int(b)
			if n > size {
				return 0, corrupt
			}
			if b != 255 {
				return n, nil
			}
		}
	}
	for i := 0; i < len(src); {
		tok := src[i]
		i++
		lit, err := length(&i, int(tok>>4))
		if err != nil {
			return nil, err
		}
		if lit > len(src)-i || lit > size-len(out) {
			return nil, corrupt
		}
		out = append(out, src[i:i+lit]...)
		i += lit
		if i == len(src) {
			break // the last sequence has no match
		}
		if i+2 > len(src) {
			return nil, corrupt
		}
		off := int(src[i]) | int(src[i+1])<<8
		i += 2
		ml, err := length(&i, int(tok&15))
		if err != nil {
			return nil, err
		}
		ml += 4
		if off == 0 || off > len(out) || ml > size-len(out) {
			return nil, corrupt
		}
		from := len(out) - off
		for ml > 0 { // an offset under the length repeats the last bytes
			k := min(ml, off)
			out = append(out, out[from:from+k]...)
			from += k
			ml -= k
		}
	}
	if len(out) != size {
		return nil, fmt.Errorf("LZ4 block holds %d bytes, the page header says %d", len(out), size)
	}
	return out, nil
}

// rleBooleans decodes booleans in the RLE / bit-packed hybrid encoding
// (bit width 1, after a 4-byte length: what pyarrow writes in v2 data
// pages) into a bitmap, least significant bit first, and returns how many
// values it holds. parquet-go's decoder fills a repeated run with the run's
// value byte (0x01 for true), which reads as one true in eight. A repeated
// run past the page's limit values is refused before it is expanded.
func rleBooleans(dst, src []byte, limit int) ([]byte, int, error) {
	if len(src) < 4 {
		return dst, 0, fmt.Errorf("boolean RLE: %d bytes, shorter than the length prefix", len(src))
	}
	k := int(binary.LittleEndian.Uint32(src))
	if k > len(src)-4 {
		return dst, 0, fmt.Errorf("boolean RLE: length %d, the page has %d bytes", k, len(src)-4)
	}
	src = src[4 : 4+k]
	n := 0
	set := func(b bool) {
		if n%8 == 0 {
			dst = append(dst, 0)
		}
		if b {
			dst[len(dst)-1] |= 1 << (n % 8)
		}
		n++
	}
	for i := 0; i < len(src); {
		u, w := binary.Uvarint(src[i:])
		if w <= 0 {
			return dst, n, errors.New("boolean RLE: truncated run header")
		}
		i += w
		count := u >> 1
		if u&1 == 1 { // count groups of 8 bit-packed values
			if int(count) > len(src)-i {
				return dst, n, errors.New("boolean RLE: truncated bit-packed group")
			}
			for _, b := range src[i : i+int(count)] {
				for j := range 8 {
					set(b>>j&1 == 1)
				}
			}
			i += int(count)
			continue
		}
		if i >= len(src) {
			return dst, n, errors.New("boolean RLE: a run without its value")
		}
		if count > uint64(max(limit+8-n, 0)) {
			return dst, n, fmt.Errorf("boolean RLE: a run of %d values past the page's %d", count, limit)
		}
		v := src[i]&1 == 1
		i++
		for range count {
			set(v)
		}
	}
	return dst, n, nil
}
