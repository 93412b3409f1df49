package whatif

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/internal/yamldoc"
	"github.com/steplab/steplab/pricing"

	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim/cluster"
	"github.com/steplab/steplab/sim/workload"
	"github.com/steplab/steplab/workflow"
)

// File is the scenario document (docs/whatif.md).
type File struct {
	Name    string      `yaml:"name"`
	Seed    uint64      `yaml:"seed"`
	Network NetworkSpec `yaml:"network"`
	Load    LoadSpec    `yaml:"load"`
	// SLO, when set, makes the audit count goodput: requests whose TTFT
	// and inter-token latency at the first engine stage meet it.
	SLO    SLOSpec     `yaml:"slo"`
	Stages []StageSpec `yaml:"stages"`
	// Placements maps placement name -> {stage: host}; read in document
	// order from the node.
	Placements yaml.Node `yaml:"placements"`
}

// NetworkSpec prices messages between stages.
type NetworkSpec struct {
	InlineUs      float64 `yaml:"inline_us"`
	LatencyUs     float64 `yaml:"latency_us"`
	BandwidthGbps float64 `yaml:"bandwidth_gbps"`
	SerializeUs   float64 `yaml:"serialize_us"`
}

// SLOSpec is a latency objective (0: none on that metric).
type SLOSpec struct {
	TTFTMs float64 `yaml:"ttft_ms"`
	ITLMs  float64 `yaml:"itl_ms"`
}

// LoadSpec is the client's load.
type LoadSpec struct {
	Kind string `yaml:"kind"` // constant | poisson | gamma | closed | trace
	// Trace (kind trace): a dataset directory or embedded:NAME replayed
	// with its arrivals, lengths and prefix hashes; rate_rps rescales it,
	// hash_block_size is its tokens per prefix hash.
	Trace         string              `yaml:"trace"`
	HashBlockSize int                 `yaml:"hash_block_size"`
	RateRPS       float64             `yaml:"rate_rps"`
	CV            float64             `yaml:"cv"`
	Users         int                 `yaml:"users"`
	ThinkS        float64             `yaml:"think_s"`
	Think         string              `yaml:"think"`
	Requests      int                 `yaml:"requests"`
	Warmup        int                 `yaml:"warmup_requests"`
	Repetitions   int                 `yaml:"repetitions"`
	StartupS      float64             `yaml:"startup_s"`
	DrainS        float64             `yaml:"drain_s"`
	TimeoutS      float64             `yaml:"timeout_s"`
	Prompt        scenario.LengthSpec `yaml:"prompt"`
	Output        scenario.LengthSpec `yaml:"output"`
}

// StageSpec is one stage.
type StageSpec struct {
	Name     string      `yaml:"name"`
	Kind     string      `yaml:"kind"`
	Host     string      `yaml:"host"`
	Workers  int         `yaml:"workers"`
	MaxQueue int         `yaml:"max_queue"`
	Service  ServiceSpec `yaml:"service"`
	Engine   *EngineSpec `yaml:"engine"`
	To       []EdgeSpec  `yaml:"to"`
}

// ServiceSpec is a service-time model.
type ServiceSpec struct {
	Kind             string  `yaml:"kind"` // fixed | lognormal | per_token | vision_encoder
	Ms               float64 `yaml:"ms"`
	MeanMs           float64 `yaml:"mean_ms"`
	Sigma            float64 `yaml:"sigma"`
	BaseMs           float64 `yaml:"base_ms"`
	PerPromptTokenUs float64 `yaml:"per_prompt_token_us"`
	PerOutputTokenUs float64 `yaml:"per_output_token_us"`
	// vision_encoder: the model's config.json, the GPU, images per request
	// and their size in pixels.
	Model    string `yaml:"model"`
	Hardware string `yaml:"hardware"`
	Images   int    `yaml:"images"`
	ImagePx  []int  `yaml:"image_px"`
}

// EngineSpec configures an engine stage: one engine, or a cluster of
// pools behind a router (the cluster block of steplab simulate).
type EngineSpec struct {
	Hardware string              `yaml:"hardware"`
	Model    string              `yaml:"model"`
	FPM      string              `yaml:"fpm"`
	Limits   scenario.EngineSpec `yaml:"limits"`
	Cluster  scenario.Spec       `yaml:"cluster"`
}

