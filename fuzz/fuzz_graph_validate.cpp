// Fuzz target: the engine's command-graph validator (CommandGraph::Validate,
// engine/src/common/graph_validate.cpp, with the hash-node checks of
// engine/src/hashing/hash_host.cpp), and the CPU backend behind it.
//
// Input: consumed with libFuzzer's FuzzedDataProvider: the contents of a 2 KiB
// arena, two fresh indexes (capacity, probe bound, uint32 or uint64 keys,
// lowest_row or keep_all, built or not), then up to four nodes of any kind and
// key word (joins of every join kind, and rarely one that is none), mostly well formed
// (consistent lengths, valid binary offsets) with deviations, whose spans lie
// anywhere in the arena (or, rarely, are spans of 2^32 and more rows that must be
// refused) and whose statistics and results may lie in the arena too. Checked:
//  - a graph in which a written range overlaps any other range (found by brute
//    force over every pair) is refused, and an overlap the validator reports is
//    one that exists; a graph with an oversized span is refused;
//  - Backend::Run returns exactly what Validate returns, and a refused graph
//    changes nothing: not a byte of the arena, not an index;
//  - an accepted graph runs (under ASan and UBSan) and writes nothing outside its
//    declared written ranges; its outputs are consistent (build statistics add up
//    to the rows, lookups' found flags match their values and match counts,
//    join counts are those the kind allows for the found and missing rows (at
//    most the largest group per found row on keep_all), aggregation counts are
//    bounded by the rows, hash bitmaps have no stray bits).
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fuzz_check.hpp"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/graph.hpp"

namespace gpujoin::fuzz {
namespace {

using namespace gpujoin::engine;

constexpr size_t kArenaBytes = 2048;
constexpr size_t kHugeRows = (size_t{1} << 32) + 3;

// One byte range of the graph, as the documentation of each node declares it,
// and where it comes from (node, field and up to two part numbers: a chunk, a
// batch or a column); its name is only formed for a failure message.
struct Range {
  uintptr_t begin = 0, end = 0;
  bool written = false;
  size_t node = 0;
  const char* field = "";
  int part = -1, subpart = -1;

  std::string Name() const {
    std::string name = absl::StrCat("node ", node, " ", field);
    if (part >= 0) absl::StrAppend(&name, " ", part);
    if (subpart >= 0) absl::StrAppend(&name, " chunk ", subpart);
    return name;
  }
};

class GraphMaker {
 public:
  GraphMaker(FuzzedDataProvider& in, uint8_t* arena) : in_(in), arena_(arena) {}

  // A length: mostly `want` (so that most nodes are well formed and reach the
  // aliasing checks and the run), sometimes any small length.
  size_t Length(size_t want) {
    if (in_.ConsumeIntegralInRange<int>(0, 7) != 0) return want;
    return in_.ConsumeIntegralInRange<size_t>(0, 72);
  }

  // A span of about `want` elements of T at any place in the arena (or, rarely,
  // a default-constructed empty span).
  template <typename T>
  std::span<T> Span(size_t want) {
    constexpr size_t n = kArenaBytes / sizeof(T);
    if (in_.ConsumeIntegralInRange<int>(0, 15) == 0) return {};
    const size_t len = std::min(Length(want), n);
    const size_t begin = in_.ConsumeIntegralInRange<size_t>(0, n - len);
    return std::span<T>(reinterpret_cast<T*>(arena_) + begin, len);
  }

  // An optional column of about `want` elements: mostly either absent or present.
  template <typename T>
  std::span<T> Optional(size_t want) {
    return in_.ConsumeBool() ? std::span<T>() : Span<T>(want);
  }

  // A span that is rarely oversized (kHugeRows elements at the arena's start:
  // only ever validated, never backed by memory).
  template <typename T>
  std::span<T> MaybeHuge(size_t want) {
    if (in_.ConsumeIntegralInRange<int>(0, 31) == 0) {
      huge_ = true;
      return std::span<T>(reinterpret_cast<T*>(arena_), kHugeRows);
    }
    return Span<T>(want);
  }

