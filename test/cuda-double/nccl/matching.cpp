// How queued NCCL calls meet their peers' calls, and what they do once all have arrived.
#include <cstring>

#include "comm.h"

namespace tcdouble {
namespace {

bool is_reduction(CallKind kind) {
  return kind == CallKind::AllReduce || kind == CallKind::Reduce || kind == CallKind::ReduceScatter;
}

bool is_rooted(CallKind kind) { return kind == CallKind::Broadcast || kind == CallKind::Reduce; }

std::string describe_call(const Part &part) {
  std::string text = std::string(call_name(part.kind)) + "(count " + std::to_string(part.count) + ", datatype " +
                     std::to_string(part.dtype);
  if (is_reduction(part.kind)) text += part.premul ? ", op premulsum" : ", op " + std::to_string(part.op);
  if (is_rooted(part.kind)) text += ", root " + std::to_string(part.root);
  if (part.kind == CallKind::Send || part.kind == CallKind::Recv) text += ", peer " + std::to_string(part.peer);
  return text + ")";
}

bool same_call(const Part &a, const Part &b) {
  return a.kind == b.kind && a.count == b.count && a.dtype == b.dtype &&
         (!is_reduction(a.kind) || (a.op == b.op && a.premul == b.premul)) && (!is_rooted(a.kind) || a.root == b.root);
}

void complete(Part &part) {
  part.done = true;
  part.comm->pending--;
}

/** The ranks disagree: like a real mismatch this is the application's bug; NCCL would hang or corrupt data. */
void fail_mismatch(const std::vector<Part *> &parts) {
  std::string calls;
  for (const Part *part : parts) {
    calls += "; rank " + std::to_string(part->comm->rank) + " called " + describe_call(*part);
  }
  for (Part *part : parts) {
    part->comm->error = ncclInvalidUsage;
    nccl_fail(ncclInvalidUsage, "mismatched calls at the same point of the communicator's sequence" + calls,
              part->comm);
    complete(*part);
  }
}

void run_collective(const std::vector<Part *> &parts) {
  const Part &first = *parts[0];
  const int nranks = static_cast<int>(parts.size());
  const size_t bytes = first.count * dtype_bytes(first.dtype);
  // Results go through a scratch copy, so in-place calls (recv inside send) read every input first.
  std::vector<unsigned char> result;
  std::vector<const void *> sends;
  std::vector<uint64_t> scalars;
  for (const Part *part : parts) {
    sends.push_back(part->send);
    scalars.push_back(part->scalar);
  }
  // Every rank's own scalar multiplies its own input (same_call saw all of them premulsum, or none).
  const auto reduce = [&](void *out, size_t n) {
    if (first.premul) premul_sum_into(first.dtype, scalars.data(), out, sends.data(), nranks, n);
    else reduce_into(first.dtype, first.op, out, sends.data(), nranks, n);
  };
  switch (first.kind) {
    case CallKind::AllReduce:
    case CallKind::Reduce:
      result.resize(bytes);
      reduce(result.data(), first.count);
      break;
    case CallKind::ReduceScatter:
      result.resize(bytes * nranks);
      reduce(result.data(), first.count * nranks);
      break;
    case CallKind::Broadcast:
      result.assign(static_cast<const unsigned char *>(parts[first.root]->send),
                    static_cast<const unsigned char *>(parts[first.root]->send) + bytes);
      break;
    case CallKind::AllGather:
      result.resize(bytes * nranks);
      for (int rank = 0; rank < nranks; rank++) memcpy(result.data() + rank * bytes, sends[rank], bytes);
      break;
    default:
      break;
  }
  for (int rank = 0; rank < nranks; rank++) {
    Part &part = *parts[rank];
    switch (first.kind) {
      case CallKind::Reduce:
        if (rank == first.root) memcpy(part.recv, result.data(), bytes);
        break;
      case CallKind::ReduceScatter:
        memcpy(part.recv, result.data() + rank * bytes, bytes);
        break;
      default:
        memcpy(part.recv, result.data(), result.size());
        break;
    }
  }
}

void arrive_collective(Part &part) {
  Clique &clique = *part.comm->clique;
  auto slot = clique.collectives.find(part.sequence);
  if (slot == clique.collectives.end()) {
    slot = clique.collectives.emplace(part.sequence, CollectiveSlot()).first;
    slot->second.parts.assign(clique.nranks, nullptr);
  }
  slot->second.parts[part.comm->rank] = &part;
  if (++slot->second.arrived < clique.nranks) return;
  const std::vector<Part *> parts = slot->second.parts;
  clique.collectives.erase(slot);
  for (const Part *other : parts) {
    if (!same_call(*parts[0], *other)) return fail_mismatch(parts);
  }
  if (parts[0]->count > 0) run_collective(parts);
  for (Part *other : parts) complete(*other);
}

void arrive_p2p(Part &part) {
  Clique &clique = *part.comm->clique;
  const bool sending = part.kind == CallKind::Send;
  const int rank = part.comm->rank;
  const auto key = sending ? std::make_tuple(rank, part.peer, part.sequence)
                           : std::make_tuple(part.peer, rank, part.sequence);
  P2pSlot &slot = clique.p2p[key];
  (sending ? slot.send : slot.recv) = &part;
  if (slot.send == nullptr || slot.recv == nullptr) return;
  Part &send = *slot.send;
  Part &recv = *slot.recv;
  clique.p2p.erase(key);
  if (send.count != recv.count || send.dtype != recv.dtype) return fail_mismatch({&send, &recv});
  memmove(recv.recv, send.send, send.count * dtype_bytes(send.dtype));
  complete(send);
  complete(recv);
}

void arrive(Part &part) {
  part.arrived = true;
  if (part.kind == CallKind::Send || part.kind == CallKind::Recv) {
    arrive_p2p(part);
  } else {
    arrive_collective(part);
  }
}

/** Takes a part that arrived and is not done out of the slot it waits in. */
void withdraw(Part &part) {
  Clique &clique = *part.comm->clique;
  const int rank = part.comm->rank;
  if (part.kind == CallKind::Send || part.kind == CallKind::Recv) {
    const bool sending = part.kind == CallKind::Send;
    const auto key = sending ? std::make_tuple(rank, part.peer, part.sequence)
                             : std::make_tuple(part.peer, rank, part.sequence);
    auto slot = clique.p2p.find(key);
    if (slot == clique.p2p.end()) return;
    (sending ? slot->second.send : slot->second.recv) = nullptr;
    if (slot->second.send == nullptr && slot->second.recv == nullptr) clique.p2p.erase(slot);
    return;
  }
  auto slot = clique.collectives.find(part.sequence);
  if (slot == clique.collectives.end()) return;
  slot->second.parts[rank] = nullptr;
  if (--slot->second.arrived == 0) clique.collectives.erase(slot);
}

std::string waiting_for(const Part &part) {
  const Clique &clique = *part.comm->clique;
  if (!part.arrived) return "not started (not yet at the head of its stream)";
  if (part.kind == CallKind::Send) return "waiting for rank " + std::to_string(part.peer) + "'s matching ncclRecv";
  if (part.kind == CallKind::Recv) return "waiting for rank " + std::to_string(part.peer) + "'s matching ncclSend";
  std::string missing;
  auto slot = clique.collectives.find(part.sequence);
  for (int rank = 0; rank < clique.nranks; rank++) {
    if (slot == clique.collectives.end() || slot->second.parts[rank] == nullptr) {
      missing += (missing.empty() ? "" : ", ") + std::to_string(rank);
    }
  }
  return "waiting for rank(s) " + missing + " to make the same call";
}

}  // namespace

const char *call_name(CallKind kind) {
  switch (kind) {
    case CallKind::AllReduce: return "ncclAllReduce";
    case CallKind::Broadcast: return "ncclBroadcast";
    case CallKind::Reduce: return "ncclReduce";
    case CallKind::AllGather: return "ncclAllGather";
    case CallKind::ReduceScatter: return "ncclReduceScatter";
    case CallKind::Send: return "ncclSend";
    default: return "ncclRecv";
  }
}

NcclOp::NcclOp(std::vector<std::unique_ptr<Part>> parts) : parts_(std::move(parts)) {
  for (auto &part : parts_) part->comm->pending++;
}

bool NcclOp::advance() {
  for (auto &part : parts_) {
    if (!part->arrived) arrive(*part);
  }
  for (const auto &part : parts_) {
    if (!part->done) return false;
  }
  return true;
}

std::string NcclOp::describe() const {
  std::string text;
  for (const auto &part : parts_) {
    if (part->done) continue;
    text += (text.empty() ? "" : "; ") + describe_call(*part) + " #" + std::to_string(part->sequence) + " on rank " +
            std::to_string(part->comm->rank) + " of " + std::to_string(part->comm->clique->nranks) + ": " +
            waiting_for(*part);
  }
  return text.empty() ? "NCCL calls, all done" : text;
}

void NcclOp::drop(const RankComm *comm) {
  for (auto it = parts_.begin(); it != parts_.end();) {
    Part &part = **it;
    if (part.comm != comm) {
      ++it;
      continue;
    }
    if (part.arrived && !part.done) withdraw(part);
    if (!part.done) part.comm->pending--;
    it = parts_.erase(it);
  }
}

}  // namespace tcdouble
