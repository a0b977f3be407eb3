// Payload storage and gathers on the CPU. Storing a build's column and gathering
// a stored column into a query's output are the same operation: output position
// i takes source row rows[i] (or null for kNoRow). One loop (GatherPart) does it
// for every type; the layouts differ only in how one value is copied.
#include "cpu/cpu_payload.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace gpujoin::engine::cpu {
namespace {

// Output positions per task below which splitting further costs more than it saves.
constexpr size_t kMinPositionsPerTask = 16384;

// Splits [0, n) like SplitRows, with every range but the last starting at a
// multiple of 8 so that each range owns whole bytes of the output bitmaps.
std::vector<size_t> SplitPositions(size_t n, ThreadPool& pool) {
  std::vector<size_t> bounds = SplitRows(n, size_t{pool.size()} * 4, kMinPositionsPerTask);
  for (size_t p = 1; p + 1 < bounds.size(); ++p) bounds[p] = bounds[p] / 8 * 8;
  return bounds;
}

// Whether source row r (not kNoRow) holds a value.
inline bool ValidRow(const ColumnView& src, uint32_t r) {
  return src.validity.empty() || BitAt(src.validity, r);
}

// Where a gather writes, for n output positions.
template <class Offset>
struct Sink {
  std::byte* data = nullptr;    // fixed width: n * width; kBool: BitmapBytes(n)
  uint8_t* validity = nullptr;  // BitmapBytes(n), or null: not written
  Offset* offsets = nullptr;    // variable width: n + 1 (offsets[0] written by the caller)
  std::byte* bytes = nullptr;   // variable width: the selected rows' bytes
};

// Layouts: Copy writes position i from valid source row r, Null writes the null
// value at i, EndGroup finishes the 8 positions from g (bitmap bytes).
template <size_t W>
struct FixedLayout {
  const std::byte* src;
  std::byte* dst;
  void Copy(size_t i, uint32_t r) { std::memcpy(dst + i * W, src + size_t{r} * W, W); }
  void Null(size_t i) { std::memset(dst + i * W, 0, W); }
  void EndGroup(size_t) {}
};

struct BoolLayout {
  std::span<const uint8_t> src;
  std::byte* dst;
  uint8_t bits = 0;
  void Copy(size_t i, uint32_t r) { bits |= uint8_t(BitAt(src, r) << (i % 8)); }
  void Null(size_t) {}
  void EndGroup(size_t g) {
    dst[g / 8] = std::byte{bits};
    bits = 0;
  }
};

template <class Offset>
struct VariableLayout {
  const std::byte* src;
  const uint64_t* src_offsets;
  std::byte* bytes;
  Offset* offsets;
  uint64_t cursor;  // bytes written before position i
  void Copy(size_t i, uint32_t r) {
    const uint64_t begin = src_offsets[r];
    const uint64_t length = src_offsets[r + 1] - begin;
    if (length != 0) std::memcpy(bytes + cursor, src + begin, length);
    cursor += length;
    offsets[i + 1] = static_cast<Offset>(cursor);
  }
  void Null(size_t i) { offsets[i + 1] = static_cast<Offset>(cursor); }
  void EndGroup(size_t) {}
};

// Positions whose source row is missing, and whose source row holds a null.
struct Counts {
  uint64_t missing = 0;
  uint64_t nulls = 0;
};

template <class Layout>
Counts GatherPart(const ColumnView& src, const uint32_t* rows, size_t begin, size_t end,
                  uint8_t* validity, Layout layout) {
  Counts c;
  for (size_t g = begin; g < end; g += 8) {
    const size_t n = std::min<size_t>(8, end - g);
    uint8_t valid_bits = 0;
    for (size_t j = 0; j < n; ++j) {
      const uint32_t r = rows[g + j];
      const bool present = r != kNoRow;
      const bool valid = present && ValidRow(src, r);
      c.missing += !present;
      c.nulls += present && !valid;
      valid_bits |= uint8_t(valid << j);
      if (valid) {
        layout.Copy(g + j, r);
      } else {
        layout.Null(g + j);
      }
    }
    layout.EndGroup(g);
    if (validity != nullptr) validity[g / 8] = valid_bits;
  }
  return c;
}

// Bytes of the values that positions [begin, end) select (variable width).
uint64_t SelectedBytes(const ColumnView& src, const uint32_t* rows, size_t begin, size_t end) {
  uint64_t bytes = 0;
  for (size_t i = begin; i < end; ++i) {
    const uint32_t r = rows[i];
    if (r != kNoRow && ValidRow(src, r)) bytes += src.offsets[r + 1] - src.offsets[r];
  }
  return bytes;
}

// First byte of each part's values: the exclusive scan of the parts' selected
// bytes, with the total last (bounds.size() entries).
std::vector<uint64_t> PartFirstBytes(const ColumnView& src, std::span<const uint32_t> rows,
                                     const std::vector<size_t>& bounds, ThreadPool& pool) {
  const size_t parts = bounds.size() - 1;
  std::vector<uint64_t> first(parts + 1, 0);
  pool.ParallelFor(parts, [&](size_t p) {
    first[p + 1] = SelectedBytes(src, rows.data(), bounds[p], bounds[p + 1]);
  });
  for (size_t p = 0; p < parts; ++p) first[p + 1] += first[p];
  return first;
}

// Writes positions 0 .. rows.size() - 1 of `sink` from `src`, split at `bounds`;
// variable width: `first_bytes` from PartFirstBytes, and sink.offsets[0] set.
template <class Offset>
Counts Gather(const ColumnView& src, std::span<const uint32_t> rows,
              const std::vector<size_t>& bounds, const std::vector<uint64_t>& first_bytes,
              const Sink<Offset>& sink, ThreadPool& pool) {
  const size_t parts = bounds.size() - 1;
  std::vector<Counts> partial(parts);
  pool.ParallelFor(parts, [&](size_t p) {
    const size_t begin = bounds[p], end = bounds[p + 1];
    auto run = [&](auto layout) {
      return GatherPart(src, rows.data(), begin, end, sink.validity, layout);
    };
    if (IsVariableWidth(src.type)) {
      partial[p] = run(VariableLayout<Offset>{src.data.data(), src.offsets.data(), sink.bytes,
                                              sink.offsets, first_bytes[p]});
    } else if (src.type == ColumnType::kBool) {
      const auto bits =
          std::span(reinterpret_cast<const uint8_t*>(src.data.data()), src.data.size());
      partial[p] = run(BoolLayout{bits, sink.data});
    } else if (ColumnWidth(src.type) == 8) {
      partial[p] = run(FixedLayout<8>{src.data.data(), sink.data});
    } else {
      partial[p] = run(FixedLayout<4>{src.data.data(), sink.data});
    }
  });
  Counts total;
  for (const Counts& c : partial) {
    total.missing += c.missing;
    total.nulls += c.nulls;
  }
  return total;
}

}  // namespace

