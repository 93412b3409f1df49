package opdb

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/steplab/steplab/catalog"
	"github.com/stretchr/testify/require"
)

const a100 = "a100-sxm-vllm-0.14.0"

// aicTree lays a shipped database out as AIConfigurator's tree: its
// tables under data/a100_sxm/<op>/vllm/0.14.0, a 0.22.0 folder whose GEMM
// and attention tables are 0.14.0's (reuse.yaml), the all-reduce table at
// 0.14.0 only, a GPU the catalogue does not know and a file that is not a
// GPU's.
func aicTree(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "aic-core", "src", "aiconfigurator_core", "systems")
	src := shippedFS(a100)
	put := func(to string, data []byte) {
		to = filepath.Join(root, filepath.FromSlash(to))
		require.NoError(t, os.MkdirAll(filepath.Dir(to), 0o755))
		require.NoError(t, os.WriteFile(to, data, 0o644))
	}
	copyFile := func(from, to string) {
		b, err := fs.ReadFile(src, from)
		require.NoError(t, err)
		put(to, b)
	}
	copyFile(SystemFile, "a100_sxm.yaml")
	for _, f := range []string{GEMMFile, ContextAttentionFile, GenerationAttentionFile, AllReduceFile} {
		dir, base := filepath.Split(f)
		op := filepath.Base(dir)
		copyFile(f, "data/a100_sxm/"+op+"/vllm/0.14.0/"+base)
		copyFile(filepath.Join(op, MetaFile), "data/a100_sxm/"+op+"/vllm/0.14.0/"+MetaFile)
	}
	put("data/a100_sxm/gemm/vllm/0.22.0/reuse.yaml", []byte("reuse:\n- table: gemm_perf\n  from_version: 0.14.0\n"))
	put("data/a100_sxm/attention/vllm/0.22.0/reuse.yaml", []byte("reuse:\n- table: context_attention_perf\n  from_version: 0.14.0\n- table: generation_attention_perf\n  from_version: 0.14.0\n"))
	copyFile(SystemFile, "x9000.yaml")
	put("data/x9000/gemm/vllm/0.1.0/gemm_perf.parquet", []byte("not read"))
	put("perf_data_reuse_manifest.yaml", []byte("a: 1\n"))
	return filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(root))))
}

