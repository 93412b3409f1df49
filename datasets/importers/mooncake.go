package importers

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/steplab/steplab/datasets"
)

// MooncakeBlockTokens is the number of prompt tokens behind each hash id of
// a Mooncake trace (FAST'25 release): request prompts share a prefix of
// k*512 tokens exactly when their first k hash ids are equal.
const MooncakeBlockTokens = 512

// maxLine bounds one JSONL line (a Mooncake line with a 128k-token prompt is
// about 2 KB; a vLLM request line about 250 bytes).
const maxLine = 64 << 20

type mooncakeRecord struct {
	Timestamp    json.RawMessage `json:"timestamp"`
	InputLength  json.RawMessage `json:"input_length"`
	OutputLength json.RawMessage `json:"output_length"`
	HashIDs      []int64         `json:"hash_ids"`
}

// runMooncake reads a Mooncake trace: one JSON object per line with
// "timestamp" (milliseconds since the trace start), "input_length",
// "output_length" and "hash_ids". Lines are streamed one at a time. Blank
// lines are skipped; timestamps must not decrease (the published traces are
// sorted), equal ones are kept. arrival_ns is relative to the first line.
func runMooncake(in *input, s *sink) error {
	lr := newLineReader(in)
	var t0, prev int64
	n, mismatched := 0, 0
	for {
		line, lineNo, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return lineError(in.name, lineNo, "%v", err)
		}
		var rec mooncakeRecord
		if err := decodeJSONLine(line, &rec); err != nil {
			return lineError(in.name, lineNo, "%v", err)
		}
		if isNull(rec.Timestamp) || isNull(rec.InputLength) || isNull(rec.OutputLength) {
			return lineError(in.name, lineNo, "missing field %s (want timestamp, input_length, output_length, hash_ids)",
				firstMissing(map[string]bool{"timestamp": !isNull(rec.Timestamp), "input_length": !isNull(rec.InputLength), "output_length": !isNull(rec.OutputLength)}))
		}
		ms, err := strconv.ParseFloat(string(rec.Timestamp), 64)
		if err != nil || math.IsNaN(ms) || math.Abs(ms) > 9e12 {
			return lineError(in.name, lineNo, "timestamp: %s is not a time in milliseconds", rec.Timestamp)
		}
		t := int64(math.Round(ms * 1e6))
		if n == 0 {
			t0 = t
		} else if t < prev {
			return lineError(in.name, lineNo, "timestamp: %s ms is earlier than the previous line's %s ms; arrivals must be in time order",
				rec.Timestamp, formatMs(prev))
		}
		prev = t
		inLen, err := parseCount(string(rec.InputLength))
		if err != nil {
			return lineError(in.name, lineNo, "input_length: %v", err)
		}
		outLen, err := parseCount(string(rec.OutputLength))
		if err != nil {
			return lineError(in.name, lineNo, "output_length: %v", err)
		}
		if int64(len(rec.HashIDs)) != (inLen+MooncakeBlockTokens-1)/MooncakeBlockTokens {
			mismatched++
		}
		r := traceRequest(n, t-t0, inLen, outLen)
		r.PrefixHashIDs = rec.HashIDs
		if err := s.addRequest(r); err != nil {
			return err
		}
		n++
	}
	s.detail("hash_block_size", strconv.Itoa(MooncakeBlockTokens))
	s.detail("hash_ids", "one id per 512-token prompt block; equal leading ids mean a shared prefix")
	s.m.Workload = &datasets.Workload{Kind: "trace", Params: map[string]string{"format": "mooncake", "requests": strconv.Itoa(n),
		datasets.ParamHashBlockSize: strconv.Itoa(MooncakeBlockTokens)}}
	s.note("mooncake trace: arrival_ns is timestamp (ms) relative to the first line; prefix_hash_ids are the hash_ids (block size %d tokens); req_id is the zero-based line index; no event times (status not_run)", MooncakeBlockTokens)
	if mismatched > 0 {
		s.note("%d of %d requests have a hash_ids count other than ceil(input_length/%d)", mismatched, n, MooncakeBlockTokens)
	}
	return nil
}

func isNull(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

func formatMs(ns int64) string { return strconv.FormatFloat(float64(ns)/1e6, 'f', -1, 64) }

func firstMissing(present map[string]bool) string {
	for _, k := range sortedKeys(present) {
		if !present[k] {
			return k
		}
	}
	return ""
}

// lineReader yields non-blank lines with their 1-based numbers.
type lineReader struct {
	br   *bufio.Reader
	line int
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 1<<16)}
}

func (l *lineReader) next() ([]byte, int, error) {
	for {
		var buf []byte
		for {
			chunk, err := l.br.ReadSlice('\n')
			buf = append(buf, chunk...)
			if len(buf) > maxLine {
				l.line++
				return nil, l.line, fmt.Errorf("line longer than %d bytes", maxLine)
			}
			if err == bufio.ErrBufferFull {
				continue
			}
			if err == io.EOF {
				if len(buf) == 0 {
					return nil, l.line, io.EOF
				}
				break
			}
			if err != nil {
				return nil, l.line + 1, err
			}
			break
		}
		l.line++
		line := bytes.TrimSpace(buf)
		if l.line == 1 {
			line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
		}
		if len(line) > 0 {
			return line, l.line, nil
		}
	}
}

// eachJSONLine decodes every non-blank line of in into a T and calls fn
// with it and its line number. Read and decoding errors are located at the
// line; fn locates its own.
func eachJSONLine[T any](in *input, fn func(rec *T, lineNo int) error) error {
	lr := newLineReader(in)
	for {
		line, lineNo, err := lr.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return lineError(in.name, lineNo, "%v", err)
		}
		var rec T
		if err := decodeJSONLine(line, &rec); err != nil {
			return lineError(in.name, lineNo, "%v", err)
		}
		if err := fn(&rec, lineNo); err != nil {
			return err
		}
	}
}

// decodeJSONLine decodes one JSON object, naming the field of a type error
// and refusing trailing data.
func decodeJSONLine(line []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return errors.New("trailing data after the JSON object (one object per line)")
	}
	return nil
}

// jsonKind names what a Go type decodes from in JSON's words: a message
// says "an object", never a Go struct type.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array of " + plural(jsonKind(t.Elem()))
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	}
	return "a value of another type"
}

// plural turns "an object" into "objects", "a string" into "strings".
func plural(kind string) string {
	for _, a := range []string{"an ", "a "} {
		if rest, ok := strings.CutPrefix(kind, a); ok {
			return rest + "s"
		}
	}
	return kind
}

func jsonError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Errorf("%s: %s where the format has %s", te.Field, te.Value, jsonKind(te.Type))
		}
		return fmt.Errorf("%s is not a JSON object", te.Value)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("invalid JSON at byte %d: %v", se.Offset, err)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return errors.New("truncated JSON object")
	}
	return err
}
