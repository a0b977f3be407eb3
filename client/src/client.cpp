// Implementation of gpujoin::client::Client over the generated gpujoin.v1 stubs.
#include "gpujoin/client/client.hpp"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <bit>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <fstream>
#include <limits>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "bitmap.hpp"
#include "build_chunker.hpp"
#include "gpujoin/common/status_macros.hpp"
#include "gpujoin/v1/gpujoin.grpc.pb.h"
#include "hash_batches.hpp"
#include "join_assembler.hpp"
#include "stream_runner.hpp"
#include "wire.hpp"

namespace gpujoin::client {

static_assert(std::endian::native == std::endian::little,
              "packed columns are little-endian; this client assumes a little-endian host");

namespace pb = ::gpujoin::v1;
using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------- small helpers

std::string_view HealthStateName(HealthState state) {
  switch (state) {
    case HealthState::kServing:
      return "SERVING";
    case HealthState::kNotServing:
      return "NOT_SERVING";
    case HealthState::kServiceUnknown:
      return "SERVICE_UNKNOWN";
    case HealthState::kUnknown:
      break;
  }
  return "UNKNOWN";
}

std::string_view AggregateOpName(AggregateOp op) {
  switch (op) {
    case AggregateOp::kCount:
      return "count";
    case AggregateOp::kSum:
      return "sum";
    case AggregateOp::kMin:
      return "min";
    case AggregateOp::kMax:
      return "max";
    case AggregateOp::kMean:
      return "mean";
  }
  return "?";
}

absl::StatusOr<AggregateOp> ParseAggregateOp(std::string_view name) {
  for (AggregateOp op : {AggregateOp::kCount, AggregateOp::kSum, AggregateOp::kMin,
                         AggregateOp::kMax, AggregateOp::kMean}) {
    if (AggregateOpName(op) == name) return op;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown aggregate op '", std::string(name),
                                                 "' (expected count, sum, min, max or mean)"));
}

std::string_view KeyTypeName(KeyType type) {
  return type == KeyType::kUint64 ? "uint64" : "uint32";
}

std::string_view DuplicatePolicyName(DuplicatePolicy policy) {
  return policy == DuplicatePolicy::kKeepAll ? "keep_all" : "lowest_row";
}

absl::StatusOr<DuplicatePolicy> ParseDuplicatePolicy(std::string_view name) {
  for (DuplicatePolicy p : {DuplicatePolicy::kLowestRow, DuplicatePolicy::kKeepAll}) {
    if (DuplicatePolicyName(p) == name) return p;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown duplicate policy '", std::string(name),
                                                 "' (expected lowest_row or keep_all)"));
}

std::string_view JoinKindName(JoinKind kind) {
  switch (kind) {
    case JoinKind::kInner:
      return "inner";
    case JoinKind::kLeftOuter:
      return "left_outer";
    case JoinKind::kLeftSemi:
      return "left_semi";
    case JoinKind::kLeftAnti:
      return "left_anti";
  }
  return "?";
}

absl::StatusOr<JoinKind> ParseJoinKind(std::string_view name) {
  for (JoinKind k :
       {JoinKind::kInner, JoinKind::kLeftOuter, JoinKind::kLeftSemi, JoinKind::kLeftAnti}) {
    if (JoinKindName(k) == name) return k;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown join kind '", std::string(name),
                   "' (expected inner, left_outer, left_semi or left_anti)"));
}

void QueryStatistics::Merge(const QueryStatistics& other) {
  found += other.found;
  missing += other.missing;
  total_probes += other.total_probes;
  max_probes = std::max(max_probes, other.max_probes);
}

namespace {

using detail::FromBatchError;
using detail::ToQueryStatistics;
using detail::Unpack;

absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  // gRPC and Abseil both use the google.rpc.Code numbering.
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

// Copies the batch ID of streamed response `r` into `out`, and its in-band error
// when it has one; true then: the batch failed and there is nothing else to decode.
template <typename Response, typename Result>
bool DecodeBatchHeader(const Response& r, Result* out) {
  out->batch_id = r.batch_id();
  if (!r.has_error()) return false;
  out->error = FromBatchError(r.error());
  return true;
}

template <typename T>
void SetPacked(std::span<const T> v, std::string* out) {
  out->assign(reinterpret_cast<const char*>(v.data()), v.size_bytes());
}

// Sets a required column: packed bytes, or an empty typed list for zero rows
// (an empty `packed` would read as "not set").
template <typename T, typename Column>
void SetColumn(std::span<const T> v, Column* col) {
  if (v.empty()) {
    col->mutable_values();
  } else {
    SetPacked(v, col->mutable_packed());
  }
}

// Sets the keys of a message that carries them (BuildChunk, LookupRequest,
// LeftBatch) in the field of their width: `keys` (uint32) or `keys64` (uint64).
template <typename Message>
void SetKeys(const Keys& k, KeyType type, Message* m) {
  if (type == KeyType::kUint64) {
    SetColumn(k.u64(), m->mutable_keys64());
  } else {
    SetColumn(k.u32(), m->mutable_keys());
  }
}

pb::KeyType ToProtoKeyType(KeyType t) {
  return t == KeyType::kUint64 ? pb::KEY_TYPE_UINT64 : pb::KEY_TYPE_UINT32;
}

pb::DuplicatePolicy ToProtoPolicy(DuplicatePolicy p) {
  return p == DuplicatePolicy::kKeepAll ? pb::DUPLICATE_POLICY_KEEP_ALL
                                        : pb::DUPLICATE_POLICY_LOWEST_ROW;
}

pb::JoinKind ToProtoKind(JoinKind k) {
  switch (k) {
    case JoinKind::kInner:
      return pb::JOIN_KIND_INNER;
    case JoinKind::kLeftOuter:
      return pb::JOIN_KIND_LEFT_OUTER;
    case JoinKind::kLeftSemi:
      return pb::JOIN_KIND_LEFT_SEMI;
    case JoinKind::kLeftAnti:
      return pb::JOIN_KIND_LEFT_ANTI;
  }
  return pb::JOIN_KIND_UNSPECIFIED;
}

BuildStatistics ToBuildStatistics(const pb::BuildStatistics& s) {
  return BuildStatistics{s.unique_keys(),  s.duplicate_rows(), s.overflow_rows(), s.invalid_rows(),
                         s.total_probes(), s.max_probes(),     s.max_group_rows()};
}

IndexInfo ToIndexInfo(const pb::IndexInfo& p) {
  IndexInfo i;
  i.name = p.name();
  i.version = p.version();
  i.capacity = p.capacity();
  i.max_probe_count = p.max_probe_count();
  i.first_value = p.first_value();
  i.explicit_values = p.explicit_values();
  i.batch_mode = p.batch_mode();
  i.rows = p.rows();
  i.statistics = ToBuildStatistics(p.statistics());
  i.load_factor = p.load_factor();
  i.device_bytes = p.device_bytes();
  i.build_seconds = p.build_seconds();
  i.backend = p.backend();
  i.built_unix_millis = p.built_unix_millis();
  i.key_type = p.key_type() == pb::KEY_TYPE_UINT64 ? KeyType::kUint64 : KeyType::kUint32;
  for (const pb::PayloadColumnInfo& c : p.payload()) {
    PayloadColumnInfo pc;
    pc.name = c.name();
    // A type this client does not know reads as binary (opaque bytes).
    pc.type = detail::FromProtoColumnType(c.type()).value_or(ColumnType::kBinary);
    pc.null_count = c.null_count();
    pc.bytes = c.bytes();
    i.payload.push_back(std::move(pc));
  }
  i.payload_bytes = p.payload_bytes();
  i.duplicates = p.duplicates() == pb::DUPLICATE_POLICY_KEEP_ALL ? DuplicatePolicy::kKeepAll
                                                                 : DuplicatePolicy::kLowestRow;
  i.durable_version = p.durable_version();
  return i;
}

// typed_values of one batch: `values` must hold `rows` values of `type`,
// `validity` (their nulls) ceil(rows / 8) bytes or none.
absl::Status EncodeTypedValues(ColumnType type, const AggregateValues& values,
                               std::span<const uint8_t> validity, size_t rows, uint64_t id,
                               pb::Column* out) {
  if (!validity.empty() && validity.size() != (rows + 7) / 8) {
    return absl::InvalidArgumentError(absl::StrCat(
        "aggregate batch ", id, ": validity has ", validity.size(), " bytes but a bitmap of ",
        rows, " rows has ceil(", rows, " / 8) = ", (rows + 7) / 8, " (or send none: no nulls)"));
  }
  const std::optional<ColumnType> held = std::visit(
      [](const auto& v) -> std::optional<ColumnType> {
        using S = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<S, std::monostate>) {
          return std::nullopt;
        } else {
          using V = typename S::value_type;
          if constexpr (std::is_same_v<V, int32_t>) return ColumnType::kInt32;
          if constexpr (std::is_same_v<V, int64_t>) return ColumnType::kInt64;
          if constexpr (std::is_same_v<V, uint32_t>) return ColumnType::kUint32;
          if constexpr (std::is_same_v<V, uint64_t>) return ColumnType::kUint64;
          return ColumnType::kFloat64;
        }
      },
      values);
  if (held != type) {
    return absl::InvalidArgumentError(
        absl::StrCat("aggregate batch ", id, ": typed_values hold ",
                     held ? std::string(ColumnTypeName(*held)) : std::string("nothing"),
                     " but the spec's value_type is ", std::string(ColumnTypeName(type))));
  }
  return std::visit(
      [&](const auto& v) -> absl::Status {
        using S = std::decay_t<decltype(v)>;
        if constexpr (!std::is_same_v<S, std::monostate>) {
          if (v.size() != rows) {
            return absl::InvalidArgumentError(absl::StrCat("aggregate batch ", id,
                                                           ": typed_values has ", v.size(),
                                                           " rows but keys has ", rows));
          }
          out->set_type(detail::ToProtoColumnType(type));
          out->set_length(v.size());
          out->set_data(std::string(reinterpret_cast<const char*>(v.data()), v.size_bytes()));
          if (!validity.empty()) {
            out->set_validity(
                std::string(reinterpret_cast<const char*>(validity.data()), validity.size()));
          }
        }
        return absl::OkStatus();
      },
      values);
}

