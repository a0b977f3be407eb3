// Client::BuildIndex (one client stream: the spec, then the chunks a source
// returns, each checked before it is sent) and BuildIndexFromColumns, which
// cuts whole in-memory columns into chunks that fit in a message.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "build_chunker.hpp"
#include "client_impl.hpp"
#include "gpujoin/client/client.hpp"
#include "gpujoin/common/status_macros.hpp"
#include "wire.hpp"

namespace gpujoin::client {
namespace {

namespace pb = ::gpujoin::v1;
using detail::SetColumn;
using detail::SetKeys;
using detail::SetPacked;

// The declared payload columns of a spec, by name.
using DeclaredColumns = std::unordered_map<std::string_view, ColumnType>;

// Writes `spec` into `s`; returns its payload columns by name.
DeclaredColumns EncodeSpec(const IndexSpec& spec, pb::IndexSpec* s) {
  s->set_name(spec.name);
  s->set_capacity(spec.capacity);
  s->set_expected_rows(spec.expected_rows);
  s->set_target_load_factor(spec.target_load_factor);
  s->set_max_probe_count(spec.max_probe_count);
  s->set_first_value(spec.first_value);
  s->set_explicit_values(spec.explicit_values);
  s->set_batch_mode(spec.batch_mode);
  s->set_replace(spec.replace);
  s->set_key_type(detail::ToProtoKeyType(spec.key_type));
  for (const KeyColumnSpec& k : spec.key_columns) {
    auto* ks = s->add_key_columns();
    ks->set_name(k.name);
    ks->set_type(detail::ToProtoColumnType(k.type));
  }
  s->set_duplicates(detail::ToProtoPolicy(spec.duplicates));
  s->set_wait_durable(spec.wait_durable);
  s->set_max_load_factor(spec.max_load_factor);
  s->set_placement(spec.replicated ? pb::INDEX_PLACEMENT_REPLICATED
                                   : pb::INDEX_PLACEMENT_PARTITIONED);
  DeclaredColumns declared;
  for (const PayloadColumnSpec& p : spec.payload) {
    auto* ps = s->add_payload();
    ps->set_name(p.name);
    ps->set_type(detail::ToProtoColumnType(p.type));
    declared.emplace(p.name, p.type);
  }
  return declared;
}

// The client-side checks of chunk `chunk_index` against the spec, before
// anything of it is sent: INVALID_ARGUMENT naming the chunk and the field.
absl::Status CheckChunk(const IndexSpec& spec, const DeclaredColumns& declared,
                        const BuildChunk& chunk, uint64_t chunk_index) {
  if (!spec.explicit_values && !chunk.values.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("build chunk ", chunk_index, " carries ", chunk.values.size(),
                     " values but the index was not declared with explicit values"));
  }
  if (!spec.batch_mode && (chunk.row_base != 0 || !chunk.validity.empty())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "build chunk ", chunk_index, " carries a row base or validity but batch_mode is off"));
  }
  // A chunk of payload only has no key columns (empty integer keys).
  GPUJOIN_RETURN_IF_ERROR(CheckKeysFor(chunk.keys, spec.key_type, spec.key_columns,
                                       absl::StrCat("build chunk ", chunk_index)));
  if (!chunk.validity.empty() && chunk.validity.size() != chunk.keys.size()) {
    return absl::InvalidArgumentError(absl::StrCat("build chunk ", chunk_index, ": validity has ",
                                                   chunk.validity.size(), " rows but keys have ",
                                                   chunk.keys.size()));
  }
  for (size_t m = 0; m < chunk.payload.size(); ++m) {
    const ColumnView& v = chunk.payload[m];
    const std::string what = absl::StrCat("build chunk ", chunk_index, " payload[", m, "] ('",
                                          std::string(v.name), "')");
    auto it = declared.find(v.name);
    if (it == declared.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": no such column in IndexSpec::payload"));
    }
    if (it->second != v.type) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": ", std::string(ColumnTypeName(v.type)),
                       " rows for a column declared ", std::string(ColumnTypeName(it->second))));
    }
    GPUJOIN_RETURN_IF_ERROR(CheckColumnView(v, what));
  }
  return absl::OkStatus();
}

// Writes a checked chunk into `c`; returns the bytes of its payload columns.
uint64_t EncodeChunk(const IndexSpec& spec, const BuildChunk& chunk, pb::BuildChunk* c) {
  // An empty chunk goes in the spec's width whatever its (default) type; a
  // payload-only chunk of a key schema carries no key columns.
  if (spec.key_type != KeyType::kColumns || chunk.keys.type() == KeyType::kColumns) {
    SetKeys(chunk.keys, spec.key_type, c);
  }
  if (spec.explicit_values) SetColumn(chunk.values, c->mutable_values());
  if (spec.batch_mode) {
    c->set_row_base(chunk.row_base);
    if (!chunk.validity.empty()) {
      SetPacked(chunk.validity, c->mutable_validity()->mutable_packed());
    }
  }
  uint64_t payload_bytes = 0;
  for (const ColumnView& v : chunk.payload) {
    pb::Column* pc = c->add_payload();
    detail::EncodeColumn(v, pc);
    payload_bytes += pc->data().size() + pc->offsets().size() + pc->validity().size();
  }
  return payload_bytes;
}

}  // namespace

absl::StatusOr<IndexInfo> Client::BuildIndex(const IndexSpec& spec, const ChunkSource& next_chunk,
                                             const ProgressCallback& progress, uint64_t total_rows,
                                             std::optional<std::chrono::milliseconds> deadline) {
  if (spec.name.empty()) return absl::InvalidArgumentError("index name is empty");
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx, deadline);
  pb::BuildIndexResponse response;
  auto writer = impl_->stub_->BuildIndex(&ctx, &response);

  pb::BuildIndexRequest req;
  const DeclaredColumns declared = EncodeSpec(spec, req.mutable_spec());
  Progress p;
  p.total_rows = total_rows;
  absl::Status local;  // a client-side error that ends the upload early
  bool ok = writer->Write(req);
  uint64_t chunk_index = 0;
  while (ok) {
    std::optional<BuildChunk> chunk = next_chunk();
    if (!chunk) break;
    local = chunk->error.ok() ? CheckChunk(spec, declared, *chunk, chunk_index) : chunk->error;
    if (!local.ok()) break;
    req.Clear();
    const uint64_t payload_bytes = EncodeChunk(spec, *chunk, req.mutable_chunk());
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
  GPUJOIN_RETURN_IF_ERROR(detail::FromGrpc(writer->Finish()));
  return detail::ToIndexInfo(response.index());
}

absl::StatusOr<IndexInfo> Client::BuildIndexFromColumns(const IndexSpec& spec, Keys keys,
                                                        std::span<const uint32_t> values,
                                                        size_t chunk_rows,
                                                        const ProgressCallback& progress) {
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
  // Key columns are checked whole before they are cut (the chunker reads their
  // offsets); integer keys of another width are refused by the first chunk.
  if (keys.type() == KeyType::kColumns || spec.key_type == KeyType::kColumns) {
    GPUJOIN_RETURN_IF_ERROR(CheckKeysFor(keys, spec.key_type, spec.key_columns, "keys"));
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

}  // namespace gpujoin::client
