package fit

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/steplab/steplab/model"
)

// FeatureDefinitions documents, for a model artifact, how FeaturesOf
// computes each feature from the steps table.
var FeatureDefinitions = []model.FeatureDef{
	{Name: "prefill_tokens", Definition: "sum_prefill_tokens"},
	{Name: "prefill_kv_tokens", Definition: "sum_prefill_kv_tokens"},
	{Name: "prefill_attn", Definition: "Σ chunk·(kv + chunk/2); from steps alone ≈ T·K/n + (n·var_prefill_length + T²/n)/2 with T = sum_prefill_tokens, K = sum_prefill_kv_tokens, n = num_prefill_requests (exact for n = 1 or with step_requests)"},
	{Name: "prefill_requests", Definition: "num_prefill_requests"},
	{Name: "decode_requests", Definition: "num_decode_requests"},
	{Name: "decode_kv_tokens", Definition: "sum_decode_kv_tokens"},
	{Name: "kv_per_request", Definition: "sum_decode_kv_tokens / num_decode_requests"},
	{Name: "padded_batch", Definition: "padded_tokens on decode steps when > 0, else num_decode_requests"},
	{Name: "new_requests", Definition: "num_new_reqs"},
	{Name: "new_req_tokens", Definition: "Σ prompt_len of new requests (step_requests), else payload_new_bytes / 4"},
}

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
	for _, dt := range r.Dropped {
		a.Notes = append(a.Notes, fmt.Sprintf("term %s dropped: %s", dt.Term, dt.Reason))
	}
	return a, finishArtifact(a, training, metrics, createdBy, r.Model.Terms)
}

// finishArtifact fills an artifact's training record, the definitions of
// the features it uses (by name), its metrics and its provenance.
func finishArtifact(a *model.Artifact, training model.Training, metrics any, createdBy string, features []string) error {
	a.Training = training
	for _, f := range FeatureDefinitions {
		if slices.Contains(features, f.Name) {
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
