//go:build !(linux && cgo && nvml)

package capture

import "fmt"

// errNoNVMLBuild says how to get NVML: the default build leaves go-nvml out
// (its cgo header alone prints a page of deprecation warnings per build).
var errNoNVMLBuild = fmt.Errorf("%w: built without NVML; rebuild with -tags nvml (CGO_ENABLED=1 go build -tags nvml ./cmd/steplab)", ErrNoNVML)

// OpenNVML reports that this build has no NVML.
func OpenNVML() (GPUMonitor, error) { return nil, errNoNVMLBuild }
