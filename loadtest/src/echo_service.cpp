#include "echo_service.hpp"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gpujoin/v1/gpujoin.grpc.pb.h"
#include "payload.hpp"
#include "workload.hpp"

namespace gpujoin::loadtest {
namespace pb = ::gpujoin::v1;

namespace {

// Responses a stream may have queued before it stops reading: the same kind of
// bounded in-flight work a real server keeps per stream.
constexpr size_t kMaxQueuedResponses = 8;

// The request's uint32 column as packed little-endian bytes (copying a typed list).
std::string PackedU32(const pb::U32Column& c) {
  if (!c.packed().empty()) return c.packed();
  return std::string(reinterpret_cast<const char*>(c.values().v().data()),
                     static_cast<size_t>(c.values().v_size()) * 4);
}

size_t RowsOf(const pb::U32Column& c) {
  return c.packed().empty() ? static_cast<size_t>(c.values().v_size()) : c.packed().size() / 4;
}

size_t RowsOf(const pb::U64Column& c) {
  return c.packed().empty() ? static_cast<size_t>(c.values().v_size()) : c.packed().size() / 8;
}

// Rows of a message's keys, of either width or in key columns.
template <typename Message>
size_t KeyRows(const Message& m) {
  if (m.key_columns_size() > 0) return static_cast<size_t>(m.key_columns(0).length());
  return RowsOf(m.keys()) + RowsOf(m.keys64());
}

// What the echo answers for a message's keys: the packed uint32 keys, the low
// 32 bits of each uint64 key (values stay uint32), or for key columns the row
// numbers.
template <typename Message>
std::string EchoedKeys(const Message& m) {
  if (m.key_columns_size() > 0) {
    const auto n = static_cast<uint32_t>(KeyRows(m));
    std::string out(4 * size_t{n}, '\0');
    for (uint32_t i = 0; i < n; ++i) std::memcpy(out.data() + 4 * size_t{i}, &i, 4);
    return out;
  }
  if (!m.has_keys64()) return PackedU32(m.keys());
  const pb::U64Column& c = m.keys64();
  const size_t n = RowsOf(c);
  std::string out(4 * n, '\0');
  for (size_t i = 0; i < n; ++i) {
    uint64_t k = 0;
    if (c.packed().empty()) {
      k = c.values().v(static_cast<int>(i));
    } else {
      std::memcpy(&k, c.packed().data() + 8 * i, 8);
    }
    const auto low = static_cast<uint32_t>(k);
    std::memcpy(out.data() + 4 * i, &low, 4);
  }
  return out;
}

// The --payload columns a selecting lookup gets (payload.hpp), derived from
// the echoed values as a server's payload rows are stored: every row valid.
void FillPayload(const pb::LookupRequest& q, const std::string& values, pb::LookupResponse* r) {
  std::vector<uint32_t> words(values.size() / 4);
  if (!words.empty()) std::memcpy(words.data(), values.data(), 4 * words.size());
  const std::vector<client::Column> columns = PayloadColumnsOf(words);
  for (const std::string& name : q.select()) {
    const client::Column* c = name == kPayloadInt64Name    ? &columns[0]
                              : name == kPayloadStringName ? &columns[1]
                                                           : nullptr;
    if (c == nullptr) continue;  // not a column the load tester's index has
    pb::Column* out = r->add_columns();
    out->set_name(name);
    out->set_type(c->type == client::ColumnType::kInt64 ? pb::COLUMN_TYPE_INT64
                                                        : pb::COLUMN_TYPE_STRING);
    out->set_length(c->length);
    out->set_data(c->data.data(), c->data.size());
    if (!c->offsets.empty()) out->set_offsets(c->offsets.data(), 4 * c->offsets.size());
  }
}

void FillLookup(const pb::LookupRequest& q, pb::LookupResponse* r) {
  const size_t n = KeyRows(q);
  r->set_batch_id(q.batch_id());
  r->set_index_version(1);
  *r->mutable_values() = EchoedKeys(q);
  if (q.select_size() > 0) FillPayload(q, r->values(), r);
  r->mutable_found()->assign(n, '\1');
  if (q.want_probes()) r->mutable_probes()->assign(4 * n, '\0');
  if (q.want_match_counts()) r->mutable_match_counts()->assign(4 * n, '\0');
  auto* s = r->mutable_statistics();
  s->set_found(n);
  s->set_total_probes(n);
  s->set_max_probes(n ? 1 : 0);
}

void FillJoin(const pb::JoinRequest& q, pb::JoinResponse* r) {
  r->set_batch_id(q.batch_id());
  r->set_index_version(1);
  for (const pb::LeftBatch& b : q.batches()) {
    const size_t n = KeyRows(b);
    const uint64_t capacity = b.capacity() ? b.capacity() : n;
    // As many pairs as asked for (a one-to-many join asks for more than its
    // rows), the keys repeated; none without keys.
    const size_t pairs = n == 0 ? 0 : static_cast<size_t>(capacity);
    const std::string keys = EchoedKeys(b);
    std::string rows;
    rows.reserve(4 * pairs);
    while (rows.size() < 4 * pairs)
      rows.append(keys, 0, std::min(keys.size(), 4 * pairs - rows.size()));
    auto* out = r->add_results();
    out->set_left_rows(rows);
    out->set_right_rows(rows);
    out->set_count(pairs);
    out->set_capacity(capacity);
    auto* s = out->mutable_statistics();
    s->set_found(std::min(pairs, n));
    s->set_missing(n - std::min(pairs, n));
    s->set_total_probes(n);
    s->set_max_probes(n ? 1 : 0);
    if (b.want_found()) out->mutable_found()->assign(n, '\1');
    if (b.want_probes()) out->mutable_probes()->assign(4 * n, '\0');
  }
}

void FillAggregate(const pb::AggregateRequest& q, pb::AggregateResponse* r) {
  const size_t g = q.groups();
  const bool count = q.op() == pb::AGGREGATE_OP_COUNT;
  r->set_batch_id(q.batch_id());
  if (!q.accumulate_only()) {
    if (count) {
      r->mutable_counts()->assign(4 * g, '\0');
    } else {
      r->mutable_values()->assign(4 * g, '\0');
      r->mutable_contributing_rows()->assign(4 * g, '\0');
    }
  }
  (count ? r->mutable_total_counts() : r->mutable_total_values())->assign(4 * g, '\0');
  r->set_rows(RowsOf(q.keys()));
}

// A Mutate batch: every upsert row counted (as inserted), nothing else.
void FillMutate(const pb::MutateRequest& q, pb::MutateResponse* r) {
  r->set_batch_id(q.batch_id());
  r->set_index_version(1);
  r->set_mutation_sequence(q.batch_id() + 1);
  r->set_upsert_rows(KeyRows(q));
  r->set_inserted_keys(KeyRows(q));
}

// One echo stream: reads requests, queues the filled responses and writes them
// in order, with one read and one write outstanding at a time. Reactions may run
// concurrently on gRPC threads, so the state is under a mutex; Start* calls are
// made outside it.
template <typename Req, typename Resp>
class EchoReactor final : public grpc::ServerBidiReactor<Req, Resp> {
 public:
  using Fill = void (*)(const Req&, Resp*);

