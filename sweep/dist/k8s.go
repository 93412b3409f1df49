package dist

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/steplab/steplab/replay"
	"github.com/steplab/steplab/sweep"
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
	// DataPVC is a claim holding a copy of the directory DataRoot (at
	// least the files the scenario names by relative paths: a
	// calibration's datasets, an FPM artifact): mounted read-only at
	// /data, and the pods resolve the scenario's relative paths where the
	// scenario lies in that copy (--paths-from). A calibrate sweep needs
	// it.
	DataPVC string
	// DataRoot is the local directory the claim copies (the submitter's
	// working directory); the scenario and its files must lie in it.
	DataRoot string
}

// DataMount is where K8sOptions.DataPVC is mounted.
const DataMount = "/data"

func (o K8sOptions) withDefaults(sweepID string, points int) K8sOptions {
	o.Name = cmp.Or(o.Name, "steplab-sweep-"+strings.ToLower(strings.ReplaceAll(sweepID, "_", "-")))
	o.Image, o.PVC, o.MergeTimeout = cmp.Or(o.Image, "steplab:latest"), cmp.Or(o.PVC, "steplab-results"), cmp.Or(o.MergeTimeout, "24h")
	if o.Parallelism <= 0 {
		o.Parallelism = 4
	}
	o.Parallelism = min(o.Parallelism, points)
	if o.BackoffLimitPerIndex <= 0 {
		o.BackoffLimitPerIndex = 2
	}
	return o
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
	o = o.withDefaults(sweepID, points)
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
	mounts := []string{"{name: scenario, mountPath: /scenario, readOnly: true}", "{name: results, mountPath: /results}"}
	volumes := []string{fmt.Sprintf("name: scenario\n          configMap: {name: %s}", q(o.Name+"-scenario")),
		fmt.Sprintf("name: results\n          persistentVolumeClaim: {claimName: %s}", q(o.PVC))}
	if o.DataPVC != "" {
		from, err := dataPaths(spec, o.DataRoot)
		if err != nil {
			return err
		}
		args = append(args, "--paths-from", from)
		mounts = append(mounts, "{name: data, mountPath: "+DataMount+", readOnly: true}")
		volumes = append(volumes, fmt.Sprintf("name: data\n          persistentVolumeClaim: {claimName: %s, readOnly: true}", q(o.DataPVC)))
	} else if d, err := spec.Doc(); err == nil && sweep.KindOf(d) == sweep.KindCalibrate {
		return fmt.Errorf("k8s: a calibrate sweep reads its datasets: give --data-pvc CLAIM, a claim holding them as they lie beside %s", file)
	}
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
	p("          volumeMounts:\n")
	for _, m := range mounts {
		p("            - %s\n", m)
	}
	p("      volumes:\n")
	for _, v := range volumes {
		p("        - %s\n", v)
	}
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

// WorkerJobOptions tune EmitWorkerJob.
type WorkerJobOptions struct {
	Name, Namespace, Image string
	// Queue is the NATS server's address.
	Queue string
	// Workers is the number of worker pods; Jobs the points each runs at
	// once.
	Workers, Jobs int
	// PVC is the ReadWriteMany claim of the results store, at /results.
	PVC string
	// Secret holds the workers' NATS identity, mounted read-only at
	// SecretMount; Auth says which of its keys: "creds" (nats.creds),
	// "nkey" (user.nk) or "password" (password, for User).
	Secret, Auth, User string
	// TLSCA mounts ca.pem from the Secret to verify the server; TLSClient
	// also tls.crt and tls.key.
	TLSCA, TLSClient bool
	// MaxIdle ends a pod after this long without a task (default 10m).
	MaxIdle string
	// Limits are the workers' caps.
	Limits Limits
}

// SecretMount is where EmitWorkerJob mounts the workers' NATS Secret.
const SecretMount = "/etc/steplab/nats"

// EmitWorkerJob writes a Kubernetes Job of worker pods (steplab worker)
// for a results store on a claim: their NATS identity and TLS files come
// from a Secret mounted as files, never from arguments.
func EmitWorkerJob(w io.Writer, o WorkerJobOptions) error {
	if o.Queue == "" {
		return fmt.Errorf("k8s: the worker Job needs --queue")
	}
	o.Name, o.Image, o.PVC = cmp.Or(o.Name, "steplab-workers"), cmp.Or(o.Image, "steplab:latest"), cmp.Or(o.PVC, "steplab-results")
	o.Secret, o.Auth, o.MaxIdle = cmp.Or(o.Secret, "steplab-nats"), cmp.Or(o.Auth, "creds"), cmp.Or(o.MaxIdle, "10m")
	o.Workers, o.Jobs = max(o.Workers, 1), max(o.Jobs, 1)
	args := []string{"worker", "--queue", o.Queue, "--results", "/results", "--jobs", fmt.Sprint(o.Jobs), "--max-idle", o.MaxIdle}
	switch o.Auth {
	case "creds":
		args = append(args, "--creds", SecretMount+"/nats.creds")
	case "nkey":
		args = append(args, "--nkey", SecretMount+"/user.nk")
	case "password":
		args = append(args, "--user", cmp.Or(o.User, "steplab-worker"), "--password-file", SecretMount+"/password")
	default:
		return fmt.Errorf("k8s: worker auth %q: want creds, nkey or password", o.Auth)
	}
	if o.TLSCA {
		args = append(args, "--tls-ca", SecretMount+"/ca.pem")
	}
	if o.TLSClient {
		args = append(args, "--tls-cert", SecretMount+"/tls.crt", "--tls-key", SecretMount+"/tls.key")
	}
	if l := o.Limits; l.MaxRequests > 0 || l.MaxSteps > 0 || l.WallTimeNs > 0 || l.MemoryBytes > 0 {
		args = append(args, "--limit-requests", fmt.Sprint(l.MaxRequests), "--limit-steps", fmt.Sprint(l.MaxSteps),
			"--limit-wall", time.Duration(l.WallTimeNs).String(),
			"--limit-memory-mib", fmt.Sprint(l.MemoryBytes>>20))
	}
	ns := ""
	if o.Namespace != "" {
		ns = "\n  namespace: " + q(o.Namespace)
	}
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("# %d steplab workers for the results store on claim %q; their NATS identity is the Secret %q,\n", o.Workers, o.PVC, o.Secret)
	p("# mounted read-only at %s (create it with kubectl create secret generic, see docs/distributed.md).\n", SecretMount)
	p("apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: %s%s\n  labels: {app.kubernetes.io/name: steplab, app.kubernetes.io/component: worker}\n", q(o.Name), ns)
	p("spec:\n  completions: %d\n  parallelism: %d\n  backoffLimit: %d\n  template:\n    spec:\n      restartPolicy: OnFailure\n", o.Workers, o.Workers, 3*o.Workers)
	p("      containers:\n        - name: worker\n          image: %s\n          args:\n", q(o.Image))
	for _, a := range args {
		p("            - %s\n", q(a))
	}
	p("          volumeMounts:\n            - {name: nats, mountPath: %s, readOnly: true}\n            - {name: results, mountPath: /results}\n", SecretMount)
	p("      volumes:\n        - name: nats\n          secret: {secretName: %s}\n", q(o.Secret))
	p("        - name: results\n          persistentVolumeClaim: {claimName: %s}\n", q(o.PVC))
	_, err := io.WriteString(w, b.String())
	return err
}

// dataPaths is the directory, in the pods, against which the scenario's
// relative paths resolve: where the scenario lies in the copy of root at
// DataMount. A calibration's files outside root are refused.
func dataPaths(spec Spec, root string) (string, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return "", err
	}
	inside := func(p string) (string, bool) {
		rel, err := filepath.Rel(abs, p)
		return rel, err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
	}
	dir := filepath.Dir(spec.Path)
	rel, ok := inside(dir)
	if !ok {
		return "", fmt.Errorf("k8s: --data-pvc: the scenario %s lies outside %s, the directory the claim copies", spec.Path, abs)
	}
	d, err := spec.Doc()
	if err != nil {
		return "", err
	}
	if sweep.KindOf(d) == sweep.KindCalibrate {
		var cs replay.CalibSpec
		if err := d.Decode(&cs); err != nil {
			return "", err
		}
		cs = cs.Resolve(dir)
		for _, p := range append(append(cs.Datasets, cs.HoldoutDatasets...), cs.Start, cs.HostModel, cs.Cluster) {
			if p == "" || p == "roofline" {
				continue
			}
			if _, ok := inside(p); !ok {
				return "", fmt.Errorf("k8s: --data-pvc: %s lies outside %s, the directory the claim copies", p, abs)
			}
		}
	}
	return filepath.Join(DataMount, rel), nil
}
