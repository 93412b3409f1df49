package datasets

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// duckDBProject is the Node project that runs DuckDB for the tests (and
// wrote the DuckDB fixtures).
var duckDBProject = filepath.Join("testdata", "foreign", "duckdb")

// duckDB returns a function that runs SQL statements in DuckDB and returns
// the rows of the last one (every value as text). It skips the test when
// node or the npm package is missing: scripts/test installs both, so CI
// never skips.
func duckDB(t *testing.T) func(sql ...string) []map[string]any {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("DuckDB tests need node (Node.js 18 or newer); scripts/test installs it")
	}
	if _, err := os.Stat(filepath.Join(duckDBProject, "node_modules", "@duckdb", "node-api")); err != nil {
		t.Skip("DuckDB tests need the npm package: run `npm ci` in datasets/testdata/foreign/duckdb (scripts/test does)")
	}
	return func(sql ...string) []map[string]any {
		t.Helper()
		out, err := exec.Command(node, append([]string{filepath.Join(duckDBProject, "query.mjs")}, sql...)...).Output()
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("duckdb: %v\n%s", err, ee.Stderr)
		}
		require.NoError(t, err)
		var rows []map[string]any
		require.NoError(t, json.Unmarshal(out, &rows), string(out))
		return rows
	}
}

// duckDBError runs SQL expecting DuckDB to fail, and returns its message.
func duckDBError(t *testing.T, sql string) string {
	t.Helper()
	out, err := exec.Command("node", filepath.Join(duckDBProject, "query.mjs"), sql).CombinedOutput()
	require.Error(t, err, "DuckDB answered %s", out)
	return string(out)
}

// asInt reads an integer DuckDB printed as text (or a number).
func asInt(t *testing.T, v any) int64 {
	t.Helper()
	switch x := v.(type) {
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		require.NoError(t, err)
		return n
	case float64:
		return int64(x)
	}
	t.Fatalf("not an integer: %v (%T)", v, v)
	return 0
}

// DuckDB reads every table steplab writes, and finds the rows and values
// steplab reads.
func TestDuckDBReadsSteplabTables(t *testing.T) {
	query := duckDB(t)
	dir := filepath.Join(t.TempDir(), "ds")
	w, err := Create(dir, Manifest{Source: Source{Kind: "test"}}, CreateOptions{})
	require.NoError(t, err)
	opts := TableOptions{RowGroupRows: 700, PartRows: 2000}
	writeAll(t, w, TableSteps, simSteps(5000, 1), opts)
	writeAll(t, w, TableStepRequests, simStepRequests(9000, 2), opts)
	writeAll(t, w, TableRequests, simRequests(3000, 3), opts)
	writeAll(t, w, TableGPUSamples, simGPUSamples(800, 4), opts)
	require.NoError(t, w.Close())
	// and a real capture steplab wrote (the H200 self-benchmark)
	for _, dir := range []string{dir, filepath.Join("h200", "bench-steady")} {
		t.Run(filepath.Base(dir), func(t *testing.T) { compareWithDuckDB(t, query, dir) })
	}
}

// compareWithDuckDB reads every table of the dataset at dir with steplab
// and with DuckDB, and compares row counts and a sum per table.
func compareWithDuckDB(t *testing.T, query func(sql ...string) []map[string]any, dir string) {
	d, err := Open(dir)
	require.NoError(t, err)

	steps, err := ReadAll[Step](d, TableSteps)
	require.NoError(t, err)
	srs, err := ReadAll[StepRequest](d, TableStepRequests)
	require.NoError(t, err)
	reqs, err := ReadAll[Request](d, TableRequests)
	require.NoError(t, err)
	gpu, err := ReadAll[GPUSample](d, TableGPUSamples)
	require.NoError(t, err)
	var wall, sched, prompt, hashes, mem int64
	for _, s := range steps {
		wall += s.WallTimeNs
	}
	for _, r := range srs {
		sched += r.NumScheduledTokens
	}
	for _, r := range reqs {
		prompt += r.PromptTokens
		hashes += int64(len(r.PrefixHashIDs))
	}
	for _, g := range gpu {
		mem += g.MemUsedBytes >> 20
	}
	for _, tc := range []struct {
		table, sum string
		rows, want int64
	}{
		{TableSteps, "sum(wall_time_ns)", int64(len(steps)), wall},
		{TableStepRequests, "sum(num_scheduled_tokens)", int64(len(srs)), sched},
		{TableRequests, "sum(prompt_tokens)", int64(len(reqs)), prompt},
		{TableRequests, "sum(len(prefix_hash_ids))", int64(len(reqs)), hashes},
		{TableGPUSamples, "sum(mem_used_bytes >> 20)", int64(len(gpu)), mem},
	} {
		glob := filepath.Join(TableDir(dir, tc.table), "*.parquet")
		got := query("SELECT count(*)::BIGINT AS n, (" + tc.sum + ")::BIGINT AS s FROM read_parquet('" + glob + "')")
		require.Len(t, got, 1)
		require.Equal(t, tc.rows, asInt(t, got[0]["n"]), "rows of %s", tc.table)
		require.Equal(t, tc.want, asInt(t, got[0]["s"]), "%s of %s", tc.sum, tc.table)
	}
}

