// Client::Aggregate (a pipelined stream of grouped-aggregation batches) and
// AggregateAll, which aggregates whole in-memory columns in batches and returns
// the stream's final totals. Every value type takes one path; only the wire
// differs: float32 values travel in the reference `values` field, the others in
// `typed_values`.
#include <algorithm>
#include <cstring>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gpujoin/common/bitmap.hpp"
#include "client_impl.hpp"
#include "gpujoin/client/client.hpp"
#include "gpujoin/common/status_macros.hpp"
#include "stream_runner.hpp"
#include "wire.hpp"

namespace gpujoin::client {

namespace pb = ::gpujoin::v1;
using detail::AppendColumns;
using detail::DecodeBatchHeader;
using detail::DecodeColumns;
using detail::SetColumn;
using detail::SetKeys;
using detail::SetPacked;
using detail::ToQueryStatistics;
using detail::Unpack;

namespace {

// The values of one batch, checked against the spec's `type` and `rows`, into
// `r`: float32 into `values` (which has no validity), the others with their
// nulls (`validity`: ceil(rows / 8) bytes or none) into `typed_values`.
absl::Status EncodeValues(ColumnType type, const AggregateValues& values,
                          std::span<const uint8_t> validity, size_t rows, uint64_t id,
                          pb::AggregateRequest* r) {
  if (!validity.empty() && type == ColumnType::kFloat32) {
    return absl::InvalidArgumentError(absl::StrCat(
        "aggregate batch ", id,
        ": validity is for typed values; a float32 stream has none (leave rows out with mask)"));
  }
  if (!validity.empty() && validity.size() != (rows + 7) / 8) {
    return absl::InvalidArgumentError(absl::StrCat(
        "aggregate batch ", id, ": validity has ", validity.size(), " bytes but a bitmap of ", rows,
        " rows has ceil(", rows, " / 8) = ", (rows + 7) / 8, " (or send none: no nulls)"));
  }
  return std::visit(
      [&](const auto& v) -> absl::Status {
        using S = std::decay_t<decltype(v)>;
        std::optional<ColumnType> held;
        if constexpr (!std::is_same_v<S, std::monostate>) {
          held = kColumnTypeOf<typename S::value_type>;
        }
        if (held != type) {
          return absl::InvalidArgumentError(absl::StrCat(
              "aggregate batch ", id, ": values hold ",
              held ? std::string(ColumnTypeName(*held)) : std::string("nothing"),
              " but the spec's value_type is ", std::string(ColumnTypeName(type))));
        }
        if constexpr (!std::is_same_v<S, std::monostate>) {
          if (v.size() != rows) {
            return absl::InvalidArgumentError(absl::StrCat(
                "aggregate batch ", id, ": values has ", v.size(), " rows but keys has ", rows));
          }
          if constexpr (std::is_same_v<S, std::span<const float>>) {
            SetColumn(v, r->mutable_values());
          } else {
            pb::Column* out = r->mutable_typed_values();
            out->set_type(detail::ToProtoColumnType(type));
            out->set_length(v.size());
            out->set_data(std::string(reinterpret_cast<const char*>(v.data()), v.size_bytes()));
            if (!validity.empty()) {
              out->set_validity(
                  std::string(reinterpret_cast<const char*>(validity.data()), validity.size()));
            }
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

// AggregateAll's stream: `keys` (and `mask`) cut into
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

absl::Status Client::Aggregate(const AggregateSpec& spec, const BatchSource<AggregateBatch>& source,
                               const ResultSink<AggregateResult>& sink,
                               const StreamOptions& options) {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx, options.deadline);
  auto stream = impl_->stub_->Aggregate(&ctx);
  auto encode = [&spec](const AggregateBatch& b, uint64_t id,
                        pb::AggregateRequest* r) -> absl::Status {
    if (spec.op == AggregateOp::kCount) {
      if (!b.validity.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("aggregate batch ", id,
                         ": validity is for typed values; a count stream has none (leave rows "
                         "out with mask)"));
      }
    } else {
      GPUJOIN_RETURN_IF_ERROR(
          EncodeValues(spec.value_type, b.values, b.validity, b.keys.size(), id, r));
    }
    if (!b.mask.empty() && b.mask.size() != b.keys.size()) {
      return absl::InvalidArgumentError(absl::StrCat("aggregate batch ", id, ": mask has ",
                                                     b.mask.size(), " rows but keys has ",
                                                     b.keys.size()));
    }
    r->set_op(detail::ToProtoAggregateOp(spec.op));
    r->set_groups(spec.groups);
    SetColumn(b.keys, r->mutable_keys());
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

absl::StatusOr<AggregateResult> Client::AggregateAll(
    const AggregateSpec& spec, std::span<const uint32_t> keys, const AggregateValues& values,
    std::span<const uint8_t> validity, std::span<const uint32_t> mask, size_t batch_rows,
    const StreamOptions& options, const ProgressCallback& progress) {
  const bool count = spec.op == AggregateOp::kCount;
  if (!validity.empty() && validity.size() != (keys.size() + 7) / 8) {
    return absl::InvalidArgumentError(absl::StrCat("validity has ", validity.size(),
                                                   " bytes but a bitmap of ", keys.size(),
                                                   " rows has ", (keys.size() + 7) / 8));
  }
  size_t width = 0;
  const absl::Status checked = std::visit(
      [&](const auto& v) -> absl::Status {
        using S = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<S, std::monostate>) {
          if (count) return absl::OkStatus();
          return absl::InvalidArgumentError(
              absl::StrCat("values are required for ", std::string(AggregateOpName(spec.op))));
        } else {
          width = sizeof(typename S::value_type);
          if (!count && v.size() != keys.size()) {
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
      *this, spec, keys, mask, batch_rows, 4 + (count ? 0 : width),
      [&](AggregateBatch& b, size_t pos, size_t n) {
        if (count) return;
        if (!validity.empty()) {
          batch_bits.assign((n + 7) / 8, 0);
          CopyBits(validity.data(), pos, n, batch_bits.data(), 0);
          b.validity = batch_bits;
        }
        b.values = std::visit(
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

}  // namespace gpujoin::client
