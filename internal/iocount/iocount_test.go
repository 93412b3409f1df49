package iocount

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWriter(t *testing.T) {
	var buf bytes.Buffer
	for _, c := range []struct {
		name string
		w    *Writer
		out  string
	}{
		{"passes on", &Writer{W: &buf}, "abcde"},
		{"discards", &Writer{}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			buf.Reset()
			for _, s := range []string{"ab", "cde"} {
				n, err := c.w.Write([]byte(s))
				require.NoError(t, err)
				assert.Equal(t, len(s), n)
			}
			assert.Equal(t, int64(5), c.w.N)
			assert.Equal(t, c.out, buf.String())
		})
	}
}
