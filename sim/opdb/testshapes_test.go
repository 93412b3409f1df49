package opdb

import "github.com/steplab/steplab/model"

// Catalogue entries the tests price with.
var (
	h100HW  = must(model.LookupHardware("H100-SXM"))
	h200HW  = must(model.LookupHardware("H200-SXM"))
	llama8B = must(model.LookupModel("Llama-3.1-8B"))
	tiny    = must(model.LookupModel("tiny"))
)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
