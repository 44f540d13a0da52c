/*
 * The collective and point-to-point calls, and ncclGroupStart/ncclGroupEnd.
 * A call is checked and numbered when made; outside a group it is queued on
 * its stream at once, inside one it waits for ncclGroupEnd, which queues all
 * of the group's calls as one operation so they progress together.
 */
#include "comm.h"

namespace tcdouble {
namespace {

struct GroupedCall {
  std::unique_ptr<Part> part;
  uint64_t comm;
  uint64_t stream;
};

/** This thread's ncclGroupStart/ncclGroupEnd. */
struct Group {
  int depth = 0;
  std::vector<GroupedCall> calls;
  std::vector<uint64_t> inits;
  /** The first call that failed inside the group fails ncclGroupEnd too, and nothing is queued. */
  ncclResult_t error = ncclSuccess;
};

thread_local Group group;

struct CallArguments {
  CallKind kind;
  ncclComm_t comm;
  const void *send;
  void *recv;
  size_t count;
  ncclDataType_t dtype;
  ncclRedOp_t op;
  int root;
  int peer;
  cudaStream_t stream;
};

ncclResult_t check_buffers(const CallArguments &call, const RankComm &comm) {
  if (call.count == 0) return ncclSuccess;
  const bool at_root = comm.rank == call.root;
  bool send_needed = true;
  bool recv_needed = true;
  switch (call.kind) {
    case CallKind::Broadcast: send_needed = at_root; break;
    case CallKind::Reduce: recv_needed = at_root; break;
    case CallKind::Send: recv_needed = false; break;
    case CallKind::Recv: send_needed = false; break;
    default: break;
  }
  const std::string name = call_name(call.kind);
  if (send_needed && call.send == nullptr) return nccl_fail(ncclInvalidArgument, name + ": sendbuff is NULL");
  if (recv_needed && call.recv == nullptr) return nccl_fail(ncclInvalidArgument, name + ": recvbuff is NULL");
  return ncclSuccess;
}

ncclResult_t check(const CallArguments &call, RankComm *comm) {
  const char *name = call_name(call.kind);
  if (comm == nullptr) return nccl_fail(ncclInvalidArgument, std::string(name) + ": invalid communicator");
  if (comm->clique->init_result == ncclInProgress || comm->launching) {
    return nccl_fail(ncclInvalidArgument,
                     std::string(name) + ": communicator used before its previous operation returned ncclSuccess " +
                         "(poll ncclCommGetAsyncError until it does)",
                     comm);
  }
  if (comm->finalize_called) return nccl_fail(ncclInvalidUsage, std::string(name) + ": communicator finalized", comm);
  if (ncclResult_t state = comm_state(*comm)) return state;
  if (call.dtype < 0 || call.dtype >= ncclFloat8e4m3) {
    return nccl_fail(ncclInvalidArgument, std::string(name) + ": invalid or unsupported datatype " +
                                              std::to_string(call.dtype), comm);
  }
  if (call.op < 0 || (call.op >= ncclNumOps && comm->user_ops.count(call.op) == 0)) {
    return nccl_fail(ncclInvalidArgument, std::string(name) + ": invalid reduction op " + std::to_string(call.op),
                     comm);
  }
  if (call.op >= ncclNumOps && comm->user_ops.at(call.op).dtype != call.dtype) {
    return nccl_fail(ncclInvalidArgument,
                     std::string(name) + ": the datatype of the ncclRedOpCreatePreMulSum op does not match the call's",
                     comm);
  }
  const int nranks = comm->clique->nranks;
  if (call.root < 0 || call.root >= nranks) {
    return nccl_fail(ncclInvalidArgument, std::string(name) + ": invalid root " + std::to_string(call.root), comm);
  }
  if (call.peer < 0 || call.peer >= nranks) {
    return nccl_fail(ncclInvalidArgument, std::string(name) + ": invalid peer " + std::to_string(call.peer), comm);
  }
  return check_buffers(call, *comm);
}

uint64_t next_sequence(const CallArguments &call, RankComm &comm) {
  switch (call.kind) {
    case CallKind::Send: return comm.sends[call.peer]++;
    case CallKind::Recv: return comm.receives[call.peer]++;
    default: return comm.next_collective++;
  }
}

/** Queues `parts` as one operation on the first stream; the others join it (order after it, and it after them). */
void queue(State &s, std::vector<std::unique_ptr<Part>> parts, const std::vector<Stream *> &streams) {
  auto op = std::make_unique<NcclOp>(std::move(parts));
  for (size_t i = 1; i < streams.size(); i++) op->after.push_back({streams[i]->id, streams[i]->enqueued});
  const StreamPoint done = enqueue(s, *streams[0], std::move(op));
  for (size_t i = 1; i < streams.size(); i++) {
    auto join = std::make_unique<OrderOp>("wait for an NCCL group queued on stream " + std::to_string(done.stream));
    join->after.push_back(done);
    enqueue(s, *streams[i], std::move(join));
  }
}

ncclResult_t submit(const char *function, const CallArguments &arguments) {
  Call call;
  RankComm *comm = find_comm(arguments.comm);
  Stream *stream = nullptr;
  ncclResult_t result = injected_failure(call, function);
  if (result == ncclSuccess) result = check(arguments, comm);
  // NCCL works on the comm's device, so stream 0 is that device's legacy stream.
  if (result == ncclSuccess && find_stream(call.s, arguments.stream, &stream, comm->device) != cudaSuccess) {
    result = nccl_fail(ncclUnhandledCudaError, std::string(function) + ": invalid stream", comm);
  }
  if (result != ncclSuccess) {
    if (group.depth > 0 && group.error == ncclSuccess) group.error = result;
    return result;
  }
  auto part = std::make_unique<Part>();
  part->comm = comm;
  part->kind = arguments.kind;
  part->send = arguments.send;
  part->recv = arguments.recv;
  part->count = arguments.count;
  part->dtype = arguments.dtype;
  part->op = arguments.op;
  if (arguments.op >= ncclNumOps) {
    // Resolved now, as NCCL does: the op may be destroyed as soon as this call returns.
    part->premul = true;
    part->scalar = comm->user_ops.at(arguments.op).scalar;
    part->op = ncclSum;
  }
  part->root = arguments.root;
  part->peer = arguments.peer;
  part->sequence = next_sequence(arguments, *comm);
  if (group.depth > 0) {
    group.calls.push_back({std::move(part), comm->id, stream->id});
    return ncclSuccess;
  }
  const ncclResult_t launched = first_use(*comm, *part) ? ncclInProgress : ncclSuccess;
  std::vector<std::unique_ptr<Part>> parts;
  parts.push_back(std::move(part));
  queue(call.s, std::move(parts), {stream});
  return launched;
}

/**
 * Queues a finished group's calls (ncclInProgress when one is a first use on
 * a non-blocking comm); fails, queuing nothing, when a comm or stream went
 * away meanwhile.
 */
ncclResult_t queue_group(Call &call, std::vector<GroupedCall> calls) {
  std::vector<std::unique_ptr<Part>> parts;
  std::vector<Stream *> streams;
  for (const GroupedCall &grouped : calls) {
    if (nccl().comms.count(grouped.comm) == 0) {
      return nccl_fail(ncclInvalidArgument, "ncclGroupEnd: a communicator used in the group was destroyed");
    }
    auto stream = call.s.streams.find(grouped.stream);
    if (stream == call.s.streams.end() || stream->second->destroyed) {
      return nccl_fail(ncclUnhandledCudaError, "ncclGroupEnd: a stream used in the group was destroyed");
    }
    bool seen = false;
    for (Stream *known : streams) seen = seen || known == stream->second.get();
    if (!seen) streams.push_back(stream->second.get());
  }
  ncclResult_t result = ncclSuccess;
  for (GroupedCall &grouped : calls) {
    if (first_use(*grouped.part->comm, *grouped.part)) result = ncclInProgress;
    parts.push_back(std::move(grouped.part));
  }
  if (!parts.empty()) queue(call.s, std::move(parts), streams);
  return result;
}

/** Blocking comms initialized in the group are ready (or failed) when ncclGroupEnd returns; others may not be. */
ncclResult_t finish_inits(Call &call, const std::vector<uint64_t> &inits) {
  ncclResult_t result = ncclSuccess;
  for (uint64_t id : inits) {
    const ncclComm_t handle = handle_of<ncclComm_t>(id);
    const RankComm *comm = find_comm(handle);
    if (comm == nullptr) continue;
    if (comm->blocking) {
      wait_until(call, "ncclGroupEnd", [&] {
        const RankComm *current = find_comm(handle);
        return current == nullptr || current->clique->init_result != ncclInProgress;
      });
      comm = find_comm(handle);
      if (comm == nullptr) continue;
    }
    const ncclResult_t state = comm->clique->init_result;
    if (state == ncclInProgress && comm->blocking) {
      result = nccl_fail(ncclSystemError,
                         "ncclGroupEnd: not every rank joined within TENSORCOMM_CUDA_DOUBLE_WAIT_LIMIT_MS");
    } else if (state != ncclSuccess && (result == ncclSuccess || result == ncclInProgress)) {
      result = state;  // a failure, or ncclInProgress for a non-blocking comm still waiting for its peers
    }
  }
  return result;
}

}  // namespace

bool in_group() { return group.depth > 0; }

void defer_init(uint64_t comm) { group.inits.push_back(comm); }

}  // namespace tcdouble

