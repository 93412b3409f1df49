// Package embedded ships small public traces inside the steplab binary so
// that the default workflow (and the tests and benchmarks of other packages)
// runs without network access or external files.
//
// Each dataset is a folder of verbatim source files with their licence and an
// ATTRIBUTION.md. Names() lists them; Open returns a dataset's main file;
// OpenFile any other file of its folder. The importers accept a source
// "embedded:NAME" (see Prefix) wherever they accept a path.
package embedded
