// Reads a gpujoin CLI input file in batches of rows, so that commands send
// rows as they are parsed and hold a few batches, not the file. Text formats
// (CSV/TSV, JSON Lines) are cut into pieces at record boundaries by a
// quote-aware scan on a reader thread and parsed on worker threads, in
// parallel; batches come out in file order, with the rows, line numbers and
// errors the whole-file parsers give. Compressed inputs (gzip, zstd) are read
// through InputStream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "input/table.hpp"

namespace gpujoin::cli {

/// A batch reader of one input. Not thread-safe (its threads are its own).
class TableReader {
 public:
  struct Options {
    InputFormat format = InputFormat::kAuto;
    size_t batch_rows = 1 << 16;  ///< rows per batch (SIZE_MAX: the whole file in one)
    int threads = 0;              ///< parser threads; 0 = the machine's cores
    size_t piece_bytes = 1 << 20;  ///< text handed to one parser task
  };

  /// Opens `path` ("-" = standard input) and detects the format (kAuto: by the
  /// extension, under a .gz/.zst one, else by the first line). The header of a
  /// CSV/TSV file is read here; JSON Lines reads its first batch here (its keys
  /// are the columns). Errors as InputStream::Open and the parsers.
  static absl::StatusOr<std::unique_ptr<TableReader>> Open(const std::string& path,
                                                           const Options& options);
  ~TableReader();

  const std::string& source() const;
  InputFormat format() const;
  /// The column names (JSON Lines: the keys of the pieces the first batch was
  /// taken from, at least its rows').
  const std::vector<std::string>& header() const;

  /// Fills `batch` with the next at most batch_rows rows (source, format,
  /// header and cell kinds set; rows with their lines). False at the end (batch
  /// then has no rows); INVALID_ARGUMENT at the first bad record, naming it.
  absl::StatusOr<bool> Next(Table* batch);

  /// A table with the header and no rows (what an empty file reads as).
  Table EmptyTable() const;

  /// Input bytes consumed (compressed bytes of a compressed file), the input's
  /// size (0: unknown), and the rows handed out so far.
  uint64_t bytes_read() const;
  uint64_t total_bytes() const;
  uint64_t rows_read() const;

  /// Notes for the user (a JSON key first seen after the first batch).
  std::vector<std::string> TakeNotes();

  class Impl;

 private:
  explicit TableReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpujoin::cli
