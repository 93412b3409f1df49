package datasets

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets/internal/pq"
)

func TestCreateRefuses(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, dir string)
		opts    CreateOptions
		wantErr string // "" for success
	}{
		{"new directory", func(t *testing.T, dir string) {}, CreateOptions{}, ""},
		{"empty directory", func(t *testing.T, dir string) { require.NoError(t, os.Mkdir(dir, 0o755)) }, CreateOptions{}, ""},
		{"non-empty directory", writeStray, CreateOptions{}, "already exists and is not empty"},
		{"non-dataset directory, overwrite", writeStray, CreateOptions{Overwrite: true}, "not a steplab dataset"},
		{"a file", func(t *testing.T, dir string) { require.NoError(t, os.WriteFile(dir, []byte("x"), 0o644)) }, CreateOptions{Overwrite: true}, "not a directory"},
		{"dataset, overwrite", func(t *testing.T, dir string) {
			writeTable(t, dir, TableSteps, simSteps(10, 1), TableOptions{}, false)
		}, CreateOptions{Overwrite: true}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "ds")
			tc.setup(t, dir)
			w, err := Create(dir, Manifest{}, tc.opts)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				require.ErrorContains(t, err, dir)
				if _, serr := os.Stat(filepath.Join(dir, "notes.txt")); tc.name != "a file" {
					require.NoError(t, serr, "a refused Create must leave the directory alone")
				}
				return
			}
			require.NoError(t, err)
			m, err := ReadManifest(w.Dir())
			require.NoError(t, err)
			assert.Equal(t, DatasetPartial, m.Status, "a dataset being written is partial")
			assert.Empty(t, m.Tables, "overwrite starts from an empty dataset")
			assert.NoDirExists(t, TableDir(w.Dir(), TableSteps))
			require.NoError(t, w.Close())
			assert.NoDirExists(t, TableDir(dir, TableSteps), "Close put the new dataset in place")
		})
	}
}

func writeStray(t *testing.T, dir string) {
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644))
}

func TestWriterLifecycle(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ds")
	w, err := Create(dir, Manifest{Source: Source{Kind: "test"}}, CreateOptions{})
	require.NoError(t, err)
	tw, err := NewTableWriter[Step](w, TableSteps, TableOptions{})
	require.NoError(t, err)
	_, err = NewTableWriter[Step](w, TableSteps, TableOptions{})
	require.ErrorContains(t, err, "opened twice")
	_, err = NewTableWriter[Step](w, "../evil", TableOptions{})
	require.ErrorContains(t, err, "bad table name")

	require.NoError(t, tw.Write(simSteps(10, 1)))
	require.ErrorContains(t, w.Close(), "tables still open: [steps]")

	require.NoError(t, tw.Close())
	require.NoError(t, tw.Close(), "TableWriter.Close is idempotent")
	require.ErrorContains(t, tw.Write(simSteps(1, 1)), "closed")
	require.ErrorContains(t, tw.Append(Step{}), "closed")

	require.NoError(t, w.UpdateManifest(func(m *Manifest) {
		m.Notes = append(m.Notes, "hello")
		m.Status = "bogus" // ignored: the writer owns the status
	}))
	require.NoError(t, w.Close())
	require.NoError(t, w.Close(), "Writer.Close is idempotent")
	require.NoError(t, w.Abort("too late"), "Abort after Close is a no-op")
	_, err = NewTableWriter[Request](w, TableRequests, TableOptions{})
	require.ErrorContains(t, err, "closed")

	m, err := ReadManifest(dir)
	require.NoError(t, err)
	assert.Equal(t, DatasetComplete, m.Status)
	assert.Equal(t, []string{"hello"}, m.Notes)
	assert.Equal(t, int64(10), m.Tables[TableSteps].Rows)
}

func TestAbort(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ds")
	w, err := Create(dir, Manifest{}, CreateOptions{})
	require.NoError(t, err)
	tw, err := NewTableWriter[Step](w, TableSteps, TableOptions{PartRows: 100})
	require.NoError(t, err)
	rows := simSteps(250, 2)
	require.NoError(t, tw.Write(rows))
	tmp := filepath.Join(TableDir(dir, TableSteps), ".part-000002.parquet.tmp")
	require.FileExists(t, tmp, "the third part is open")

	require.NoError(t, w.Abort("capture failed: worker died"))
	assert.NoFileExists(t, tmp, "Abort discards the open part")
	require.ErrorContains(t, tw.Write(rows[:1]), "aborted")
	require.ErrorContains(t, tw.Close(), "aborted")
	require.ErrorContains(t, w.Close(), "aborted")

	d, err := Open(dir)
	require.NoError(t, err)
	assert.Equal(t, DatasetPartial, d.Manifest.Status)
	assert.Equal(t, []string{"partial: capture failed: worker died"}, d.Manifest.Notes)
	got, err := ReadAll[Step](d, TableSteps)
	require.NoError(t, err)
	require.Equal(t, rows[:200], got, "the two completed parts stay readable")
}

