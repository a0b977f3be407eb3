// SnapshotReader: a snapshot file (snapshot_format.hpp) opened for loading, its
// header, section table and metadata verified before anything is allocated,
// then its sections read into an engine::IndexImage on several threads, each
// checksum block verified as it is read.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpujoin/engine/hash_index.hpp"
#include "gpujoin/engine/index_image.hpp"
#include "storage/snapshot_format.hpp"

namespace gpujoin::server {
namespace detail {
class Decoder;
}  // namespace detail

/// A snapshot file opened for loading: its header and metadata verified.
class SnapshotReader {
 public:
  /// Opens `path` and verifies everything but the bulk sections' checksums.
  /// Never blocks on the open and never follows a symbolic link: anything but a
  /// regular file is FAILED_PRECONDITION naming what it is. Errors name `label`
  /// (default: `path`). Errors: NOT_FOUND / INTERNAL (open, read),
  /// FAILED_PRECONDITION (not a regular file, a newer format version or another
  /// byte order), OUT_OF_RANGE (the file is shorter or longer than its header
  /// says: a torn write), DATA_LOSS (bad magic, a checksum mismatch, a section
  /// table that does not fit the metadata).
  static absl::StatusOr<SnapshotReader> Open(const std::string& path,
                                             const std::string& label = "");

  SnapshotReader(SnapshotReader&&) noexcept;
  SnapshotReader& operator=(SnapshotReader&&) noexcept;
  ~SnapshotReader();

  const SnapshotMeta& meta() const { return meta_; }
  /// The sizes of the image, a key schema's key columns and row values
  /// included (for the memory an import takes).
  const engine::IndexImageShape& shape() const { return shape_; }
  /// Bytes of the file.
  uint64_t file_bytes() const { return file_bytes_; }
  /// The format version of the file.
  uint32_t format_version() const { return format_version_; }
  /// The file as it was opened.
  const FileIdentity& identity() const { return identity_; }

  /// Allocates the image (std::bad_alloc -> RESOURCE_EXHAUSTED), reads every
  /// section into it verifying its checksum (DATA_LOSS naming the section), then
  /// checks the image (DATA_LOSS with IndexImage::Validate's message). The 4 MiB
  /// checksum blocks of all sections are read and hashed by `threads` workers
  /// (0: std::thread::hardware_concurrency()); a failed read is INTERNAL, a
  /// file shortened since Open OUT_OF_RANGE.
  absl::StatusOr<engine::IndexImage> ReadImage(unsigned threads = 0);

 private:
  struct Section {
    uint32_t type = 0;
    uint32_t column = 0;
    uint64_t offset = 0;
    uint64_t length = 0;
    uint64_t checksum = 0;
  };
  SnapshotReader() = default;

  /// DATA_LOSS naming the file and `why`.
  absl::Status Corrupt(std::string_view why) const;
  /// Opens `file_path` without blocking or following a link; a regular file only.
  absl::Status OpenRegularFile(const std::string& file_path);
  /// Reads and checks the fixed header, the header checksum, the file length
  /// and the section table (every section inside the file, in order, aligned).
  absl::Status ReadSectionTable();
  /// Reads, verifies and decodes the metadata section (sections_[0]) into
  /// meta_, shape_, statistics_ and null_counts_.
  absl::Status ReadMeta();
  /// Format version 2: decodes the key schema at the end of the metadata (key
  /// rows, then per key column what a payload column has) into meta_, shape_
  /// and key_null_counts_.
  /// Format version 4: the dictionaries; drops their codes columns' names.
  absl::Status ReadDictionaries(detail::Decoder& d);
  absl::Status ReadKeySchema(detail::Decoder& d);
  /// Every section after the metadata must be exactly the array the metadata
  /// implies (type, column and length), in order.
  absl::Status CheckSectionSizes() const;
  /// The image's arrays in the order of sections_[1...].
  std::vector<engine::ImageBuffer*> Targets(engine::IndexImage& image) const;
  /// Reads every section after the metadata into `targets`, verifying their
  /// checksums, on `threads` workers.
  absl::Status ReadSections(const std::vector<engine::ImageBuffer*>& targets,
                            unsigned threads) const;
  /// The padding between sections carries no checksum: it must be zero.
  absl::Status CheckPadding() const;

  std::string path_;
  int fd_ = -1;
  uint64_t file_bytes_ = 0;
  uint32_t format_version_ = 0;
  std::vector<Section> sections_;
  SnapshotMeta meta_;
  engine::IndexImageShape shape_;
  engine::BuildStatistics statistics_;
  uint64_t built_rows_ = 0;
  bool built_ = false;
  std::vector<uint64_t> null_counts_;
  std::vector<uint64_t> key_null_counts_;
  FileIdentity identity_;
};

}  // namespace gpujoin::server
