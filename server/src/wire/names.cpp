#include "wire/names.hpp"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gpujoin::server {
namespace {

bool InAlphabet(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

}  // namespace

absl::Status ValidateIndexName(std::string_view name, std::string_view field) {
  if (name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(field), ": index name is empty (expected [A-Za-z0-9_.-]{1,128})"));
  }
  if (name.size() > kMaxIndexNameLength) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(field), ": index name has ",
                                                   name.size(), " characters, at most ",
                                                   kMaxIndexNameLength, " are allowed"));
  }
  // "." and ".." match the alphabet but name the current and parent directory in
  // paths, URLs and file-based tooling that may carry an index name.
  if (name == "." || name == "..") {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(field), ": index name \"", std::string(name),
                     "\" is reserved (names may not be \".\" or \"..\")"));
  }
  // Bytes outside the ASCII alphabet (every byte of a multi-byte UTF-8 sequence
  // and every byte of invalid UTF-8) are rejected here, at the first one.
  for (size_t i = 0; i < name.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(name[i]);
    if (!InAlphabet(c)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: index name has character 0x%02x at position %d (expected [A-Za-z0-9_.-]{1,128})",
          std::string(field), c, i));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateColumnName(std::string_view name, std::string_view field) {
  if (name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(field), ": column name is empty (expected [A-Za-z0-9_.-]{1,128})"));
  }
  if (name.size() > kMaxColumnNameLength) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(field), ": column name has ",
                                                   name.size(), " characters, at most ",
                                                   kMaxColumnNameLength, " are allowed"));
  }
  for (size_t i = 0; i < name.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(name[i]);
    if (!InAlphabet(c)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: column name has character 0x%02x at position %d (expected [A-Za-z0-9_.-]{1,128})",
          std::string(field), c, i));
    }
  }
  return absl::OkStatus();
}

}  // namespace gpujoin::server
