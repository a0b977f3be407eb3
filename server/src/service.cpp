#include "gpujoin/server/service.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <variant>

#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"
#include "gpujoin/server/logging.hpp"
#include "gpujoin/server/lookup_wire.hpp"

namespace gpujoin::server {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

uint64_t U32Rows(bool has, const v1::U32Column& c) {
  return has ? c.packed().size() / 4 + static_cast<uint64_t>(c.values().v_size()) : 0;
}

// ---------------------------------------------------------------- stream traits
// Each bidi RPC is described by a traits type: its messages, the per-batch work
// (on the executor), cheap in-order admission (on the reactor) and the in-order
// completion step before a response is written.

// How an RPC's messages meet the wire, for RPCs served with generated protobuf
// messages: gRPC parses into and serialises from the Item's own messages.
template <typename RequestT, typename ResponseT>
struct ProtoWire {
  using ReadMessage = RequestT;
  using WriteMessage = ResponseT;
  static ReadMessage* ReadTarget(RequestT& r) { return &r; }
  /// After a successful read: false makes it count as a failed read (as gRPC
  /// does for a message it cannot parse).
  static bool Decode(RequestT&) { return true; }
  /// Replaces the response with an in-band error.
  static void SetBatchError(ResponseT* out, const absl::Status& status) {
    out->Clear();
    out->mutable_error()->set_code(static_cast<int>(status.code()));
    out->mutable_error()->set_message(std::string(status.message()));
  }
  /// Stamps the batch ID; returns what to write.
  static WriteMessage* Seal(const RequestT& r, ResponseT* out) {
    out->set_batch_id(r.batch_id());
    return out;
  }
};

// Defaults for RPCs whose batches are independent: no per-stream state, nothing to
// admit or complete in order, never run on the gRPC thread.
template <typename RequestT, typename ResponseT>
struct StatelessTraits : ProtoWire<RequestT, ResponseT> {
  using Request = RequestT;
  using Response = ResponseT;
  using Partial = std::monostate;
  explicit StatelessTraits(const ServiceState&) {}
  absl::Status Admit(const Request&) { return absl::OkStatus(); }
  void Complete(const Request&, Response*, Partial&) {}
  static constexpr bool kMayInline = false;
  static uint64_t InlineCost(const Request&) { return 0; }
};

// Lookup travels as raw byte buffers (lookup_wire.hpp): packed keys are copied
// once from the received slices into a backend host buffer, and the outputs are
// written back as slices referencing the engine's output buffer. Requests the
// scan does not accept are parsed by protobuf and served by Operations::Lookup,
// exactly as before.
struct LookupWireRequest {
  grpc::ByteBuffer buffer;          // as received
  std::optional<LookupWire> fast;   // the scanned fast-path view, when accepted
  v1::LookupRequest message;        // the whole request otherwise
  const v1::LookupRequest& fields() const { return fast ? fast->fields : message; }
};

struct LookupWireResponse {
  std::optional<PackedLookupResult> packed;  // fast-path result
  v1::LookupResponse message;                // protobuf-path result, or an error
  grpc::ByteBuffer buffer;                   // what is written
  bool sealed = false;                       // `buffer` holds the final bytes
};

struct LookupTraits : StatelessTraits<LookupWireRequest, LookupWireResponse> {
  using StatelessTraits::StatelessTraits;
  using ReadMessage = grpc::ByteBuffer;
  using WriteMessage = grpc::ByteBuffer;
  static constexpr std::string_view kRpc = "Lookup";