// TestInterruptedWriter kills a writer process (SIGKILL) while it has
// completed parts and one part open, then checks what is left.
func TestInterruptedWriter(t *testing.T) {
	if dir := os.Getenv("STEPLAB_DOOMED_WRITER"); dir != "" {
		doomedWriter(dir)
		return
	}
	if testing.Short() {
		t.Skip("starts a subprocess")
	}
	dir := filepath.Join(t.TempDir(), "ds")
	cmd := exec.Command(os.Args[0], "-test.run=^TestInterruptedWriter$")
	cmd.Env = append(os.Environ(), "STEPLAB_DOOMED_WRITER="+dir)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	ready := filepath.Join(filepath.Dir(dir), "ready")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the writer subprocess never got ready")
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, cmd.Process.Kill()) // SIGKILL: no deferred cleanup runs
	err := cmd.Wait()
	require.Error(t, err, "the writer was killed, not finished")

	d, err := Open(dir)
	require.NoError(t, err)
	require.Equal(t, DatasetPartial, d.Manifest.Status)
	listed := d.Manifest.Tables[TableSteps].Parts
	require.Len(t, listed, 3)
	for i, p := range listed {
		assert.Equal(t, int64(doomedPartRows), p.Rows)
		assert.Equal(t, "steps.parquet/part-00000"+string(rune('0'+i))+".parquet", p.File)
	}

	rep, err := d.Check()
	require.NoError(t, err)
	require.True(t, rep.OK(), "problems: %v", rep.Problems())
	states := map[string]int{}
	for _, p := range rep.Parts {
		states[p.State]++
		if p.State == PartTemporary {
			assert.Equal(t, "steps.parquet/.part-000003.parquet.tmp", p.File)
		}
	}
	assert.Equal(t, map[string]int{PartOK: 3, PartTemporary: 1}, states)

	parts, err := d.Parts(TableSteps)
	require.NoError(t, err)
	require.Len(t, parts, 3, "readers ignore the temporary part")
	got, err := ReadAll[Step](d, TableSteps)
	require.NoError(t, err)
	require.Equal(t, simSteps(3*doomedPartRows, 4), got)
}

const doomedPartRows = 1000

// doomedWriter completes three parts, leaves a fourth open with rows in it,
// says so, and waits to be killed.
func doomedWriter(dir string) {
	w, err := Create(dir, Manifest{Source: Source{Kind: "capture"}}, CreateOptions{})
	if err != nil {
		panic(err)
	}
	tw, err := NewTableWriter[Step](w, TableSteps, TableOptions{RowGroupRows: 300, PartRows: doomedPartRows})
	if err != nil {
		panic(err)
	}
	rows := simSteps(3*doomedPartRows+500, 4)
	for _, r := range rows {
		if err := tw.Append(r); err != nil {
			panic(err)
		}
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(dir), "ready"), nil, 0o644); err != nil {
		panic(err)
	}
	time.Sleep(time.Minute)
	os.Exit(3)
}

func TestCheckReportsDamage(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ds")
	writeTable(t, dir, TableSteps, simSteps(400, 1), TableOptions{PartRows: 100}, false)
	writeTable(t, dir+"2", TableRequests, simRequests(50, 1), TableOptions{}, false)
	tdir := TableDir(dir, TableSteps)

	// part 0: flip a byte; part 1: delete; part 3: truncate the manifest's
	// view by rewriting its row count; plus a stray unlisted part.
	p0 := filepath.Join(tdir, "part-000000.parquet")
	b, err := os.ReadFile(p0)
	require.NoError(t, err)
	b[len(b)/2] ^= 0x40
	require.NoError(t, os.WriteFile(p0, b, 0o644))
	require.NoError(t, os.Remove(filepath.Join(tdir, "part-000001.parquet")))
	m, err := ReadManifest(dir)
	require.NoError(t, err)
	ti := m.Tables[TableSteps]
	ti.Parts[3].Rows = 99
	m.Tables[TableSteps] = ti
	require.NoError(t, WriteManifest(dir, m))
	other, err := os.ReadFile(filepath.Join(TableDir(dir+"2", TableRequests), "part-000000.parquet"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(tdir, "part-000009.parquet"), other, 0o644))

	d, err := Open(dir)
	require.NoError(t, err)
	rep, err := d.Check()
	require.NoError(t, err)
	assert.False(t, rep.OK())
	got := map[string]string{}
	for _, p := range rep.Parts {
		got[p.File] = p.State
	}
	assert.Equal(t, map[string]string{
		"steps.parquet/part-000000.parquet": PartMismatch,
		"steps.parquet/part-000001.parquet": PartMissing,
		"steps.parquet/part-000002.parquet": PartOK,
		"steps.parquet/part-000003.parquet": PartMismatch,
		"steps.parquet/part-000009.parquet": PartUnlisted,
	}, got)
	probs := strings.Join(rep.Problems(), "\n")
	assert.Contains(t, probs, "sha256 differs")
	assert.Contains(t, probs, "100 rows, manifest says 99")
	assert.Len(t, rep.Problems(), 3)

	// The report is JSON a validator can print.
	j, err := json.Marshal(rep)
	require.NoError(t, err)
	assert.Contains(t, string(j), `"state":"missing"`)
}

