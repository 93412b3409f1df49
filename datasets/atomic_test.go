package datasets

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// WriteAtomic creates missing parent directories, leaves the whole file
// on success, and nothing (not even its temporary file) on failure.
func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out", "sub", "x.json")
	require.NoError(t, WriteFileAtomic(path, []byte("{}\n")))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "{}\n", string(b))

	failed := filepath.Join(dir, "out", "failed.json")
	err = WriteAtomic(failed, func(w io.Writer) error {
		_, _ = w.Write([]byte("partial"))
		return errors.New("boom")
	})
	require.EqualError(t, err, "boom")
	entries, err := os.ReadDir(filepath.Join(dir, "out"))
	require.NoError(t, err)
	require.Len(t, entries, 1, "only sub/ is left: %v", entries)
}
