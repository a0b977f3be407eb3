#include "wire.hpp"

#include "gpujoin/common/bitmap.hpp"
#include "gpujoin/common/status_macros.hpp"

namespace gpujoin::client::detail {
namespace {

// Appends bits [begin, begin + n) of `bitmap` to `out` as a bitmap of n bits.
void AppendBits(std::span<const uint8_t> bitmap, uint64_t begin, uint64_t n, std::string* out) {
  out->assign(BitmapBytes(n), '\0');
  CopyBits(bitmap.data(), begin, n, reinterpret_cast<uint8_t*>(out->data()), 0);
}

// A bitmap of `rows` bits the server sent: BitmapBytes(rows) bytes at least;
// the copy has exactly that many, with the bits past `rows` cleared.
absl::Status TakeBitmap(const std::string& bytes, uint64_t rows, std::string_view what,
                        std::vector<uint8_t>* out) {
  if (bytes.size() < BitmapBytes(rows)) {
    return absl::InternalError(absl::StrCat("server sent ", std::string(what), " of ", bytes.size(),
                                            " bytes for ", rows, " rows (needs ", BitmapBytes(rows),
                                            ")"));
  }
  out->assign(bytes.begin(), bytes.begin() + BitmapBytes(rows));
  if (rows % 8 != 0) out->back() &= static_cast<uint8_t>((1u << (rows % 8)) - 1);
  return absl::OkStatus();
}

}  // namespace

absl::Status FromBatchError(const pb::BatchError& e) {
  if (e.code() == 0) {
    return absl::UnknownError(e.message().empty() ? "batch failed" : e.message());
  }
  return absl::Status(static_cast<absl::StatusCode>(e.code()), e.message());
}

QueryStatistics ToQueryStatistics(const pb::QueryStatistics& s) {
  return QueryStatistics{s.found(), s.missing(), s.total_probes(), s.max_probes()};
}

pb::ColumnType ToProtoColumnType(ColumnType type) {
  return static_cast<pb::ColumnType>(static_cast<int>(type) + 1);
}

std::optional<ColumnType> FromProtoColumnType(int type) {
  if (type < pb::COLUMN_TYPE_UINT32 || type > pb::COLUMN_TYPE_STRING) return std::nullopt;
  return static_cast<ColumnType>(type - 1);
}

uint64_t EncodedColumnBytes(const ColumnView& v) {
  // Each field: a tag and a length or value varint (at most 11 bytes); the
  // Column itself: a tag and a length in the enclosing message.
  constexpr uint64_t kHeaders = 8 * 11;
  uint64_t bytes = kHeaders + v.name.size();
  if (IsVariableWidth(v.type)) {
    bytes += 4 * (v.length + 1) +
             static_cast<uint64_t>(v.offsets[v.offset + v.length] - v.offsets[v.offset]);
  } else if (v.type == ColumnType::kBool) {
    bytes += BitmapBytes(v.length);
  } else {
    bytes += v.length * ColumnWidth(v.type);
  }
  if (!v.validity.empty()) bytes += BitmapBytes(v.length);
  return bytes;
}

void EncodeColumn(const ColumnView& v, pb::Column* out) {
  out->set_name(std::string(v.name));
  out->set_type(ToProtoColumnType(v.type));
  out->set_length(v.length);
  if (IsVariableWidth(v.type)) {
    const int32_t first = v.offsets[v.offset];
    const int32_t last = v.offsets[v.offset + v.length];
    out->set_data(reinterpret_cast<const char*>(v.data.data()) + first,
                  static_cast<size_t>(last - first));
    std::string* offsets = out->mutable_offsets();
    offsets->resize(4 * (v.length + 1));
    for (uint64_t i = 0; i <= v.length; ++i) {
      const int32_t o = v.offsets[v.offset + i] - first;
      std::memcpy(offsets->data() + 4 * i, &o, 4);
    }
  } else if (v.type == ColumnType::kBool) {
    AppendBits(v.data, v.offset, v.length, out->mutable_data());
  } else {
    const size_t w = ColumnWidth(v.type);
    out->set_data(reinterpret_cast<const char*>(v.data.data()) + v.offset * w, v.length * w);
  }
  if (v.NullCount() > 0) AppendBits(v.validity, v.offset, v.length, out->mutable_validity());
}

constexpr uint64_t kMaxDecodedRows = uint64_t{1} << 34;

absl::StatusOr<Column> DecodeColumn(const pb::Column& c, std::string_view field) {
  const std::optional<ColumnType> type = FromProtoColumnType(c.type());
  const std::string what = absl::StrCat(std::string(field), " ('", c.name(), "')");
  if (!type) {
    return absl::InternalError(absl::StrCat("server sent ", what, " of unknown type ", c.type()));
  }
  Column out(c.name(), *type);
  const uint64_t n = c.length();
  // A message holds at most 2 GiB, so no column in one has more than 2^34 rows
  // (one bit each); the bound keeps every size computed below from wrapping.
  if (n > kMaxDecodedRows) {
    return absl::InternalError(absl::StrCat("server sent ", what, " with length ", n,
                                            ", more rows than a message can hold"));
  }
  if (IsVariableWidth(*type)) {
    if (c.offsets().size() != 4 * (n + 1)) {
      return absl::InternalError(absl::StrCat("server sent ", what, " with ", c.offsets().size(),
                                              " offset bytes for ", n, " rows (needs ", 4 * (n + 1),
                                              ")"));
    }
    std::vector<int32_t> offsets(n + 1);
    std::memcpy(offsets.data(), c.offsets().data(), 4 * (n + 1));
    if (offsets[0] < 0 || static_cast<uint64_t>(offsets[n]) > c.data().size()) {
      return absl::InternalError(absl::StrCat("server sent ", what, " with offsets from ",
                                              offsets[0], " to ", offsets[n], " into ",
                                              c.data().size(), " bytes"));
    }
    for (uint64_t i = 0; i < n; ++i) {
      if (offsets[i + 1] < offsets[i]) {
        return absl::InternalError(
            absl::StrCat("server sent ", what, " with decreasing offsets at row ", i));
      }
    }
    const int32_t first = offsets[0];
    for (int32_t& o : offsets) o -= first;
    out.data.assign(c.data().begin() + first, c.data().begin() + first + offsets[n]);
    out.offsets = std::move(offsets);
  } else if (*type == ColumnType::kBool) {
    GPUJOIN_RETURN_IF_ERROR(TakeBitmap(c.data(), n, what + " data", &out.data));
  } else if (c.data().size() != n * ColumnWidth(*type)) {
    return absl::InternalError(absl::StrCat(
        "server sent ", what, " with ", c.data().size(), " data bytes for ", n, " rows of ",
        std::string(ColumnTypeName(*type)), " (needs ", n * ColumnWidth(*type), ")"));
  } else {
    out.data.assign(c.data().begin(), c.data().end());
  }
  out.length = n;
  if (!c.validity().empty()) {
    GPUJOIN_RETURN_IF_ERROR(TakeBitmap(c.validity(), n, what + " validity", &out.validity));
    out.null_count = n - CountOnes(out.validity.data(), 0, n);
    if (out.null_count == 0) out.validity.clear();
  } else if (c.null_count() != 0) {
    return absl::InternalError(absl::StrCat("server sent ", what, " with ", c.null_count(),
                                            " nulls but no validity bitmap"));
  }
  return out;
}

uint64_t EncodedKeyBytes(const Keys& k) {
  if (k.type() != KeyType::kColumns) return 11 + k.size_bytes();
  uint64_t bytes = 0;
  for (size_t i = 0; i < k.column_count(); ++i) bytes += EncodedColumnBytes(k.column(i));
  return bytes;
}

pb::KeyType ToProtoKeyType(KeyType t) {
  switch (t) {
    case KeyType::kUint64:
      return pb::KEY_TYPE_UINT64;
    case KeyType::kColumns:
      return pb::KEY_TYPE_COLUMNS;
    case KeyType::kUint32:
      break;
  }
  return pb::KEY_TYPE_UINT32;
}

pb::DuplicatePolicy ToProtoPolicy(DuplicatePolicy p) {
  return p == DuplicatePolicy::kKeepAll ? pb::DUPLICATE_POLICY_KEEP_ALL
                                        : pb::DUPLICATE_POLICY_LOWEST_ROW;
}

pb::JoinKind ToProtoJoinKind(JoinKind k) {
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

pb::AggregateOp ToProtoAggregateOp(AggregateOp op) {
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
  i.key_type = p.key_type() == pb::KEY_TYPE_UINT64    ? KeyType::kUint64
               : p.key_type() == pb::KEY_TYPE_COLUMNS ? KeyType::kColumns
                                                      : KeyType::kUint32;
  for (const pb::KeyColumnSpec& k : p.key_columns()) {
    // A type this client does not know reads as binary (opaque bytes).
    i.key_columns.push_back(
        KeyColumnSpec{k.name(), FromProtoColumnType(k.type()).value_or(ColumnType::kBinary)});
  }
  for (const pb::PayloadColumnInfo& c : p.payload()) {
    PayloadColumnInfo pc;
    pc.name = c.name();
    // A type this client does not know reads as binary (opaque bytes).
    pc.type = detail::FromProtoColumnType(c.type()).value_or(ColumnType::kBinary);
    pc.null_count = c.null_count();
    pc.dictionary_values = c.dictionary_values();
    pc.dictionary_bytes = c.dictionary_bytes();
    pc.bytes = c.bytes();
    i.payload.push_back(std::move(pc));
  }
  i.payload_bytes = p.payload_bytes();
  i.duplicates = p.duplicates() == pb::DUPLICATE_POLICY_KEEP_ALL ? DuplicatePolicy::kKeepAll
                                                                 : DuplicatePolicy::kLowestRow;
  i.durable_version = p.durable_version();
  i.mutation_sequence = p.mutation_sequence();
  i.max_load_factor = p.max_load_factor();
  i.next_row_id = p.next_row_id();
  i.rehashes = p.rehashes();
  i.replicated = p.placement() == pb::INDEX_PLACEMENT_REPLICATED;
  return i;
}

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

}  // namespace gpujoin::client::detail
