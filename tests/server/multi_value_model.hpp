// A nested-loop reference model of multi-value indexes and join kinds
// for the server tests: the build's source rows (keys, generated values, one
// payload column), each key's group (every valid row of the key in source order
// for keep_all, the lowest row alone for lowest_row), and the pairs, found mask
// and payload rows a Lookup or a Join of each kind must answer
// (docs/api.md, "Join kinds"), in the wire's vocabulary. Which pairs each kind
// yields comes from the model the engine tests share
// (gpujoin/testing/join_kind_model.hpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gpujoin/common/operation_kinds.hpp"
#include "gpujoin/testing/join_kind_model.hpp"
#include "gpujoin/v1/gpujoin.pb.h"
#include "payload_model.hpp"

namespace gpujoin::server::testing {

/// The reserved key (a build row holding it is invalid, a query row missing).
inline constexpr uint32_t kReservedKey = 0xffffffffu;

/// A plain-mode build: value of source row r = first_value + r; one payload
/// column aligned with the rows.
struct MultiSource {
  std::vector<uint32_t> keys;
  uint32_t first_value = 0;
  ModelColumn payload{"p", v1::COLUMN_TYPE_INT64, {}};

  /// Every valid row of each key, in source order.
  std::map<uint32_t, std::vector<uint32_t>> Rows() const {
    std::map<uint32_t, std::vector<uint32_t>> rows;
    for (uint32_t r = 0; r < keys.size(); ++r) {
      if (keys[r] != kReservedKey) rows[keys[r]].push_back(r);
    }
    return rows;
  }
  /// The largest group of a keep_all build.
  uint64_t MaxGroupRows() const {
    uint64_t most = 0;
    for (const auto& [key, rows] : Rows()) most = std::max<uint64_t>(most, rows.size());
    return most;
  }
};

/// Keys with groups of every size that matters: `singles` keys of one row,
/// `smalls` keys of 2-8 rows, and one hot key (kHotKey) of `hot` rows, plus a
/// few reserved-key rows, shuffled so that each key's rows spread over the
/// source (and over chunks). Payload: the row's number as int64, null for
/// every seventh row.
inline constexpr uint32_t kHotKey = 7777;
inline MultiSource RandomMultiSource(std::mt19937_64& rng, uint32_t singles, uint32_t smalls,
                                     uint32_t hot, uint32_t first_value = 100) {
  MultiSource s;
  s.first_value = first_value;
  for (uint32_t k = 1; k <= singles; ++k) s.keys.push_back(k);
  for (uint32_t k = 0; k < smalls; ++k) {
    const uint32_t n = 2 + static_cast<uint32_t>(rng() % 7);
    for (uint32_t i = 0; i < n; ++i) s.keys.push_back(1000 + k);
  }
  for (uint32_t i = 0; i < hot; ++i) s.keys.push_back(kHotKey);
  for (int i = 0; i < 3; ++i) s.keys.push_back(kReservedKey);
  std::shuffle(s.keys.begin(), s.keys.end(), rng);
  for (uint32_t r = 0; r < s.keys.size(); ++r) {
    if (r % 7 == 3) {
      s.payload.cells.emplace_back();
    } else {
      s.payload.cells.push_back(Bytes<int64_t>(int64_t{r} * 10 + 1));
    }
  }
  return s;
}

/// Left keys for `s`: present keys of every group size (the hot key often),
/// absent keys and the reserved key.
inline std::vector<uint32_t> RandomLeftKeys(const MultiSource& s, size_t rows,
                                            std::mt19937_64& rng) {
  std::vector<uint32_t> keys(rows);
  for (uint32_t& k : keys) {
    const uint64_t r = rng() % 10;
    k = r < 5   ? s.keys[rng() % s.keys.size()]  // may be reserved too
        : r < 6 ? kHotKey
        : r < 7 ? kReservedKey
                : 500000 + static_cast<uint32_t>(rng() % 1000);  // absent
  }
  return keys;
}

/// The expected answer of one join batch: its pairs (right = value, or the
/// reserved key where the kind yields a left row without a match), the source
/// row each pair's payload comes from (kNoRow: null) and the found mask.
struct ModelPairs {
  std::vector<uint32_t> left, right, payload_rows;
  std::vector<uint8_t> found;
};

/// The engine's name of a wire join kind (JOIN_KIND_UNSPECIFIED is inner);
/// none for a value outside the enum.
inline std::optional<JoinKind> ModelKind(v1::JoinKind kind) {
  switch (kind) {
    case v1::JOIN_KIND_UNSPECIFIED:
    case v1::JOIN_KIND_INNER:
      return JoinKind::kInner;
    case v1::JOIN_KIND_LEFT_OUTER:
      return JoinKind::kLeftOuter;
    case v1::JOIN_KIND_LEFT_SEMI:
      return JoinKind::kLeftSemi;
    case v1::JOIN_KIND_LEFT_ANTI:
      return JoinKind::kLeftAnti;
    default:
      return std::nullopt;
  }
}

/// `keep_all`: the index keeps every row (else the lowest row of each key).
/// The pairs of each left row are those of the shared join-kind model
/// (gpujoin/testing/join_kind_model.hpp) over its group; a kind outside the
/// enum yields none.
inline ModelPairs ModelJoin(const MultiSource& s, bool keep_all, v1::JoinKind kind,
                            const std::vector<uint32_t>& left_keys,
                            const std::vector<uint32_t>& left_ids) {
  const auto groups = s.Rows();
  const std::optional<JoinKind> engine_kind = ModelKind(kind);
  ModelPairs m;
  std::vector<::gpujoin::testing::SourceRowOf<uint32_t>> matches;
  std::vector<::gpujoin::testing::ExpectedPair> pairs;
  for (size_t i = 0; i < left_keys.size(); ++i) {
    matches.clear();
    const auto it = left_keys[i] == kReservedKey ? groups.end() : groups.find(left_keys[i]);
    if (it != groups.end()) {
      for (uint32_t r : it->second) {
        matches.push_back({r, left_keys[i], s.first_value + r});
        if (!keep_all) break;
      }
    }
    m.found.push_back(matches.empty() ? 0 : 1);
    if (engine_kind) ::gpujoin::testing::AppendPairs(*engine_kind, left_ids[i], matches, pairs);
  }
  for (const auto& p : pairs) {
    m.left.push_back(p.left);
    m.right.push_back(p.right);
    m.payload_rows.push_back(p.row ? static_cast<uint32_t>(*p.row) : kNoRow);
  }
  return m;
}

/// The expected Lookup answer: the first match's value and payload row, found,
/// and the match counts (keep_all: the group's size; lowest_row: 1 or 0).
struct ModelLookup {
  std::vector<uint32_t> values, payload_rows, match_counts;
  std::vector<uint8_t> found;
};

inline ModelLookup ModelLookupOf(const MultiSource& s, bool keep_all,
                                 const std::vector<uint32_t>& keys) {
  const auto groups = s.Rows();
  ModelLookup m;
  for (uint32_t k : keys) {
    const auto it = k == kReservedKey ? groups.end() : groups.find(k);
    if (it == groups.end()) {
      m.values.push_back(kReservedKey);
      m.payload_rows.push_back(kNoRow);
      m.match_counts.push_back(0);
      m.found.push_back(0);
    } else {
      m.values.push_back(s.first_value + it->second.front());
      m.payload_rows.push_back(it->second.front());
      m.match_counts.push_back(keep_all ? static_cast<uint32_t>(it->second.size()) : 1);
      m.found.push_back(1);
    }
  }
  return m;
}

/// "inner", "left_outer", ... for test messages.
inline std::string KindName(v1::JoinKind kind) { return v1::JoinKind_Name(kind); }

/// Every join kind, explicit.
inline constexpr v1::JoinKind kEveryKind[] = {v1::JOIN_KIND_INNER, v1::JOIN_KIND_LEFT_OUTER,
                                              v1::JOIN_KIND_LEFT_SEMI, v1::JOIN_KIND_LEFT_ANTI};

}  // namespace gpujoin::server::testing
