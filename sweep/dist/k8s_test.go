package dist

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/steplab/steplab/sweep"
)

// container is the first container of a Job document.
func container(t *testing.T, doc map[string]any) (map[string]any, map[string]any) {
	t.Helper()
	pod := doc["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	return pod["containers"].([]any)[0].(map[string]any), pod
}

func decodeAll(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var docs []map[string]any
	for {
		var d map[string]any
		if dec.Decode(&d) != nil {
			return docs
		}
		docs = append(docs, d)
	}
}

// TestEmitWorkerJob: the workers' identity comes from the Secret's files,
// never from an argument.
func TestEmitWorkerJob(t *testing.T) {
	tests := []struct {
		auth string
		want []string
	}{
		{"creds", []string{"--creds", SecretMount + "/nats.creds"}},
		{"nkey", []string{"--nkey", SecretMount + "/user.nk"}},
		{"password", []string{"--user", "steplab-worker", "--password-file", SecretMount + "/password"}},
	}
	for _, tc := range tests {
		t.Run(tc.auth, func(t *testing.T) {
			var b bytes.Buffer
			require.NoError(t, EmitWorkerJob(&b, WorkerJobOptions{Queue: "tls://nats.example:4222", Workers: 3, Auth: tc.auth, TLSCA: true,
				Limits: Limits{MaxRequests: 5000, MaxSteps: 200000, WallTimeNs: int64(time.Hour)}}))
			docs := decodeAll(t, b.Bytes())
			require.Len(t, docs, 1)
			c, pod := container(t, docs[0])
			args := strings.Join(toStrings(c["args"].([]any)), " ")
			assert.Contains(t, args, strings.Join(tc.want, " "))
			assert.Contains(t, args, "--tls-ca "+SecretMount+"/ca.pem")
			assert.Contains(t, args, "--limit-requests 5000 --limit-steps 200000 --limit-wall 1h0m0s")
			vols := pod["volumes"].([]any)
			assert.Equal(t, map[string]any{"secretName": "steplab-nats"}, vols[0].(map[string]any)["secret"])
		})
	}
	assert.ErrorContains(t, EmitWorkerJob(&bytes.Buffer{}, WorkerJobOptions{Queue: "nats://x:1", Auth: "token"}), `worker auth "token"`)
	assert.ErrorContains(t, EmitWorkerJob(&bytes.Buffer{}, WorkerJobOptions{}), "needs --queue")
}

func toStrings(xs []any) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = x.(string)
	}
	return out
}

// TestEmitCalibrateIndexedJob: a calibrate sweep's pods mount the claim
// holding its datasets and resolve the scenario's paths there; without
// one the manifest is refused.
func TestEmitCalibrateIndexedJob(t *testing.T) {
	body := []byte("datasets: [run]\nholdout: 0.3\nhost: [none]\nterms: [gemm]\nmax_evals: 12\n")
	root := t.TempDir()
	spec := SpecFromFile(filepath.Join(root, "cal", "calib.yaml"), body, nil, []sweep.Vary{{Key: "holdout", Values: []string{"0.2", "0.4"}}})
	err := EmitIndexedJob(&bytes.Buffer{}, spec, 2, "c1", K8sOptions{})
	assert.ErrorContains(t, err, "a calibrate sweep reads its datasets: give --data-pvc CLAIM")
	var b bytes.Buffer
	require.NoError(t, EmitIndexedJob(&b, spec, 2, "c1", K8sOptions{DataPVC: "steplab-data", DataRoot: root}))
	docs := decodeAll(t, b.Bytes())
	require.Len(t, docs, 3)
	c, pod := container(t, docs[1])
	args := toStrings(c["args"].([]any))
	assert.Equal(t, []string{"--paths-from", DataMount + "/cal"}, args[len(args)-2:])
	mounts := c["volumeMounts"].([]any)
	assert.Equal(t, map[string]any{"name": "data", "mountPath": DataMount, "readOnly": true}, mounts[2])
	vols := pod["volumes"].([]any)
	assert.Equal(t, map[string]any{"claimName": "steplab-data", "readOnly": true}, vols[2].(map[string]any)["persistentVolumeClaim"])
	err = EmitIndexedJob(&bytes.Buffer{}, spec, 2, "c1", K8sOptions{DataPVC: "d", DataRoot: filepath.Join(root, "cal", "x")})
	assert.ErrorContains(t, err, "lies outside")
	out := spec
	out.Scenario = []byte("datasets: [../../elsewhere]\n")
	err = EmitIndexedJob(&bytes.Buffer{}, out, 2, "c1", K8sOptions{DataPVC: "d", DataRoot: root})
	assert.ErrorContains(t, err, "elsewhere lies outside "+root)
}
