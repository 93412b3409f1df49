package datasets

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ManifestFile is the name of a dataset's manifest inside its directory.
const ManifestFile = "manifest.json"

// Dataset statuses (Manifest.Status).
const (
	// DatasetComplete: every writer closed cleanly.
	DatasetComplete = "complete"
	// DatasetPartial: the writer was interrupted (or a capture failed);
	// the parts listed on disk are intact, the last open one is lost.
	DatasetPartial = "partial"
)

// Measurement policies (MeasurementPolicy fields).
const (
	PolicySteadyStateSecondStep = "steady_state_second_step"
	PolicyAdmissionStep         = "admission_step"
	PolicyProduction            = "production"
	PolicySingleStep            = "single_step"
)

// Manifest is the provenance of a dataset: manifest.json.
// Sections a source does not have are nil and omitted.
type Manifest struct {
	SchemaVersion int    `json:"schema_version"`
	Name          string `json:"name"`
	Status        string `json:"status"`
	// Created is supplied by the caller (a capture's wall clock, an
	// importer's source file); the simulator leaves it empty so that its
	// output is byte-identical across runs.
	Created string `json:"created,omitempty"`

	Tool              Tool               `json:"tool"`
	Source            Source             `json:"source"`
	Hardware          *Hardware          `json:"hardware,omitempty"`
	Model             *ModelShape        `json:"model,omitempty"`
	Engine            *EngineConfig      `json:"engine,omitempty"`
	CUDAGraphSizes    []int              `json:"cuda_graph_capture_sizes,omitempty"`
	Workload          *Workload          `json:"workload,omitempty"`
	MeasurementPolicy *MeasurementPolicy `json:"measurement_policy,omitempty"`

	// Tables records, for each table written, its parts and row counts.
	// The writer fills it; readers use it to detect missing parts.
	Tables map[string]TableInfo `json:"tables"`
	Notes  []string             `json:"notes,omitempty"`
}

// Tool names the program and command that wrote the dataset.
type Tool struct {
	Name    string   `json:"name"`
	Version string   `json:"version"`
	Command []string `json:"command,omitempty"`
}

// Source says where the rows came from.
type Source struct {
	Kind   string            `json:"kind"`             // capture | simulate | import
	Format string            `json:"format,omitempty"` // importer name, executor name, ...
	Path   string            `json:"path,omitempty"`
	SHA256 string            `json:"sha256,omitempty"` // of the source file, for imports
	Detail map[string]string `json:"detail,omitempty"`
}

// Hardware describes the GPU (or simulated GPU) the steps ran on.
type Hardware struct {
	GPUName       string  `json:"gpu_name,omitempty"`
	GPUUUID       string  `json:"gpu_uuid,omitempty"`
	GPUCount      int     `json:"gpu_count,omitempty"`
	Driver        string  `json:"driver,omitempty"`
	SMClockMHz    int     `json:"sm_clock_mhz,omitempty"`
	MemClockMHz   int     `json:"mem_clock_mhz,omitempty"`
	PowerLimitW   float64 `json:"power_limit_w,omitempty"`
	MemTotalBytes int64   `json:"mem_total_bytes,omitempty"`
	Simulated     bool    `json:"simulated,omitempty"`
}

// ModelShape is the decoder architecture the steps ran.
type ModelShape struct {
	Name           string  `json:"name,omitempty"`
	Layers         int     `json:"layers"`
	Hidden         int     `json:"hidden"`
	Heads          int     `json:"heads"`
	KVHeads        int     `json:"kv_heads"`
	HeadDim        int     `json:"head_dim"`
	Intermediate   int     `json:"intermediate"`
	Vocab          int     `json:"vocab"`
	DType          string  `json:"dtype"`
	TensorParallel int     `json:"tensor_parallel,omitempty"`
	ParamsBillion  float64 `json:"params_billion,omitempty"`
}

// EngineConfig holds the scheduler limits of DESIGN.md §3.
type EngineConfig struct {
	MaxNumSeqs                int  `json:"max_num_seqs"`
	MaxNumBatchedTokens       int  `json:"max_num_batched_tokens"`
	BlockSize                 int  `json:"block_size"`
	NumGPUBlocks              int  `json:"num_gpu_blocks"`
	MaxModelLen               int  `json:"max_model_len"`
	ChunkedPrefill            bool `json:"chunked_prefill"`
	PrefixCaching             bool `json:"prefix_caching"`
	LongPrefillTokenThreshold int  `json:"long_prefill_token_threshold"`
	AsyncScheduling           bool `json:"async_scheduling"`
	BatchQueueDepth           int  `json:"batch_queue_depth,omitempty"`
	WorkerCount               int  `json:"worker_count,omitempty"`
}

// Workload describes the arrivals that drove the run.
type Workload struct {
	Kind        string            `json:"kind"`
	Params      map[string]string `json:"params,omitempty"`
	Seed        uint64            `json:"seed"`
	InputSHA256 string            `json:"input_sha256,omitempty"`
}

// MeasurementPolicy says how benchmark points were measured (seed 004).
type MeasurementPolicy struct {
	Decode  string `json:"decode,omitempty"`
	Prefill string `json:"prefill,omitempty"`
}

// TableInfo lists the parts of one table.
type TableInfo struct {
	Rows  int64      `json:"rows"`
	Parts []PartInfo `json:"parts"`
}

// PartInfo is one completed part file of a table.
type PartInfo struct {
	File   string `json:"file"` // relative to the dataset directory
	Rows   int64  `json:"rows"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// ErrNewerSchema is wrapped by errors for data written by a newer steplab.
var ErrNewerSchema = errors.New("newer schema version")

// CheckSchemaVersion refuses data written with a newer schema than this build
// understands. Older versions are accepted: their missing columns read as the
// defaults documented in the schema.
func CheckSchemaVersion(where string, v int) error {
	if v > SchemaVersion {
		return fmt.Errorf("%s: schema version %d is newer than this steplab understands (%d): upgrade steplab: %w",
			where, v, SchemaVersion, ErrNewerSchema)
	}
	if v < 1 {
		return fmt.Errorf("%s: invalid schema version %d (want 1..%d)", where, v, SchemaVersion)
	}
	return nil
}

// ReadManifest reads and checks dir/manifest.json.
func ReadManifest(dir string) (*Manifest, error) {
	path := filepath.Join(dir, ManifestFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: not a valid manifest: %w", path, err)
	}
	if err := CheckSchemaVersion(path, m.SchemaVersion); err != nil {
		return nil, err
	}
	return &m, nil
}

// WriteManifest writes dir/manifest.json atomically (temporary name, then
// rename), so a reader never sees half a manifest.
func WriteManifest(dir string, m *Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return WriteFileAtomic(filepath.Join(dir, ManifestFile), append(b, '\n'))
}

// WriteFileAtomic writes data under a temporary name in the same directory,
// syncs it and renames it over path.
func WriteFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}
