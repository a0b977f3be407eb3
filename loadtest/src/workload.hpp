// Synthetic workloads of the load tester: the key -> value mapping of an index
// the load tester builds itself, pools of request batches generated from it with
// a chosen hit ratio, and the exact answers those batches must get, so that a
// sample of the server's responses can be checked row by row.
//
// Key scheme: index row i (0 <= i < build_keys) has key Mix(i, seed) and value
// Mix(i, seed ^ kValueSalt). Mix is a bijection of uint32, so every j >= build_keys
// gives a key that is certainly not in the index: a miss is drawn as Mix(j, seed)
// with build_keys <= j < keyspace. Each batch has exactly round(hit_ratio * rows)
// hits at shuffled positions, so a join's pair count is known in advance. With
// uint64 keys (--key-type u64) the key of row i is Mix64(i, seed), a bijection of
// uint64, so keys spread over the whole 64-bit range by the same scheme.
//
// String and composite keys (--key-type str16, str32, uuid, pair; an index
// with a key schema) follow the same scheme through KeyOf: key index i maps
// to a key no other index maps to (str16: the 16 hex digits of Mix64(i); str32:
// those and 16 more; uuid: version-4 UUID text whose first 16 free hex digits
// are Mix64(i); pair: two uint32 columns that together spell Mix(i)), so hits,
// misses and answers are known exactly as for integer keys.
//
// Mutations (--rpc mutate, --mutate-streams): a Mutate batch upserts keys
// drawn as a lookup's are (hits at the hit ratio, misses beside them, never
// the reserved key), each with the value the mapping gives its key index
// (Mix(i, ...)): a hit re-assigns the value it has, a miss inserts the value
// a lookup of it then finds. So while mutations run, a lookup's hit keeps its
// answer and a miss is either missing or found with its mapped value.
//
// Payload (--payload, lookups of an index the load tester builds): payload.hpp.
//
// Multiplicity (--multiplicity M, a keep_all index): the index has build_keys * M
// rows; row r has the key of key index r % build_keys and value Mix(r, ...), so
// key i's rows are i, i + build_keys, ..., in source order and in different
// chunks, and a join's pairs for a hit are known: M per left row (inner), in
// right-row order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpujoin/client/client.hpp"
#include "keys.hpp"

namespace gpujoin::loadtest {

/// Which RPC the load tester drives.
enum class Rpc { kLookup, kJoin, kAggregate, kMutate };

/// "lookup", "join", "aggregate", "mutate".
const char* RpcName(Rpc rpc);

/// Parameters that define the generated data.
struct WorkloadSpec {
  Rpc rpc = Rpc::kLookup;
  /// Rows of the index the load tester builds (key/value mapping known). 0 = the
  /// index exists already and its mapping is unknown: keys are drawn uniformly from
  /// [0, keyspace) and only the structure of answers can be checked.
  uint64_t build_keys = 0;
  /// Fraction of query rows whose key is in the index (known mapping only), in [0, 1].
  double hit_ratio = 0.9;
  /// Upper bound (exclusive) of the key draw: misses come from [build_keys, keyspace).
  uint64_t keyspace = uint64_t{1} << 32;
  uint32_t seed = 1;
  /// Keys of the index and the queries (lookup, join).
  KeyKind key_kind = KeyKind::kUint32;
  /// Aggregate: group count, and the operation.
  uint32_t groups = 1024;
  client::AggregateOp aggregate_op = client::AggregateOp::kSum;
  /// Rows per key of the built index (>= 1; > 1 needs build_keys).
  uint32_t multiplicity = 1;
  /// The index keeps every row of a key (DuplicatePolicy::kKeepAll): always
  /// with --multiplicity, and for an existing keep_all index. Lookups then ask
  /// for match counts.
  bool keep_all = false;
  /// Join: the kind of every request.
  client::JoinKind join_kind = client::JoinKind::kInner;
  /// Mutate: the index takes explicit values (the load tester's builds do); a
  /// row-ID index takes none.
  bool explicit_values = true;
  /// Mutate: the payload columns of an existing index (upserts send nulls).
  std::vector<client::PayloadColumnSpec> payload;
  /// Lookup (--payload): the built index has the two payload columns above and
  /// every lookup selects them.
  bool select_payload = false;
};

/// Rows of the index the load tester builds: build_keys * multiplicity.
uint64_t BuildRows(const WorkloadSpec& spec);

/// INVALID_ARGUMENT naming the option when the spec cannot generate batches.
absl::Status ValidateWorkloadSpec(const WorkloadSpec& spec);

/// The index the load tester builds: keys and explicit values, row r has the key
/// of key index r % build_keys (Mix, Mix64 for uint64 keys, KeyColumnData's
/// scheme for key columns) and value Mix(r, ...).
struct BuildData {
  std::vector<uint32_t> keys;    ///< uint32 workloads
  std::vector<uint64_t> keys64;  ///< uint64 workloads
  KeyColumnData key_columns;     ///< string and composite workloads
  std::vector<uint32_t> values;
  /// --payload: PayloadColumnsOf(values).
  std::vector<client::Column> payload;

