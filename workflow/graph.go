package workflow

import (
	"fmt"
	"math"
	"strings"

	"github.com/steplab/steplab/sim/cluster"
	"github.com/steplab/steplab/sim/rng"
)

// Kind is a stage's kind.
type Kind string

// Stage kinds.
const (
	KindFrontend     Kind = "frontend"
	KindOrchestrator Kind = "orchestrator"
	KindService      Kind = "service"
	KindEngine       Kind = "engine"
	KindJoin         Kind = "join"
)

// Kinds lists the stage kinds.
var Kinds = []Kind{KindFrontend, KindOrchestrator, KindService, KindEngine, KindJoin}

// Service-time model kinds (ServiceTime.Kind).
const (
	ServiceNone      = ""
	ServiceFixed     = "fixed"
	ServiceLognormal = "lognormal"
	ServicePerToken  = "per_token"
	// ServiceVision is a vision encoder on GPUs (one per worker): MeanNs
	// per request, its images' encoder time (catalog.VisionTower.ImageCost).
	ServiceVision = "vision_encoder"
)

// ServiceTime is a stage's service-time model.
type ServiceTime struct {
	// Kind: "" (no service time), fixed, lognormal, per_token or
	// vision_encoder.
	Kind string
	// MeanNs is the fixed time, or the lognormal's mean (of the time, not of
	// its logarithm).
	MeanNs float64
	// Sigma is the lognormal's standard deviation of ln(time).
	Sigma float64
	// per_token: BaseNs + PerPromptTokenNs·prompt + PerOutputTokenNs·output.
	BaseNs, PerPromptTokenNs, PerOutputTokenNs float64
}

// Validate refuses negative or unknown parameters.
func (s ServiceTime) Validate() error {
	switch s.Kind {
	case ServiceNone:
	case ServiceFixed, ServiceVision:
		if s.MeanNs < 0 {
			return fmt.Errorf("service time is negative (%g ns)", s.MeanNs)
		}
	case ServiceLognormal:
		if !(s.MeanNs > 0) || s.Sigma < 0 {
			return fmt.Errorf("lognormal service time needs mean > 0 and sigma >= 0 (mean %g ns, sigma %g)", s.MeanNs, s.Sigma)
		}
	case ServicePerToken:
		if s.BaseNs < 0 || s.PerPromptTokenNs < 0 || s.PerOutputTokenNs < 0 {
			return fmt.Errorf("per-token service time has a negative term (base %g, per prompt token %g, per output token %g ns)",
				s.BaseNs, s.PerPromptTokenNs, s.PerOutputTokenNs)
		}
	default:
		return fmt.Errorf("unknown service-time kind %q: use fixed, lognormal, per_token or vision_encoder", s.Kind)
	}
	if math.IsNaN(s.MeanNs+s.Sigma+s.BaseNs+s.PerPromptTokenNs+s.PerOutputTokenNs) ||
		math.IsInf(s.MeanNs+s.Sigma+s.BaseNs+s.PerPromptTokenNs+s.PerOutputTokenNs, 0) {
		return fmt.Errorf("service time has a non-finite parameter")
	}
	return nil
}

// Draw returns one service time in ns for a request of the given lengths.
// Only lognormal draws from r.
func (s ServiceTime) Draw(r *rng.Stream, prompt, output int) int64 {
	switch s.Kind {
	case ServiceFixed, ServiceVision:
		return int64(math.Round(s.MeanNs))
	case ServiceLognormal:
		mu := math.Log(s.MeanNs) - s.Sigma*s.Sigma/2
		return int64(math.Round(math.Exp(mu + s.Sigma*r.NormFloat64())))
	case ServicePerToken:
		return int64(math.Round(s.BaseNs + s.PerPromptTokenNs*float64(prompt) + s.PerOutputTokenNs*float64(output)))
	}
	return 0
}

// Edge is a message from a stage to another.
type Edge struct {
	To string
	// Bytes is the message's size: what crosses the network when the two
	// stages are on different hosts.
	Bytes int64
}