// EdgeSpec is a message to another stage: a stage name, or {stage, bytes}.
type EdgeSpec struct {
	Stage string `yaml:"stage"`
	Bytes int64  `yaml:"bytes"`
}

// UnmarshalYAML accepts a bare stage name.
func (e *EdgeSpec) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		e.Stage = n.Value
		return nil
	}
	type plain EdgeSpec
	return n.Decode((*plain)(e))
}

// Doc is a scenario's YAML, kept as a node tree so that errors name lines
// and Set can override keys (yamldoc.Doc: every document steplab reads).
type Doc = yamldoc.Doc

// Load reads a scenario file.
func Load(path string) (*Doc, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, b)
}

// Parse reads a scenario from bytes; path names it in messages (and FPM
// artifact paths are relative to its directory).
func Parse(path string, b []byte) (*Doc, error) {
	d, err := yamldoc.New(path, b)
	if err != nil {
		return nil, err
	}
	if d.Root().Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: a scenario is a YAML mapping (name, seed, network, load, stages, placements)", path)
	}
	if d.Empty() {
		return nil, fmt.Errorf("%s: the file is empty: a scenario is a YAML mapping (name, seed, network, load, stages, placements; docs/whatif.md)", path)
	}
	return d, nil
}

func child(m *yaml.Node, key string) *yaml.Node { return yamldoc.Child(m, key) }

// Scenario is a compiled, valid scenario.
type Scenario struct {
	File       File
	Path       string
	Load       workflow.Load
	Placements []Placement
	// StageNames in document order.
	StageNames []string
	// Notes say how stages were priced where a model did it (a vision
	// encoder), for the manifest.
	Notes []string
}

// Placement is one arrangement of the stages on hosts.
type Placement struct {
	Name  string
	Graph *workflow.Graph
}

// GPUs is the GPUs of the scenario's engine stages.
func (s *Scenario) GPUs() int {
	n := 0
	if len(s.Placements) > 0 {
		for _, st := range s.Placements[0].Graph.Stages {
			if st.Engine != nil {
				n += st.Engine.GPUs()
			}
			if st.Service.Kind == workflow.ServiceVision {
				n += st.Workers
			}
		}
	}
	return n
}

// Offered is the open loop's rate (0 for a closed loop).
func (s *Scenario) Offered() float64 {
	if s.Load.Kind == workflow.LoadClosed {
		return 0
	}
	return s.Load.RateRPS
}

// lineErr is an error at a place of the scenario: a line, or an
// override (Doc.Where).
type lineErr struct {
	where string
	msg   string
}

func (e *lineErr) Error() string { return e.where + ": " + e.msg }

type compiler struct {
	d    *Doc
	errs []error
}

func (c *compiler) at(n *yaml.Node, format string, a ...any) {
	c.errs = append(c.errs, &lineErr{where: c.d.Where(n), msg: fmt.Sprintf(format, a...)})
}

