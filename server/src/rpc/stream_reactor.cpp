#include "rpc/stream_reactor.hpp"

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "gpujoin/common/host_allocation.hpp"
#include "gpujoin/server/logging.hpp"
#include "observe/metrics.hpp"
#include "state/memory_budget.hpp"
#include "rpc/rpc_clock.hpp"
#include "rpc/single_driver.hpp"

namespace gpujoin::server::detail {
namespace {

template <typename Traits>
class StreamReactor final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
                            public DrainableStream {
  using Request = typename Traits::Request;
  using Response = typename Traits::Response;

  struct Item {
    uint64_t seq = 0;
    grpc::ByteBuffer received;  // the message as read, until Decode takes it
    grpc::ByteBuffer sent;      // the serialised response (ProtoWire::Seal)
    Request request;
    Response response;
    typename Traits::Partial partial;
    bool ok = false;
    bool more = false;  // the response has a further message after the one being written
    Clock::time_point start;
    // The phases of its time (Metrics::RpcPhase): decode and execute seconds,
    // and when its answer was ready (for the wait to be written).
    double decode_seconds = 0;
    Clock::time_point ready_at;
    bool sealed = false;  // its first message was serialised
    // The response's share of --max-pending-response-bytes, from the end of
    // Process until its last message is written (or the stream ends).
    MemoryBudget::Reservation held;
  };

  // gRPC operations decided under the lock and started after releasing it.
  struct Actions {
    grpc::ByteBuffer* read = nullptr;
    Item* write = nullptr;  // sealed and written by the driver, outside the lock
    std::optional<grpc::Status> finish;
    bool empty() const { return read == nullptr && write == nullptr && !finish; }
  };

 public:
  StreamReactor(StreamHost* host, grpc::CallbackServerContext* context)
      : host_(host),
        traits_(host->ops()->state()),
        max_per_stream_(Traits::kSerial ? 1 : host->ops()->state().config.max_inflight_per_stream),
        pause_bytes_(host->ops()->state().config.max_message_bytes),
        inline_rows_(Traits::kMayInline ? static_cast<uint64_t>(std::max<int64_t>(
                                              0, host->ops()->state().config.inline_batch_rows))
                                        : 0) {
    host_->Register(this);
    absl::Status admitted = host_->Admit(context, Traits::kRpc);
    if (admitted.ok()) {
      admitted = host_->AcquireStream(context, Traits::kRpc, &peer_);
      counted_ = admitted.ok();
    }
    if (!admitted.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      rejected_ = ToGrpcStatus(admitted);
    }
    Drive();
  }

  void OnReadDone(bool ok) override {
    // Every stream is read as raw bytes and parsed here, never by gRPC: with the
    // typed callback API a message that fails to parse completes its read with
    // ok == false, exactly like the client's half-close, and the stream would end
    // OK with the rest of its batches silently dropped. Here `ok` is false only at
    // the end of input (half-close, cancel, a broken call), and an unparseable
    // message ends the stream with INVALID_ARGUMENT naming its position once the
    // batches before it are answered.
    // Outside the lock: nothing else touches reading_ or messages_read_ while the
    // read is in flight.
    std::optional<absl::Status> unparseable;
    absl::Status decoded;
    if (ok) {
      ++messages_read_;
      const size_t bytes = reading_->received.Length();
      bool parsed = false;
      // A message that parses but whose copy cannot be allocated is that
      // batch's RESOURCE_EXHAUSTED, in-band; the stream goes on.
      const Clock::time_point decode_start = Clock::now();
      decoded = CatchHostAllocation([this] { return BatchName(messages_read_); }, [&] {
        parsed = Traits::Decode(&reading_->received, &reading_->request);
        return absl::OkStatus();
      });
      reading_->decode_seconds = SecondsSince(decode_start);
      if (!decoded.ok()) {
        reading_->request = Request();
      } else if (!parsed) {
        unparseable = UnparseableMessageError(
            absl::StrCat("gpujoin.v1.", std::string(Traits::kRpc), "Request"), messages_read_,
            bytes,
            absl::StrCat("the stream ends here, after the responses to the ", messages_read_ - 1,
                         " messages before it"));
      }
    }
    std::unique_ptr<Item> submit;
    {
      std::lock_guard<std::mutex> lock(mu_);
      read_in_flight_ = false;
      std::unique_ptr<Item> item = std::move(reading_);
      bool answer_end = false;
      if constexpr (requires(Traits& t) { t.AnswersEnd(); }) {
        // The half-close is answered as one more message (Query's aggregate
        // plans), after every batch before it.
        answer_end = !ok && !unparseable && !finished_ && !cancelled_.load() && !draining_ &&
                     traits_.AnswersEnd();
        if (answer_end) {
          item->request = Request();
          Traits::MarkEnd(&item->request);
        }
      }
      if (answer_end) {
        reads_done_ = true;
        item->seq = next_read_seq_++;
        item->start = Clock::now();
        ++unanswered_;
        absl::Status admitted = Admission(*item);
        if (admitted.ok()) {
          ++tasks_;
          submit = std::move(item);
        } else {
          SetError(*item, admitted);
          const uint64_t seq = item->seq;
          ready_.emplace(seq, std::move(item));
        }
      } else if (!ok || unparseable) {
        reads_done_ = true;
        if (unparseable) unparseable_ = ToGrpcStatus(*unparseable);
      } else if (!finished_ && !cancelled_.load() && !draining_) {
        item->seq = next_read_seq_++;
        item->start = Clock::now();
        ++unanswered_;
        absl::Status admitted = decoded.ok() ? Admission(*item) : decoded;
        if (admitted.ok()) {
          ++tasks_;
          submit = std::move(item);
        } else {
          SetError(*item, admitted);
          const uint64_t seq = item->seq;
          ready_.emplace(seq, std::move(item));
        }
      }
    }
    if (submit) {
      if (inline_rows_ != 0 && Traits::InlineCost(submit->request) <= inline_rows_) {
        // Small CPU-backend batch: a thread wake-up would cost more than the work.
        Process(std::move(submit));
      } else {
        host_->executor()->Submit(
            [this, item = std::move(submit)]() mutable { Process(std::move(item)); });
      }
    }
    Drive();
  }

  void OnWriteDone(bool ok) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      write_in_flight_ = false;
      if (!ok) write_failed_ = true;
      if (ok && writing_->more) {
        // The batch's next message goes out before any other batch's; the batch
        // stays unanswered (it holds its place in the window) until its last.
        continue_writing_ = true;
      } else {
        writing_.reset();  // gives its bytes back to --max-pending-response-bytes
        --unanswered_;
      }
    }
    Drive();
  }

