//go:build !(linux && cgo)

package capture

// OpenNVML reports ErrNoNVML: this build has no cgo, so no NVML.
func OpenNVML() (GPUMonitor, error) { return nil, ErrNoNVML }