func writeAll[T any](t *testing.T, w *Writer, table string, rows []T, opts TableOptions) {
	t.Helper()
	tw, err := NewTableWriter[T](w, table, opts)
	require.NoError(t, err)
	require.NoError(t, tw.Write(rows))
	require.NoError(t, tw.Close())
}

// The column statistics let DuckDB skip row groups: with every row group
// but one damaged beyond reading, a query whose filter the statistics
// confine to the intact one still answers, while one that needs a damaged
// row group fails. (EXPLAIN ANALYZE and DuckDB's profiler do not count the
// row groups a Parquet scan skips: its rows-scanned metric is the same for
// any filter that leaves a row group in, so the damage is the measure.)
func TestDuckDBSkipsRowGroups(t *testing.T) {
	query := duckDB(t)
	dir := filepath.Join(t.TempDir(), "ds")
	rows := simSteps(13000, 5)
	for i := range rows {
		rows[i].StepID = int64(i)
	}
	writeTable(t, dir, TableSteps, rows, TableOptions{RowGroupRows: 1000}, false)
	parts, err := (&Dataset{Dir: dir}).Parts(TableSteps)
	require.NoError(t, err)
	require.Len(t, parts, 1)
	part := parts[0]
	got := query("SELECT count(DISTINCT row_group_id)::BIGINT AS groups, min(stats_min_value) AS lo FROM parquet_metadata('" + part + "') WHERE path_in_schema = 'step_id'")
	require.Equal(t, int64(13), asInt(t, got[0]["groups"]))
	require.Equal(t, "0", got[0]["lo"], "DuckDB reads the statistics")

	b, err := os.ReadFile(part)
	require.NoError(t, err)
	pf, f, err := OpenParquet(part)
	require.NoError(t, err)
	for i, rg := range pf.Metadata().RowGroups {
		if i == 3 {
			continue
		}
		for _, c := range rg.Columns {
			md := c.MetaData
			start := md.DataPageOffset
			if md.DictionaryPageOffset > 0 {
				start = min(start, md.DictionaryPageOffset)
			}
			for k := start; k < start+md.TotalCompressedSize; k++ {
				b[k] = 0xFF
			}
		}
	}
	f.Close()
	require.NoError(t, os.WriteFile(part, b, 0o644))

	sum := func(lo, hi int) int64 {
		var s int64
		for _, r := range rows[lo : hi+1] {
			s += r.WallTimeNs
		}
		return s
	}
	got = query("SELECT count(*)::BIGINT AS n, sum(wall_time_ns)::BIGINT AS s FROM read_parquet('" + part + "') WHERE step_id BETWEEN 3100 AND 3600")
	require.Equal(t, int64(501), asInt(t, got[0]["n"]), "only row group 3 read: 1 of 13")
	require.Equal(t, sum(3100, 3600), asInt(t, got[0]["s"]))
	msg := duckDBError(t, "SELECT count(*) FROM read_parquet('"+part+"') WHERE step_id BETWEEN 3900 AND 4100")
	require.NotEmpty(t, msg, "a filter that reaches row group 4 reads its damaged pages")
}
