/*
 * Communicator lifetime: ncclGetVersion, ncclGetUniqueId,
 * ncclCommInitRank(Config), ncclCommGetAsyncError, ncclCommFinalize,
 * ncclCommDestroy, ncclCommAbort, and the error texts.
 */
#include <sys/random.h>

#include <cstdlib>
#include <cstring>

#include "comm.h"
#include "tcdouble-control.h"

namespace tcdouble {
namespace {

constexpr int kVersion = NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);

thread_local std::string thread_last_error;

/** Reads `blocking` as NCCL does: `size` first, never more bytes than the caller's struct or ours. */
ncclResult_t parse_config(const ncclConfig_t *config, bool *blocking) {
  int requested = NCCL_CONFIG_UNDEF_INT;
  if (config != nullptr) {
    ncclConfig_t copy = NCCL_CONFIG_INITIALIZER;
    copy.magic = 0;
    size_t size;
    memcpy(&size, config, sizeof size);
    memcpy(&copy, config, size < sizeof copy ? size : sizeof copy);
    if (copy.magic != NCCL_API_MAGIC) {
      return nccl_fail(ncclInvalidArgument, "ncclConfig_t argument not initialized via NCCL_CONFIG_INITIALIZER");
    }
    // `blocking` arrived in 2.14; an older struct's bytes there mean something else.
    if (copy.version >= static_cast<unsigned>(NCCL_VERSION(2, 14, 0))) requested = copy.blocking;
  }
  if (requested != NCCL_CONFIG_UNDEF_INT && requested != 0 && requested != 1) {
    return nccl_fail(ncclInvalidArgument, "invalid config blocking attribute value " + std::to_string(requested));
  }
  *blocking = requested != 0;
  const char *env = getenv("NCCL_COMM_BLOCKING");
  if (env != nullptr && (strcmp(env, "0") == 0 || strcmp(env, "1") == 0)) *blocking = env[0] == '1';
  return ncclSuccess;
}

Clique &clique_to_join(const ncclUniqueId &id, int nranks) {
  for (auto &clique : nccl().cliques) {
    if (clique->joined < clique->nranks && memcmp(&clique->unique_id, &id, sizeof id) == 0) return *clique;
  }
  auto clique = std::make_unique<Clique>();
  clique->unique_id = id;
  clique->nranks = nranks;
  clique->members.assign(nranks, nullptr);
  nccl().cliques.push_back(std::move(clique));
  return *nccl().cliques.back();
}

/** Once every rank is in: NCCL refuses two ranks of one communicator on the same GPU. */
void finish_init(Clique &clique) {
  clique.init_result = ncclSuccess;
  for (int a = 0; a < clique.nranks; a++) {
    for (int b = a + 1; b < clique.nranks; b++) {
      if (clique.members[a]->device == clique.members[b]->device) {
        clique.init_result = ncclInvalidUsage;
        const std::string message = "Duplicate GPU detected: rank " + std::to_string(a) + " and rank " +
                                    std::to_string(b) + " both on CUDA device " +
                                    std::to_string(clique.members[a]->device);
        for (RankComm *member : clique.members) member->last_error = message;
      }
    }
  }
}

ncclResult_t init_rank(Call &call, ncclComm_t *out, int nranks, const ncclUniqueId &id, int rank,
                       const ncclConfig_t *config, const char *function) {
  if (ncclResult_t failure = injected_failure(call, function)) return failure;
  if (out == nullptr) return nccl_fail(ncclInvalidArgument, std::string(function) + ": comm is NULL");
  *out = nullptr;
  bool blocking = true;
  if (ncclResult_t error = parse_config(config, &blocking)) return error;
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    return nccl_fail(ncclInvalidArgument,
                     "Invalid rank requested : " + std::to_string(rank) + "/" + std::to_string(nranks));
  }
  if (device_count() == 0) return nccl_fail(ncclUnhandledCudaError, "cudaGetDevice: no CUDA-capable device");
  Clique &clique = clique_to_join(id, nranks);
  if (clique.nranks != nranks) {
    return nccl_fail(ncclInvalidUsage, "rank " + std::to_string(rank) + " joined with nranks " +
                                           std::to_string(nranks) + ", the others with " +
                                           std::to_string(clique.nranks));
  }
  if (clique.members[rank] != nullptr) {
    return nccl_fail(ncclInvalidUsage, "rank " + std::to_string(rank) + " joined the same unique id twice");
  }
  auto created = std::make_unique<RankComm>();
  RankComm &comm = *created;
  comm.id = call.s.next_id++;
  comm.clique = &clique;
  comm.rank = rank;
  comm.device = current_device();
  comm.blocking = blocking;
  comm.sends.assign(nranks, 0);
  comm.receives.assign(nranks, 0);
  nccl().comms.emplace(comm.id, std::move(created));
  clique.members[rank] = &comm;
  clique.joined++;
  clique.alive++;
  if (clique.joined == nranks) finish_init(clique);
  call.s.changed.notify_all();
  *out = handle_of<ncclComm_t>(comm.id);
  if (in_group()) {
    defer_init(comm.id);
    return ncclSuccess;
  }
  if (!blocking) return comm_state(comm);
  const uint64_t comm_id = comm.id;
  const bool joined = wait_until(call, function, [&] {
    RankComm *found = find_comm(*out);
    return found == nullptr || found->clique->init_result != ncclInProgress;
  });
  RankComm *found = find_comm(*out);
  if (found == nullptr) return nccl_fail(ncclInternalError, "communicator was reset while initializing");
  const ncclResult_t result = joined ? found->clique->init_result : ncclSystemError;
  if (result == ncclSuccess) return ncclSuccess;
  const std::string message = joined ? found->last_error
                                     : "not every rank joined communicator " + std::to_string(comm_id) +
                                           " within TENSORCOMM_CUDA_DOUBLE_WAIT_LIMIT_MS";
  remove_comm(found);
  *out = nullptr;
  return nccl_fail(result, message);
}

