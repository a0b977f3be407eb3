// How gpujoin-router calls its shards (router.hpp): the caller's rights
// checked once, a client context per shard call (the caller's deadline and
// cancellation, the shard token, --shard-timeout), unary calls fanned out to
// every shard at once, streams forwarded to one shard or exchanged batch by
// batch with every shard, and each call recorded in the per-shard metrics.
// Every RPC's routing (route_*.cpp) goes through here.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gpujoin/v1/gpujoin.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "router/placement.hpp"
#include "router/router.hpp"
#include "router/shards.hpp"
#include "transport/auth.hpp"

namespace gpujoin::server::router {

class ShardCalls {
 public:
  ShardCalls(const RouterConfig& config, std::vector<Shard>* shards,
             const TokenAuthenticator* auth, std::string shard_token, ShardMetrics* metrics)
      : config_(config),
        shards_(*shards),
        auth_(auth),
        shard_token_(std::move(shard_token)),
        metrics_(metrics) {
    for (const Shard& s : shards_) names_.push_back(s.Name());
  }

  const RouterConfig& config() const { return config_; }
  uint32_t count() const { return static_cast<uint32_t>(shards_.size()); }
  const Shard& shard(size_t s) const { return shards_[s]; }
  const std::vector<std::string>& names() const { return names_; }
  ShardMetrics& metrics() const { return *metrics_; }
  /// Where each index lives, as last learnt (router/placement.hpp).
  Placements& placements() const { return placements_; }
  /// The shard a replicated index's next whole batch goes to: the next in
  /// turn that served at the last health poll (a replica on a failed device
  /// or a shard that is down is passed over), else the next in turn.
  uint32_t NextServingReplica() const {
    const uint32_t n = count();
    const uint32_t first = placements_.NextReplica(n);
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t s = (first + i) % n;
      if (metrics_->Serving(s)) return s;
    }
    return first;
  }
  /// The first shard that served at the last health poll, else shard 0.
  uint32_t FirstServing() const {
    for (uint32_t s = 0; s < count(); ++s) {
      if (metrics_->Serving(s)) return s;
    }
    return 0;
  }

  /// OK, or the caller's missing rights (UNAUTHENTICATED).
  grpc::Status Authorize(grpc::ServerContext* ctx) const {
    if (auth_ == nullptr) return grpc::Status::OK;
    return ToGrpc(auth_->Check(ctx->client_metadata()));
  }

  /// A client context toward a shard: the caller's deadline and cancellation,
  /// the shard token, and for unary calls at most --shard-timeout.
  std::unique_ptr<grpc::ClientContext> Context(grpc::ServerContext* ctx, bool unary) const {
    std::unique_ptr<grpc::ClientContext> c = grpc::ClientContext::FromServerContext(*ctx);
    if (!shard_token_.empty()) c->AddMetadata("authorization", "Bearer " + shard_token_);
    if (unary) {
      const auto limit = std::chrono::system_clock::now() +
                         std::chrono::microseconds(
                             static_cast<int64_t>(config_.shard_timeout_seconds * 1e6));
      if (ctx->deadline() > limit) c->set_deadline(limit);
    }
    return c;
  }

  void Record(size_t shard, const char* rpc, Clock::time_point start, bool ok) const {
    metrics_->Record(shard, rpc, std::chrono::duration<double>(Clock::now() - start).count(), ok);
  }

  /// f(s) for every shard at once (shard 0 on the calling thread).
  template <class F>
  void ForEachShard(F&& f) const {
    std::vector<std::thread> threads;
    for (size_t s = 1; s < shards_.size(); ++s) threads.emplace_back([&f, s] { f(s); });
    f(0);
    for (std::thread& t : threads) t.join();
  }

  /// A unary call on every shard at once: each shard's answer and status.
  template <class Request, class Response, class Method>
  void CallEach(grpc::ServerContext* ctx, const char* rpc, const Request& request, Method method,
                std::vector<Response>* answers, std::vector<grpc::Status>* statuses) const {
    answers->assign(shards_.size(), Response{});
    statuses->assign(shards_.size(), grpc::Status::OK);
    ForEachShard([&](size_t s) {
      auto c = Context(ctx, /*unary=*/true);
      const auto start = Clock::now();
      (*statuses)[s] = (shards_[s].stub.get()->*method)(c.get(), request, &(*answers)[s]);
      if ((*statuses)[s].error_code() == grpc::StatusCode::DEADLINE_EXCEEDED &&
          std::chrono::system_clock::now() < ctx->deadline()) {
        (*statuses)[s] = grpc::Status(
            grpc::StatusCode::UNAVAILABLE,
            absl::StrCat("did not answer ", rpc, " within --shard-timeout=",
                         config_.shard_timeout_seconds, "s"));
      }
      Record(s, rpc, start, (*statuses)[s].ok());
    });
  }