  // `rows` rows in 1 to 3 chunks (0 to 3 when empty), cut anywhere.
  template <typename T>
  Chunked<T> Chunks(size_t rows, bool may_be_huge = false) {
    Chunked<T> chunks;
    const int n = in_.ConsumeIntegralInRange<int>(rows == 0 ? 0 : 1, 3);
    size_t left = rows;
    for (int i = 0; i < n; ++i) {
      const size_t part = i == n - 1 ? left : in_.ConsumeIntegralInRange<size_t>(0, left);
      left -= part;
      chunks.push_back(may_be_huge ? MaybeHuge<const T>(part) : Span<const T>(part));
    }
    return chunks;
  }

  size_t Rows() { return in_.ConsumeIntegralInRange<size_t>(0, 40); }

  // Writes non-decreasing int32 offsets into `offsets` (the arena is the harness's
  // until the graph runs) ending at most at `data_bytes`, so that binary columns
  // are valid often enough; sometimes leaves the fuzz input's bytes.
  void Offsets(std::span<const int32_t> offsets, size_t data_bytes) {
    if (offsets.empty() || in_.ConsumeIntegralInRange<int>(0, 7) == 0) return;
    int32_t at = 0;
    for (size_t i = 0; i < offsets.size(); ++i) {
      const int32_t room = static_cast<int32_t>(data_bytes) - at;
      at += i == 0 ? 0 : in_.ConsumeIntegralInRange<int32_t>(0, std::max(0, std::min(room, 9)));
      const int32_t v = at;
      std::memcpy(const_cast<int32_t*>(offsets.data()) + i, &v, sizeof v);
    }
  }

  // A host output object: none, a separate object, or one placed in the arena
  // (aligned for T) where it may overlap the spans.
  template <typename T>
  T* Object(std::vector<std::unique_ptr<T>>& own, bool required = false) {
    switch (in_.ConsumeIntegralInRange<int>(required ? 1 : 0, 3)) {
      case 0:
        return nullptr;
      case 1:
      case 2:
        own.push_back(std::make_unique<T>());
        return own.back().get();
      default: {
        const size_t slots = kArenaBytes / alignof(T) - sizeof(T) / alignof(T);
        const size_t at = in_.ConsumeIntegralInRange<size_t>(0, slots) * alignof(T);
        return new (arena_ + at) T();  // trivially destructible: never destroyed
      }
    }
  }

  template <typename T>
  T* Pick(const std::vector<T*>& options) {
    return options[in_.ConsumeIntegralInRange<size_t>(0, options.size() - 1)];
  }

  uint32_t ProbeCount(uint32_t capacity) {
    switch (in_.ConsumeIntegralInRange<int>(0, 3)) {
      case 0:
      case 1:
        return 0;
      case 2:
        return in_.ConsumeIntegralInRange<uint32_t>(0, capacity + 1);
      default:
        return in_.ConsumeIntegral<uint32_t>();
    }
  }

  // A hash column offset or length: mostly small, sometimes any value.
  uint64_t RowCount(uint64_t small) {
    return in_.ConsumeIntegralInRange<int>(0, 15) != 0 ? small : in_.ConsumeIntegral<uint64_t>();
  }

  bool huge() const { return huge_; }
  FuzzedDataProvider& in() { return in_; }

 private:
  FuzzedDataProvider& in_;
  uint8_t* arena_;
  bool huge_ = false;
};

// The ranges each node declares (graph.hpp), for the brute-force overlap check
// and the check that nothing else is written.
class RangeList {
 public:
  template <typename T>
  void Add(std::span<T> s, bool written, size_t node, const char* field, int part = -1,
           int subpart = -1) {
    if (s.empty() || s.data() == nullptr) return;
    const auto begin = reinterpret_cast<uintptr_t>(s.data());
    ranges_.push_back(Range{begin, begin + s.size_bytes(), written, node, field, part, subpart});
  }
  template <typename T>
  void Chunks(const Chunked<T>& c, size_t node, const char* field, int part = -1) {
    for (size_t i = 0; i < c.size(); ++i) {
      Add(c[i], false, node, field, part, static_cast<int>(i));
    }
  }
  template <typename T>
  void Object(T* p, size_t node, const char* field, int part = -1) {
    if (p != nullptr) Add(std::span<T>(p, 1), true, node, field, part);
  }

