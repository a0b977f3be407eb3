// The snapshot file of one index (`<name>.gjsnap` under --data-dir; the format
// is documented in docs/operations.md, "Snapshot format"): a fixed header, a
// section table with an xxHash64 checksum per section, a checksum of the header
// itself, then the sections (metadata, the table's keys and values, a keep_all
// index's groups, each payload column's arrays, and a key schema's key columns
// and row values), each at a 64-byte boundary.
//
// Format version 3 added the mutation state (sequence, next row ID, rehashes,
// max load factor) at the end of the metadata. Format version 2 added the key
// schema (the metadata's key columns, their
// sections and the row values); version 1 files, which have none, still load.
// Reading verifies the magic, the format version (a newer one is refused with a
// message naming both), the endianness marker, the header checksum, that the
// file has the length the header says (a torn write is shorter), that every
// section lies inside the file without overlap and has exactly the length the
// metadata implies, all before anything is allocated; then each section's
// checksum as it is read, then the image's own consistency
// (engine::IndexImage::Validate). Nothing here touches a backend or a budget:
// SnapshotReader::shape() gives the sizes to reserve before ReadImage.
//
// This header declares the format's constants, checksums and the writer
// (snapshot_writer.cpp); snapshot_reader.hpp declares the reader.
#pragma once

#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpujoin/engine/dictionary.hpp"
#include "gpujoin/engine/hash_index.hpp"
#include "gpujoin/engine/index_image.hpp"

namespace gpujoin::server {

/// The format version this gpujoind writes and the newest it reads.
inline constexpr uint32_t kSnapshotFormatVersion = 5;
/// The file name suffix of snapshots (`<index name>.gjsnap`).
inline constexpr std::string_view kSnapshotSuffix = ".gjsnap";
/// The first 8 bytes of every snapshot.
inline constexpr char kSnapshotMagic[8] = {'G', 'J', 'S', 'N', 'A', 'P', '\r', '\n'};

/// XXH64 of `bytes` (the xxHash64 specification; test vectors in snapshot_format_test).
uint64_t XxHash64(const void* data, size_t bytes, uint64_t seed = 0);

/// The checksum of a section: XXH64 (seed = its length) of the little-endian
/// XXH64 (seed 0) of each 4 MiB block, so that blocks can be hashed in parallel.
uint64_t SectionChecksum(const void* data, size_t bytes, unsigned threads = 1);

/// What a snapshot keeps beside the index image: the IndexVersion fields that
/// IndexInfo reports.
struct SnapshotMeta {
  std::string name;
  /// The backend that wrote it (informative: any backend loads any snapshot).
  engine::BackendKind source_backend = engine::BackendKind::kCpu;
  uint64_t version = 0;
  uint32_t first_value = 0;
  bool explicit_values = false;
  int router_values = 0;  ///< v1::RouterValues, stored as explicit_values byte 1 + it
  bool batch_mode = false;
  double build_seconds = 0;
  int64_t built_unix_millis = 0;
  /// IndexSpec.payload names, aligned with the image's first payload
  /// columns (the codes columns of `dictionaries` follow them).
  std::vector<std::string> payload_names;
  /// A key schema's (key type kColumns) IndexSpec.key_columns names, aligned
  /// with the image's key columns; empty for a key word.
  std::vector<std::string> key_column_names;
  /// Format version 3: the index's mutation state (MutationState) and
  /// IndexSpec.max_load_factor; older files load with a sequence of 0, the
  /// row IDs past the build's (first_value + rows) and 0.8.
  uint64_t mutation_sequence = 0;
  /// IndexVersion::base_id: which write-ahead log records apply to this file.
  uint64_t base_id = 0;
  uint64_t next_row_id = 0;
  uint64_t rehashes = 0;
  double max_load_factor = 0.8;
  /// Format version 4: the resident dictionaries of string and binary payload
  /// columns (HashIndex::dictionaries); older files have none.
  std::vector<engine::PayloadDictionary> dictionaries;
  /// Format version 5: IndexSpec.placement is replicated (older files: partitioned).
  bool replicated = false;
};

/// Hooks of a write.
struct SnapshotWriteOptions {
  /// Asked between writes (at most every 8 MiB): true abandons the write
  /// (CANCELLED; the caller removes the partial file).
  std::function<bool()> cancelled;
  /// Test hook (--snapshot-test-write-delay-ms): called after every 1 MiB written.
  std::function<void()> after_chunk;
};

/// Bytes of the snapshot file of `meta` and `image` (what WriteSnapshot writes).
uint64_t SnapshotFileBytes(const SnapshotMeta& meta, const engine::IndexImage& image);

/// Writes the snapshot of `meta` and `image` to `fd` from its current offset
/// (a fresh file). Does not fsync. INTERNAL naming errno for a failed write
/// (ENOSPC: RESOURCE_EXHAUSTED), CANCELLED when options.cancelled said so.
absl::Status WriteSnapshot(int fd, const SnapshotMeta& meta, const engine::IndexImage& image,
                           const SnapshotWriteOptions& options = {});

/// Which file a name referred to when it was read: equal identities mean the
/// file was not replaced (a write renames a new file over the name) since.
struct FileIdentity {
  uint64_t device = 0;
  uint64_t inode = 0;
  uint64_t bytes = 0;
  int64_t modified_ns = 0;
  bool operator==(const FileIdentity&) const = default;
};

/// The identity of the file `st` describes.
FileIdentity IdentityOf(const struct stat& st);

/// "a FIFO", "a directory", ... for a stat mode (messages about files that are
/// not regular).
std::string_view FileKindName(unsigned mode);

/// The reason label (gpujoin_snapshot_load_failures_total) of a load error from
/// SnapshotReader or an import: "version", "truncated", "corrupt", "budget",
/// "invalid", "unsupported" (the backend cannot hold the index: its import is
/// UNIMPLEMENTED) or "io_error".
std::string_view SnapshotLoadFailureReason(const absl::Status& status);

}  // namespace gpujoin::server