  /// A unary call on every shard; the first failure (named, unless every
  /// shard answered it alike: then it is the caller's) or every answer.
  template <class Request, class Response, class Method>
  grpc::Status FanOut(grpc::ServerContext* ctx, const char* rpc, const Request& request,
                      Method method, std::vector<Response>* answers) const {
    grpc::Status denied = Authorize(ctx);
    if (!denied.ok()) return denied;
    std::vector<grpc::Status> statuses;
    CallEach(ctx, rpc, request, method, answers, &statuses);
    return Failure(statuses);
  }

  /// The call's status from every shard's (CallEach): the first failure, as
  /// the shards said it when every shard refused the call alike, else naming
  /// the shard; OK when every shard answered.
  grpc::Status Failure(const std::vector<grpc::Status>& statuses) const {
    for (size_t s = 0; s < shards_.size(); ++s) {
      if (!statuses[s].ok()) {
        bool everywhere = CallersError(statuses[s]);
        for (const grpc::Status& t : statuses) {
          everywhere &= t.error_code() == statuses[s].error_code() &&
                        (t.error_code() == grpc::StatusCode::NOT_FOUND ||
                         t.error_message() == statuses[s].error_message());
        }
        return everywhere ? statuses[s] : ShardFailed(shards_[s], statuses[s]);
      }
    }
    return grpc::Status::OK;
  }

  /// A removal (an index, a file) on every shard, also where another shard
  /// answers NOT_FOUND (a thing on some shards only is removed from them): OK
  /// when some shard removed it, NOT_FOUND when none held it, else the first
  /// other failure, naming the shard and how many removed it.
  template <class Request, class Response, class Method>
  grpc::Status RemoveEverywhere(grpc::ServerContext* ctx, const char* rpc, const Request& request,
                                Method method, std::vector<Response>* answers,
                                std::vector<grpc::Status>* statuses) const {
    grpc::Status denied = Authorize(ctx);
    if (!denied.ok()) return denied;
    CallEach(ctx, rpc, request, method, answers, statuses);
    size_t removed = 0;
    for (const grpc::Status& st : *statuses) removed += st.ok() ? 1 : 0;
    for (size_t s = 0; s < shards_.size(); ++s) {
      const grpc::Status& st = (*statuses)[s];
      if (!st.ok() && st.error_code() != grpc::StatusCode::NOT_FOUND) {
        grpc::Status failed = ShardFailed(shards_[s], st);
        return grpc::Status(failed.error_code(),
                            absl::StrCat(failed.error_message(), " (", removed, " of ",
                                         shards_.size(), " shards removed it; ask again)"));
      }
    }
    return removed == 0 ? (*statuses)[0] : grpc::Status::OK;
  }

  /// A stream forwarded to one shard as it is, both ways at once (batches in
  /// flight stay in flight); the shard's failure is the call's, naming it.
  template <class Request, class Response, class Method>
  grpc::Status Passthrough(grpc::ServerContext* ctx,
                           grpc::ServerReaderWriter<Response, Request>* stream, size_t shard,
                           const char* rpc, Method method) const;

 private:
  const RouterConfig& config_;
  std::vector<Shard>& shards_;
  std::vector<std::string> names_;
  const TokenAuthenticator* auth_;
  std::string shard_token_;
  ShardMetrics* metrics_;
  mutable Placements placements_;
};

/// Whether a response of a continued stream (a join's) has parts after it.
template <class Response>
bool HasMore(const Response& r) {
  if constexpr (requires { r.more(); }) {
    return r.more();
  } else {
    return false;
  }
}

/// One bidirectional stream per shard, exchanged batch by batch: every batch
/// is sent to every shard (a part with no rows included, so that every batch
/// sees every shard's version of the index) and each shard's answer is read
/// (all its messages, for a continued answer). A broken shard stream fails
/// the call naming the shard, and so does a shard that has not answered a
/// batch within --shard-timeout; Close ends every stream.
template <class Request, class Response>
class ShardStreams {
 public:
  using Open = std::unique_ptr<grpc::ClientReaderWriter<Request, Response>> (
      v1::GpuJoin::Stub::*)(grpc::ClientContext*);