// A typed result Column as 64-bit words (4-byte types widened: int32 sign-extended).
absl::Status DecodeResultWords(const pb::Column& c, std::string_view field,
                               std::vector<uint64_t>* out, std::vector<uint8_t>* valid) {
  const bool narrow = c.type() == pb::COLUMN_TYPE_INT32 || c.type() == pb::COLUMN_TYPE_UINT32;
  const size_t width = narrow ? 4 : 8;
  if (c.data().size() != c.length() * width) {
    return absl::InternalError(absl::StrCat(std::string(field), ": ", c.data().size(),
                                            " bytes for ", c.length(), " values"));
  }
  out->resize(c.length());
  for (size_t i = 0; i < c.length(); ++i) {
    if (narrow) {
      uint32_t w;
      std::memcpy(&w, c.data().data() + 4 * i, 4);
      (*out)[i] = c.type() == pb::COLUMN_TYPE_INT32
                      ? static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(w)))
                      : w;
    } else {
      std::memcpy(&(*out)[i], c.data().data() + 8 * i, 8);
    }
  }
  if (valid != nullptr) {
    valid->clear();
    if (!c.validity().empty()) {
      valid->resize(c.length());
      for (size_t i = 0; i < c.length(); ++i) {
        (*valid)[i] = (static_cast<uint8_t>(c.validity()[i / 8]) >> (i % 8)) & 1u;
      }
    }
  }
  return absl::OkStatus();
}

std::vector<uint8_t> BitmapFlags(const std::string& bitmap, size_t n) {
  std::vector<uint8_t> flags;
  if (bitmap.empty()) return flags;
  flags.resize(n);
  for (size_t i = 0; i < n && i / 8 < bitmap.size(); ++i) {
    flags[i] = (static_cast<uint8_t>(bitmap[i / 8]) >> (i % 8)) & 1u;
  }
  return flags;
}

// The typed fields of an Aggregate response.
absl::Status DecodeTypedResult(const pb::AggregateResponse& r, AggregateResult* out) {
  GPUJOIN_RETURN_IF_ERROR(Unpack(r.total_counts64(), "total_counts64", &out->total_counts64));
  if (!r.has_total_typed_result()) return absl::OkStatus();
  const pb::Column& total = r.total_typed_result();
  out->result_type = static_cast<ColumnType>(static_cast<int>(total.type()) - 1);
  GPUJOIN_RETURN_IF_ERROR(
      DecodeResultWords(total, "total_typed_result", &out->total_typed_values, &out->total_valid));
  if (r.has_typed_result()) {
    GPUJOIN_RETURN_IF_ERROR(
        DecodeResultWords(r.typed_result(), "typed_result", &out->typed_values, nullptr));
  }
  const size_t groups = out->total_typed_values.size();
  out->overflow = BitmapFlags(r.overflow(), groups);
  out->total_overflow = BitmapFlags(r.total_overflow(), groups);
  out->total_overflow_groups = r.total_overflow_groups();
  return absl::OkStatus();
}

pb::AggregateOp ToProtoOp(AggregateOp op) {
  switch (op) {
    case AggregateOp::kCount:
      return pb::AGGREGATE_OP_COUNT;
    case AggregateOp::kSum:
      return pb::AGGREGATE_OP_SUM;
    case AggregateOp::kMin:
      return pb::AGGREGATE_OP_MIN;
    case AggregateOp::kMax:
      return pb::AGGREGATE_OP_MAX;
    case AggregateOp::kMean:
      return pb::AGGREGATE_OP_MEAN;
  }
  return pb::AGGREGATE_OP_UNSPECIFIED;
}

// Decodes the gathered columns of a lookup answer of `rows` rows.
absl::Status DecodeColumns(const google::protobuf::RepeatedPtrField<pb::Column>& columns,
                           uint64_t rows, std::vector<Column>* out) {
  out->reserve(columns.size());
  for (int c = 0; c < columns.size(); ++c) {
    const std::string field = absl::StrCat("columns[", c, "]");
    GPUJOIN_ASSIGN_OR_RETURN(Column col, detail::DecodeColumn(columns[c], field));
    if (col.length != rows) {
      return absl::InternalError(
          absl::StrCat("server sent ", field, " of ", col.length, " rows for ", rows, " keys"));
    }
    out->push_back(std::move(col));
  }
  return absl::OkStatus();
}

// Appends the columns of one batch's answer to those of the batches before
// (the first batch's columns are taken as they are).
absl::Status AppendColumns(std::vector<Column>&& batch, std::vector<Column>* all) {
  if (all->empty()) {
    *all = std::move(batch);
    return absl::OkStatus();
  }
  if (batch.size() != all->size()) {
    return absl::InternalError(absl::StrCat("server sent ", batch.size(), " columns where ",
                                            all->size(), " were expected"));
  }
  for (size_t c = 0; c < batch.size(); ++c) {
    const absl::Status st = (*all)[c].AppendRows(batch[c].view());
    if (!st.ok()) return absl::InternalError(st.message());
  }
  return absl::OkStatus();
}

