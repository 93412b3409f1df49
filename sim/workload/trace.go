package workload

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"

	"github.com/steplab/steplab/datasets"
)

// TraceConfig configures a trace replayed from the requests table of a
// dataset (an imported trace, or the requests of a capture or simulation).
type TraceConfig struct {
	// Dir is the dataset directory; it must hold a requests table.
	Dir string
	// StartNs and EndNs select recorded arrivals in [StartNs, EndNs)
	// (EndNs 0 = no end).
	StartNs, EndNs int64
	// Limit keeps the first Limit arrivals of the window (0 = all).
	Limit int
	// RateRPS, when > 0, rescales the inter-arrival gaps by one factor so
	// that the mean rate, (n−1)/(last−first), equals RateRPS; the first
	// arrival keeps its time. 0 replays the recorded times.
	RateRPS float64
	// Rebase shifts the window so that its first arrival is at 0.
	Rebase bool
	// BlockSize is the number of prompt tokens behind each prefix_hash_ids
	// entry (0: what the manifest records, HashBlockSize). Arrival.PrefixHashes
	// is a chain of those blocks; EngineBlockHashes maps it to the engine's
	// block size.
	BlockSize int
	// WarmupRequests marks the first arrivals of the window Warmup.
	WarmupRequests int
	// MaxModelLen, when > 0, refuses a trace with a request whose prompt
	// plus output tokens exceed it: the engine would reject it, so the
	// scenario cannot replay the trace as recorded.
	MaxModelLen int
}

// Validate reports the first invalid setting, naming the field.
func (c TraceConfig) Validate() error {
	if c.Dir == "" {
		return fmt.Errorf("workload: trace: Dir is empty: name a dataset directory with a requests table")
	}
	if c.RateRPS < 0 || math.IsNaN(c.RateRPS) || math.IsInf(c.RateRPS, 0) {
		return fmt.Errorf("workload: trace: RateRPS=%v: must be a finite rate > 0, or 0 to replay recorded times", c.RateRPS)
	}
	if c.Limit < 0 {
		return fmt.Errorf("workload: trace: Limit=%d: must be >= 0 (0 = all)", c.Limit)
	}
	if c.EndNs != 0 && c.EndNs <= c.StartNs {
		return fmt.Errorf("workload: trace: window [StartNs=%d, EndNs=%d) is empty: set EndNs > StartNs, or 0 for no end", c.StartNs, c.EndNs)
	}
	if c.BlockSize < 0 {
		return fmt.Errorf("workload: trace: BlockSize=%d: must be >= 1 token (0 = the manifest's workload.params.%s)", c.BlockSize, datasets.ParamHashBlockSize)
	}
	if c.WarmupRequests < 0 {
		return fmt.Errorf("workload: trace: WarmupRequests=%d: must be >= 0", c.WarmupRequests)
	}
	return nil
}

func (c TraceConfig) inWindow(t int64) bool {
	return t >= c.StartNs && (c.EndNs == 0 || t < c.EndNs)
}

// TraceArrival is the arrival a requests row replays as, the one conversion
// of every trace replay (TraceSource, and a request replay of a recorded
// run): its id, recorded arrival time and lengths, and its prefix_hash_ids
// as a hash chain (Arrival.PrefixHashes, nil without ids) over blocks of the
// trace's HashBlockSize, which EngineBlockHashes re-blocks for an engine.
func TraceArrival(r *datasets.Request) Arrival {
	a := Arrival{ID: r.ReqID, AtNs: r.ArrivalNs, PromptTokens: int(r.PromptTokens), OutputTokens: int(r.OutputTokens)}
	if len(r.PrefixHashIDs) > 0 {
		a.PrefixHashes = chainHashes(r.PrefixHashIDs, make([]uint64, 0, len(r.PrefixHashIDs)))
	}
	return a
}