void drop_all() {
  nccl().comms.clear();
  nccl().cliques.clear();
}

const bool registered = (on_reset(drop_all), true);

}  // namespace

Nccl &nccl() {
  static auto *n = new Nccl();
  return *n;
}

RankComm *find_comm(ncclComm_t comm) {
  auto it = nccl().comms.find(id_of(comm));
  return it == nccl().comms.end() ? nullptr : it->second.get();
}

ncclResult_t comm_state(const RankComm &comm) {
  if (comm.clique->init_result != ncclSuccess) return comm.clique->init_result;
  if (comm.error != ncclSuccess) return comm.error;
  if (comm.launching || (comm.finalize_called && comm.pending > 0)) return ncclInProgress;
  return ncclSuccess;
}

bool first_use(RankComm &comm, const Part &part) {
  if (comm.blocking) return false;
  const bool p2p = part.kind == CallKind::Send || part.kind == CallKind::Recv;
  const auto connection = p2p ? std::make_pair(-1, part.peer) : std::make_pair(static_cast<int>(part.kind), -1);
  if (!comm.connected.insert(connection).second) return false;
  comm.launching = true;
  return true;
}

void remove_comm(RankComm *comm) {
  Clique *clique = comm->clique;
  clique->members[comm->rank] = nullptr;
  clique->alive--;
  if (clique->init_result == ncclInProgress) clique->joined--;
  if (clique->alive == 0) {
    auto &cliques = nccl().cliques;
    for (auto it = cliques.begin(); it != cliques.end(); ++it) {
      if (it->get() == clique) {
        cliques.erase(it);
        break;
      }
    }
  }
  nccl().comms.erase(comm->id);
}

ncclResult_t nccl_fail(ncclResult_t result, const std::string &message, RankComm *comm) {
  thread_last_error = message;
  if (comm != nullptr) comm->last_error = message;
  return result;
}

ncclResult_t injected_failure(Call &call, const char *function) {
  const int code = call.injected_failure(function);
  if (code == 0) return ncclSuccess;
  return nccl_fail(static_cast<ncclResult_t>(code), std::string(function) + ": failure injected by tcdouble_fail_next");
}

}  // namespace tcdouble