// The content of the PEM file `path`; `what` names it in errors ("TLS CA file").
absl::StatusOr<std::string> ReadPemFile(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot read ", std::string(what), " '", path, "'"));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (ss.str().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(what), " '", path, "' is empty"));
  }
  return ss.str();
}

// Encodes grpc.health.v1.HealthCheckRequest{service} by hand (field 1, string)
// so that the client needs no second generated proto.
std::string EncodeHealthRequest(const std::string& service) {
  std::string out;
  if (service.empty()) return out;
  out.push_back(0x0a);
  uint64_t n = service.size();
  while (n >= 0x80) {
    out.push_back(static_cast<char>((n & 0x7f) | 0x80));
    n >>= 7;
  }
  out.push_back(static_cast<char>(n));
  out += service;
  return out;
}

// Decodes grpc.health.v1.HealthCheckResponse{status = 1 (enum)}; unknown
// fields are skipped.
absl::StatusOr<int> DecodeHealthResponse(const std::string& bytes) {
  size_t i = 0;
  auto varint = [&](uint64_t* v) -> bool {
    *v = 0;
    for (int shift = 0; shift < 64 && i < bytes.size(); shift += 7) {
      uint8_t b = static_cast<uint8_t>(bytes[i++]);
      *v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  };
  int status = 0;
  while (i < bytes.size()) {
    uint64_t tag;
    if (!varint(&tag)) break;
    uint64_t field = tag >> 3, wire = tag & 7, v;
    if (wire == 0) {
      if (!varint(&v)) break;
      if (field == 1) status = static_cast<int>(v);
    } else if (wire == 2) {
      if (!varint(&v) || v > bytes.size() - i) break;
      i += v;
    } else if (wire == 1) {
      i += 8;
    } else if (wire == 5) {
      i += 4;
    } else {
      break;
    }
  }
  if (i > bytes.size()) return absl::InternalError("malformed health check response");
  return status;
}

}  // namespace

// ---------------------------------------------------------------- Impl

class Client::Impl {
 public:
  Impl(ConnectOptions options, std::shared_ptr<grpc::Channel> channel)
      : options_(std::move(options)),
        channel_(std::move(channel)),
        stub_(pb::GpuJoin::NewStub(channel_)) {}

  // Prepares a context with the token and the deadline.
  void Prepare(grpc::ClientContext* ctx,
               std::optional<std::chrono::milliseconds> deadline = std::nullopt) const {
    if (!options_.token.empty()) ctx->AddMetadata("authorization", "Bearer " + options_.token);
    const auto d = deadline.value_or(options_.deadline);
    if (d.count() > 0) ctx->set_deadline(std::chrono::system_clock::now() + d);
  }

  ConnectOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::GpuJoin::Stub> stub_;
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

const ConnectOptions& Client::options() const { return impl_->options_; }

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const ConnectOptions& options) {
  if (options.address.empty()) return absl::InvalidArgumentError("server address is empty");
  if (options.max_message_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_message_bytes must be positive, got ", options.max_message_bytes));
  }
  std::shared_ptr<grpc::ChannelCredentials> creds;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_message_bytes);
  args.SetMaxSendMessageSize(options.max_message_bytes);
  if (options.own_connection) args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  if (options.tls_client_cert_file.empty() != options.tls_client_key_file.empty()) {
    return absl::InvalidArgumentError(
        "a TLS client certificate and its private key must be given together");
  }
  if (!options.tls_client_cert_file.empty() && options.tls_ca_file.empty()) {
    return absl::InvalidArgumentError(
        "a TLS client certificate needs TLS: give the CA file of the server certificate too");
  }
  if (options.tls_ca_file.empty()) {
    creds = grpc::InsecureChannelCredentials();
  } else {
    grpc::SslCredentialsOptions ssl;
    auto roots = ReadPemFile(options.tls_ca_file, "TLS CA file");
    if (!roots.ok()) return roots.status();
    ssl.pem_root_certs = *std::move(roots);
    if (!options.tls_client_cert_file.empty()) {
      auto cert = ReadPemFile(options.tls_client_cert_file, "TLS client certificate file");
      if (!cert.ok()) return cert.status();
      auto key = ReadPemFile(options.tls_client_key_file, "TLS client key file");
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = *std::move(cert);
      ssl.pem_private_key = *std::move(key);
    }
    creds = grpc::SslCredentials(ssl);
    if (!options.tls_server_name.empty()) {
      args.SetSslTargetNameOverride(options.tls_server_name);
    }
  }
  auto channel = grpc::CreateCustomChannel(options.address, creds, args);
  if (!channel) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot create a channel to '", options.address, "'"));
  }
  return std::unique_ptr<Client>(new Client(std::make_unique<Impl>(options, std::move(channel))));
}

// ---------------------------------------------------------------- unary calls

absl::StatusOr<HealthState> Client::Health(const std::string& service) {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx);
  grpc::GenericStub generic(impl_->channel_);
  const std::string req_bytes = EncodeHealthRequest(service);
  grpc::Slice slice(req_bytes);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status status;
  generic.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                    [&](grpc::Status s) {
                      std::lock_guard<std::mutex> lock(mu);
                      status = std::move(s);
                      done = true;
                      cv.notify_one();
                    });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
  }
  if (!status.ok()) return FromGrpc(status);
  std::vector<grpc::Slice> slices;
  grpc::Status dump = response.Dump(&slices);
  if (!dump.ok()) return FromGrpc(dump);
  std::string bytes;
  for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  GPUJOIN_ASSIGN_OR_RETURN(int code, DecodeHealthResponse(bytes));
  switch (code) {
    case 1:
      return HealthState::kServing;
    case 2:
      return HealthState::kNotServing;
    case 3:
      return HealthState::kServiceUnknown;
    default:
      return HealthState::kUnknown;
  }
}

absl::StatusOr<ServerInfo> Client::GetServerInfo() {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx);
  pb::GetServerInfoResponse r;
  GPUJOIN_RETURN_IF_ERROR(
      FromGrpc(impl_->stub_->GetServerInfo(&ctx, pb::GetServerInfoRequest(), &r)));
  ServerInfo i;
  i.version = r.version();
  i.backend = r.backend();
  i.device_name = r.device_name();
  i.device_memory_total_bytes = r.device_memory_total_bytes();
  i.device_memory_used_bytes = r.device_memory_used_bytes();
  i.device_memory_budget_bytes = r.device_memory_budget_bytes();
  i.max_message_bytes = r.max_message_bytes();
  i.max_inflight_batches_per_stream = r.max_inflight_batches_per_stream();
  i.max_inflight_batches = r.max_inflight_batches();
  i.index_count = r.index_count();
  i.serving = r.serving();
  i.max_result_bytes = r.max_result_bytes();
  i.max_pending_response_bytes = r.max_pending_response_bytes();
  i.pending_response_bytes = r.pending_response_bytes();
  return i;
}

absl::StatusOr<std::vector<IndexInfo>> Client::ListIndexes() {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx);
  pb::ListIndexesResponse r;
  GPUJOIN_RETURN_IF_ERROR(FromGrpc(impl_->stub_->ListIndexes(&ctx, pb::ListIndexesRequest(), &r)));
  std::vector<IndexInfo> out;
  out.reserve(r.indexes_size());
  for (const auto& i : r.indexes()) out.push_back(ToIndexInfo(i));
  return out;
}