  ShardStreams(const ShardCalls& calls, grpc::ServerContext* ctx, Open open, const char* rpc)
      : calls_(calls), ctx_(ctx), open_(open), rpc_(rpc), peers_(calls.count()) {}
  ~ShardStreams() {
    (void)Close(grpc::Status::CANCELLED);
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (watchdog_.joinable()) watchdog_.join();
  }

  /// Sends parts[s] to shard s and reads its answer into answers[s] (one
  /// message each, or every part of a continued answer). With `send`, only
  /// the shards it marks are sent their part (the others' answers stay
  /// empty). Not OK: the call's status (the streams are closed).
  grpc::Status Exchange(const std::vector<Request>& parts,
                        std::vector<std::vector<Response>>* answers,
                        const std::vector<bool>* send = nullptr) {
    const uint32_t n = calls_.count();
    const auto start = Clock::now();
    Arm(start);
    for (uint32_t s = 0; s < n; ++s) {
      if (send != nullptr && !(*send)[s]) continue;
      Peer& p = peers_[s];
      if (p.stream == nullptr) {
        {
          std::lock_guard<std::mutex> lock(mu_);  // the watchdog reads the contexts
          p.context = calls_.Context(ctx_, /*unary=*/false);
        }
        p.stream = (calls_.shard(s).stub.get()->*open_)(p.context.get());
      }
      if (!p.stream->Write(parts[s])) return Broken(s);
    }
    answers->assign(n, {});
    for (uint32_t s = 0; s < n; ++s) {
      if (send != nullptr && !(*send)[s]) continue;
      Response r;
      do {
        if (!peers_[s].stream->Read(&r)) {
          calls_.Record(s, rpc_, start, false);
          return Broken(s);
        }
        (*answers)[s].push_back(r);
      } while (HasMore(r) && !r.has_error());
      calls_.Record(s, rpc_, start, !(*answers)[s].front().has_error());
    }
    if (!Disarm()) {
      // Every answer came, the last past the timeout: the streams were cancelled.
      return Close(ShardFailed(calls_.shard(n - 1), Late()));
    }
    return grpc::Status::OK;
  }

  /// Half-closes every shard stream and reads what each answers to the end
  /// of its stream (answers[s]: every message left), then ends them. Not OK:
  /// the call's status, naming the shard.
  grpc::Status Drain(std::vector<std::vector<Response>>* answers) {
    const uint32_t n = calls_.count();
    answers->assign(n, {});
    Arm(Clock::now());
    for (Peer& p : peers_) {
      if (p.stream != nullptr && !p.half_closed) {
        p.stream->WritesDone();
        p.half_closed = true;
      }
    }
    for (uint32_t s = 0; s < n; ++s) {
      Peer& p = peers_[s];
      if (p.stream == nullptr) continue;
      Response r;
      while (p.stream->Read(&r)) (*answers)[s].push_back(r);
      grpc::Status st = p.stream->Finish();
      p.stream.reset();
      p.half_closed = false;
      if (timed_out_) st = Late();
      if (!st.ok()) {
        Disarm();
        if (ctx_->IsCancelled()) return Close(grpc::Status::CANCELLED);
        return Close(ShardFailed(calls_.shard(s), st));
      }
    }
    Disarm();
    return grpc::Status::OK;
  }

  /// Ends every shard stream: cancelled unless `status` is OK, else
  /// half-closed and finished within --shard-timeout. Returns `status`, or
  /// when it is OK the first shard's failure to end its stream well (named).
  grpc::Status Close(grpc::Status status) {
    const bool cancel = !status.ok();
    if (!cancel) Arm(Clock::now());
    for (size_t s = 0; s < peers_.size(); ++s) {
      Peer& p = peers_[s];
      if (p.stream == nullptr) continue;
      if (cancel) p.context->TryCancel();
      // A stream Drain half-closed is not half-closed again (a second
      // WritesDone is an API misuse gRPC aborts the process on).
      if (!p.half_closed) p.stream->WritesDone();
      Response left;
      while (p.stream->Read(&left)) {
      }
      grpc::Status st = p.stream->Finish();
      p.stream.reset();
      p.half_closed = false;
      if (!cancel && timed_out_) st = Late();
      if (!cancel && status.ok() && !st.ok() && !ctx_->IsCancelled()) {
        status = ShardFailed(calls_.shard(s), st);
      }
    }
    if (!cancel) Disarm();
    return status;
  }