using namespace tcdouble;

ncclResult_t ncclGetVersion(int *version) {
  Call call;
  if (ncclResult_t failure = injected_failure(call, __func__)) return failure;
  if (version == nullptr) return nccl_fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = kVersion;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId) {
  Call call;
  if (ncclResult_t failure = injected_failure(call, __func__)) return failure;
  if (uniqueId == nullptr) return nccl_fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  if (getrandom(uniqueId->internal, sizeof uniqueId->internal, 0) != sizeof uniqueId->internal) {
    return nccl_fail(ncclSystemError, "ncclGetUniqueId: getrandom failed");
  }
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t *config) {
  Call call;
  return init_rank(call, comm, nranks, commId, rank, config, __func__);
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank) {
  Call call;
  return init_rank(call, comm, nranks, commId, rank, nullptr, __func__);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError) {
  Call call;
  if (ncclResult_t failure = injected_failure(call, __func__)) return failure;
  RankComm *found = find_comm(comm);
  if (found == nullptr || asyncError == nullptr) {
    return nccl_fail(ncclInvalidArgument, "ncclCommGetAsyncError: invalid communicator or NULL result pointer");
  }
  *asyncError = comm_state(*found);
  found->launching = false;  // the launch has been seen in progress; the next query finds it done
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  Call call;
  if (ncclResult_t failure = injected_failure(call, __func__)) return failure;
  if (comm == nullptr) return ncclSuccess;
  RankComm *found = find_comm(comm);
  if (found == nullptr) return nccl_fail(ncclInvalidArgument, "ncclCommFinalize: invalid communicator");
  if (found->clique->init_result == ncclInProgress || found->launching) {
    return nccl_fail(ncclInvalidArgument,
                     "ncclCommFinalize: communicator used before its previous operation returned ncclSuccess", found);
  }
  if (found->finalize_called) return nccl_fail(ncclInvalidArgument, "ncclCommFinalize called twice", found);
  found->finalize_called = true;
  if (!found->blocking) return comm_state(*found);
  const bool flushed = wait_until(call, "ncclCommFinalize", [&] {
    const RankComm *current = find_comm(comm);
    return current == nullptr || current->pending == 0;
  });
  return flushed ? ncclSuccess : nccl_fail(ncclSystemError, "ncclCommFinalize: queued calls never completed");
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  Call call;
  if (ncclResult_t failure = injected_failure(call, __func__)) return failure;
  if (comm == nullptr) return ncclSuccess;
  if (find_comm(comm) == nullptr) return nccl_fail(ncclInvalidArgument, "ncclCommDestroy: invalid communicator");
  // Destroy lets queued calls finish (ncclCommAbort is the way out when they cannot).
  const bool flushed = wait_until(call, "ncclCommDestroy", [&] {
    const RankComm *current = find_comm(comm);
    return current == nullptr || current->clique->init_result != ncclSuccess || current->pending == 0;
  });
  RankComm *found = find_comm(comm);
  if (found == nullptr) return ncclSuccess;
  if (!flushed) return nccl_fail(ncclSystemError, "ncclCommDestroy: queued calls never completed", found);
  remove_comm(found);
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  Call call;
  if (ncclResult_t failure = injected_failure(call, __func__)) return failure;
  if (comm == nullptr) return ncclSuccess;
  RankComm *found = find_comm(comm);
  if (found == nullptr) return nccl_fail(ncclInvalidArgument, "ncclCommAbort: invalid communicator");
  for (auto &entry : call.s.streams) {
    for (auto &op : entry.second->queue) {
      if (auto *nccl_op = dynamic_cast<NcclOp *>(op.get())) nccl_op->drop(found);
    }
  }
  remove_comm(found);
  return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

const char *ncclGetLastError(ncclComm_t comm) {
  Call call;
  const RankComm *found = find_comm(comm);
  if (found != nullptr && !found->last_error.empty()) return found->last_error.c_str();
  return thread_last_error.c_str();
}

int tcdouble_live_comms(void) {
  Call call;
  return static_cast<int>(nccl().comms.size());
}
