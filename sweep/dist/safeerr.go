package dist

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"syscall"
)

// SafeError is the message of a failed point that goes on the wire (dead
// letters, the server's termination reason): the point, the scenario key
// the error names and the class of the error, never the error's text,
// which may quote a file the task named (the worker's log has it in
// full). Errors of the worker's own making (limits, refusals) pass as
// they are.
func SafeError(t *Task, err error) string {
	var lim *limitError
	var ref *refusal
	switch {
	case errors.As(err, &lim):
		return lim.Error()
	case errors.As(err, &ref):
		return "refused: " + ref.Error()
	}
	msg := t.Describe() + ": " + errorClass(err)
	if k := errorKey(t, err.Error()); k != "" {
		msg += " (key " + k + ")"
	}
	return msg + "; the worker's log has the details"
}

// errorClass names the kind of an error without its text.
func errorClass(err error) string {
	var pe *fs.PathError
	var errno syscall.Errno
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch s := err.Error(); {
	case errors.As(err, &pe):
		return fmt.Sprintf("cannot %s a file it names (%v)", pe.Op, pe.Err)
	case errors.As(err, &errno):
		return fmt.Sprintf("system error (%v)", errno)
	case errors.As(err, &se), errors.As(err, &te), strings.Contains(s, "yaml: "), strings.Contains(s, "json: "):
		return "a document it reads does not parse"
	case strings.Contains(s, "panic:"):
		return "the simulator panicked"
	default:
		return "invalid point"
	}
}

// errorKey is the scenario key of the task (varied, set, or a section of
// one) that the error text names last (the innermost cause; the longest
// where two end there). A set value the text quotes (a file path) names
// its key.
func errorKey(t *Task, text string) string {
	type cand struct{ key, value string }
	var keys []cand
	for _, v := range t.Spec.Vary {
		keys = append(keys, cand{key: v.Key})
	}
	for _, s := range t.Spec.Sets {
		k, v, _ := strings.Cut(s, "=")
		keys = append(keys, cand{key: k})
		if len(v) >= 3 {
			keys = append(keys, cand{key: k, value: v})
		}
	}
	for _, c := range slices.Clone(keys) {
		for i := strings.LastIndexByte(c.key, '.'); i > 0 && c.value == ""; i = strings.LastIndexByte(c.key[:i], '.') {
			keys = append(keys, cand{key: c.key[:i]})
		}
	}
	best, at := "", -1
	for _, c := range keys {
		i := lastKey(text, c.key)
		if c.value != "" {
			i = strings.LastIndex(text, c.value)
		}
		if i > at || (i == at && i >= 0 && len(c.key) > len(best)) {
			best, at = c.key, i
		}
	}
	return best
}

// lastKey is the index of the last whole-word occurrence of key in text
// (-1: none).
func lastKey(text, key string) int {
	word := func(c byte) bool {
		return c == '_' || c == '.' || c == '-' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
	}
	for end := len(text); end > 0; {
		j := strings.LastIndex(text[:end], key)
		if j < 0 {
			return -1
		}
		e := j + len(key)
		if (j == 0 || !word(text[j-1])) && (e == len(text) || !word(text[e])) {
			return j
		}
		end = j + len(key) - 1
	}
	return -1
}
