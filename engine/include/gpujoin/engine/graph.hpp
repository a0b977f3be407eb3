// The command graph: every engine request is a small graph of nodes with declared
// read and write buffers. The graph is validated once, for every backend, before
// anything runs (lengths, capacities, aliasing); backends then lower it (CUDA:
// uploads, kernels and downloads on one stream; CPU: host implementations).
//
// All buffers named by nodes are host memory owned by the caller and borrowed for
// the duration of Backend::Run. Optional outputs are requested by passing a
// non-empty span (or non-null pointer) and skipped otherwise.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "gpujoin/engine/column.hpp"
#include "gpujoin/engine/hash_index.hpp"
#include "gpujoin/engine/hashing.hpp"
#include "gpujoin/engine/key_columns.hpp"
#include "gpujoin/engine/types.hpp"

namespace gpujoin::engine {

// The key-carrying nodes are templates on the index's key K: a key word
// (uint32_t or uint64_t) or ColumnKey (a key schema: key_columns.hpp), which
// must match the index's key type (CommandGraph::Validate). The plain names are
// the uint32 nodes, the ...64 names the uint64 ones, the ...Columns names the
// key-schema ones. Values, row IDs and join outputs are uint32 for all. A
// key-schema row whose key has a null in any column is invalid at build and
// missing at query, as the reserved key word is.

/// Builds an index from one logical sequence of keys, with explicit values or
/// generated values `first_value + global row`. Keys and values may be chunked
/// with different boundaries. Duplicate keys keep the value of the lowest global
/// row. An empty build clears the table and its statistics.
template <IndexKey K>
struct BuildIndexNodeT {
  HashIndex* index = nullptr;        ///< written: rebuilt from scratch
  KeyChunks<K> keys;                 ///< read
  std::optional<ChunkedU32> values;  ///< read; when set, total rows must equal the keys'
  uint32_t first_value = 0;          ///< generated values when `values` is unset (wraps mod 2^32)
  BuildStatistics* statistics = nullptr;  ///< optional host output
  /// Read: payload columns stored beside the table, each with the keys' total rows.
  /// The index keeps, for every retained key, the payload row of its duplicate
  /// winner (docs/engine.md, "Payload"); a build without payload drops any earlier payload.
  std::vector<ColumnView> payload;
};

/// One chunk of a batch build: its keys, the row ID of its first row and an
/// optional validity mask (one uint32 per row; nonzero = valid). A row's value is
/// `row_base + position in chunk`. Masked-out rows are counted invalid.
template <IndexKey K>
struct BatchChunkT {
  KeyChunk<K> keys;
  uint32_t row_base = 0;
  std::span<const uint32_t> validity;  ///< empty = all rows valid; else same length as keys
};

/// Builds an index from ordered batch chunks. The duplicate winner is the earliest
/// row across chunks (chunk order, then position), whatever the row bases.
template <IndexKey K>
struct BuildBatchIndexNodeT {
  HashIndex* index = nullptr;  ///< written: rebuilt from scratch
  std::vector<BatchChunkT<K>> chunks;
  BuildStatistics* statistics = nullptr;  ///< optional host output
  /// Read: payload columns aligned with the chunks' rows in order (every row,
  /// masked-out ones included), as in BuildIndexNodeT.
  std::vector<ColumnView> payload;
};

/// Aligned left join: for every query row, the matched value or kEmptyKey (the
/// uint32 missing value, for either key type).
template <IndexKey K>
struct LookupNodeT {
  const HashIndex* index = nullptr;
  KeyChunks<K> keys;                      ///< read
  std::span<uint32_t> values;             ///< written, required: one per query row
  std::span<uint8_t> found;               ///< optional: 1 found / 0 missing per query row
  std::span<uint32_t> probes;             ///< optional: slots examined per query row
  QueryStatistics* statistics = nullptr;  ///< optional host output
  uint32_t max_probe_count = 0;  ///< 0 = the index's bound; else at most the index's capacity
  /// Payload columns gathered per query row (null where missing). On a
  /// kKeepAll index: the payload of the key's first (lowest-row) match.
  std::vector<GatherOutput> gather;
  /// Optional, one per query row: the key's matches (kLowestRow: 1 found / 0
  /// missing; kKeepAll: the rows of its group, 0 when missing).
  std::span<uint32_t> match_counts;
};

// Which left rows a join returns and how (JoinNodeT::kind;
// gpujoin/common/operation_kinds.hpp). Every kind writes [left row, right row]
// pairs in left source order, then right source row order; the required count,
// capacity truncation (the stable prefix) and overflow rules are the same for
// all. A row without a match pairs with kEmptyKey (outer, anti).
using ::gpujoin::JoinKind;
using ::gpujoin::JoinKindName;

/// Result block of one join batch.
struct JoinResult {
  uint64_t count = 0;     ///< pairs before truncation (the required capacity), exact
  bool overflow = false;  ///< count > capacity, or the index build had overflow rows
  QueryStatistics statistics;
};

/// One left batch of a join.
template <IndexKey K>
struct JoinBatchT {
  KeyChunks<K> keys;                    ///< read: left keys
  std::span<const uint32_t> left_rows;  ///< optional explicit left row IDs, aligned with keys
  uint32_t first_left_row = 0;  ///< left row ID = first_left_row + row when left_rows is empty
  std::span<uint32_t> out_left_rows;   ///< written; its size is the pair capacity
  std::span<uint32_t> out_right_rows;  ///< written; same size as out_left_rows
  JoinResult* result = nullptr;        ///< required host output
  std::span<uint8_t> found;            ///< optional aligned found mask
  std::span<uint32_t> probes;          ///< optional aligned probe counts
  /// Payload columns gathered per pair (out_left_rows.size() positions each).
  std::vector<GatherOutput> gather;
};

/// Join of one or more left batches against an index: each batch gets its own
/// [left row, right row] pairs in left source order (stable), then right source
/// order (a kKeepAll index's group order), truncated to its capacity (the stable
/// prefix), with its exact required count and overflow flag. On a kKeepAll index
/// a left row yields one pair per row of its key's group.
template <IndexKey K>
struct JoinNodeT {
  const HashIndex* index = nullptr;
  std::vector<JoinBatchT<K>> batches;
  uint32_t max_probe_count = 0;  ///< 0 = the index's bound
  JoinKind kind = JoinKind::kInner;
};

using BuildIndexNode = BuildIndexNodeT<uint32_t>;
using BuildIndexNode64 = BuildIndexNodeT<uint64_t>;
using BatchChunk = BatchChunkT<uint32_t>;
using BatchChunk64 = BatchChunkT<uint64_t>;
using BuildBatchIndexNode = BuildBatchIndexNodeT<uint32_t>;
using BuildBatchIndexNode64 = BuildBatchIndexNodeT<uint64_t>;
using LookupNode = LookupNodeT<uint32_t>;
using LookupNode64 = LookupNodeT<uint64_t>;
using JoinBatch = JoinBatchT<uint32_t>;
using JoinBatch64 = JoinBatchT<uint64_t>;
using JoinNode = JoinNodeT<uint32_t>;
using JoinNode64 = JoinNodeT<uint64_t>;
using BuildIndexNodeColumns = BuildIndexNodeT<ColumnKey>;
using BatchChunkColumns = BatchChunkT<ColumnKey>;
using BuildBatchIndexNodeColumns = BuildBatchIndexNodeT<ColumnKey>;
using LookupNodeColumns = LookupNodeT<ColumnKey>;
using JoinBatchColumns = JoinBatchT<ColumnKey>;
using JoinNodeColumns = JoinNodeT<ColumnKey>;

/// The value column of an aggregation (AggregateNode::values): float32, float64,
/// int32, int64, uint32 or uint64 values, one per key, chunked independently of
/// the keys. std::monostate = none (count).
using AggregateValues =
    std::variant<std::monostate, Chunked<float>, Chunked<double>, Chunked<int32_t>,
                 Chunked<int64_t>, Chunked<uint32_t>, Chunked<uint64_t>>;

/// Grouped aggregation by dense uint32 group key (docs/engine.md, "Grouped
/// aggregation"). Keys, values and mask are one logical sequence each, chunked
/// independently. Group key k contributes to output row k; keys >= groups are
/// ignored; rows with mask 0 are ignored; non-finite float values are ignored.
///
/// `output` holds one 64-bit word per group, of the type AggregateResultType(op,
/// value type) names (aggregation.hpp reads and writes them):
///  - count: the uint32 count (wrapping mod 2^32);
///  - float32 and float64 follow one rule set, accumulating in their own width:
///    empty sum = +0, empty min/max/mean = NaN, -0 orders below +0; sum and mean
///    not deterministic in order on parallel backends. A float32 result holds its
///    bits in the word's low 32 bits;
///  - integer sums are exact: int32/int64 into int64, uint32/uint64 into uint64,
///    whatever the order; a group whose exact sum does not fit has `overflow` 1
///    and holds the low 64 bits of the exact sum (mean: NaN). Min/max keep the
///    value (int32 sign-extended, uint32 zero-extended); an empty integer min/max
///    group holds 0 (contributing_rows tells it from a real 0). Mean is a
///    float64: double(exact sum) / double(count).
struct AggregateNode {
  AggregateOp op = AggregateOp::kCount;
  ChunkedU32 keys;                 ///< read
  AggregateValues values;          ///< read; required for sum/min/max/mean, unset for count
  std::optional<ChunkedU32> mask;  ///< read; when set, same total rows as keys
  std::span<uint64_t> output;      ///< written; its size is the group count
  /// Optional, one per group: rows that contributed (key in range, mask nonzero and,
  /// for value ops, a finite value). Lets callers merge partial results. Exact:
  /// one run has at most 2^32 - 1 rows.
  std::span<uint32_t> contributing_rows;
  /// Written, required for integer sum and mean (AggregateReportsOverflow): 1 where
  /// the group's exact sum does not fit its 64-bit type, else 0; one per group.
  std::span<uint8_t> overflow;
};

using Node =
    std::variant<BuildIndexNode, BuildIndexNode64, BuildBatchIndexNode, BuildBatchIndexNode64,
                 LookupNode, LookupNode64, JoinNode, JoinNode64, AggregateNode, HashNode,
                 BuildIndexNodeColumns, BuildBatchIndexNodeColumns, LookupNodeColumns,
                 JoinNodeColumns>;

/// A list of nodes executed in order. Validation checks every node and that no
/// written range overlaps another written range or any read range of the graph.
class CommandGraph {
 public:
  /// Appends a node; returns its position.
  size_t Add(Node node) {
    nodes_.push_back(std::move(node));
    return nodes_.size() - 1;
  }
  const std::vector<Node>& nodes() const { return nodes_; }
  bool empty() const { return nodes_.empty(); }

  /// OK, or INVALID_ARGUMENT naming the node, the field and the sizes involved
  /// (also when a node's key word is not its index's key type). Backends call
  /// this at the start of Run; callers may call it earlier.
  absl::Status Validate() const;

 private:
  std::vector<Node> nodes_;
};

}  // namespace gpujoin::engine
