package yamldoc

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Doc is a YAML document kept as its node tree, so that errors name lines
// and --set overrides land on keys: the one way steplab reads a scenario,
// a what-if, a sweep, a placement or a bounds file. Decode checks every
// key against the Go type it decodes into (UnknownKeys) before decoding.
//
// A node an override put there carries no line of the file: its Line is
// the override's index, negated and less one (−1 for the first), so that
// Where and every message name the override instead.
type Doc struct {
	// Path names the document in messages ("": a document of overrides
	// alone).
	Path string
	root *yaml.Node
	sets []string
}

// ReadFile reads a document from a file.
func ReadFile(path string) (*Doc, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return New(path, b)
}

// New reads a document from b (checked by Parse); path names it in
// messages. An empty document is an empty mapping.
func New(path string, b []byte) (*Doc, error) {
	root, err := Parse(b)
	if err != nil && path != "" {
		return nil, fmt.Errorf("%s: %v", path, err)
	} else if err != nil {
		return nil, err
	}
	d := &Doc{Path: path, root: &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}}
	if root.Kind != 0 && len(root.Content) == 1 {
		d.root = root.Content[0]
	}
	return d, nil
}

// Overrides is a document of KEY=VALUE overrides alone (Set), over an
// empty mapping.
func Overrides(sets ...string) (*Doc, error) {
	d, _ := New("", nil)
	for _, s := range sets {
		if err := d.Set(s); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// Root is the document's top node.
func (d *Doc) Root() *yaml.Node { return d.root }

// Empty reports a document without keys.
func (d *Doc) Empty() bool { return d.root.Kind == yaml.MappingNode && len(d.root.Content) == 0 }

// Has reports whether the document has a top-level key.
func (d *Doc) Has(key string) bool { return Child(d.root, key) != nil }

// Where names a node for a message: the file and line, or the override
// that set it.
func (d *Doc) Where(n *yaml.Node) string {
	if n == nil {
		return d.at(0)
	}
	return d.at(n.Line)
}

func (d *Doc) at(line int) string {
	switch {
	case line < 0 && -line-1 < len(d.sets):
		return "--set " + d.sets[-line-1]
	case line > 0 && d.Path != "":
		return fmt.Sprintf("%s:%d", d.Path, line)
	case line > 0:
		return fmt.Sprintf("line %d", line)
	}
	return cmpOr(d.Path, "--set")
}

// Decode decodes the document over dst, a pointer to a struct with yaml
// tags (keys left out keep dst's values), after refusing every key dst's
// type does not have, each with where it is and the keys valid there.
func (d *Doc) Decode(dst any) error {
	return d.DecodeNode(d.root, dst)
}

// DecodeNode is Decode of one node of the document (a what-if stage's
// block).
func (d *Doc) DecodeNode(n *yaml.Node, dst any) error {
	var errs []error
	for _, e := range UnknownKeys(n, reflect.TypeOf(dst)) {
		errs = append(errs, fmt.Errorf("%s: %v", d.at(e.Line), e))
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if err := n.Decode(dst); err != nil {
		if d.Path == "" {
			return errors.New(d.lines(err.Error()))
		}
		return fmt.Errorf("%s: %s", d.Path, d.lines(err.Error()))
	}
	return nil
}

var overrideLine = regexp.MustCompile(`line -(\d+)`)

// lines names the overrides a decoder's message cites by their negated
// lines.
func (d *Doc) lines(msg string) string {
	return overrideLine.ReplaceAllStringFunc(msg, func(m string) string {
		i, _ := strconv.Atoi(strings.TrimPrefix(m, "line -"))
		if i < 1 || i > len(d.sets) {
			return m
		}
		return "--set " + d.sets[i-1]
	})
}

// Set overrides one key: KEY=VALUE with a dotted path, VALUE in YAML (a
// number, a word, [a, b], {k: v}), which replaces what the key held. The
// items of a list are addressed by their name key
// (stages.classifier.workers=8); a key the document lacks is added.
func (d *Doc) Set(kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	if !ok || k == "" {
		return fmt.Errorf("--set %q: want KEY=VALUE", kv)
	}
	var val yaml.Node
	if err := Unmarshal([]byte(v), &val); err != nil {
		return fmt.Errorf("--set %s: value: %v", kv, err)
	}
	vn := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null"}
	if len(val.Content) == 1 {
		vn = val.Content[0]
	}
	line := -(len(d.sets) + 1)
	mark(vn, line)
	cur := d.root
	parts := strings.Split(k, ".")
	for i, p := range parts {
		last := i == len(parts)-1
		var next *yaml.Node
		switch cur.Kind {
		case yaml.MappingNode:
			for j := 0; j+1 < len(cur.Content); j += 2 {
				if cur.Content[j].Value == p {
					next = cur.Content[j+1]
					if last {
						cur.Content[j+1] = vn
					}
				}
			}
			if next == nil {
				next = vn
				if !last {
					next = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: line}
				}
				cur.Content = append(cur.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: p, Line: line}, next)
			}
		case yaml.SequenceNode:
			for j, item := range cur.Content {
				if item.Kind == yaml.MappingNode && valueOf(item, "name") == p {
					next = item
					if last {
						cur.Content[j] = vn
					}
				}
			}
			if next == nil {
				return fmt.Errorf("--set %s: no item named %q in %s", kv, p, strings.Join(parts[:i], "."))
			}
		default:
			return fmt.Errorf("--set %s: %s is not a mapping", kv, strings.Join(parts[:i], "."))
		}
		cur = next
	}
	d.sets = append(d.sets, kv)
	return nil
}

// mark gives a subtree an override's line.
func mark(n *yaml.Node, line int) {
	n.Line, n.Column = line, 0
	for _, c := range n.Content {
		mark(c, line)
	}
}

// Clone returns an independent copy.
func (d *Doc) Clone() *Doc {
	return &Doc{Path: d.Path, root: cloneNode(d.root), sets: slices.Clone(d.sets)}
}

func cloneNode(n *yaml.Node) *yaml.Node {
	if n == nil {
		return nil
	}
	c := *n
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, k := range n.Content {
		c.Content[i] = cloneNode(k)
	}
	c.Alias = cloneNode(n.Alias)
	return &c
}

// YAML is the document (with its overrides) without its comments and the
// top-level keys named in drop.
func (d *Doc) YAML(drop ...string) ([]byte, error) {
	m := cloneNode(d.root)
	m.Content = nil
	for i := 0; i+1 < len(d.root.Content); i += 2 {
		if !slices.Contains(drop, d.root.Content[i].Value) {
			m.Content = append(m.Content, cloneNode(d.root.Content[i]), cloneNode(d.root.Content[i+1]))
		}
	}
	uncomment(m)
	return yaml.Marshal(m)
}

func uncomment(n *yaml.Node) {
	n.HeadComment, n.LineComment, n.FootComment = "", "", ""
	for _, c := range n.Content {
		uncomment(c)
	}
}

// Child is the value of key in mapping m (nil when m is no mapping or
// lacks the key).
func Child(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for j := 0; j+1 < len(m.Content); j += 2 {
		if m.Content[j].Value == key {
			return m.Content[j+1]
		}
	}
	return nil
}

// valueOf is the scalar value of key in mapping m ("" if none).
func valueOf(m *yaml.Node, key string) string {
	if v := Child(m, key); v != nil && v.Kind == yaml.ScalarNode {
		return v.Value
	}
	return ""
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
