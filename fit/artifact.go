package fit

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/steplab/steplab/features"
	"github.com/steplab/steplab/fpm"
)

// Artifact wraps the fitted model into a model artifact with its training
// record, the evaluation metrics (any JSON-encodable value, e.g. a Report
// or CVResult; nil for none) and who created it. Only the features the
// model's terms use are documented.
func (r *Result) Artifact(training fpm.Training, metrics any, createdBy string) (*fpm.Artifact, error) {
	a := fpm.LinearArtifact(r.Model)
	if training.Method == "" {
		training.Method = r.Method
	}
	if training.Rows == 0 {
		training.Rows = r.Rows
	}
	if r.Boot != nil && training.Bootstrap == 0 {
		training.Bootstrap = len(r.Boot.Coef)
	}
	for _, dt := range r.Dropped {
		a.Notes = append(a.Notes, fmt.Sprintf("term %s dropped: %s", dt.Term, dt.Reason))
	}
	return a, finishArtifact(a, training, metrics, createdBy, r.Model.Terms)
}

// finishArtifact fills an artifact's training record, the definitions of
// the features it uses (by name; a term written with parameters, NAME(…),
// by NAME), its metrics and its provenance.
func finishArtifact(a *fpm.Artifact, training fpm.Training, metrics any, createdBy string, used []string) error {
	a.Training = training
	for _, f := range features.Definitions {
		if slices.ContainsFunc(used, func(u string) bool { return u == f.Name || strings.HasPrefix(u, f.Name+"(") }) {
			a.Features = append(a.Features, f)
		}
	}
	if metrics != nil {
		b, err := json.Marshal(metrics)
		if err != nil {
			return fmt.Errorf("fit: artifact metrics: %w", err)
		}
		a.Metrics = b
	}
	a.CreatedBy = createdBy
	a.CreatedAt = time.Now().UTC().Format(time.RFC3339)
	return nil
}