 private:
  struct Peer {
    std::unique_ptr<grpc::ClientContext> context;
    std::unique_ptr<grpc::ClientReaderWriter<Request, Response>> stream;
    bool half_closed = false;  // WritesDone was called (once only)
  };

  // Shard s's stream broke: the call fails naming it (unless the client left).
  grpc::Status Broken(uint32_t s) {
    Disarm();
    if (ctx_->IsCancelled()) return Close(grpc::Status::CANCELLED);
    grpc::Status st = peers_[s].stream->Finish();
    peers_[s].stream.reset();
    peers_[s].half_closed = false;
    if (timed_out_) st = Late();
    if (st.ok()) st = grpc::Status(grpc::StatusCode::UNAVAILABLE, "ended its stream early");
    return Close(ShardFailed(calls_.shard(s), st));
  }

  // The batch sent at `start` must be answered by start + --shard-timeout:
  // past it the watchdog cancels the shard streams (the read waiting on the
  // late shard fails, and Broken names it).
  void Arm(Clock::time_point start) {
    const auto limit = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(calls_.config().shard_timeout_seconds));
    std::lock_guard<std::mutex> lock(mu_);
    deadline_ = start + limit;
    armed_ = true;
    timed_out_ = false;
    if (!watchdog_.joinable()) watchdog_ = std::thread([this] { Watch(); });
    cv_.notify_all();
  }
  // False when the watchdog fired (the streams are cancelled).
  bool Disarm() {
    std::lock_guard<std::mutex> lock(mu_);
    armed_ = false;
    return !timed_out_;
  }
  grpc::Status Late() const {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        absl::StrCat("did not answer a ", rpc_, " batch within --shard-timeout=",
                                     calls_.config().shard_timeout_seconds, "s"));
  }
  void Watch() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
      if (!armed_) {
        cv_.wait(lock);
        continue;
      }
      if (cv_.wait_until(lock, deadline_) == std::cv_status::timeout && armed_ &&
          Clock::now() >= deadline_) {
        timed_out_ = true;
        armed_ = false;
        for (Peer& p : peers_) {
          if (p.context != nullptr) p.context->TryCancel();
        }
      }
    }
  }

  const ShardCalls& calls_;
  grpc::ServerContext* ctx_;
  Open open_;
  const char* rpc_;
  std::vector<Peer> peers_;
  // The watchdog of --shard-timeout (Arm, Disarm, Watch).
  std::mutex mu_;
  std::condition_variable cv_;
  Clock::time_point deadline_;
  bool armed_ = false;
  bool stopping_ = false;
  std::atomic<bool> timed_out_{false};  // set by the watchdog; reset by Arm
  std::thread watchdog_;
};

/// The in-band error of a batch some shard refused: the first refusal, its
/// message naming the shard unless every shard asked said the same (then it
/// is the caller's, as from one server). nullopt when no shard refused it.
/// Shards without an answer (not asked) are skipped.
template <class Response>
std::optional<v1::BatchError> RefusedBatch(const ShardCalls& calls,
                                           const std::vector<std::vector<Response>>& answers) {
  for (size_t s = 0; s < answers.size(); ++s) {
    if (answers[s].empty()) continue;
    const Response& a = answers[s].front();
    if (!a.has_error()) continue;
    bool same = true;
    for (const auto& b : answers) {
      if (b.empty()) continue;
      same &= b.front().has_error() && b.front().error().code() == a.error().code() &&
              b.front().error().message() == a.error().message();
    }
    v1::BatchError e;
    e.set_code(a.error().code());
    e.set_message(same ? a.error().message()
                       : absl::StrCat(calls.shard(s).Name(), ": ", a.error().message()));
    return e;
  }
  return std::nullopt;
}

// ---------------------------------------------------------------- Passthrough

