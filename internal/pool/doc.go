// Package pool runs independent jobs on a bounded number of goroutines.
// Results are written by index, so the outcome does not depend on which
// goroutine ran which job or in what order: a what-if over repetitions and
// a sweep over points give byte-identical output on one core or many.
package pool
