// Helpers shared by the fuzz targets of the server (fuzz/*.cpp; docs/operations.md,
// "Fuzzing"): Operations over a small one-thread CPU backend, a reference model
// of a built index read from its table, and the query targets' fixture.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "fuzz_check.hpp"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/server/config.hpp"
#include "key_model.hpp"
#include "observe/metrics.hpp"
#include "ops/operations.hpp"
#include "state/index_registry.hpp"
#include "state/memory_budget.hpp"

namespace gpujoin::fuzz {

/// Operations over a CPU backend with one thread (the fuzz input runs on the
/// calling thread: deterministic and without hand-offs), a registry, a memory
/// budget of `budget_bytes`, a staging budget of `config.max_staged_bytes` (0: the
/// same bytes) and metrics. Reset() replaces the registry and budgets, so a target that
/// installs indexes per input keeps no state (and no memory) from earlier inputs.
class Harness {
 public:
  Harness(uint64_t budget_bytes, server::ServerConfig config);

  server::Operations& ops() { return *ops_; }
  engine::Backend& backend() { return *backend_; }
  server::IndexRegistry& registry() { return *registry_; }
  server::MemoryBudget& budget() { return *budget_; }
  /// The host staging budget of build input (--max-staged-bytes).
  server::MemoryBudget& staging() { return *staging_; }
  const server::ServerConfig& config() const { return config_; }

  /// Drops every live index (removing its metric series), then starts over with
  /// an empty registry and an unused budget, without a --data-dir store.
  void Reset();
  /// Gives the operations `snapshots` as their --data-dir store (made over this
  /// harness's backend and budget after Reset); null: none.
  void AttachSnapshots(server::SnapshotStore* snapshots);

  /// Builds and installs index `name` through BuildSession from one chunk of
  /// `keys` (uint32 or uint64: the index's key type) with generated values
  /// first_value + row (`keep_all`: a multi-value index); aborts on failure
  /// (setup).
  template <typename Key>
  std::shared_ptr<const server::IndexVersion> Build(const std::string& name, uint32_t capacity,
                                                    uint32_t max_probe_count, uint32_t first_value,
                                                    const std::vector<Key>& keys,
                                                    bool keep_all = false);

  /// Builds and installs key-schema index `name` through BuildSession from
  /// `rows` (nullopt: a null in every key column), sent in two chunks, with
  /// generated values first_value + row; aborts on failure (setup).
  std::shared_ptr<const server::IndexVersion> BuildColumns(const std::string& name,
                                                           uint32_t capacity, uint32_t first_value,
                                                           const KeySchemaModel& schema,
                                                           const KeyRowList& rows, bool keep_all);

 private:
  uint64_t budget_bytes_;
  server::ServerConfig config_;
  std::unique_ptr<engine::Backend> backend_;
  engine::BackendInfo backend_info_;
  server::Metrics metrics_;
  std::unique_ptr<server::IndexRegistry> registry_;
  std::unique_ptr<server::MemoryBudget> budget_;
  std::unique_ptr<server::MemoryBudget> staging_;
  std::unique_ptr<server::Operations> ops_;
  void MakeOps(server::SnapshotStore* snapshots);
};

/// Whether `name` is an index name the service accepts: [A-Za-z0-9_.-]{1,128},
/// neither "." nor ".." (docs/api.md; the reference for server/src/wire/names.cpp).
bool ValidIndexName(std::string_view name);

/// Whether `name` is a payload column name the service accepts:
/// [A-Za-z0-9_.-]{1,128} ("." and ".." included; docs/api.md).
bool ValidColumnName(std::string_view name);

/// What a built index holds, read from its table (HashIndex::Snapshot or
/// Snapshot64), and so what every lookup and join against it must return. Keys
/// of either word are held as uint64_t.
struct ReferenceIndex {
  struct Entry {
    uint32_t value = 0;
    uint32_t probes = 0;  ///< slots a query for the key examines: displacement + 1
  };
  engine::KeyType key_type = engine::KeyType::kUint32;
  uint32_t capacity = 0;
  uint32_t probe_bound = 0;  ///< the index's own bound
  bool build_overflowed = false;
  std::unordered_map<uint64_t, Entry> entries;
  std::vector<uint64_t> slots;  ///< the table's keys by slot (the empty key = empty)
  /// A keep_all index (no overflow): each key's values in source order, the
  /// first its entry's value. Empty for lowest_row, where a key matches once.
  std::unordered_map<uint64_t, std::vector<uint32_t>> groups;

