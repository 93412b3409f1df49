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
//	art := model.LinearArtifact(res.Model)                 // then fill Training and Metrics, and Save
//
// Selection never fits scaffolding rows (warm-ups, the admission steps a
// steady-state benchmark throws away): those are the contaminated
// measurements of DESIGN.md §1. Package features maps each steps row to a
// model.Features (features.Of; features.Definitions documents every term);
// LoadDatasets first completes, from step_requests, the feature columns a
// dataset written before they existed lacks.
//
// # The linear model and its solvers
//
// model.Linear prices a step as Σ coef·term(features) over named terms
// (model.DefaultTerms: a fixed cost, prefill tokens, prefill KV reads,
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
// not vary; Options.Degenerate = DegenerateDrop leaves such terms out of the
// model instead, and Result.Dropped says so), ErrRankDeficient (names the
// collinear terms, e.g. padded_batch and decode_requests on an eager-mode
// trace).
//
// # Uncertainty
//
// Bootstrap resamples the rows with replacement (the pairs bootstrap, which
// respects noise that grows with step size) and refits; percentile
// intervals of the replicates become Linear.CoefLo/CoefHi. On synthetic
// data with known coefficients the 95% intervals cover the truth about 93%
// of the time over 100 seeded repetitions (TestBootstrapCoverage).
// Prediction intervals come from the model's relative residual quantiles
// (model.ResidualQuantiles) or, including coefficient uncertainty, from
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
// # The grid model
//
// BuildGrid builds a model.Grid from benchmark rows: the median of the
// repeats at each (batch, KV per request) and prefill-token coordinate.
// model.Grid documents its interpolation, its behaviour outside the
// benchmarked domain, and how it composes mixed steps.
package fit
