package catalog

import "strings"

// AtKey prefixes err with the scenario or manifest key it concerns. A package prefix
// the error already starts with ("model: " from the catalogue) is dropped,
// so no message reads "model: model: ..." or "hardware: model: ...".
func AtKey(key string, err error) error { return keyError{key, err} }

type keyError struct {
	key string
	err error
}

func (e keyError) Error() string {
	return e.key + ": " + strings.TrimPrefix(e.err.Error(), "model: ")
}

func (e keyError) Unwrap() error { return e.err }