  static ReadMessage* ReadTarget(Request& r) { return &r.buffer; }
  // On the gRPC thread, where gRPC parsed the message before: a scan that copies
  // nothing large, or the protobuf parse gRPC would have done.
  static bool Decode(Request& r) {
    r.fast = ScanLookupRequest(r.buffer);
    if (r.fast) return true;
    return grpc::SerializationTraits<v1::LookupRequest>::Deserialize(&r.buffer, &r.message).ok();
  }
  static absl::Status Process(Operations& ops, const Request& r, Response* out, Partial*) {
    if (r.fast) {
      const LookupWire& wire = *r.fast;
      PackedLookupResult result;
      GPUJOIN_RETURN_IF_ERROR(ops.LookupPacked(
          wire.fields, wire.rows(), [&wire](uint8_t* dst) { wire.CopyKeys(dst); }, &result));
      out->packed = std::move(result);
    } else {
      GPUJOIN_RETURN_IF_ERROR(ops.Lookup(r.message, &out->message));
    }
    // Serialise here, on the executor, rather than under the stream's lock.
    Seal(r, out);
    return absl::OkStatus();
  }
  static void SetBatchError(Response* out, const absl::Status& status) {
    out->packed.reset();
    out->sealed = false;
    out->buffer.Clear();
    ProtoWire<v1::LookupRequest, v1::LookupResponse>::SetBatchError(&out->message, status);
  }
  static WriteMessage* Seal(const Request& r, Response* out) {
    if (out->sealed) return &out->buffer;
    const uint64_t batch_id = r.fields().batch_id();
    if (out->packed) {
      out->buffer = SerializeLookupResponse(batch_id, std::move(*out->packed));
      out->packed.reset();
    } else {
      out->message.set_batch_id(batch_id);
      bool own = false;
      // Serialising a protobuf message into a ByteBuffer cannot fail short of
      // running out of memory, which gRPC would not survive either.
      (void)grpc::SerializationTraits<v1::LookupResponse>::Serialize(out->message, &out->buffer,
                                                                     &own);
    }
    out->sealed = true;
    return &out->buffer;
  }
  static uint64_t Rows(const Request& r) {
    return r.fast ? r.fast->rows() : U32Rows(r.message.has_keys(), r.message.keys());
  }
  /// Work bound for running on the gRPC thread: rows probed and written.
  static constexpr bool kMayInline = true;
  static uint64_t InlineCost(const Request& r) { return Rows(r); }
};

struct JoinTraits : StatelessTraits<v1::JoinRequest, v1::JoinResponse> {
  using StatelessTraits::StatelessTraits;
  static constexpr std::string_view kRpc = "Join";
  static absl::Status Process(Operations& ops, const Request& r, Response* out, Partial*) {
    return ops.Join(r, out);
  }
  static uint64_t Rows(const Request& r) {
    uint64_t rows = 0;
    for (const auto& b : r.batches()) rows += U32Rows(b.has_keys(), b.keys());
    return rows;
  }
  static constexpr bool kMayInline = true;
  /// Rows probed plus pair capacity (the response is sized, and zero-filled, to it).
  static uint64_t InlineCost(const Request& r) {
    uint64_t cost = 0;
    for (const auto& b : r.batches()) {
      const uint64_t rows = U32Rows(b.has_keys(), b.keys());
      cost += std::max<uint64_t>(rows, b.capacity());
    }
    return cost;
  }
};

struct AggregateTraits : ProtoWire<v1::AggregateRequest, v1::AggregateResponse> {
  using Request = v1::AggregateRequest;
  using Response = v1::AggregateResponse;
  using Partial = AggregatePartial;
  static constexpr std::string_view kRpc = "Aggregate";
  explicit AggregateTraits(const ServiceState& s) : max_message_bytes(s.config.max_message_bytes) {}
  absl::Status Admit(const Request& r) { return stream.Admit(r, max_message_bytes); }
  static absl::Status Process(Operations& ops, const Request& r, Response* out, Partial* p) {
    return ops.Aggregate(r, out, p);
  }
  void Complete(const Request& r, Response* out, Partial& p) { stream.Complete(r, out, p); }
  static uint64_t Rows(const Request& r) { return U32Rows(r.has_keys(), r.keys()); }
  // Work depends on the group count, not the rows: always on the executor.
  static constexpr bool kMayInline = false;
  static uint64_t InlineCost(const Request&) { return 0; }