// Stage is a node of the graph.
type Stage struct {
	Name string
	Kind Kind
	// Host the stage runs on (after placement).
	Host string
	// Service is the stage's own work per request (not for engines).
	Service ServiceTime
	// Workers is the number of requests served at once (0 = unlimited);
	// MaxQueue bounds the FIFO of requests waiting for a worker (0 =
	// unlimited).
	Workers, MaxQueue int
	// Engine is an engine stage's resolved engines: one, or a cluster of
	// pools behind a router (package sim/cluster).
	Engine *cluster.Plan
	// To are the stage's outgoing messages, sent together when it finishes.
	To []Edge
}

// Network prices messages between stages.
type Network struct {
	// InlineNs is the cost of a call between stages on one host.
	InlineNs int64
	// LatencyNs is the one-way latency of a hop between hosts.
	LatencyNs int64
	// BandwidthBytesPerSec is the link's bandwidth (0 = infinite).
	BandwidthBytesPerSec float64
	// SerializeNs is the per-message cost of encoding and decoding.
	SerializeNs int64
}

// HopNs is the cost of a message of b bytes between two hosts.
func (n Network) HopNs(b int64) int64 {
	d := n.LatencyNs + n.SerializeNs
	if n.BandwidthBytesPerSec > 0 {
		d += int64(math.Round(float64(b) / n.BandwidthBytesPerSec * 1e9))
	}
	return d
}

// Graph is a workflow: stages and the network between their hosts.
type Graph struct {
	Stages  []Stage
	Network Network
}

