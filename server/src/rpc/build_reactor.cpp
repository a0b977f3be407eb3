#include "rpc/build_reactor.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "gpujoin/common/host_allocation.hpp"
#include "gpujoin/server/logging.hpp"
#include "observe/metrics.hpp"
#include "rpc/rpc_clock.hpp"
#include "rpc/rpc_traits.hpp"
#include "rpc/single_driver.hpp"
#include "storage/snapshot_store.hpp"

namespace gpujoin::server::detail {
namespace {

BuildResult BuildResultFor(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return BuildResult::kOk;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
      return BuildResult::kInvalidArgument;
    case absl::StatusCode::kResourceExhausted:
      return BuildResult::kResourceExhausted;
    case absl::StatusCode::kAlreadyExists:
      return BuildResult::kAlreadyExists;
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kDeadlineExceeded:
      return BuildResult::kCancelled;
    default:
      return BuildResult::kError;
  }
}

class BuildReactor final : public grpc::ServerReadReactor<grpc::ByteBuffer>,
                           public DrainableStream {
 public:
  BuildReactor(StreamHost* host, grpc::CallbackServerContext* context,
               grpc::ByteBuffer* response)
      : host_(host),
        context_(context),
        response_wire_(response),
        session_(host->ops()),
        start_(Clock::now()) {
    // Registered before the admission, as StreamReactor is: a drain that begins
    // after the admission saw no drain finds this stream registered and ends it
    // (registering after it left a window where the drain missed the stream and an
    // idle one held the shutdown for the whole --drain-timeout). A drain that
    // comes while the admission runs is only noted; the outcome is settled here.
    host_->Register(this);
    absl::Status admitted = host_->Admit(context, "BuildIndex");
    if (admitted.ok()) {
      admitted = host_->AcquireStream(context, "BuildIndex", &peer_);
      counted_ = admitted.ok();
    }
    if (admitted.ok()) {
      admitted = host_->AcquireBuildSlot();
      holds_slot_ = admitted.ok();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      admission_done_ = true;
      if (!admitted.ok()) {
        rejected_ = true;  // counted by the admission step that refused it
        result_ = admitted;
      } else if (drain_seen_) {
        EndByDrainLocked();
      }
    }
    Drive();
  }

  // A drain ends a build stream that is still receiving its input (an idle one
  // would otherwise hold the shutdown for the whole drain timeout): UNAVAILABLE,
  // nothing installed. A build already running on the executor finishes (the
  // drain timeout bounds it).
  void Drain() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!admission_done_) {
        drain_seen_ = true;  // the constructor ends the call
        return;
      }
      if (finished_ || building_ || result_) return;
      EndByDrainLocked();
      ++tasks_;  // keeps the reactor from finishing until the poke below drives it
    }
    // Continue on an executor thread, never on the drainer's (which holds the
    // host's stream lock that OnDone needs). The poke lets go of its task
    // inside the driver's lock: had it let go first, a read completing in between
    // could finish the call and gRPC delete the reactor under the poke's Drive.
    host_->executor()->Submit([this] { Drive(/*release_task=*/true); });
  }

  // The stream is read as raw bytes and parsed here, for the reason given in
  // StreamReactor::OnReadDone: gRPC's typed API reports a message it cannot parse
  // as the end of input, and the build would install the chunks before it. Here
  // an unparseable message fails the build like any invalid one: nothing is
  // installed and the old version keeps serving.
  void OnReadDone(bool ok) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      read_in_flight_ = false;
      if (!ok) {
        input_done_ = true;
        input_end_ = Clock::now();
        if (context_->IsCancelled()) cancelled_.store(true);
      } else if (!result_) {
        ++messages_read_;
        const size_t bytes = received_.Length();
        v1::BuildIndexRequest message;
        if (!grpc::SerializationTraits<v1::BuildIndexRequest>::Deserialize(&received_, &message)
                 .ok()) {
          result_ = UnparseableMessageError("gpujoin.v1.BuildIndexRequest", messages_read_, bytes,
                                            "nothing was built and the index is unchanged");
        } else {
          // Validation and decoding only (no copies of aligned packed bytes): cheap
          // enough for the reactor thread.
          absl::Status s = CatchHostAllocation(
              [this] { return absl::StrCat("BuildIndex message ", messages_read_); },
              [&] { return session_.Add(std::move(message)); });
          if (!s.ok()) result_ = s;
        }
      }
      received_.Clear();
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

  void OnDone() override {
    host_->Unregister(this);
    if (holds_slot_) host_->ReleaseBuildSlot();
    if (counted_) host_->ReleaseStream(peer_);
    delete this;
  }

 private:
  // A client's cancellation reaches the reactor twice, unordered: as a failed read
  // (which ends the input and starts the build) and as OnCancel. The callback API
  // has no way to tell a failed read from a half-close, so that a cancelled call
  // never installs its index, the install waits for a cancellation until this long
  // after the end of input; a build that took longer has already waited it out. A
  // call whose deadline has passed counts as cancelled whether or not gRPC has said
  // so yet.
  static constexpr std::chrono::milliseconds kCancelGrace{20};

  // A finish with a read still waiting for the client (a drain) needs nothing
  // more: gRPC ends that read (OnReadDone(false)) once the status is sent, and
  // only then calls OnDone. Nothing may touch the call after Finish: cancelling
  // it there could reach a context that OnDone had already freed.
  struct Actions {
    bool read = false;
    bool build = false;
    std::optional<absl::Status> finish;
    bool empty() const { return !read && !build && !finish; }
  };

  void EndByDrainLocked() {
    result_ = absl::UnavailableError(
        "the server is shutting down; this build was not installed (retry on another server "
        "or after the restart)");
  }

  Actions NextActionsLocked() {
    Actions act;
    // A running build reports back itself; a pending drain poke drives again.
    if (finished_ || building_ || tasks_ > 0) return act;
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

  // Starts whatever the state calls for (see SingleDriver). `release_task`: the
  // caller is a drain poke, whose task (tasks_) ends as it enters the driver.
  void Drive(bool release_task = false) {
    DriveAfter([this, release_task] {
      if (release_task) --tasks_;
    });
  }

  // Drives, running `enter` first under mu_ (SingleDriver): a thread that is not
  // one of gRPC's reactions (an executor task, the snapshot writer) settles the
  // call's outcome there, so that no other thread can finish the call, and gRPC
  // delete the reactor, before this one has entered the driver.
  template <typename Enter>
  void DriveAfter(Enter enter) {
    driver_.Drive(
        mu_, enter, [this] { return NextActionsLocked(); },
        [this](const Actions& act) {
          if (act.read) StartRead(&received_);
          if (act.build) host_->executor()->Submit([this] { Build(); });
          if (!act.finish) return true;
          absl::Status status = *act.finish;
          if (status.ok()) status = SerializeResponse();
          if (!rejected_) Account(status);
          if (!status.ok()) session_.Release();  // a failed build's memory goes now
          Finish(ToGrpcStatus(status));  // the reactor may be gone from here on
          return false;
        });
  }

  // Executor thread: the engine build, then the atomic install.
  void Build() {
    absl::StatusOr<std::shared_ptr<const IndexVersion>> built = absl::UnknownError("not built");
    const absl::Status allocated = CatchHostAllocation(
        [this] { return absl::StrCat("BuildIndex of \"", session_.name(), "\""); }, [&] {
          built = session_.Finish([this] {
            std::unique_lock<std::mutex> lock(mu_);
            auto seen = [this] {
              return cancelled_.load() || context_->IsCancelled() ||
                     std::chrono::system_clock::now() >= context_->deadline();
            };
            cancel_cv_.wait_until(lock, input_end_ + kCancelGrace, seen);
            return seen();
          });
          return absl::OkStatus();
        });
    if (!allocated.ok()) built = allocated;
    SnapshotStore* store = host_->ops()->state().snapshots;
    if (built.ok() && session_.wait_durable() && store != nullptr) {
      // Answered once the snapshot holds this version (or a later one); the
      // reactor stays alive (tasks_) until the store has called back.
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++tasks_;
      }
      std::shared_ptr<const IndexVersion> version = *std::move(built);
      store->WhenDurable(version->name, version->version, [this, version](absl::Status durable) {
        DriveAfter([&] {
          --tasks_;
          building_ = false;
          host_->ops()->FillIndexInfo(*version, response_.mutable_index());
          result_ = std::move(durable);
        });
      });
      return;
    }
    DriveAfter([&] {
      building_ = false;
      if (built.ok()) host_->ops()->FillIndexInfo(**built, response_.mutable_index());
      result_ = built.status();
    });
  }

  // The response into gRPC's buffer, before an OK Finish.
  absl::Status SerializeResponse() {
    bool own = false;
    const grpc::Status s = grpc::SerializationTraits<v1::BuildIndexResponse>::Serialize(
        response_, response_wire_, &own);
    if (s.ok()) return absl::OkStatus();
    return absl::InternalError(
        absl::StrCat("the index was built and installed, but its "
                     "BuildIndexResponse could not be serialised: ",
                     s.error_message()));
  }

  void Account(const absl::Status& s) {
    Metrics* metrics = host_->metrics();
    if (!session_.name().empty()) metrics->CountBuild(session_.name(), BuildResultFor(s.code()));
    if (!s.ok()) metrics->CountRpcError("BuildIndex", StatusCodeName(s.code()));
    metrics->ObserveRpc("BuildIndex", SecondsSince(start_), s.ok() ? session_.rows() : 0);
    if (s.ok()) {
      LogInfo(absl::StrCat("built index \"", session_.name(), "\": ", session_.rows(), " rows in ",
                           SecondsSince(start_), " s"));
    } else {
      LogDebug(absl::StrCat("BuildIndex failed: ", s.ToString()));
    }
  }

  StreamHost* host_;
  grpc::CallbackServerContext* context_;
  grpc::ByteBuffer* response_wire_;  // owned by gRPC
  v1::BuildIndexResponse response_;
  BuildSession session_;
  grpc::ByteBuffer received_;   // target of the read in flight
  uint64_t messages_read_ = 0;  // guarded by mu_; the position of a bad message
  Clock::time_point start_;
  std::mutex mu_;
  std::optional<absl::Status> result_;  // the call's outcome once known
  bool rejected_ = false;          // refused at admission (guarded by mu_)
  bool admission_done_ = false;    // the constructor has settled the admission (mu_)
  bool drain_seen_ = false;        // a drain came during the admission (mu_)
  bool holds_slot_ = false;  // one of --max-concurrent-builds, given back in OnDone
  bool counted_ = false;     // one of --max-streams-per-connection on peer_, given back in OnDone
  std::string peer_;
  bool read_in_flight_ = false;
  bool input_done_ = false;
  bool building_ = false;
  bool finished_ = false;
  int tasks_ = 0;  // drain pokes queued on the executor (guarded by mu_)
  SingleDriver driver_;
  std::atomic<bool> cancelled_{false};
  std::condition_variable cancel_cv_;  // signalled by OnCancel
  Clock::time_point input_end_;        // guarded by mu_
};

}  // namespace

grpc::ServerReadReactor<grpc::ByteBuffer>* NewBuildReactor(StreamHost* host,
                                                           grpc::CallbackServerContext* context,
                                                           grpc::ByteBuffer* response) {
  return new BuildReactor(host, context, response);
}

}  // namespace gpujoin::server::detail