  uint64_t max_message_bytes;
  AggregateStream stream;
};

struct HashTraits : StatelessTraits<v1::HashRequest, v1::HashResponse> {
  using StatelessTraits::StatelessTraits;
  static constexpr std::string_view kRpc = "Hash";
  static absl::Status Process(Operations& ops, const Request& r, Response* out, Partial*) {
    return ops.Hash(r, out);
  }
  static uint64_t Rows(const Request& r) {
    return r.columns_size() == 0 ? 0 : r.columns(0).length();
  }
};

// ---------------------------------------------------------------- stream reactor


// The drive loop shared by the reactors. gRPC may run reactions inline inside
// StartRead/StartWrite, and Finish may lead to OnDone (delete this), so only one
// thread drives at a time: another caller leaves a note and the driver loops once
// more. `next()` runs with `mu` held and returns the operations to start (an
// empty Actions when there is nothing to do); `start(actions)` runs without the
// lock and returns false once it called Finish, after which nothing may touch the
// reactor (or this driver, which lives in it).
class SingleDriver {
 public:
  template <typename Next, typename Start>
  void Drive(std::mutex& mu, Next next, Start start) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (driving_) {
        redrive_ = true;
        return;
      }
      driving_ = true;
    }
    for (;;) {
      decltype(next()) act;
      {
        std::lock_guard<std::mutex> lock(mu);
        act = next();
        if (act.empty() && !redrive_) {
          driving_ = false;
          return;
        }
        redrive_ = false;
      }
      if (!start(act)) return;
    }
  }

 private:
  bool driving_ = false;  // guarded by the caller's mutex
  bool redrive_ = false;  // guarded by the caller's mutex
};