// Writing streams: the live heap after many parts is no larger than after
// the first, whatever the table's length.
func TestWriterMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 400k rows")
	}
	dir := filepath.Join(t.TempDir(), "ds")
	w, err := Create(dir, Manifest{}, CreateOptions{})
	require.NoError(t, err)
	tw, err := NewTableWriter[Step](w, TableSteps, TableOptions{RowGroupRows: 8192, PartRows: 50_000})
	require.NoError(t, err)
	g := newStepGen(1)
	buf := make([]Step, 1000)
	live := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	var first uint64
	for i := range 400 {
		g.fill(buf)
		require.NoError(t, tw.Write(buf))
		if i == 60 {
			first = live()
		}
	}
	last := live()
	require.NoError(t, tw.Close())
	require.NoError(t, w.Close())
	assert.LessOrEqual(t, last, first+4<<20, "live heap grew from %d to %d bytes over 340k more rows", first, last)
	m, err := ReadManifest(dir)
	require.NoError(t, err)
	assert.Equal(t, int64(400_000), m.Tables[TableSteps].Rows)
	assert.Len(t, m.Tables[TableSteps].Parts, 8)
}

// Every column chunk carries its min/max and null count, and every page
// its bounds (ColumnIndex) and location (OffsetIndex): checked here against
// the rows, from the bytes of the file.
func TestColumnStatistics(t *testing.T) {
	rows := simSteps(70000, 6)
	for i := range rows {
		rows[i].StepID = int64(i)
		// Only the first row group's second page is valid: pages of one
		// flag have bounds other than false..true.
		rows[i].Valid = i >= pq.PageRows && i < 40000
	}
	dir := filepath.Join(t.TempDir(), "ds")
	writeTable(t, dir, TableSteps, rows, TableOptions{RowGroupRows: 40000}, false)
	parts, err := (&Dataset{Dir: dir}).Parts(TableSteps)
	require.NoError(t, err)
	b, err := os.ReadFile(parts[0])
	require.NoError(t, err)
	pf, f, err := OpenParquet(parts[0])
	require.NoError(t, err)
	defer f.Close()
	md := pf.Metadata()
	require.Len(t, md.ColumnOrders, len(md.RowGroups[0].Columns), "a type-defined order per column")

	type col struct {
		name string
		cmp  func(a, b []byte) int // orders plain values as the column's type
		val  func(s *Step) []byte  // plain encoding
	}
	i64 := func(v int64) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(v)) }
	cmpI64 := func(a, b []byte) int {
		return cmp.Compare(int64(binary.LittleEndian.Uint64(a)), int64(binary.LittleEndian.Uint64(b)))
	}
	cmpI32 := func(a, b []byte) int {
		return cmp.Compare(int32(binary.LittleEndian.Uint32(a)), int32(binary.LittleEndian.Uint32(b)))
	}
	cmpF64 := func(a, b []byte) int {
		return cmp.Compare(math.Float64frombits(binary.LittleEndian.Uint64(a)), math.Float64frombits(binary.LittleEndian.Uint64(b)))
	}
	cols := []col{
		{"step_id", cmpI64, func(s *Step) []byte { return i64(s.StepID) }},
		{"wall_time_ns", cmpI64, func(s *Step) []byte { return i64(s.WallTimeNs) }},
		{"t_output", cmpI64, func(s *Step) []byte { return i64(s.TOutput) }},
		{"num_decode_requests", cmpI32, func(s *Step) []byte { return binary.LittleEndian.AppendUint32(nil, uint32(s.NumDecodeRequests)) }},
		{"var_decode_kv_tokens", cmpF64, func(s *Step) []byte {
			return binary.LittleEndian.AppendUint64(nil, math.Float64bits(s.VarDecodeKVTokens))
		}},
		{"valid", bytes.Compare, func(s *Step) []byte {
			if s.Valid {
				return []byte{1}
			}
			return []byte{0}
		}},
		{"kind", bytes.Compare, func(s *Step) []byte { return []byte(s.Kind) }},
	}
	bounds := func(c col, rs []Step) (lo, hi []byte) {
		for i := range rs {
			v := c.val(&rs[i])
			if lo == nil || c.cmp(v, lo) < 0 {
				lo = v
			}
			if hi == nil || c.cmp(v, hi) > 0 {
				hi = v
			}
		}
		return lo, hi
	}
	first := 0
	for r, rg := range md.RowGroups {
		rgRows := rows[first : first+int(rg.NumRows)]
		for _, c := range cols {
			ci := slices.IndexFunc(rg.Columns, func(cc format.ColumnChunk) bool { return cc.MetaData.PathInSchema[0] == c.name })
			require.GreaterOrEqual(t, ci, 0, c.name)
			cc := rg.Columns[ci]
			lo, hi := bounds(c, rgRows)
			st := cc.MetaData.Statistics
			require.Equal(t, lo, st.MinValue, "row group %d %s min", r, c.name)
			require.Equal(t, hi, st.MaxValue, "row group %d %s max", r, c.name)
			require.Zero(t, st.NullCount)

			var oi format.OffsetIndex
			require.NoError(t, thrift.Unmarshal(new(thrift.CompactProtocol), b[cc.OffsetIndexOffset:cc.OffsetIndexOffset+int64(cc.OffsetIndexLength)], &oi))
			var ix format.ColumnIndex
			require.NoError(t, thrift.Unmarshal(new(thrift.CompactProtocol), b[cc.ColumnIndexOffset:cc.ColumnIndexOffset+int64(cc.ColumnIndexLength)], &ix))
			require.Len(t, ix.MinValues, len(oi.PageLocations))
			require.Equal(t, (len(rgRows)+pq.PageRows-1)/pq.PageRows, len(oi.PageLocations), "pages of %d rows", pq.PageRows)
			if c.name == "step_id" {
				require.Equal(t, format.Ascending, ix.BoundaryOrder)
			}
			for p, loc := range oi.PageLocations {
				require.Equal(t, int64(p*pq.PageRows), loc.FirstRowIndex)
				var h format.PageHeader
				rd := bytes.NewReader(b[loc.Offset : loc.Offset+int64(loc.CompressedPageSize)])
				require.NoError(t, thrift.NewDecoder(new(thrift.CompactProtocol).NewReader(rd)).Decode(&h))
				require.Equal(t, format.DataPage, h.Type, "the offset index points at a data page header")
				require.Equal(t, int(h.CompressedPageSize), rd.Len(), "header and body fill the location")
				pageRowsOf := rgRows[p*pq.PageRows : min((p+1)*pq.PageRows, len(rgRows))]
				require.Equal(t, int32(len(pageRowsOf)), h.DataPageHeader.V.NumValues)
				plo, phi := bounds(c, pageRowsOf)
				if c.name == "kind" {
					// dictionary pages take the dictionary's bounds so far
					require.LessOrEqual(t, c.cmp(ix.MinValues[p], plo), 0)
					require.GreaterOrEqual(t, c.cmp(ix.MaxValues[p], phi), 0)
				} else {
					require.Equal(t, plo, ix.MinValues[p], "page %d %s", p, c.name)
					require.Equal(t, phi, ix.MaxValues[p], "page %d %s", p, c.name)
				}
				require.False(t, ix.NullPages[p])
			}
		}
		first += int(rg.NumRows)
	}
	require.Len(t, md.RowGroups, 2)
}