absl::StatusOr<IndexInfo> Client::DescribeIndex(const std::string& name) {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx);
  pb::DescribeIndexRequest req;
  req.set_name(name);
  pb::DescribeIndexResponse r;
  GPUJOIN_RETURN_IF_ERROR(FromGrpc(impl_->stub_->DescribeIndex(&ctx, req, &r)));
  return ToIndexInfo(r.index());
}

absl::StatusOr<DropResult> Client::DropIndex(const std::string& name) {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx);
  pb::DropIndexRequest req;
  req.set_name(name);
  pb::DropIndexResponse r;
  GPUJOIN_RETURN_IF_ERROR(FromGrpc(impl_->stub_->DropIndex(&ctx, req, &r)));
  return DropResult{r.dropped_version(), r.freed_bytes()};
}

absl::StatusOr<SaveResult> Client::SaveIndex(const std::string& name, const std::string& file) {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx);
  pb::SaveIndexRequest req;
  req.set_name(name);
  req.set_file(file);
  pb::SaveIndexResponse r;
  GPUJOIN_RETURN_IF_ERROR(FromGrpc(impl_->stub_->SaveIndex(&ctx, req, &r)));
  return SaveResult{r.file(), r.bytes(), r.version(), r.seconds()};
}

absl::StatusOr<IndexInfo> Client::LoadIndex(const std::string& name, const std::string& file,
                                            bool replace) {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx);
  pb::LoadIndexRequest req;
  req.set_name(name);
  req.set_file(file);
  req.set_replace(replace);
  pb::LoadIndexResponse r;
  GPUJOIN_RETURN_IF_ERROR(FromGrpc(impl_->stub_->LoadIndex(&ctx, req, &r)));
  return ToIndexInfo(r.index());
}

absl::StatusOr<DataFiles> Client::ListFiles() {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx);
  pb::ListFilesResponse r;
  GPUJOIN_RETURN_IF_ERROR(FromGrpc(impl_->stub_->ListFiles(&ctx, pb::ListFilesRequest(), &r)));
  DataFiles out;
  for (const pb::DataFile& f : r.files()) {
    out.files.push_back(DataFile{f.file(), f.bytes(), f.modified_unix_millis(), f.index(), f.live()});
  }
  out.snapshot_bytes = r.snapshot_bytes();
  out.copy_bytes = r.copy_bytes();
  out.max_copy_bytes = r.max_copy_bytes();
  out.max_snapshot_bytes = r.max_snapshot_bytes();
  return out;
}

absl::StatusOr<uint64_t> Client::DeleteFile(const std::string& file) {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx);
  pb::DeleteFileRequest req;
  req.set_file(file);
  pb::DeleteFileResponse r;
  GPUJOIN_RETURN_IF_ERROR(FromGrpc(impl_->stub_->DeleteFile(&ctx, req, &r)));
  return r.bytes();
}

// ---------------------------------------------------------------- build

absl::StatusOr<IndexInfo> Client::BuildIndex(const IndexSpec& spec, const ChunkSource& next_chunk,
                                             const ProgressCallback& progress, uint64_t total_rows,
                                             std::optional<std::chrono::milliseconds> deadline) {
  if (spec.name.empty()) return absl::InvalidArgumentError("index name is empty");
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx, deadline);
  pb::BuildIndexResponse response;
  auto writer = impl_->stub_->BuildIndex(&ctx, &response);

  pb::BuildIndexRequest req;
  auto* s = req.mutable_spec();
  s->set_name(spec.name);
  s->set_capacity(spec.capacity);
  s->set_expected_rows(spec.expected_rows);
  s->set_target_load_factor(spec.target_load_factor);
  s->set_max_probe_count(spec.max_probe_count);
  s->set_first_value(spec.first_value);
  s->set_explicit_values(spec.explicit_values);
  s->set_batch_mode(spec.batch_mode);
  s->set_replace(spec.replace);
  s->set_key_type(ToProtoKeyType(spec.key_type));
  s->set_duplicates(ToProtoPolicy(spec.duplicates));
  s->set_wait_durable(spec.wait_durable);
  std::unordered_map<std::string_view, ColumnType> declared;
  for (const PayloadColumnSpec& p : spec.payload) {
    auto* ps = s->add_payload();
    ps->set_name(p.name);
    ps->set_type(detail::ToProtoColumnType(p.type));
    declared.emplace(p.name, p.type);
  }

  Progress p;
  p.total_rows = total_rows;
  absl::Status local;  // a client-side error that ends the upload early
  bool ok = writer->Write(req);
  uint64_t chunk_index = 0;
  while (ok) {
    std::optional<BuildChunk> chunk = next_chunk();
    if (!chunk) break;
    if (!spec.explicit_values && !chunk->values.empty()) {
      local = absl::InvalidArgumentError(
          absl::StrCat("build chunk ", chunk_index, " carries ", chunk->values.size(),
                       " values but the index was not declared with explicit values"));
      break;
    }
    if (!spec.batch_mode && (chunk->row_base != 0 || !chunk->validity.empty())) {
      local = absl::InvalidArgumentError(absl::StrCat(
          "build chunk ", chunk_index, " carries a row base or validity but batch_mode is off"));
      break;
    }
    if (!chunk->keys.empty() && chunk->keys.type() != spec.key_type) {
      local = absl::InvalidArgumentError(absl::StrCat(
          "build chunk ", chunk_index, " has ", std::string(KeyTypeName(chunk->keys.type())),
          " keys but the index is declared with ", std::string(KeyTypeName(spec.key_type)),
          " keys (IndexSpec::key_type)"));
      break;
    }
    if (!chunk->validity.empty() && chunk->validity.size() != chunk->keys.size()) {
      local = absl::InvalidArgumentError(absl::StrCat("build chunk ", chunk_index,
                                                      ": validity has ", chunk->validity.size(),
                                                      " rows but keys have ", chunk->keys.size()));
      break;
    }
    for (size_t m = 0; m < chunk->payload.size() && local.ok(); ++m) {
      const ColumnView& v = chunk->payload[m];
      const std::string what = absl::StrCat("build chunk ", chunk_index, " payload[", m, "] ('",
                                            std::string(v.name), "')");
      auto it = declared.find(v.name);
      if (it == declared.end()) {
        local = absl::InvalidArgumentError(
            absl::StrCat(what, ": no such column in IndexSpec::payload"));
      } else if (it->second != v.type) {
        local = absl::InvalidArgumentError(
            absl::StrCat(what, ": ", std::string(ColumnTypeName(v.type)),
                         " rows for a column declared ", std::string(ColumnTypeName(it->second))));
      } else {
        local = CheckColumnView(v, what);
      }
    }
    if (!local.ok()) break;
    req.Clear();
    auto* c = req.mutable_chunk();
    // An empty chunk goes in the spec's width whatever its (default) type.
    SetKeys(chunk->keys, spec.key_type, c);
    if (spec.explicit_values) SetColumn(chunk->values, c->mutable_values());
    if (spec.batch_mode) {
      c->set_row_base(chunk->row_base);
      if (!chunk->validity.empty()) {
        SetPacked(chunk->validity, c->mutable_validity()->mutable_packed());
      }
    }
    uint64_t payload_bytes = 0;
    for (const ColumnView& v : chunk->payload) {
      pb::Column* pc = c->add_payload();
      detail::EncodeColumn(v, pc);
      payload_bytes += pc->data().size() + pc->offsets().size() + pc->validity().size();
    }
    ok = writer->Write(req);
    ++chunk_index;
    p.rows_sent += chunk->keys.size();
    p.bytes_sent += chunk->keys.size_bytes() + chunk->values.size_bytes() +
                    chunk->validity.size_bytes() + payload_bytes;
    if (ok && progress) progress(p);
  }
  if (!local.ok()) {
    ctx.TryCancel();
    (void)writer->Finish();
    return local;
  }
  writer->WritesDone();
  GPUJOIN_RETURN_IF_ERROR(FromGrpc(writer->Finish()));
  return ToIndexInfo(response.index());
}