func TestTree(t *testing.T) {
	root := aicTree(t)
	_, err := FindTree(t.TempDir())
	require.ErrorContains(t, err, "holds no AIConfigurator systems folder")
	tree, err := FindTree(root)
	require.NoError(t, err)
	again, err := FindTree(tree.Dir)
	require.NoError(t, err, "the systems folder itself")
	require.Equal(t, tree, again)
	systems, err := tree.Systems()
	require.NoError(t, err)
	require.Equal(t, []System{{Name: "a100_sxm", Hardware: "A100-SXM-80GB"}, {Name: "x9000"}}, systems)

	hw := must(catalog.LookupHardware("A100-SXM"))
	shipped, err := Open(a100)
	require.NoError(t, err)
	for _, c := range []struct {
		version string
		want    map[string]string
		notes   []string
	}{
		{"", map[string]string{"gemm": "0.22.0", "attention": "0.22.0", "comm": "0.14.0"}, []string{
			"ops: a100_sxm kernels of vllm 0.22.0 (newest version measured)",
			"ops: a100_sxm's comm tables are of vllm 0.14.0 (none measured at 0.22.0)",
			"ops: a100_sxm's gemm_perf.parquet at vllm 0.22.0 is 0.14.0's measurement (reuse.yaml)",
			"ops: a100_sxm's context_attention_perf.parquet at vllm 0.22.0 is 0.14.0's measurement (reuse.yaml)",
			"ops: a100_sxm's generation_attention_perf.parquet at vllm 0.22.0 is 0.14.0's measurement (reuse.yaml)"}},
		{"0.15.1", map[string]string{"gemm": "0.14.0", "attention": "0.14.0", "comm": "0.14.0"}, []string{
			"ops: a100_sxm kernels of vllm 0.14.0 (nearest 0.15.1 version measured)"}},
	} {
		db, choice, err := tree.Load(hw, "vllm", c.version)
		require.NoError(t, err, c.version)
		require.Equal(t, c.want, choice.Versions)
		require.Equal(t, c.notes, choice.Notes())
		require.Equal(t, shipped.GEMM, db.GEMM, "the same measurements")
		require.Equal(t, shipped.GenerationAttention, db.GenerationAttention)
		require.Equal(t, shipped.AllReduce, db.AllReduce)
		require.Equal(t, "a100_sxm", db.System.GPU)
	}
	_, _, err = tree.Load(h200HW, "vllm", "")
	require.ErrorContains(t, err, "has no measurements of H200-SXM (it has A100-SXM-80GB)")
	_, _, err = tree.Load(hw, "sglang", "")
	require.ErrorContains(t, err, "a100_sxm gemm tables")

	// As a spec: the tree's database for the run's GPU, and its notes.
	o, notes, err := Prior("ops:aic:"+root+",version=0.14.0", Query{Hardware: hw, Shape: llama8B})
	require.NoError(t, err)
	require.Equal(t, "a100-sxm-vllm-0.14.0", o.Database())
	require.Equal(t, []string{"ops: a100_sxm kernels of vllm 0.14.0 (nearest 0.14.0 version measured)"}, notes)
	// Without its all-reduce table, TP's all-reduces are priced from the
	// system's bandwidth, and said so.
	require.NoError(t, os.RemoveAll(filepath.Join(tree.Dir, "data", "a100_sxm", "comm")))
	tp2 := llama8B
	tp2.TP = 2
	_, notes, err = Prior("ops:aic:"+root, Query{Hardware: hw, Shape: tp2})
	require.NoError(t, err)
	require.Contains(t, notes, "ops: a100-sxm-vllm-0.22.0 has no all-reduce table: TP=2's all-reduces are priced from its node.intra_node_bw (300 GB/s), not measured")
	_, _, err = Prior("ops:aic:"+root, Query{Hardware: h100HW, Shape: llama8B})
	require.ErrorContains(t, err, "has no measurements of H100-SXM")
}

func TestTreeReuseRefused(t *testing.T) {
	root := aicTree(t)
	tree, err := FindTree(root)
	require.NoError(t, err)
	bad := filepath.Join(tree.Dir, "data", "a100_sxm", "gemm", "vllm", "0.22.0", "reuse.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("reuse:\n- table: gemm_perf\n  from_version: ../../../../etc\n"), 0o644))
	_, _, err = tree.Load(must(catalog.LookupHardware("A100-SXM")), "vllm", "")
	require.ErrorContains(t, err, "reuse[0] needs a table and a from_version folder name")
}

func TestVersions(t *testing.T) {
	for _, c := range []struct {
		versions []string
		want     string
		got      string
	}{
		{[]string{"0.14.0", "0.19.0", "0.24.0"}, "", "0.24.0"},
		{[]string{"0.14.0", "0.19.0", "0.24.0"}, "0.19.1", "0.19.0"},
		{[]string{"0.14.0", "0.19.0", "0.24.0"}, "0.21.5", "0.19.0"},
		{[]string{"0.14.0", "0.19.0", "0.24.0"}, "0.22.0", "0.24.0"},
		{[]string{"0.14.0", "0.19.0", "0.24.0"}, "1.0.0", "0.24.0"},
		{[]string{"0.9.2", "0.10.0"}, "v0.9.9", "0.9.2"},
		{[]string{"0.9.2", "0.10.0"}, "0.10.0rc1", "0.10.0"},
		{[]string{"0.1.dev19262", "0.24.0"}, "", "0.24.0"},
	} {
		dir := t.TempDir()
		for _, v := range c.versions {
			require.NoError(t, os.Mkdir(filepath.Join(dir, v), 0o755))
		}
		got, err := nearestVersion(dir, c.want)
		require.NoError(t, err)
		require.Equal(t, c.got, got, "%v nearest %q", c.versions, c.want)
	}
}
