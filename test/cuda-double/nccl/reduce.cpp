// The reductions of the NCCL double, per ncclDataType_t and ncclRedOp_t, on reduce-ops.h.
#include <cstring>
#include <vector>

#include "comm.h"
#include "reduce-ops.h"

namespace tcdouble {
namespace {

template <tc::Op OP, class TYPE>
void fold(void *out, const void *const *inputs, uint64_t count, size_t n) {
  typedef typename TYPE::storage T;
  T *target = static_cast<T *>(out);
  const T *const *sources = reinterpret_cast<const T *const *>(inputs);
  for (size_t i = 0; i < n; i++) target[i] = tc::reduce_element<OP, TYPE>(sources, count, i);
}

template <class TYPE>
void fold_op(ncclRedOp_t op, void *out, const void *const *inputs, uint64_t count, size_t n) {
  switch (op) {
    case ncclSum: return fold<tc::Op::Sum, TYPE>(out, inputs, count, n);
    case ncclProd: return fold<tc::Op::Prod, TYPE>(out, inputs, count, n);
    case ncclMax: return fold<tc::Op::Max, TYPE>(out, inputs, count, n);
    case ncclMin: return fold<tc::Op::Min, TYPE>(out, inputs, count, n);
    default: return fold<tc::Op::Avg, TYPE>(out, inputs, count, n);
  }
}

/** Each input times its rank's scalar, rounded to the type, as NCCL's premulsum multiplies in the type. */
template <class TYPE>
void premul_sum(const uint64_t *scalars, void *out, const void *const *inputs, uint64_t count, size_t n) {
  typedef typename TYPE::storage T;
  std::vector<std::vector<T>> scaled(count, std::vector<T>(n));
  std::vector<const void *> pointers(count);
  for (uint64_t j = 0; j < count; j++) {
    T scalar;
    memcpy(&scalar, &scalars[j], sizeof scalar);
    const T *source = static_cast<const T *>(inputs[j]);
    for (size_t i = 0; i < n; i++) scaled[j][i] = TYPE::store(TYPE::multiply(TYPE::load(source[i]), TYPE::load(scalar)));
    pointers[j] = scaled[j].data();
  }
  fold<tc::Op::Sum, TYPE>(out, pointers.data(), count, n);
}

}  // namespace

size_t dtype_bytes(ncclDataType_t dtype) {
  switch (dtype) {
    case ncclInt8:
    case ncclUint8: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    default: return 8;
  }
}

void reduce_into(ncclDataType_t dtype, ncclRedOp_t op, void *out, const void *const *inputs, uint64_t count,
                 size_t n) {
  switch (dtype) {
    case ncclInt8: return fold_op<tc::Int8>(op, out, inputs, count, n);
    case ncclUint8: return fold_op<tc::Uint8>(op, out, inputs, count, n);
    case ncclInt32: return fold_op<tc::Int32>(op, out, inputs, count, n);
    case ncclUint32: return fold_op<tc::Uint32>(op, out, inputs, count, n);
    case ncclInt64: return fold_op<tc::Int64>(op, out, inputs, count, n);
    case ncclUint64: return fold_op<tc::Uint64>(op, out, inputs, count, n);
    case ncclFloat16: return fold_op<tc::Float16>(op, out, inputs, count, n);
    case ncclFloat32: return fold_op<tc::Float32>(op, out, inputs, count, n);
    case ncclFloat64: return fold_op<tc::Float64>(op, out, inputs, count, n);
    default: return fold_op<tc::Bfloat16>(op, out, inputs, count, n);
  }
}

void premul_sum_into(ncclDataType_t dtype, const uint64_t *scalars, void *out, const void *const *inputs,
                     uint64_t count, size_t n) {
  switch (dtype) {
    case ncclInt8: return premul_sum<tc::Int8>(scalars, out, inputs, count, n);
    case ncclUint8: return premul_sum<tc::Uint8>(scalars, out, inputs, count, n);
    case ncclInt32: return premul_sum<tc::Int32>(scalars, out, inputs, count, n);
    case ncclUint32: return premul_sum<tc::Uint32>(scalars, out, inputs, count, n);
    case ncclInt64: return premul_sum<tc::Int64>(scalars, out, inputs, count, n);
    case ncclUint64: return premul_sum<tc::Uint64>(scalars, out, inputs, count, n);
    case ncclFloat16: return premul_sum<tc::Float16>(scalars, out, inputs, count, n);
    case ncclFloat32: return premul_sum<tc::Float32>(scalars, out, inputs, count, n);
    case ncclFloat64: return premul_sum<tc::Float64>(scalars, out, inputs, count, n);
    default: return premul_sum<tc::Bfloat16>(scalars, out, inputs, count, n);
  }
}

}  // namespace tcdouble