  /// The keys as the client sends them.
  client::Keys Keys() const {
    if (!key_columns.empty()) return key_columns.keys();
    return keys64.empty() ? client::Keys(keys) : client::Keys(keys64);
  }
};

/// Generates the build columns of `spec` (BuildRows(spec) rows).
BuildData MakeBuildData(const WorkloadSpec& spec);

/// One pre-generated request batch and, when the mapping is known, its answer.
struct PoolBatch {
  std::vector<uint32_t> keys;    ///< uint32 query keys (also the aggregate's group keys)
  std::vector<uint64_t> keys64;  ///< uint64 query keys (lookup, join with uint64 keys)
  KeyColumnData key_columns;     ///< string and composite query keys (lookup, join)
  /// Lookup: expected value per row (kMissing where missing); known mapping only.
  std::vector<uint32_t> expected_values;
  /// Lookup: expected found flag per row (1/0); known mapping only.
  std::vector<uint8_t> expected_found;
  /// Join: expected pairs of the spec's join kind (left row = position in the
  /// batch) in left order, then right-row order; kMissing for the right row of
  /// an unmatched left outer or anti pair. Their number is the exact count.
  std::vector<uint32_t> expected_left;
  std::vector<uint32_t> expected_right;
  /// Rows whose key is in the index (known mapping); the lookup's found count.
  uint64_t hits = 0;
  /// Known mapping: the value the mapping gives each row's key index (a hit's
  /// expected value; for a miss the value a Mutate upsert of it inserts).
  /// Mutate batches of an unknown mapping: the values they upsert.
  std::vector<uint32_t> mapped_values;
  /// --payload: the bytes of the answer's payload columns as a server packs
  /// them (the Redis row counts its answers with them).
  uint64_t payload_bytes = 0;
  /// Mutate: distinct keys of the batch, and how many of them are hits.
  uint64_t distinct_keys = 0;
  uint64_t distinct_hits = 0;
  /// Aggregate: float values (small integers, so sums are exact in any order),
  /// and the expected per-group results of this batch.
  std::vector<float> agg_values;
  std::vector<uint32_t> expected_counts;  ///< rows per group (count, or contributing rows)
  std::vector<float> expected_agg;        ///< sum/min/max/mean per group (not for count)

  /// Rows of the batch.
  size_t rows() const { return keys.size() + keys64.size() + key_columns.rows(); }
  /// The query keys as the client sends them.
  client::Keys QueryKeys() const {
    if (!key_columns.empty()) return key_columns.keys();
    return keys64.empty() ? client::Keys(keys) : client::Keys(keys64);
  }
  /// Key of row r as text (for messages).
  std::string KeyText(size_t r) const;
};

/// A read-only set of batches shared by all streams of one setting.
struct BatchPool {
  size_t batch_rows = 0;
  bool known_mapping = false;
  uint32_t multiplicity = 1;  ///< rows per key of the index (known mapping)
  bool keep_all = false;      ///< the index keeps every row of a key
  client::JoinKind join_kind = client::JoinKind::kInner;
  /// Lookups: Mutate streams run meanwhile, so a miss may be found (with its
  /// mapped value) and the found count is at least the hits.
  bool mutated = false;
  /// Mutate: send values (WorkloadSpec::explicit_values) and these payload
  /// columns of batch_rows nulls each.
  bool explicit_values = true;
  std::vector<client::Column> null_payload;
  /// Lookups select the two --payload columns.
  bool select_payload = false;
  std::vector<PoolBatch> batches;

  /// Request payload bytes of one batch (KeyWireBytes per key, plus values for
  /// aggregate and mutate, and mutate's payload columns).
  uint64_t RequestBytes(const WorkloadSpec& spec) const;
};

/// Chooses how many distinct batches to pre-generate for `batch_rows` rows:
/// enough that consecutive requests differ, bounded to about `budget_bytes`,
/// with up to `pairs_per_row` expected join pairs per row and keys of
/// `key_bytes` bytes (KeyWireBytes).
size_t PoolSizeFor(size_t batch_rows, size_t budget_bytes = size_t{96} << 20,
                   uint32_t pairs_per_row = 1, uint32_t key_bytes = 4);

/// Generates `count` batches of `batch_rows` rows with the expected answers
/// (Mutate: the upserts, their distinct counts, values and null payload).
BatchPool MakeBatchPool(const WorkloadSpec& spec, size_t batch_rows, size_t count);

/// Checks a Lookup answer to `batch`. Every answer: sizes and statistics (and the
/// hit count when the mapping is known: at least it when `pool.mutated`), O(1).
/// With `full`: every row, against the expected values and found flags (known
/// mapping) or for structure (found flags 0/1, missing rows carry 0xffffffff,
/// statistics match the mask); with `pool.mutated` a miss may be found with its
/// mapped value. With `pool.select_payload` the two payload columns, and with
/// `full` every payload row against the value found (null where missing). On a keep_all index the answer must carry match counts: the
/// multiplicity for a hit, 0 for a miss (unknown mapping: at least 1 for a hit).
/// Returns a description of the first difference, or "" when the answer is right.
std::string CheckLookup(const BatchPool& pool, const PoolBatch& batch,
                        const client::LookupResult& result, bool full);

/// Checks a Join answer (one left batch, left rows numbered from 0, the pool's
/// join kind): counts, overflow and statistics always; with `full` every pair
/// (expected pairs with a known mapping, else left rows in range and
/// increasing: strictly, unless a keep_all index repeats them in inner and
/// left outer joins; anti pairs without a right row).
std::string CheckJoin(const BatchPool& pool, const PoolBatch& batch,
                      const client::JoinResult& result, bool full);

/// Checks an Aggregate answer (per-batch results, not accumulate_only).
std::string CheckAggregate(const WorkloadSpec& spec, const BatchPool& pool, const PoolBatch& batch,
                           const client::AggregateResult& result, bool full);

}  // namespace gpujoin::loadtest
