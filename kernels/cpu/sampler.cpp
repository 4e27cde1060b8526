// The CPU reference sampler: kernels/sampler.h's rules written as plainly as possible (rule P on
// a copy of the row, a full sort of the candidates, sequential sums), for the CUDA sampler to
// be checked against.
#include "kernels/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/cpu/cpu_util.h"
#include "kernels/philox.h"
#include "kernels/sampler_math.h"

namespace nanovllm::kernels::cpu {

namespace {

struct RowParams {
  float temperature;
  int32_t top_k;
  float top_p, min_p;
  uint64_t seed;
  int32_t position;  // of the token being sampled
};

int32_t argmax(const float* logits, int64_t vocab) {
  int64_t best = 0;
  for (int64_t v = 1; v < vocab; ++v)
    if (logits[v] > logits[best]) best = v;  // strict: the lowest index wins ties
  return static_cast<int32_t>(best);
}

// The candidates after top-k, top-p and min-p, in (l desc, id asc) order (min-p's survivors
// in any order: the draw does not depend on it). Sorts only what the rules look at: the top
// k, or the tokens that carry top-p mass.
std::vector<int32_t> candidates(const std::vector<float>& l, const RowParams& p) {
  const int64_t vocab = static_cast<int64_t>(l.size());
  // (l desc, id asc) as one key: a strict total order even with NaN logits.
  const auto before = [&](int32_t a, int32_t b) {
    return candidate_key(l[a], a) > candidate_key(l[b], b);
  };
  std::vector<int32_t> ids(static_cast<size_t>(vocab));  // [V]
  std::iota(ids.begin(), ids.end(), 0);
  const bool use_k = p.top_k > 0 && p.top_k < vocab;
  if (use_k) {
    std::nth_element(ids.begin(), ids.begin() + p.top_k - 1, ids.end(), before);
    ids.resize(static_cast<size_t>(p.top_k));
  }
  const float l_max = l[*std::min_element(ids.begin(), ids.end(), before)];
  if (p.top_p < 1.0f) {
    if (!use_k) {  // a zero-mass token comes after every token with mass: never before the cut
      const int32_t first = *std::min_element(ids.begin(), ids.end(), before);
      std::erase_if(ids, [&](int32_t v) { return v != first && !(l[v] - l_max > kZeroMassBelow); });
    }
    std::sort(ids.begin(), ids.end(), before);
    uint64_t total = 0;
    for (int32_t v : ids) total += sampler_mass(l[v] - l_max);
    const uint64_t target = top_p_target(p.top_p, total);
    uint64_t mass = 0;
    size_t n = 0;
    while (n < ids.size()) {
      mass += sampler_mass(l[ids[n]] - l_max);
      ++n;
      if (mass >= target) break;
    }
    ids.resize(n);
  }
  if (p.min_p > 0.0f)  // the first token has sampler_exp(0) == 1 >= min_p: it always stays
    std::erase_if(ids, [&](int32_t v) { return !(sampler_exp(l[v] - l_max) >= p.min_p); });
  return ids;
}

int32_t sample_row(const float* logits, int64_t vocab, const RowParams& p) {
  if (p.temperature == 0.0f) return argmax(logits, vocab);
  const float t = effective_temperature(p.temperature);
  std::vector<float> l(static_cast<size_t>(vocab));  // [V] scaled logits
  for (int64_t v = 0; v < vocab; ++v) l[v] = scaled_logit(logits[v], t);
  const bool filtered = (p.top_k > 0 && p.top_k < vocab) || p.top_p < 1.0f || p.min_p > 0.0f;
  std::vector<int32_t> kept;
  if (filtered) {
    kept = candidates(l, p);
  } else {
    kept.resize(static_cast<size_t>(vocab));
    std::iota(kept.begin(), kept.end(), 0);
  }
  int32_t best = -1;
  float best_score = -INFINITY;
  for (int32_t v : kept) {
    const float score = l[v] + gumbel_from_bits(sampler_random_bits(p.seed, v, p.position));
    if (best < 0 || score > best_score || (score == best_score && v < best)) {
      best = v;
      best_score = score;
    }
  }
  return best;
}

// Rule P's per-slot inputs (all off where the batch does not give them).
struct SlotProcessing {
  bool penalized = false;
  float repetition = 1.0f, presence = 0.0f, frequency = 0.0f;
  int32_t bias_count = 0;
  int32_t min_tokens_position = 0;
};

SlotProcessing slot_processing(const SamplingSlotParams& p, int32_t s) {
  SlotProcessing sp;
  if (p.repetition_penalty.data != nullptr) {
    sp.repetition = *elem<float>(p.repetition_penalty, s);
    sp.presence = *elem<float>(p.presence_penalty, s);
    sp.frequency = *elem<float>(p.frequency_penalty, s);
    sp.penalized = penalties_active(sp.repetition, sp.presence, sp.frequency);
  }
  if (p.logit_bias_count.data != nullptr)  // entries past the row's width do not exist
    sp.bias_count = static_cast<int32_t>(
        std::min<int64_t>(*elem<int32_t>(p.logit_bias_count, s), p.logit_bias_ids.size(1)));
  if (p.min_tokens_position.data != nullptr)
    sp.min_tokens_position = *elem<int32_t>(p.min_tokens_position, s);
  return sp;
}

// Rule P: row r's processed logits into out [V], from the raw row (never written).
void process_row(const SamplingBatch& b, int64_t r, int32_t s, const SlotProcessing& sp,
                 float* out) {
  const SamplingSlotParams& p = b.params;
  const int64_t vocab = b.logits.size(1);
  const float* x = elem<float>(b.logits, r);
  const auto state = [&](int64_t v) -> uint32_t {  // never read for an unpenalized slot
    return sp.penalized ? *elem<uint16_t>(p.token_state, s, v) : 0u;
  };
  const auto penalized = [&](float logit, int64_t v) {
    return penalized_logit(logit, state(v), sp.repetition, sp.presence, sp.frequency);
  };
  for (int64_t v = 0; v < vocab; ++v) out[v] = sp.penalized ? penalized(x[v], v) : x[v];
  for (int32_t j = 0; j < sp.bias_count; ++j) {  // the bias goes in before the penalties
    const int32_t id = *elem<int32_t>(p.logit_bias_ids, s, j);
    if (id >= 0 && id < vocab)
      out[id] = penalized(x[id] + *elem<float>(p.logit_bias_values, s, j), id);
  }
  if (!(*elem<int32_t>(b.positions, r) + 1 < sp.min_tokens_position)) return;
  const int64_t width = p.min_tokens_masked_ids.size(1);
  for (int64_t j = 0; j < width; ++j) {
    const int32_t id = *elem<int32_t>(p.min_tokens_masked_ids, s, j);
    if (id >= 0 && id < vocab) out[id] = -INFINITY;  // -1 pads the row
  }
}

void check_batch(const SamplingBatch& b) {
  CHECK(b.logits.dtype == DType::kF32 && b.logits.ndim == 2 && b.logits.stride[1] == 1);
  CHECK(b.slots.dtype == DType::kI32 && b.positions.dtype == DType::kI32);
  CHECK(b.out_tokens.dtype == DType::kI32);
  const int64_t rows = b.logits.size(0), vocab = b.logits.size(1);
  CHECK_GT(vocab, 0);
  CHECK_EQ(b.slots.size(0), rows);
  CHECK_EQ(b.positions.size(0), rows);
  CHECK_EQ(b.out_tokens.size(0), rows);
  check_slot_params(b.params, vocab);
  if (b.processed.data != nullptr) {
    CHECK(b.processed.dtype == DType::kF32 && b.processed.ndim == 2);
    CHECK(b.processed.size(0) == rows && b.processed.size(1) == vocab);
    CHECK(b.processed.stride[0] == vocab && b.processed.stride[1] == 1);
  }
  const SampledLogprobs& lp = b.logprobs;
  const bool logprobs = lp.logprob.data != nullptr;
  CHECK_MSG(logprobs == (lp.rank.data != nullptr) && logprobs == (lp.top_ids.data != nullptr) &&
                logprobs == (lp.top_logprobs.data != nullptr),
            "sampler logprobs: all four outputs or none");
  CHECK_MSG(!logprobs || b.params.num_logprobs.data != nullptr,
            "sampler logprobs need params.num_logprobs");
}

}  // namespace

void sample(const SamplingBatch& b) {
  check_batch(b);
  const int64_t rows = b.logits.size(0), vocab = b.logits.size(1);
  const int64_t num_slots = b.params.temperatures.size(0);
  std::vector<float> local_row;  // [V] rule P's row when the batch gives no processed buffer
  // Every row is processed and drawn before any token_state changes: rows sharing a slot all
  // see the state from before the call, as the CUDA kernels do.
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t s = *elem<int32_t>(b.slots, r);
    int32_t token = 0;
    if (s >= 0) {
      CHECK_LT(s, num_slots);
      const RowParams p{*elem<float>(b.params.temperatures, s),
                        *elem<int32_t>(b.params.top_k, s),
                        *elem<float>(b.params.top_p, s),
                        *elem<float>(b.params.min_p, s),
                        static_cast<uint64_t>(*elem<int64_t>(b.params.seeds, s)),
                        *elem<int32_t>(b.positions, r) + 1};
      const SlotProcessing sp = slot_processing(b.params, s);
      const float* row = elem<float>(b.logits, r);
      if (row_is_processed(sp.penalized, sp.bias_count, sp.min_tokens_position,
                           *elem<int32_t>(b.positions, r))) {
        float* out = b.processed.data ? elem<float>(b.processed, r) : nullptr;
        if (out == nullptr) {
          local_row.resize(static_cast<size_t>(vocab));
          out = local_row.data();
        }
        process_row(b, r, s, sp, out);
        row = out;
      }
      token = sample_row(row, vocab, p);
      if (b.last_tokens.data != nullptr) *elem<int32_t>(b.last_tokens, s) = token;
    }
    *elem<int32_t>(b.out_tokens, r) = token;
    if (b.row_passes.data != nullptr) *elem<int32_t>(b.row_passes, r) = s >= 0 ? 1 : 0;
  }
  if (b.params.token_state.data != nullptr)
    for (int64_t r = 0; r < rows; ++r) {
      const int32_t s = *elem<int32_t>(b.slots, r);
      if (s < 0 || !slot_processing(b.params, s).penalized) continue;
      uint16_t* state = elem<uint16_t>(b.params.token_state, s, *elem<int32_t>(b.out_tokens, r));
      *state = static_cast<uint16_t>(token_state_after_sample(*state));
    }
  if (b.logprobs.logprob.data != nullptr)
    token_logprobs({b.logits, b.out_tokens, b.params.num_logprobs, b.slots, b.logprobs.logprob,
                    b.logprobs.rank, b.logprobs.top_ids, b.logprobs.top_logprobs});
}

void scatter_token_state(const TensorView& token_state, const TensorView& entries) {
  CHECK(token_state.dtype == DType::kU16 && token_state.ndim == 2);
  CHECK(entries.dtype == DType::kI32 && entries.ndim == 2 && entries.size(1) == 3);
  for (int64_t e = 0; e < entries.size(0); ++e) {
    const int32_t s = *elem<int32_t>(entries, e, 0), v = *elem<int32_t>(entries, e, 1);
    const int32_t state = *elem<int32_t>(entries, e, 2);
    CHECK(s >= 0 && s < token_state.size(0) && v >= 0 && v < token_state.size(1));
    CHECK(state >= 0 && state <= 0xffff);
    *elem<uint16_t>(token_state, s, v) = static_cast<uint16_t>(state);
  }
}

}  // namespace nanovllm::kernels::cpu
