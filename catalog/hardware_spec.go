package catalog

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/steplab/steplab/internal/yamldoc"
)

// ParseHardwareSpec reads a hardware spec file (YAML; fields as Hardware's
// yaml tags, documented in docs/catalog.md). file names the source in
// errors. Unknown keys are refused with their line; a missing, zero or
// negative figure is an error naming the file and the field; fp8 and int8
// peaks may be absent (the chip has none) but not zero.
func ParseHardwareSpec(file string, data []byte) (Hardware, error) {
	hw, err := parseHardwareSpec(data)
	if err != nil {
		return Hardware{}, fmt.Errorf("model: hardware spec %s: %w", file, err)
	}
	hw.File = file
	return hw, nil
}

func parseHardwareSpec(data []byte) (Hardware, error) {
	root, err := yamldoc.Parse(data)
	if err != nil {
		return Hardware{}, fmt.Errorf("not valid YAML: %w", err)
	}
	if len(root.Content) != 1 || root.Content[0].Kind != yaml.MappingNode {
		return Hardware{}, errors.New("want a YAML mapping of fields (name, memory_gb, ...)")
	}
	doc := root.Content[0]
	if err := checkKnownKeys(doc, reflect.TypeFor[Hardware](), ""); err != nil {
		return Hardware{}, err
	}
	if mappingValue(doc, "roofline") == nil {
		return Hardware{}, errors.New(`roofline: missing: write "roofline: generic" for the documented default, or give its fields`)
	}
	var hw Hardware
	if err := doc.Decode(&hw); err != nil {
		return Hardware{}, err
	}
	// Absent means the chip has none; a written zero is a mistake.
	for _, p := range []struct {
		key string
		v   float64
	}{{"fp8", hw.TFLOPS.FP8}, {"int8", hw.TFLOPS.INT8}, {"fp4", hw.TFLOPS.FP4}} {
		if n := mappingValue(mappingValue(doc, "tflops"), p.key); n != nil && p.v == 0 {
			return Hardware{}, fmt.Errorf("line %d: tflops.%s: empty or 0: give the dense peak, or leave the key out where the chip has none", n.Line, p.key)
		}
	}
	if err := hw.validate(); err != nil {
		return Hardware{}, err
	}
	return hw, nil
}

// LoadHardwareFile reads a hardware spec file from disk.
func LoadHardwareFile(path string) (Hardware, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Hardware{}, fmt.Errorf("model: hardware spec: %w", err)
	}
	return ParseHardwareSpec(path, b)
}

// mappingValue is the value node of key in a mapping node (nil if absent
// or n is not a mapping).
func mappingValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// checkKnownKeys refuses a mapping key that names no field of t (by yaml
// tag), recursively through structs and slices, with the key's line and
// the keys that would be accepted. Nodes of another kind than their type
// expects (a Curve's number, "roofline: generic") are left to the
// decoder.
func checkKnownKeys(n *yaml.Node, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Struct:
		fields := map[string]reflect.Type{}
		for i := range t.NumField() {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
			if name != "" && name != "-" {
				fields[name] = t.Field(i).Type
			}
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			ft, ok := fields[k.Value]
			if !ok {
				known := make([]string, 0, len(fields))
				for f := range fields {
					known = append(known, f)
				}
				sort.Strings(known)
				where := "at the top level"
				if path != "" {
					where = "in " + path
				}
				return fmt.Errorf("line %d: unknown key %q %s (known: %s)", k.Line, k.Value, where, strings.Join(known, ", "))
			}
			if err := checkKnownKeys(n.Content[i+1], ft, joinPath(path, k.Value)); err != nil {
				return err
			}
		}
	case n.Kind == yaml.SequenceNode && t.Kind() == reflect.Slice:
		for i, c := range n.Content {
			if err := checkKnownKeys(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
