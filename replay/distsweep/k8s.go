package distsweep

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
)

// K8sOptions tune EmitIndexedJob.
type K8sOptions struct {
	// Name prefixes the objects (default steplab-sweep-<sweep id>).
	Name      string
	Namespace string
	// Image runs steplab (its entrypoint or PATH has the binary).
	Image string
	// Parallelism is the number of pods at once (default 4, at most the
	// number of points).
	Parallelism int
	// PVC is a ReadWriteMany claim mounted at /results in every pod.
	PVC string
	// BackoffLimitPerIndex is the retries of one point (default 2).
	BackoffLimitPerIndex int
	// MergeTimeout bounds the merge pod's wait for the parts (default 24h).
	MergeTimeout string
}

// q quotes a string for YAML (a JSON string is a YAML double-quoted
// scalar).
func q(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// EmitIndexedJob writes a Kubernetes manifest for spec: a ConfigMap with
// the scenario, an Indexed Job with one completion per point whose pods
// run `steplab sweep ... --point $(JOB_COMPLETION_INDEX) --results
// /results`, and a merge Job that waits for every part and runs
// `steplab sweep --merge /results -o /results/merged`.
func EmitIndexedJob(w io.Writer, spec Spec, points int, sweepID string, o K8sOptions) error {
	if points <= 0 {
		return fmt.Errorf("k8s: no points")
	}
	if sweepID == "" {
		sweepID = spec.ID()
	}
	if err := CheckID(sweepID); err != nil {
		return err
	}
	if o.Name == "" {
		o.Name = "steplab-sweep-" + strings.ToLower(strings.ReplaceAll(sweepID, "_", "-"))
	}
	if o.Image == "" {
		o.Image = "steplab:latest"
	}
	if o.Parallelism <= 0 {
		o.Parallelism = 4
	}
	o.Parallelism = min(o.Parallelism, points)
	if o.PVC == "" {
		o.PVC = "steplab-results"
	}
	if o.BackoffLimitPerIndex <= 0 {
		o.BackoffLimitPerIndex = 2
	}
	if o.MergeTimeout == "" {
		o.MergeTimeout = "24h"
	}
	file := filepath.Base(spec.Path)
	if file == "." || file == "/" || file == "" {
		file = "scenario.yaml"
	}
	args := []string{"sweep", "/scenario/" + file}
	for _, s := range spec.Sets {
		args = append(args, "--set", s)
	}
	for _, v := range spec.Vary {
		args = append(args, "--vary", v.Key+"="+strings.Join(v.Values, ","))
	}
	args = append(args, "--sweep-id", sweepID, "--point", "$(JOB_COMPLETION_INDEX)", "--results", "/results")
	ns := ""
	if o.Namespace != "" {
		ns = "\n  namespace: " + q(o.Namespace)
	}
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("# steplab sweep %s: %d points as a Kubernetes Indexed Job (completion index = point index).\n", sweepID, points)
	p("# Needs a ReadWriteMany PersistentVolumeClaim %q for the parts; backoffLimitPerIndex needs Kubernetes >= 1.29.\n", o.PVC)
	p("# Apply it, then read the merged sweep from the claim: /results/merged/sweep.parquet.\n")
	p("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s%s\n  labels: {app.kubernetes.io/name: steplab, steplab/sweep-id: %s}\ndata:\n  %s: |\n",
		q(o.Name+"-scenario"), ns, q(sweepID), q(file))
	for _, line := range strings.Split(strings.TrimRight(string(spec.Scenario), "\n"), "\n") {
		p("    %s\n", line)
	}
	p("---\napiVersion: batch/v1\nkind: Job\nmetadata:\n  name: %s%s\n  labels: {app.kubernetes.io/name: steplab, steplab/sweep-id: %s}\n", q(o.Name), ns, q(sweepID))
	p("spec:\n  completionMode: Indexed\n  completions: %d\n  parallelism: %d\n  backoffLimitPerIndex: %d\n", points, o.Parallelism, o.BackoffLimitPerIndex)
	p("  template:\n    metadata:\n      labels: {app.kubernetes.io/name: steplab, steplab/sweep-id: %s}\n", q(sweepID))
	p("    spec:\n      restartPolicy: Never\n      containers:\n        - name: point\n          image: %s\n", q(o.Image))
	p("          # JOB_COMPLETION_INDEX is set by the Job controller in every pod of an Indexed Job.\n")
	p("          args:\n")
	for _, a := range args {
		p("            - %s\n", q(a))
	}
	p("          volumeMounts:\n            - {name: scenario, mountPath: /scenario, readOnly: true}\n            - {name: results, mountPath: /results}\n")
	p("      volumes:\n        - name: scenario\n          configMap: {name: %s}\n        - name: results\n          persistentVolumeClaim: {claimName: %s}\n",
		q(o.Name+"-scenario"), q(o.PVC))
	p("---\n# The merge step: waits (up to %s) for all %d parts, then writes sweep.parquet, sweep.json and the figures.\n", o.MergeTimeout, points)
	p("apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: %s%s\n  labels: {app.kubernetes.io/name: steplab, steplab/sweep-id: %s}\n", q(o.Name+"-merge"), ns, q(sweepID))
	p("spec:\n  backoffLimit: 2\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n        - name: merge\n          image: %s\n          args:\n", q(o.Image))
	for _, a := range []string{"sweep", "--merge", "/results", "--sweep-id", sweepID, "--timeout", o.MergeTimeout, "-o", "/results/merged"} {
		p("            - %s\n", q(a))
	}
	p("          volumeMounts:\n            - {name: results, mountPath: /results}\n")
	p("      volumes:\n        - name: results\n          persistentVolumeClaim: {claimName: %s}\n", q(o.PVC))
	_, err := io.WriteString(w, b.String())
	return err
}
