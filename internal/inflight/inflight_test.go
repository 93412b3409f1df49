package inflight

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Stop removes what is tracked, keeps what is done, and refuses new files.
func TestStop(t *testing.T) {
	dir := t.TempDir()
	open, err := CreateTemp(dir, ".a.tmp-*")
	require.NoError(t, err)
	defer open.Close()
	done, err := Create(filepath.Join(dir, "b.tmp"))
	require.NoError(t, err)
	require.NoError(t, done.Close())
	require.NoError(t, os.Rename(done.Name(), filepath.Join(dir, "b")))
	Done(done.Name())
	staging := filepath.Join(dir, ".staging")
	require.NoError(t, os.Mkdir(staging, 0o755))
	require.NoError(t, Track(staging))

	removed := Stop()
	assert.ElementsMatch(t, []string{open.Name(), staging}, removed)
	assert.NoFileExists(t, open.Name())
	assert.NoDirExists(t, staging)
	assert.FileExists(t, filepath.Join(dir, "b"))

	_, err = Create(filepath.Join(dir, "c.tmp"))
	require.ErrorIs(t, err, ErrStopped)
	assert.NoFileExists(t, filepath.Join(dir, "c.tmp"), "no file is created after Stop")
	_, err = CreateTemp(dir, ".d.tmp-*")
	require.ErrorIs(t, err, ErrStopped)
	// A writer still at work cannot recreate the staging directory Stop
	// removed (a table's folder inside it).
	require.ErrorIs(t, MkdirAll(filepath.Join(staging, "steps"), 0o755), ErrStopped)
	assert.NoDirExists(t, staging)
}