ColumnView StoredColumn::View() const {
  ColumnView view;
  view.type = type;
  view.rows = slots;
  view.data = data.span();
  view.offsets = offsets.span();
  view.validity = validity.span();
  return view;
}

uint64_t StoredColumn::bytes() const {
  return data.size() + offsets.size() * sizeof(uint64_t) + validity.size();
}

StoredColumn AllocateStored(const ColumnView& source, uint64_t slots) {
  StoredColumn stored;
  stored.type = source.type;
  stored.slots = slots;
  if (IsVariableWidth(source.type)) {
    stored.offsets = HostArray<uint64_t>(slots + 1);
  } else if (source.type == ColumnType::kBool) {
    stored.data = HostArray<std::byte>(BitmapBytes(slots));
  } else {
    stored.data = HostArray<std::byte>(slots * ColumnWidth(source.type));
  }
  if (!source.validity.empty()) stored.validity = HostArray<uint8_t>(BitmapBytes(slots));
  return stored;
}

void StoreColumn(const ColumnView& source, std::span<const uint32_t> winners, StoredColumn& stored,
                 ThreadPool& pool) {
  const std::vector<size_t> bounds = SplitPositions(winners.size(), pool);
  std::vector<uint64_t> first_bytes;
  Sink<uint64_t> sink;
  sink.validity = stored.validity.size() == 0 ? nullptr : stored.validity.data();
  if (IsVariableWidth(source.type)) {
    first_bytes = PartFirstBytes(source, winners, bounds, pool);
    stored.data = HostArray<std::byte>(first_bytes.back());
    stored.offsets.data()[0] = 0;
    sink.offsets = stored.offsets.data();
    sink.bytes = stored.data.data();
  } else {
    sink.data = stored.data.data();
  }
  stored.null_count = Gather(source, winners, bounds, first_bytes, sink, pool).nulls;
}

absl::Status GatherColumns(const std::vector<StoredColumn>& payload,
                           std::span<const GatherOutput> outputs, std::span<const uint32_t> slots,
                           ThreadPool& pool, std::string_view where) {
  const std::vector<size_t> bounds = SplitPositions(slots.size(), pool);
  // Every string total first, so that a refused gather writes nothing.
  std::vector<std::vector<uint64_t>> first_bytes(outputs.size());
  for (size_t g = 0; g < outputs.size(); ++g) {
    const GatherOutput& out = outputs[g];
    const StoredColumn& column = payload[out.column];
    if (!IsVariableWidth(column.type)) continue;
    first_bytes[g] = PartFirstBytes(column.View(), slots, bounds, pool);
    if (first_bytes[g].back() > out.max_string_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          std::string(where), ": gather[", g, "] (column ", out.column, ", ",
          std::string(ColumnTypeName(column.type)), ") selects ", first_bytes[g].back(),
          " value bytes, more than max_string_bytes ", out.max_string_bytes));
    }
  }
  for (size_t g = 0; g < outputs.size(); ++g) {
    const GatherOutput& out = outputs[g];
    const StoredColumn& column = payload[out.column];
    Sink<uint32_t> sink;
    sink.validity = out.validity.data();
    if (IsVariableWidth(column.type)) {
      out.string_bytes->resize(first_bytes[g].back());
      out.offsets[0] = 0;
      sink.offsets = out.offsets.data();
      sink.bytes = reinterpret_cast<std::byte*>(out.string_bytes->data());
    } else {
      sink.data = out.data.data();
    }
    const Counts counts = Gather(column.View(), slots, bounds, first_bytes[g], sink, pool);
    if (out.null_count != nullptr) *out.null_count = counts.missing + counts.nulls;
  }
  return absl::OkStatus();
}

}  // namespace gpujoin::engine::cpu
