// Package iocount counts the bytes written through an io.Writer: a part's
// size as it is streamed, a report's size, or the size a render would
// have (a nil W discards).
package iocount

import "io"

// Writer passes writes on to W (none when W is nil) and counts the bytes
// it took.
type Writer struct {
	W io.Writer
	N int64
}

func (c *Writer) Write(p []byte) (int, error) {
	if c.W == nil {
		c.N += int64(len(p))
		return len(p), nil
	}
	n, err := c.W.Write(p)
	c.N += int64(n)
	return n, err
}
