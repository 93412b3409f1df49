package datasets

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Two trees agree exactly when their files' names and bytes do.
func TestDirSHA256(t *testing.T) {
	tree := func(files map[string]string) string {
		dir := t.TempDir()
		for name, body := range files {
			p := filepath.Join(dir, filepath.FromSlash(name))
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		}
		sha, err := DirSHA256(dir)
		require.NoError(t, err)
		return sha
	}
	a := tree(map[string]string{"m.json": "{}", "t/part-0.parquet": "xy"})
	assert.Equal(t, a, tree(map[string]string{"t/part-0.parquet": "xy", "m.json": "{}"}))
	assert.NotEqual(t, a, tree(map[string]string{"m.json": "{}", "t/part-0.parquet": "xz"}), "a byte")
	assert.NotEqual(t, a, tree(map[string]string{"m.json": "{}", "u/part-0.parquet": "xy"}), "a name")
	assert.NotEqual(t, a, tree(map[string]string{"m.json": "{}xy", "t/part-0.parquet": ""}), "where the bytes are")
	_, err := DirSHA256(filepath.Join(t.TempDir(), "none"))
	assert.Error(t, err)
}
