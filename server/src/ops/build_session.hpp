// BuildSession: the messages of one BuildIndex call, checked and staged as they
// arrive (against the memory budget and the host staging budget), then one engine
// build and the atomic install of the new version. Called by the build reactor
// (rpc/build_reactor.cpp): Add on the reactor, Finish on the executor.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/v1/gpujoin.pb.h"
#include "state/index_registry.hpp"
#include "state/memory_budget.hpp"
#include "state/payload_dictionaries.hpp"
#include "wire/column_codec.hpp"
#include "wire/key_columns_wire.hpp"
#include "wire/key_staging.hpp"
#include "wire/payload_staging.hpp"

namespace gpujoin::server {

class Operations;

/// Accumulates the messages of one BuildIndex call and runs the build.
class BuildSession {
 public:
  explicit BuildSession(Operations* ops) : ops_(ops) {}

  /// Takes the next message: the spec first, then chunks. Validates it (names and
  /// sizes, the payload declaration and every payload chunk: PayloadStaging), and
  /// for a spec whose capacity is known reserves the budget already (the table
  /// and its fixed-width payload; with expected_rows also the build's expected
  /// transient memory), so oversized or create-only conflicts fail before any
  /// data is sent. Each chunk is counted from its arrival: its bytes (the message
  /// without its payload, decoded copies, and the growth of the staged payload
  /// columns its payload is copied into) against --max-build-staged-bytes and the
  /// host staging budget (--max-staged-bytes), and the reservation in the memory
  /// budget grows to the table and payload for the rows so far (an auto-sized
  /// build is sized from them), the transient memory of a build of those rows,
  /// and the staged bytes; RESOURCE_EXHAUSTED at the first chunk that does not fit.
  absl::Status Add(v1::BuildIndexRequest&& message);

  /// Builds the index from everything added and installs it atomically under its
  /// name (table and payload together). Every payload column must have as many
  /// rows as the keys (INVALID_ARGUMENT naming the column otherwise), and
  /// spec.max_probe_count must fit the final capacity (for a table sized from the
  /// rows sent it is known only now; INVALID_ARGUMENT naming spec.max_probe_count
  /// and that capacity, nothing installed). Before the
  /// build the reservation grows to the table, the payload (Backend::PayloadBytes)
  /// and the build's transient memory (Backend::BuildTransientBytes, payload
  /// included; RESOURCE_EXHAUSTED naming needed, used and budget bytes when that
  /// does not fit), and shrinks to what the index holds once the build is done. When `cancelled` is
  /// true after the build, nothing is installed (CANCELLED). The old version, if any, stays live on
  /// every error.
  absl::StatusOr<std::shared_ptr<const IndexVersion>> Finish(const std::atomic<bool>& cancelled);

  /// As above; `cancelled()` is asked once, after the engine build and right before
  /// the install, and may block briefly (the reactor uses it to let a cancellation
  /// that races the end of input arrive).
  absl::StatusOr<std::shared_ptr<const IndexVersion>> Finish(
      const std::function<bool()>& cancelled);

  /// Gives back everything the session holds (staged input, its reservations) once
  /// the build has failed, so that a refused build frees its memory when its error
  /// is sent rather than when gRPC is done with the call.
  void Release();

  /// The spec's name once a valid spec was added ("" before).
  const std::string& name() const { return name_; }
  uint64_t rows() const { return key_rows_; }
  /// A row-ID index's first row ID for Mutate's upserts: past the build's
  /// generated values (first_value + rows; batch mode: past every chunk's
  /// last row ID). 0 for explicit values.
  uint64_t NextRowId() const;
  /// IndexSpec.wait_durable: answer once the installed version is in its snapshot.
  bool wait_durable() const { return have_spec_ && spec_.wait_durable(); }
  /// Bytes of build input held (chunk messages and decoded copies), as counted
  /// against the budgets; 0 again once Finish has installed the index.
  uint64_t staged_bytes() const { return staged_bytes_; }

 private:
  /// Stored key chunks of a build whose key word is Key (a key schema's rows
  /// are staged in key_staging_ instead).
  template <typename Key>
  using KeyChunks = std::vector<DecodedColumn<Key>>;

