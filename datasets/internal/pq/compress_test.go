package pq

import (
	"encoding/binary"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
	"github.com/parquet-go/parquet-go/format"
	"github.com/stretchr/testify/require"
)

// The LZ4 decoders: raw blocks (LZ4_RAW), Hadoop's framing of blocks (the
// deprecated LZ4 codec), and a bare block under the LZ4 codec; damage is
// an error, never more output than the page header declares.
func TestLZ4(t *testing.T) {
	var src []byte
	for i := range 5000 {
		src = append(src, byte(i%7), byte(i%251), 'x', 'y', 'x', 'y')
	}
	block, err := parquet.LookupCompressionCodec(format.Lz4Raw).Encode(nil, src)
	require.NoError(t, err)
	require.Less(t, len(block), len(src)/3, "a compressible input")

	got, err := lz4Block(nil, block, len(src))
	require.NoError(t, err)
	require.Equal(t, src, got)

	var framed []byte
	half := len(src) / 2
	for _, part := range [][]byte{src[:half], src[half:]} {
		b, err := parquet.LookupCompressionCodec(format.Lz4Raw).Encode(nil, part)
		require.NoError(t, err)
		framed = binary.BigEndian.AppendUint32(framed, uint32(len(part)))
		framed = binary.BigEndian.AppendUint32(framed, uint32(len(b)))
		framed = append(framed, b...)
	}
	var tmp []byte
	got, err = hadoopLZ4(nil, framed, len(src), &tmp)
	require.NoError(t, err)
	require.Equal(t, src, got, "Hadoop framing")
	got, err = hadoopLZ4(nil, block, len(src), &tmp)
	require.NoError(t, err)
	require.Equal(t, src, got, "a bare block under the LZ4 codec")

	_, err = lz4Block(nil, block, len(src)-1)
	require.Error(t, err, "more output than declared")
	damaged := append([]byte(nil), block...)
	for i := 20; i < 40; i++ {
		damaged[i] = 0xff
	}
	if out, err := lz4Block(nil, damaged, len(src)); err == nil {
		require.Len(t, out, len(src))
	}
	_, err = lz4Block(nil, []byte{0x0f, 1, 0}, 100)
	require.ErrorContains(t, err, "corrupt LZ4 block", "a match before any output")
}

// Raw zstd frames (stored pages of incompressible columns) decode with a
// standard zstd decoder, at every frame-content-size width and across the
// 128 KiB block limit.
func TestZstdRawFrames(t *testing.T) {
	for _, n := range []int{0, 1, 255, 256, 300, 65791, 65792, 65793, 128 << 10, 300_000} {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(i*7 + i/300)
		}
		frame := appendZstdRaw(nil, src)
		fcs, ok := zstdContentSize(frame)
		require.True(t, ok, "size %d", n)
		require.Equal(t, uint64(n), fcs)
		got, err := (&zstd.Codec{}).Decode(nil, frame)
		require.NoError(t, err, "size %d", n)
		require.Equal(t, src, got, "size %d", n)
	}
}