template <typename Traits>
class StreamReactor final
    : public grpc::ServerBidiReactor<typename Traits::ReadMessage, typename Traits::WriteMessage>,
      public DrainableStream {
  using Request = typename Traits::Request;
  using Response = typename Traits::Response;

  struct Item {
    uint64_t seq = 0;
    Request request;
    Response response;
    typename Traits::Partial partial;
    bool ok = false;
    Clock::time_point start;
  };

  // gRPC operations decided under the lock and started after releasing it.
  struct Actions {
    typename Traits::ReadMessage* read = nullptr;
    typename Traits::WriteMessage* write = nullptr;
    std::optional<grpc::Status> finish;
    bool empty() const { return read == nullptr && write == nullptr && !finish; }
  };

 public:
  StreamReactor(GpuJoinService* service, grpc::CallbackServerContext* context)
      : service_(service),
        traits_(service->ops()->state()),
        max_per_stream_(service->ops()->state().config.max_inflight_per_stream),
        inline_rows_(Traits::kMayInline
                         ? static_cast<uint64_t>(
                               std::max<int64_t>(0, service->ops()->state().config.inline_batch_rows))
                         : 0) {
    service_->Register(this);
    absl::Status admitted = service_->Admit(context, Traits::kRpc);
    if (!admitted.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      rejected_ = ToGrpcStatus(admitted);
    }
    Drive();
  }

  void OnReadDone(bool ok) override {
    // Outside the lock: nothing else touches reading_ while its read is in flight.
    // A message that does not parse counts as a failed read, as gRPC reports it.
    if (ok && !Traits::Decode(reading_->request)) ok = false;
    std::unique_ptr<Item> submit;
    {
      std::lock_guard<std::mutex> lock(mu_);
      read_in_flight_ = false;
      std::unique_ptr<Item> item = std::move(reading_);
      if (!ok) {
        reads_done_ = true;
      } else if (!finished_ && !cancelled_.load() && !draining_) {
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
      }
    }
    if (submit) {
      if (inline_rows_ != 0 && Traits::InlineCost(submit->request) <= inline_rows_) {
        // Small CPU-backend batch: a thread wake-up would cost more than the work.
        Process(std::move(submit));
      } else {
        service_->executor()->Submit(
            [this, item = std::move(submit)]() mutable { Process(std::move(item)); });
      }
    }
    Drive();
  }

  void OnWriteDone(bool ok) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      write_in_flight_ = false;
      writing_.reset();
      --unanswered_;
      if (!ok) write_failed_ = true;
    }
    Drive();
  }

  void OnCancel() override {
    cancelled_.store(true);
    Drive();
  }

  void OnDone() override {
    LogDebug(absl::StrCat(std::string(Traits::kRpc), " stream done"));
    service_->Unregister(this);
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
    // service's stream lock that OnDone needs).
    service_->executor()->Submit([this] {
      {
        std::lock_guard<std::mutex> lock(mu_);
        --tasks_;
      }
      Drive();
    });
  }

 private:
  // Global bound first, then the RPC's own in-order checks.
  absl::Status Admission(Item& item) {
    InflightLimiter* limiter = service_->limiter();
    if (!limiter->TryAcquire()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "server overloaded: ", limiter->max(),
          " batches are in flight over all streams (--max-inflight-batches); retry later"));
    }
    service_->metrics()->SetInflightBatches(limiter->current());
    absl::Status s = traits_.Admit(item.request);
    if (!s.ok()) {
      limiter->Release();
      service_->metrics()->SetInflightBatches(limiter->current());
    }
    return s;
  }

  void SetError(Item& item, const absl::Status& status) {
    item.ok = false;
    Traits::SetBatchError(&item.response, status);
    service_->metrics()->CountRpcError(Traits::kRpc, StatusCodeName(status.code()));
    service_->metrics()->ObserveRpc(Traits::kRpc, SecondsSince(item.start),
                                    Traits::Rows(item.request));
  }

  // Executor thread, or the gRPC thread for small batches (see inline_rows_).
  void Process(std::unique_ptr<Item> item) {
    absl::Status s;
    if (cancelled_.load()) {
      s = absl::CancelledError("stream cancelled");
    } else {
      s = Traits::Process(*service_->ops(), item->request, &item->response, &item->partial);
    }
    InflightLimiter* limiter = service_->limiter();
    limiter->Release();
    service_->metrics()->SetInflightBatches(limiter->current());
    if (s.ok()) {
      item->ok = true;
      service_->metrics()->ObserveRpc(Traits::kRpc, SecondsSince(item->start),
                                      Traits::Rows(item->request));
    } else {
      SetError(*item, s);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      --tasks_;
      const uint64_t seq = item->seq;
      ready_.emplace(seq, std::move(item));
    }
    Drive();
  }

  // Starts whatever gRPC operations the state calls for (see SingleDriver). Finish
  // is only decided when no executor task and no write is pending.
  void Drive() {
    driver_.Drive(
        mu_, [this] { return NextActionsLocked(); },
        [this](const Actions& act) {
          if (act.read != nullptr) this->StartRead(act.read);
          if (act.write != nullptr) this->StartWrite(act.write);
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
    if (!stopped && !write_in_flight_) {
      auto it = ready_.find(next_write_seq_);
      if (it != ready_.end()) {
        writing_ = std::move(it->second);
        ready_.erase(it);
        ++next_write_seq_;
        if (writing_->ok) traits_.Complete(writing_->request, &writing_->response, writing_->partial);
        write_in_flight_ = true;
        act.write = Traits::Seal(writing_->request, &writing_->response);
      }
    }
    if (tasks_ == 0 && !write_in_flight_) {
      if (stopped) {
        act.finish = grpc::Status(grpc::StatusCode::CANCELLED,
                                  write_failed_ ? "client stopped receiving" : "stream cancelled");
      } else if ((reads_done_ || draining_) && ready_.empty()) {
        act.finish = reads_done_ ? grpc::Status::OK
                                 : grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                                "server is shutting down; reconnect and resend "
                                                "unanswered batches");
      }
      if (act.finish) {
        finished_ = true;
        if (!act.finish->ok()) {
          service_->metrics()->CountRpcError(
              Traits::kRpc, StatusCodeName(static_cast<absl::StatusCode>(act.finish->error_code())));
        }
        return act;
      }
    }
    if (!stopped && !draining_ && !reads_done_ && !read_in_flight_ &&
        unanswered_ < max_per_stream_) {
      reading_ = std::make_unique<Item>();
      read_in_flight_ = true;
      act.read = Traits::ReadTarget(reading_->request);
    }
    return act;
  }

  GpuJoinService* service_;
  Traits traits_;
  const uint32_t max_per_stream_;
  // Batches with InlineCost <= this run in OnReadDone (0 = never; always 0 for
  // the CUDA backend and for RPCs that may not run inline).
  const uint64_t inline_rows_;

  std::mutex mu_;
  std::unique_ptr<Item> reading_;  // target of the read in flight
  std::unique_ptr<Item> writing_;  // source of the write in flight
  std::map<uint64_t, std::unique_ptr<Item>> ready_;  // answered, waiting for their turn
  uint64_t next_read_seq_ = 0;
  uint64_t next_write_seq_ = 0;
  uint32_t unanswered_ = 0;  // read and not yet written: the per-stream flow-control window
  int tasks_ = 0;            // executor tasks that still reference this reactor
  bool read_in_flight_ = false;
  bool write_in_flight_ = false;
  bool reads_done_ = false;
  bool write_failed_ = false;
  bool draining_ = false;
  bool finished_ = false;
  SingleDriver driver_;
  std::optional<grpc::Status> rejected_;  // auth or drain refusal at the start
  std::atomic<bool> cancelled_{false};
};