  explicit EchoReactor(Fill fill) : fill_(fill) { this->StartRead(&request_); }

  void OnReadDone(bool ok) override {
    Resp* to_write = nullptr;
    bool read_again = false;
    bool finish = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!ok) {
        reads_done_ = true;
        finish = !writing_ && !finished_;
        finished_ = finished_ || finish;
      } else {
        auto response = std::make_unique<Resp>();
        fill_(request_, response.get());
        queue_.push_back(std::move(response));
        if (!writing_ && !write_failed_) {
          writing_ = true;
          to_write = queue_.front().get();
        }
        read_again = queue_.size() < kMaxQueuedResponses;
        read_paused_ = !read_again;
      }
    }
    if (finish) this->Finish(grpc::Status::OK);
    if (to_write) this->StartWrite(to_write);
    if (read_again) this->StartRead(&request_);
  }

  void OnWriteDone(bool ok) override {
    Resp* to_write = nullptr;
    bool read_again = false;
    bool finish = false;
    grpc::Status status = grpc::Status::OK;
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.pop_front();
      writing_ = false;
      if (!ok) {
        // The client went away; drop the rest and finish once reading has stopped.
        write_failed_ = true;
        queue_.clear();
        status = grpc::Status(grpc::StatusCode::CANCELLED, "echo write failed");
      } else if (!queue_.empty()) {
        writing_ = true;
        to_write = queue_.front().get();
      }
      if (read_paused_ && !reads_done_ && queue_.size() < kMaxQueuedResponses) {
        read_paused_ = false;
        read_again = true;
      }
      if (!writing_ && (reads_done_ || write_failed_) && !finished_ && !read_again) {
        // With a write failure a read may still be outstanding; Finish() makes it
        // complete with ok = false, after which nothing else is started.
        finished_ = true;
        finish = true;
      }
    }
    if (finish) this->Finish(status);
    if (to_write) this->StartWrite(to_write);
    if (read_again) this->StartRead(&request_);
  }

  void OnDone() override { delete this; }

 private:
  const Fill fill_;
  Req request_;
  std::mutex mu_;
  std::deque<std::unique_ptr<Resp>> queue_;
  bool writing_ = false;
  bool reads_done_ = false;
  bool read_paused_ = false;
  bool write_failed_ = false;
  bool finished_ = false;
};

