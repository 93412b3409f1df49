package fpm

import (
	"fmt"
	"github.com/steplab/steplab/catalog"
	"slices"
	"strings"
)

// AddFittedOn appends f to list unless it is there already: the distinct
// settings of a model's training datasets, in their order.
func AddFittedOn(list []catalog.FittedOn, f catalog.FittedOn) []catalog.FittedOn {
	if f == (catalog.FittedOn{}) || slices.Contains(list, f) {
		return list
	}
	return append(list, f)
}

// ProvenanceNotes say where the artifact a (named name) prices runs it
// was not fitted on: one note per run whose GPU, model or precision none of
// its training datasets had, whose error no one has measured. An artifact
// fitted from datasets before the record existed gets one note that its
// provenance is unknown. Runs whose GPU is not known are skipped (nothing
// to compare), as is an artifact with no training datasets (a
// hand-written or prior artifact).
func ProvenanceNotes(name string, a *Artifact, runs ...catalog.FittedOn) []string {
	runs = slices.DeleteFunc(slices.Clone(runs), func(r catalog.FittedOn) bool { return r.GPU == "" })
	if a == nil || len(runs) == 0 || len(a.Training.Datasets) == 0 {
		return nil
	}
	fitted := a.Training.FittedOn
	if len(fitted) == 0 {
		return []string{fmt.Sprintf("fpm %s records no training.fitted_on (fitted before steplab recorded it): its provenance is unknown; applied to %s",
			name, joinSettings(runs))}
	}
	var notes []string
	for _, run := range runs {
		if !slices.ContainsFunc(fitted, func(f catalog.FittedOn) bool { return f.Covers(run) }) {
			notes = append(notes, fmt.Sprintf("fpm %s was fitted on %s; applied to %s: its error there is unmeasured", name, joinSettings(fitted), run))
		}
	}
	return notes
}

func joinSettings(fs []catalog.FittedOn) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = f.String()
	}
	return strings.Join(s, " and ")
}
