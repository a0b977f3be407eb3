// CommandGraph::Validate: per-node length/shape checks and whole-graph aliasing
// checks, shared by every backend so that both reject exactly the same graphs.
#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"
#include "gpujoin/engine/aggregation.hpp"
#include "gpujoin/engine/graph.hpp"
#include "gpujoin/engine/mutation.hpp"
#include "hashing/hash_host.hpp"

namespace gpujoin::engine {
namespace {

// One byte range a node reads or writes, with a human-readable name.
struct Range {
  uintptr_t begin = 0;
  uintptr_t end = 0;  // exclusive
  bool written = false;
  std::string name;  // e.g. "node 1 (lookup) values"
};

class RangeCollector {
 public:
  template <typename T>
  void Read(std::span<const T> s, std::string name) {
    Add(s.data(), s.size_bytes(), false, std::move(name));
  }
  template <typename T>
  void Write(std::span<T> s, std::string name) {
    Add(s.data(), s.size_bytes(), true, std::move(name));
  }
  template <typename T>
  void ReadChunks(const Chunked<T>& chunks, const std::string& name) {
    for (size_t i = 0; i < chunks.size(); ++i) {
      Read(chunks[i], chunks.size() == 1 ? name : absl::StrCat(name, " chunk ", i));
    }
  }
  // The buffers of a node's keys: chunks of words, or each key column's
  // value bytes, offsets and validity.
  template <typename T>
  void ReadKeys(const Chunked<T>& chunks, const std::string& name) {
    ReadChunks(chunks, name);
  }
  template <typename T>
  void ReadKeys(std::span<const T> keys, const std::string& name) {
    Read(keys, name);
  }
  void ReadKeys(const KeyColumns& keys, const std::string& name) {
    for (size_t c = 0; c < keys.columns.size(); ++c) {
      const HashColumn& col = keys.columns[c];
      const std::string column = absl::StrCat(name, " column ", c);
      Read(col.data, column);
      Read(col.offsets, absl::StrCat(column, " offsets"));
      Read(col.large_offsets, absl::StrCat(column, " offsets"));
      Read(col.validity, absl::StrCat(column, " validity"));
    }
  }
  template <typename T>
  void WriteObject(T* object, std::string name) {
    if (object != nullptr) Add(object, sizeof(T), true, std::move(name));
  }

  // First overlap between a written range and any other range, or OK.
  absl::Status Check() {
    std::sort(ranges_.begin(), ranges_.end(),
              [](const Range& a, const Range& b) { return a.begin < b.begin; });
    // Sweep in begin order, remembering the earlier range reaching furthest (any,
    // and written). If any earlier range overlaps the current one, so does the one
    // reaching furthest.
    const Range* furthest_any = nullptr;
    const Range* furthest_written = nullptr;
    for (const Range& r : ranges_) {
      const Range* other = r.written ? furthest_any : furthest_written;
      if (other != nullptr && other->end > r.begin) {
        return absl::InvalidArgumentError(absl::StrCat(
            other->name, " (", other->written ? "written" : "read", ", ", other->end - other->begin,
            " bytes) overlaps ", r.name, " (", r.written ? "written" : "read", ", ",
            r.end - r.begin,
            " bytes): a written buffer may not overlap any other buffer of the graph"));
      }
      if (furthest_any == nullptr || r.end > furthest_any->end) furthest_any = &r;
      if (r.written && (furthest_written == nullptr || r.end > furthest_written->end)) {
        furthest_written = &r;
      }
    }
    return absl::OkStatus();
  }

 private:
  void Add(const void* data, size_t bytes, bool written, std::string name) {
    if (bytes == 0 || data == nullptr) return;  // empty ranges cannot overlap anything
    const auto begin = reinterpret_cast<uintptr_t>(data);
    ranges_.push_back(Range{begin, begin + bytes, written, std::move(name)});
  }

