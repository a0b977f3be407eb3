#include "options.hpp"

#include <charconv>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace gpujoin::loadtest {

absl::StatusOr<uint64_t> ParseCount(std::string_view text, std::string_view option) {
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(option), ": '", std::string(text),
                                                   "' is not a positive count (", std::string(why),
                                                   "); examples: 1000, 64K, 1M"));
  };
  if (text.empty()) return bad("empty");
  uint64_t multiplier = 1;
  switch (text.back()) {
    case 'k':
    case 'K':
      multiplier = uint64_t{1} << 10;
      break;
    case 'm':
    case 'M':
      multiplier = uint64_t{1} << 20;
      break;
    case 'g':
    case 'G':
      multiplier = uint64_t{1} << 30;
      break;
    default:
      break;
  }
  std::string_view digits = multiplier == 1 ? text : text.substr(0, text.size() - 1);
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty()) {
    return bad("not a number");
  }
  if (value == 0) return bad("zero");
  if (value > UINT64_MAX / multiplier) return bad("too large");
  return value * multiplier;
}

absl::StatusOr<std::vector<uint64_t>> ParseCountList(std::string_view text,
                                                     std::string_view option) {
  std::vector<uint64_t> out;
  for (absl::string_view part : absl::StrSplit(absl::string_view(text.data(), text.size()), ',')) {
    auto v = ParseCount(std::string_view(part.data(), part.size()), option);
    if (!v.ok()) return v.status();
    out.push_back(*v);
  }
  return out;
}

absl::StatusOr<std::vector<uint64_t>> ParseRange(std::string_view text, std::string_view option) {
  std::vector<uint64_t> parts;
  for (absl::string_view part : absl::StrSplit(absl::string_view(text.data(), text.size()), ':')) {
    auto v = ParseCount(std::string_view(part.data(), part.size()), option);
    if (!v.ok()) return v.status();
    parts.push_back(*v);
  }
  if (parts.size() > 3) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(option), ": '", std::string(text),
                                                   "' has more than start:end:step"));
  }
  const uint64_t start = parts[0];
  const uint64_t end = parts.size() > 1 ? parts[1] : start;
  const uint64_t step = parts.size() > 2 ? parts[2] : 1;
  if (end < start) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(option), ": end ", end, " is below start ", start));
  }
  std::vector<uint64_t> out;
  for (uint64_t v = start; v <= end; v += step) {
    out.push_back(v);
    if (out.size() > 1024) {
      return absl::InvalidArgumentError(absl::StrCat(
          std::string(option), ": more than 1024 settings in '", std::string(text), "'"));
    }
  }
  return out;
}

}  // namespace gpujoin::loadtest
