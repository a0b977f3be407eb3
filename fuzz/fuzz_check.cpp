#include "fuzz_check.hpp"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "google/protobuf/stubs/logging.h"

namespace gpujoin::fuzz {
namespace {

// protobuf logs every string field that is not valid UTF-8 as an error; the
// targets meet millions of them, and the service treats them as unparseable.
const bool kQuietProtobuf = [] {
  google::protobuf::SetLogHandler(
      [](google::protobuf::LogLevel, const char*, int, const std::string&) {});
  return true;
}();

}  // namespace

void Fail(const char* file, int line, const char* condition, const std::string& detail) {
  std::fprintf(stderr, "\n%s:%d: fuzz check failed: %s\n  %s\n", file, line, condition,
               detail.c_str());
  std::fflush(stderr);
  std::abort();
}

std::string Describe(const absl::Status& status) {
  return absl::StrCat(absl::StatusCodeToString(status.code()), ": ", status.message());
}

bool MessageHas(const absl::Status& status, std::string_view text) {
  const absl::string_view message = status.message();
  return std::string_view(message.data(), message.size()).find(text) != std::string_view::npos;
}

std::vector<std::string_view> SplitFrames(std::string_view data, size_t max_frames) {
  std::vector<std::string_view> frames;
  size_t at = 0;
  while (at < data.size() && frames.size() < max_frames) {
    uint64_t length = 0;
    bool complete = false;
    for (int shift = 0; shift < 64 && at < data.size(); shift += 7) {
      const uint8_t b = static_cast<uint8_t>(data[at++]);
      length |= uint64_t(b & 0x7f) << shift;
      if ((b & 0x80) == 0) {
        complete = true;
        break;
      }
    }
    if (!complete) break;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(length, data.size() - at));
    frames.push_back(data.substr(at, n));
    at += n;
  }
  return frames;
}

void AppendFrame(std::string_view payload, std::string* out) {
  uint64_t v = payload.size();
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
  out->append(payload);
}

}  // namespace gpujoin::fuzz
