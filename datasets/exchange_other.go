//go:build !linux

package datasets

import "errors"

// exchange is not available here: ReplaceDir removes, then renames.
func exchange(a, b string) error { return errors.New("no atomic exchange") }