// ---------------------------------------------------------------- build reactor

BuildResult BuildResultFor(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk: return BuildResult::kOk;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition: return BuildResult::kInvalidArgument;
    case absl::StatusCode::kResourceExhausted: return BuildResult::kResourceExhausted;
    case absl::StatusCode::kAlreadyExists: return BuildResult::kAlreadyExists;
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kDeadlineExceeded: return BuildResult::kCancelled;
    default: return BuildResult::kError;
  }
}

class BuildReactor final : public grpc::ServerReadReactor<v1::BuildIndexRequest> {
 public:
  BuildReactor(GpuJoinService* service, grpc::CallbackServerContext* context,
               v1::BuildIndexResponse* response)
      : service_(service),
        context_(context),
        response_(response),
        session_(service->ops()),
        start_(Clock::now()) {
    absl::Status admitted = service_->Admit(context, "BuildIndex");
    if (!admitted.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      rejected_ = true;
      result_ = admitted;
    }
    Drive();
  }

  void OnReadDone(bool ok) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      read_in_flight_ = false;
      if (!ok) {
        input_done_ = true;
        input_end_ = Clock::now();
        if (context_->IsCancelled()) cancelled_.store(true);
      } else if (!result_) {
        // Validation and decoding only (no copies of aligned packed bytes): cheap
        // enough for the reactor thread.
        absl::Status s = session_.Add(std::move(message_));
        if (!s.ok()) result_ = s;
      }
      message_.Clear();
    }
    Drive();
  }

  void OnCancel() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled_.store(true);
    }
    cancel_cv_.notify_all();
    Drive();
  }

  void OnDone() override { delete this; }

 private:
  // A client's cancellation reaches the reactor twice, unordered: as a failed read
  // (which ends the input and starts the build) and as OnCancel. So that a cancelled
  // call never installs its index, the install waits for a cancellation until this
  // long after the end of input; a build that took longer has already waited it out.
  static constexpr std::chrono::milliseconds kCancelGrace{20};

  struct Actions {
    bool read = false;
    bool build = false;
    std::optional<absl::Status> finish;
    bool empty() const { return !read && !build && !finish; }
  };

  Actions NextActionsLocked() {
    Actions act;
    if (finished_ || building_) return act;  // a running build reports back itself
    if (!result_ && cancelled_.load()) {
      result_ = absl::CancelledError("build cancelled by the client; nothing was changed");
    }
    if (result_) {
      finished_ = true;
      act.finish = *result_;
      return act;
    }
    if (input_done_) {
      building_ = true;
      act.build = true;
    } else if (!read_in_flight_) {
      read_in_flight_ = true;
      act.read = true;
    }
    return act;
  }

  // Starts whatever the state calls for (see SingleDriver).
  void Drive() {
    driver_.Drive(
        mu_, [this] { return NextActionsLocked(); },
        [this](const Actions& act) {
          if (act.read) StartRead(&message_);
          if (act.build) service_->executor()->Submit([this] { Build(); });
          if (!act.finish) return true;
          if (!rejected_) Account(*act.finish);
          Finish(ToGrpcStatus(*act.finish));
          return false;
        });
  }

  // Executor thread: the engine build, then the atomic install.
  void Build() {
    absl::StatusOr<std::shared_ptr<const IndexVersion>> built = session_.Finish([this] {
      std::unique_lock<std::mutex> lock(mu_);
      auto seen = [this] { return cancelled_.load() || context_->IsCancelled(); };
      cancel_cv_.wait_until(lock, input_end_ + kCancelGrace, seen);
      return seen();
    });
    {
      std::lock_guard<std::mutex> lock(mu_);
      building_ = false;
      if (built.ok()) Operations::FillIndexInfo(**built, response_->mutable_index());
      result_ = built.status();
    }
    Drive();
  }

  void Account(const absl::Status& s) {
    Metrics* metrics = service_->metrics();
    if (!session_.name().empty()) metrics->CountBuild(session_.name(), BuildResultFor(s.code()));
    if (!s.ok()) metrics->CountRpcError("BuildIndex", StatusCodeName(s.code()));
    metrics->ObserveRpc("BuildIndex", SecondsSince(start_), session_.rows());
    if (s.ok()) {
      LogInfo(absl::StrCat("built index \"", session_.name(), "\": ", session_.rows(), " rows in ",
                           SecondsSince(start_), " s"));
    } else {
      LogDebug(absl::StrCat("BuildIndex failed: ", s.ToString()));
    }
  }

  GpuJoinService* service_;
  grpc::CallbackServerContext* context_;
  v1::BuildIndexResponse* response_;
  BuildSession session_;
  v1::BuildIndexRequest message_;
  Clock::time_point start_;
  std::mutex mu_;
  std::optional<absl::Status> result_;  // the call's outcome once known
  bool rejected_ = false;
  bool read_in_flight_ = false;
  bool input_done_ = false;
  bool building_ = false;
  bool finished_ = false;
  SingleDriver driver_;
  std::atomic<bool> cancelled_{false};
  std::condition_variable cancel_cv_;   // signalled by OnCancel
  Clock::time_point input_end_;         // guarded by mu_
};

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

