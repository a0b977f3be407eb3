#include "transport/reflection_guard.hpp"

#include <algorithm>
#include <chrono>
#include <mutex>

#include "absl/strings/match.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/impl/server_builder_option.h"

namespace gpujoin::server {
namespace {

using Buffer = grpc::ByteBuffer;

// Removes gRPC's reflection plugin (which every ServerBuilder gets once the
// reflection library is linked) from the builder it is set on.
class WithoutReflectionPlugin final : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    plugins->erase(
        std::remove_if(plugins->begin(), plugins->end(),
                       [](const std::unique_ptr<grpc::ServerBuilderPlugin>& p) {
                         return dynamic_cast<grpc::reflection::ProtoServerReflectionPlugin*>(
                                    p.get()) != nullptr;
                       }),
        plugins->end());
  }
};

// Ends a call at once with `status`.
class RefusedReactor final : public grpc::ServerGenericBidiReactor {
 public:
  explicit RefusedReactor(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

// Relays one admitted call to the in-process reflection server: a pump upstream
// (read from the caller, write to the inner call) and one downstream (read from
// the inner call, write to the caller), each with one message in flight, and
// the inner call's status as the caller's. The inner call's OnDone finishes the
// caller's call, whose OnDone deletes the relay.
//
// The inner (client) call gets two holds before it starts, because both pumps
// start inner operations from the caller's reactions: the upstream hold is
// removed once no more inner writes will start (the caller half-closed or went
// away, an inner write failed, or the inner call ended), the downstream hold once
// no more inner reads will start (the inner call ended, or a write to the caller
// failed). Neither is removed while a write to the caller is in flight, so
// Finish is never called with one pending.
class RelayReactor final : public grpc::ServerGenericBidiReactor {
 public:
  RelayReactor(grpc::GenericCallbackServerContext* context, grpc::GenericStub* stub)
      : inner_(this) {
    if (context->deadline() != std::chrono::system_clock::time_point::max()) {
      inner_context_.set_deadline(context->deadline());
    }
    stub->PrepareBidiStreamingCall(&inner_context_, context->method(), grpc::StubOptions(),
                                   &inner_);
    inner_.AddMultipleHolds(2);
    inner_.StartRead(&down_);
    inner_.StartCall();
    StartRead(&up_);
  }

  // Caller side.
  void OnReadDone(bool ok) override {
    bool write = false, remove_hold = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (upstream_stopped_) return;  // the inner call ended meanwhile: drop it
      if (ok) {
        inner_write_in_flight_ = true;
        write = true;
      } else {
        remove_hold = StopUpstreamLocked();
      }
    }
    if (write) {
      inner_.StartWrite(&up_);
      return;
    }
    inner_.StartWritesDone();  // the caller half-closed (or went away)
    if (remove_hold) inner_.RemoveHold();
  }

  void OnWriteDone(bool ok) override {
    if (ok) {
      inner_.StartRead(&down_);
      return;
    }
    inner_context_.TryCancel();
    inner_.RemoveHold();  // downstream: no more inner reads
  }

  void OnCancel() override { inner_context_.TryCancel(); }
  void OnDone() override { delete this; }

 private:
  // Inner (client) side.
  class Inner final : public grpc::ClientBidiReactor<Buffer, Buffer> {
   public:
    explicit Inner(RelayReactor* relay) : relay_(relay) {}
    void OnReadDone(bool ok) override { relay_->OnInnerReadDone(ok); }
    void OnWriteDone(bool ok) override { relay_->OnInnerWriteDone(ok); }
    void OnDone(const grpc::Status& status) override { relay_->Finish(status); }

   private:
    RelayReactor* relay_;
  };

  void OnInnerReadDone(bool ok) {
    if (ok) {
      StartWrite(&down_);
      return;
    }
    // The inner call has ended: stop the upstream pump too.
    bool remove_upstream_hold;
    {
      std::lock_guard<std::mutex> lock(mu_);
      remove_upstream_hold = StopUpstreamLocked();
    }
    if (remove_upstream_hold) inner_.RemoveHold();
    inner_.RemoveHold();  // downstream
  }

  void OnInnerWriteDone(bool ok) {
    bool read = false, remove_hold = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      inner_write_in_flight_ = false;
      if (!ok || upstream_stopped_) {
        remove_hold = StopUpstreamLocked();
      } else {
        read = true;
      }
    }
    if (read) StartRead(&up_);
    if (remove_hold) inner_.RemoveHold();
  }

  // Marks the upstream pump stopped; true when the caller must now remove the
  // upstream hold (once, and only with no inner write in flight).
  bool StopUpstreamLocked() {
    upstream_stopped_ = true;
    if (inner_write_in_flight_ || upstream_hold_removed_) return false;
    upstream_hold_removed_ = true;
    return true;
  }

  grpc::ClientContext inner_context_;
  Inner inner_;
  Buffer up_, down_;
  std::mutex mu_;
  bool upstream_stopped_ = false;
  bool inner_write_in_flight_ = false;
  bool upstream_hold_removed_ = false;
};

}  // namespace

ReflectionGuard::ReflectionGuard(const TokenAuthenticator* auth,
                                 std::vector<std::unique_ptr<grpc::Service>> described)
    : auth_(auth), described_(std::move(described)) {}

absl::StatusOr<std::unique_ptr<ReflectionGuard>> ReflectionGuard::Start(
    const TokenAuthenticator* auth, std::vector<std::unique_ptr<grpc::Service>> described) {
  std::unique_ptr<ReflectionGuard> guard(new ReflectionGuard(auth, std::move(described)));
  // Idempotent: makes sure the plugin is registered, so that the in-process
  // server built next serves reflection.
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  for (const auto& service : guard->described_) builder.RegisterService(service.get());
  guard->inner_ = builder.BuildAndStart();
  if (guard->inner_ == nullptr) {
    return absl::InternalError("cannot start the in-process reflection server");
  }
  guard->stub_ = std::make_unique<grpc::GenericStub>(
      guard->inner_->InProcessChannel(grpc::ChannelArguments()));
  return guard;
}

ReflectionGuard::~ReflectionGuard() {
  if (inner_ != nullptr) {
    inner_->Shutdown();
    inner_->Wait();
  }
}

void ReflectionGuard::AddTo(grpc::ServerBuilder* builder) {
  builder->SetOption(std::make_unique<WithoutReflectionPlugin>());
  builder->RegisterCallbackGenericService(this);
}

grpc::ServerGenericBidiReactor* ReflectionGuard::CreateReactor(
    grpc::GenericCallbackServerContext* context) {
  if (!absl::StartsWith(context->method(), "/grpc.reflection.")) {
    return new RefusedReactor(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, ""));
  }
  const absl::Status admitted = auth_->Check(context->client_metadata());
  if (!admitted.ok()) {
    return new RefusedReactor(grpc::Status(static_cast<grpc::StatusCode>(admitted.code()),
                                           std::string(admitted.message())));
  }
  return new RelayReactor(context, stub_.get());
}

}  // namespace gpujoin::server