class EchoService final : public pb::GpuJoin::CallbackService {
 public:
  grpc::ServerBidiReactor<pb::LookupRequest, pb::LookupResponse>* Lookup(
      grpc::CallbackServerContext*) override {
    return new EchoReactor<pb::LookupRequest, pb::LookupResponse>(&FillLookup);
  }
  grpc::ServerBidiReactor<pb::JoinRequest, pb::JoinResponse>* Join(
      grpc::CallbackServerContext*) override {
    return new EchoReactor<pb::JoinRequest, pb::JoinResponse>(&FillJoin);
  }
  grpc::ServerBidiReactor<pb::AggregateRequest, pb::AggregateResponse>* Aggregate(
      grpc::CallbackServerContext*) override {
    return new EchoReactor<pb::AggregateRequest, pb::AggregateResponse>(&FillAggregate);
  }
  grpc::ServerBidiReactor<pb::MutateRequest, pb::MutateResponse>* Mutate(
      grpc::CallbackServerContext*) override {
    return new EchoReactor<pb::MutateRequest, pb::MutateResponse>(&FillMutate);
  }
};

}  // namespace

class EchoServer::Impl {
 public:
  EchoService service;
  std::unique_ptr<grpc::Server> server;
};

EchoServer::EchoServer(std::unique_ptr<Impl> impl, std::string address)
    : impl_(std::move(impl)), address_(std::move(address)) {}

EchoServer::~EchoServer() {
  if (impl_ && impl_->server) {
    impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    impl_->server->Wait();
  }
}

absl::StatusOr<std::unique_ptr<EchoServer>> EchoServer::Start(const std::string& listen_address,
                                                              int max_message_bytes) {
  auto impl = std::make_unique<Impl>();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen_address, grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(max_message_bytes);
  builder.SetMaxSendMessageSize(max_message_bytes);
  builder.RegisterService(&impl->service);
  impl->server = builder.BuildAndStart();
  if (!impl->server) {
    return absl::UnavailableError(
        absl::StrCat("echo server cannot listen on '", listen_address, "'"));
  }
  std::string address = listen_address;
  if (listen_address.rfind("unix:", 0) != 0) {
    if (port == 0) {
      return absl::UnavailableError(
          absl::StrCat("echo server did not bind '", listen_address, "'"));
    }
    address = absl::StrCat(listen_address.substr(0, listen_address.rfind(':')), ":", port);
  }
  return std::unique_ptr<EchoServer>(new EchoServer(std::move(impl), std::move(address)));
}

}  // namespace gpujoin::loadtest
