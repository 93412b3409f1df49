// Package yamldoc reads YAML documents under a budget. YAML aliases let a
// few hundred bytes stand for billions of nodes (nine anchors of nine
// references each: 9⁹); decoding such a document into Go values, or
// walking its node tree through the aliases, takes all the memory there
// is. Every document steplab reads goes through Check first, which counts
// the nodes the document stands for with its aliases expanded, without
// expanding them, and refuses one over MaxNodes or deeper than MaxDepth.
package yamldoc

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"go.yaml.in/yaml/v3"
)

const (
	// MaxNodes bounds the nodes a file stands for, aliases expanded: a
	// hundred times the largest file steplab ships (checks.yaml, about
	// 3,000 nodes), and about 20 MB decoded.
	MaxNodes = 100_000
	// MaxDepth bounds the nesting, aliases expanded.
	MaxDepth = 100
)

// Check parses every document of b and refuses a stream whose aliases
// expand beyond MaxNodes nodes or MaxDepth levels. It costs one parse:
// time and memory linear in len(b).
func Check(b []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	c := counter{memo: map[*yaml.Node]size{}}
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
		if err := c.add(&doc); err != nil {
			return err
		}
	}
}

// Parse checks b and returns its first document as a node tree (Kind 0
// when b holds none).
func Parse(b []byte) (yaml.Node, error) {
	var root yaml.Node
	if err := Check(b); err != nil {
		return root, err
	}
	if err := yaml.Unmarshal(b, &root); err != nil {
		return yaml.Node{}, err
	}
	return root, nil
}

// Unmarshal is yaml.Unmarshal after Check.
func Unmarshal(b []byte, v any) error {
	if err := Check(b); err != nil {
		return err
	}
	return yaml.Unmarshal(b, v)
}

// size is a subtree's expanded node count and depth.
type size struct{ nodes, depth int64 }

type counter struct {
	total int64
	memo  map[*yaml.Node]size
}

func (c *counter) add(doc *yaml.Node) error {
	s, err := c.size(doc, map[*yaml.Node]bool{})
	if err != nil {
		return err
	}
	if c.total += s.nodes; c.total > MaxNodes {
		return budgetError(doc, "nodes", MaxNodes)
	}
	return nil
}

// size is memoised per node, so an anchor referenced many times is
// counted once however large its expansion: Check stays linear in the
// file.
func (c *counter) size(n *yaml.Node, open map[*yaml.Node]bool) (size, error) {
	if s, ok := c.memo[n]; ok {
		return s, nil
	}
	if open[n] {
		return size{}, fmt.Errorf("line %d: an alias refers to a node that contains it", n.Line)
	}
	open[n] = true
	defer delete(open, n)
	kids := n.Content
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		kids = []*yaml.Node{n.Alias}
	}
	s := size{nodes: 1, depth: 1}
	for _, k := range kids {
		ks, err := c.size(k, open)
		if err != nil {
			return size{}, err
		}
		s.nodes += ks.nodes
		s.depth = max(s.depth, ks.depth+1)
		if s.nodes > MaxNodes {
			return size{}, budgetError(n, "nodes", MaxNodes)
		}
		if s.depth > MaxDepth {
			return size{}, budgetError(n, "levels", MaxDepth)
		}
	}
	c.memo[n] = s
	return s, nil
}

func budgetError(n *yaml.Node, what string, limit int) error {
	return fmt.Errorf("line %d: the document's aliases expand to more than %d %s (an alias bomb?): refused", n.Line, limit, what)
}
