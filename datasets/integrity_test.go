package datasets

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHostileFiles: files that are small on disk but endless, blocking,
// claiming more than they hold or outside the dataset are refused before
// they are read, with an error naming the file, allocating at most
// maxHostileAlloc bytes (a part file here is under 2 KiB).
func TestHostileFiles(t *testing.T) {
	const maxHostileAlloc = 4 << 20
	const part = "requests.parquet/part-000003.parquet"
	cases := []struct {
		name string
		edit func(t *testing.T, dir string)
		want string
	}{
		{"fifo part", func(t *testing.T, dir string) {
			p := filepath.Join(dir, part)
			require.NoError(t, os.Remove(p))
			require.NoError(t, syscall.Mkfifo(p, 0o644))
		}, "not a regular file (a named pipe)"},
		{"fifo manifest", func(t *testing.T, dir string) {
			p := filepath.Join(dir, ManifestFile)
			require.NoError(t, os.Remove(p))
			require.NoError(t, syscall.Mkfifo(p, 0o644))
		}, "manifest.json: not a regular file (a named pipe)"},
		{"manifest linked to a device", func(t *testing.T, dir string) {
			p := filepath.Join(dir, ManifestFile)
			require.NoError(t, os.Remove(p))
			require.NoError(t, os.Symlink("/dev/zero", p))
		}, "manifest.json: not a regular file (a character device)"},
		{"part linked out of the dataset", func(t *testing.T, dir string) {
			p := filepath.Join(dir, part)
			out := filepath.Join(t.TempDir(), "elsewhere.parquet")
			require.NoError(t, os.Rename(p, out))
			require.NoError(t, os.Symlink(out, p))
		}, "a symlink out of the dataset"},
		{"manifest part path outside", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m *Manifest) {
				ti := m.Tables[TableRequests]
				ti.Parts[0].File = "../../../../etc/passwd"
				m.Tables[TableRequests] = ti
			})
		}, `tables.requests.parts[0].file "../../../../etc/passwd" is not a path inside the dataset`},
		{"manifest part path absolute", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m *Manifest) {
				ti := m.Tables[TableRequests]
				ti.Parts[1].File = "/etc/passwd"
				m.Tables[TableRequests] = ti
			})
		}, `tables.requests.parts[1].file "/etc/passwd" is not a path inside the dataset`},
		{"manifest too large", func(t *testing.T, dir string) {
			require.NoError(t, os.Truncate(filepath.Join(dir, ManifestFile), MaxManifestBytes+1))
		}, "more than the 67108864 a reader takes"},
		{"sparse part with a huge footer claim", func(t *testing.T, dir string) {
			p := filepath.Join(dir, part)
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
			require.NoError(t, err)
			const size = 4 << 30
			var tail [8]byte
			binary.LittleEndian.PutUint32(tail[:4], 2<<30)
			copy(tail[4:], "PAR1")
			_, err = f.WriteAt([]byte("PAR1"), 0)
			require.NoError(t, err)
			_, err = f.WriteAt(tail[:], size-8)
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}, "footer claims 2147483648 bytes"},
		{"page claiming 256 MiB", func(t *testing.T, dir string) {
			p := filepath.Join(dir, part)
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			b, err = hugePageClaim(b)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(p, b, 0o644))
		}, "cannot decompress to the 268435456 its header claims"},
		{"listed part missing", func(t *testing.T, dir string) {
			require.NoError(t, os.Remove(filepath.Join(dir, part)))
		}, "manifest.json lists " + part + ", missing on disk"},
		{"listed table missing", func(t *testing.T, dir string) {
			require.NoError(t, os.RemoveAll(filepath.Join(dir, "requests.parquet")))
		}, "manifest.json lists table requests (300 rows), missing on disk"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "ds")
			require.NoError(t, os.CopyFS(dir, os.DirFS(filepath.Join("h200", "traffic-azure-5rps"))))
			tc.edit(t, dir)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			d, err := Open(dir)
			if err == nil {
				_, err = ReadAll[Request](d, TableRequests)
			}
			runtime.ReadMemStats(&after)
			require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(maxHostileAlloc), "bytes allocated")
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
			require.Contains(t, err.Error(), dir)
		})
	}
}

func editManifest(t *testing.T, dir string, edit func(m *Manifest)) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	require.NoError(t, err)
	var m Manifest
	require.NoError(t, json.Unmarshal(b, &m))
	edit(&m)
	require.NoError(t, WriteManifest(dir, &m))
}

// TestPartRows: a part whose rows differ from its footer's or the
// manifest's count is refused, naming it.
func TestPartRows(t *testing.T) {
	d := &Dataset{Dir: "ds", Manifest: &Manifest{Tables: map[string]TableInfo{
		TableSteps: {Rows: 10, Parts: []PartInfo{{File: "steps.parquet/part-000000.parquet", Rows: 10}}}}}}
	p := filepath.Join("ds", "steps.parquet", "part-000000.parquet")
	require.NoError(t, d.PartRows(TableSteps, p, 10, 10))
	require.ErrorContains(t, d.PartRows(TableSteps, p, 8, 10), p+": 8 rows read, its footer says 10")
	require.ErrorContains(t, d.PartRows(TableSteps, p, 9, 9), p+": 9 rows, manifest.json records 10")
	require.NoError(t, d.PartRows(TableSteps, filepath.Join("ds", "steps.parquet", "unlisted.parquet"), 9, 9))
	require.ErrorIs(t, d.PartRows(TableSteps, p, 9, 9), ErrRowCount)
}

func TestComparePartPaths(t *testing.T) {
	paths := []string{"t/dp_rank=10/a.parquet", "t/dp_rank=2/b.parquet", "t/dp_rank=2/a.parquet", "t/dp_rank=x/a.parquet", "t/dp_rank=-1/a.parquet"}
	slices.SortFunc(paths, comparePartPaths)
	require.Equal(t, []string{"t/dp_rank=-1/a.parquet", "t/dp_rank=2/a.parquet", "t/dp_rank=2/b.parquet", "t/dp_rank=10/a.parquet", "t/dp_rank=x/a.parquet"}, paths)
	require.Equal(t, "kind=decode/dp_rank=2", PartitionDir(filepath.Join("ds", "steps.parquet", "kind=decode", "dp_rank=2", "p.parquet")))
	require.Equal(t, "", PartitionDir(filepath.Join("ds", "steps.parquet", "p.parquet")))
}