  template <KeyWord K>
  void Node(size_t i, const BuildIndexNodeT<K>& n) {
    Chunks(n.keys, i, "keys");
    if (n.values) Chunks(*n.values, i, "values");
    Object(n.statistics, i, "statistics");
  }
  template <KeyWord K>
  void Node(size_t i, const BuildBatchIndexNodeT<K>& n) {
    for (size_t c = 0; c < n.chunks.size(); ++c) {
      Add(n.chunks[c].keys, false, i, "keys of chunk", static_cast<int>(c));
      Add(n.chunks[c].validity, false, i, "validity of chunk", static_cast<int>(c));
    }
    Object(n.statistics, i, "statistics");
  }
  template <KeyWord K>
  void Node(size_t i, const LookupNodeT<K>& n) {
    Chunks(n.keys, i, "keys");
    Add(n.values, true, i, "values");
    Add(n.found, true, i, "found");
    Add(n.probes, true, i, "probes");
    Add(n.match_counts, true, i, "match_counts");
    Object(n.statistics, i, "statistics");
  }
  template <KeyWord K>
  void Node(size_t i, const JoinNodeT<K>& n) {
    for (size_t b = 0; b < n.batches.size(); ++b) {
      const JoinBatchT<K>& jb = n.batches[b];
      const int part = static_cast<int>(b);
      Chunks(jb.keys, i, "keys of batch", part);
      Add(jb.left_rows, false, i, "left_rows of batch", part);
      Add(jb.out_left_rows, true, i, "out_left_rows of batch", part);
      Add(jb.out_right_rows, true, i, "out_right_rows of batch", part);
      Add(jb.found, true, i, "found of batch", part);
      Add(jb.probes, true, i, "probes of batch", part);
      Object(jb.result, i, "result of batch", part);
    }
  }
  void Node(size_t i, const AggregateNode& n) {
    Chunks(n.keys, i, "keys");
    Chunks(n.values, i, "values");
    if (n.mask) Chunks(*n.mask, i, "mask");
    Add(n.count_output, true, i, "count_output");
    Add(n.value_output, true, i, "value_output");
    Add(n.contributing_rows, true, i, "contributing_rows");
  }
  void Node(size_t i, const HashNode& n) {
    for (size_t c = 0; c < n.columns.size(); ++c) {
      const int part = static_cast<int>(c);
      Add(n.columns[c].data, false, i, "data of column", part);
      Add(n.columns[c].offsets, false, i, "offsets of column", part);
      Add(n.columns[c].validity, false, i, "validity of column", part);
    }
    // Only the output that `bits` selects is written (graph.hpp).
    if (n.bits == HashBits::k32) Add(n.out32, true, i, "out32");
    if (n.bits == HashBits::k64) Add(n.out64, true, i, "out64");
    Add(n.out_validity, true, i, "out_validity");
  }

  // The first pair of ranges, one of them written, that share a byte.
  std::optional<std::string> Overlap() const {
    for (size_t a = 0; a < ranges_.size(); ++a) {
      for (size_t b = a + 1; b < ranges_.size(); ++b) {
        const Range& x = ranges_[a];
        const Range& y = ranges_[b];
        if ((x.written || y.written) && x.begin < y.end && y.begin < x.end) {
          return x.Name() + " and " + y.Name();
        }
      }
    }
    return std::nullopt;
  }

  bool Written(uintptr_t address) const {
    for (const Range& r : ranges_) {
      if (r.written && r.begin <= address && address < r.end) return true;
    }
    return false;
  }