// Compile checks the document and builds the scenario; every problem is
// reported with its line.
func Compile(d *Doc) (*Scenario, error) {
	c := &compiler{d: d}
	var f File
	if err := d.Decode(&f); err != nil {
		return nil, err
	}
	sc := &Scenario{File: f, Path: d.Path}
	c.load(sc)
	net := c.network(f.Network)
	stagesNode := child(d.Root(), "stages")
	if len(f.Stages) == 0 {
		c.at(d.Root(), "no stages: a workflow needs at least a frontend and the stages it calls")
		return nil, errors.Join(c.errs...)
	}
	base := make([]workflow.Stage, len(f.Stages))
	stageNode := map[string]*yaml.Node{}
	for i, s := range f.Stages {
		n := stagesNode.Content[i]
		if s.Name != "" {
			stageNode[s.Name] = n
		}
		sc.StageNames = append(sc.StageNames, s.Name)
		base[i] = c.stage(s, n, sc)
	}
	sc.Placements = c.placements(f, base, net, stageNode)
	if len(c.errs) > 0 {
		return nil, errors.Join(c.errs...)
	}
	for _, p := range sc.Placements {
		for _, err := range p.Graph.Validate() {
			var ge *workflow.Error
			if !errors.As(err, &ge) {
				c.at(d.Root(), "%v", err)
				continue
			}
			n := stageNode[ge.Stage]
			if n == nil {
				n = d.Root()
				if ge.Field == "network" {
					n = child(d.Root(), "network")
				}
			}
			switch {
			case ge.Edge >= 0:
				if to := child(n, "to"); to != nil && ge.Edge < len(to.Content) {
					n = to.Content[ge.Edge]
				}
			case ge.Field == "host" && len(sc.Placements) > 1:
				// unplaced: point at the stage; the placement is in the message
			case ge.Field != "":
				if v := child(n, ge.Field); v != nil {
					n = v
				}
			}
			msg := err.Error()
			if len(sc.Placements) > 1 || p.Name != "default" {
				msg = "placement " + p.Name + ": " + msg
			}
			c.at(n, "%s", msg)
		}
	}
	if len(c.errs) > 0 {
		return nil, errors.Join(dedupe(c.errs)...)
	}
	return sc, nil
}

// dedupe drops errors repeated across placements (the same stage problem
// in every placement reads once).
func dedupe(errs []error) []error {
	var out []error
	seen := map[string]bool{}
	for _, e := range errs {
		key := e.Error()
		if le, ok := e.(*lineErr); ok {
			if _, rest, ok := strings.Cut(le.msg, ": "); ok && strings.HasPrefix(le.msg, "placement ") {
				key = le.where + ": " + rest
			}
		}
		if !seen[key] {
			seen[key] = true
			out = append(out, e)
		}
	}
	return out
}

func (c *compiler) field(parent *yaml.Node, key string) *yaml.Node {
	if v := child(parent, key); v != nil {
		return v
	}
	return parent
}

func (c *compiler) network(n NetworkSpec) workflow.Network {
	nn := child(c.d.Root(), "network")
	for _, f := range []struct {
		key string
		v   float64
	}{{"inline_us", n.InlineUs}, {"latency_us", n.LatencyUs}, {"bandwidth_gbps", n.BandwidthGbps}, {"serialize_us", n.SerializeUs}} {
		if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			c.at(c.field(nn, f.key), "network.%s is %g: use a finite value >= 0", f.key, f.v)
		}
	}
	return workflow.Network{InlineNs: usNs(n.InlineUs), LatencyNs: usNs(n.LatencyUs), SerializeNs: usNs(n.SerializeUs),
		BandwidthBytesPerSec: n.BandwidthGbps * 1e9 / 8}
}

func usNs(us float64) int64 { return int64(math.Round(us * 1e3)) }
func sNs(s float64) int64   { return int64(math.Round(s * 1e9)) }

