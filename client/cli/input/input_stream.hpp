// The bytes of a gpujoin CLI input file: a plain file or standard input, read
// in blocks, decompressed on the fly when it is gzip or zstd (told by the
// extension .gz/.gzip/.zst/.zstd or by the magic bytes), and refused with
// "unsupported format: NAME (convert to CSV or JSONL)" when it is Parquet,
// Arrow IPC/Feather, ORC, Avro, a spreadsheet or another compression.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace gpujoin::cli {

/// How the bytes of an input are stored.
enum class Compression { kNone, kGzip, kZstd };

/// "none", "gzip", "zstd".
std::string_view CompressionName(Compression c);

/// The name of the unsupported binary format whose magic bytes start `head` or
/// whose extension `path` has ("parquet", "arrow", "orc", "avro", "xlsx", "bzip2",
/// "xz", "lz4"), or "" when it is none of them.
std::string UnsupportedFormat(std::string_view path, std::string_view head);

/// `path` without a compression extension (".gz", ".gzip", ".zst", ".zstd"),
/// so that "a.csv.gz" is read as "a.csv".
std::string_view WithoutCompressionExtension(std::string_view path);

/// A sequential reader of one input's (decompressed) bytes. Not thread-safe.
class InputStream {
 public:
  virtual ~InputStream() = default;

  /// Opens `path` ("-" = standard input, shown as "<stdin>" in errors).
  /// Compression comes from the extension, else from the first bytes; `sniff`
  /// false (a raw .u32/.u64/.i64 key file, whose first bytes may be anything)
  /// skips the magic-byte checks. INVALID_ARGUMENT "PATH: cannot open: REASON",
  /// or "PATH: unsupported format: NAME (convert to CSV or JSONL)".
  static absl::StatusOr<std::unique_ptr<InputStream>> Open(const std::string& path,
                                                           bool sniff = true);

  /// Reads up to `n` decompressed bytes into `buf`; 0 at the end.
  /// INVALID_ARGUMENT naming the file on a read or decompression error.
  virtual absl::StatusOr<size_t> Read(char* buf, size_t n) = 0;

  /// Input bytes consumed so far (compressed bytes for a compressed file).
  uint64_t bytes_consumed() const { return consumed_; }
  /// The input's size in bytes (compressed), 0 when unknown (a pipe).
  uint64_t total_bytes() const { return total_; }
  Compression compression() const { return compression_; }

 protected:
  uint64_t consumed_ = 0;
  uint64_t total_ = 0;
  Compression compression_ = Compression::kNone;
};

}  // namespace gpujoin::cli
