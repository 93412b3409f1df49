package importers

import (
	"encoding/csv"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/steplab/steplab/datasets"
)

// Azure trace columns (AzureLLMInferenceTrace_{conv,code}.csv).
const (
	azureColTime    = "TIMESTAMP"
	azureColContext = "ContextTokens"
	azureColOutput  = "GeneratedTokens"
)

// azureTimeLayouts are tried in order. The 2023 files use the first, with 7
// fractional digits and no zone ("2023-11-16 18:15:46.6805900"); the 2024
// week-long files (AzureLLMInferenceTrace_{code,conv}_1week.csv) the second,
// with 6 fractional digits or none and a UTC offset ("2024-05-10
// 00:00:00.009930+00:00", "2024-05-12 00:00:00+00:00", as the upstream
// notebook analysis/AzureLLMInferenceDataset2024.ipynb @ b469a113 shows).
// Go accepts any number of fractional digits after the seconds when parsing.
var azureTimeLayouts = []string{"2006-01-02 15:04:05", "2006-01-02 15:04:05Z07:00", time.RFC3339Nano}

// runAzure reads an Azure LLM inference trace, 2023 or 2024 (the same three
// columns): a header naming the three columns (in any order; other columns
// are ignored), then one request per row. Timestamps without a zone (2023)
// are read as UTC; the 2024 ones carry +00:00. Rows must be in arrival
// order (the published files are): a timestamp earlier than the previous
// row's is an error, equal ones are kept.
func runAzure(in *input, s *sink) error {
	c, err := newCSVRows(in.name, in, azureColTime, azureColContext, azureColOutput)
	if err != nil {
		return err
	}
	var t0, prev time.Time
	n := 0
	for c.scan() {
		line := c.line
		ts, _, err := c.field(azureColTime)
		if err != nil {
			return err
		}
		t, err := parseAzureTime(ts)
		if err != nil {
			return lineError(in.name, line, "%s: %q is not a timestamp like 2023-11-16 18:15:46.6805900", azureColTime, ts)
		}
		if n == 0 {
			t0 = t
			s.m.Created = t0.Format(time.RFC3339Nano)
			s.detail("first_arrival_utc", t0.Format(time.RFC3339Nano))
		} else if t.Before(prev) {
			return lineError(in.name, line, "%s: %s is earlier than the previous row's %s; arrivals must be in time order",
				azureColTime, ts, prev.Format("2006-01-02 15:04:05.0000000"))
		}
		prev = t
		var tok [2]int64
		for k, name := range []string{azureColContext, azureColOutput} {
			v, _, err := c.field(name)
			if err != nil {
				return err
			}
			if tok[k], err = parseCount(v); err != nil {
				return lineError(in.name, line, "%s: %v", name, err)
			}
		}
		off := t.Sub(t0) // saturates at ~292 years; Before() check keeps it >= 0
		if err := s.addRequest(traceRequest(n, int64(off), tok[0], tok[1])); err != nil {
			return err
		}
		n++
	}
	if c.err != nil {
		return c.err
	}
	s.m.Workload = &datasets.Workload{Kind: "trace", Params: map[string]string{"format": "azure", "requests": strconv.Itoa(n)}}
	s.note("azure trace: arrival_ns is the TIMESTAMP column (read as UTC) relative to the first row; req_id is the zero-based row index; no event times (status not_run)")
	return nil
}

func parseAzureTime(s string) (time.Time, error) {
	var err error
	for _, layout := range azureTimeLayouts {
		var t time.Time
		if t, err = time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, err
}

// parseCount parses a non-negative token count (a CSV field or a raw JSON
// value; a JSON string is reported with its quotes).
func parseCount(s string) (int64, error) {
	if strings.HasPrefix(s, `"`) {
		return 0, fmt.Errorf("%s is not an integer", s)
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		// Accept integral floats ("374.0"), which pandas writes for int
		// columns that once held a NaN.
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || math.Abs(f) > 1e18 || f != math.Trunc(f) {
			return 0, fmt.Errorf("%q is not an integer", s)
		}
		v = int64(f)
	}
	if v < 0 {
		return 0, fmt.Errorf("%d is negative", v)
	}
	return v, nil
}

// csvError turns encoding/csv's error ("record on line 3: wrong number of
// fields", "parse error on line 5, column 3: bare \" in non-quoted-field")
// into "file:line: problem".
func csvError(file string, err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return lineError(file, pe.Line, "%v", pe.Err)
	}
	return fmt.Errorf("%s: %w", file, err)
}
