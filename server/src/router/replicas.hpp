// The replicated path of gpujoin-router's Lookup and Join (docs/operations.md
// "Replicated indexes"): one whole batch to one serving replica, and whether
// its answer stands or the batch is split by key after all.
#pragma once

#include <string>
#include <vector>

#include "router/placement.hpp"
#include "router/shard_calls.hpp"

namespace gpujoin::server::router {

/// Forgets the placement of `index` when an answer ran on another version
/// than the one it was learnt from (the index was rebuilt since), or found no
/// such index (it was dropped, maybe through another router).
template <class Response>
void NoteVersion(const ShardCalls& calls, const std::string& index, const Response& answer) {
  if (answer.has_error()) {
    if (answer.error().code() == static_cast<int>(grpc::StatusCode::NOT_FOUND)) {
      calls.placements().Forget(index);
    }
    return;
  }
  auto entry = calls.placements().Get(index);
  if (entry && entry->version != answer.index_version()) calls.placements().Forget(index);
}

/// Whether one replica's answer to a whole batch stands: an error other than
/// a placement refusal, or an answer on the version the placement was learnt
/// from. Otherwise the placement is forgotten and the batch is split by key,
/// where the shards' versions are compared (replicas on different versions:
/// ABORTED, as for a partitioned index).
template <class Response>
bool ReplicaAnswerStands(const ShardCalls& calls, const std::string& index, const Response& a) {
  if (a.has_error()) {
    if (IsPlacementRefusal(a.error())) {
      calls.placements().Forget(index);
      return false;
    }
    NoteVersion(calls, index, a);
    return true;
  }
  auto entry = calls.placements().Get(index);
  if (entry && entry->version == a.index_version()) return true;
  calls.placements().Forget(index);
  return false;
}

/// Runs `request` whole on one replica of a replicated index: the next
/// serving one, in turn, with `replica` set. On OK, `*answer` holds the
/// replica's answer messages when they stand (ReplicaAnswerStands), or is
/// empty when the batch must be split by key after all; `*replica` is the
/// shard asked.
template <class Request, class Response>
grpc::Status OnOneReplica(const ShardCalls& calls, ShardStreams<Request, Response>& shards,
                          const Request& request, std::vector<Response>* answer,
                          uint32_t* replica) {
  const uint32_t s = calls.NextServingReplica();
  std::vector<Request> parts(calls.count());
  parts[s] = request;
  parts[s].set_replica(true);
  std::vector<bool> send(calls.count(), false);
  send[s] = true;
  std::vector<std::vector<Response>> answers;
  answer->clear();
  *replica = s;
  grpc::Status st = shards.Exchange(parts, &answers, &send);
  if (!st.ok()) return st;
  if (ReplicaAnswerStands(calls, request.index(), answers[s].front())) {
    *answer = std::move(answers[s]);
  }
  return grpc::Status::OK;
}

}  // namespace gpujoin::server::router
