#include "wire/request_checks.hpp"

#include <string>

#include "absl/strings/str_cat.h"

namespace gpujoin::server::detail {

absl::Status CheckFitsU32(uint64_t value, std::string_view field) {
  if (value <= std::numeric_limits<uint32_t>::max()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(std::string(field), ": ", value,
                                                 " does not fit in 32 bits (at most ",
                                                 std::numeric_limits<uint32_t>::max(), ")"));
}

absl::Status CheckGeneratedValues(uint64_t base, uint64_t rows, std::string_view field,
                                  std::string_view what) {
  if (rows == 0 || base + rows - 1 <= kMaxGeneratedValue) return absl::OkStatus();
  const uint64_t fit = base > kMaxGeneratedValue ? 0 : kMaxGeneratedValue - base + 1;
  return absl::InvalidArgumentError(absl::StrCat(
      std::string(field), ": ", base, " + ", rows, " rows - 1 = ", base + rows - 1, " (",
      std::string(what), ") exceeds ", kMaxGeneratedValue,
      " (0xfffffffe), the largest generated value (0xffffffff is the missing marker); at most ",
      fit, " rows fit from this value"));
}

absl::Status Prefixed(const absl::Status& s, std::string_view prefix) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(std::string(prefix), s.message()));
}

}  // namespace gpujoin::server::detail
