package fpm

import "github.com/steplab/steplab/catalog"

// collective is a tensor-parallel group's links as its all-reduce prices
// them: n GPUs per node on the node's link, and the nodes over the
// network (catalog.Layout).
//
// On one node of n GPUs an all-reduce of msg bytes per GPU is the ring's
//
//	latency + 2(n−1)/n · msg / (link · eff(msg))
//
// with latency the node link's small all-reduce. A group of N nodes of n
// GPUs is priced hierarchically, as NCCL runs it: a reduce-scatter within
// each node and the all-gather after it (together the intra-node ring
// above), and between them an all-reduce of each GPU's msg/n shard with
// its peers of the other nodes, over its own NIC, by the ring of N nodes:
//
//   - 2(N−1) · hop + 2(N−1)/N · (msg/n) / (network · eff(msg/n))
//
// hop the network link's latency of one small message between nodes. For
// N > 2 NCCL picks a tree at small messages (2⌈log₂N⌉ hops): the ring
// overstates their latency. eff is the hardware's all-reduce efficiency
// curve on both links, read at each leg's bytes.
type collective struct {
	n, nodes      int
	linkBps       float64
	netBps, hopNs float64
}

func newCollective(l catalog.Layout) collective {
	return collective{n: l.GPUsPerNode, nodes: l.Nodes, linkBps: l.Link.GBsPerDirection * 1e9,
		netBps: l.Network.GBsPerDirection * 1e9, hopNs: l.Network.LatencyUs * 1e3}
}

// allReduceNs is one all-reduce of msg bytes per GPU, latNs the node
// link's small all-reduce latency.
func (c *collective) allReduceNs(latNs, msg float64, eff catalog.Curve) float64 {
	return latNs + 2*float64(c.n-1)/float64(c.n)*msg/(c.linkBps*eff.At(msg))*1e9 + c.networkNs(msg, eff)
}

// networkNs is the inter-node leg of an all-reduce of msg bytes per GPU:
// 0 on one node.
func (c *collective) networkNs(msg float64, eff catalog.Curve) float64 {
	if c.nodes <= 1 {
		return 0
	}
	nodes, shard := float64(c.nodes), msg/float64(c.n)
	return 2*(nodes-1)*c.hopNs + 2*(nodes-1)/nodes*shard/(c.netBps*eff.At(shard))*1e9
}
