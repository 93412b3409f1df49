package manifest

import (
	"fmt"
	"slices"
	"strings"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/datasets/validate"
)

// The manifest's settings price every replay and fit of the dataset, so a
// value no model or GPU has (a billion layers) is refused. The bounds come
// from the model catalogue: a size may be up to catalogueHeadroom times
// the largest any catalogued model has (room for models newer than the
// catalogue, none for a corrupt digit); the shape must be one the
// simulator can price (catalog.Shape.Validate: heads divisible by KV heads
// and TP, so TP is bounded too); the KV cache must fit the GPU's memory (catalog.KVBlocks at
// a gpu_memory_utilization of 1) and the CUDA-graph sizes must be
// positive and increasing. What cannot be checked
// (a GPU or model the catalogue lacks) is said as a warning.
const catalogueHeadroom = 4

// modelSizes are the size fields of the model section, in the manifest's
// and the catalogue's terms.
var modelSizes = []struct {
	field string
	of    func(*datasets.ModelShape) int
	cat   func(catalog.Shape) int
}{
	{"layers", func(m *datasets.ModelShape) int { return m.Layers }, func(s catalog.Shape) int { return s.Layers }},
	{"hidden", func(m *datasets.ModelShape) int { return m.Hidden }, func(s catalog.Shape) int { return s.Hidden }},
	{"heads", func(m *datasets.ModelShape) int { return m.Heads }, func(s catalog.Shape) int { return s.Heads }},
	{"kv_heads", func(m *datasets.ModelShape) int { return m.KVHeads }, func(s catalog.Shape) int { return s.KVHeads }},
	{"head_dim", func(m *datasets.ModelShape) int { return m.HeadDim }, func(s catalog.Shape) int { return s.HeadDim }},
	{"intermediate", func(m *datasets.ModelShape) int { return m.Intermediate }, func(s catalog.Shape) int { return s.Intermediate }},
	{"vocab", func(m *datasets.ModelShape) int { return m.Vocab }, func(s catalog.Shape) int { return s.Vocab }},
}

// checker collects the findings of Check.
type checker struct{ out []validate.Violation }

func (c *checker) add(level validate.Level, field, format string, args ...any) {
	c.out = append(c.out, validate.Violation{Table: validate.TableManifest, Row: -1, Part: datasets.ManifestFile,
		Field: field, Level: level, Message: fmt.Sprintf(format, args...)})
}

// Check checks the manifest's model, hardware, engine and CUDA-graph
// settings against the default catalogue: validate.Options.Settings.
func Check(m *datasets.Manifest) []validate.Violation {
	c := &checker{}
	c.check(m)
	return c.out
}

func (c *checker) check(m *datasets.Manifest) {
	cat, err := catalog.DefaultCatalog()
	if err != nil {
		c.add(validate.Warning, "", "settings not checked: %v", err)
		return
	}
	shape, shapeOK := c.checkModel(m.Model, cat)
	hw, hwOK := c.checkHardware(m.Hardware, cat)
	if e := m.Engine; e != nil && e.NumGPUBlocks > 0 && e.BlockSize > 0 {
		switch {
		case !shapeOK || !hwOK:
			c.add(validate.Warning, "engine.num_gpu_blocks", "not checked against the GPU's memory: the GPU or the model above could not be used")
		default:
			if most, err := catalog.KVBlocks(hw, shape, e.BlockSize, 1, 0); err != nil {
				c.add(validate.Warning, "engine.num_gpu_blocks", "not checked against the GPU's memory: %v", err)
			} else if e.NumGPUBlocks > most {
				c.add(validate.Error, "engine.num_gpu_blocks",
					"%d blocks of %d tokens do not fit %s with %s's weights (at most %d)", e.NumGPUBlocks, e.BlockSize, hw.Name, shape.Name, most)
			}
		}
	}
	c.checkGraphs(m)
}

// checkModel bounds the model section's sizes by the catalogue's and
// checks the shape the simulator would price.
func (c *checker) checkModel(ms *datasets.ModelShape, cat *catalog.Catalog) (catalog.Shape, bool) {
	if ms == nil {
		return catalog.Shape{}, false
	}
	models := cat.Models()
	bad := false
	for _, f := range modelSizes {
		v := f.of(ms)
		largest, in := 0, ""
		for _, s := range models {
			if n := f.cat(s); n > largest {
				largest, in = n, s.Name
			}
		}
		switch {
		case v < 0:
			c.add(validate.Error, "model."+f.field, "negative value %d", v)
			bad = true
		case v > catalogueHeadroom*largest:
			c.add(validate.Error, "model."+f.field,
				"%d is beyond any known model (the largest in the catalogue: %d, %s; at most %d× that is accepted)", v, largest, in, catalogueHeadroom)
			bad = true
		}
	}
	if bad || ms.Layers == 0 || ms.Hidden == 0 {
		return catalog.Shape{}, false
	}
	s, err := Shape(ms)
	if err != nil {
		c.add(validate.Error, "model", "not a shape the simulator can price: %v", err)
		return s, false
	}
	known := slices.ContainsFunc(models, func(s catalog.Shape) bool { return strings.EqualFold(s.Name, ms.Name) })
	if !known && ms.Name != "" {
		c.add(validate.Warning, "model.name", "%q is not in the model catalogue: its sizes are checked against the catalogue's range only", ms.Name)
	}
	return s, true
}

// checkHardware finds the GPU in the catalogue and bounds the memory the
// manifest records by the catalogue's.
func (c *checker) checkHardware(h *datasets.Hardware, cat *catalog.Catalog) (catalog.Hardware, bool) {
	if h == nil || h.GPUName == "" {
		return catalog.Hardware{}, false
	}
	// A name, never a path: the catalogue reads spec files by path.
	if strings.ContainsAny(h.GPUName, `/\`) || strings.HasSuffix(h.GPUName, ".yaml") || strings.HasSuffix(h.GPUName, ".json") {
		c.add(validate.Warning, "hardware.gpu_name", "%q is a path, not a GPU name: hardware settings not checked", h.GPUName)
		return catalog.Hardware{}, false
	}
	hw, err := cat.LookupHardware(h.GPUName)
	if err != nil {
		c.add(validate.Warning, "hardware.gpu_name", "%q is not in the hardware catalogue: memory and KV cache size not checked", h.GPUName)
		return hw, false
	}
	// A driver reports a little less than the marketed capacity, never more.
	if h.MemTotalBytes > 0 && float64(h.MemTotalBytes) > 1.05*hw.MemBytes() {
		c.add(validate.Error, "hardware.mem_total_bytes",
			"%d bytes is more than %s has (%.0f GiB)", h.MemTotalBytes, hw.Name, hw.MemGB)
		return hw, false
	}
	return hw, true
}

// checkGraphs checks the CUDA-graph capture sizes as the simulator takes
// them (sim.Plan): positive and increasing. Sizes above the step's token
// budget are allowed: they are never used.
func (c *checker) checkGraphs(m *datasets.Manifest) {
	const field = "cuda_graph_capture_sizes"
	prev := 0
	for i, g := range m.CUDAGraphSizes {
		if g <= prev {
			c.add(validate.Error, field, "entry %d is %d: sizes must be positive and increasing", i, g)
			return
		}
		prev = g
	}
}