// HashBlockSize is the number of prompt tokens behind each prefix_hash_ids
// entry of the dataset's requests: configured when > 0, else what its
// manifest records (workload.params.hash_block_size, written by the
// importers of traces with prefix hashes). A dataset whose requests carry
// prefix_hash_ids with neither is refused: the ids cannot be mapped to
// engine blocks without it, and a guess would invent or lose prefix hits.
// 0 for a dataset without prefix hashes.
func HashBlockSize(d *datasets.Dataset, configured int) (int, error) {
	if configured > 0 {
		return configured, nil
	}
	n, err := d.Manifest.HashBlockSize()
	if err != nil {
		return 0, fmt.Errorf("workload: trace: %s: %w", d.Dir, err)
	}
	if n > 0 {
		return n, nil
	}
	has, err := hasPrefixHashes(d)
	if err != nil {
		return 0, fmt.Errorf("workload: trace: %w", err)
	}
	if has {
		return 0, fmt.Errorf("workload: trace: %s: requests carry prefix_hash_ids but the manifest records no workload.params.%s (the prompt tokens behind each id; Mooncake traces: 512): record it there, or give it to simulate as workload.hash_block_size",
			d.Dir, datasets.ParamHashBlockSize)
	}
	return 0, nil
}

// hasPrefixHashes reports whether any request carries prefix_hash_ids.
func hasPrefixHashes(d *datasets.Dataset) (bool, error) {
	type hashes struct {
		IDs []int64 `parquet:"prefix_hash_ids,list"`
	}
	sc, err := datasets.Scan[hashes](d, datasets.TableRequests)
	if err != nil {
		return false, err
	}
	defer sc.Close()
	buf := make([]hashes, 1024)
	for {
		n, err := sc.Read(buf)
		for _, r := range buf[:n] {
			if len(r.IDs) > 0 {
				return true, nil
			}
		}
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
}

// traceIndex is the pre-pass projection: no prefix hashes are read.
type traceIndex struct {
	ReqID        string `parquet:"req_id"`
	ArrivalNs    int64  `parquet:"arrival_ns"`
	PromptTokens int64  `parquet:"prompt_tokens"`
	OutputTokens int64  `parquet:"output_tokens"`
}

// TraceSource replays a requests table. If the table is sorted by arrival_ns
// (an imported trace), it is streamed twice (a pre-pass over four columns for
// the count, the time span and validation, then the rows), holding one read
// buffer; memory is flat in trace length. A table not sorted by arrival_ns
// (the requests of a capture are written as they finish) is read once into
// memory and stably sorted: its memory grows with the window.
type TraceSource struct {
	cfg       TraceConfig
	blockSize int
	n         int   // arrivals the source produces
	firstNs   int64 // first recorded arrival of the window
	lastNs    int64
	scale     float64 // new gap = recorded gap · scale
	shift     int64   // added after scaling

	// streaming
	sc  *datasets.Scanner[datasets.Request]
	buf []datasets.Request
	pos int
	end int
	row int // rows of the table consumed

	// sorted in memory (unsorted tables)
	rows []datasets.Request

	// tooLong counts the requests beyond MaxModelLen; longest is the
	// longest of them.
	tooLong int
	longest traceIndex

	emitted int
	next    Arrival
	have    bool
	err     error
}

// NewTrace checks the trace (every row of the window has prompt_tokens and
// output_tokens >= 1; the window is not empty) and opens it.
func NewTrace(cfg TraceConfig) (*TraceSource, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d, err := datasets.Open(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("workload: trace: %w", err)
	}
	block, err := HashBlockSize(d, cfg.BlockSize)
	if err != nil {
		return nil, err
	}
	t := &TraceSource{cfg: cfg, blockSize: block, scale: 1}
	sorted, err := t.prepass(d)
	if err != nil {
		return nil, err
	}
	if !sorted {
		// The pre-pass measured the table's first rows, not the window's.
		t.tooLong, t.longest = 0, traceIndex{}
		if err := t.loadSorted(d); err != nil {
			return nil, err
		}
	}
	if t.tooLong > 0 {
		l := t.longest
		return nil, fmt.Errorf("workload: trace: %s: %d requests need more than max_model_len %d tokens (the longest, %q, has %d prompt + %d output tokens): raise engine.max_model_len to %d, or choose a window without them",
			cfg.Dir, t.tooLong, cfg.MaxModelLen, l.ReqID, l.PromptTokens, l.OutputTokens, l.PromptTokens+l.OutputTokens)
	}
	if t.n == 0 {
		return nil, fmt.Errorf("workload: trace: %s: no requests in the window [StartNs=%d, EndNs=%d): the trace is empty or the window misses it", cfg.Dir, cfg.StartNs, cfg.EndNs)
	}
	if cfg.RateRPS > 0 {
		span := t.lastNs - t.firstNs
		if t.n < 2 || span <= 0 {
			return nil, fmt.Errorf("workload: trace: %s: cannot rescale to RateRPS=%v: the window has %d arrivals spanning %d ns; widen it or set RateRPS=0", cfg.Dir, cfg.RateRPS, t.n, span)
		}
		recorded := float64(t.n-1) / float64(span) * 1e9
		t.scale = recorded / cfg.RateRPS
	}
	if cfg.Rebase {
		t.shift = -t.firstNs
	}
	if sorted {
		sc, err := datasets.Scan[datasets.Request](d, datasets.TableRequests)
		if err != nil {
			return nil, fmt.Errorf("workload: trace: %w", err)
		}
		t.sc = sc
		t.buf = make([]datasets.Request, 1024)
	}
	return t, nil
}

// prepass counts the window's arrivals, finds their span, validates their
// lengths and reports whether the table is sorted by arrival_ns.
func (t *TraceSource) prepass(d *datasets.Dataset) (sorted bool, err error) {
	sc, err := datasets.Scan[traceIndex](d, datasets.TableRequests)
	if err != nil {
		return false, fmt.Errorf("workload: trace: %w", err)
	}
	defer sc.Close()
	buf := make([]traceIndex, 4096)
	sorted = true
	prev := int64(math.MinInt64)
	row := 0
	for {
		n, rerr := sc.Read(buf)
		for _, r := range buf[:n] {
			if r.ArrivalNs < prev && sorted {
				sorted = false
			}
			prev = r.ArrivalNs
			if t.cfg.inWindow(r.ArrivalNs) {
				if r.PromptTokens < 1 || r.OutputTokens < 1 {
					return false, fmt.Errorf("workload: trace: %s requests row %d (req_id %q): prompt_tokens=%d output_tokens=%d: both must be >= 1",
						t.cfg.Dir, row, r.ReqID, r.PromptTokens, r.OutputTokens)
				}
				if r.PromptTokens > math.MaxInt32 || r.OutputTokens > math.MaxInt32 {
					return false, fmt.Errorf("workload: trace: %s requests row %d (req_id %q): lengths %d/%d exceed 2^31",
						t.cfg.Dir, row, r.ReqID, r.PromptTokens, r.OutputTokens)
				}
				if !sorted || t.cfg.Limit == 0 || t.n < t.cfg.Limit {
					if t.n == 0 || r.ArrivalNs < t.firstNs {
						t.firstNs = r.ArrivalNs
					}
					if t.n == 0 || r.ArrivalNs > t.lastNs {
						t.lastNs = r.ArrivalNs
					}
					t.measure(r)
					t.n++
				}
			}
			row++
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return false, fmt.Errorf("workload: trace: %w", rerr)
		}
	}
	return sorted, nil
}

// loadSorted reads the window of an unsorted table and sorts it stably by
// arrival_ns (ties keep table order), then applies Limit.
func (t *TraceSource) loadSorted(d *datasets.Dataset) error {
	all, err := datasets.ReadAll[datasets.Request](d, datasets.TableRequests)
	if err != nil {
		return fmt.Errorf("workload: trace: %w", err)
	}
	rows := all[:0]
	for _, r := range all {
		if t.cfg.inWindow(r.ArrivalNs) {
			rows = append(rows, r)
		}
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].ArrivalNs < rows[j].ArrivalNs })
	if t.cfg.Limit > 0 && len(rows) > t.cfg.Limit {
		rows = rows[:t.cfg.Limit]
	}
	t.rows = rows
	t.n = len(rows)
	if t.n > 0 {
		t.firstNs, t.lastNs = rows[0].ArrivalNs, rows[len(rows)-1].ArrivalNs
	}
	for _, r := range rows {
		t.measure(traceIndex{ReqID: r.ReqID, PromptTokens: r.PromptTokens, OutputTokens: r.OutputTokens})
	}
	return nil
}

