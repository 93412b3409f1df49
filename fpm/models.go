package fpm

import "github.com/steplab/steplab/catalog"

// Models are a priced engine: the GPU and the model shape it runs, and the
// models the simulated executor prices its steps with (the FPM, the
// payload model and the host-overhead model), with where each came from.
// It is plain data: package pricing builds it from a spec (the one place
// a spec string becomes models), and a program may fill it itself.
type Models struct {
	HW    catalog.Hardware
	Shape catalog.Shape
	FPM   FPM
	// FPMName names the FPM in reports and manifests: "roofline" or the
	// artifact path as given.
	FPMName string
	// Artifact is the FPM's artifact (nil for the roofline).
	Artifact *Artifact
	Host     HostModel
	// HostName is the host spec as given, "" for the default prior.
	HostName string
	// HostPrior is true when Host is the default prior: no host spec and
	// none in the artifact's params.host.
	HostPrior bool
	Payload   PayloadModel
	// Notes say where a model came from when that was not the obvious
	// place (a host model read from the FPM artifact).
	Notes []string
}
