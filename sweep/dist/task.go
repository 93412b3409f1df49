package dist

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/steplab/steplab/sweep"
	"github.com/steplab/steplab/workflow/whatif"
)

// ProtocolVersion is the version of Task and PartMeta; a worker refuses a
// task of another version. Version 2 added the task's kind; version 3
// signed tasks, per-store subjects, limits and the parts' input digest.
const ProtocolVersion = 3

// MaxPoints bounds a sweep's grid (a point index has 6 digits in names).
const MaxPoints = 1_000_000

// Spec is a sweep: everything a worker needs to build any of its points.
type Spec struct {
	// Path names the scenario in messages; relative FPM artifact paths
	// resolve against its directory (make it absolute).
	Path string `json:"path"`
	// Scenario is the scenario file's bytes.
	Scenario []byte `json:"scenario"`
	// Sets are the --set overrides, applied in order before the varied
	// values.
	Sets []string `json:"sets,omitempty"`
	// Vary are the varied keys with all their values (the table's column
	// types depend on all of them).
	Vary []sweep.Vary `json:"vary"`
}

// Doc parses the scenario and applies the sets.
func (s *Spec) Doc() (*whatif.Doc, error) {
	d, err := whatif.Parse(s.Path, s.Scenario)
	if err != nil {
		return nil, err
	}
	for _, x := range s.Sets {
		if err := d.Set(x); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// ID is the sweep's default id: 16 hex digits of the SHA-256 of the
// scenario bytes, the sets and the varied values (not the path), so that
// every pod of an Indexed Job, and a resubmission, agree on it.
func (s *Spec) ID() string {
	h := sha256.New()
	b, _ := json.Marshal(struct {
		Scenario []byte
		Sets     []string
		Vary     []sweep.Vary
	}{s.Scenario, s.Sets, s.Vary})
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Points compiles every point (refusing the sweep if any is invalid, as a
// local sweep does) and returns them with their seeds.
func (s *Spec) Points() ([]sweep.Point, error) {
	d, err := s.Doc()
	if err != nil {
		return nil, err
	}
	return sweep.Compile(d, s.Vary)
}

var idRE = regexp.MustCompile(`^[A-Za-z0-9_]{1,64}$`)

// CheckID refuses a sweep id that cannot name a subject token, a KV key
// and a file.
func CheckID(id string) error {
	if !idRE.MatchString(id) {
		return fmt.Errorf("sweep id %q: use 1 to 64 letters, digits or _", id)
	}
	return nil
}

// TaskID is the id of point index of sweep id.
func TaskID(sweepID string, index int) string { return fmt.Sprintf("%s-%06d", sweepID, index) }

// PartName is the file name of a task's part.
func PartName(sweepID string, index int) string { return TaskID(sweepID, index) + ".parquet" }

// parsePartName splits <sweep id>-<index>.parquet.
func parsePartName(name string) (sweepID string, index int, ok bool) {
	base, found := strings.CutSuffix(name, ".parquet")
	if !found || strings.HasPrefix(name, ".") {
		return "", 0, false
	}
	i := strings.LastIndexByte(base, '-')
	if i <= 0 || len(base)-i-1 != 6 {
		return "", 0, false
	}
	if _, err := fmt.Sscanf(base[i+1:], "%06d", &index); err != nil {
		return "", 0, false
	}
	return base[:i], index, CheckID(base[:i]) == nil
}

// Task is one point of a sweep, the message a worker pulls.
type Task struct {
	V int `json:"v"`
	// Kind is what the point runs: whatif, simulate or calibrate
	// (sweep.Kinds); the worker dispatches on it.
	Kind    string `json:"kind"`
	SweepID string `json:"sweep_id"`
	// Run is the submission's nonce: dead letters of an earlier submission
	// of the same sweep are told apart by it.
	Run    string   `json:"run"`
	Index  int      `json:"index"`
	Total  int      `json:"total"`
	Spec   Spec     `json:"spec"`
	Values []string `json:"values"`
	Seed   uint64   `json:"seed"`
	// AckWaitNs and MaxDeliver are the consumer's, as the submitter set
	// them: the heartbeat period and the dead-letter bound.
	AckWaitNs  int64 `json:"ack_wait_ns"`
	MaxDeliver int   `json:"max_deliver"`
	// Limits bound the work of the point; the worker enforces them.
	Limits Limits `json:"limits"`
}

// Limits bound one point's work (0: no limit). A point past a limit fails
// at once (no redelivery) with a message naming the limit.
type Limits struct {
	// MaxRequests bounds the requests the point simulates (what-if and
	// simulate points; checked before it runs).
	MaxRequests int `json:"max_requests,omitempty"`
	// MaxSteps bounds the steps each of the point's clusters runs (simulate
	// and what-if points; plan and calibrate points are refused with one).
	MaxSteps int64 `json:"max_steps,omitempty"`
	// WallTimeNs bounds the point's running time.
	WallTimeNs int64 `json:"wall_time_ns,omitempty"`
	// MemoryBytes bounds the worker's heap while the point runs (the
	// worker sets it as its Go memory limit, GOMEMLIMIT).
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
}

// Tighter is the tighter of l and m, limit by limit (0 is no limit).
func (l Limits) Tighter(m Limits) Limits {
	tight := func(a, b int64) int64 {
		if a == 0 || (b != 0 && b < a) {
			return b
		}
		return a
	}
	return Limits{MaxRequests: int(tight(int64(l.MaxRequests), int64(m.MaxRequests))), MaxSteps: tight(l.MaxSteps, m.MaxSteps),
		WallTimeNs:  tight(l.WallTimeNs, m.WallTimeNs),
		MemoryBytes: tight(l.MemoryBytes, m.MemoryBytes)}
}

// Digest is the hex SHA-256 of the point's exact inputs (kind, scenario
// bytes, sets, varied keys and values, index, seed; not the path, so that
// a pod of an Indexed Job agrees). A part carries its task's digest and
// the merge refuses a part whose digest is not the point's it asked for.
func (t *Task) Digest() string {
	b, _ := json.Marshal(struct {
		Kind     string
		Scenario []byte
		Sets     []string
		Vary     []sweep.Vary
		Index    int
		Values   []string
		Seed     uint64
	}{t.Kind, t.Spec.Scenario, t.Spec.Sets, t.Spec.Vary, t.Index, t.Values, t.Seed})
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// Check refuses a task whose names or numbers are out of bounds: its
// sweep id, its index and total (against its grid) and its values (the
// grid's at its index).
func (t *Task) Check() error {
	if t.V != ProtocolVersion {
		return fmt.Errorf("task protocol version %d, this steplab speaks %d", t.V, ProtocolVersion)
	}
	if err := CheckID(t.SweepID); err != nil {
		return err
	}
	n := 1
	for _, v := range t.Spec.Vary {
		if len(v.Values) == 0 || n > MaxPoints/len(v.Values) {
			return fmt.Errorf("sweep %s: its grid is empty or over %d points", t.SweepID, MaxPoints)
		}
		n *= len(v.Values)
	}
	if t.Total != n || t.Index < 0 || t.Index >= n {
		return fmt.Errorf("sweep %s: point %d of %d: its grid has %d points (indices 0 to %d)", t.SweepID, t.Index, t.Total, n, n-1)
	}
	if want := gridValues(t.Spec.Vary, t.Index); !slices.Equal(want, t.Values) {
		return fmt.Errorf("sweep %s: point %d has values %q, its grid says %q", t.SweepID, t.Index, t.Values, want)
	}
	return nil
}

// gridValues are the values of point i of sweep.Grid(vary) (the first
// key changes slowest).
func gridValues(vary []sweep.Vary, i int) []string {
	out := make([]string, len(vary))
	for k := len(vary) - 1; k >= 0; k-- {
		n := len(vary[k].Values)
		out[k] = vary[k].Values[i%n]
		i /= n
	}
	return out
}

// ID is the task id.
func (t *Task) ID() string { return TaskID(t.SweepID, t.Index) }

// Describe names the point: "point 3 (load.rate_rps=50)".
func (t *Task) Describe() string {
	var kv []string
	for k, v := range t.Spec.Vary {
		if k < len(t.Values) {
			kv = append(kv, v.Key+"="+t.Values[k])
		}
	}
	return fmt.Sprintf("point %d (%s)", t.Index, strings.Join(kv, ", "))
}

// Plan builds the tasks of a sweep, compiling every point first.
func Plan(spec Spec, sweepID, run string) ([]Task, error) {
	if err := CheckID(sweepID); err != nil {
		return nil, err
	}
	pts, err := spec.Points()
	if err != nil {
		return nil, err
	}
	d, err := spec.Doc()
	if err != nil {
		return nil, err
	}
	kind := sweep.KindOf(d)
	tasks := make([]Task, len(pts))
	for i, p := range pts {
		tasks[i] = Task{V: ProtocolVersion, Kind: kind, SweepID: sweepID, Run: run, Index: p.Index, Total: len(pts),
			Spec: spec, Values: p.Values, Seed: p.Seed}
	}
	return tasks, nil
}

// Execute runs the task's point: the result holds that one point.
func (t *Task) Execute(maxSteps int64) (res *sweep.Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: panic: %v", t.Describe(), r)
		}
	}()
	if err := t.Check(); err != nil {
		return nil, err
	}
	d, err := t.Spec.Doc()
	if err != nil {
		return nil, err
	}
	if k := sweep.KindOf(d); k != t.Kind {
		return nil, fmt.Errorf("%s: a %s task whose document reads as %s (kinds: %s)", t.Describe(), t.Kind, k, strings.Join(sweep.Kinds, ", "))
	}
	p, name, err := sweep.RunPoint(d, t.Spec.Vary, t.Index, t.Values, maxSteps)
	if err != nil {
		return nil, err
	}
	if p.Seed != t.Seed {
		return nil, fmt.Errorf("%s: seed %d derived here, %d by the submitter (different steplab versions?)", t.Describe(), p.Seed, t.Seed)
	}
	out := &sweep.Result{Scenario: name, Vary: t.Spec.Vary, Points: []sweep.PointResult{p}}
	if t.Kind != sweep.KindWhatif {
		out.Kind = t.Kind
	}
	return out, nil
}

// newRun returns a random submission nonce.
func newRun() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// SpecFromFile builds a spec from a scenario file, its sets and its varied
// keys; the path is made absolute.
func SpecFromFile(path string, scenario []byte, sets []string, vary []sweep.Vary) Spec {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	return Spec{Path: path, Scenario: scenario, Sets: sets, Vary: vary}
}
