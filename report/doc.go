// Package report renders one self-contained HTML page from steplab's
// inputs and outputs: a dataset summary, the fit quality of a model, a step
// replay and what-if results, whichever apply. Figures are inlined as SVG
// (or as base64 PNG when an SVG would be too large), the CSS is inline, and
// the page loads nothing from the network, so it can be mailed, attached to
// a review or archived by CI. Inputs are not trusted: SVG is sanitised to an
// allow-list (sanitize.go), every string is escaped by html/template, and a
// Content-Security-Policy lets no script run.
//
// Inputs are paths, recognised by what they contain (Detect):
//
//	DIR with audit.json              what-if output (steplab whatif -o DIR)
//	DIR with sweep.json              sweep output (steplab sweep -o DIR)
//	DIR with summary.json            step replay output (steplab replay steps -o DIR)
//	DIR with manifest.json           dataset
//	FILE.json (a model artifact)     the model whose fit quality is shown
//
// The checks run in that order: a what-if or replay output is also a
// dataset (it has a manifest), and is reported as what it is. With a model
// (Options.Model, or a model artifact among the inputs, or else the model
// file a replay names, when it exists) the report evaluates it on every
// dataset given, each on its own: the error tables and the
// predicted-vs-measured and error-CDF figures.
package report
