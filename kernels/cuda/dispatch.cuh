// Runtime values become template parameters here, in one switch each (FlashInfer's
// DISPATCH_HEAD_DIM idea): a kernel is instantiated only for the head dims we support, and
// any other value fails loudly instead of silently running a wrong instantiation.
#pragma once

#include "kernels/check.h"

// Usage: DISPATCH_HEAD_DIM(d, HEAD_DIM, { launch<HEAD_DIM>(...); });
#define DISPATCH_HEAD_DIM(head_dim, HEAD_DIM, ...)                                          \
  do {                                                                                      \
    switch (head_dim) {                                                                     \
      case 64: {                                                                            \
        constexpr int HEAD_DIM = 64;                                                        \
        __VA_ARGS__                                                                         \
        break;                                                                              \
      }                                                                                     \
      case 128: {                                                                           \
        constexpr int HEAD_DIM = 128;                                                       \
        __VA_ARGS__                                                                         \
        break;                                                                              \
      }                                                                                     \
      default:                                                                              \
        CHECK_MSG(false, "unsupported head_dim " << (head_dim) << " (supported: 64, 128)"); \
    }                                                                                       \
  } while (0)

// Usage: DISPATCH_BOOL(cond, FLAG, { launch<FLAG>(...); });
#define DISPATCH_BOOL(cond, FLAG, ...) \
  do {                                 \
    if (cond) {                        \
      constexpr bool FLAG = true;      \
      __VA_ARGS__                      \
    } else {                           \
      constexpr bool FLAG = false;     \
      __VA_ARGS__                      \
    }                                  \
  } while (0)
