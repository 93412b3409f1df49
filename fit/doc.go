// Package fit turns recorded steps into forward-pass models and says how
// good they are.
//
// # From steps to a model
//
// A fit starts from rows of steps.parquet (datasets.Step):
//
//	steps, _ := fit.Select(all, fit.Selection{})          // measured + production, valid rows
//	data, _ := fit.DataFromSteps(steps, fit.TargetAuto)    // features and timings (ns)
//	res, _ := fit.Linear(data, fit.Options{Method: fit.MethodHuberNN, Bootstrap: 200, Seed: 1})
//	art := fpm.LinearArtifact(res.Model)                 // then fill Training and Metrics, and Save
//
// Selection never fits scaffolding rows (warm-ups, the admission steps a
// steady-state benchmark throws away): those are the contaminated
// measurements of docs/architecture.md#why-it-exists. Package features maps each steps row to a
// fpm.Features (features.Of; features.Definitions documents every term);
// LoadDatasets first completes, from step_requests, the feature columns a
// dataset written before they existed lacks.
//
// # The linear model and its solvers
//
// fpm.Linear prices a step as Σ coef·term(features) over named terms
// (fpm.DefaultTerms: a fixed cost, prefill tokens, prefill KV reads,
// prefill attention, decode requests, decode KV reads, admitted requests
// and their prompt tokens). Costs cannot be negative, so the default
// solver is non-negative least squares:
//
//   - MethodOLS: ordinary least squares by QR (gonum mat.QR). A reference;
//     coefficients may come out negative.
//   - MethodNNLS: Lawson–Hanson active-set NNLS. The rows are streamed once
//     into the p×p Gram matrix XᵀX and the vector Xᵀy (NewGram); the active
//     set then works on those alone, so 1M steps × 8 terms fit in well under
//     a second on one core (BenchmarkNNLS1M8).
//   - MethodHuber, MethodHuberNN: Huber M-estimation by iteratively
//     reweighted least squares with a MAD residual scale. A step that took
//     60 ms longer because of a host hiccup pulls on a least-squares fit in
//     proportion to the square of its error; on a Huber fit, in proportion
//     to the error itself, and only beyond K = 1.345 robust standard
//     deviations. Use it on production traces.
//
// Options.Relative weights rows by 1/y², so the fit minimises relative
// error: steps span three orders of magnitude, and a 1 ms miss matters more
// on a 2 ms decode step than on a 300 ms prefill.
//
// Every solver scales the columns to unit norm before solving (the terms
// range from 1 to 10⁹) and checks the rank of the scaled Gram matrix.
//
// # Degenerate data
//
// A fit never returns a model fitted to data that cannot support it. Each
// failure wraps a sentinel error (errors.Is) and names the term or row:
// ErrEmptySelection, ErrTooFewRows (fewer than max(5, 2×terms) rows),
// ErrBadTarget (a NaN, infinite, negative or zero timing: row and step_id),
// ErrBadFeature, ErrZeroColumn and ErrConstantColumn (a term the data does
// not vary), ErrRankDeficient (names the collinear terms, e.g. padded_batch
// and decode_requests on an eager-mode trace).
//
// Terms the data cannot identify — zero or constant on every row, a linear
// combination of terms earlier in the basis, or left Unknown by the source
// (Data.Unrecorded) — are a property of the data, not a mistake, when the
// basis is the default one: a decode grid has no prefill KV reads, and on
// admission-step decode points new_requests equals decode_requests. So
// Options.Degenerate (DegenerateAuto, the zero value) drops them from the
// default basis and lists them in Result.Dropped (the fit report's
// dropped_terms, the artifact's notes), and refuses the fit when the caller
// named the terms; DegenerateDrop and DegenerateError force either.
//
// # Uncertainty
//
// Bootstrap resamples the rows with replacement (the pairs bootstrap, which
// respects noise that grows with step size) and refits; percentile
// intervals of the replicates become Linear.CoefLo/CoefHi. On synthetic
// data with known coefficients the 95% intervals cover the truth about 93%
// of the time over 100 seeded repetitions (TestBootstrapCoverage).
// Prediction intervals come from the model's relative residual quantiles
// (fpm.ResidualQuantiles) or, including coefficient uncertainty, from
// BootstrapResult.PredictInterval. All randomness is seeded.
//
// # Evaluation
//
// Evaluate and EvaluatePredictions report MAPE, median/p90/p99 absolute
// percentage error, RMSE, R² and mean bias, overall, per step kind and per
// batch-size bucket (BatchBuckets: 1, 2-4, …, >512), with the worst steps
// by step_id. CrossValidate runs seeded k-fold cross-validation (each row
// predicted by the model that did not see it); Split holds rows out.
//
// # The default recipe
//
// FitRecipe fits a fpm.Recipe: per step kind (DefaultKindSpecs), a table
// over the kind's benchmark coordinates (BuildTable: the grid's lines, a
// coordinate written NAME=VALUE a condition on its rows) interpolating
// inside its measured hull, and the kind's linear form outside it, split
// into regimes along a coordinate where held-out error on the kind's rows
// says so (KindSpec.Regimes, RegimeZ: the decode kind by batch size); mixed
// steps composed from prefill and decode unless measured mixed steps are
// priced better by a form of their own. ExpertsKindSpecs add to the decode
// form the experts a mixture of experts' tokens reach
// (fpm.TermExpertsReached, written with the manifests' routing:
// Data.Experts), which a dense model's leaves out:
//
//	res, _ := fit.FitRecipe(data, fit.RecipeOptions{Bootstrap: 200, Seed: 1})
//	p := res.Model.Price(features, 0.9) // p.Ns, p.Lo, p.Hi, p.Kind, p.Region
//
// Its intervals combine the bootstrap (coefficient covariance, node
// repeats) with held-out relative residuals per kind and region (each grid
// line left out in turn; cross-validation off the grid). CalibrateRecipe
// replaces those residuals by the recipe's on a calibration split of the
// traffic to price; Selection.Half and HalfOf split a dataset's rows into
// two disjoint halves to calibrate on one and test on the other.
// EvaluateIntervals reports the coverage: the share of steps inside their
// interval, per kind and region.
//
// # The bounds file
//
// CheckBounds runs a bounds file (LoadBounds: YAML, one check per model and
// dataset pair, a gate and a target per metric and scope) and returns a
// BoundsReport with one CheckResult per bound, its JUnit form and its
// error (wrapping ErrCheckFailed) when a bound is breached.
//
// # The grid model
//
// BuildGrid builds a fpm.Grid from benchmark rows: the median of the
// repeats at each (batch, KV per request) and prefill-token coordinate.
// fpm.Grid documents its interpolation, its behaviour outside the
// benchmarked domain, and how it composes mixed steps.
package fit
