// fuzz_graph_validate: the consistency of an accepted graph's outputs after
// it ran (statistics add up, found flags and match counts agree, join counts
// fit their kind, no stray hash validity bits).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "fuzz_check.hpp"
#include "gpujoin/engine/graph.hpp"
#include "gpujoin/engine/hash_index.hpp"

namespace gpujoin::fuzz::graph_validate {

using namespace gpujoin::engine;

// Consistency of an accepted, run node's outputs.
template <IndexKey K>
void CheckOutputs(const std::string& where, const BuildIndexNodeT<K>& n) {
  if (n.statistics == nullptr) return;
  const BuildStatistics& s = *n.statistics;
  FUZZ_CHECK(
      s.unique_keys + s.duplicate_rows + s.overflow_rows + s.invalid_rows == KeyRows(n.keys),
      where + ": build statistics do not add up to its rows");
}

template <IndexKey K>
void CheckOutputs(const std::string& where, const BuildBatchIndexNodeT<K>& n) {
  size_t rows = 0;
  for (const BatchChunkT<K>& c : n.chunks) rows += KeyRows(c.keys);
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
inline std::map<const HashIndex*, uint64_t>& GroupBounds() {
  static std::map<const HashIndex*, uint64_t> bounds;
  return bounds;
}

inline uint64_t LargestGroup(const HashIndex& index) {
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
      bound = std::max<uint64_t>(bound, KeyRows(n.keys));
    }
  } else if constexpr (requires { n.chunks; n.index; }) {
    uint64_t rows = 0;
    for (const auto& c : n.chunks) rows += KeyRows(c.keys);
    uint64_t& bound = GroupBounds()[n.index];
    bound = std::max<uint64_t>(bound, rows);
  }
}

template <IndexKey K>
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

template <IndexKey K>
void CheckOutputs(const std::string& where, const JoinNodeT<K>& n) {
  const uint64_t group = LargestGroup(*n.index);
  for (const JoinBatchT<K>& b : n.batches) {
    const uint64_t found = b.result->statistics.found;
    const uint64_t missing = b.result->statistics.missing;
    const uint64_t count = b.result->count;
    bool ok = found + missing == KeyRows(b.keys);
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

inline void CheckOutputs(const std::string& where, const AggregateNode& n) {
  uint64_t counted = 0;
  if (n.op == AggregateOp::kCount) {
    for (uint64_t c : n.output) counted += c;
  } else {
    for (uint32_t c : n.contributing_rows) counted += c;
  }
  FUZZ_CHECK(counted <= TotalRows(n.keys),
             absl::StrCat(where, ": ", counted, " rows counted from ", TotalRows(n.keys)));
}

inline void CheckOutputs(const std::string& where, const HashNode& n) {
  const uint64_t rows = n.columns[0].length;
  if (rows % 8 == 0) return;
  FUZZ_CHECK((n.out_validity.back() >> (rows % 8)) == 0,
             where + ": the hash validity bitmap has bits past its rows");
}

}  // namespace gpujoin::fuzz::graph_validate