absl::StatusOr<IndexInfo> Client::BuildIndexFromColumns(const IndexSpec& spec, Keys keys,
                                                        std::span<const uint32_t> values,
                                                        size_t chunk_rows,
                                                        const ProgressCallback& progress) {
  if (spec.explicit_values && values.size() != keys.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("values has ", values.size(), " rows but keys has ", keys.size()));
  }
  if (!spec.explicit_values && !values.empty()) {
    return absl::InvalidArgumentError(
        "values given but the index spec does not declare explicit_values");
  }
  return BuildIndexFromColumns(spec, keys, values, {}, chunk_rows, progress);
}

absl::StatusOr<IndexInfo> Client::BuildIndexFromColumns(const IndexSpec& spec, Keys keys,
                                                        std::span<const uint32_t> values,
                                                        std::span<const ColumnView> payload,
                                                        size_t chunk_rows,
                                                        const ProgressCallback& progress) {
  if (spec.explicit_values && values.size() != keys.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("values has ", values.size(), " rows but keys has ", keys.size()));
  }
  if (!spec.explicit_values && !values.empty()) {
    return absl::InvalidArgumentError(
        "values given but the index spec does not declare explicit_values");
  }
  // Exactly one view per declared column, each as long as the keys.
  for (const PayloadColumnSpec& d : spec.payload) {
    const auto n = std::count_if(payload.begin(), payload.end(),
                                 [&](const ColumnView& v) { return v.name == d.name; });
    if (n != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("payload column '", d.name, "' is declared in IndexSpec::payload but ",
                       n == 0 ? "not given" : "given more than once"));
    }
  }
  for (size_t i = 0; i < payload.size(); ++i) {
    const ColumnView& v = payload[i];
    const std::string what = absl::StrCat("payload[", i, "] ('", std::string(v.name), "')");
    if (std::none_of(spec.payload.begin(), spec.payload.end(),
                     [&](const PayloadColumnSpec& d) { return d.name == v.name; })) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": no such column in IndexSpec::payload"));
    }
    if (v.length != keys.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " has ", v.length, " rows but keys has ", keys.size()));
    }
    GPUJOIN_RETURN_IF_ERROR(CheckColumnView(v, what));
  }
  // 1 KiB below the message limit: room for the request's own framing.
  const uint64_t max_bytes = static_cast<uint64_t>(options().max_message_bytes);
  const uint64_t max_chunk_bytes = max_bytes > 2048 ? max_bytes - 1024 : max_bytes / 2;
  GPUJOIN_ASSIGN_OR_RETURN(
      detail::BuildChunker chunker,
      detail::BuildChunker::Make(keys, values, payload, chunk_rows, max_chunk_bytes));
  ChunkSource source = [&]() -> std::optional<BuildChunk> { return chunker.Next(); };
  return BuildIndex(spec, source, progress, keys.size());
}

// ---------------------------------------------------------------- streams

absl::Status Client::Lookup(const std::string& index, const BatchSource<LookupBatch>& source,
                            const ResultSink<LookupResult>& sink, const StreamOptions& options) {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx, options.deadline);
  auto stream = impl_->stub_->Lookup(&ctx);
  auto encode = [&index](const LookupBatch& b, uint64_t id, pb::LookupRequest* r) {
    r->set_index(index);
    SetKeys(b.keys, b.keys.type(), r);
    r->set_want_probes(b.want_probes);
    r->set_max_probe_count(b.max_probe_count);
    r->set_batch_id(id);
    for (const std::string& name : b.select) r->add_select(name);
    r->set_want_match_counts(b.want_match_counts);
    return absl::OkStatus();
  };
  auto decode = [](pb::LookupResponse& r, LookupResult* out) -> absl::Status {
    out->index_version = r.index_version();
    if (DecodeBatchHeader(r, out)) return absl::OkStatus();
    GPUJOIN_RETURN_IF_ERROR(Unpack(r.values(), "values", &out->values));
    out->found.assign(r.found().begin(), r.found().end());
    GPUJOIN_RETURN_IF_ERROR(Unpack(r.probes(), "probes", &out->probes));
    GPUJOIN_RETURN_IF_ERROR(Unpack(r.match_counts(), "match_counts", &out->match_counts));
    if (out->found.size() != out->values.size()) {
      return absl::InternalError(absl::StrCat("server sent ", out->values.size(), " values but ",
                                              out->found.size(), " found flags"));
    }
    if (!out->match_counts.empty() && out->match_counts.size() != out->values.size()) {
      return absl::InternalError(absl::StrCat("server sent ", out->match_counts.size(),
                                              " match counts for ", out->values.size(), " rows"));
    }
    out->statistics = ToQueryStatistics(r.statistics());
    return DecodeColumns(r.columns(), out->values.size(), &out->columns);
  };
  return detail::RunStream<pb::LookupRequest, pb::LookupResponse, LookupBatch, LookupResult>(
      &ctx, stream.get(), source, encode, decode, detail::kWhole, sink, options);
}

absl::Status Client::Join(const std::string& index, const BatchSource<JoinBatch>& source,
                          const ResultSink<JoinResult>& sink, const StreamOptions& options) {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx, options.deadline);
  auto stream = impl_->stub_->Join(&ctx);
  auto encode = [&index](const JoinBatch& b, uint64_t id, pb::JoinRequest* r) -> absl::Status {
    if (b.lefts.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("join batch ", id, " has no left batches (lefts is empty)"));
    }
    r->set_index(index);
    r->set_max_probe_count(b.max_probe_count);
    r->set_batch_id(id);
    r->set_kind(ToProtoKind(b.kind));
    for (const std::string& name : b.select) r->add_select(name);
    for (size_t i = 0; i < b.lefts.size(); ++i) {
      const JoinLeft& l = b.lefts[i];
      if (!l.left_rows.empty() && l.left_rows.size() != l.keys.size()) {
        return absl::InvalidArgumentError(absl::StrCat("join batch ", id, " left ", i,
                                                       ": left_rows has ", l.left_rows.size(),
                                                       " rows but keys has ", l.keys.size()));
      }
      auto* lb = r->add_batches();
      SetKeys(l.keys, l.keys.type(), lb);
      if (!l.left_rows.empty()) SetPacked(l.left_rows, lb->mutable_left_rows()->mutable_packed());
      lb->set_first_left_row(l.first_left_row);
      lb->set_capacity(l.capacity);
      lb->set_want_found(l.want_found);
      lb->set_want_probes(l.want_probes);
      lb->set_count_only(l.count_only);
    }
    return absl::OkStatus();
  };
  // Called on the reading thread only, part by part.
  detail::JoinAssembler assembler;
  auto decode = [&assembler](pb::JoinResponse& r, JoinResult* out) -> absl::Status {
    return assembler.Add(r, out);
  };
  auto more = [](const pb::JoinResponse& r) { return r.more(); };
  return detail::RunStream<pb::JoinRequest, pb::JoinResponse, JoinBatch, JoinResult>(
      &ctx, stream.get(), source, encode, decode, more, sink, options);
}

