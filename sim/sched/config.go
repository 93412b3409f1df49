package sched

import (
	"errors"
	"fmt"
)

// Config holds the engine limits the scheduler obeys. The names follow
// vLLM's engine arguments (max_num_seqs, max_num_batched_tokens, block_size,
// num_gpu_blocks, max_model_len, enable_chunked_prefill,
// enable_prefix_caching, long_prefill_token_threshold).
type Config struct {
	// MaxNumSeqs bounds the number of RUNNING requests (vLLM max_num_seqs).
	MaxNumSeqs int
	// MaxNumBatchedTokens is the token budget of one step
	// (vLLM max_num_batched_tokens).
	MaxNumBatchedTokens int
	// BlockSize is the number of tokens per KV block (a power of two).
	BlockSize int
	// NumGPUBlocks is the number of KV blocks of the device, including
	// vLLM's null block (block 0), which is never handed to a request; so
	// NumGPUBlocks-1 blocks are usable (see Scheduler.KVBlocksTotal).
	NumGPUBlocks int
	// MaxModelLen bounds prompt + output tokens of one request.
	MaxModelLen int
	// ChunkedPrefill lets a prompt be split over several steps. Without it
	// a waiting request whose tokens do not fit the remaining budget stops
	// admission for the step.
	ChunkedPrefill bool
	// PrefixCaching enables block-hash prefix reuse of full KV blocks.
	PrefixCaching bool
	// LongPrefillTokenThreshold caps the tokens one request may schedule in
	// one step (0 = off), for running and waiting requests alike.
	LongPrefillTokenThreshold int
}

// DefaultConfig returns vLLM-like defaults for a mid-size deployment:
// 256 sequences, 8192 batched tokens, block 16, chunked prefill and prefix
// caching on. NumGPUBlocks and MaxModelLen depend on the model and device;
// the defaults here (16384 blocks, 8192 tokens) are placeholders to adjust.
func DefaultConfig() Config {
	return Config{
		MaxNumSeqs:          256,
		MaxNumBatchedTokens: 8192,
		BlockSize:           16,
		NumGPUBlocks:        16384,
		MaxModelLen:         8192,
		ChunkedPrefill:      true,
		PrefixCaching:       true,
	}
}

// Validate refuses configurations the scheduler cannot run, with a message
// that names the engine key (as a scenario or manifest spells it) and a
// value that works.
func (c Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.MaxNumSeqs < 1 {
		add("engine.max_num_seqs is %d: set engine.max_num_seqs=1 or more", c.MaxNumSeqs)
	}
	if c.MaxNumBatchedTokens < 1 {
		add("engine.max_num_batched_tokens is %d: set engine.max_num_batched_tokens=%d or more", c.MaxNumBatchedTokens, max(1, c.MaxNumSeqs))
	} else if c.MaxNumSeqs >= 1 && c.MaxNumBatchedTokens < c.MaxNumSeqs {
		add("engine.max_num_batched_tokens (%d) is smaller than engine.max_num_seqs (%d), which vLLM refuses: set engine.max_num_batched_tokens=%d or engine.max_num_seqs=%d",
			c.MaxNumBatchedTokens, c.MaxNumSeqs, c.MaxNumSeqs, c.MaxNumBatchedTokens)
	}
	if c.BlockSize <= 0 || c.BlockSize&(c.BlockSize-1) != 0 {
		add("engine.block_size is %d: use a power of two such as engine.block_size=16", c.BlockSize)
	}
	if c.NumGPUBlocks < 2 {
		add("engine.num_gpu_blocks is %d: set engine.num_gpu_blocks=2 or more (block 0 is the reserved null block), or 0 to size it from memory", c.NumGPUBlocks)
	}
	if c.MaxModelLen < 2 {
		add("engine.max_model_len is %d: set engine.max_model_len=2 or more (one prompt token and one output token)", c.MaxModelLen)
	}
	if c.LongPrefillTokenThreshold < 0 {
		add("engine.long_prefill_token_threshold is %d: set engine.long_prefill_token_threshold=0 (off) or a positive token count", c.LongPrefillTokenThreshold)
	}
	if c.BlockSize > 0 && c.NumGPUBlocks >= 2 && c.MaxModelLen >= 2 {
		usable := (c.NumGPUBlocks - 1) * c.BlockSize
		if c.MaxModelLen > usable {
			add("engine.max_model_len (%d) exceeds the KV capacity of (engine.num_gpu_blocks-1)*engine.block_size = %d tokens: set engine.max_model_len=%d or engine.num_gpu_blocks=%d",
				c.MaxModelLen, usable, usable, ceilDiv(c.MaxModelLen, c.BlockSize)+1)
		}
	}
	if !c.ChunkedPrefill && c.MaxNumBatchedTokens >= 1 && c.MaxModelLen >= 2 && c.MaxNumBatchedTokens < c.MaxModelLen {
		add("engine.chunked_prefill is off and engine.max_num_batched_tokens (%d) < engine.max_model_len (%d): a long prompt could never be scheduled; set engine.chunked_prefill=true, engine.max_num_batched_tokens=%d or engine.max_model_len=%d",
			c.MaxNumBatchedTokens, c.MaxModelLen, c.MaxModelLen, c.MaxNumBatchedTokens)
	}
	return errors.Join(errs...)
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
