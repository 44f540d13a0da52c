/*
 * The libnccl double's model: every rank of a communicator is a thread of
 * this process. The ranks of one unique id form a clique; each rank's
 * ncclComm_t is a RankComm. A call is queued on the caller's stream as a Part
 * and, once at the stream's head, arrives at a slot of the clique: collectives
 * meet by the comm's call number, send/recv pairs by (sender, receiver, n-th
 * call in that direction). When the last participant arrives, the call runs on
 * host memory and completes on every rank at once.
 */
#ifndef TCDOUBLE_NCCL_COMM_H
#define TCDOUBLE_NCCL_COMM_H

#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "engine.h"
#include "nccl.h"

namespace tcdouble {

enum class CallKind { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, Send, Recv };

const char *call_name(CallKind kind);

struct RankComm;

/** One NCCL call of one rank. */
struct Part {
  RankComm *comm = nullptr;
  CallKind kind = CallKind::AllReduce;
  const void *send = nullptr;
  void *recv = nullptr;
  size_t count = 0;
  ncclDataType_t dtype = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  /**
   * An op of ncclRedOpCreatePreMulSum, resolved when the call was made (as
   * NCCL does, so the op may be destroyed once the call returned): `op` is
   * then ncclSum, over inputs first multiplied by this rank's `scalar`.
   */
  bool premul = false;
  /** The scalar's bytes, one element of `dtype`, at the start. */
  uint64_t scalar = 0;
  /** Broadcast and Reduce. */
  int root = 0;
  /** Send and Recv. */
  int peer = 0;
  /** Collectives: the comm's call number. Send/recv: the call's number between the two ranks in its direction. */
  uint64_t sequence = 0;
  bool arrived = false;
  bool done = false;
};

struct CollectiveSlot {
  std::vector<Part *> parts;  // by rank
  int arrived = 0;
};

struct P2pSlot {
  Part *send = nullptr;
  Part *recv = nullptr;
};

struct Clique {
  ncclUniqueId unique_id;
  int nranks = 0;
  /** By rank; nullptr until the rank joins and after it leaves. */
  std::vector<RankComm *> members;
  int joined = 0;
  int alive = 0;
  /** ncclInProgress until every rank has joined; then ncclSuccess, or why initialization failed. */
  ncclResult_t init_result = ncclInProgress;
  std::map<uint64_t, CollectiveSlot> collectives;
  /** By (sender, receiver, sequence). */
  std::map<std::tuple<int, int, uint64_t>, P2pSlot> p2p;
};

/** An op made by ncclRedOpCreatePreMulSum: for calls with this datatype only. */
struct UserRedOp {
  ncclDataType_t dtype = ncclFloat32;
  uint64_t scalar = 0;
};

struct RankComm {
  uint64_t id = 0;
  Clique *clique = nullptr;
  int rank = 0;
  int device = 0;
  bool blocking = true;
  /** Set by a call the ranks disagreed on; sticky, as NCCL's asynchronous errors are. */
  ncclResult_t error = ncclSuccess;
  bool finalize_called = false;
  uint64_t next_collective = 0;
  /** Calls so far to / from each peer. */
  std::vector<uint64_t> sends, receives;
  /** Parts queued and not done. */
  int pending = 0;
  /**
   * Non-blocking comms: what this rank has "connected" (a collective kind, or
   * a peer for send/recv). NCCL sets connections up on first use and returns
   * ncclInProgress meanwhile; the double does the same for a first use, until
   * ncclCommGetAsyncError has reported it once (`launching`).
   */
  std::set<std::pair<int, int>> connected;
  bool launching = false;
  std::string last_error;
  /** The ops ncclRedOpCreatePreMulSum made on this comm and ncclRedOpDestroy has not destroyed, by value. */
  std::map<int, UserRedOp> user_ops;
  int next_user_op = ncclNumOps;
};

struct Nccl {
  std::map<uint64_t, std::unique_ptr<RankComm>> comms;
  std::vector<std::unique_ptr<Clique>> cliques;
};

/** Guarded by the state lock. */
Nccl &nccl();
RankComm *find_comm(ncclComm_t comm);
/** What ncclCommGetAsyncError reports for `comm`. */
ncclResult_t comm_state(const RankComm &comm);
/**
 * For a call about to be queued on a non-blocking comm: whether it is the
 * comm's first use of that connection, which makes the call return
 * ncclInProgress; marks the comm launching if so.
 */
bool first_use(RankComm &comm, const Part &part);
/** Takes `comm` out of its clique and forgets it; its parts must be gone already. */
void remove_comm(RankComm *comm);

/** Remembers `message` for ncclGetLastError (on the comm too, when given) and returns `result`. */
ncclResult_t nccl_fail(ncclResult_t result, const std::string &message, RankComm *comm = nullptr);
/** The result tcdouble_fail_next armed for `function` (consumed, and remembered like any failure), or ncclSuccess. */
ncclResult_t injected_failure(Call &call, const char *function);

/** A queued NCCL call, or all calls of one ncclGroupStart/ncclGroupEnd, which progress together. */
class NcclOp : public Op {
 public:
  explicit NcclOp(std::vector<std::unique_ptr<Part>> parts);
  bool advance() override;
  std::string describe() const override;
  /** ncclCommAbort: forgets the parts of `comm`, which never complete; peers keep waiting for them. */
  void drop(const RankComm *comm);

 private:
  std::vector<std::unique_ptr<Part>> parts_;
};

size_t dtype_bytes(ncclDataType_t dtype);
/** out[i] = op over inputs[0..count-1][i] for i < n, with reduce-ops.h's semantics. */
void reduce_into(ncclDataType_t dtype, ncclRedOp_t op, void *out, const void *const *inputs, uint64_t count, size_t n);
/** reduce_into's sum, each input j's elements first multiplied by scalars[j] (one element of dtype) and rounded to it. */
void premul_sum_into(ncclDataType_t dtype, const uint64_t *scalars, void *out, const void *const *inputs,
                     uint64_t count, size_t n);

/** Inside ncclGroupStart/ncclGroupEnd on this thread. */
bool in_group();
/** A comm initialized inside a group: ncclGroupEnd waits for it (when blocking). */
void defer_init(uint64_t comm);

}  // namespace tcdouble

#endif  // TCDOUBLE_NCCL_COMM_H
