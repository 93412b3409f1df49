package opdb

import "github.com/steplab/steplab/catalog"

// Catalogue entries the tests price with.
var (
	h100HW  = must(catalog.LookupHardware("H100-SXM"))
	h200HW  = must(catalog.LookupHardware("H200-SXM"))
	llama8B = must(catalog.LookupModel("Llama-3.1-8B"))
	tiny    = must(catalog.LookupModel("tiny"))
)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
