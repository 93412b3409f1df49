package validate

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// WriteText prints the report as an aligned table of violations followed by
// counts per table and field and a one-line verdict.
func (r *Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if len(r.Violations) > 0 {
		fmt.Fprintln(tw, "LEVEL\tTABLE\tROW\tFIELD\tPART\tMESSAGE")
		for _, v := range r.Violations {
			row := "-"
			if v.Row >= 0 {
				row = fmt.Sprint(v.Row)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", v.Level, v.Table, row, dash(v.Field), dash(v.Part), v.Message)
		}
		if r.Truncated {
			fmt.Fprintf(tw, "...\t\t\t\t\t%d more not shown (raise --max)\n", r.Errors+r.Warnings-int64(len(r.Violations)))
		}
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "TABLE\tFIELD\tLEVEL\tCOUNT")
		for _, c := range r.Counts {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", c.Table, dash(c.Field), c.Level, c.N)
		}
		fmt.Fprintln(tw)
	}
	tables := make([]string, 0, len(r.RowsChecked))
	for t := range r.RowsChecked {
		tables = append(tables, t)
	}
	sort.Strings(tables)
	var checked []string
	for _, t := range tables {
		checked = append(checked, fmt.Sprintf("%s %d", t, r.RowsChecked[t]))
	}
	verdict := "valid"
	if !r.OK() {
		verdict = "INVALID"
	}
	if r.Partial {
		verdict += " (partial)"
	}
	fmt.Fprintf(tw, "%s: %s: %d errors, %d warnings; rows checked: %s\n", r.Dir, verdict, r.Errors, r.Warnings, dash(strings.Join(checked, ", ")))
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