 private:
  std::vector<Range> ranges_;
};

struct Objects {
  std::vector<std::unique_ptr<BuildStatistics>> build;
  std::vector<std::unique_ptr<QueryStatistics>> query;
  std::vector<std::unique_ptr<JoinResult>> join;
};

// A node that carries keys of word K (its index may hold the other word).
template <KeyWord K>
Node MakeKeyNode(int kind, GraphMaker& m, const std::vector<HashIndex*>& indexes,
                 Objects& objects) {
  FuzzedDataProvider& in = m.in();
  switch (kind) {
    case 0: {
      BuildIndexNodeT<K> n;
      n.index = m.Pick(indexes);
      const size_t rows = m.Rows();
      n.keys = m.Chunks<K>(rows);
      if (in.ConsumeBool()) n.values = m.Chunks<uint32_t>(m.Length(rows));
      n.first_value = in.ConsumeIntegral<uint32_t>();
      n.statistics = m.Object(objects.build);
      return n;
    }
    case 1: {
      BuildBatchIndexNodeT<K> n;
      n.index = m.Pick(indexes);
      const int chunks = in.ConsumeIntegralInRange<int>(0, 3);
      for (int c = 0; c < chunks; ++c) {
        BatchChunkT<K> chunk;
        const size_t rows = m.Rows();
        chunk.keys = m.Span<const K>(rows);
        chunk.row_base = in.ConsumeIntegral<uint32_t>();
        chunk.validity = m.Optional<const uint32_t>(rows);
        n.chunks.push_back(chunk);
      }
      n.statistics = m.Object(objects.build);
      return n;
    }
    case 2: {
      LookupNodeT<K> n;
      n.index = m.Pick(indexes);
      const size_t rows = m.Rows();
      n.keys = m.Chunks<K>(rows, /*may_be_huge=*/true);
      n.values = m.Span<uint32_t>(rows);
      n.found = m.Optional<uint8_t>(rows);
      n.probes = m.Optional<uint32_t>(rows);
      n.match_counts = m.Optional<uint32_t>(rows);
      n.statistics = m.Object(objects.query);
      n.max_probe_count = m.ProbeCount(n.index == nullptr ? 0 : n.index->spec().capacity);
      return n;
    }
    default: {
      JoinNodeT<K> n;
      n.index = m.Pick(indexes);
      n.max_probe_count = m.ProbeCount(n.index == nullptr ? 0 : n.index->spec().capacity);
      // 4 is no kind: refused.
      n.kind = static_cast<JoinKind>(in.ConsumeIntegralInRange<int>(0, 4));
      const int batches = in.ConsumeIntegralInRange<int>(0, 3);
      for (int b = 0; b < batches; ++b) {
        JoinBatchT<K> jb;
        const size_t rows = m.Rows();
        jb.keys = m.Chunks<K>(rows, /*may_be_huge=*/true);
        jb.left_rows = m.Optional<const uint32_t>(rows);
        jb.first_left_row = in.ConsumeIntegral<uint32_t>();
        const size_t capacity = in.ConsumeIntegralInRange<size_t>(0, rows + 2);
        jb.out_left_rows = m.Span<uint32_t>(capacity);
        jb.out_right_rows = m.Span<uint32_t>(capacity);
        jb.result = m.Object(objects.join, /*required=*/in.ConsumeIntegralInRange<int>(0, 15) != 0);
        jb.found = m.Optional<uint8_t>(rows);
        jb.probes = m.Optional<uint32_t>(rows);
        n.batches.push_back(jb);
      }
      return n;
    }
  }
}

Node MakeNode(GraphMaker& m, const std::vector<HashIndex*>& indexes, Objects& objects) {
  FuzzedDataProvider& in = m.in();
  const int kind = in.ConsumeIntegralInRange<int>(0, 5);
  if (kind < 4) {
    return in.ConsumeBool() ? MakeKeyNode<uint64_t>(kind, m, indexes, objects)
                            : MakeKeyNode<uint32_t>(kind, m, indexes, objects);
  }
  switch (kind) {
    case 4: {
      AggregateNode n;
      n.op = static_cast<AggregateOp>(in.ConsumeIntegralInRange<int>(0, 4));
      const bool count = n.op == AggregateOp::kCount;
      const size_t rows = m.Rows();
      const size_t groups = in.ConsumeIntegralInRange<size_t>(0, 20);
      n.keys = m.Chunks<uint32_t>(rows);
      // Each output and the values belong to one kind of op; rarely the other.
      const bool wrong = in.ConsumeIntegralInRange<int>(0, 7) == 0;
      if (!count || wrong) n.values = m.Chunks<float>(m.Length(rows));
      if (in.ConsumeBool()) n.mask = m.Chunks<uint32_t>(m.Length(rows));
      if (count || wrong) n.count_output = m.MaybeHuge<uint32_t>(groups);
      if (!count || wrong) n.value_output = m.Span<float>(groups);
      n.contributing_rows = m.Optional<uint32_t>(groups);
      return n;
    }
    default: {
      HashNode n;
      n.bits = static_cast<HashBits>(in.ConsumeIntegralInRange<int>(0, 2));
      const int columns = in.ConsumeIntegralInRange<int>(0, 3);
      const uint64_t rows = m.Rows();
      for (int c = 0; c < columns; ++c) {
        HashColumn col;
        col.type = static_cast<ColumnType>(in.ConsumeIntegralInRange<int>(0, 7));
        col.offset = m.RowCount(in.ConsumeIntegralInRange<uint64_t>(0, 9));
        col.length = m.RowCount(rows);
        // The rows the column needs when offset and length are small.
        const size_t end = static_cast<size_t>(std::min<uint64_t>(col.offset + col.length, 64));
        const size_t width = col.type == ColumnType::kBinary ? 0
                             : col.type == ColumnType::kUint64 || col.type == ColumnType::kInt64 ||
                                     col.type == ColumnType::kFloat64
                                 ? 8
                                 : 4;
        if (col.type == ColumnType::kBinary) {
          col.data = m.Span<const uint8_t>(in.ConsumeIntegralInRange<size_t>(0, 200));
          col.offsets = m.Span<const int32_t>(end + 1);
          m.Offsets(col.offsets, col.data.size());
        } else {
          col.data = m.Span<const uint8_t>(end * width);
          if (in.ConsumeIntegralInRange<int>(0, 15) == 0) col.offsets = m.Span<const int32_t>(end);
        }
        col.validity = m.Optional<const uint8_t>((end + 7) / 8);
        n.columns.push_back(col);
      }
      n.out32 = n.bits == HashBits::k32 || in.ConsumeBool() ? m.Span<uint32_t>(rows)
                                                            : std::span<uint32_t>();
      n.out64 = n.bits != HashBits::k32 || in.ConsumeBool() ? m.Span<uint64_t>(rows)
                                                            : std::span<uint64_t>();
      n.out_validity = m.Span<uint8_t>((rows + 7) / 8);
      return n;
    }
  }
}

// Consistency of an accepted, run node's outputs.
template <KeyWord K>
void CheckOutputs(const std::string& where, const BuildIndexNodeT<K>& n) {
  if (n.statistics == nullptr) return;
  const BuildStatistics& s = *n.statistics;
  FUZZ_CHECK(
      s.unique_keys + s.duplicate_rows + s.overflow_rows + s.invalid_rows == TotalRows(n.keys),
      where + ": build statistics do not add up to its rows");
}

template <KeyWord K>
void CheckOutputs(const std::string& where, const BuildBatchIndexNodeT<K>& n) {
  size_t rows = 0;
  for (const BatchChunkT<K>& c : n.chunks) rows += c.keys.size();
  if (n.statistics == nullptr) return;
  const BuildStatistics& s = *n.statistics;
  FUZZ_CHECK(s.unique_keys + s.duplicate_rows + s.overflow_rows + s.invalid_rows == rows,
             where + ": batch build statistics do not add up to its rows");
}

// The most matches a key of `index` has: its largest group on keep_all, else 1.
// The most rows a keep_all index's group can have held at any point of the
// graph: the outputs are checked after every node ran, and a later node may
// have rebuilt the index that an earlier join or lookup read (its groups then
// came from the build before). Filled before the run: the group of the index
// as it stood, and every build node's rows.
std::map<const HashIndex*, uint64_t>& GroupBounds() {
  static std::map<const HashIndex*, uint64_t> bounds;
  return bounds;
}

uint64_t LargestGroup(const HashIndex& index) {
  if (index.spec().duplicates != DuplicatePolicy::kKeepAll) return 1;
  const auto it = GroupBounds().find(&index);
  const uint64_t before = it == GroupBounds().end() ? 0 : it->second;
  return std::max<uint64_t>({1, index.build_statistics().max_group_rows, before});
}

template <class Node>
void BoundGroups(const Node& n) {
  if constexpr (requires { n.keys; n.index; }) {
    if constexpr (std::is_same_v<decltype(n.index), HashIndex*>) {
      uint64_t& bound = GroupBounds()[n.index];
      bound = std::max<uint64_t>(bound, TotalRows(n.keys));
    }
  } else if constexpr (requires { n.chunks; n.index; }) {
    uint64_t rows = 0;
    for (const auto& c : n.chunks) rows += c.keys.size();
    uint64_t& bound = GroupBounds()[n.index];
    bound = std::max<uint64_t>(bound, rows);
  }
}

template <KeyWord K>
void CheckOutputs(const std::string& where, const LookupNodeT<K>& n) {
  const uint32_t bound = n.max_probe_count == 0 ? n.index->spec().probe_bound() : n.max_probe_count;
  // (A found key may have the value 0xffffffff at this level: generated values
  // wrap and explicit values are the caller's; the service refuses both.)
  uint64_t found = 0;
  for (size_t r = 0; r < n.values.size(); ++r) {
    if (!n.found.empty()) {
      FUZZ_CHECK(
          n.found[r] <= 1 && (n.found[r] == 1 || n.values[r] == kEmptyKey),
          absl::StrCat(where, ": row ", r, " found ", int(n.found[r]), " value ", n.values[r]));
      found += n.found[r];
    }
    if (!n.probes.empty()) {
      FUZZ_CHECK(n.probes[r] <= bound, absl::StrCat(where, ": row ", r, " examined ", n.probes[r],
                                                    " slots, over the bound ", bound));
    }
    if (!n.match_counts.empty() && !n.found.empty()) {
      // A found key matches at least once: once on lowest_row, at most the
      // largest group on keep_all.
      const uint32_t c = n.match_counts[r];
      FUZZ_CHECK(n.found[r] == 0 ? c == 0 : c >= 1 && c <= LargestGroup(*n.index),
                 absl::StrCat(where, ": row ", r, " found ", int(n.found[r]), " with ", c,
                              " matches (largest group ", LargestGroup(*n.index), ")"));
    }
  }
  if (n.statistics != nullptr) {
    FUZZ_CHECK(n.statistics->found + n.statistics->missing == n.values.size() &&
                   (n.found.empty() || n.statistics->found == found),
               where + ": lookup statistics do not match its rows");
  }
}

template <KeyWord K>
void CheckOutputs(const std::string& where, const JoinNodeT<K>& n) {
  const uint64_t group = LargestGroup(*n.index);
  for (const JoinBatchT<K>& b : n.batches) {
    const uint64_t found = b.result->statistics.found;
    const uint64_t missing = b.result->statistics.missing;
    const uint64_t count = b.result->count;
    bool ok = found + missing == TotalRows(b.keys);
    switch (n.kind) {
      case JoinKind::kInner:
        ok = ok && found <= count && count <= found * group;
        break;
      case JoinKind::kLeftOuter:
        ok = ok && missing + found <= count && count <= missing + found * group;
        break;
      case JoinKind::kLeftSemi:
        ok = ok && count == found;
        break;
      case JoinKind::kLeftAnti:
        ok = ok && count == missing;
        break;
    }
    FUZZ_CHECK(ok, absl::StrCat(where, ": a ", std::string(JoinKindName(n.kind)), " join of ",
                                found, " found and ", missing, " missing rows counted ", count,
                                " pairs (largest group ", group, ")"));
  }
}

void CheckOutputs(const std::string& where, const AggregateNode& n) {
  uint64_t counted = 0;
  const std::span<uint32_t> counts =
      n.op == AggregateOp::kCount ? n.count_output : n.contributing_rows;
  for (uint32_t c : counts) counted += c;
  FUZZ_CHECK(counted <= TotalRows(n.keys),
             absl::StrCat(where, ": ", counted, " rows counted from ", TotalRows(n.keys)));
}

void CheckOutputs(const std::string& where, const HashNode& n) {
  const uint64_t rows = n.columns[0].length;
  if (rows % 8 == 0) return;
  FUZZ_CHECK((n.out_validity.back() >> (rows % 8)) == 0,
             where + ": the hash validity bitmap has bits past its rows");
}

}  // namespace
}  // namespace gpujoin::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpujoin;
  using namespace gpujoin::engine;
  using namespace gpujoin::fuzz;
  static Backend* backend = [] {
    BackendOptions options;
    options.cpu_threads = 1;
    auto b = CreateBackend(BackendKind::kCpu, options);
    FUZZ_CHECK(b.ok(), Describe(b.status()));
    return b->release();
  }();
  // Exactly the arena's size on the heap, so that ASan catches any access past it.
  static uint8_t* arena = new uint8_t[kArenaBytes];
  FuzzedDataProvider in(data, size);
  const std::vector<uint8_t> contents =
      in.ConsumeBytes<uint8_t>(in.ConsumeIntegralInRange<size_t>(0, kArenaBytes));
  std::memset(arena, 0x5a, kArenaBytes);
  if (!contents.empty()) std::memcpy(arena, contents.data(), contents.size());

  // Two fresh indexes of either key word; the second may have been built before
  // the graph (from the arena's first 16 keys).
  std::vector<std::unique_ptr<HashIndex>> owned;
  for (int i = 0; i < 2; ++i) {
    HashIndexSpec spec;
    spec.capacity = uint32_t{1} << in.ConsumeIntegralInRange<int>(0, 6);
    spec.max_probe_count = in.ConsumeIntegralInRange<uint32_t>(0, spec.capacity);
    spec.key_type = in.ConsumeBool() ? KeyType::kU64 : KeyType::kU32;
    spec.duplicates = in.ConsumeBool() ? DuplicatePolicy::kKeepAll : DuplicatePolicy::kLowestRow;
    auto index = backend->CreateIndex(spec);
    FUZZ_CHECK(index.ok(), Describe(index.status()));
    owned.push_back(std::move(*index));
  }
  if (in.ConsumeBool()) {
    CommandGraph prebuild;
    if (owned[1]->key_type() == KeyType::kU64) {
      BuildIndexNode64 n;
      n.index = owned[1].get();
      n.keys = {std::span<const uint64_t>(reinterpret_cast<const uint64_t*>(arena), 16)};
      prebuild.Add(std::move(n));
    } else {
      BuildIndexNode n;
      n.index = owned[1].get();
      n.keys = {std::span<const uint32_t>(reinterpret_cast<const uint32_t*>(arena), 16)};
      prebuild.Add(std::move(n));
    }
    const absl::Status s = backend->Run(prebuild);
    FUZZ_CHECK(s.ok(), Describe(s));
  }
  const std::vector<HashIndex*> indexes = {owned[0].get(), owned[1].get(), nullptr};

  GraphMaker maker(in, arena);
  Objects objects;
  CommandGraph graph;
  const int nodes = in.ConsumeIntegralInRange<int>(0, 4);
  for (int i = 0; i < nodes; ++i) graph.Add(MakeNode(maker, indexes, objects));

  RangeList ranges;
  for (size_t i = 0; i < graph.nodes().size(); ++i) {
    std::visit([&](const auto& n) { ranges.Node(i, n); }, graph.nodes()[i]);
  }
  const std::optional<std::string> overlap = ranges.Overlap();

  const absl::Status valid = graph.Validate();
  FUZZ_CHECK(!(valid.ok() && overlap), "accepted a graph whose " + *overlap + " overlap");
  FUZZ_CHECK(!(valid.ok() && maker.huge()), "accepted a span of 2^32 and more rows");
  FUZZ_CHECK(valid.ok() || !MessageHas(valid, "overlaps") || overlap,
             "reported an overlap that does not exist: " + Describe(valid));

  GroupBounds().clear();
  for (const auto& index : owned) {
    GroupBounds()[index.get()] = index->build_statistics().max_group_rows;
  }
  for (const Node& node : graph.nodes()) std::visit([](const auto& n) { BoundGroups(n); }, node);

  const std::vector<uint8_t> before(arena, arena + kArenaBytes);
  std::vector<bool> built;
  for (const auto& index : owned) built.push_back(index->built());
  const absl::Status ran = backend->Run(graph);
  FUZZ_CHECK(ran == valid,
             absl::StrCat("Run returned ", Describe(ran), " but Validate ", Describe(valid)));
  const bool changed = std::memcmp(before.data(), arena, kArenaBytes) != 0;
  for (size_t b = 0; changed && b < kArenaBytes; ++b) {
    if (before[b] == arena[b]) continue;
    FUZZ_CHECK(valid.ok(),
               absl::StrCat("a refused graph changed arena byte ", b, " (", Describe(valid), ")"));
    FUZZ_CHECK(ranges.Written(reinterpret_cast<uintptr_t>(arena + b)),
               absl::StrCat("the graph wrote arena byte ", b, ", outside its written ranges"));
  }
  if (!valid.ok()) {
    for (size_t i = 0; i < owned.size(); ++i) {
      FUZZ_CHECK(owned[i]->built() == built[i], "a refused graph built an index");
    }
    return 0;
  }
  for (size_t i = 0; i < graph.nodes().size(); ++i) {
    std::visit([&](const auto& n) { CheckOutputs(absl::StrCat("node ", i), n); }, graph.nodes()[i]);
  }
  return 0;
}
