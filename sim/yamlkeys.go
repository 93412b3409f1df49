package sim

import (
	"fmt"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// KeyError is a key a YAML document holds that its Go type has no field
// for: where it is and which keys that place knows. Its message leaves the
// file and line (Line) to the caller.
type KeyError struct {
	Line int
	Key  string
	// Where is the dotted path of the mapping that holds the key ("" at
	// the top); list items are named by their "name" key when they have
	// one (stages[encoder]), else by index.
	Where string
	Known []string
}

func (e KeyError) Error() string {
	where := ""
	if e.Where != "" {
		where = " in " + e.Where
	}
	return fmt.Sprintf("unknown key %q%s: known keys are %s", e.Key, where, strings.Join(e.Known, ", "))
}

// UnknownKeys lists the keys of n that t, decoded with yaml tags, does not
// have, at any depth: the check behind every scenario file, so a typo is
// named with its line and the keys that would be valid there instead of a
// Go type.
func UnknownKeys(n *yaml.Node, t reflect.Type) []KeyError {
	var out []KeyError
	unknownKeys(n, t, "", &out)
	return out
}

func unknownKeys(n *yaml.Node, t reflect.Type, where string, out *[]KeyError) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n == nil || t == reflect.TypeFor[yaml.Node]() {
		return
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	switch {
	case n.Kind == yaml.DocumentNode:
		for _, c := range n.Content {
			unknownKeys(c, t, where, out)
		}
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		fields := map[string]reflect.Type{}
		var names []string
		yamlFields(t, fields, &names)
		for j := 0; j+1 < len(n.Content); j += 2 {
			k := n.Content[j]
			ft, ok := fields[k.Value]
			if !ok {
				*out = append(*out, KeyError{Line: k.Line, Key: k.Value, Where: where, Known: names})
				continue
			}
			path := k.Value
			if where != "" {
				path = where + "." + k.Value
			}
			unknownKeys(n.Content[j+1], ft, path, out)
		}
	case t.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode:
		for i, item := range n.Content {
			w := fmt.Sprintf("%s[%d]", where, i)
			for j := 0; item.Kind == yaml.MappingNode && j+1 < len(item.Content); j += 2 {
				if item.Content[j].Value == "name" && item.Content[j+1].Value != "" {
					w = fmt.Sprintf("%s[%s]", where, item.Content[j+1].Value)
				}
			}
			unknownKeys(item, t.Elem(), w, out)
		}
	}
}

// yamlFields lists the keys a struct decodes, with inline (embedded)
// structs' keys at its own level.
func yamlFields(t reflect.Type, fields map[string]reflect.Type, names *[]string) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if opts == "inline" && f.Type.Kind() == reflect.Struct {
			yamlFields(f.Type, fields, names)
			continue
		}
		if name == "" || name == "-" {
			continue
		}
		fields[name] = f.Type
		*names = append(*names, name)
	}
}