// measure counts a replayed request that MaxModelLen cannot hold.
func (t *TraceSource) measure(r traceIndex) {
	n := r.PromptTokens + r.OutputTokens
	if t.cfg.MaxModelLen <= 0 || n <= int64(t.cfg.MaxModelLen) {
		return
	}
	t.tooLong++
	if n > t.longest.PromptTokens+t.longest.OutputTokens {
		t.longest = r
	}
}

// BlockSize is the number of prompt tokens behind each source prefix hash
// (HashBlockSize of TraceConfig.BlockSize; 0 for a trace without hashes).
func (t *TraceSource) BlockSize() int { return t.blockSize }

// Len is the number of arrivals the source produces.
func (t *TraceSource) Len() int { return t.n }

// Scale is the factor applied to recorded gaps (1 without RateRPS).
func (t *TraceSource) Scale() float64 { return t.scale }

// InMemory reports whether the table was unsorted and therefore loaded whole.
func (t *TraceSource) InMemory() bool { return t.rows != nil }

func (t *TraceSource) mapTime(ns int64) int64 {
	if t.scale == 1 {
		return ns + t.shift
	}
	return t.firstNs + int64(math.Round(float64(ns-t.firstNs)*t.scale)) + t.shift
}

// nextRow returns the next in-window row, or nil at the end.
func (t *TraceSource) nextRow() *datasets.Request {
	if t.emitted >= t.n {
		return nil
	}
	if t.rows != nil {
		return &t.rows[t.emitted]
	}
	for {
		if t.pos >= t.end {
			if t.sc == nil {
				return nil
			}
			n, err := t.sc.Read(t.buf)
			t.pos, t.end = 0, n
			if n == 0 {
				if err != nil && !errors.Is(err, io.EOF) {
					t.err = fmt.Errorf("workload: trace: %w", err)
				} else {
					t.err = fmt.Errorf("workload: trace: %s: table ended after %d of %d arrivals (changed since it was opened?)", t.cfg.Dir, t.emitted, t.n)
				}
				t.sc.Close()
				t.sc = nil
				return nil
			}
		}
		r := &t.buf[t.pos]
		t.pos++
		t.row++
		if t.cfg.inWindow(r.ArrivalNs) {
			return r
		}
	}
}

