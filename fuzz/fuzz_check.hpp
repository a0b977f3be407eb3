// Checks shared by every fuzz target (fuzz/*.cpp; docs/operations.md, "Fuzzing"):
// FUZZ_CHECK aborts with a message (libFuzzer records an abort as a crash and
// keeps the input), and length-prefixed framing for targets that take a sequence
// of messages. Depends on Abseil alone, so that a target of the engine alone
// (fuzz_graph_validate) links no server code: libFuzzer scans the coverage
// counters of everything linked after every input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace gpujoin::fuzz {

/// Prints where and what failed, then aborts (libFuzzer reports a crash).
[[noreturn]] void Fail(const char* file, int line, const char* condition,
                       const std::string& detail);

/// Aborts with `detail` (a std::string expression, evaluated only on failure)
/// unless `condition` holds.
#define FUZZ_CHECK(condition, detail)                                                  \
  do {                                                                                 \
    if (!(condition)) ::gpujoin::fuzz::Fail(__FILE__, __LINE__, #condition, (detail)); \
  } while (0)

/// "CODE: message" of a status, for failure details.
std::string Describe(const absl::Status& status);

/// Whether `status`'s message contains `text`.
bool MessageHas(const absl::Status& status, std::string_view text);

/// `data` as a string_view.
inline std::string_view AsView(const uint8_t* data, size_t size) {
  return std::string_view(reinterpret_cast<const char*>(data), size);
}

/// Splits `data` into at most `max_frames` frames, each a base-128 varint length
/// followed by that many bytes; a length past the end takes the bytes that are
/// left, and a truncated varint ends the sequence. Frames may be empty.
std::vector<std::string_view> SplitFrames(std::string_view data, size_t max_frames);

/// Appends one frame holding `payload` to `out` (the inverse of SplitFrames).
void AppendFrame(std::string_view payload, std::string* out);

}  // namespace gpujoin::fuzz