  /// The reserved (empty) key of the index's word.
  uint64_t empty_key() const;
  /// The entry a query with `max_probe_count` (0 = the index's bound) finds, or
  /// nullptr when it reports the key missing.
  const Entry* Find(uint64_t key, uint64_t max_probe_count) const;
  /// Slots that query examines, by the documented rule: it stops at its key, at
  /// an empty slot or at a resident that comes after it, else after the bound;
  /// the reserved key examines none.
  uint32_t Probes(uint64_t key, uint64_t max_probe_count) const;
  /// The values a found key `key` (entry `e`) matches, in source order: its
  /// group on a keep_all index, else e's value alone.
  std::vector<uint32_t> Matches(uint64_t key, const Entry& e) const;
};

/// Reads `index`'s table. Aborts when the table breaks the layout every backend
/// keeps (docs/engine.md "Slots and probing"): a key further from its home than
/// the probe bound, or a run of occupied slots out of Robin Hood order.
ReferenceIndex ReadReference(const engine::HashIndex& index);

/// The keys of the query fixture's uint32 index "x" (also used by make_corpus):
/// 0..31, 1000..1007, a duplicate of 5 and the largest non-reserved keys.
std::vector<uint32_t> QueryFixtureKeys();
/// The keys of its uint64 index "x64": small keys, keys that differ only in their
/// high 32 bits, 0xffffffff (an ordinary key at this width), the largest
/// non-reserved key and a duplicate.
std::vector<uint64_t> QueryFixtureKeys64();

/// The keys of its keep_all index "xm": QueryFixtureKeys() and again some of
/// them, so that groups of 1 to 4 rows spread over the source.
std::vector<uint32_t> QueryFixtureKeysMulti();

/// A key-schema index of the query fixture: its name, schema, build rows and
/// shape (generated values first_value + row).
struct FixtureKeyIndex {
  std::string name;
  KeySchemaModel schema;
  KeyRowList rows;
  uint32_t capacity = 0;
  uint32_t first_value = 0;
  bool keep_all = false;
};

/// The query fixture's key-schema indexes (also used by make_corpus): "s" (sku
/// STRING: the empty string, case, multi-byte and NUL-holding strings, a
/// duplicate and a null row), "c" (tenant INT64, name STRING, n INT32: keys that
/// differ in one column only) and "cm" (keep_all; u UINT32, b BINARY, w UINT64:
/// all-ones words and bytes that are not UTF-8, groups of up to 4 rows).
std::vector<FixtureKeyIndex> QueryFixtureKeyIndexes();

/// Operations with four installed indexes, for the query targets (fuzz_lookup,
/// fuzz_join): "x" (uint32, 64 slots, QueryFixtureKeys(), values 100 + row, no
/// overflow), "tight" (uint32, 16 slots, probe bound 2, 16 keys, values 7 + row, so
/// that some rows overflowed), "x64" (uint64, 64 slots, QueryFixtureKeys64(),
/// values 500 + row) and "xm" (uint32 keep_all, 64 slots,
/// QueryFixtureKeysMulti(), values 300 + row, no overflow), with
/// max_message_bytes = 8 KiB so that the response-size check is reachable with
/// small inputs; and the key-schema indexes of QueryFixtureKeyIndexes(), each
/// with its ColumnReference.
class QueryFixture {
 public:
  QueryFixture();

  Harness& harness() { return harness_; }
  server::Operations& ops() { return harness_.ops(); }
  /// The installed version of `name` and its reference, or {nullptr, nullptr}.
  std::pair<const server::IndexVersion*, const ReferenceIndex*> Find(const std::string& name) const;
  /// The installed version of key-schema index `name` and its model, or
  /// {nullptr, nullptr}.
  std::pair<const server::IndexVersion*, const ColumnReference*> FindColumns(
      const std::string& name) const;
  /// The largest response a request may need (Operations' response-size check).
  uint64_t response_limit() const;
  /// --max-message-bytes of the fixture's Operations.
  uint64_t max_message_bytes() const { return harness_.config().max_message_bytes; }

 private:
  Harness harness_;
  std::shared_ptr<const server::IndexVersion> x_, tight_, x64_, xm_;
  ReferenceIndex x_ref_, tight_ref_, x64_ref_, xm_ref_;
  std::map<std::string, std::pair<std::shared_ptr<const server::IndexVersion>, ColumnReference>>
      columns_;
};

}  // namespace gpujoin::fuzz