func (c *compiler) load(sc *Scenario) {
	l := sc.File.Load
	ln := child(c.d.Root(), "load")
	if ln == nil {
		c.at(c.d.Root(), "no load: add load: {kind: constant, rate_rps: ..., requests: ...}")
		return
	}
	if l.Repetitions == 0 && child(ln, "repetitions") == nil {
		l.Repetitions = 1 // left out: one run per placement
		sc.File.Load.Repetitions = 1
	}
	wl := workflow.Load{Kind: l.Kind, RateRPS: l.RateRPS, CV: l.CV, Users: l.Users, Think: l.Think, ThinkNs: sNs(l.ThinkS),
		Requests: l.Requests, Warmup: l.Warmup, StartupNs: sNs(l.StartupS), DrainNs: sNs(l.DrainS), TimeoutNs: sNs(l.TimeoutS)}
	switch l.Kind {
	case workflow.LoadConstant, workflow.LoadPoisson, workflow.LoadGamma:
		if !(l.RateRPS > 0) || math.IsInf(l.RateRPS, 0) {
			c.at(c.field(ln, "rate_rps"), "load.rate_rps is %g: an open loop needs a positive rate", l.RateRPS)
		}
		if l.Kind == workflow.LoadGamma && !(l.CV > 0) {
			c.at(c.field(ln, "cv"), "load.cv is %g: the gamma process needs a coefficient of variation > 0", l.CV)
		}
	case workflow.LoadTrace:
		if l.Trace == "" {
			c.at(c.field(ln, "kind"), "load.kind trace needs load.trace: a dataset directory or embedded:NAME")
		}
		if l.RateRPS < 0 || math.IsNaN(l.RateRPS) || math.IsInf(l.RateRPS, 0) {
			c.at(c.field(ln, "rate_rps"), "load.rate_rps is %g: a rate > 0 rescales the trace, 0 replays it as recorded", l.RateRPS)
		}
		wl.Trace = &scenario.WorkloadSpec{Kind: "trace", Trace: l.Trace, Limit: l.Requests + l.Warmup, RateRPS: l.RateRPS,
			BlockSize: l.HashBlockSize, Warmup: l.Warmup}
	case workflow.LoadClosed:
		if l.Users < 1 {
			c.at(c.field(ln, "users"), "load.users is %d: a closed loop needs at least one user", l.Users)
		}
		switch l.Think {
		case "", workload.ThinkFixed, workload.ThinkExponential:
		default:
			c.at(c.field(ln, "think"), "load.think %q: use fixed or exponential", l.Think)
		}
	default:
		c.at(c.field(ln, "kind"), "load.kind %q: use constant, poisson, gamma, closed or trace", l.Kind)
	}
	for _, f := range []struct {
		key string
		v   float64
	}{{"startup_s", l.StartupS}, {"drain_s", l.DrainS}, {"timeout_s", l.TimeoutS}, {"think_s", l.ThinkS}, {"cv", l.CV}} {
		if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			c.at(c.field(ln, f.key), "load.%s is %g: use a finite value >= 0", f.key, f.v)
		}
	}
	if l.Requests < 1 {
		c.at(c.field(ln, "requests"), "load.requests is %d: measure at least one request", l.Requests)
	}
	if l.Warmup < 0 {
		c.at(c.field(ln, "warmup_requests"), "load.warmup_requests is %d: use 0 or more", l.Warmup)
	}
	if l.Repetitions < 1 {
		c.at(c.field(ln, "repetitions"), "load.repetitions is %d: use 1 or more", l.Repetitions)
	}
	if l.Kind != workflow.LoadTrace {
		var err error
		if wl.Lengths.Prompt, err = lengthDist(l.Prompt); err != nil {
			c.at(c.field(ln, "prompt"), "load.prompt: %v", err)
		}
		if wl.Lengths.Output, err = lengthDist(l.Output); err != nil {
			c.at(c.field(ln, "output"), "load.output: %v", err)
		}
	}
	sn := child(c.d.Root(), "slo")
	for _, f := range []struct {
		key string
		v   float64
	}{{"ttft_ms", sc.File.SLO.TTFTMs}, {"itl_ms", sc.File.SLO.ITLMs}} {
		if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			c.at(c.field(sn, f.key), "slo.%s is %g: use a latency > 0 ms, or 0 for none", f.key, f.v)
		}
	}
	sc.Load = wl
}

func lengthDist(l scenario.LengthSpec) (workload.LengthDist, error) {
	var d workload.LengthDist
	switch l.Kind {
	case "fixed":
		d = workload.Fixed(l.Value)
		if l.Value < 1 {
			return d, fmt.Errorf("fixed length %d: use at least 1 token", l.Value)
		}
	case "uniform":
		d = workload.Uniform(l.Min, l.Max)
		if l.Min < 1 || l.Max < l.Min {
			return d, fmt.Errorf("uniform needs 1 <= min <= max (min %d, max %d)", l.Min, l.Max)
		}
	case "lognormal":
		d = workload.Lognormal(l.Mean, l.Sigma)
		d.Min, d.Max = l.Min, l.Max
		if !(l.Mean >= 1) || l.Sigma < 0 {
			return d, fmt.Errorf("lognormal needs mean >= 1 and sigma >= 0 (mean %g, sigma %g)", l.Mean, l.Sigma)
		}
	case "":
		return d, errors.New("no length distribution: give kind: fixed|uniform|lognormal")
	default:
		return d, fmt.Errorf("kind %q: use fixed, uniform or lognormal", l.Kind)
	}
	return d, nil
}

