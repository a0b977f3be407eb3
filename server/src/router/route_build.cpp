// BuildIndex through gpujoin-router: the spec sized for each shard's share,
// every chunk's rows split by the shard of their key (payload rows follow
// their key rows), generated values made global by the router. A replicated
// index (IndexSpec.placement) gets the spec and every chunk whole on every
// shard.
#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"
#include "router/merge.hpp"
#include "router/routes.hpp"
#include "router/wire_rows.hpp"

namespace gpujoin::server::router {
namespace {

uint32_t NextPowerOfTwo(uint64_t v) {
  uint64_t p = 1;
  while (p < v) p <<= 1;
  return static_cast<uint32_t>(std::min<uint64_t>(p, uint64_t{1} << 31));
}

// Batch chunk `chunk` (of `rows` key rows) with its masked-out rows' keys made
// invalid, and its values row_base + row in `values`.
absl::StatusOr<v1::BuildChunk> MaskedBatchChunk(const v1::BuildChunk& chunk, uint64_t rows,
                                                const std::string& field,
                                                std::vector<uint32_t>* values) {
  if (rows > 0 && (chunk.row_base() > 0xfffffffeull || rows - 1 > 0xfffffffeull - chunk.row_base())) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".row_base: ", chunk.row_base(), " + ", rows,
                     " rows passes 0xfffffffe, the largest row ID"));
  }
  values->resize(rows);
  for (uint64_t r = 0; r < rows; ++r) (*values)[r] = static_cast<uint32_t>(chunk.row_base() + r);
  v1::BuildChunk out = chunk;
  out.clear_validity();
  if (!chunk.has_validity()) return out;
  GPUJOIN_ASSIGN_OR_RETURN(const std::vector<uint32_t> valid,
                           WordsOf(chunk.validity(), field + ".validity"));
  if (valid.size() != rows) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".validity: ", valid.size(),
                                                   " rows but the chunk has ", rows, " keys"));
  }
  if (chunk.key_columns_size() > 0) {
    v1::Column& first = *out.mutable_key_columns(0);
    std::string bits = first.validity();
    if (bits.empty()) bits.assign((rows + 7) / 8, '\xff');
    for (uint64_t r = 0; r < rows; ++r) {
      if (valid[r] != 0) continue;
      bits[r / 8] = static_cast<char>(static_cast<uint8_t>(bits[r / 8]) & ~(1u << (r % 8)));
    }
    first.set_validity(std::move(bits));
    first.clear_null_count();
  } else if (chunk.has_keys64()) {
    GPUJOIN_ASSIGN_OR_RETURN(std::vector<uint64_t> words,
                             WordsOf(chunk.keys64(), field + ".keys64"));
    for (uint64_t r = 0; r < rows; ++r) {
      if (valid[r] == 0) words[r] = ~uint64_t{0};
    }
    std::vector<uint32_t> all(rows);
    for (uint64_t r = 0; r < rows; ++r) all[r] = static_cast<uint32_t>(r);
    *out.mutable_keys64() = PackedAt(std::span<const uint64_t>(words), all);
  } else if (chunk.has_keys()) {
    GPUJOIN_ASSIGN_OR_RETURN(std::vector<uint32_t> words, WordsOf(chunk.keys(), field + ".keys"));
    for (uint64_t r = 0; r < rows; ++r) {
      if (valid[r] == 0) words[r] = ~uint32_t{0};
    }
    std::vector<uint32_t> all(rows);
    for (uint64_t r = 0; r < rows; ++r) all[r] = static_cast<uint32_t>(r);
    *out.mutable_keys() = PackedAt(std::span<const uint32_t>(words), all);
  }
  return out;
}

}  // namespace