GpuJoinService::GpuJoinService(Operations* ops, Executor* executor, InflightLimiter* limiter,
                               const TokenAuthenticator* auth)
    : ops_(ops), executor_(executor), limiter_(limiter), auth_(auth) {}

absl::Status GpuJoinService::Admit(grpc::CallbackServerContext* context, std::string_view rpc) {
  absl::Status s;
  if (auth_ != nullptr) s = auth_->Check(context->client_metadata());
  if (s.ok() && draining_.load()) {
    s = absl::UnavailableError("server is shutting down; retry on another instance");
  }
  if (!s.ok()) metrics()->CountRpcError(rpc, StatusCodeName(s.code()));
  return s;
}

void GpuJoinService::Register(DrainableStream* stream) {
  std::lock_guard<std::mutex> lock(streams_mu_);
  streams_.insert(stream);
}

void GpuJoinService::Unregister(DrainableStream* stream) {
  std::lock_guard<std::mutex> lock(streams_mu_);
  streams_.erase(stream);
}

void GpuJoinService::BeginDrain() {
  draining_.store(true);
  std::lock_guard<std::mutex> lock(streams_mu_);
  LogDebug(absl::StrCat("draining ", streams_.size(), " open streams"));
  for (DrainableStream* s : streams_) s->Drain();
}

