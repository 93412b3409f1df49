package cluster

import (
	"fmt"
	"github.com/steplab/steplab/catalog"
)

// Link is a resolved link: bytes per second each way and one-way latency.
type Link struct {
	BytesPerSec float64
	LatencyNs   float64
}

// TransferNs is the time b bytes take over the link.
func (l Link) TransferNs(b float64) float64 { return l.LatencyNs + b/l.BytesPerSec*1e9 }

// DefaultLink resolves a link spec over GPUs of hw: what the spec states
// wins (a stated bandwidth must be positive); what it leaves out is the
// hardware's GPU-to-GPU link (catalog.Hardware.TPLink: NVLink, xGMI, else
// PCIe; its bandwidth per direction and its latency). field names the spec
// in errors.
func DefaultLink(spec LinkSpec, hw catalog.Hardware, field string) (Link, error) {
	if spec.LatencyUs != nil && !(*spec.LatencyUs >= 0) {
		return Link{}, fmt.Errorf("%s.latency_us is %g: use 0 or more", field, *spec.LatencyUs)
	}
	tp, ok := hw.TPLink()
	bw, lat := tp.GBsPerDirection, tp.LatencyUs
	if spec.LatencyUs != nil {
		lat = *spec.LatencyUs
	}
	switch {
	case spec.BandwidthGBs != nil && !(*spec.BandwidthGBs > 0):
		return Link{}, fmt.Errorf("%s.bandwidth_gbs is %g: a link needs a positive bandwidth (GB/s per direction)", field, *spec.BandwidthGBs)
	case spec.BandwidthGBs != nil:
		bw = *spec.BandwidthGBs
	case !ok:
		return Link{}, fmt.Errorf("%s.bandwidth_gbs is not set and hardware %s lists no GPU-to-GPU interconnect: state the link's bandwidth_gbs", field, hw.Name)
	}
	return Link{BytesPerSec: bw * 1e9, LatencyNs: lat * 1e3}, nil
}

// ExpertLinks resolves the all-to-all links of an expert-parallel instance
// of gpus GPUs of hw. A stated bandwidth is the one link between every
// pair of its ranks (DefaultLink). Left out, the instance talks over the
// hardware's links where it sits (catalog.Hardware.Layout): the link that
// joins its GPUs within a node (a stated latency wins), and for an
// instance spanning nodes its layout, with the network between them (the
// zero Layout on one node); an instance that does not fill whole nodes is
// refused.
func ExpertLinks(spec LinkSpec, hw catalog.Hardware, gpus int, field string) (Link, catalog.Layout, error) {
	l, err := DefaultLink(spec, hw, field)
	if err != nil || spec.BandwidthGBs != nil {
		return l, catalog.Layout{}, err
	}
	layout, err := hw.Layout(gpus)
	if err != nil {
		return Link{}, catalog.Layout{}, fmt.Errorf("an expert-parallel instance of %d GPUs: %w; or state %s.bandwidth_gbs", gpus, err, field)
	}
	l.BytesPerSec = layout.Link.GBsPerDirection * 1e9
	if spec.LatencyUs == nil {
		l.LatencyNs = layout.Link.LatencyUs * 1e3
	}
	if !layout.MultiNode() {
		layout = catalog.Layout{}
	}
	return l, layout, nil
}
