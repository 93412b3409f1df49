package inspect

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/internal/hist"
)

// Summary describes a dataset directory.
type Summary struct {
	Dir       string      `json:"dir"`
	Manifest  *Highlights `json:"manifest,omitempty"`
	Tables    []TableInfo `json:"tables"`
	TimeSpans []TimeSpan  `json:"time_spans,omitempty"`
	Steps     *Steps      `json:"steps,omitempty"`
	Requests  *Requests   `json:"requests,omitempty"`
	// Warnings are what Open assumed for a minimal manifest (no status:
	// complete; no table list: the tables on disk).
	Warnings []string `json:"warnings,omitempty"`
	// Notes say what could not be summarised and why.
	Notes []string `json:"notes,omitempty"`
}

// Highlights are the provenance fields of manifest.json worth a glance.
type Highlights struct {
	Name              string                      `json:"name"`
	Status            string                      `json:"status"`
	SchemaVersion     int                         `json:"schema_version"`
	Created           string                      `json:"created,omitempty"`
	Tool              datasets.Tool               `json:"tool"`
	Source            datasets.Source             `json:"source"`
	Hardware          *datasets.Hardware          `json:"hardware,omitempty"`
	Model             *datasets.ModelShape        `json:"model,omitempty"`
	Engine            *datasets.EngineConfig      `json:"engine,omitempty"`
	CUDAGraphSizes    []int                       `json:"cuda_graph_capture_sizes,omitempty"`
	Workload          *datasets.Workload          `json:"workload,omitempty"`
	MeasurementPolicy *datasets.MeasurementPolicy `json:"measurement_policy,omitempty"`
	Notes             []string                    `json:"notes,omitempty"`
}

// TableInfo is the size of one table, from the Parquet footers.
type TableInfo struct {
	Name  string `json:"name"`
	Rows  int64  `json:"rows"`
	Parts int    `json:"parts"`
	Bytes int64  `json:"bytes"`
}

// TimeSpan is the extent of the run's clock seen by one table.
type TimeSpan struct {
	Source  string  `json:"source"` // "steps" or "requests"
	StartNs int64   `json:"start_ns"`
	EndNs   int64   `json:"end_ns"`
	Seconds float64 `json:"seconds"`
}

// Count is the number of rows with one value.
type Count struct {
	Value string `json:"value"`
	N     int64  `json:"n"`
}

// Dist summarises values: wall times in milliseconds, tokens as counts.
type Dist struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

// WallGroup is the wall-time distribution (ms) of one step kind and batch
// size bucket (batch size = num_prefill_requests + num_decode_requests).
type WallGroup struct {
	Kind   string `json:"kind"`
	Batch  string `json:"batch"`
	WallMs Dist   `json:"wall_ms"`
}

// PayloadGroup is the payload size of the steps of one kind.
type PayloadGroup struct {
	Kind      string  `json:"kind"`
	Count     int64   `json:"count"`
	MeanBytes float64 `json:"mean_bytes"`
	MaxBytes  int64   `json:"max_bytes"`
}

// Steps summarises the steps table.
type Steps struct {
	Rows    int64   `json:"rows"`
	Invalid int64   `json:"invalid"`
	ByKind  []Count `json:"by_kind"`
	ByRole  []Count `json:"by_role"`
	// WallUnknown counts steps whose wall_time_ns is Unknown.
	WallUnknown int64          `json:"wall_unknown"`
	WallTime    []WallGroup    `json:"wall_time"`
	Payload     []PayloadGroup `json:"payload"`
}

// Requests summarises the requests table.
type Requests struct {
	Rows         int64   `json:"rows"`
	ByStatus     []Count `json:"by_status"`
	PromptTokens Dist    `json:"prompt_tokens"`
	OutputTokens Dist    `json:"output_tokens"`
	// ArrivalRatePerS is (arrivals-1) / (last arrival - first arrival),
	// over the requests with a known arrival.
	ArrivalRatePerS float64 `json:"arrival_rate_per_s"`
	ArrivalSpanS    float64 `json:"arrival_span_s"`
}

// BatchBuckets are the upper bounds of the batch-size buckets; larger
// batches fall in ">512".
var BatchBuckets = []struct {
	Max   int64
	Label string
}{{1, "1"}, {4, "2-4"}, {8, "5-8"}, {16, "9-16"}, {32, "17-32"}, {64, "33-64"}, {128, "65-128"}, {256, "129-256"}, {512, "257-512"}}

// BatchBucket names the bucket of a batch size.
func BatchBucket(b int64) string {
	if b < 0 {
		return "unknown"
	}
	if b == 0 {
		return "0"
	}
	for _, bk := range BatchBuckets {
		if b <= bk.Max {
			return bk.Label
		}
	}
	return ">512"
}

