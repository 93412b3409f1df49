package importers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/steplab/steplab/datasets"
)

// Serving-benchmark results: vllm-bench and sglang-bench. Both write one
// JSON object per run with run-level settings and results and, when asked
// for details, parallel per-request arrays:
//
//   - vLLM, `vllm bench serve --save-result --save-detailed`
//     (vllm/benchmarks/serve.py, read at 009e6d4a; request timing in
//     vllm/benchmarks/lib/endpoint_request_func.py at 02cfb534): input_lens,
//     output_lens, ttfts, itls (one list per request), latencies,
//     start_times (time.perf_counter() when the request was sent),
//     queue_times (time waiting for a --max-concurrency slot before that),
//     errors ("" on success), generated_texts; run level date, backend,
//     label, model_id, tokenizer_id, num_prompts, request_rate ("inf" or a
//     number), burstiness, max_concurrency, duration, completed, failed and
//     the latency statistics. --append-result appends a run to a file.
//     Without --save-detailed the per-request arrays are left out (the older
//     benchmarks/benchmark_serving.py is the same writer; InferenceX's
//     adaptation of it keeps input_lens and output_lens).
//   - SGLang, `python -m sglang.bench_serving --output-file F --output-details`
//     (python/sglang/bench_serving.py, read at 0033168f, and the format
//     described in docs/developer_guide/bench_serving.md at 0229689b):
//     input_lens, output_lens, ttfts, itls, generated_texts, errors, and run
//     level backend, dataset_name, request_rate, max_concurrency, duration,
//     completed, latency statistics. Each run is appended to the JSONL file
//     as one line. There are no start times.
//
// All times are the client's, in seconds: ttft from sending the request to
// its first streamed chunk, itls between chunks, latency from sending to
// the last chunk.

// benchRun is one run's per-request arrays.
type benchRun struct {
	inputLens, outputLens []int64
	ttfts, latencies      []float64
	startTimes            []float64 // nil: not recorded
	queueTimes            []float64 // nil: not recorded
	itls                  [][]float64
	errs                  []string
}

func runVLLMBench(in *input, s *sink) error   { return runBenchServing(in, s, "vllm-bench") }
func runSGLangBench(in *input, s *sink) error { return runBenchServing(in, s, "sglang-bench") }

