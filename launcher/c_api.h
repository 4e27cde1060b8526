/* The engine as a C library (libnanovllm.so) for the Python package (python/nanovllm), or any
 * other host language: rank 0 runs in the calling process; under tensor parallelism ranks
 * 1..N-1 are nanovllm-worker processes it spawns (never a fork of the host), joined through a
 * shared-memory segment as nanovllm-launch's ranks are. A C ABI with JSON text in and out:
 * no compiler or Python version is baked into it, so one build serves any Python 3.
 *
 * Strings returned are malloc'd, NUL-terminated UTF-8: free them with nv_free. A call that
 * fails returns NULL (or -1) and sets *error to a JSON object {"type": "TypeError" |
 * "ValueError" | "RuntimeError" | "WorkerDied", "message": "..."} (free it with nv_free).
 * One engine must not be used from two threads at once. */
#pragma once

#include <stdint.h>

/* The library exports these names only. */
#define NV_API __attribute__((visibility("default")))

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nv_engine nv_engine;

/* Loads the model and starts the workers. `options_json`: an object of engine keywords
 * (nano-vllm's and vLLM's names: "model" (required), "tensor_parallel_size", "enforce_eager",
 * "max_num_batched_tokens", "max_num_seqs", "max_model_len", "gpu_memory_utilization",
 * "kvcache_block_size" or "block_size", "num_kvcache_blocks", "enable_prefix_caching",
 * "enable_chunked_prefill", "async_scheduling", "seed", "device" ("cuda" | "cpu"),
 * "disable_custom_all_reduce", "disable_shard_sampling", "log_level", "worker_path" (the
 * nanovllm-worker binary; default: beside this library)). An unknown keyword is a TypeError naming
 * it; a bad value a ValueError naming it. */
NV_API nv_engine* nv_engine_create(const char* options_json, char** error);

/* Stops the workers (EXIT through the ring, then SIGKILL after a grace), removes the
 * segment, frees everything. Safe on NULL and after a failure. */
NV_API void nv_engine_destroy(nv_engine* engine);

/* Tokenizer: JSON array of ids; text; the chat template's text. */
NV_API char* nv_engine_encode(nv_engine* engine, const char* text, char** error);
NV_API char* nv_engine_decode(nv_engine* engine, const char* token_ids_json,
                              int skip_special_tokens, char** error);
NV_API char* nv_engine_apply_chat_template(nv_engine* engine, const char* messages_json,
                                           int add_generation_prompt, int enable_thinking,
                                           char** error);

/* Queues requests: a JSON array, each element a native request object as a prompts.jsonl line
 * holds it ("prompt" | "prompt_token_ids" | "messages", and the sampling fields: max_tokens,
 * temperature, top_p, top_k, min_p, seed, ignore_eos, stop, stop_token_ids, min_tokens, n,
 * logprobs, prompt_logprobs, presence/frequency/repetition_penalty, logit_bias,
 * skip_special_tokens, ...), validated by the engine's own rules. Element i gets the id
 * str(first_index + i). All or nothing: on the first invalid element nothing is queued and
 * *error is a ValueError whose message names the element by its place in this list
 * ("request 3: ..." is requests_json[3]) and its field.
 * Returns the number queued, -1 on error. */
NV_API int64_t nv_engine_add_requests(nv_engine* engine, const char* requests_json,
                                      int64_t first_index, char** error);

/* Runs one engine step. Returns a JSON object {"outputs": [...], "unfinished": N,
 * "prefill_tokens": N, "decode_tokens": N} (the tokens this step computed): each output is a
 * finished completion as a native result line (engine/result_writer.h: "id", "index", "text",
 * "token_ids", "finish_reason", "stop_reason", "prompt_tokens", "completion_tokens",
 * "cached_tokens", logprobs when asked). A dead worker is a WorkerDied error naming its rank; the
 * engine is unusable afterwards. */
NV_API char* nv_engine_step(nv_engine* engine, char** error);

/* Drops every queued and running request (after an interrupted generate), keeping the model. */
NV_API void nv_engine_abort_all(nv_engine* engine);

/* The model's and engine's limits as JSON: {"max_model_len", "max_num_seqs",
 * "num_kvcache_blocks", "block_size", "eos_token_ids", "vocab_size", "tensor_parallel_size",
 * "device", "worker_pids", "segment"}. */
NV_API char* nv_engine_info(nv_engine* engine, char** error);

NV_API void nv_free(void* p);

#ifdef __cplusplus
}
#endif