func bucketOrder(label string) int {
	switch label {
	case "unknown":
		return 100
	case "0":
		return -1
	case ">512":
		return len(BatchBuckets)
	}
	for i, bk := range BatchBuckets {
		if bk.Label == label {
			return i
		}
	}
	return 99
}

type stepProj struct {
	Kind               string `parquet:"kind"`
	Role               string `parquet:"role"`
	Valid              bool   `parquet:"valid"`
	NumPrefillRequests int32  `parquet:"num_prefill_requests"`
	NumDecodeRequests  int32  `parquet:"num_decode_requests"`
	WallTimeNs         int64  `parquet:"wall_time_ns"`
	PayloadBytes       int64  `parquet:"payload_bytes"`
	TScheduleStart     int64  `parquet:"t_schedule_start"`
	TOutput            int64  `parquet:"t_output"`
	TUpdateEnd         int64  `parquet:"t_update_end"`
}

type requestProj struct {
	ArrivalNs    int64  `parquet:"arrival_ns"`
	PromptTokens int64  `parquet:"prompt_tokens"`
	OutputTokens int64  `parquet:"output_tokens"`
	FinishNs     int64  `parquet:"finish_ns"`
	Status       string `parquet:"status"`
}

// Dataset summarises the dataset at dir.
func Dataset(dir string) (*Summary, error) {
	d, err := datasets.Open(dir)
	if err != nil {
		return nil, err
	}
	s := &Summary{Dir: dir, Warnings: d.Assumptions}
	m := d.Manifest
	s.Manifest = &Highlights{Name: m.Name, Status: m.Status, SchemaVersion: m.SchemaVersion, Created: m.Created,
		Tool: m.Tool, Source: m.Source, Hardware: m.Hardware, Model: m.Model, Engine: m.Engine,
		CUDAGraphSizes: m.CUDAGraphSizes, Workload: m.Workload, MeasurementPolicy: m.MeasurementPolicy, Notes: m.Notes}
	for _, t := range tableNames(d) {
		if !d.Has(t) {
			continue
		}
		ti, err := tableInfo(d, t)
		if err != nil {
			return nil, err
		}
		s.Tables = append(s.Tables, ti)
	}
	if d.Has(datasets.TableSteps) {
		if err := s.scanSteps(d); err != nil {
			return nil, err
		}
	}
	if d.Has(datasets.TableRequests) {
		if err := s.scanRequests(d); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func tableInfo(d *datasets.Dataset, table string) (TableInfo, error) {
	ti := TableInfo{Name: table}
	parts, err := d.Parts(table)
	if err != nil {
		return ti, err
	}
	for _, p := range parts {
		pf, f, err := datasets.OpenParquet(p)
		if err != nil {
			return ti, err
		}
		ti.Rows += pf.NumRows()
		ti.Bytes += pf.Size()
		ti.Parts++
		f.Close()
	}
	return ti, nil
}

// scanAll calls f on every row of table. A table without the columns T
// needs is not an error: it returns skipped, a note naming them.
func scanAll[T any](d *datasets.Dataset, table string, f func(*T)) (skipped string, err error) {
	sc, err := datasets.Scan[T](d, table)
	if err != nil {
		return "", err
	}
	defer sc.Close()
	for row, err := range sc.All() {
		var missing *datasets.MissingColumnsError
		if errors.As(err, &missing) {
			return fmt.Sprintf("%s: statistics skipped, missing columns: %s", table, strings.Join(missing.Columns, ", ")), nil
		}
		if err != nil {
			return "", err
		}
		f(row)
	}
	return "", nil
}

type groupKey struct{ kind, batch string }

func (s *Summary) scanSteps(d *datasets.Dataset) error {
	st := &Steps{}
	kinds, roles := map[string]int64{}, map[string]int64{}
	walls := map[groupKey][]int64{}
	type pay struct{ n, sum, max int64 }
	payload := map[string]*pay{}
	span := TimeSpan{Source: datasets.TableSteps, StartNs: math.MaxInt64, EndNs: math.MinInt64}
	skipped, err := scanAll(d, datasets.TableSteps, func(r *stepProj) {
		st.Rows++
		kinds[r.Kind]++
		roles[r.Role]++
		if !r.Valid {
			st.Invalid++
		}
		if r.WallTimeNs >= 0 {
			b := int64(-1)
			if r.NumPrefillRequests >= 0 && r.NumDecodeRequests >= 0 {
				b = int64(r.NumPrefillRequests) + int64(r.NumDecodeRequests)
			}
			k := groupKey{r.Kind, BatchBucket(b)}
			walls[k] = append(walls[k], r.WallTimeNs)
		} else {
			st.WallUnknown++
		}
		if r.PayloadBytes >= 0 {
			p := payload[r.Kind]
			if p == nil {
				p = &pay{}
				payload[r.Kind] = p
			}
			p.n++
			p.sum += r.PayloadBytes
			p.max = max(p.max, r.PayloadBytes)
		}
		for _, t := range []int64{r.TScheduleStart, r.TOutput, r.TUpdateEnd} {
			if t >= 0 {
				span.StartNs = min(span.StartNs, t)
				span.EndNs = max(span.EndNs, t)
			}
		}
	})
	if err != nil || skipped != "" {
		s.Notes = appendNonEmpty(s.Notes, skipped)
		return err
	}
	st.ByKind, st.ByRole = counts(kinds), counts(roles)
	for k, v := range walls {
		st.WallTime = append(st.WallTime, WallGroup{Kind: k.kind, Batch: k.batch, WallMs: dist(v, 1e-6)})
	}
	sort.Slice(st.WallTime, func(i, j int) bool {
		a, b := st.WallTime[i], st.WallTime[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return bucketOrder(a.Batch) < bucketOrder(b.Batch)
	})
	for k, p := range payload {
		st.Payload = append(st.Payload, PayloadGroup{Kind: k, Count: p.n, MeanBytes: float64(p.sum) / float64(p.n), MaxBytes: p.max})
	}
	sort.Slice(st.Payload, func(i, j int) bool { return st.Payload[i].Kind < st.Payload[j].Kind })
	s.Steps = st
	if span.EndNs >= span.StartNs {
		span.Seconds = float64(span.EndNs-span.StartNs) / 1e9
		s.TimeSpans = append(s.TimeSpans, span)
	}
	return nil
}

func (s *Summary) scanRequests(d *datasets.Dataset) error {
	rq := &Requests{}
	status := map[string]int64{}
	var prompt, output []int64
	first, last, end := int64(math.MaxInt64), int64(math.MinInt64), int64(math.MinInt64)
	var arrivals int64
	skipped, err := scanAll(d, datasets.TableRequests, func(r *requestProj) {
		rq.Rows++
		status[r.Status]++
		if r.PromptTokens >= 0 {
			prompt = append(prompt, r.PromptTokens)
		}
		if r.OutputTokens >= 0 {
			output = append(output, r.OutputTokens)
		}
		if r.ArrivalNs >= 0 {
			arrivals++
			first, last = min(first, r.ArrivalNs), max(last, r.ArrivalNs)
			end = max(end, r.ArrivalNs)
		}
		if r.FinishNs >= 0 {
			end = max(end, r.FinishNs)
		}
	})
	if err != nil || skipped != "" {
		s.Notes = appendNonEmpty(s.Notes, skipped)
		return err
	}
	rq.ByStatus = counts(status)
	rq.PromptTokens, rq.OutputTokens = dist(prompt, 1), dist(output, 1)
	if last >= first {
		rq.ArrivalSpanS = float64(last-first) / 1e9
		if last > first {
			rq.ArrivalRatePerS = float64(arrivals-1) / rq.ArrivalSpanS
		}
		s.TimeSpans = append(s.TimeSpans, TimeSpan{Source: datasets.TableRequests, StartNs: first, EndNs: end, Seconds: float64(end-first) / 1e9})
	}
	s.Requests = rq
	return nil
}

func appendNonEmpty(list []string, s string) []string {
	if s == "" {
		return list
	}
	return append(list, s)
}

func counts(m map[string]int64) []Count {
	out := make([]Count, 0, len(m))
	for k, n := range m {
		out = append(out, Count{Value: k, N: n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].N != out[j].N {
			return out[i].N > out[j].N
		}
		return out[i].Value < out[j].Value
	})
	return out
}

// dist sorts v in place and summarises it, each value times scale.
func dist(v []int64, scale float64) Dist {
	if len(v) == 0 {
		return Dist{}
	}
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	var sum float64
	for _, x := range v {
		sum += float64(x)
	}
	return Dist{
		Count: int64(len(v)),
		Mean:  sum / float64(len(v)) * scale,
		P50:   float64(hist.NearestRank(v, 50)) * scale,
		P90:   float64(hist.NearestRank(v, 90)) * scale,
		P99:   float64(hist.NearestRank(v, 99)) * scale,
		Max:   float64(v[len(v)-1]) * scale,
	}
}

// FileInfo describes one Parquet file.
type FileInfo struct {
	Path      string         `json:"path"`
	SizeBytes int64          `json:"size_bytes"`
	Rows      int64          `json:"rows"`
	CreatedBy string         `json:"created_by,omitempty"`
	Columns   []ColumnInfo   `json:"columns"`
	RowGroups []RowGroupInfo `json:"row_groups"`
	// KeyValueKeys are the keys of the file's key-value metadata (values
	// can be large: pyarrow stores its whole schema under ARROW:schema).
	KeyValueKeys []string `json:"key_value_keys"`
	// SteplabTable and SteplabSchemaVersion are set for files steplab wrote.
	SteplabTable         string `json:"steplab_table,omitempty"`
	SteplabSchemaVersion string `json:"steplab_schema_version,omitempty"`
}

// ColumnInfo is one leaf column.
type ColumnInfo struct {
	Name         string `json:"name"` // dotted path for nested columns
	PhysicalType string `json:"physical_type"`
	LogicalType  string `json:"logical_type,omitempty"`
	Repetition   string `json:"repetition"`
	// Compression lists the codecs of the column's chunks.
	Compression       string `json:"compression"`
	CompressedBytes   int64  `json:"compressed_bytes"`
	UncompressedBytes int64  `json:"uncompressed_bytes"`
}

// RowGroupInfo is one row group.
type RowGroupInfo struct {
	Index             int   `json:"index"`
	Rows              int64 `json:"rows"`
	UncompressedBytes int64 `json:"uncompressed_bytes"`
	CompressedBytes   int64 `json:"compressed_bytes"`
}

// File describes the Parquet file at path, whatever wrote it.
func File(path string) (*FileInfo, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return nil, fmt.Errorf("%s: a directory, not a Parquet file (use inspect.Dataset)", path)
	}
	pf, f, err := datasets.OpenParquet(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	md := pf.Metadata()
	fi := &FileInfo{Path: path, SizeBytes: pf.Size(), Rows: pf.NumRows(), CreatedBy: md.CreatedBy, KeyValueKeys: []string{}}
	for _, kv := range md.KeyValueMetadata {
		fi.KeyValueKeys = append(fi.KeyValueKeys, kv.Key)
	}
	fi.SteplabTable, _ = pf.Lookup("steplab.table")
	fi.SteplabSchemaVersion, _ = pf.Lookup("steplab.schema_version")
	schema := pf.Schema()
	for _, col := range schema.Columns() {
		leaf, ok := schema.Lookup(col...)
		if !ok {
			continue
		}
		ci := ColumnInfo{Name: strings.Join(col, "."), PhysicalType: leaf.Node.Type().Kind().String(), Repetition: repetition(leaf.Node)}
		if lt := leaf.Node.Type().LogicalType(); lt != nil {
			ci.LogicalType = lt.String()
		}
		var codecs []string
		for _, rg := range md.RowGroups {
			if leaf.ColumnIndex >= len(rg.Columns) {
				continue
			}
			cm := rg.Columns[leaf.ColumnIndex].MetaData
			ci.CompressedBytes += cm.TotalCompressedSize
			ci.UncompressedBytes += cm.TotalUncompressedSize
			if c := cm.Codec.String(); !containsStr(codecs, c) {
				codecs = append(codecs, c)
			}
		}
		ci.Compression = strings.Join(codecs, ",")
		fi.Columns = append(fi.Columns, ci)
	}
	for i, rg := range md.RowGroups {
		ri := RowGroupInfo{Index: i, Rows: rg.NumRows, UncompressedBytes: rg.TotalByteSize, CompressedBytes: rg.TotalCompressedSize}
		if ri.CompressedBytes == 0 {
			for _, c := range rg.Columns {
				ri.CompressedBytes += c.MetaData.TotalCompressedSize
			}
		}
		fi.RowGroups = append(fi.RowGroups, ri)
	}
	if fi.RowGroups == nil {
		fi.RowGroups = []RowGroupInfo{}
	}
	return fi, nil
}

func repetition(n parquet.Node) string {
	switch {
	case n.Repeated():
		return "repeated"
	case n.Optional():
		return "optional"
	}
	return "required"
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// tableNames lists the data contract's tables, then any other table the
// manifest lists (a replay's comparisons, a what-if's requests) by name.
func tableNames(d *datasets.Dataset) []string {
	names := slices.Clone(datasets.Tables)
	if d.Manifest == nil {
		return names
	}
	var extra []string
	for t := range d.Manifest.Tables {
		if !slices.Contains(names, t) {
			extra = append(extra, t)
		}
	}
	slices.Sort(extra)
	return append(names, extra...)
}