absl::Status Client::Aggregate(const AggregateSpec& spec, const BatchSource<AggregateBatch>& source,
                               const ResultSink<AggregateResult>& sink,
                               const StreamOptions& options) {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx, options.deadline);
  auto stream = impl_->stub_->Aggregate(&ctx);
  const bool typed = spec.op != AggregateOp::kCount && spec.value_type != ColumnType::kFloat32;
  auto encode = [&spec, typed](const AggregateBatch& b, uint64_t id,
                               pb::AggregateRequest* r) -> absl::Status {
    if (!b.validity.empty() && !typed) {
      return absl::InvalidArgumentError(absl::StrCat(
          "aggregate batch ", id, ": validity is for typed values; a ",
          spec.op == AggregateOp::kCount ? "count" : "float32",
          " stream has none (leave rows out with mask)"));
    }
    if (typed) {
      GPUJOIN_RETURN_IF_ERROR(EncodeTypedValues(spec.value_type, b.typed_values, b.validity,
                                                b.keys.size(), id, r->mutable_typed_values()));
    } else if (spec.op != AggregateOp::kCount && b.values.size() != b.keys.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "aggregate batch ", id, ": values has ", b.values.size(), " rows but keys has ",
          b.keys.size(), " (", std::string(AggregateOpName(spec.op)), " needs one value per key)"));
    }
    if (!b.mask.empty() && b.mask.size() != b.keys.size()) {
      return absl::InvalidArgumentError(absl::StrCat("aggregate batch ", id, ": mask has ",
                                                     b.mask.size(), " rows but keys has ",
                                                     b.keys.size()));
    }
    r->set_op(ToProtoOp(spec.op));
    r->set_groups(spec.groups);
    SetColumn(b.keys, r->mutable_keys());
    if (spec.op != AggregateOp::kCount && !typed) SetColumn(b.values, r->mutable_values());
    if (!b.mask.empty()) SetPacked(b.mask, r->mutable_mask()->mutable_packed());
    r->set_accumulate_only(b.accumulate_only);
    r->set_batch_id(id);
    r->set_want_counts64(spec.want_counts64);
    return absl::OkStatus();
  };
  auto decode = [](pb::AggregateResponse& r, AggregateResult* out) -> absl::Status {
    if (DecodeBatchHeader(r, out)) return absl::OkStatus();
    GPUJOIN_RETURN_IF_ERROR(DecodeTypedResult(r, out));
    GPUJOIN_RETURN_IF_ERROR(Unpack(r.counts(), "counts", &out->counts));
    GPUJOIN_RETURN_IF_ERROR(Unpack(r.values(), "values", &out->values));
    GPUJOIN_RETURN_IF_ERROR(
        Unpack(r.contributing_rows(), "contributing_rows", &out->contributing_rows));
    GPUJOIN_RETURN_IF_ERROR(Unpack(r.total_counts(), "total_counts", &out->total_counts));
    GPUJOIN_RETURN_IF_ERROR(Unpack(r.total_values(), "total_values", &out->total_values));
    out->rows = r.rows();
    return absl::OkStatus();
  };
  return detail::RunStream<pb::AggregateRequest, pb::AggregateResponse, AggregateBatch,
                           AggregateResult>(&ctx, stream.get(), source, encode, decode,
                                            detail::kWhole, sink, options);
}

absl::Status Client::Hash(const BatchSource<HashBatch>& source, const ResultSink<HashResult>& sink,
                          const StreamOptions& options) {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx, options.deadline);
  auto stream = impl_->stub_->Hash(&ctx);
  // The requested width of every batch in flight, to widen the answers.
  std::mutex bits_mu;
  std::deque<uint32_t> bits_in_flight;
  auto encode = [&](const HashBatch& b, uint64_t id, pb::HashRequest* r) -> absl::Status {
    if (b.bits != 32 && b.bits != 64) {
      return absl::InvalidArgumentError(
          absl::StrCat("hash batch ", id, ": bits must be 32 or 64, got ", b.bits));
    }
    if (b.columns.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("hash batch ", id, " has no columns"));
    }
    for (const HashColumn& c : b.columns) detail::EncodeHashColumn(c, r->add_columns());
    r->set_bits(b.bits);
    r->set_batch_id(id);
    std::lock_guard<std::mutex> lock(bits_mu);
    bits_in_flight.push_back(b.bits);
    return absl::OkStatus();
  };
  auto decode = [&](pb::HashResponse& r, HashResult* out) -> absl::Status {
    {
      std::lock_guard<std::mutex> lock(bits_mu);
      if (!bits_in_flight.empty()) {
        out->bits = bits_in_flight.front();
        bits_in_flight.pop_front();
      }
    }
    if (DecodeBatchHeader(r, out)) return absl::OkStatus();
    if (out->bits == 32) {
      std::vector<uint32_t> h;
      GPUJOIN_RETURN_IF_ERROR(Unpack(r.hashes(), "hashes", &h));
      out->hashes.assign(h.begin(), h.end());
    } else {
      GPUJOIN_RETURN_IF_ERROR(Unpack(r.hashes(), "hashes", &out->hashes));
    }
    out->validity.assign(r.validity().begin(), r.validity().end());
    if (out->validity.size() < (out->hashes.size() + 7) / 8) {
      return absl::InternalError(absl::StrCat("server sent a validity bitmap of ",
                                              out->validity.size(), " bytes for ",
                                              out->hashes.size(), " rows"));
    }
    out->null_count = r.null_count();
    return absl::OkStatus();
  };
  return detail::RunStream<pb::HashRequest, pb::HashResponse, HashBatch, HashResult>(
      &ctx, stream.get(), source, encode, decode, detail::kWhole, sink, options);
}

// ---------------------------------------------------------------- ...All helpers

absl::StatusOr<LookupResult> Client::LookupAll(const std::string& index, Keys keys,
                                               size_t batch_rows, const StreamOptions& options,
                                               const ProgressCallback& progress) {
  QueryAllOptions o;
  o.batch_rows = batch_rows;
  o.stream = options;
  o.progress = progress;
  return LookupAll(index, keys, o);
}

absl::StatusOr<LookupResult> Client::LookupAll(const std::string& index, Keys keys,
                                               const QueryAllOptions& o) {
  if (o.batch_rows == 0) return absl::InvalidArgumentError("batch_rows must be positive");
  LookupResult all;
  all.values.reserve(keys.size());
  all.found.reserve(keys.size());
  size_t pos = 0;
  bool sent_any = false;
  Progress p;
  p.total_rows = keys.size();
  BatchSource<LookupBatch> source = [&]() -> std::optional<LookupBatch> {
    // With a selection, empty input still sends one (empty) batch, whose
    // answer gives the columns their types.
    if (pos >= keys.size() && (sent_any || o.select.empty())) return std::nullopt;
    sent_any = true;
    const size_t n = std::min(o.batch_rows, keys.size() - pos);
    LookupBatch b;
    b.keys = keys.subspan(pos, n);
    b.select = o.select;
    b.want_match_counts = o.want_match_counts;
    b.max_probe_count = o.max_probe_count;
    pos += n;
    return b;
  };
  GPUJOIN_RETURN_IF_ERROR(Lookup(
      index, source,
      [&](LookupResult&& r) -> absl::Status {
        if (!r.error.ok()) return r.error;
        all.values.insert(all.values.end(), r.values.begin(), r.values.end());
        all.found.insert(all.found.end(), r.found.begin(), r.found.end());
        if (o.want_match_counts && r.match_counts.size() != r.values.size()) {
          return absl::InternalError(absl::StrCat("server sent ", r.match_counts.size(),
                                                  " match counts for ", r.values.size(), " rows"));
        }
        all.match_counts.insert(all.match_counts.end(), r.match_counts.begin(),
                                r.match_counts.end());
        GPUJOIN_RETURN_IF_ERROR(AppendColumns(std::move(r.columns), &all.columns));
        all.statistics.Merge(r.statistics);
        all.batch_id = r.batch_id;
        all.index_version = r.index_version;
        all.latency = r.latency;
        p.rows_sent += r.values.size();
        p.bytes_sent += r.values.size() * keys.key_bytes();
        if (o.progress) o.progress(p);
        return absl::OkStatus();
      },
      o.stream));
  if (all.values.size() != keys.size()) {
    return absl::InternalError(
        absl::StrCat("lookup answered ", all.values.size(), " of ", keys.size(), " rows"));
  }
  return all;
}