func (c *compiler) stage(s StageSpec, n *yaml.Node, sc *Scenario) workflow.Stage {
	st := workflow.Stage{Name: s.Name, Kind: workflow.Kind(s.Kind), Host: s.Host, Workers: s.Workers, MaxQueue: s.MaxQueue}
	sv := s.Service
	sn := c.field(n, "service")
	switch sv.Kind {
	case "":
	case workflow.ServiceFixed:
		st.Service = workflow.ServiceTime{Kind: sv.Kind, MeanNs: sv.Ms * 1e6}
	case workflow.ServiceLognormal:
		st.Service = workflow.ServiceTime{Kind: sv.Kind, MeanNs: sv.MeanMs * 1e6, Sigma: sv.Sigma}
	case workflow.ServicePerToken:
		st.Service = workflow.ServiceTime{Kind: sv.Kind, BaseNs: sv.BaseMs * 1e6, PerPromptTokenNs: sv.PerPromptTokenUs * 1e3,
			PerOutputTokenNs: sv.PerOutputTokenUs * 1e3}
	case workflow.ServiceVision:
		st.Service = c.vision(s, sn, sc)
	default:
		c.at(c.field(sn, "kind"), "stage %s: service.kind %q: use fixed, lognormal, per_token or vision_encoder", s.Name, sv.Kind)
	}
	for _, e := range s.To {
		st.To = append(st.To, workflow.Edge{To: e.Stage, Bytes: e.Bytes})
	}
	if s.Engine != nil {
		if s.Kind != string(workflow.KindEngine) {
			c.at(c.field(n, "engine"), "stage %s: an engine block on a %s stage: set kind: engine or remove it", s.Name, s.Kind)
		}
		st.Engine = c.engine(s, c.field(n, "engine"), sc)
	}
	return st
}

// vision prices a vision_encoder stage: each request's images through the
// model's vision tower on one GPU per worker, by the roofline.
func (c *compiler) vision(s StageSpec, n *yaml.Node, sc *Scenario) workflow.ServiceTime {
	sv := s.Service
	bad := func(key, format string, a ...any) workflow.ServiceTime {
		c.at(c.field(n, key), "stage %s: service.%s: "+format, append([]any{s.Name, key}, a...)...)
		return workflow.ServiceTime{}
	}
	if s.Workers <= 0 {
		return bad("kind", "a vision encoder runs on GPUs: set the stage's workers to its GPU count (workers: 1)")
	}
	if sv.Images < 0 {
		return bad("images", "%d: images per request must be >= 0", sv.Images)
	}
	if len(sv.ImagePx) != 2 || sv.ImagePx[0] <= 0 || sv.ImagePx[1] <= 0 {
		return bad("image_px", "want [width, height] in pixels, both > 0 (image_px: [1024, 1024])")
	}
	if sv.Model == "" {
		return bad("model", "missing: the vision-language model's config.json (model: path/to/config.json)")
	}
	v, err := catalog.LoadVisionTower(sv.Model)
	if err != nil {
		return bad("model", "%v", err)
	}
	hw, err := catalog.LookupHardware(cmp.Or(sv.Hardware, scenario.Default().Hardware))
	if err != nil {
		return bad("hardware", "%v", err)
	}
	cost := v.ImageCost(hw, sv.ImagePx[0], sv.ImagePx[1])
	sc.Notes = append(sc.Notes, fmt.Sprintf("stage %s: %s's vision encoder on %s, roofline prior (efficiencies: %s; no encoder kernel measured): %d patches and %d tokens per %dx%d image, %.2f ms per image (GEMMs %.2f, attention %.2f, overhead %.2f), %d per request",
		s.Name, v.Name, hw.Name, hw.Roofline.Basis, cost.Patches, cost.Tokens, sv.ImagePx[0], sv.ImagePx[1], cost.TotalNs/1e6, cost.GEMMNs/1e6, cost.AttentionNs/1e6, cost.OverheadNs/1e6, sv.Images))
	return workflow.ServiceTime{Kind: workflow.ServiceVision, MeanNs: float64(sv.Images) * cost.TotalNs}
}

