package catalog

// Catalogue entries the tests price with, resolved once from the built-in
// catalogue (a failure here is a broken built-in file).
var (
	h100     = mustHardware("H100-SXM")
	h200     = mustHardware("H200-SXM")
	llama8B  = mustShape("Llama-3.1-8B")
	llama70B = mustShape("Llama-3.1-70B")
	qwen7B   = mustShape("Qwen2.5-7B")
	tiny     = mustShape("tiny")
)

var builtin = func() *Catalog {
	c, err := LoadCatalog()
	if err != nil {
		panic(err)
	}
	return c
}()

func mustHardware(name string) Hardware {
	h, err := builtin.LookupHardware(name)
	if err != nil {
		panic(err)
	}
	return h
}

func mustShape(name string) Shape {
	s, err := builtin.LookupModel(name)
	if err != nil {
		panic(err)
	}
	return s
}
