/*
 * tensorcomm's reduction kernels, compiled to PTX by scripts/build-kernels.sh
 * (the result, reduce.ptx, is committed). One kernel per op and dtype:
 * tc_reduce_<op>_<dtype>(out, inputs, count, n) sets out[i] to the reduction
 * of inputs[0][i] .. inputs[count-1][i] for every i < n, with a grid-stride
 * loop so any launch size covers n. `out` may be one of the inputs.
 */
#include "reduce-ops.h"

#define TC_DEFINE_REDUCE_KERNEL(op, OP, dtype, TYPE)                                                   \
  extern "C" __global__ void tc_reduce_##op##_##dtype(TYPE::storage *out,                             \
                                                      const TYPE::storage *const *inputs,             \
                                                      unsigned long long count, unsigned long long n) { \
    if (count == 0) return;                                                                            \
    const uint64_t stride = static_cast<uint64_t>(blockDim.x) * gridDim.x;                             \
    for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) \
      out[i] = tc::reduce_element<OP, TYPE>(inputs, count, i);                                          \
  }

TC_REDUCE_KERNELS(TC_DEFINE_REDUCE_KERNEL)
