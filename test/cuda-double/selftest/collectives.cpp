// Collectives over 2-4 rank threads, several dtypes and ops, in and out of place.
#include <cstdint>

#include "ranks.h"

namespace {

template <class T>
std::vector<T> all_reduce(int nranks, ncclDataType_t dtype, ncclRedOp_t op,
                          const std::function<std::vector<T>(int)> &input) {
  std::vector<std::vector<T>> results(nranks);
  run_ranks(nranks, [&](const Rank &r) {
    const std::vector<T> mine = input(r.rank);
    T *buffer = device_copy(mine);
    NCCL_OK(ncclAllReduce(buffer, buffer, mine.size(), dtype, op, r.comm, r.stream));
    CUDA_OK(cudaStreamSynchronize(r.stream));
    results[r.rank] = host_copy(buffer, mine.size());
    CUDA_OK(cudaFree(buffer));
  });
  for (const auto &result : results) CHECK(result == results[0]);
  return results[0];
}

/** All-reduce of one element, rank r contributing value(r). */
template <class T>
T all_reduce_one(int nranks, ncclDataType_t dtype, ncclRedOp_t op, const std::function<T(int)> &value) {
  return all_reduce<T>(nranks, dtype, op, [&](int r) { return std::vector<T>{value(r)}; })[0];
}

void all_reduce_values() {
  CHECK((all_reduce<float>(3, ncclFloat32, ncclSum, [](int r) {
          return std::vector<float>{float(r + 1), float(10 * (r + 1))};
        }) == std::vector<float>{6, 60}));
  CHECK((all_reduce<int32_t>(4, ncclInt32, ncclMax, [](int r) { return std::vector<int32_t>{-r, r * r}; }) ==
         std::vector<int32_t>{0, 9}));
  // Integer avg truncates toward zero: -4 / 3 is -1.
  CHECK(all_reduce_one<int64_t>(3, ncclInt64, ncclAvg, [](int r) { return r == 0 ? -7 : r; }) == -1);
  // uint8 wraps: 200 * 2 = 400 = 144 mod 256.
  CHECK(all_reduce_one<uint8_t>(2, ncclUint8, ncclProd, [](int r) { return r ? 2 : 200; }) == 144);
  CHECK(all_reduce_one<uint64_t>(2, ncclUint64, ncclMin, [](int r) { return r ? 1ull << 63 : 5; }) == 5);
  // float16 accumulates in float32 and rounds once: 1 + 2^-11 + 2^-11 is 1 + 2^-10 (0x3c01), where rounding
  // after each addition would stay at 1.0.
  CHECK(all_reduce_one<uint16_t>(3, ncclFloat16, ncclSum, [](int r) { return r ? 0x1000 : 0x3c00; }) == 0x3c01);
  // bfloat16 avg of 1.0 and 2.0 is 1.5.
  CHECK(all_reduce_one<uint16_t>(2, ncclBfloat16, ncclAvg, [](int r) { return r ? 0x4000 : 0x3f80; }) == 0x3fc0);
}

void broadcast_reduce() {
  run_ranks(3, [](const Rank &r) {
    // Broadcast from rank 2, in place.
    int8_t *buffer = device_copy(std::vector<int8_t>{int8_t(r.rank), int8_t(-r.rank)});
    NCCL_OK(ncclBroadcast(buffer, buffer, 2, ncclInt8, 2, r.comm, r.stream));
    // Reduce to rank 1, out of place.
    double *send = device_copy(std::vector<double>{0.5 * r.rank});
    double *recv = device_copy(std::vector<double>{-1});
    NCCL_OK(ncclReduce(send, recv, 1, ncclFloat64, ncclSum, 1, r.comm, r.stream));
    CUDA_OK(cudaStreamSynchronize(r.stream));
    CHECK((host_copy(buffer, 2) == std::vector<int8_t>{2, -2}));
    CHECK(host_copy(recv, 1)[0] == (r.rank == 1 ? 1.5 : -1));
    for (void *pointer : {static_cast<void *>(buffer), static_cast<void *>(send), static_cast<void *>(recv)}) {
      CUDA_OK(cudaFree(pointer));
    }
  });
}

void gather_scatter() {
  run_ranks(3, [](const Rank &r) {
    // All-gather in place: each rank's part already sits at its offset.
    std::vector<int32_t> initial(6, -1);
    initial[2 * r.rank] = r.rank;
    initial[2 * r.rank + 1] = 10 + r.rank;
    int32_t *gathered = device_copy(initial);
    NCCL_OK(ncclAllGather(gathered + 2 * r.rank, gathered, 2, ncclInt32, r.comm, r.stream));
    // Reduce-scatter: rank k gets the sum of everyone's block k.
    float *send = device_copy(std::vector<float>{1.0f * r.rank, 2.0f, 3.0f * r.rank, 4.0f, 5.0f, 6.0f});
    float *recv = device_copy(std::vector<float>(2, 0.0f));
    NCCL_OK(ncclReduceScatter(send, recv, 2, ncclFloat32, ncclSum, r.comm, r.stream));
    CUDA_OK(cudaStreamSynchronize(r.stream));
    CHECK((host_copy(gathered, 6) == std::vector<int32_t>{0, 10, 1, 11, 2, 12}));
    const std::vector<std::vector<float>> expected = {{3, 6}, {9, 12}, {15, 18}};
    CHECK(host_copy(recv, 2) == expected[r.rank]);
    for (void *pointer : {static_cast<void *>(gathered), static_cast<void *>(send), static_cast<void *>(recv)}) {
      CUDA_OK(cudaFree(pointer));
    }
  });
}

/** ncclRedOpCreatePreMulSum: each rank's own scalar multiplies its input; the op is its comm's, for its datatype. */
void premul_sum() {
  run_ranks(3, [](const Rank &r) {
    const float scalar = 0.5f * (r.rank + 1);
    ncclRedOp_t op;
    NCCL_OK(ncclRedOpCreatePreMulSum(&op, const_cast<float *>(&scalar), ncclFloat32, ncclScalarHostImmediate, r.comm));
    CHECK(op >= ncclNumOps);
    CHECK(tcdouble_live_red_ops() >= 1);
    float *buffer = device_copy(std::vector<float>{2.0f, -4.0f});
    NCCL_OK(ncclAllReduce(buffer, buffer, 2, ncclFloat32, op, r.comm, r.stream));
    // Resolved when the call was made: destroying the op now leaves the queued call intact.
    NCCL_OK(ncclRedOpDestroy(op, r.comm));
    CUDA_OK(cudaStreamSynchronize(r.stream));
    // (0.5 + 1 + 1.5) * 2 and * -4.
    CHECK((host_copy(buffer, 2) == std::vector<float>{6.0f, -12.0f}));
    // A datatype other than the op's, a destroyed op and a builtin are refused.
    ncclRedOp_t half;
    const uint16_t two = 0x4000;
    NCCL_OK(ncclRedOpCreatePreMulSum(&half, const_cast<uint16_t *>(&two), ncclFloat16, ncclScalarHostImmediate, r.comm));
    CHECK(ncclAllReduce(buffer, buffer, 2, ncclFloat32, half, r.comm, r.stream) == ncclInvalidArgument);
    CHECK(ncclRedOpDestroy(op, r.comm) == ncclInvalidArgument);
    CHECK(ncclRedOpDestroy(ncclSum, r.comm) == ncclInvalidArgument);
    NCCL_OK(ncclRedOpDestroy(half, r.comm));
    CUDA_OK(cudaFree(buffer));
  });
  CHECK(tcdouble_live_red_ops() == 0);
}

}  // namespace

void test_collectives() {
  all_reduce_values();
  broadcast_reduce();
  gather_scatter();
  premul_sum();
}