  absl::Status AddSpec(const v1::IndexSpec& spec);
  absl::Status AddChunk(std::unique_ptr<v1::BuildChunk> chunk);
  /// AddChunk once the key words decoded, for the spec's key kind Key (a key
  /// word or engine::ColumnKey).
  template <typename Key>
  absl::Status AddChunkOf(std::unique_ptr<v1::BuildChunk> chunk, KeyColumns& key_columns);
  /// Finish for the spec's key kind Key: the build node, the reservation, the build.
  template <typename Key>
  absl::StatusOr<std::unique_ptr<engine::HashIndex>> BuildOf(double* seconds);
  /// Reserves (or resizes the reservation to) the table bytes of an index of
  /// `capacity` slots and its payload as staged so far, plus, when `shape` is
  /// given, the transient bytes of a build of that shape (its payload set to the
  /// staged columns'), plus the staged input bytes. `grow_only`: keep a larger
  /// reservation (one made for spec.expected_rows). RESOURCE_EXHAUSTED naming
  /// needed, used and budget bytes; INVALID_ARGUMENT for a bad capacity, or from
  /// CheckProbeBound unless `capacity` is a chunk's interim size of a table sized
  /// from the rows sent.
  absl::Status ReserveFor(uint32_t capacity, const engine::BuildShape* shape, bool grow_only);
  /// Counts `bytes` more of staged input (`field` names the chunk) against
  /// --max-build-staged-bytes and the host staging budget, before they are kept.
  absl::Status CountStaged(uint64_t bytes, const std::string& field);
  /// Grows the memory budget reservation for a build of `rows` key rows (see Add).
  absl::Status ReserveRows(uint64_t rows, bool validity, const std::string& field);
  /// The capacity the index gets for `rows` key rows: the spec's, or sized from
  /// spec.expected_rows, or from `rows` at the target load factor.
  absl::StatusOr<uint32_t> CapacityFor(uint64_t rows) const;
  /// The engine spec of the index (key type, probe bound) at `capacity` slots.
  engine::HashIndexSpec EngineSpec(uint32_t capacity) const;
  /// OK when spec.max_probe_count fits `capacity`, the capacity the index will
  /// have: spec.capacity or the one sized for spec.expected_rows (checked with the
  /// spec), or, for a table sized from the rows sent, the one for all of them
  /// (checked at Finish: a chunk's interim size is no bound). Else
  /// INVALID_ARGUMENT naming spec.max_probe_count, the capacity and where it came from.
  absl::Status CheckProbeBound(uint32_t capacity) const;

  Operations* ops_;
  bool have_spec_ = false;
  v1::IndexSpec spec_;
  std::string name_;
  // From spec.duplicates.
  engine::DuplicatePolicy duplicates_ = engine::DuplicatePolicy::kLowestRow;
  engine::KeyType key_type_ = engine::KeyType::kUint32;  // from spec.key_type
  KeySchema key_schema_;                              // from spec.key_columns (kColumns)
  KeyStaging key_staging_;                            // kColumns: every chunk's key rows
  std::optional<uint32_t> capacity_;                  // from spec.capacity or spec.expected_rows
  bool reserved_ = false;                             // reservation_ holds part of the budget
  MemoryBudget::Reservation reservation_;
  MemoryBudget::Reservation staging_;  // in the host staging budget
  uint64_t staged_bytes_ = 0;          // chunk messages and decoded copies held
  uint32_t nonempty_chunks_ = 0;
  bool any_validity_ = false;
  std::vector<std::unique_ptr<v1::BuildChunk>> chunks_;
  std::variant<KeyChunks<uint32_t>, KeyChunks<uint64_t>> keys_;  // the spec's key word
  std::vector<DecodedColumn<uint32_t>> values_, validity_;
  std::vector<uint32_t> row_bases_;
  std::vector<uint64_t> chunk_key_rows_;  // key rows of each chunk
  uint64_t key_rows_ = 0;
  uint64_t value_rows_ = 0;
  PayloadStaging payload_;  // spec.payload and the rows staged for it
  // The staged string columns' dictionaries, made once every chunk arrived
  // (their codes columns follow the declared payload in the build node).
  DictionaryBuild dictionaries_;
};

}  // namespace gpujoin::server