template <typename Fn>
grpc::ServerUnaryReactor* GpuJoinService::Unary(grpc::CallbackServerContext* context,
                                                std::string_view rpc, Fn fn) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::Status admitted = Admit(context, rpc);
  if (!admitted.ok()) {
    reactor->Finish(ToGrpcStatus(admitted));
    return reactor;
  }
  const auto start = Clock::now();
  executor_->Submit([this, reactor, rpc, start, fn = std::move(fn)]() mutable {
    absl::Status s = fn();
    metrics()->ObserveRpc(rpc, SecondsSince(start), 0);
    if (!s.ok()) metrics()->CountRpcError(rpc, StatusCodeName(s.code()));
    reactor->Finish(ToGrpcStatus(s));
  });
  return reactor;
}

grpc::ServerReadReactor<v1::BuildIndexRequest>* GpuJoinService::BuildIndex(
    grpc::CallbackServerContext* context, v1::BuildIndexResponse* response) {
  return new BuildReactor(this, context, response);
}

grpc::ServerUnaryReactor* GpuJoinService::DropIndex(grpc::CallbackServerContext* context,
                                                    const v1::DropIndexRequest* request,
                                                    v1::DropIndexResponse* response) {
  return Unary(context, "DropIndex", [=, this] {
    absl::Status s = ops_->DropIndex(*request, response);
    if (s.ok()) LogInfo(absl::StrCat("dropped index \"", request->name(), "\""));
    return s;
  });
}

grpc::ServerUnaryReactor* GpuJoinService::ListIndexes(grpc::CallbackServerContext* context,
                                                      const v1::ListIndexesRequest*,
                                                      v1::ListIndexesResponse* response) {
  return Unary(
      context, "ListIndexes", [=, this] { return ops_->ListIndexes(response); });
}

grpc::ServerUnaryReactor* GpuJoinService::DescribeIndex(grpc::CallbackServerContext* context,
                                                        const v1::DescribeIndexRequest* request,
                                                        v1::DescribeIndexResponse* response) {
  return Unary(
      context, "DescribeIndex", [=, this] { return ops_->DescribeIndex(*request, response); });
}

grpc::ServerUnaryReactor* GpuJoinService::GetServerInfo(grpc::CallbackServerContext* context,
                                                        const v1::GetServerInfoRequest*,
                                                        v1::GetServerInfoResponse* response) {
  return Unary(
      context, "GetServerInfo", [=, this] { return ops_->GetServerInfo(serving(), response); });
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* GpuJoinService::Lookup(
    grpc::CallbackServerContext* context) {
  return new StreamReactor<LookupTraits>(this, context);
}

grpc::ServerBidiReactor<v1::JoinRequest, v1::JoinResponse>* GpuJoinService::Join(
    grpc::CallbackServerContext* context) {
  return new StreamReactor<JoinTraits>(this, context);
}

grpc::ServerBidiReactor<v1::AggregateRequest, v1::AggregateResponse>* GpuJoinService::Aggregate(
    grpc::CallbackServerContext* context) {
  return new StreamReactor<AggregateTraits>(this, context);
}

grpc::ServerBidiReactor<v1::HashRequest, v1::HashResponse>* GpuJoinService::Hash(
    grpc::CallbackServerContext* context) {
  return new StreamReactor<HashTraits>(this, context);
}

}  // namespace gpujoin::server
