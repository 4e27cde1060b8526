// The host side of the decode attention's launch: the checked kernel arguments of a call
// (decode_attention_args.cuh).
#include <climits>

#include "kernels/cuda/decode_attention_args.cuh"

namespace nanovllm::kernels::cuda::decode {
namespace {

void check_params(const DecodeAttentionParams& p) {
  check_paged_operands(p.out, p.q, p.kv, "decode out", "decode q");
  check_cuda_tensor(p.context_lens, DType::kI32, "context_lens");
  const int64_t batch = p.q.size(0);
  CHECK_EQ(p.out.size(0), batch);
  CHECK_EQ(p.q.stride[2], 1);
  CHECK_EQ(p.context_lens.numel(), batch);
  CHECK_EQ(p.kv.block_tables.size(0), batch);
  // cp.async moves 16-byte pieces of cache rows.
  CHECK(aligned16(p.kv.k_cache.data) && aligned16(p.kv.v_cache.data));
}

}  // namespace

DecodeArgs make_args(const DecodeAttentionParams& p) {
  check_params(p);
  const int64_t batch = p.q.size(0);
  CHECK_LE(batch, INT_MAX);
  DecodeArgs a{paged_attention_args(p.out, p.q, p.kv, p.scale)};
  a.context_lens = p.context_lens.ptr<int32_t>();
  a.batch = static_cast<int>(batch);
  CHECK_GT(a.block_size, 0);
  a.block_shift = -1;
  if ((a.block_size & (a.block_size - 1)) == 0) {
    a.block_shift = 0;
    while ((1 << a.block_shift) < a.block_size) ++a.block_shift;
  }
  return a;
}

}  // namespace nanovllm::kernels::cuda::decode
