#include "gpujoin/server/column_codec.hpp"

#include "absl/strings/str_cat.h"

namespace gpujoin::server {

template <typename T>
absl::StatusOr<DecodedColumn<T>> DecodePackedBytes(std::string_view bytes, std::string_view field) {
  if (bytes.size() % sizeof(T) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(field), ": byte length ",
                                                   bytes.size(), " is not a multiple of ",
                                                   sizeof(T), " (the element size)"));
  }
  const size_t rows = bytes.size() / sizeof(T);
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(T) == 0) {
    return DecodedColumn<T>::Borrow(
        std::span<const T>(reinterpret_cast<const T*>(bytes.data()), rows));
  }
  std::vector<T> copy(rows);
  if (rows != 0) std::memcpy(copy.data(), bytes.data(), bytes.size());
  return DecodedColumn<T>::Own(std::move(copy));
}

template absl::StatusOr<DecodedColumn<uint32_t>> DecodePackedBytes<uint32_t>(std::string_view,
                                                                            std::string_view);
template absl::StatusOr<DecodedColumn<int32_t>> DecodePackedBytes<int32_t>(std::string_view,
                                                                          std::string_view);
template absl::StatusOr<DecodedColumn<float>> DecodePackedBytes<float>(std::string_view,
                                                                      std::string_view);

namespace {

// Shared by the uint32 and float32 columns, which have the same shape.
template <typename T, typename Column>
absl::StatusOr<DecodedColumn<T>> DecodeColumn(bool has_column, const Column& column,
                                              std::string_view field, Presence presence) {
  const bool has_packed = has_column && !column.packed().empty();
  const bool has_values = has_column && column.has_values();
  if (has_packed && has_values) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(field), ": both ", std::string(field), ".packed (", column.packed().size(),
        " bytes) and ", std::string(field), ".values (", column.values().v_size(),
        " values) are set; set exactly one"));
  }
  if (!has_packed && !has_values) {
    if (presence == Presence::kOptional) return DecodedColumn<T>();
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(field), ": neither ", std::string(field), ".packed nor ", std::string(field),
        ".values is set (send zero rows as an empty values list)"));
  }
  if (has_packed) return DecodePackedBytes<T>(column.packed(), absl::StrCat(std::string(field), ".packed"));
  const auto& v = column.values().v();
  return DecodedColumn<T>::Borrow(std::span<const T>(v.data(), static_cast<size_t>(v.size())));
}

}  // namespace

absl::StatusOr<DecodedColumn<uint32_t>> DecodeU32Column(bool has_column,
                                                        const v1::U32Column& column,
                                                        std::string_view field,
                                                        Presence presence) {
  return DecodeColumn<uint32_t>(has_column, column, field, presence);
}

absl::StatusOr<DecodedColumn<float>> DecodeF32Column(bool has_column, const v1::F32Column& column,
                                                     std::string_view field, Presence presence) {
  return DecodeColumn<float>(has_column, column, field, presence);
}

}  // namespace gpujoin::server