// runBenchServing imports one run (see the comment above).
//
// Arrivals. With start_times (vLLM), a request arrived at start − queue
// time, and arrival_ns is that relative to the earliest. Without them the
// arrivals are reconstructed only where the run settings determine them:
// request_rate inf sends every request at time 0, so arrival_ns = 0; with a
// finite rate the gaps were drawn at random and are not in the file:
// request i is placed at i / request_rate (the mean rate, noted as an
// assumption). first_token_ns = arrival + queue + ttft; finish_ns = arrival
// + queue + latency, or + ttft + Σ itl where latencies are absent. A failed
// request (a non-empty error) is aborted with no times. The per-chunk ITL
// lists are not kept (the requests table has first token and finish, whose
// difference is their sum); generated texts and errors are not kept (the
// error count and the first error are noted).
func runBenchServing(in *input, s *sink, format string) error {
	b, err := io.ReadAll(io.LimitReader(in, maxBenchFile+1))
	if err != nil {
		return err
	}
	if len(b) > maxBenchFile {
		return fmt.Errorf("%s: larger than %d bytes", in.name, maxBenchFile)
	}
	b = pythonJSON(b)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var top map[string]json.RawMessage
	if err := dec.Decode(&top); err != nil {
		if err == io.EOF {
			return fmt.Errorf("%s: empty file (want a JSON result object)", in.name)
		}
		return locateJSONError(in.name, b, err)
	}
	runs := 1
	for {
		var more json.RawMessage
		if err := dec.Decode(&more); err == io.EOF {
			break
		} else if err != nil {
			return locateJSONError(in.name, b, err)
		}
		runs++
	}
	if runs > 1 {
		return fmt.Errorf("%s: %d benchmark runs appended in one file; steplab imports one run: split the file (one JSON object per run) and import each, e.g. `sed -n 2p %s > run2.json`",
			in.name, runs, in.name)
	}
	// The per-request times make a detailed result; input_lens alone do
	// not (a vLLM-derived writer keeps them without --save-detailed).
	if isNull(top["ttfts"]) {
		return benchSummary(in, s, format, top)
	}
	r, err := parseBenchRun(top)
	if err != nil {
		return fmt.Errorf("%s: %w", in.name, err)
	}
	rate, err := benchRate(top["request_rate"])
	if err != nil {
		return fmt.Errorf("%s: request_rate: %w", in.name, err)
	}
	maxConc, _ := strconv.Atoi(rawText(top["max_concurrency"]))

	n := len(r.inputLens)
	arrivals, sends := benchArrivals(r, rate, maxConc, s, format)

	var failed int64
	firstErr := ""
	reqs := make([]datasets.Request, 0, n)
	for i := range n {
		arr, ok1 := secondsToNs(arrivals[i])
		if !ok1 {
			return fmt.Errorf("%s: request %d: start time %v is not a time in seconds", in.name, i, arrivals[i])
		}
		req := traceRequest(i, arr, r.inputLens[i], r.outputLens[i])
		if r.errs != nil && r.errs[i] != "" {
			failed++
			if firstErr == "" {
				firstErr = firstLine(r.errs[i])
			}
			req.Status = datasets.StatusAborted
		} else {
			lat := r.ttfts[i]
			if r.latencies != nil {
				lat = r.latencies[i]
			} else {
				for _, d := range r.itls[i] {
					lat += d
				}
			}
			first, ok2 := secondsToNs(sends[i] + r.ttfts[i])
			fin, ok3 := secondsToNs(sends[i] + lat)
			if !ok2 || !ok3 || r.ttfts[i] < 0 || lat < r.ttfts[i] {
				return fmt.Errorf("%s: request %d: ttft %v and latency %v are not times in order", in.name, i, r.ttfts[i], lat)
			}
			req.FirstTokenNs, req.FinishNs, req.Status = first, fin, datasets.StatusFinished
		}
		reqs = append(reqs, req)
	}
	if err := addSortedRequests(reqs, func(r datasets.Request) int64 { return r.ArrivalNs }, func(r datasets.Request) datasets.Request { return r }, s,
		"the arrays are in request order"); err != nil {
		return err
	}

	benchManifest(s, format, top, "trace", n)
	s.note("%s: client-side times (HTTP streaming): first_token_ns at the first streamed chunk, finish_ns at the last; the engine's queue and schedule times are not in the file (first_scheduled_ns -1)", format)
	s.note("%s: per-chunk inter-token latencies (itls) and generated texts are not kept", format)
	if failed > 0 {
		s.note("%d failed requests (non-empty error): status aborted; first error: %s", failed, firstErr)
	}
	return nil
}

// benchArrivals places the requests in time (see runBenchServing): when
// each arrived and when it was sent, in seconds from the first arrival.
func benchArrivals(r *benchRun, rate float64, maxConc int, s *sink, format string) (arrivals, sends []float64) {
	n := len(r.inputLens)
	arrivals = make([]float64, n) // seconds, before the client queue
	sends = make([]float64, n)    // when the request was sent
	switch {
	case r.startTimes != nil:
		t0 := math.Inf(1)
		for i := range n {
			q := 0.0
			if r.queueTimes != nil {
				q = r.queueTimes[i]
			}
			arrivals[i] = r.startTimes[i] - q
			t0 = min(t0, arrivals[i])
		}
		for i := range n {
			sends[i] = r.startTimes[i] - t0
			arrivals[i] -= t0
		}
		s.note("%s: arrival_ns = start_times − queue_times (the client's perf_counter, relative to the earliest arrival)", format)
	case math.IsInf(rate, 1):
		s.note("%s: no start times in the file; request_rate inf sends every request at once: arrival_ns = 0", format)
		if maxConc > 0 {
			s.note("%s: max_concurrency %d: the client let at most %d requests run at once (a closed loop); arrivals at 0 do not reproduce that cap", format, maxConc, maxConc)
		}
	default:
		for i := range n {
			arrivals[i] = float64(i) / rate
			sends[i] = arrivals[i]
		}
		s.note("%s: no start times in the file: request i placed at i / request_rate (%g/s); the run drew random gaps (Poisson or gamma) that the file does not record", format, rate)
	}
	return arrivals, sends
}

