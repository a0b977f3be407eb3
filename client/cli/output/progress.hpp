// A one-line progress bar on stderr for uploads and long streams: rows done,
// bytes, rows/s and ETA. Silent unless enabled (stderr is a terminal and
// --quiet is off).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace gpujoin::cli {

/// Redraws at most ten times a second; Done() clears the line. Not thread-safe.
class ProgressBar {
 public:
  /// `label` prefixes the line ("upload", "lookup", ...); `enabled` false
  /// makes every call a no-op.
  ProgressBar(std::string label, bool enabled);
  ~ProgressBar();

  /// Reports `rows` of `total_rows` (0 = unknown total) and `bytes` so far.
  void Update(uint64_t rows, uint64_t total_rows, uint64_t bytes);
  /// Reports a stream over an input file: `rows` answered, `bytes` of the
  /// input read (parsed) of `total_bytes` (0 = unknown, e.g. a pipe).
  void UpdateInput(uint64_t rows, uint64_t bytes, uint64_t total_bytes);
  /// Erases the bar (idempotent).
  void Done();

  /// The text of one progress line, exposed for tests.
  static std::string Render(const std::string& label, uint64_t rows, uint64_t total_rows,
                            uint64_t bytes, double seconds);
  /// The line of UpdateInput: percent of the input's bytes, rows, rows/s and bytes/s.
  static std::string RenderInput(const std::string& label, uint64_t rows, uint64_t bytes,
                                 uint64_t total_bytes, double seconds);

 private:
  /// Draws `line` over the previous one on stderr.
  void Draw(const std::string& line, std::chrono::steady_clock::time_point now);

  std::string label_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

/// True when stderr is a terminal.
bool StderrIsTerminal();
/// True when stdout is a terminal.
bool StdoutIsTerminal();

}  // namespace gpujoin::cli