absl::StatusOr<JoinPairs> Client::JoinAll(const std::string& index, Keys keys, size_t batch_rows,
                                          uint64_t capacity, const StreamOptions& options,
                                          const ProgressCallback& progress) {
  QueryAllOptions o;
  o.batch_rows = batch_rows;
  o.capacity = capacity;
  o.stream = options;
  o.progress = progress;
  return JoinAll(index, keys, o);
}

absl::StatusOr<JoinPairs> Client::JoinAll(const std::string& index, Keys keys,
                                          const QueryAllOptions& o) {
  if (o.batch_rows == 0) return absl::InvalidArgumentError("batch_rows must be positive");
  if (keys.size() > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("join has ", keys.size(), " left rows; left row IDs are uint32"));
  }
  // Inner and left-outer joins on a multi-value index may yield more pairs than
  // left rows: with no capacity given, count first, then ask for exactly that.
  bool sized = false;
  if (o.capacity == 0 && !o.count_only &&
      (o.kind == JoinKind::kInner || o.kind == JoinKind::kLeftOuter)) {
    GPUJOIN_ASSIGN_OR_RETURN(const IndexInfo info, DescribeIndex(index));
    sized = info.duplicates == DuplicatePolicy::kKeepAll;
  }
  // With a selection, empty input still sends one (empty) batch (as LookupAll).
  const size_t batches =
      keys.empty() ? (o.select.empty() ? 0 : 1) : (keys.size() + o.batch_rows - 1) / o.batch_rows;
  auto rows_of = [&](uint64_t b) {
    return std::min<uint64_t>(o.batch_rows,
                              keys.size() - std::min<uint64_t>(keys.size(), b * o.batch_rows));
  };
  // The largest capacity the server takes for one batch.
  constexpr uint64_t kMaxCapacity = uint64_t{1} << 31;

  Progress p;
  p.total_rows = sized ? 2 * keys.size() : keys.size();
  uint64_t version = 0;  // of the last answer
  // One stream over all batches; `configure` sets a batch's capacity and
  // count_only, `take` consumes its answer.
  auto pass = [&](const std::function<void(uint64_t, JoinLeft*)>& configure,
                  const std::function<absl::Status(uint64_t, JoinPairs &&)>& take) {
    uint64_t next = 0;
    BatchSource<JoinBatch> source = [&]() -> std::optional<JoinBatch> {
      if (next >= batches) return std::nullopt;
      const uint64_t pos = next * o.batch_rows;
      JoinBatch b;
      JoinLeft l;
      l.keys = keys.subspan(pos, rows_of(next));
      l.first_left_row = static_cast<uint32_t>(pos);
      configure(next, &l);
      b.lefts.push_back(l);
      b.select = o.select;
      b.kind = o.kind;
      b.max_probe_count = o.max_probe_count;
      ++next;
      return b;
    };
    return Join(
        index, source,
        [&](JoinResult&& r) -> absl::Status {
          if (!r.error.ok()) return r.error;
          if (r.results.size() != 1) {
            return absl::InternalError(
                absl::StrCat("server sent ", r.results.size(), " join results for one left batch"));
          }
          JoinPairs& jp = r.results[0];
          version = r.index_version;
          p.rows_sent += jp.statistics.found + jp.statistics.missing;
          p.bytes_sent += jp.left_rows.size() * 2 * sizeof(uint32_t);
          GPUJOIN_RETURN_IF_ERROR(take(r.batch_id, std::move(jp)));
          if (o.progress) o.progress(p);
          return absl::OkStatus();
        },
        o.stream);
  };

  std::vector<uint64_t> counts;  // sized: the count pass's count of every batch
  if (sized) {
    counts.assign(batches, 0);
    GPUJOIN_RETURN_IF_ERROR(pass([](uint64_t, JoinLeft* l) { l->count_only = true; },
                                 [&](uint64_t b, JoinPairs&& jp) -> absl::Status {
                                   counts[b] = jp.count;
                                   return absl::OkStatus();
                                 }));
  }

  JoinPairs all;
  uint64_t left_to_ask = o.max_pairs ? o.max_pairs : std::numeric_limits<uint64_t>::max();
  // Called on the writer thread, in batch order, so `left_to_ask` needs no lock.
  auto configure = [&](uint64_t b, JoinLeft* l) {
    if (o.count_only) {
      l->count_only = true;
    } else if (sized) {
      const uint64_t want = std::min({counts[b], left_to_ask, kMaxCapacity});
      left_to_ask -= want;
      // Capacity 0 would mean "the batch's rows", and a count-only answer has no
      // columns: a batch with nothing to ask asks for one pair (dropped by `take`
      // when max_pairs is spent), so the gathered columns stay typed.
      l->capacity = std::max<uint64_t>(want, 1);
    } else {
      l->capacity = o.capacity;
      if (o.max_pairs) {
        l->capacity = std::min<uint64_t>(o.capacity ? o.capacity : l->keys.size(), o.max_pairs);
      }
    }
  };
  auto take = [&](uint64_t b, JoinPairs&& jp) -> absl::Status {
    if (sized && jp.count > counts[b]) {
      return absl::AbortedError(absl::StrCat(
          "join of index '", index, "': batch ", b, " yields ", jp.count, " pairs, its count pass ",
          counts[b], ": the index changed between the passes; run the join again"));
    }
    if (!sized && o.capacity == 0 && !o.count_only && jp.count > rows_of(b)) {
      return absl::AbortedError(absl::StrCat("join of index '", index, "': batch ", b, " yields ",
                                             jp.count, " pairs for ", rows_of(b),
                                             " left rows: the index was rebuilt with keep_all "
                                             "during the join; run the join again"));
    }
    size_t keep = jp.left_rows.size();
    if (o.max_pairs) keep = std::min<uint64_t>(keep, o.max_pairs - all.left_rows.size());
    all.left_rows.insert(all.left_rows.end(), jp.left_rows.begin(), jp.left_rows.begin() + keep);
    all.right_rows.insert(all.right_rows.end(), jp.right_rows.begin(),
                          jp.right_rows.begin() + keep);
    if (keep < jp.left_rows.size()) {
      for (Column& c : jp.columns) {
        Column prefix(c.name, c.type);
        GPUJOIN_RETURN_IF_ERROR(prefix.AppendRows(c.view().Slice(0, keep)));
        c = std::move(prefix);
      }
    }
    GPUJOIN_RETURN_IF_ERROR(AppendColumns(std::move(jp.columns), &all.columns));
    all.count += jp.count;
    all.capacity += jp.capacity;
    all.overflow = all.overflow || jp.overflow;
    all.statistics.Merge(jp.statistics);
    return absl::OkStatus();
  };
  GPUJOIN_RETURN_IF_ERROR(pass(configure, take));
  if (o.max_pairs && all.count > o.max_pairs && !o.count_only) all.overflow = true;
  all.index_version = version;
  return all;
}

