// A name table for one of the vocabulary's enums, indexed by the enum's value:
// the name of a value and the parse of a name. Private to gpujoin_common.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace gpujoin::detail {

inline std::string_view NameIn(std::span<const std::string_view> names, size_t value) {
  return value < names.size() ? names[value] : "unknown";
}

/// "unknown <what> 'word' (expected a, b or c)" unless `word` is one of `names`.
template <typename E>
absl::StatusOr<E> ParseIn(std::span<const std::string_view> names, std::string_view what,
                          std::string_view word) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == word) return static_cast<E>(i);
  }
  std::string expected;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) expected += i + 1 == names.size() ? " or " : ", ";
    expected += std::string(names[i]);
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown ", std::string(what), " '", std::string(word), "' (expected ",
                                                 expected, ")"));
}

}  // namespace gpujoin::detail
