package inspect

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteText prints the summary as aligned tables.
func (s *Summary) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	p := func(format string, args ...any) { fmt.Fprintf(tw, format, args...) }
	p("dataset\t%s\n", s.Dir)
	for _, w := range s.Warnings {
		p("warning\t%s\n", w)
	}
	if m := s.Manifest; m != nil {
		p("name\t%s\n", m.Name)
		p("status\t%s\n", m.Status)
		p("schema version\t%d\n", m.SchemaVersion)
		if m.Created != "" {
			p("created\t%s\n", m.Created)
		}
		src := m.Source.Kind
		if m.Source.Format != "" {
			src += " (" + m.Source.Format + ")"
		}
		if m.Source.Path != "" {
			src += " " + m.Source.Path
		}
		if src != "" {
			p("source\t%s\n", src)
		}
		if m.Source.SHA256 != "" {
			p("source sha256\t%s\n", m.Source.SHA256)
		}
		if m.Tool.Name != "" {
			p("tool\t%s %s %s\n", m.Tool.Name, m.Tool.Version, strings.Join(m.Tool.Command, " "))
		}
		if h := m.Hardware; h != nil {
			gpu := h.GPUName
			if h.GPUCount > 1 {
				gpu = fmt.Sprintf("%d x %s", h.GPUCount, gpu)
			}
			if h.Simulated {
				gpu += " (simulated)"
			}
			if h.Driver != "" {
				gpu += ", driver " + h.Driver
			}
			p("hardware\t%s\n", gpu)
		}
		if md := m.Model; md != nil && md.Layers == 0 {
			p("model\t%s\n", md.Name)
		} else if md != nil {
			p("model\t%s: %d layers, hidden %d, %d heads (%d KV), head dim %d, %s\n",
				md.Name, md.Layers, md.Hidden, md.Heads, md.KVHeads, md.HeadDim, md.DType)
		}
		if e := m.Engine; e != nil {
			p("engine\tmax_num_seqs %d, max_num_batched_tokens %d, block_size %d, num_gpu_blocks %d, max_model_len %d, chunked_prefill %t, prefix_caching %t, async %t\n",
				e.MaxNumSeqs, e.MaxNumBatchedTokens, e.BlockSize, e.NumGPUBlocks, e.MaxModelLen, e.ChunkedPrefill, e.PrefixCaching, e.AsyncScheduling)
		}
		if wl := m.Workload; wl != nil {
			p("workload\t%s seed %d %s\n", wl.Kind, wl.Seed, wl.InputSHA256)
		}
		if mp := m.MeasurementPolicy; mp != nil {
			p("measurement policy\tdecode %s, prefill %s\n", orDash(mp.Decode), orDash(mp.Prefill))
		}
		for _, n := range m.Notes {
			p("note\t%s\n", n)
		}
	}
	p("\n")
	p("TABLE\tROWS\tPARTS\tBYTES\n")
	for _, t := range s.Tables {
		p("%s\t%d\t%d\t%d\n", t.Name, t.Rows, t.Parts, t.Bytes)
	}
	if len(s.TimeSpans) > 0 {
		p("\nTIME SPAN FROM\tSTART (s)\tEND (s)\tSECONDS\n")
		for _, sp := range s.TimeSpans {
			p("%s\t%.3f\t%.3f\t%.3f\n", sp.Source, float64(sp.StartNs)/1e9, float64(sp.EndNs)/1e9, sp.Seconds)
		}
	}
	if st := s.Steps; st != nil {
		p("\nSTEPS\t%d (invalid %d, wall time unknown %d)\n", st.Rows, st.Invalid, st.WallUnknown)
		p("KIND\tSTEPS\n")
		for _, c := range st.ByKind {
			p("%s\t%d\n", c.Value, c.N)
		}
		p("\nROLE\tSTEPS\n")
		for _, c := range st.ByRole {
			p("%s\t%d\n", c.Value, c.N)
		}
		if len(st.WallTime) > 0 {
			p("\nKIND\tBATCH\tCOUNT\tMEAN ms\tP50 ms\tP90 ms\tP99 ms\tMAX ms\n")
			for _, g := range st.WallTime {
				d := g.WallMs
				p("%s\t%s\t%d\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\n", g.Kind, g.Batch, d.Count, d.Mean, d.P50, d.P90, d.P99, d.Max)
			}
		}
		if len(st.Payload) > 0 {
			p("\nKIND\tSTEPS\tMEAN PAYLOAD B\tMAX PAYLOAD B\n")
			for _, g := range st.Payload {
				p("%s\t%d\t%.0f\t%d\n", g.Kind, g.Count, g.MeanBytes, g.MaxBytes)
			}
		}
	}
	if rq := s.Requests; rq != nil {
		p("\nREQUESTS\t%d (arrival rate %.3f/s over %.3f s)\n", rq.Rows, rq.ArrivalRatePerS, rq.ArrivalSpanS)
		p("STATUS\tREQUESTS\n")
		for _, c := range rq.ByStatus {
			p("%s\t%d\n", c.Value, c.N)
		}
		p("\nTOKENS\tCOUNT\tMEAN\tP50\tP90\tP99\tMAX\n")
		for _, row := range []struct {
			name string
			d    Dist
		}{{"prompt", rq.PromptTokens}, {"output", rq.OutputTokens}} {
			p("%s\t%d\t%.1f\t%.0f\t%.0f\t%.0f\t%.0f\n", row.name, row.d.Count, row.d.Mean, row.d.P50, row.d.P90, row.d.P99, row.d.Max)
		}
	}
	for _, n := range s.Notes {
		p("\nnote\t%s\n", n)
	}
	return tw.Flush()
}

// WriteText prints the file description as aligned tables.
func (fi *FileInfo) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	p := func(format string, args ...any) { fmt.Fprintf(tw, format, args...) }
	p("file\t%s\n", fi.Path)
	p("size\t%d bytes\n", fi.SizeBytes)
	p("rows\t%d\n", fi.Rows)
	p("row groups\t%d\n", len(fi.RowGroups))
	if fi.CreatedBy != "" {
		p("created by\t%s\n", fi.CreatedBy)
	}
	if fi.SteplabTable != "" {
		p("steplab table\t%s (schema version %s)\n", fi.SteplabTable, fi.SteplabSchemaVersion)
	}
	p("metadata keys\t%s\n", orDash(strings.Join(fi.KeyValueKeys, ", ")))
	p("\nCOLUMN\tPHYSICAL\tLOGICAL\tREPETITION\tCOMPRESSION\tCOMPRESSED B\tUNCOMPRESSED B\n")
	for _, c := range fi.Columns {
		p("%s\t%s\t%s\t%s\t%s\t%d\t%d\n", c.Name, c.PhysicalType, orDash(c.LogicalType), c.Repetition, c.Compression, c.CompressedBytes, c.UncompressedBytes)
	}
	p("\nROW GROUP\tROWS\tCOMPRESSED B\tUNCOMPRESSED B\n")
	for _, rg := range fi.RowGroups {
		p("%d\t%d\t%d\t%d\n", rg.Index, rg.Rows, rg.CompressedBytes, rg.UncompressedBytes)
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
