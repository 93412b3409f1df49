package datasets

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// hugePageClaim rewrites the first column chunk of a zstd part as one page
// of 20 bytes whose header and zstd frame both claim 256 MiB: a decoder
// that sizes its buffer by either claim allocates 256 MiB for a file of a
// few KiB. The page's CRC-32 and value count are right, so only the size
// claims are wrong. The new chunk and footer are appended after the data.
func hugePageClaim(part []byte) ([]byte, error) {
	if len(part) < 12 {
		return nil, fmt.Errorf("part of %d bytes", len(part))
	}
	footerLen := int(binary.LittleEndian.Uint32(part[len(part)-8:]))
	footerAt := len(part) - 8 - footerLen
	if footerAt < 4 {
		return nil, fmt.Errorf("footer of %d bytes", footerLen)
	}
	proto := new(thrift.CompactProtocol)
	var md format.FileMetaData
	if err := thrift.Unmarshal(proto, part[footerAt:len(part)-8], &md); err != nil {
		return nil, err
	}
	if len(md.RowGroups) == 0 || len(md.RowGroups[0].Columns) == 0 {
		return nil, fmt.Errorf("no column chunk")
	}
	cmd := &md.RowGroups[0].Columns[0].MetaData
	var old format.PageHeader
	chunk := bytes.NewReader(part[cmd.DataPageOffset : cmd.DataPageOffset+cmd.TotalCompressedSize])
	if err := thrift.NewDecoder(proto.NewReader(chunk)).Decode(&old); err != nil {
		return nil, err
	}
	const claim = 256 << 20
	// zstd frame: magic, single segment with an 8-byte content size, then
	// one raw block of 4 bytes.
	body := []byte{0x28, 0xB5, 0x2F, 0xFD, 0xE0}
	body = binary.LittleEndian.AppendUint64(body, claim)
	body = append(body, 4<<3|1, 0, 0, 1, 2, 3, 4)
	h := format.PageHeader{
		Type: format.DataPage, UncompressedPageSize: claim,
		CompressedPageSize: int32(len(body)), CRC: int32(crc32.ChecksumIEEE(body)),
	}
	h.DataPageHeader.Valid, h.DataPageHeader.V = true, old.DataPageHeader.V
	hb, err := thrift.Marshal(proto, &h)
	if err != nil {
		return nil, err
	}
	out := bytes.Clone(part[:footerAt])
	cmd.Codec, cmd.DataPageOffset, cmd.DictionaryPageOffset = format.Zstd, int64(len(out)), 0
	cmd.TotalCompressedSize = int64(len(hb) + len(body))
	out = append(append(out, hb...), body...)
	footer, err := thrift.Marshal(proto, &md)
	if err != nil {
		return nil, err
	}
	out = binary.LittleEndian.AppendUint32(append(out, footer...), uint32(len(footer)))
	return append(out, "PAR1"...), nil
}