using namespace tcdouble;

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return submit(__func__, {CallKind::AllReduce, comm, sendbuff, recvbuff, count, datatype, op, 0, 0, stream});
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  return submit(__func__, {CallKind::Broadcast, comm, sendbuff, recvbuff, count, datatype, ncclSum, root, 0, stream});
}

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  return submit(__func__, {CallKind::Reduce, comm, sendbuff, recvbuff, count, datatype, op, root, 0, stream});
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  return submit(__func__, {CallKind::AllGather, comm, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, 0, stream});
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return submit(__func__, {CallKind::ReduceScatter, comm, sendbuff, recvbuff, recvcount, datatype, op, 0, 0, stream});
}

ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return submit(__func__, {CallKind::Send, comm, sendbuff, nullptr, count, datatype, ncclSum, 0, peer, stream});
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return submit(__func__, {CallKind::Recv, comm, nullptr, recvbuff, count, datatype, ncclSum, 0, peer, stream});
}

ncclResult_t ncclGroupStart(void) {
  Call call;
  if (ncclResult_t failure = injected_failure(call, __func__)) return failure;
  group.depth++;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void) {
  Call call;
  if (ncclResult_t failure = injected_failure(call, __func__)) return failure;
  if (group.depth == 0) return nccl_fail(ncclInvalidUsage, "ncclGroupEnd: no ncclGroupStart to end");
  if (--group.depth > 0) return ncclSuccess;
  Group finished = std::move(group);
  group = Group();
  if (finished.error != ncclSuccess) return finished.error;
  const ncclResult_t queued = queue_group(call, std::move(finished.calls));
  if (queued != ncclSuccess && queued != ncclInProgress) return queued;
  const ncclResult_t inits = finish_inits(call, finished.inits);
  return inits != ncclSuccess ? inits : queued;
}