func (t *TraceSource) fill() {
	if t.have || t.err != nil {
		return
	}
	r := t.nextRow()
	if r == nil {
		if t.sc != nil {
			t.sc.Close()
			t.sc = nil
		}
		return
	}
	t.next = TraceArrival(r)
	if t.next.ID == "" {
		t.next.ID = "trace-" + strconv.Itoa(t.emitted)
	}
	t.next.AtNs = t.mapTime(r.ArrivalNs)
	t.next.Warmup = t.emitted < t.cfg.WarmupRequests
	t.emitted++
	t.have = true
}

// NextAt implements Peeker.
func (t *TraceSource) NextAt() (int64, Status) {
	t.fill()
	if t.have {
		return t.next.AtNs, Ready
	}
	return 0, Exhausted
}

// Next implements Source.
func (t *TraceSource) Next() (Arrival, bool) {
	t.fill()
	if !t.have {
		return Arrival{}, false
	}
	t.have = false
	return t.next, true
}

// Err implements Source: a read error met while streaming.
func (t *TraceSource) Err() error { return t.err }

// Complete implements Completer; a trace ignores completions.
func (t *TraceSource) Complete(string, int64) error { return nil }

// Close releases the open part file early (a source read to the end closes
// itself).
func (t *TraceSource) Close() error {
	if t.sc != nil {
		t.sc.Close()
		t.sc = nil
	}
	return nil
}