grpc::Status RouteBuild(const ShardCalls& calls, grpc::ServerContext* ctx,
                        grpc::ServerReader<v1::BuildIndexRequest>* reader,
                        v1::BuildIndexResponse* response) {
  grpc::Status denied = calls.Authorize(ctx);
  if (!denied.ok()) return denied;
  v1::BuildIndexRequest first;
  if (!reader->Read(&first) || !first.has_spec()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "spec: missing; the first message must carry spec");
  }
  const v1::IndexSpec spec = first.spec();
  if (spec.explicit_values() && spec.batch_mode()) {
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        "spec.explicit_values: cannot be combined with spec.batch_mode (batch values are row IDs)");
  }
  const uint32_t n = calls.count();
  const bool replicated = spec.placement() == v1::INDEX_PLACEMENT_REPLICATED;
  // Each shard holds about 1/n of the keys: its table is sized for its share.
  // Generated values are the router's: every row's value is first_value + its
  // global row, sent as explicit values, so the lowest global row still wins.
  v1::IndexSpec shard_spec = spec;
  shard_spec.set_explicit_values(true);
  shard_spec.set_batch_mode(false);
  shard_spec.set_router_values(spec.batch_mode()           ? v1::ROUTER_VALUES_BATCH_ROWS
                               : spec.explicit_values() ? v1::ROUTER_VALUES_NONE
                                                        : v1::ROUTER_VALUES_ROW_IDS);
  shard_spec.set_min_version(RouterVersion(spec.min_version()));
  if (replicated) {
    shard_spec = spec;
    shard_spec.set_min_version(RouterVersion(spec.min_version()));
  } else if (spec.capacity() != 0) {
    // A share with a quarter more room: jump hash balances shards only on
    // average, and a fixed table must hold its fullest shard's keys.
    const uint64_t share = n == 1 ? spec.capacity() : (spec.capacity() * 5 + 4 * n - 1) / (4 * n);
    shard_spec.set_capacity(NextPowerOfTwo(share));
    if (spec.max_probe_count() > shard_spec.capacity()) {
      shard_spec.set_max_probe_count(shard_spec.capacity());
    }
  }
  if (spec.expected_rows() != 0 && !replicated) {
    shard_spec.set_expected_rows((spec.expected_rows() + n - 1) / n);
  }

  struct Writer {
    std::unique_ptr<grpc::ClientContext> context;
    v1::BuildIndexResponse response;
    std::unique_ptr<grpc::ClientWriter<v1::BuildIndexRequest>> writer;
    bool broken = false;
  };
  std::vector<Writer> writers(n);
  for (uint32_t s = 0; s < n; ++s) {
    writers[s].context = calls.Context(ctx, /*unary=*/false);
    writers[s].writer = calls.shard(s).stub->BuildIndex(writers[s].context.get(), &writers[s].response);
    v1::BuildIndexRequest r;
    *r.mutable_spec() = shard_spec;
    writers[s].broken = !writers[s].writer->Write(r);
  }
  // The part of every key row so far (payload rows may come in later chunks).
  std::vector<uint32_t> row_parts;
  std::vector<uint64_t> payload_rows(spec.payload_size(), 0);
  std::map<std::string, int> payload_index;
  for (int c = 0; c < spec.payload_size(); ++c) payload_index[spec.payload(c).name()] = c;
  absl::Status failed;
  v1::BuildIndexRequest message;
  v1::BuildChunk masked_chunk;  // a batch chunk's keys with its masked rows made invalid
  uint64_t chunk_number = 0;
  while (failed.ok() && reader->Read(&message)) {
    const std::string field = absl::StrCat("chunks[", chunk_number++, "]");
    if (!message.has_chunk()) {
      failed = absl::InvalidArgumentError(absl::StrCat(std::string(field), ": a message after the spec must "
                                                              "carry a chunk"));
      break;
    }
    if (replicated) {
      for (uint32_t s = 0; s < n; ++s) {
        if (!writers[s].broken) writers[s].broken = !writers[s].writer->Write(message);
      }
      continue;
    }
    const v1::BuildChunk& chunk = message.chunk();
    const uint64_t base = row_parts.size();
    absl::StatusOr<KeyedRows> keys = KeyedRowsOf(chunk, n, field + ".");
    std::vector<uint32_t> values;
    if (keys.ok() && spec.batch_mode()) {
      // A batch chunk: values row_base + row; a masked-out row is sent as an
      // invalid row (the reserved key, or a null key column), so that every
      // shard counts it and its payload row keeps its place.
      absl::StatusOr<v1::BuildChunk> masked = MaskedBatchChunk(chunk, keys->rows(), field, &values);
      if (!masked.ok()) {
        failed = masked.status();
        break;
      }
      masked_chunk = *std::move(masked);
      keys = KeyedRowsOf(masked_chunk, n, field + ".");
    }
    if (!keys.ok()) {
      failed = keys.status();
      break;
    }
    const std::span<const uint32_t> parts = keys->parts();
    const RowSplit split = SplitRows(parts, n);
    row_parts.insert(row_parts.end(), parts.begin(), parts.end());
    if (spec.batch_mode()) {
      // values made by MaskedBatchChunk
    } else if (spec.explicit_values()) {
      absl::StatusOr<std::vector<uint32_t>> v = WordsOf(chunk.values(), field + ".values");
      if (!v.ok()) {
        failed = v.status();
        break;
      }
      values = *std::move(v);
      if (values.size() != parts.size()) {
        failed = absl::UnimplementedError(absl::StrCat(
            field, ".values: ", values.size(), " rows but the chunk has ", parts.size(),
            " keys; gpujoin-router (and gpujoind --devices) needs each chunk's values beside its keys"));
        break;
      }
    } else {
      values.resize(parts.size());
      for (size_t r = 0; r < parts.size(); ++r) {
        const uint64_t v = spec.first_value() + base + r;
        if (spec.first_value() > 0xfffffffeull || v > 0xfffffffeull) {
          failed = absl::InvalidArgumentError(absl::StrCat(
              field, ": row ", base + r, " would get value ", v,
              ", past 0xfffffffe (spec.first_value + rows)"));
          break;
        }
        values[r] = static_cast<uint32_t>(v);
      }
      if (!failed.ok()) break;
    }
    std::vector<v1::BuildChunk> out(n);
    for (uint32_t s = 0; s < n && failed.ok(); ++s) {
      const std::vector<uint32_t>& rows = split.rows[s];
      const absl::Status put =
          keys->Put(rows, out[s].mutable_keys(), out[s].mutable_keys64(),
                    out[s].mutable_key_columns());
      if (!put.ok()) {
        failed = put;
        break;
      }
      if (!chunk.has_keys()) out[s].clear_keys();
      if (!chunk.has_keys64()) out[s].clear_keys64();
      *out[s].mutable_values() = PackedAt(std::span<const uint32_t>(values), rows);
    }
    // Payload rows: the rows of each column from where it stands, by the parts
    // of their key rows.
    for (int c = 0; c < chunk.payload_size() && failed.ok(); ++c) {
      const v1::Column& col = chunk.payload(c);
      const std::string f = absl::StrCat(std::string(field), ".payload[", c, "]");
      auto it = payload_index.find(col.name());
      if (it == payload_index.end()) {
        failed = absl::InvalidArgumentError(
            absl::StrCat(f, ": column \"", col.name(), "\" is not declared in spec.payload"));
        break;
      }
      uint64_t& at = payload_rows[it->second];
      if (col.length() > row_parts.size() - at) {
        failed = absl::UnimplementedError(absl::StrCat(
            f, ": payload rows ahead of their keys (rows ", at, " to ", at + col.length(),
            " of ", row_parts.size(), " key rows so far); gpujoin-router (and gpujoind --devices) "
            "needs every payload row in the chunk of its key or after it"));
        break;
      }
      std::vector<std::vector<uint32_t>> rows(n);
      for (uint64_t r = 0; r < col.length(); ++r) {
        rows[row_parts[at + r]].push_back(static_cast<uint32_t>(r));
      }
      at += col.length();
      absl::StatusOr<CheckedColumn> checked = CheckColumn(col, f);  // once, not per shard
      if (!checked.ok()) {
        failed = checked.status();
        break;
      }
      for (uint32_t s = 0; s < n && failed.ok(); ++s) {
        absl::StatusOr<v1::Column> part = TakeColumnRows(*checked, rows[s], f);
        if (!part.ok()) failed = part.status();
        else *out[s].add_payload() = *std::move(part);
      }
    }
    if (!failed.ok()) break;
    for (uint32_t s = 0; s < n; ++s) {
      if (writers[s].broken) continue;
      v1::BuildIndexRequest r;
      *r.mutable_chunk() = std::move(out[s]);
      writers[s].broken = !writers[s].writer->Write(r);
    }
  }
  if (failed.ok() && ctx->IsCancelled()) failed = absl::CancelledError("the build was cancelled");
  // The shards' answers: a refused input cancels every shard's build.
  std::vector<grpc::Status> statuses(n);
  for (uint32_t s = 0; s < n; ++s) {
    if (!failed.ok()) writers[s].context->TryCancel();
    writers[s].writer->WritesDone();
  }
  calls.ForEachShard([&](size_t s) {
    const auto start = Clock::now();
    statuses[s] = writers[s].writer->Finish();
    calls.Record(s, "BuildIndex", start, statuses[s].ok());
  });
  if (!failed.ok()) return ToGrpc(failed);
  for (uint32_t s = 0; s < n; ++s) {
    if (!statuses[s].ok()) {
      // One message when every shard refused the same input (a bad spec).
      bool same = CallersError(statuses[s]);
      for (const grpc::Status& t : statuses) {
        same &= t.error_code() == statuses[s].error_code() &&
                t.error_message() == statuses[s].error_message();
      }
      return same ? statuses[s] : ShardFailed(calls.shard(s), statuses[s]);
    }
  }
  std::vector<v1::IndexInfo> infos;
  for (const Writer& w : writers) infos.push_back(w.response.index());
  absl::StatusOr<v1::IndexInfo> merged = MergeIndexInfos(infos, calls.names());
  if (!merged.ok()) return ToGrpc(merged.status());
  merged->set_explicit_values(spec.explicit_values());
  merged->set_first_value(static_cast<uint32_t>(spec.first_value()));
  calls.placements().Put(spec.name(), {merged->version(), replicated});
  *response->mutable_index() = *std::move(merged);
  return grpc::Status::OK;
}

}  // namespace gpujoin::server::router
