package validate

import (
	"fmt"
	"path/filepath"

	"github.com/steplab/steplab/datasets"
)

// TableLeftovers is the table name of violations about what interrupted
// runs left at and beside the dataset (datasets.Leftovers).
const TableLeftovers = "leftovers"

// checkLeftovers names, as warnings, the temporary parts, temporary files
// and staging directories a killed run left: readers ignore them, and the
// next run into the path removes those whose process is gone.
func (c *checker) checkLeftovers() {
	ls, err := datasets.Leftovers(c.d.Dir)
	if err != nil {
		c.warnf(TableLeftovers, -1, "", "", "listing what interrupted runs left: %v", err)
		return
	}
	for _, l := range ls {
		rel, err := filepath.Rel(c.d.Dir, l.Path)
		if err != nil {
			rel = l.Path
		}
		owner := "its writer is gone: the next run into the path removes it"
		switch {
		case l.Running:
			owner = fmt.Sprintf("process %d still runs", l.PID)
		case l.PID != 0:
			owner = fmt.Sprintf("process %d is gone: the next run into the path removes it", l.PID)
		case l.What == "temporary part":
			owner = "a part not committed when the writer stopped; readers ignore it"
		}
		c.warnf(TableLeftovers, -1, filepath.ToSlash(rel), "", "%s left by an interrupted run (%s)", l.What, owner)
	}
}