// benchSummary imports a run written without its per-request times
// (SGLang without --output-details, vLLM without --save-detailed): no rows,
// the run's figures (completed, throughputs, latency statistics) in the
// manifest's source.detail, and the workload kind "summary", so that the
// dataset says what it is rather than holding invented requests. Request
// lengths without times (input_lens and output_lens, which InferenceX's
// vLLM-derived writer keeps) are counted, not imported: a request without
// its times cannot be compared with a replay.
func benchSummary(in *input, s *sink, format string, top map[string]json.RawMessage) error {
	done := rawText(top["completed"])
	if _, err := strconv.ParseInt(done, 10, 64); err != nil {
		return fmt.Errorf("%s: neither ttfts (a detailed result) nor completed (a summary): is this a %s result?", in.name, format)
	}
	n, lens := -1, ""
	if !isNull(top["input_lens"]) {
		inLens, err := benchCounts(top, "input_lens")
		if err != nil {
			return fmt.Errorf("%s: %w", in.name, err)
		}
		outLens, err := benchCounts(top, "output_lens")
		if err == nil && len(outLens) != len(inLens) {
			err = fmt.Errorf("output_lens has %d entries, input_lens %d: the per-request arrays must be parallel", len(outLens), len(inLens))
		}
		if err != nil {
			return fmt.Errorf("%s: %w", in.name, err)
		}
		n = len(inLens)
		lens = fmt.Sprintf("; the file records the lengths of %d requests (input_lens, output_lens) but not their times (no ttfts), so they are not imported", n)
	}
	benchManifest(s, format, top, "summary", n)
	s.summary = true
	s.note("%s: a summary result (no per-request times: run it with %s for them): no requests rows; the run's figures are in source.detail (completed %s, duration %s s)%s",
		format, detailFlag[format], done, orDefault(rawText(top["duration"]), "absent"), lens)
	return nil
}

// detailFlag is the flag that makes each tool write its per-request arrays.
var detailFlag = map[string]string{"vllm-bench": "--save-detailed", "sglang-bench": "--output-details"}

// benchManifest records a run's scalar settings and results, its model and
// its workload (kind trace or summary; n requests, -1: not recorded).
func benchManifest(s *sink, format string, top map[string]json.RawMessage, kind string, n int) {
	for _, k := range sortedKeys(top) {
		if v := top[k]; len(v) > 0 && v[0] != '[' && v[0] != '{' && !isNull(v) {
			s.detail(k, rawText(v))
		}
	}
	model := rawText(top["model_id"])
	if model == "" {
		model = rawText(top["model"])
	}
	if model != "" {
		s.m.Model = &datasets.ModelShape{Name: model}
	}
	params := map[string]string{"format": format, "request_rate": rawText(top["request_rate"])}
	if n >= 0 {
		params["requests"] = strconv.Itoa(n)
	}
	for _, k := range []string{"burstiness", "max_concurrency", "dataset_name", "completed"} {
		if v := rawText(top[k]); v != "" {
			params[k] = v
		}
	}
	s.m.Workload = &datasets.Workload{Kind: kind, Params: params}
}

// maxBenchFile bounds a result file read into memory (generated texts make
// detailed results large).
const maxBenchFile = 1 << 30

