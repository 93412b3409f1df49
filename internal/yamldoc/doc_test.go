package yamldoc

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

type engineKeys struct {
	MaxNumSeqs int  `yaml:"max_num_seqs"`
	BlockSize  int  `yaml:"block_size"`
	Async      bool `yaml:"async"`
}

type item struct {
	Name    string `yaml:"name"`
	Workers int    `yaml:"workers"`
}

type testDoc struct {
	Name   string              `yaml:"name"`
	Engine engineKeys          `yaml:"engine"`
	Items  []item              `yaml:"items"`
	Pools  named               `yaml:"pools"`
	Over   Partial[engineKeys] `yaml:"over"`
	Inline struct {
		X int `yaml:"x"`
	} `yaml:",inline"`
}

// named is a mapping of name to item, read in document order.
type named []item

func (n *named) UnmarshalYAML(v *yaml.Node) error {
	for i := 0; i+1 < len(v.Content); i += 2 {
		it := item{Name: v.Content[i].Value}
		if err := v.Content[i+1].Decode(&it); err != nil {
			return err
		}
		*n = append(*n, it)
	}
	return nil
}

const file = `name: t
engine:
  max_num_seqs: 8
items:
  - name: a
    workers: 1
  - name: b
    workers: 2
`

func TestDecodeAndSet(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		sets []string
		want func(t *testing.T, v *testDoc)
		err  string // a substring of the error; "" for none
	}{
		{name: "file over defaults", doc: file, want: func(t *testing.T, v *testDoc) {
			assert.Equal(t, 8, v.Engine.MaxNumSeqs)
			assert.Equal(t, 16, v.Engine.BlockSize, "a key left out keeps its value")
		}},
		{name: "empty file is the defaults", doc: "", want: func(t *testing.T, v *testDoc) { assert.Equal(t, 16, v.Engine.BlockSize) }},
		{name: "set a scalar", doc: file, sets: []string{"engine.max_num_seqs=4"}, want: func(t *testing.T, v *testDoc) { assert.Equal(t, 4, v.Engine.MaxNumSeqs) }},
		{name: "set adds a key", doc: file, sets: []string{"engine.async=true", "x=3"}, want: func(t *testing.T, v *testDoc) {
			assert.True(t, v.Engine.Async)
			assert.Equal(t, 3, v.Inline.X)
		}},
		{name: "set replaces a mapping", doc: file, sets: []string{"engine={block_size: 32}"}, want: func(t *testing.T, v *testDoc) {
			assert.Equal(t, 32, v.Engine.BlockSize)
			assert.Equal(t, 0, v.Engine.MaxNumSeqs, "the file's mapping is replaced, not merged")
		}},
		{name: "list item by name", doc: file, sets: []string{"items.b.workers=7"}, want: func(t *testing.T, v *testDoc) { assert.Equal(t, 7, v.Items[1].Workers) }},
		{name: "mapping of items", doc: "pools: {p: {workers: 2}}\n", sets: []string{"pools.p.workers=5"}, want: func(t *testing.T, v *testDoc) {
			require.Len(t, v.Pools, 1)
			assert.Equal(t, 5, v.Pools[0].Workers)
		}},
		{name: "partial block", doc: "over: {block_size: 64}\n", want: func(t *testing.T, v *testDoc) {
			e := engineKeys{MaxNumSeqs: 1, BlockSize: 16}
			require.NoError(t, v.Over.Over(&e))
			assert.Equal(t, engineKeys{MaxNumSeqs: 1, BlockSize: 64}, e)
			assert.Equal(t, [][2]string{{"block_size", "64"}}, v.Over.Keys())
		}},
		{name: "unknown key in the file", doc: file + "colour: red\n", err: `t.yaml:9: unknown key "colour": known keys are name, engine, items, pools, over, x`},
		{name: "unknown nested key", doc: "engine: {max_num_seqz: 1}\n", err: `t.yaml:1: unknown key "max_num_seqz" in engine: known keys are max_num_seqs, block_size, async`},
		{name: "unknown key of a named item", doc: file, sets: []string{"items.a.wrokers=1"}, err: `--set items.a.wrokers=1: unknown key "wrokers" in items[a]`},
		{name: "unknown key of a mapped item", doc: "pools: {p: {wrokers: 2}}\n", err: `t.yaml:1: unknown key "wrokers" in pools.p`},
		{name: "unknown key of a partial block", doc: "over: {max: 2}\n", err: `unknown key "max" in over: known keys are max_num_seqs`},
		{name: "every unknown key at once", doc: "a: 1\nb: 2\n", err: "t.yaml:2: unknown key \"b\""},
		{name: "override names itself", sets: []string{"nope=1"}, err: `--set nope=1: unknown key "nope": known keys are`},
		{name: "bad value of an override", doc: file, sets: []string{"engine.block_size=abc"}, err: "--set engine.block_size=abc: cannot unmarshal"},
		{name: "bad value in the file", doc: "engine: {block_size: abc}\n", err: "t.yaml: yaml: unmarshal errors:\n  line 1: cannot unmarshal"},
		{name: "no item of that name", doc: file, sets: []string{"items.c.workers=1"}, err: `--set items.c.workers=1: no item named "c" in items`},
		{name: "through a scalar", doc: file, sets: []string{"name.x=1"}, err: "--set name.x=1: name is not a mapping"},
		{name: "no value", sets: []string{"engine.block_size"}, err: `--set "engine.block_size": want KEY=VALUE`},
		{name: "bad YAML value", sets: []string{"engine={a: [}"}, err: "--set engine={a: [}: value:"},
		{name: "bad YAML file", doc: "a: [1\n", err: "t.yaml: yaml:"},
		{name: "alias bomb", doc: bomb(9), err: "alias bomb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := &testDoc{Engine: engineKeys{BlockSize: 16}}
			d, err := New("t.yaml", []byte(tt.doc))
			for _, s := range tt.sets {
				if err == nil {
					err = d.Set(s)
				}
			}
			if err == nil {
				err = d.Decode(v)
			}
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				return
			}
			require.NoError(t, err)
			tt.want(t, v)
		})
	}
}

