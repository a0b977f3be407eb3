// The join-kind contract (docs/engine.md, "Multi-value indexes and join kinds")
// as a reference model over a build's valid source rows: which pairs a left row
// yields from its matches, and a nested-loop join that needs no table. Shared by
// the engine tests (multi_value_model.hpp), the CUDA-vs-CPU differential tests
// and the server tests' wire model (tests/server/multi_value_model.hpp).
//
// Header only (engine headers): include it from a test that links the engine.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "gpujoin/common/operation_kinds.hpp"
#include "gpujoin/engine/graph.hpp"
#include "gpujoin/engine/types.hpp"

namespace gpujoin::testing {

/// One valid source row of a build: its global row, key and value.
template <engine::KeyWord K>
struct SourceRowOf {
  uint64_t row = 0;
  K key{};
  uint32_t value = 0;
};

/// The valid rows of a plain build (values explicit or first_value + row).
template <engine::KeyWord K>
std::vector<SourceRowOf<K>> PlainRowsOf(const std::vector<K>& keys,
                                        const std::optional<std::vector<uint32_t>>& values = {},
                                        uint32_t first_value = 0) {
  std::vector<SourceRowOf<K>> out;
  for (size_t r = 0; r < keys.size(); ++r) {
    if (keys[r] == engine::kEmptyKeyOf<K>) continue;
    out.push_back({r, keys[r], values ? (*values)[r] : first_value + static_cast<uint32_t>(r)});
  }
  return out;
}

/// The valid rows of a batch build (chunk order, then position; value row_base + position).
template <engine::KeyWord K>
std::vector<SourceRowOf<K>> BatchRowsOf(const std::vector<engine::BatchChunkT<K>>& chunks) {
  std::vector<SourceRowOf<K>> out;
  uint64_t row = 0;
  for (const engine::BatchChunkT<K>& c : chunks) {
    for (size_t i = 0; i < c.keys.size(); ++i, ++row) {
      if (c.keys[i] == engine::kEmptyKeyOf<K> || (!c.validity.empty() && c.validity[i] == 0)) {
        continue;
      }
      out.push_back({row, c.keys[i], c.row_base + static_cast<uint32_t>(i)});
    }
  }
  return out;
}

/// One expected join pair: left row ID, right value, and the source row whose
/// payload it carries (none: null payload, a left row without a match).
struct ExpectedPair {
  uint32_t left = 0;
  uint32_t right = engine::kEmptyKey;
  std::optional<uint64_t> row;
  friend bool operator==(const ExpectedPair&, const ExpectedPair&) = default;
};

/// Appends the pairs of join `kind` of a left row (ID `left`) whose key matches
/// `matches` (in right source-row order; empty: no match) to `out`: inner, every
/// match; left outer, every match or one pair without a match; left semi, the
/// first match; left anti, one pair without a match when there is none.
template <engine::KeyWord K>
void AppendPairs(JoinKind kind, uint32_t left, const std::vector<SourceRowOf<K>>& matches,
                 std::vector<ExpectedPair>& out) {
  const bool hit = !matches.empty();
  switch (kind) {
    case JoinKind::kInner:
    case JoinKind::kLeftOuter:
      for (const auto& m : matches) out.push_back({left, m.value, m.row});
      if (!hit && kind == JoinKind::kLeftOuter) {
        out.push_back({left, engine::kEmptyKey, std::nullopt});
      }
      break;
    case JoinKind::kLeftSemi:
      if (hit) out.push_back({left, matches[0].value, matches[0].row});
      break;
    case JoinKind::kLeftAnti:
      if (!hit) out.push_back({left, engine::kEmptyKey, std::nullopt});
      break;
  }
}

/// A plain nested-loop join of `left` (left row IDs `ids`) against the right
/// side's valid rows: for every left row in order, every right row with the
/// same key in right row order (kLowestRow: the first one only). Exact for
/// builds without overflow.
template <engine::KeyWord K>
std::vector<ExpectedPair> NestedLoopJoin(JoinKind kind, DuplicatePolicy policy,
                                         const std::vector<K>& left,
                                         const std::vector<uint32_t>& ids,
                                         const std::vector<SourceRowOf<K>>& right) {
  std::vector<ExpectedPair> out;
  std::vector<SourceRowOf<K>> matches;
  for (size_t i = 0; i < left.size(); ++i) {
    matches.clear();
    for (const auto& r : right) {
      if (r.key != left[i]) continue;
      matches.push_back(r);
      if (policy == DuplicatePolicy::kLowestRow) break;
    }
    AppendPairs(kind, ids[i], matches, out);
  }
  return out;
}

/// Every join kind, for suites that loop over them.
inline constexpr JoinKind kAllJoinKinds[] = {JoinKind::kInner, JoinKind::kLeftOuter,
                                             JoinKind::kLeftSemi, JoinKind::kLeftAnti};

}  // namespace gpujoin::testing