// A list column's statistics bound its elements; empty lists count as its
// nulls, and a page of nothing but empty lists is a null page.
func TestListColumnStatistics(t *testing.T) {
	reqs := simRequests(100, 7)
	for i := range reqs {
		reqs[i].PrefixHashIDs = nil
		if i >= 50 {
			reqs[i].PrefixHashIDs = []int64{int64(i), int64(-i)}
		}
	}
	dir := filepath.Join(t.TempDir(), "ds")
	writeTable(t, dir, TableRequests, reqs, TableOptions{RowGroupRows: 50}, false)
	parts, err := (&Dataset{Dir: dir}).Parts(TableRequests)
	require.NoError(t, err)
	pf, f, err := OpenParquet(parts[0])
	require.NoError(t, err)
	defer f.Close()
	var got []format.Statistics
	for _, rg := range pf.Metadata().RowGroups {
		for _, cc := range rg.Columns {
			if cc.MetaData.PathInSchema[0] == "prefix_hash_ids" {
				got = append(got, cc.MetaData.Statistics)
			}
		}
	}
	require.Len(t, got, 2)
	require.Equal(t, int64(50), got[0].NullCount)
	require.Nil(t, got[0].MinValue, "only empty lists: no bounds")
	require.Zero(t, got[1].NullCount)
	require.Equal(t, int64(-99), int64(binary.LittleEndian.Uint64(got[1].MinValue)))
	require.Equal(t, int64(99), int64(binary.LittleEndian.Uint64(got[1].MaxValue)))
}
