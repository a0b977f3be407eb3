// The resident dictionaries of an index's string and binary payload columns
// (engine/dictionary.hpp, docs/api.md "Dictionaries"): made by a build from
// its staged columns, their codes columns stored as extra payload columns of
// the engine index after the declared ones, and kept up by Mutate.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "gpujoin/engine/column.hpp"
#include "gpujoin/engine/dictionary.hpp"
#include "gpujoin/engine/hash_index.hpp"

namespace gpujoin::server {

/// A build's dictionaries and the codes columns that go into its build node
/// after the declared payload columns.
struct DictionaryBuild {
  std::shared_ptr<std::vector<engine::PayloadDictionary>> dictionaries;
  /// Aligned with *dictionaries.
  std::vector<engine::CodesColumn> codes;
  /// Host bytes of the dictionaries' values.
  uint64_t bytes = 0;
  std::vector<engine::ColumnView> Views() const;
  std::vector<engine::PayloadShape> Shapes() const;
};

/// A dictionary for every kString / kBinary column of `payload` (a build's
/// declared columns) that has at most `max_values` distinct values (none
/// when `max_values` is 0), while all of them together hold at most
/// engine::kMaxDictionaryValueBytes of values. Codes column k is payload column
/// payload.size() + k of the built index. Host allocation failure throws
/// std::bad_alloc.
DictionaryBuild MakeDictionaries(std::span<const engine::ColumnView> payload, uint64_t max_values);

/// The codes columns of a Mutate batch's upsert rows, coded against the
/// index's dictionaries without changing them: values new to a dictionary get
/// the next codes, remembered here until Commit adds them (under the index's
/// write latch, so that readers never see a dictionary change). A dictionary
/// that would pass `max_values` (or the index's dictionaries
/// engine::kMaxDictionaryValueBytes) is retired at Commit (its codes from this
/// batch on are null; plans read the strings until the next build).
class DictionaryAppend {
 public:
  DictionaryAppend(const engine::HashIndex& index, std::span<const engine::ColumnView> payload,
                   uint64_t max_values);
  /// The codes columns to append to the batch's payload, in the index's order.
  std::vector<engine::ColumnView> Views() const;
  /// Host bytes Commit adds to the dictionaries (StringDictionary::bytes of
  /// the new values), for the memory budget.
  uint64_t GrowthBytes() const;
  /// Adds the new values to `index`'s dictionaries (the same ones as the
  /// constructor's index had: a rebuilt index shares them) and retires those
  /// that passed the limit.
  void Commit(engine::HashIndex& index) const;

 private:
  struct Column {
    engine::CodesColumn codes;
    std::vector<std::string> added;  // new values, in code order
    bool retire = false;
  };
  std::vector<Column> columns_;
};

}  // namespace gpujoin::server
