// Rank threads for the NCCL sections: each on its own device, with a blocking communicator and a stream.
#ifndef TCDOUBLE_SELFTEST_RANKS_H
#define TCDOUBLE_SELFTEST_RANKS_H

#include <functional>

#include "check.h"

struct Rank {
  int rank;
  int nranks;
  ncclComm_t comm;
  cudaStream_t stream;
};

/** Runs `body` on `nranks` threads (rank r on device r), then synchronizes and releases each rank's comm and stream. */
void run_ranks(int nranks, const std::function<void(const Rank &)> &body);

/** The 2-rank communicators of one clique, made from one thread with non-blocking init (ranks on devices 0, 1). */
void make_pair(ncclComm_t comms[2]);

/** Polls ncclCommGetAsyncError until it leaves ncclInProgress. */
ncclResult_t settled_state(ncclComm_t comm);

#endif  // TCDOUBLE_SELFTEST_RANKS_H
