package fpm

import (
	"testing"

	"github.com/steplab/steplab/catalog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The roofline's all-reduces of Llama-3.1-70B (hidden 8,192, bf16: 16,384
// bytes a token, 80 layers, two all-reduces each) on B200: NVLink 900
// GB/s and 5 µs within a node of 8, the network 50 GB/s per GPU and 10 µs
// a hop between nodes, all-reduce efficiency 0.70 (the generic default).
// The expected values are the formula of collective written out by hand.
func TestRooflineAllReduceAcrossNodes(t *testing.T) {
	b200 := mustHardware("B200")
	const link, eff = 900e9, 0.70
	for _, c := range []struct {
		name   string
		tp     int
		batch  float64
		perNs  float64 // one all-reduce, by hand
		nodes  int
		netLeg float64 // of perNs: the network's
	}{
		// 5000 + 2·7/8·16384 B / (900e9·0.7) = 5000 + 45.51
		{"TP8 B=1: one node", 8, 1, 5000 + 28672.0/630, 1, 0},
		// 5000 + 2·7/8·4 MiB / 630e9 = 5000 + 11650.84
		{"TP8 B=256: one node", 8, 256, 5000 + 7340032.0/630, 1, 0},
		// the node's ring at 8, then 2·1·10 µs + 2·1/2·(16384/8) B / (50e9·0.7) = 20000 + 58.51
		{"TP16 B=1: two nodes", 16, 1, 5000 + 28672.0/630 + 20000 + 2048.0/35, 2, 20000 + 2048.0/35},
		// + 20000 + (4 MiB/8) / 35e9 = 20000 + 14979.66
		{"TP16 B=256: two nodes", 16, 256, 5000 + 7340032.0/630 + 20000 + 524288.0/35, 2, 20000 + 524288.0/35},
		// four nodes: 2·3·10 µs + 2·3/4·(16384/8) B / 35e9 = 60000 + 87.77
		{"TP32 B=1: four nodes", 32, 1, 5000 + 28672.0/630 + 60000 + 3072.0/35, 4, 60000 + 3072.0/35},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := llama70B.WithTP(c.tp)
			r := NewRoofline(b200, s)
			require.NoError(t, r.Validate())
			f := Features{DecodeRequests: c.batch, DecodeKVTokens: c.batch * 1024}
			got := r.Breakdown(f).AllReduceNs
			assert.InDelta(t, 2*80*c.perNs, got, 1e-6*got)
			l, err := b200.Layout(c.tp)
			require.NoError(t, err)
			assert.Equal(t, c.nodes, l.Nodes)
			msg := c.batch * 16384
			if c.nodes == 1 {
				// Byte for byte the single-node formula of before nodes
				// were modelled: TP8 is unchanged.
				before := r.AllReduceLatencyNs + 2*float64(c.tp-1)/float64(c.tp)*msg/(link*r.AllReduceEff.At(msg))*1e9
				assert.Equal(t, 2*80*before, got)
				return
			}
			one := NewRoofline(b200, llama70B.WithTP(8)).Breakdown(f).AllReduceNs
			ar := newCollective(l)
			assert.InDelta(t, c.netLeg, ar.networkNs(msg, catalog.Flat(eff)), 1e-9*c.netLeg)
			// The same node's ring at 8 GPUs, plus the network leg.
			assert.InDelta(t, one+2*80*c.netLeg, got, 1e-6*got, "slower than TP8 by the network term")
		})
	}
}

// A TP group spanning nodes on the ops prior: the table's all-reduce of
// one node (the synthetic table measures 2 GPUs: nodes of 2 here) plus
// the roofline's network leg, flagged extrapolated and said in the notes.
func TestOpsAllReduceAcrossNodes(t *testing.T) {
	hw := mustHardware("B200")
	hw.Interconnects = []catalog.Interconnect{{Kind: catalog.LinkNVLink, GBsPerDirection: 900, LatencyUs: 5, GPUs: 2},
		{Kind: catalog.LinkNetwork, GBsPerDirection: 50, LatencyUs: 10}}
	l, err := hw.Layout(4)
	require.NoError(t, err)
	require.Equal(t, 2, l.Nodes)
	one := tinyOps(t, tiny.WithTP(2))
	four, err := NewOps(tinyDB(), tiny.WithTP(4))
	require.NoError(t, err)
	o := four.WithNodes(l, catalog.Flat(0.70))
	f := Features{DecodeRequests: 4, PaddedBatch: 4, DecodeKVTokens: 400}
	msg := 4.0 * 64 * 2
	within, ext := one.allReduceNs(msg)
	require.False(t, ext, "the table measures 2 GPUs")
	got, ext := o.allReduceNs(msg)
	assert.True(t, ext, "the network leg is not measured")
	// 2·1·10 µs + 2·1/2·(512/2) B / (50e9·0.7)
	assert.InDelta(t, within+20000+256.0/35, got, 1e-9)
	assert.Contains(t, o.Breakdown(f).Extrapolated, OpTableAllReduce)
	assert.Contains(t, o.Notes()[0], "TP=4 spans 2 nodes × 2 GPUs")
	assert.Contains(t, o.Notes()[0], "not measured")
	assert.Same(t, four, four.WithNodes(catalog.Layout{GPUs: 4, Nodes: 1, GPUsPerNode: 4}, catalog.Flat(0.7)), "one node: unchanged")
}