  std::vector<Range> ranges_;
};

absl::Status Invalid(const std::string& where, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

// Checks that an optional aligned output has either 0 or `rows` entries.
template <typename T>
absl::Status CheckOptionalAligned(const std::string& where, std::string_view field,
                                  std::span<T> out, size_t rows, std::string_view rows_of) {
  if (!out.empty() && out.size() != rows) {
    return Invalid(where, absl::StrCat(std::string(field), " has ", out.size(), " rows but ",
                                       std::string(rows_of), " have ", rows));
  }
  return absl::OkStatus();
}

absl::Status CheckReadableIndex(const std::string& where, const HashIndex* index,
                                bool built_earlier, uint32_t max_probe_count) {
  if (index == nullptr) return Invalid(where, "index is null");
  if (!index->built() && !built_earlier) {
    return absl::FailedPreconditionError(
        absl::StrCat(where,
                     ": index has not been built (no build ran on it, in this graph or "
                     "before)"));
  }
  if (max_probe_count > index->spec().capacity) {
    return Invalid(where, absl::StrCat("max_probe_count ", max_probe_count,
                                       " exceeds the index capacity ", index->spec().capacity));
  }
  return absl::OkStatus();
}

bool KnownJoinKind(JoinKind kind) {
  return static_cast<uint8_t>(kind) <= static_cast<uint8_t>(JoinKind::kLeftAnti);
}

// A node's key kind must be its index's key type.
template <IndexKey K>
absl::Status CheckKeyType(const std::string& where, const HashIndex& index) {
  if (index.key_type() == KeyTypeOfKey<K>()) return absl::OkStatus();
  return Invalid(where, absl::StrCat("keys are ", std::string(KeyTypeName(KeyTypeOfKey<K>())),
                                     " but index has ", std::string(KeyTypeName(index.key_type())),
                                     " keys"));
}

// Key columns must be the index's schema (count, order, types), flat, of one
// length and within their buffers. Key words need no check.
template <typename Words>
absl::Status CheckKeyInput(const std::string&, std::string_view, const Words&, const HashIndex&) {
  return absl::OkStatus();
}
absl::Status CheckKeyInput(const std::string& where, std::string_view field,
                           const KeyColumns& keys, const HashIndex& index) {
  const std::vector<ColumnType>& schema = index.spec().key_columns;
  if (keys.columns.size() != schema.size()) {
    return Invalid(where, absl::StrCat(std::string(field), " have ", keys.columns.size(),
                                       " columns but the index's key has ", schema.size()));
  }
  for (size_t c = 0; c < schema.size(); ++c) {
    if (keys.columns[c].type != schema[c]) {
      return Invalid(where, absl::StrCat(std::string(field), " column ", c, " is ",
                                         std::string(ColumnTypeName(keys.columns[c].type)),
                                         " but the index's key column ", c, " is ",
                                         std::string(ColumnTypeName(schema[c]))));
    }
    if (!keys.columns[c].children.empty()) {
      return Invalid(where, absl::StrCat(std::string(field), " column ", c,
                                         " has children; key columns are flat"));
    }
  }
  return detail::ValidateHashColumns(keys.columns, absl::StrCat(where, ": ", std::string(field)));
}

// "payload[2] (int64)": a build's payload column in messages.
std::string PayloadName(size_t c, ColumnType type) {
  return absl::StrCat("payload[", c, "] (", std::string(ColumnTypeName(type)), ")");
}

bool KnownType(ColumnType type) {
  return static_cast<uint8_t>(type) <= uint8_t(ColumnType::kString);
}

// A payload column of a build with `rows` key rows (ColumnView's layout rules).
absl::Status CheckPayloadColumn(const std::string& where, size_t c, const ColumnView& col,
                                uint64_t rows) {
  if (!KnownType(col.type)) {
    // The types past kString are hash inputs only (HashColumn); never read them here.
    if (static_cast<uint8_t>(col.type) <= uint8_t(ColumnType::kNull)) {
      return Invalid(where, absl::StrCat("payload[", c, "] has column type ",
                                         std::string(ColumnTypeName(col.type)),
                                         ", which only Hash takes; payload columns are uint32, "
                                         "int32, uint64, int64, float32, float64, binary, bool "
                                         "or string"));
    }
    return Invalid(where, absl::StrCat("payload[", c, "] has an unknown column type ",
                                       static_cast<int>(col.type)));
  }
  const std::string name = PayloadName(c, col.type);
  if (col.rows != rows) {
    return Invalid(where, absl::StrCat(name, " has ", col.rows, " rows but keys have ", rows));
  }
  if (!col.validity.empty() && col.validity.size() < BitmapBytes(rows)) {
    return Invalid(where, absl::StrCat(name, " validity has ", col.validity.size(),
                                       " bytes; a bitmap of ", rows, " rows needs at least ",
                                       BitmapBytes(rows), " (or none: no nulls)"));
  }
  if (IsVariableWidth(col.type)) {
    if (col.offsets.size() != rows + 1) {
      return Invalid(where, absl::StrCat(name, " offsets has ", col.offsets.size(), " entries; ",
                                         rows, " rows need ", rows + 1));
    }
    for (uint64_t r = 0; r < rows; ++r) {
      if (col.offsets[r + 1] < col.offsets[r]) {
        return Invalid(where, absl::StrCat(name, " offsets decrease at row ", r, " (",
                                           col.offsets[r], " then ", col.offsets[r + 1], ")"));
      }
    }
    if (col.offsets[rows] > col.data.size()) {
      return Invalid(where, absl::StrCat(name, " offsets end at ", col.offsets[rows],
                                         " but data has ", col.data.size(), " bytes"));
    }
    return absl::OkStatus();
  }
  if (!col.offsets.empty()) {
    return Invalid(where, absl::StrCat(name, " has ", col.offsets.size(),
                                       " offsets; only binary and string columns take offsets"));
  }
  if (col.type == ColumnType::kBool) {
    if (col.data.size() < BitmapBytes(rows)) {
      return Invalid(where,
                     absl::StrCat(name, " data has ", col.data.size(), " bytes; a bitmap of ", rows,
                                  " rows needs at least ", BitmapBytes(rows)));
    }
  } else if (col.data.size() != rows * ColumnWidth(col.type)) {
    return Invalid(
        where, absl::StrCat(name, " data has ", col.data.size(), " bytes; ", rows, " rows of ",
                            ColumnWidth(col.type), " bytes need ", rows * ColumnWidth(col.type)));
  }
  return absl::OkStatus();
}

// Where a lookup or join writes gathered column `g`: `rows` positions (the
// query rows, or a join batch's pair capacity), from an index whose payload
// columns have `types`.
absl::Status CheckGatherOutput(const std::string& where, size_t g, const GatherOutput& out,
                               uint64_t rows, std::string_view rows_of,
                               const std::vector<ColumnType>& types) {
  if (out.column >= types.size()) {
    return Invalid(where, absl::StrCat("gather[", g, "] asks for payload column ", out.column,
                                       " but the index has ", types.size(), " payload column",
                                       types.size() == 1 ? "" : "s"));
  }
  const ColumnType type = types[out.column];
  const std::string name = absl::StrCat("gather[", g, "] (column ", out.column, ", ",
                                        std::string(ColumnTypeName(type)), ")");
  if (out.validity.size() != BitmapBytes(rows)) {
    return Invalid(where, absl::StrCat(name, " validity has ", out.validity.size(),
                                       " bytes; a bitmap of ", rows, " ", std::string(rows_of),
                                       " needs ", BitmapBytes(rows), " (it is required)"));
  }
  if (IsVariableWidth(type)) {
    if (!out.data.empty()) {
      return Invalid(where, absl::StrCat(name, " data has ", out.data.size(),
                                         " bytes; it must be empty (the value bytes go to "
                                         "string_bytes)"));
    }
    if (out.offsets.size() != rows + 1) {
      return Invalid(where, absl::StrCat(name, " offsets has ", out.offsets.size(), " entries; ",
                                         rows, " ", std::string(rows_of), " need ", rows + 1));
    }
    if (out.string_bytes == nullptr) {
      return Invalid(where, absl::StrCat(name, " string_bytes is null (it is required)"));
    }
    if (out.max_string_bytes > 0x7fffffffu) {
      return Invalid(where, absl::StrCat(name, " max_string_bytes is ", out.max_string_bytes,
                                         "; at most 2^31 - 1 (int32 offsets)"));
    }
    return absl::OkStatus();
  }
  if (!out.offsets.empty()) {
    return Invalid(where, absl::StrCat(name, " has ", out.offsets.size(),
                                       " offsets; only binary and string columns take offsets"));
  }
  const uint64_t need = type == ColumnType::kBool ? BitmapBytes(rows) : rows * ColumnWidth(type);
  if (out.data.size() != need) {
    return Invalid(where, absl::StrCat(name, " data has ", out.data.size(), " bytes; ", rows, " ",
                                       std::string(rows_of), " need ", need));
  }
  return absl::OkStatus();
}

class Validator {
 public:
  template <IndexKey K>
  absl::Status Visit(size_t i, const BuildIndexNodeT<K>& n) {
    const std::string where = absl::StrCat("node ", i, " (build)");
    if (n.index == nullptr) return Invalid(where, "index is null");
    GPUJOIN_RETURN_IF_ERROR(CheckKeyType<K>(where, *n.index));
    GPUJOIN_RETURN_IF_ERROR(CheckKeyInput(where, "keys", n.keys, *n.index));
    const size_t rows = KeyRows(n.keys);
    if (n.values.has_value() && TotalRows(*n.values) != rows) {
      return Invalid(
          where, absl::StrCat("values have ", TotalRows(*n.values), " rows but keys have ", rows));
    }
    if (rows > kMaxRows) return TooManyRows(where, "keys", rows);
    GPUJOIN_RETURN_IF_ERROR(CheckPayload(where, n.payload, rows));
    ranges_.ReadKeys(n.keys, absl::StrCat(where, " keys"));
    if (n.values.has_value()) ranges_.ReadChunks(*n.values, absl::StrCat(where, " values"));
    ranges_.WriteObject(n.statistics, absl::StrCat(where, " statistics"));
    Built(n.index, n.payload);
    return absl::OkStatus();
  }

  template <IndexKey K>
  absl::Status Visit(size_t i, const BuildBatchIndexNodeT<K>& n) {
    const std::string where = absl::StrCat("node ", i, " (batch build)");
    if (n.index == nullptr) return Invalid(where, "index is null");
    GPUJOIN_RETURN_IF_ERROR(CheckKeyType<K>(where, *n.index));
    size_t rows = 0;
    for (size_t c = 0; c < n.chunks.size(); ++c) {
      const BatchChunkT<K>& chunk = n.chunks[c];
      GPUJOIN_RETURN_IF_ERROR(
          CheckKeyInput(where, absl::StrCat("chunk ", c, " keys"), chunk.keys, *n.index));
      const uint64_t chunk_rows = KeyRows(chunk.keys);
      if (!chunk.validity.empty() && chunk.validity.size() != chunk_rows) {
        return Invalid(where, absl::StrCat("chunk ", c, " validity has ", chunk.validity.size(),
                                           " rows but its keys have ", chunk_rows));
      }
      rows += chunk_rows;
      ranges_.ReadKeys(chunk.keys, absl::StrCat(where, " chunk ", c, " keys"));
      ranges_.Read(chunk.validity, absl::StrCat(where, " chunk ", c, " validity"));
    }
    if (rows > kMaxRows) return TooManyRows(where, "chunks", rows);
    GPUJOIN_RETURN_IF_ERROR(CheckPayload(where, n.payload, rows));
    ranges_.WriteObject(n.statistics, absl::StrCat(where, " statistics"));
    Built(n.index, n.payload);
    return absl::OkStatus();
  }

  template <IndexKey K>
  absl::Status Visit(size_t i, const LookupNodeT<K>& n) {
    const std::string where = absl::StrCat("node ", i, " (lookup)");
    if (n.index == nullptr) return Invalid(where, "index is null");
    GPUJOIN_RETURN_IF_ERROR(CheckKeyType<K>(where, *n.index));
    GPUJOIN_RETURN_IF_ERROR(
        CheckReadableIndex(where, n.index, built_.count(n.index) != 0, n.max_probe_count));
    GPUJOIN_RETURN_IF_ERROR(CheckKeyInput(where, "keys", n.keys, *n.index));
    const size_t rows = KeyRows(n.keys);
    if (rows > kMaxRows) return TooManyRows(where, "keys", rows);
    if (n.values.size() != rows) {
      return Invalid(where,
                     absl::StrCat("values has ", n.values.size(), " rows but keys have ", rows));
    }
    GPUJOIN_RETURN_IF_ERROR(CheckOptionalAligned(where, "found", n.found, rows, "keys"));
    GPUJOIN_RETURN_IF_ERROR(CheckOptionalAligned(where, "probes", n.probes, rows, "keys"));
    GPUJOIN_RETURN_IF_ERROR(
        CheckOptionalAligned(where, "match_counts", n.match_counts, rows, "keys"));
    ranges_.ReadKeys(n.keys, absl::StrCat(where, " keys"));
    ranges_.Write(n.values, absl::StrCat(where, " values"));
    ranges_.Write(n.found, absl::StrCat(where, " found"));
    ranges_.Write(n.probes, absl::StrCat(where, " probes"));
    ranges_.Write(n.match_counts, absl::StrCat(where, " match_counts"));
    ranges_.WriteObject(n.statistics, absl::StrCat(where, " statistics"));
    GPUJOIN_RETURN_IF_ERROR(CheckGather(where, n.gather, rows, "query rows", *n.index));
    return absl::OkStatus();
  }

  template <IndexKey K>
  absl::Status Visit(size_t i, const JoinNodeT<K>& n) {
    const std::string where = absl::StrCat("node ", i, " (join)");
    if (n.index == nullptr) return Invalid(where, "index is null");
    GPUJOIN_RETURN_IF_ERROR(CheckKeyType<K>(where, *n.index));
    GPUJOIN_RETURN_IF_ERROR(
        CheckReadableIndex(where, n.index, built_.count(n.index) != 0, n.max_probe_count));
    if (!KnownJoinKind(n.kind)) {
      return Invalid(where, absl::StrCat("kind ", static_cast<int>(n.kind),
                                         " is not a join kind (inner, left_outer, left_semi or "
                                         "left_anti)"));
    }
    if (n.batches.empty()) return Invalid(where, "batches is empty (a join needs at least one)");
    for (size_t b = 0; b < n.batches.size(); ++b) {
      const JoinBatchT<K>& batch = n.batches[b];
      const std::string bw = absl::StrCat(where, " batch ", b);
      GPUJOIN_RETURN_IF_ERROR(CheckKeyInput(bw, "keys", batch.keys, *n.index));
      const size_t rows = KeyRows(batch.keys);
      if (rows > kMaxRows) return TooManyRows(bw, "keys", rows);
      if (!batch.left_rows.empty() && batch.left_rows.size() != rows) {
        return Invalid(bw, absl::StrCat("left_rows has ", batch.left_rows.size(),
                                        " rows but keys have ", rows));
      }
      if (batch.out_left_rows.size() != batch.out_right_rows.size()) {
        return Invalid(bw,
                       absl::StrCat("out_left_rows has ", batch.out_left_rows.size(),
                                    " rows but out_right_rows has ", batch.out_right_rows.size(),
                                    " (both are the pair capacity)"));
      }
      if (batch.result == nullptr) return Invalid(bw, "result is null (it is required)");
      GPUJOIN_RETURN_IF_ERROR(CheckOptionalAligned(bw, "found", batch.found, rows, "keys"));
      GPUJOIN_RETURN_IF_ERROR(CheckOptionalAligned(bw, "probes", batch.probes, rows, "keys"));
      ranges_.ReadKeys(batch.keys, absl::StrCat(bw, " keys"));
      ranges_.Read(batch.left_rows, absl::StrCat(bw, " left_rows"));
      ranges_.Write(batch.out_left_rows, absl::StrCat(bw, " out_left_rows"));
      ranges_.Write(batch.out_right_rows, absl::StrCat(bw, " out_right_rows"));
      ranges_.Write(batch.found, absl::StrCat(bw, " found"));
      ranges_.Write(batch.probes, absl::StrCat(bw, " probes"));
      ranges_.WriteObject(batch.result, absl::StrCat(bw, " result"));
      GPUJOIN_RETURN_IF_ERROR(
          CheckGather(bw, batch.gather, batch.out_left_rows.size(), "pairs", *n.index));
    }
    return absl::OkStatus();
  }

  absl::Status Visit(size_t i, const AggregateNode& n) {
    const std::string op(AggregateOpName(n.op));
    const std::string where = absl::StrCat("node ", i, " (aggregate ", op, ")");
    const size_t rows = TotalRows(n.keys);
    if (rows > kMaxRows) return TooManyRows(where, "keys", rows);
    const std::optional<ColumnType> type = AggregateValueType(n.values);
    const size_t value_rows = std::visit(
        [](const auto& c) -> size_t {
          if constexpr (std::is_same_v<std::decay_t<decltype(c)>, std::monostate>) {
            return 0;
          } else {
            return TotalRows(c);
          }
        },
        n.values);
    if (n.op == AggregateOp::kCount) {
      if (type.has_value()) {
        return Invalid(where, absl::StrCat("values must be unset for count, got ",
                                           value_rows, " rows of ",
                                           std::string(ColumnTypeName(*type))));
      }
    } else if (!type.has_value()) {
      return Invalid(where, absl::StrCat("values are unset: ", op, " needs one value per key"));
    } else if (value_rows != rows) {
      return Invalid(where, absl::StrCat("values have ", value_rows, " rows but keys have ", rows,
                                         " (", op, " needs one value per key)"));
    }
    if (n.output.empty()) {
      return Invalid(where, "output is empty: it must hold at least one group");
    }
    const size_t groups = n.output.size();
    if (groups > kMaxGroups) {
      return Invalid(where, absl::StrCat("output has ", groups, " groups; at most 2^32 allowed"));
    }
    const bool flags = type.has_value() && AggregateReportsOverflow(n.op, *type);
    if (flags && n.overflow.size() != groups) {
      return Invalid(where, absl::StrCat("overflow has ", n.overflow.size(), " flags but ", groups,
                                         " groups: ", op, " over ",
                                         std::string(ColumnTypeName(*type)),
                                         " values reports overflow per group (required)"));
    }
    if (!flags && !n.overflow.empty()) {
      return Invalid(where, absl::StrCat("overflow must be empty for ", op, " over ",
                                         type.has_value() ? std::string(ColumnTypeName(*type))
                                                          : std::string("no"),
                                         " values, got ", n.overflow.size()));
    }
    if (n.mask.has_value() && TotalRows(*n.mask) != rows) {
      return Invalid(where,
                     absl::StrCat("mask has ", TotalRows(*n.mask), " rows but keys have ", rows));
    }
    GPUJOIN_RETURN_IF_ERROR(
        CheckOptionalAligned(where, "contributing_rows", n.contributing_rows, groups, "outputs"));
    ranges_.ReadChunks(n.keys, absl::StrCat(where, " keys"));
    std::visit(
        [&](const auto& c) {
          if constexpr (!std::is_same_v<std::decay_t<decltype(c)>, std::monostate>) {
            ranges_.ReadChunks(c, absl::StrCat(where, " values"));
          }
        },
        n.values);
    if (n.mask.has_value()) ranges_.ReadChunks(*n.mask, absl::StrCat(where, " mask"));
    ranges_.Write(n.output, absl::StrCat(where, " output"));
    ranges_.Write(n.overflow, absl::StrCat(where, " overflow"));
    ranges_.Write(n.contributing_rows, absl::StrCat(where, " contributing_rows"));
    return absl::OkStatus();
  }

  absl::Status Visit(size_t i, const HashNode& n) {
    const std::string where = absl::StrCat("node ", i, " (hash)");
    GPUJOIN_RETURN_IF_ERROR(detail::ValidateHashNode(n, where));
    for (size_t c = 0; c < n.columns.size(); ++c) {
      ReadHashColumn(n.columns[c], absl::StrCat(where, " column ", c));
    }
    // Only the hash output selected by `bits` is written; the other is ignored.
    if (n.bits == HashBits::k32) {
      ranges_.Write(n.out32, absl::StrCat(where, " out32"));
    } else {
      ranges_.Write(n.out64, absl::StrCat(where, " out64"));
    }
    ranges_.Write(n.out_validity, absl::StrCat(where, " out_validity"));
    return absl::OkStatus();
  }

  absl::Status CheckAliasing() { return ranges_.Check(); }

  // Every buffer of a hash column tree is read (ValidateHashNode bounded its depth).
  void ReadHashColumn(const HashColumn& col, const std::string& cw) {
    ranges_.Read(col.data, absl::StrCat(cw, " data"));
    ranges_.Read(col.offsets, absl::StrCat(cw, " offsets"));
    ranges_.Read(col.large_offsets, absl::StrCat(cw, " large_offsets"));
    ranges_.Read(col.validity, absl::StrCat(cw, " validity"));
    for (size_t j = 0; j < col.children.size(); ++j) {
      ReadHashColumn(col.children[j], absl::StrCat(cw, ".children[", j, "]"));
    }
  }

 private:
  // Row positions and statistics fit 32-bit device counters per row index; one
  // logical column is limited to 2^32 - 1 rows so every row ID is a uint32.
  static constexpr size_t kMaxRows = size_t{0xffffffffu};
  static constexpr size_t kMaxGroups = size_t{1} << 32;

  static absl::Status TooManyRows(const std::string& where, std::string_view field, size_t rows) {
    return Invalid(where, absl::StrCat(std::string(field), " have ", rows,
                                       " rows; at most 2^32 - 1 are allowed"));
  }

  // A build's payload columns, each with the build's `rows` key rows; their
  // buffers are read ranges.
  absl::Status CheckPayload(const std::string& where, const std::vector<ColumnView>& payload,
                            uint64_t rows) {
    for (size_t c = 0; c < payload.size(); ++c) {
      const ColumnView& col = payload[c];
      GPUJOIN_RETURN_IF_ERROR(CheckPayloadColumn(where, c, col, rows));
      const std::string cw = absl::StrCat(where, " payload[", c, "]");
      ranges_.Read(col.data, absl::StrCat(cw, " data"));
      ranges_.Read(col.offsets, absl::StrCat(cw, " offsets"));
      ranges_.Read(col.validity, absl::StrCat(cw, " validity"));
    }
    return absl::OkStatus();
  }

  // An index built by this node: later nodes see its payload types.
  void Built(const HashIndex* index, const std::vector<ColumnView>& payload) {
    std::vector<ColumnType>& types = built_[index];
    types.clear();
    for (const ColumnView& col : payload) types.push_back(col.type);
  }

  // The payload column types a reader of `index` finds: those of an earlier build
  // node of this graph, else of the index's last build.
  std::vector<ColumnType> PayloadTypes(const HashIndex& index) const {
    if (auto it = built_.find(&index); it != built_.end()) return it->second;
    std::vector<ColumnType> types;
    for (const PayloadColumnInfo& info : index.payload()) types.push_back(info.type);
    return types;
  }

  // Gathered outputs of `rows` positions each; their buffers (and the string
  // and null count they point to) are written ranges.
  absl::Status CheckGather(const std::string& where, const std::vector<GatherOutput>& gather,
                           uint64_t rows, std::string_view rows_of, const HashIndex& index) {
    if (gather.empty()) return absl::OkStatus();
    const std::vector<ColumnType> types = PayloadTypes(index);
    for (size_t g = 0; g < gather.size(); ++g) {
      const GatherOutput& out = gather[g];
      GPUJOIN_RETURN_IF_ERROR(CheckGatherOutput(where, g, out, rows, rows_of, types));
      const std::string gw = absl::StrCat(where, " gather[", g, "]");
      ranges_.Write(out.data, absl::StrCat(gw, " data"));
      ranges_.Write(out.validity, absl::StrCat(gw, " validity"));
      ranges_.Write(out.offsets, absl::StrCat(gw, " offsets"));
      ranges_.WriteObject(out.string_bytes, absl::StrCat(gw, " string_bytes"));
      ranges_.WriteObject(out.null_count, absl::StrCat(gw, " null_count"));
    }
    return absl::OkStatus();
  }

  RangeCollector ranges_;
  // Indexes written by earlier nodes, with the payload column types they will have.
  std::unordered_map<const HashIndex*, std::vector<ColumnType>> built_;
};

}  // namespace

template <IndexKey K>
absl::Status ValidateMutationBatch(const MutationBatchT<K>& batch, const HashIndex& index) {
  const std::string where = "mutation";
  GPUJOIN_RETURN_IF_ERROR(CheckReadableIndex(where, &index, false, 0));
  GPUJOIN_RETURN_IF_ERROR(CheckKeyType<K>(where, index));
  // Key columns left out (no columns at all) are an empty input.
  auto sent = [](const auto& keys) {
    if constexpr (std::is_same_v<std::decay_t<decltype(keys)>, KeyColumns>) {
      return !keys.columns.empty();
    } else {
      return true;
    }
  };
  if (sent(batch.delete_keys)) {
    GPUJOIN_RETURN_IF_ERROR(CheckKeyInput(where, "delete keys", batch.delete_keys, index));
  }
  if (sent(batch.upsert_keys)) {
    GPUJOIN_RETURN_IF_ERROR(CheckKeyInput(where, "upsert keys", batch.upsert_keys, index));
  }
  const uint64_t rows = KeyRows(batch.upsert_keys);
  const uint64_t values = TotalRows(batch.values);
  if (values != rows) {
    return Invalid(where, absl::StrCat("values have ", values, " rows but upsert keys have ", rows));
  }
  const std::vector<PayloadColumnInfo>& stored = index.payload();
  if (rows == 0 && batch.payload.empty()) return absl::OkStatus();
  if (batch.payload.size() != stored.size()) {
    return Invalid(where, absl::StrCat("the batch has ", batch.payload.size(),
                                       " payload columns but the index has ", stored.size()));
  }
  for (size_t c = 0; c < stored.size(); ++c) {
    if (batch.payload[c].type != stored[c].type) {
      return Invalid(where, absl::StrCat(PayloadName(c, batch.payload[c].type),
                                         " does not match the index's payload[", c, "] (",
                                         std::string(ColumnTypeName(stored[c].type)), ")"));
    }
    GPUJOIN_RETURN_IF_ERROR(CheckPayloadColumn(where, c, batch.payload[c], rows));
  }
  return absl::OkStatus();
}
template absl::Status ValidateMutationBatch(const MutationBatchT<uint32_t>&, const HashIndex&);
template absl::Status ValidateMutationBatch(const MutationBatchT<uint64_t>&, const HashIndex&);
template absl::Status ValidateMutationBatch(const MutationBatchT<ColumnKey>&, const HashIndex&);

absl::Status CommandGraph::Validate() const {
  Validator v;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    GPUJOIN_RETURN_IF_ERROR(
        std::visit([&](const auto& node) { return v.Visit(i, node); }, nodes_[i]));
  }
  return v.CheckAliasing();
}

}  // namespace gpujoin::engine