template <class Request, class Response, class Method>
grpc::Status ShardCalls::Passthrough(grpc::ServerContext* ctx,
                                     grpc::ServerReaderWriter<Response, Request>* stream,
                                     size_t shard, const char* rpc, Method method) const {
  auto context = Context(ctx, /*unary=*/false);
  auto peer = (shards_[shard].stub.get()->*method)(context.get());
  const auto limit = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(config_.shard_timeout_seconds));
  const std::string late = absl::StrCat("did not answer a ", rpc,
                                        " batch within --shard-timeout=",
                                        config_.shard_timeout_seconds, "s");
  std::mutex mu;
  std::condition_variable changed;
  // Batches sent and not yet answered: when they were sent, and their ids.
  std::deque<std::pair<Clock::time_point, uint64_t>> sent;
  // The oldest unanswered batch is due --shard-timeout after it was sent, and
  // once the client half-closed, the end of the shard's stream (a Query
  // plan's groups among it) after the half-close; either no sooner than
  // --shard-timeout after the shard's last answer reached the client (a
  // client that reads slowly holds the answers back, not the shard), and
  // never while an answer is being written to the client.
  Clock::time_point progress = Clock::now();
  std::optional<Clock::time_point> half_closed;
  bool writing = false, client_gone = false, done = false, timed_out = false;
  bool reader_done = false;  // the shard's stream ended: nothing more is answered
  bool unanswered = false;   // some batch got an error in-band instead of its answer
  std::thread watchdog([&] {
    std::unique_lock<std::mutex> lock(mu);
    while (!done && !timed_out) {
      if (writing || (sent.empty() && !half_closed)) {
        changed.wait(lock);
        continue;
      }
      const Clock::time_point since = sent.empty() ? *half_closed : sent.front().first;
      const Clock::time_point due = std::max(since, progress) + limit;
      if (Clock::now() < due) {
        changed.wait_until(lock, due);
        continue;
      }
      timed_out = true;  // the read below fails; its batches are answered in-band
      context->TryCancel();
    }
  });
  std::thread answers([&] {
    Response answer;
    while (peer->Read(&answer)) {
      Clock::time_point start;
      {
        std::lock_guard<std::mutex> lock(mu);
        start = sent.empty() ? Clock::now() : sent.front().first;
        // A continued answer's last part (or an error) answers its batch.
        if (!sent.empty() && (!HasMore(answer) || answer.has_error())) sent.pop_front();
        writing = true;
      }
      metrics_->Record(shard, rpc, std::chrono::duration<double>(Clock::now() - start).count(),
                       !answer.has_error());
      const bool written = stream->Write(answer);
      std::lock_guard<std::mutex> lock(mu);
      writing = false;
      progress = Clock::now();
      changed.notify_all();
      if (!written) {
        client_gone = true;
        reader_done = true;
        context->TryCancel();
        return;
      }
    }
    // The shard ended its stream, or missed --shard-timeout. A batch it left
    // unanswered gets an error naming it (the client may be waiting for that
    // answer before it sends more or half-closes); the call then fails.
    std::deque<std::pair<Clock::time_point, uint64_t>> left;
    bool late_now = false;
    {
      std::lock_guard<std::mutex> lock(mu);
      reader_done = true;
      left.swap(sent);
      unanswered = !left.empty();
      late_now = timed_out;
    }
    for (const auto& [when, batch_id] : left) {
      Response error;
      error.set_batch_id(batch_id);
      error.mutable_error()->set_code(static_cast<int>(grpc::StatusCode::UNAVAILABLE));
      error.mutable_error()->set_message(absl::StrCat(
          shards_[shard].Name(), ": ",
          late_now ? late : std::string("its stream ended before answering this batch")));
      metrics_->Record(shard, rpc, 0, false);
      if (!stream->Write(error)) break;
    }
  });
  Request request;
  bool shard_broke = false;
  while (stream->Read(&request)) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (reader_done) {
        // Nothing would answer this batch: the call fails instead.
        shard_broke = true;
        break;
      }
      sent.emplace_back(Clock::now(), request.batch_id());
      changed.notify_all();
    }
    if (!peer->Write(request)) {
      shard_broke = true;
      break;
    }
  }
  if (!shard_broke) peer->WritesDone();
  {
    std::lock_guard<std::mutex> lock(mu);
    half_closed = Clock::now();
    changed.notify_all();
  }
  answers.join();
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
    changed.notify_all();
  }
  watchdog.join();
  grpc::Status st = peer->Finish();
  if (client_gone) return grpc::Status::CANCELLED;
  if (timed_out) {
    st = grpc::Status(grpc::StatusCode::UNAVAILABLE, late);
  } else if (st.ok() && (shard_broke || unanswered)) {
    st = grpc::Status(grpc::StatusCode::UNAVAILABLE, "ended its stream early");
  }
  if (!st.ok()) return ShardFailed(shards_[shard], st);
  return grpc::Status::OK;
}

}  // namespace gpujoin::server::router
