package fit

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/steplab/steplab/features"
	"github.com/steplab/steplab/model"
)

// Artifact wraps the fitted model into a model artifact with its training
// record, the evaluation metrics (any JSON-encodable value, e.g. a Report
// or CVResult; nil for none) and who created it. Only the features the
// model's terms use are documented.
func (r *Result) Artifact(training model.Training, metrics any, createdBy string) (*model.Artifact, error) {
	a := model.LinearArtifact(r.Model)
	if training.Method == "" {
		training.Method = r.Method
	}
	if training.Rows == 0 {
		training.Rows = r.Rows
	}
	if r.Boot != nil && training.Bootstrap == 0 {
		training.Bootstrap = len(r.Boot.Coef)
	}
	a.Training = training
	for _, f := range features.Definitions {
		if slices.Contains(r.Model.Terms, f.Name) {
			a.Features = append(a.Features, f)
		}
	}
	if metrics != nil {
		b, err := json.Marshal(metrics)
		if err != nil {
			return nil, fmt.Errorf("fit: artifact metrics: %w", err)
		}
		a.Metrics = b
	}
	a.CreatedBy = createdBy
	a.CreatedAt = time.Now().UTC().Format(time.RFC3339)
	return a, nil
}
