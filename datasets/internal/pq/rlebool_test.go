package pq

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
)

// Booleans in the RLE / bit-packed hybrid encoding (pyarrow's v2 data
// pages): repeated runs and bit-packed groups decode to the bitmap of
// the values, and malformed input is an error, not a panic.
func TestRLEBooleans(t *testing.T) {
	withLen := func(b ...byte) []byte {
		out := binary.LittleEndian.AppendUint32(nil, uint32(len(b)))
		return append(out, b...)
	}
	for _, c := range []struct {
		name string
		in   []byte
		want []bool
		err  string
	}{
		// header (count<<1 | 0), value
		{"run of 10 trues", withLen(10<<1, 1), repeat(true, 10), ""},
		{"run of 3 falses then 2 trues", withLen(3<<1, 0, 2<<1, 1), []bool{false, false, false, true, true}, ""},
		// header (groups<<1 | 1), then the groups' bytes, LSB first
		{"bit-packed group", withLen(1<<1|1, 0b10100101), []bool{true, false, true, false, false, true, false, true}, ""},
		{"run then group", withLen(2<<1, 1, 1<<1|1, 0b00000001), append(repeat(true, 2), true, false, false, false, false, false, false, false), ""},
		{"no length", []byte{1, 2}, nil, "shorter than the length prefix"},
		{"length beyond the page", append(binary.LittleEndian.AppendUint32(nil, 9), 2, 1), nil, "the page has 2 bytes"},
		{"run without its value", withLen(4 << 1), nil, "without its value"},
		{"truncated group", withLen(2<<1|1, 0xff), nil, "truncated bit-packed group"},
		// a 5-byte header claiming 2^31-1 values, past the page's 2^20
		{"run past the page", withLen(0xfe, 0xff, 0xff, 0xff, 0x0f, 1), nil, "a run of 2147483647 values past the page's 1048576"},
	} {
		t.Run(c.name, func(t *testing.T) {
			bits, n, err := rleBooleans(nil, c.in, 1<<20)
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, len(c.want), n)
			for i, w := range c.want {
				require.Equal(t, w, bits[i/8]>>(i%8)&1 == 1, "value %d", i)
			}
		})
	}
}

func repeat(v bool, n int) []bool {
	out := make([]bool, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// TestRLEFits: repeated runs past a page's value count are refused before
// parquet-go expands them; bit-packed groups, bounded by their bytes and
// padded past the count by writers, are not counted unless 0 bits wide.
func TestRLEFits(t *testing.T) {
	for _, c := range []struct {
		name   string
		in     []byte
		width  int
		n      int
		errMsg string
	}{
		{"runs of exactly n", []byte{10 << 1, 1, 6 << 1, 0}, 1, 16, ""},
		{"groups padded past n", []byte{4<<1 | 1, 0xff, 0xff, 0xff, 0xff}, 1, 3, ""},
		{"run past n", []byte{10 << 1, 1, 7 << 1, 0}, 1, 8, "more than the page's 8 values"},
		{"2^31 from 6 bytes", []byte{0xfe, 0xff, 0xff, 0xff, 0x0f, 1}, 1, 100, "more than the page's 100"},
		{"width 0 groups", []byte{0xff, 0xff, 0x7f}, 0, 100, "more than the page's 100"},
		{"truncated header left to the decoder", []byte{0x80}, 1, 1, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := rleFits(c.in, c.width, c.n)
			if c.errMsg == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, c.errMsg)
		})
	}
}