// parseBenchRun reads and cross-checks the per-request arrays.
func parseBenchRun(top map[string]json.RawMessage) (*benchRun, error) {
	r := &benchRun{}
	var err error
	if r.inputLens, err = benchCounts(top, "input_lens"); err != nil {
		return nil, err
	}
	n := len(r.inputLens)
	if n == 0 {
		return nil, errors.New("input_lens is empty: no requests")
	}
	if r.outputLens, err = benchCounts(top, "output_lens"); err != nil {
		return nil, err
	}
	if r.ttfts, err = benchFloats(top, "ttfts", true); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name string
		dst  *[]float64
	}{{"latencies", &r.latencies}, {"start_times", &r.startTimes}, {"queue_times", &r.queueTimes}} {
		if *f.dst, err = benchFloats(top, f.name, false); err != nil {
			return nil, err
		}
	}
	if raw := top["itls"]; !isNull(raw) {
		if err := json.Unmarshal(raw, &r.itls); err != nil {
			return nil, fmt.Errorf("itls: %v (want one list of seconds per request)", jsonError(err))
		}
	}
	if raw := top["errors"]; !isNull(raw) {
		if err := json.Unmarshal(raw, &r.errs); err != nil {
			return nil, fmt.Errorf("errors: %v (want one string per request)", jsonError(err))
		}
	}
	if r.itls == nil && r.latencies == nil {
		return nil, errors.New("neither latencies nor itls: the finish times cannot be known")
	}
	for _, a := range []struct {
		name string
		n    int
		set  bool
	}{{"output_lens", len(r.outputLens), true}, {"ttfts", len(r.ttfts), true}, {"latencies", len(r.latencies), r.latencies != nil},
		{"start_times", len(r.startTimes), r.startTimes != nil}, {"queue_times", len(r.queueTimes), r.queueTimes != nil},
		{"itls", len(r.itls), r.itls != nil}, {"errors", len(r.errs), r.errs != nil}} {
		if a.set && a.n != n {
			return nil, fmt.Errorf("%s has %d entries, input_lens %d: the per-request arrays must be parallel", a.name, a.n, n)
		}
	}
	return r, nil
}

func benchCounts(top map[string]json.RawMessage, name string) ([]int64, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal(top[name], &raw); err != nil || raw == nil {
		return nil, fmt.Errorf("%s: want a list of token counts", name)
	}
	out := make([]int64, len(raw))
	for i, v := range raw {
		c, err := parseCount(string(v))
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %v", name, i, err)
		}
		out[i] = c
	}
	return out, nil
}

// benchFloats reads a list of non-negative finite seconds; nil when absent
// and not required.
func benchFloats(top map[string]json.RawMessage, name string, required bool) ([]float64, error) {
	raw := top[name]
	if isNull(raw) {
		if required {
			return nil, fmt.Errorf("no %s", name)
		}
		return nil, nil
	}
	var v []float64
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("%s: %v (want a list of seconds)", name, jsonError(err))
	}
	for i, x := range v {
		if _, ok := secondsToNs(x); !ok || (x < 0 && name != "start_times") {
			return nil, fmt.Errorf("%s[%d]: %v is not a time in seconds", name, i, x)
		}
	}
	return v, nil
}

// benchRate reads request_rate: a number of requests per second or "inf"
// (also when absent: both tools default to inf).
func benchRate(raw json.RawMessage) (float64, error) {
	t := strings.ToLower(rawText(raw))
	if t == "" || t == "inf" || t == "infinity" {
		return math.Inf(1), nil
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || !(v > 0) {
		return 0, fmt.Errorf("%s is neither a positive rate nor \"inf\"", raw)
	}
	return v, nil
}

// pythonJSON rewrites the non-standard tokens Python's json module writes
// for non-finite floats (json.dumps(float("inf")) is Infinity, a NaN mean of
// no values is NaN) into JSON: NaN → null, Infinity → "inf", -Infinity →
// "-inf". Strings are left alone. The length of the input changes, so a
// later syntax error is located in the rewritten text.
func pythonJSON(b []byte) []byte {
	if !bytes.Contains(b, []byte("NaN")) && !bytes.Contains(b, []byte("Infinity")) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	inStr, esc := false, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inStr:
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
		case c == '"':
			inStr = true
		case bytes.HasPrefix(b[i:], []byte("NaN")):
			out = append(out, "null"...)
			i += 2
			continue
		case bytes.HasPrefix(b[i:], []byte("-Infinity")):
			out = append(out, `"-inf"`...)
			i += 8
			continue
		case bytes.HasPrefix(b[i:], []byte("Infinity")):
			out = append(out, `"inf"`...)
			i += 7
			continue
		}
		out = append(out, c)
	}
	return out
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