namespace {

// What AggregateAll and AggregateAllTyped share: `keys` (and `mask`) cut into
// batches of `batch_rows` rows with accumulate_only, `values_of(batch, pos, n)`
// adding each batch's values, and the stream's final totals with the rows of
// the whole input. At least one batch is sent, so that empty input still
// yields totals.
absl::StatusOr<AggregateResult> AggregateColumns(
    Client& client, const AggregateSpec& spec, std::span<const uint32_t> keys,
    std::span<const uint32_t> mask, size_t batch_rows, uint64_t bytes_per_row,
    const std::function<void(AggregateBatch&, size_t, size_t)>& values_of,
    const StreamOptions& options, const ProgressCallback& progress) {
  if (batch_rows == 0) return absl::InvalidArgumentError("batch_rows must be positive");
  if (!mask.empty() && mask.size() != keys.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("mask has ", mask.size(), " rows but keys has ", keys.size()));
  }
  AggregateResult last;
  size_t pos = 0;
  bool sent_any = false;
  Progress p;
  p.total_rows = keys.size();
  BatchSource<AggregateBatch> source = [&]() -> std::optional<AggregateBatch> {
    if (pos >= keys.size() && sent_any) return std::nullopt;
    sent_any = true;
    const size_t n = std::min(batch_rows, keys.size() - pos);
    AggregateBatch b;
    b.keys = keys.subspan(pos, n);
    values_of(b, pos, n);
    if (!mask.empty()) b.mask = mask.subspan(pos, n);
    b.accumulate_only = true;
    pos += n;
    return b;
  };
  uint64_t rows = 0;
  GPUJOIN_RETURN_IF_ERROR(client.Aggregate(
      spec, source,
      [&](AggregateResult&& r) -> absl::Status {
        if (!r.error.ok()) return r.error;
        rows += r.rows;
        p.rows_sent += r.rows;
        p.bytes_sent = p.rows_sent * bytes_per_row;
        last = std::move(r);
        if (progress) progress(p);
        return absl::OkStatus();
      },
      options));
  last.rows = rows;
  return last;
}

}  // namespace

absl::StatusOr<AggregateResult> Client::AggregateAll(
    const AggregateSpec& spec, std::span<const uint32_t> keys, std::span<const float> values,
    std::span<const uint32_t> mask, size_t batch_rows, const StreamOptions& options,
    const ProgressCallback& progress) {
  const bool count = spec.op == AggregateOp::kCount;
  if (!count && values.size() != keys.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("values has ", values.size(), " rows but keys has ", keys.size()));
  }
  return AggregateColumns(
      *this, spec, keys, mask, batch_rows, count ? 4 : 8,
      [&](AggregateBatch& b, size_t pos, size_t n) {
        if (!count) b.values = values.subspan(pos, n);
      },
      options, progress);
}

absl::StatusOr<AggregateResult> Client::AggregateAllTyped(
    const AggregateSpec& spec, std::span<const uint32_t> keys, const AggregateValues& values,
    std::span<const uint8_t> validity, std::span<const uint32_t> mask, size_t batch_rows,
    const StreamOptions& options, const ProgressCallback& progress) {
  if (spec.op == AggregateOp::kCount || spec.value_type == ColumnType::kFloat32) {
    return absl::InvalidArgumentError(
        "AggregateAllTyped: a typed value op is needed (use AggregateAll for count and float32)");
  }
  if (!validity.empty() && validity.size() != (keys.size() + 7) / 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("validity has ", validity.size(), " bytes but a bitmap of ", keys.size(),
                     " rows has ", (keys.size() + 7) / 8));
  }
  size_t width = 8;
  const absl::Status checked = std::visit(
      [&](const auto& v) -> absl::Status {
        using S = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<S, std::monostate>) {
          return absl::InvalidArgumentError("typed values are required");
        } else {
          width = sizeof(typename S::value_type);
          if (v.size() != keys.size()) {
            return absl::InvalidArgumentError(
                absl::StrCat("values has ", v.size(), " rows but keys has ", keys.size()));
          }
          return absl::OkStatus();
        }
      },
      values);
  GPUJOIN_RETURN_IF_ERROR(checked);
  // The batch's bits, shifted to its first row (it stays until the next batch
  // is made, after this one was copied into its request).
  std::vector<uint8_t> batch_bits;
  return AggregateColumns(
      *this, spec, keys, mask, batch_rows, 4 + width,
      [&](AggregateBatch& b, size_t pos, size_t n) {
        if (!validity.empty()) {
          batch_bits.assign((n + 7) / 8, 0);
          detail::CopyBits(validity.data(), pos, n, batch_bits.data(), 0);
          b.validity = batch_bits;
        }
        b.typed_values = std::visit(
            [&](const auto& v) -> AggregateValues {
              if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::monostate>) {
                return std::monostate{};
              } else {
                return v.subspan(pos, n);
              }
            },
            values);
      },
      options, progress);
}

absl::StatusOr<HashResult> Client::HashAll(const std::vector<HashColumn>& columns, uint32_t bits,
                                           size_t batch_rows, const StreamOptions& options,
                                           const ProgressCallback& progress) {
  if (columns.empty()) return absl::InvalidArgumentError("hash needs at least one column");
  if (batch_rows == 0) return absl::InvalidArgumentError("batch_rows must be positive");
  const uint64_t rows = columns[0].length;
  for (size_t i = 0; i < columns.size(); ++i) {
    const HashColumn& c = columns[i];
    if (c.length != rows) {
      return absl::InvalidArgumentError(
          absl::StrCat("hash column ", i, " has ", c.length, " rows but column 0 has ", rows));
    }
    GPUJOIN_RETURN_IF_ERROR(CheckHashColumn(c, absl::StrCat("hash column ", i)));
  }
  // Each batch cuts every column (children included) to its rows, at the byte
  // holding the first row's bit, so bitmaps never need shifting; offsets are
  // rebased into `scratch`, which lives until the batch has been encoded.
  detail::HashCutScratch scratch;
  uint64_t pos = 0;
  bool sent_any = false;
  BatchSource<HashBatch> source = [&]() -> std::optional<HashBatch> {
    if (pos >= rows && sent_any) return std::nullopt;
    sent_any = true;
    const uint64_t n = std::min<uint64_t>(batch_rows, rows - pos);
    HashBatch b;
    b.bits = bits;
    scratch = {};
    for (const HashColumn& c : columns) b.columns.push_back(detail::CutHashRows(c, pos, n, &scratch));
    pos += n;
    return b;
  };
  HashResult all;
  all.bits = bits;
  all.validity.assign((rows + 7) / 8, 0);
  all.hashes.reserve(rows);
  Progress p;
  p.total_rows = rows;
  GPUJOIN_RETURN_IF_ERROR(Hash(
      source,
      [&](HashResult&& r) -> absl::Status {
        if (!r.error.ok()) return r.error;
        const uint64_t at = all.hashes.size();
        for (size_t k = 0; k < r.hashes.size(); ++k) {
          if (r.Valid(k)) all.validity[(at + k) / 8] |= static_cast<uint8_t>(1u << ((at + k) % 8));
        }
        all.hashes.insert(all.hashes.end(), r.hashes.begin(), r.hashes.end());
        all.null_count += r.null_count;
        all.batch_id = r.batch_id;
        all.latency = r.latency;
        p.rows_sent += r.hashes.size();
        p.bytes_sent += r.hashes.size() * (bits / 8);
        if (progress) progress(p);
        return absl::OkStatus();
      },
      options));
  if (all.hashes.size() != rows) {
    return absl::InternalError(
        absl::StrCat("hash answered ", all.hashes.size(), " of ", rows, " rows"));
  }
  return all;
}

}  // namespace gpujoin::client
