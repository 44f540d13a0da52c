/*
 * ncclRedOpCreatePreMulSum and ncclRedOpDestroy: ops a communicator makes,
 * numbered from ncclNumOps as NCCL numbers them (NCCL also mangles the
 * number per communicator; callers must treat it as opaque either way).
 */
#include <cstring>

#include "comm.h"
#include "tcdouble-control.h"

using namespace tcdouble;

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  Call call;
  if (ncclResult_t failure = injected_failure(call, __func__)) return failure;
  RankComm *found = find_comm(comm);
  if (found == nullptr) return nccl_fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: invalid communicator");
  if (op == nullptr || scalar == nullptr) {
    return nccl_fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: op or scalar is NULL", found);
  }
  // ncclCommEnsureReady: a communicator still creating or connecting may not make ops.
  const ncclResult_t state = comm_state(*found);
  if (state == ncclInProgress) {
    return nccl_fail(ncclInvalidArgument,
                     "ncclRedOpCreatePreMulSum: communicator used before its previous operation returned ncclSuccess",
                     found);
  }
  if (state != ncclSuccess) return state;
  if (datatype < 0 || datatype >= ncclFloat8e4m3) {
    return nccl_fail(ncclInvalidArgument,
                     "ncclRedOpCreatePreMulSum: invalid or unsupported datatype " + std::to_string(datatype), found);
  }
  if (residence != ncclScalarHostImmediate) {
    return nccl_fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: the double models ncclScalarHostImmediate only",
                     found);
  }
  UserRedOp made;
  made.dtype = datatype;
  memcpy(&made.scalar, scalar, dtype_bytes(datatype));
  const int value = found->next_user_op++;
  found->user_ops.emplace(value, made);
  *op = static_cast<ncclRedOp_t>(value);
  return ncclSuccess;
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  Call call;
  if (ncclResult_t failure = injected_failure(call, __func__)) return failure;
  if (0 <= op && op < ncclNumOps) return nccl_fail(ncclInvalidArgument, "ncclRedOpDestroy: operator is a NCCL builtin");
  RankComm *found = find_comm(comm);
  if (found == nullptr) return nccl_fail(ncclInvalidArgument, "ncclRedOpDestroy: invalid communicator");
  if (found->user_ops.erase(op) == 0) {
    return nccl_fail(ncclInvalidArgument, "ncclRedOpDestroy: operator unknown to this communicator", found);
  }
  return ncclSuccess;
}

int tcdouble_live_red_ops(void) {
  Call call;
  size_t live = 0;
  for (const auto &entry : nccl().comms) live += entry.second->user_ops.size();
  return static_cast<int>(live);
}
