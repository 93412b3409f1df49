package opdb

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/model"
)

func TestShipped(t *testing.T) {
	require.Equal(t, []string{h200, h200Worker}, Names())
	a, err := Open(h200)
	require.NoError(t, err)
	b, err := Open(h200)
	require.NoError(t, err)
	require.Same(t, a, b, "a shipped database is read once")
	// Both were measured on the H200; the first by name is the one "ops"
	// means there.
	db, err := ForHardware(h200HW)
	require.NoError(t, err)
	require.Same(t, a, db)
	w, err := Open(h200Worker)
	require.NoError(t, err)
	require.Equal(t, squash(h200HW.Name), squash(w.System.GPU), "the worker's database is an H200's too")
	_, err = ForHardware(h100HW)
	require.ErrorContains(t, err, "no database shipped with steplab was measured on H100-SXM")
}

// The worker's database has what the vLLM one lacks: eager rows in every
// table, an element-wise table and the SM count.
func TestShippedWorker(t *testing.T) {
	db, err := Open(h200Worker)
	require.NoError(t, err)
	require.Equal(t, h200Worker, db.Name)
	require.Equal(t, "steplab-worker", db.Framework)
	require.Equal(t, 132.0, db.System.SMs)
	require.Empty(t, db.AllReduce)
	launches := func(eager []bool) (graph, eagerRows int) {
		for _, e := range eager {
			if e {
				eagerRows++
			} else {
				graph++
			}
		}
		return graph, eagerRows
	}
	tables := map[string][]bool{}
	for _, r := range db.GEMM {
		tables["gemm"] = append(tables["gemm"], r.Eager)
	}
	for _, r := range db.ContextAttention {
		tables["context"] = append(tables["context"], r.Eager)
	}
	for _, r := range db.GenerationAttention {
		tables["generation"] = append(tables["generation"], r.Eager)
	}
	for _, r := range db.Elementwise {
		tables["elementwise"] = append(tables["elementwise"], r.Eager)
	}
	require.Len(t, tables, 4)
	for name, eager := range tables {
		g, e := launches(eager)
		require.Positive(t, g, "%s: graph rows", name)
		require.Positive(t, e, "%s: eager rows", name)
	}
	ops := map[string]bool{}
	for _, r := range db.Elementwise {
		ops[r.Op] = true
	}
	require.Len(t, ops, len(model.ElementwiseOps), "every element-wise op is measured")
	_, err = model.NewOps(db, llama8B)
	require.NoError(t, err)

	v, err := Open(h200)
	require.NoError(t, err)
	require.Equal(t, "vllm", v.Framework)
	require.Zero(t, v.System.SMs, "AIConfigurator's system file has no SM count")
	require.Nil(t, v.Elementwise)
	for _, r := range v.GEMM {
		require.False(t, r.Eager, "%+v", r)
	}
	for _, r := range append(slices.Clone(v.ContextAttention), v.GenerationAttention...) {
		require.False(t, r.Eager, "%+v", r)
	}
}

func TestSpec(t *testing.T) {
	for s, want := range map[string]bool{"ops": true, "ops:" + h200: true, "ops:/some/dir": true, "opsx": false, "roofline": false, "model.json": false} {
		require.Equal(t, want, IsSpec(s), s)
	}
	for _, spec := range []string{"ops", "ops:" + h200} {
		o, err := Prior(spec, h200HW, llama8B)
		require.NoError(t, err, spec)
		require.Equal(t, h200, o.Database())
	}
	_, err := Prior("ops", h100HW, llama8B)
	require.ErrorContains(t, err, "H100-SXM")
	_, err = Prior("ops:nope", h200HW, llama8B)
	require.ErrorContains(t, err, `"nope" is neither`)
	_, err = Prior("roofline", h200HW, llama8B)
	require.ErrorContains(t, err, "not an ops spec")
}

// An ops artifact names its database, shape and engine; model.Load builds
// the prior from it (this package registers the form), reading a relative
// database directory next to the artifact.
func TestArtifact(t *testing.T) {
	dir := t.TempDir()
	e := model.OpsEngine{Name: "test", GEMMScale: 1.5, GraphStepNs: 1e6}
	f := model.Features{DecodeRequests: 8, PaddedBatch: 8, DecodeKVTokens: 8 * 1000}
	want, err := Prior("ops", h200HW, llama8B)
	require.NoError(t, err)
	want, err = want.WithEngine(e)
	require.NoError(t, err)

	require.NoError(t, os.CopyFS(filepath.Join(dir, "db"), shippedFS(h200)))
	for _, database := range []string{h200, "db"} {
		a, err := model.OpsArtifact(database, llama8B, e)
		require.NoError(t, err)
		path := filepath.Join(dir, "ops.json")
		require.NoError(t, a.Save(path))
		m, got, err := model.Load(path)
		require.NoError(t, err, database)
		require.Equal(t, model.FormOps, got.Form)
		require.Equal(t, want.PredictNs(f), m.PredictNs(f), database)
		require.Equal(t, e, m.(*model.Ops).Engine())
	}
	for _, c := range []struct{ params, want string }{
		{`{"database": ""}`, "params.database is empty"},
		{`{"database": "nope"}`, `"nope" is neither`},
		{`{"database": "` + h200 + `", "shape": {"name": "x"}}`, "layers must be > 0"},
		{`{"database": "` + h200 + `", "shape": ` + tinyShapeJSON + `, "engine": {"eager_step_ns": -1}}`, "eager_step_ns = -1"},
		{`[1]`, "ops artifact: params"},
	} {
		a := &model.Artifact{ArtifactVersion: 1, Form: model.FormOps, Params: []byte(c.params)}
		_, err := a.Model()
		require.ErrorContains(t, err, c.want, c.params)
	}
}

const tinyShapeJSON = `{"name": "tiny", "layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "head_dim": 16, "intermediate": 128, "vocab": 256, "dtype": "bf16", "tp": 1}`