// An override's nodes name it; the file's name their line; a clone keeps
// both, and its overrides do not reach the original.
func TestWhereAndClone(t *testing.T) {
	d, err := New("t.yaml", []byte(file))
	require.NoError(t, err)
	require.NoError(t, d.Set("engine.block_size=32"))
	c := d.Clone()
	require.NoError(t, c.Set("name=u"))
	engine := Child(d.Root(), "engine")
	assert.Equal(t, "t.yaml:3", d.Where(Child(engine, "max_num_seqs")))
	assert.Equal(t, "--set engine.block_size=32", c.Where(Child(Child(c.Root(), "engine"), "block_size")))
	assert.Equal(t, "--set name=u", c.Where(Child(c.Root(), "name")))
	assert.Equal(t, "t.yaml:1", d.Where(Child(d.Root(), "name")), "the clone's override is its own")
	assert.True(t, d.Has("items"))
	assert.False(t, d.Has("nope"))
	out, err := c.YAML("items")
	require.NoError(t, err)
	assert.Equal(t, "name: u\nengine:\n    max_num_seqs: 8\n    block_size: 32\n", string(out))
}

// A document of overrides alone names nothing but them.
func TestOverrides(t *testing.T) {
	d, err := Overrides("engine.max_num_seqs=3", "name=x")
	require.NoError(t, err)
	assert.False(t, d.Empty())
	v := &testDoc{}
	require.NoError(t, d.Decode(v))
	assert.Equal(t, 3, v.Engine.MaxNumSeqs)
	assert.Equal(t, "x", v.Name)
	_, err = Overrides("=1")
	require.ErrorContains(t, err, "want KEY=VALUE")
	e, err := Overrides()
	require.NoError(t, err)
	assert.True(t, e.Empty())
}

// A partial block decoded over one already held sets its keys over that
// one's, as a struct decoded over a struct does.
func TestPartialOverPartial(t *testing.T) {
	d, err := New("t.yaml", []byte("over: {block_size: 64, async: true}\n"))
	require.NoError(t, err)
	v := &testDoc{}
	require.NoError(t, d.Decode(v))
	o, err := Overrides("over={block_size: 8, max_num_seqs: 2}")
	require.NoError(t, err)
	require.NoError(t, o.Decode(v))
	var e engineKeys
	require.NoError(t, v.Over.Over(&e))
	assert.Equal(t, engineKeys{MaxNumSeqs: 2, BlockSize: 8, Async: true}, e)
}

// FuzzSet: no override panics, and one Set accepts decodes or fails with
// a message that names it.
func FuzzSet(f *testing.F) {
	for _, s := range []string{"engine.max_num_seqs=4", "items.a.workers=2", "engine={a: 1}", "x", "=", "a.b.c.d=[1,2]", "items.z.q=1", "name.x=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, kv string) {
		d, err := New("t.yaml", []byte(file))
		require.NoError(t, err)
		if err := d.Set(kv); err != nil {
			return
		}
		if err := d.Decode(&testDoc{}); err != nil && !strings.Contains(err.Error(), "--set") && !strings.Contains(err.Error(), "t.yaml") {
			t.Fatalf("an error that names no place: %v", err)
		}
	})
}