// Error is a problem with the graph, naming the stage (and edge, or -1) it
// is about, so that a scenario reader can point at the line.
type Error struct {
	Stage string
	// Edge is the index in the stage's To, or -1.
	Edge int
	// Field is the stage field at fault ("host", "kind", "to", "service",
	// "workers", ...), or "".
	Field string
	Msg   string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Stage != "" {
		b.WriteString("stage " + e.Stage)
		if e.Edge >= 0 {
			fmt.Fprintf(&b, ", edge %d", e.Edge)
		} else if e.Field != "" {
			b.WriteString(", " + e.Field)
		}
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Index returns the stage's position by name, or -1.
func (g *Graph) Index(name string) int {
	for i := range g.Stages {
		if g.Stages[i].Name == name {
			return i
		}
	}
	return -1
}

// Frontend returns the index of the frontend stage, or -1.
func (g *Graph) Frontend() int {
	for i := range g.Stages {
		if g.Stages[i].Kind == KindFrontend {
			return i
		}
	}
	return -1
}

// Validate checks the graph: names, kinds, placement, edges, inputs,
// cycles and parameters. The errors are *Error values, in the order of the
// stages.
func (g *Graph) Validate() []error {
	var errs []error
	bad := func(stage string, edge int, field, format string, a ...any) {
		errs = append(errs, &Error{Stage: stage, Edge: edge, Field: field, Msg: fmt.Sprintf(format, a...)})
	}
	if len(g.Stages) == 0 {
		bad("", -1, "", "the workflow has no stages")
		return errs
	}
	n := g.Network
	if n.InlineNs < 0 || n.LatencyNs < 0 || n.SerializeNs < 0 || n.BandwidthBytesPerSec < 0 {
		bad("", -1, "network", "network costs must not be negative")
	}
	seen := map[string]bool{}
	fronts := 0
	for i := range g.Stages {
		s := &g.Stages[i]
		switch {
		case s.Name == "":
			bad(fmt.Sprintf("#%d", i), -1, "name", "stage has no name")
		case seen[s.Name]:
			bad(s.Name, -1, "name", "a stage of this name already exists")
		}
		seen[s.Name] = true
		known := false
		for _, k := range Kinds {
			known = known || s.Kind == k
		}
		if !known {
			bad(s.Name, -1, "kind", "unknown kind %q: use frontend, orchestrator, service, engine or join", s.Kind)
		}
		if s.Kind == KindFrontend {
			fronts++
		}
		if s.Host == "" {
			bad(s.Name, -1, "host", "the stage is not placed on a host: give it host: or place it in every placement")
		}
		if s.Workers < 0 {
			bad(s.Name, -1, "workers", "workers is %d: use 0 (unlimited) or a positive count", s.Workers)
		}
		if s.MaxQueue < 0 {
			bad(s.Name, -1, "max_queue", "max_queue is %d: use 0 (unlimited) or a positive bound", s.MaxQueue)
		}
		if err := s.Service.Validate(); err != nil {
			bad(s.Name, -1, "service", "%v", err)
		}
		if s.Kind == KindEngine && s.Engine == nil {
			bad(s.Name, -1, "engine", "an engine stage needs an engine block")
		}
		if s.Kind == KindEngine && s.Service.Kind != ServiceNone {
			bad(s.Name, -1, "service", "an engine's time comes from its forward-pass model: remove service")
		}
	}
	if fronts != 1 {
		bad("", -1, "", "the workflow needs exactly one frontend stage (found %d)", fronts)
	}
	if len(errs) > 0 {
		return errs
	}
	fe := g.Frontend()
	inputs := make([]int, len(g.Stages))
	for i := range g.Stages {
		s := &g.Stages[i]
		if len(s.To) == 0 {
			bad(s.Name, -1, "to", "the stage sends nothing on: add an edge to a later stage or back to the frontend")
		}
		targets := map[string]bool{}
		for k, e := range s.To {
			j := g.Index(e.To)
			switch {
			case j < 0:
				bad(s.Name, k, "to", "edge to unknown stage %q", e.To)
				continue
			case j == i:
				bad(s.Name, k, "to", "edge from the stage to itself")
				continue
			case targets[e.To]:
				bad(s.Name, k, "to", "a second edge to %q", e.To)
				continue
			}
			targets[e.To] = true
			if e.Bytes < 0 {
				bad(s.Name, k, "bytes", "message size is negative (%d bytes)", e.Bytes)
			}
			inputs[j]++
		}
	}
	if len(errs) > 0 {
		return errs
	}
	for i := range g.Stages {
		s := &g.Stages[i]
		switch {
		case i == fe:
			if inputs[i] == 0 {
				bad(s.Name, -1, "", "no stage sends a response back to the frontend")
			}
		case s.Kind == KindJoin && inputs[i] == 0:
			bad(s.Name, -1, "", "the join has no inputs: no stage sends to it")
		case inputs[i] == 0:
			bad(s.Name, -1, "", "the stage is unreachable: no stage sends to it")
		case s.Kind != KindJoin && inputs[i] > 1:
			bad(s.Name, -1, "", "the stage has %d inputs: only a join may wait for several; add a join", inputs[i])
		}
	}
	if cyc := g.cycle(fe); cyc != nil {
		bad(cyc[0], -1, "to", "the graph has a cycle: %s", strings.Join(cyc, " -> "))
	}
	return errs
}

// cycle returns one cycle (names, first repeated last) ignoring the edges
// into the frontend, or nil. The search visits stages and edges in order,
// so the cycle reported is deterministic.
func (g *Graph) cycle(fe int) []string {
	state := make([]uint8, len(g.Stages)) // 0 new, 1 on stack, 2 done
	var stack []int
	var found []string
	var visit func(i int) bool
	visit = func(i int) bool {
		state[i] = 1
		stack = append(stack, i)
		for _, e := range g.Stages[i].To {
			j := g.Index(e.To)
			if j < 0 || j == fe {
				continue
			}
			if state[j] == 1 {
				for k, s := range stack {
					if s == j {
						for _, x := range stack[k:] {
							found = append(found, g.Stages[x].Name)
						}
						found = append(found, g.Stages[j].Name)
						return true
					}
				}
			}
			if state[j] == 0 && visit(j) {
				return true
			}
		}
		stack = stack[:len(stack)-1]
		state[i] = 2
		return false
	}
	for i := range g.Stages {
		if state[i] == 0 && visit(i) {
			return found
		}
	}
	return nil
}