func (c *compiler) engine(s StageSpec, n *yaml.Node, sc *Scenario) *cluster.Plan {
	e := s.Engine
	cs := scenario.Default()
	cs.Cluster = e.Cluster
	ss := &cs
	ss.Name = s.Name
	if e.Hardware != "" {
		ss.Hardware = e.Hardware
	}
	if e.Model != "" {
		ss.Model = e.Model
	}
	if e.FPM != "" {
		ss.FPM = e.FPM
		if e.FPM != "roofline" && !pricing.IsOps(e.FPM) && !filepath.IsAbs(e.FPM) {
			ss.FPM = filepath.Join(filepath.Dir(c.d.Path), e.FPM)
		}
	}
	// Limits decode over the simulator's defaults: keys left out keep them.
	if ln := child(n, "limits"); ln != nil {
		if err := ln.Decode(&ss.Engine); err != nil {
			c.at(ln, "stage %s: engine.limits: %v", s.Name, err)
			return nil
		}
	}
	p, err := cs.EnginePlan()
	if err == nil && sc.File.Load.Kind != workflow.LoadTrace {
		for _, pp := range p.Pools {
			if err = scenario.CheckLengths(pp.Engine, sc.File.Load.Prompt, sc.File.Load.Output); err != nil {
				break
			}
		}
	}
	if err != nil {
		c.at(n, "stage %s: engine: %v", s.Name, err)
		return nil
	}
	if sc.Load.BlockSize == 0 {
		sc.Load.BlockSize = p.Pools[0].Engine.Sched.BlockSize
	}
	for _, pp := range p.Pools {
		if m := pp.Engine.Sched.MaxModelLen; sc.Load.MaxModelLen == 0 || m < sc.Load.MaxModelLen {
			sc.Load.MaxModelLen = m
		}
	}
	return p.Plan
}

func (c *compiler) placements(f File, base []workflow.Stage, net workflow.Network, stageNode map[string]*yaml.Node) []Placement {
	pn := &f.Placements
	build := func(name string, hosts map[string]string) Placement {
		g := &workflow.Graph{Network: net, Stages: slices.Clone(base)}
		for i := range g.Stages {
			if h, ok := hosts[g.Stages[i].Name]; ok {
				g.Stages[i].Host = h
			}
		}
		return Placement{Name: name, Graph: g}
	}
	if pn.Kind == 0 || (pn.Kind == yaml.ScalarNode && pn.Tag == "!!null") {
		return []Placement{build("default", nil)}
	}
	if pn.Kind != yaml.MappingNode || len(pn.Content) == 0 {
		c.at(pn, "placements: a mapping of placement name -> {stage: host}")
		return nil
	}
	var out []Placement
	seen := map[string]bool{}
	for j := 0; j+1 < len(pn.Content); j += 2 {
		k, v := pn.Content[j], pn.Content[j+1]
		if seen[k.Value] {
			c.at(k, "placement %q appears twice", k.Value)
			continue
		}
		seen[k.Value] = true
		hosts := map[string]string{}
		if v.Kind != yaml.MappingNode && !(v.Kind == yaml.ScalarNode && v.Tag == "!!null") {
			c.at(v, "placement %s: a mapping of stage -> host", k.Value)
			continue
		}
		for i := 0; i+1 < len(v.Content); i += 2 {
			sk, hv := v.Content[i], v.Content[i+1]
			if _, ok := stageNode[sk.Value]; !ok {
				c.at(sk, "placement %s places unknown stage %q", k.Value, sk.Value)
				continue
			}
			if hv.Kind != yaml.ScalarNode || hv.Value == "" {
				c.at(hv, "placement %s: stage %s: the host is a name", k.Value, sk.Value)
				continue
			}
			hosts[sk.Value] = hv.Value
		}
		out = append(out, build(k.Value, hosts))
	}
	return out
}
