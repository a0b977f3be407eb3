#include "build_reactor.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>

#include "absl/strings/str_cat.h"
#include "gpujoin/server/logging.hpp"
#include "gpujoin/server/metrics.hpp"
#include "rpc_clock.hpp"
#include "single_driver.hpp"

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
  std::condition_variable cancel_cv_;  // signalled by OnCancel
  Clock::time_point input_end_;        // guarded by mu_
};

}  // namespace

grpc::ServerReadReactor<v1::BuildIndexRequest>* NewBuildReactor(
    GpuJoinService* service, grpc::CallbackServerContext* context,
    v1::BuildIndexResponse* response) {
  return new BuildReactor(service, context, response);
}

}  // namespace gpujoin::server::detail
