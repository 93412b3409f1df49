// Package features owns the mapping from an engine step to the
// fpm.Features a forward-pass model prices. There is one definition, used
// by everything that computes features: the simulator and the capture
// record a step through Batch and read its features with Of; fit and replay
// read a steps row with Of, after Complete has filled from the step's
// step_requests rows the columns an older dataset did not record.
//
//	var b features.Batch
//	b.Prefill(chunk, computed, promptLen) // per prefill request
//	b.Decode(computed)                    // per decode request
//	b.New(tokens)                         // per request shipped in full
//	b.Fill(&step)                         // the steps-table composition columns
//	f := features.Of(&step)               // fpm.Features
//
// # From a steps row
//
// Of maps the columns as Definitions documents. Columns added after the
// first release (max_decode_kv_tokens, sum_prefill_attn, new_req_tokens,
// cuda_graph_size) read as Unknown from an older file; Of then derives what
// the row still determines and marks the rest NaN (fpm.Features.Unknown
// names them):
//
//   - max_decode_kv_tokens: sum_decode_kv_tokens when one request decodes,
//     the mean when var_decode_kv_tokens is 0; otherwise unknown.
//   - sum_prefill_attn: T·K/n + (n·var_prefill_length + T²/n)/2, exact for
//     one prefill request (T tokens after K cached, n requests).
//   - new_req_tokens: payload_new_bytes / PayloadBytesPerToken.
//   - cuda_graph_size: num_decode_requests + padded_tokens on a decode step.
//
// With step_requests, Complete (or RequestJoin, streaming) computes every
// unknown column exactly from the per-request rows, so a dataset written
// before these columns existed maps to the features the simulator priced.
// A recorded column always wins over the rows.
package features
