package features

import (
	"fmt"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fpm"
)

// ExpertsTerm is the experts-reached term (fpm.TermExpertsReached) of the
// mixture of experts a manifest records: its experts, top-k and router
// tilt. A step's value is the distinct experts its tokens reach
// (catalog.Routing.Reached of prefill tokens plus one a decode). "" for a
// dense model or a manifest without a model section.
//
// note is non-empty where the term rests on an assumption or could not be
// written, for the fit to warn with: a manifest that records no
// moe.routing_skew is priced under uniform routing (a tilted router reaches
// fewer experts, so the term then over-counts them on skewed traffic); a
// recorded tilt without the logit spread it is measured against
// (moe.router_logit_std), or a routing that cannot be priced, gives no term.
func ExpertsTerm(m *datasets.Manifest) (term, note string) {
	if m == nil || m.Model == nil || m.Model.MoE == nil || m.Model.MoE.Experts <= 0 {
		return "", ""
	}
	e := m.Model.MoE
	r := catalog.Routing{Experts: e.Experts, TopK: e.TopK}
	if e.RoutingSkew == nil {
		note = fmt.Sprintf("the manifest of %s records no moe.routing_skew: %s assumes uniform routing (a skewed router reaches fewer experts)",
			m.Model.Name, fpm.TermExpertsReached)
	} else {
		r.Skew, r.LogitStd = *e.RoutingSkew, e.RouterLogitStd
	}
	if err := r.Validate(); err != nil {
		return "", fmt.Sprintf("%s left out: the manifest of %s: moe.%v", fpm.TermExpertsReached, m.Model.Name, err)
	}
	return fpm.ExpertsReached(r), note
}
