package yamldoc

import (
	"fmt"
	"reflect"
	"slices"
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
	// one (stages[encoder]), else by index; the items of a mapping read
	// into a list (cluster.pools) by their key.
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

// keyed is a field type that holds a raw block whose keys are another
// type's (Partial).
type keyed interface{ keysOf() reflect.Type }

// UnknownKeys lists the keys of n that t, decoded with yaml tags, does not
// have, at any depth: the check behind every document Doc decodes, so a
// typo is named with its line and the keys that would be valid there
// instead of a Go type.
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
	if k, ok := reflect.Zero(t).Interface().(keyed); ok {
		t = k.keysOf()
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
			unknownKeys(n.Content[j+1], ft, join(where, k.Value), out)
		}
	case t.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode:
		for i, item := range n.Content {
			w := fmt.Sprintf("%s[%d]", where, i)
			if name := valueOf(item, "name"); name != "" {
				w = fmt.Sprintf("%s[%s]", where, name)
			}
			unknownKeys(item, t.Elem(), w, out)
		}
	case t.Kind() == reflect.Slice && n.Kind == yaml.MappingNode:
		// A mapping of name to item read into a list in document order.
		for j := 0; j+1 < len(n.Content); j += 2 {
			unknownKeys(n.Content[j+1], t.Elem(), join(where, n.Content[j].Value), out)
		}
	}
}

func join(where, key string) string {
	if where == "" {
		return key
	}
	return where + "." + key
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

// Partial is a block of some of T's keys that override what a T already
// holds (a pool's engine keys over the scenario's engine): Over decodes
// the keys given over it and leaves the others as they are. A document
// checks its keys as T's.
type Partial[T any] struct{ node yaml.Node }

func (Partial[T]) keysOf() reflect.Type { return reflect.TypeFor[T]() }

// UnmarshalYAML keeps the block; decoded over a block already held, its
// keys are set over that one's, as a struct's would be.
func (p *Partial[T]) UnmarshalYAML(n *yaml.Node) error {
	if p.node.Kind != yaml.MappingNode || n.Kind != yaml.MappingNode {
		p.node = *n
		return nil
	}
	m := p.node
	m.Content = slices.Clone(m.Content)
next:
	for i := 0; i+1 < len(n.Content); i += 2 {
		for j := 0; j+1 < len(m.Content); j += 2 {
			if m.Content[j].Value == n.Content[i].Value {
				m.Content[j+1] = n.Content[i+1]
				continue next
			}
		}
		m.Content = append(m.Content, n.Content[i], n.Content[i+1])
	}
	p.node = m
	return nil
}

// MarshalYAML writes the block back as it was read.
func (p Partial[T]) MarshalYAML() (any, error) {
	if p.node.Kind == 0 {
		return nil, nil
	}
	return &p.node, nil
}

// IsZero reports a block left out.
func (p Partial[T]) IsZero() bool { return p.node.Kind == 0 }

// Over decodes the block's keys over dst.
func (p Partial[T]) Over(dst *T) error {
	if p.node.Kind == 0 {
		return nil
	}
	return p.node.Decode(dst)
}

// Keys lists the block's keys and their values as written, in order.
func (p Partial[T]) Keys() [][2]string {
	var out [][2]string
	for i := 0; i+1 < len(p.node.Content); i += 2 {
		out = append(out, [2]string{p.node.Content[i].Value, p.node.Content[i+1].Value})
	}
	return out
}