  void OnCancel() override {
    cancelled_.store(true);
    Drive();
  }

  void OnDone() override {
    LogDebug(absl::StrCat(std::string(Traits::kRpc), " stream done"));
    host_->Unregister(this);
    if (counted_) host_->ReleaseStream(peer_);
    delete this;
  }

  void Drain() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (finished_) return;
      draining_ = true;
      ++tasks_;  // keeps the reactor alive until the poke below has run
    }
    // Continue on an executor thread, never on the drainer's (which holds the
    // host's stream lock that OnDone needs); the poke lets go of its task
    // inside the driver's lock.
    host_->executor()->Submit([this] { Drive(/*release_task=*/true); });
  }

 private:
  // Global bound first, then the RPC's own in-order checks.
  absl::Status Admission(Item& item) {
    InflightLimiter* limiter = host_->limiter();
    if (!limiter->TryAcquire()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "server overloaded: ", limiter->max(),
          " batches are in flight over all streams (--max-inflight-batches); retry later"));
    }
    host_->metrics()->SetInflightBatches(limiter->current());
    absl::Status s = traits_.Admit(item.request);
    if (!s.ok()) {
      limiter->Release();
      host_->metrics()->SetInflightBatches(limiter->current());
    }
    return s;
  }

  // "Join batch 3 of the stream" for the `position`-th message read (1-based).
  static std::string BatchName(uint64_t position) {
    return absl::StrCat(std::string(Traits::kRpc), " batch ", position, " of the stream");
  }

  // Reserves the bytes the response of a successful batch holds until it is
  // written. When they do not fit beside every other stream's, the response is
  // dropped and the batch answered RESOURCE_EXHAUSTED: unread responses never
  // hold more host memory than the limit, or than one response larger than it
  // (a result --max-result-bytes admits), which is sent when it is alone.
  absl::Status HoldResponse(Item& item) {
    MemoryBudget* budget = host_->ops()->state().pending_responses;
    if (budget == nullptr) return absl::OkStatus();
    const uint64_t bytes = Traits::HeldBytes(item.request, item.response, item.partial);
    absl::StatusOr<MemoryBudget::Reservation> held = budget->ReserveOrAlone(bytes, "its response");
    if (!held.ok()) {
      host_->metrics()->CountPendingResponseRefusal();
      return absl::ResourceExhaustedError(absl::StrCat(
          BatchName(item.seq + 1), ": ", held.status().message(),
          "; these are responses not yet written to clients that read slowly or not at all: "
          "read the responses, or retry later"));
    }
    item.held = *std::move(held);
    return absl::OkStatus();
  }

  void SetError(Item& item, const absl::Status& status) {
    item.ok = false;
    item.held.Release();
    // Replaced, not cleared: a cleared protobuf keeps its fields' capacity.
    item.partial = typename Traits::Partial();
    item.response = Response();
    Traits::SetBatchError(&item.response, status);
    host_->metrics()->CountRpcError(Traits::kRpc, StatusCodeName(status.code()));
    // A rejected batch adds no rows: its claimed size is unchecked input.
    host_->metrics()->ObserveRpc(Traits::kRpc, SecondsSince(item.start), 0);
  }

  // Executor thread, or the gRPC thread for small batches (see inline_rows_).
  void Process(std::unique_ptr<Item> item) {
    absl::Status s;
    const Clock::time_point begin = Clock::now();
    if (cancelled_.load()) {
      s = absl::CancelledError("stream cancelled");
    } else {
      s = CatchHostAllocation([&] { return BatchName(item->seq + 1); }, [&] {
        return Traits::Process(*host_->ops(), item->request, &item->response, &item->partial);
      });
    }
    item->ready_at = Clock::now();
    Metrics* metrics = host_->metrics();
    metrics->ObserveRpcPhase(Traits::kRpc, Metrics::RpcPhase::kDecode, item->decode_seconds);
    metrics->ObserveRpcPhase(Traits::kRpc, Metrics::RpcPhase::kQueue,
                             std::chrono::duration<double>(begin - item->start).count());
    metrics->ObserveRpcPhase(Traits::kRpc, Metrics::RpcPhase::kExecute,
                             std::chrono::duration<double>(item->ready_at - begin).count());
    InflightLimiter* limiter = host_->limiter();
    limiter->Release();
    host_->metrics()->SetInflightBatches(limiter->current());
    if (s.ok()) s = HoldResponse(*item);
    if (s.ok()) {
      item->ok = true;
      host_->metrics()->ObserveRpc(Traits::kRpc, SecondsSince(item->start),
                                      Traits::Rows(item->request));
    } else {
      // When the batch failed for want of host memory, the thread that holds
      // what was left gives it back in a moment; the answer's few small
      // allocations wait for that rather than abort the server.
      RetryHostAllocation([&] { SetError(*item, s); });
    }
    const uint64_t seq = item->seq;
    const uint64_t held = item->held.bytes();
    RetryHostAllocation([&] {
      std::lock_guard<std::mutex> lock(mu_);
      // The map node is allocated before `item` is moved from.
      ready_.emplace(seq, std::move(item));
      waiting_bytes_ += held;
    });
    // The task is given back inside the driver's lock (SingleDriver's enter):
    // given back earlier, another thread could finish the call, and gRPC delete
    // the reactor, before this executor thread reached Drive.
    Drive(/*release_task=*/true);
  }

  // Starts whatever gRPC operations the state calls for (see SingleDriver). Finish
  // is only decided when no executor task and no write is pending.
  // `release_task`: an executor task (Process, the drain's poke) lets go of the
  // reactor under the driver's lock.
  void Drive(bool release_task = false) {
    driver_.Drive(
        mu_,
        [this, release_task] {
          if (release_task) --tasks_;
        },
        [this] { return NextActionsLocked(); },
        [this](const Actions& act) {
          if (act.read != nullptr) this->StartRead(act.read);
          if (act.write != nullptr) {
            // Serialising outside the lock, as gRPC's typed API would in StartWrite.
            const Clock::time_point seal = Clock::now();
            if (!act.write->sealed && act.write->ready_at != Clock::time_point{}) {
              host_->metrics()->ObserveRpcPhase(
                  Traits::kRpc, Metrics::RpcPhase::kWait,
                  std::chrono::duration<double>(seal - act.write->ready_at).count());
            }
            act.write->sealed = true;
            grpc::ByteBuffer* wire =
                Traits::Seal(act.write->request, &act.write->response, &act.write->sent);
            host_->metrics()->ObserveRpcPhase(Traits::kRpc, Metrics::RpcPhase::kEncode,
                                              SecondsSince(seal));
            // Read by OnWriteDone, which gRPC runs after this write completes.
            act.write->more = Traits::More(act.write->response);
            this->StartWrite(wire);
          }
          if (!act.finish) return true;
          LogDebug(absl::StrCat(std::string(Traits::kRpc), " stream finishing: code ",
                                static_cast<int>(act.finish->error_code()), " ",
                                act.finish->error_message()));
          this->Finish(*act.finish);
          return false;
        });
  }

  Actions NextActionsLocked() {
    Actions act;
    if (finished_) return act;
    if (rejected_) {
      finished_ = true;
      act.finish = *rejected_;
      return act;
    }
    const bool stopped = cancelled_.load() || write_failed_;
    if (!stopped && !write_in_flight_ && continue_writing_) {
      continue_writing_ = false;
      write_in_flight_ = true;
      act.write = writing_.get();
    } else if (!stopped && !write_in_flight_) {
      auto it = ready_.find(next_write_seq_);
      if (it != ready_.end()) {
        writing_ = std::move(it->second);
        ready_.erase(it);
        waiting_bytes_ -= writing_->held.bytes();
        ++next_write_seq_;
        if (writing_->ok) {
          // Complete's allocations (Aggregate's totals) were counted by HoldResponse.
          const absl::Status completed =
              CatchHostAllocation([this] { return BatchName(writing_->seq + 1); }, [this] {
                traits_.Complete(writing_->request, &writing_->response, writing_->partial);
                return absl::OkStatus();
              });
          if (!completed.ok()) SetError(*writing_, completed);
          // Merged: the partial is not needed any more.
          writing_->partial = typename Traits::Partial();
        }
        write_in_flight_ = true;
        // Only OnWriteDone touches writing_ again, after the driver started its write.
        act.write = writing_.get();
      }
    }
    if (tasks_ == 0 && !write_in_flight_) {
      if (stopped) {
        act.finish = grpc::Status(grpc::StatusCode::CANCELLED,
                                  write_failed_ ? "client stopped receiving" : "stream cancelled");
      } else if ((reads_done_ || draining_) && ready_.empty()) {
        if (unparseable_) {
          act.finish = *unparseable_;
        } else if (reads_done_) {
          act.finish = grpc::Status::OK;
        } else {
          act.finish = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                    "server is shutting down; reconnect and resend "
                                    "unanswered batches");
        }
      }
      if (act.finish) {
        finished_ = true;
        SetPausedLocked(false);
        // Responses that will never be written give their memory back now, not
        // when gRPC is done with the call.
        ready_.clear();
        writing_.reset();
        waiting_bytes_ = 0;
        if (!act.finish->ok()) {
          host_->metrics()->CountRpcError(
              Traits::kRpc,
              StatusCodeName(static_cast<absl::StatusCode>(act.finish->error_code())));
        }
        return act;
      }
    }
    const bool may_read = !stopped && !draining_ && !reads_done_ && !read_in_flight_ &&
                          unanswered_ < max_per_stream_;
    // A client that does not read its responses must not make the server run
    // (and hold) batch after batch for it: while the responses waiting behind
    // the one being written hold a message's worth, this stream reads nothing
    // new; gRPC's flow control then holds the client's writes back. It resumes
    // as its writes complete. (The one being written is not counted, so that a
    // stream of large responses still runs its next batch while one is sent.)
    const bool paused = may_read && waiting_bytes_ >= pause_bytes_;
    SetPausedLocked(paused);
    if (may_read && !paused) {
      reading_ = std::make_unique<Item>();
      read_in_flight_ = true;
      act.read = &reading_->received;
    }
    return act;
  }

  void SetPausedLocked(bool paused) {
    if (paused == paused_) return;
    paused_ = paused;
    host_->metrics()->AddPausedStreams(paused ? 1 : -1);
  }

  StreamHost* host_;
  Traits traits_;
  const uint32_t max_per_stream_;
  // No new batch is read while the responses in ready_ hold this many bytes
  // (--max-message-bytes).
  const uint64_t pause_bytes_;
  // Batches with InlineCost <= this run in OnReadDone (0 = never; always 0 for
  // the CUDA backend and for RPCs that may not run inline).
  const uint64_t inline_rows_;

  std::mutex mu_;
  std::unique_ptr<Item> reading_;                    // target of the read in flight
  std::unique_ptr<Item> writing_;                    // source of the write in flight
  std::map<uint64_t, std::unique_ptr<Item>> ready_;  // answered, waiting for their turn
  uint64_t messages_read_ = 0;  // every message read, for the position in errors
  uint64_t next_read_seq_ = 0;
  uint64_t next_write_seq_ = 0;
  uint32_t unanswered_ = 0;  // read and not yet written: the per-stream flow-control window
  uint64_t waiting_bytes_ = 0;  // held by the responses in ready_ (Item::held)
  bool paused_ = false;      // counted in gpujoin_paused_streams
  int tasks_ = 0;            // executor tasks that still reference this reactor
  bool read_in_flight_ = false;
  bool write_in_flight_ = false;
  bool continue_writing_ = false;  // writing_'s next message is due (Traits::More)
  bool reads_done_ = false;
  bool write_failed_ = false;
  bool draining_ = false;
  bool finished_ = false;
  SingleDriver driver_;
  std::optional<grpc::Status> rejected_;  // auth, drain or admission refusal at the start
  bool counted_ = false;  // one of --max-streams-per-connection on peer_, given back in OnDone
  std::string peer_;
  std::optional<grpc::Status> unparseable_;  // the status when a message did not parse
  std::atomic<bool> cancelled_{false};
};

}  // namespace

template <typename Traits>
grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* NewStreamReactor(
    StreamHost* host, grpc::CallbackServerContext* context) {
  return new StreamReactor<Traits>(host, context);
}

template grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
NewStreamReactor<LookupTraits>(StreamHost*, grpc::CallbackServerContext*);
template grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* NewStreamReactor<JoinTraits>(
    StreamHost*, grpc::CallbackServerContext*);
template grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
NewStreamReactor<AggregateTraits>(StreamHost*, grpc::CallbackServerContext*);
template grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* NewStreamReactor<HashTraits>(
    StreamHost*, grpc::CallbackServerContext*);
template grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
NewStreamReactor<MutateTraits>(StreamHost*, grpc::CallbackServerContext*);
template grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
NewStreamReactor<QueryTraits>(StreamHost*, grpc::CallbackServerContext*);

}  // namespace gpujoin::server::detail
