// Decoding of request columns (packed little-endian bytes or typed lists) into
// engine views, and encoding of result columns into response bytes.
//
// Packed bytes are borrowed without copying when they are suitably aligned (the
// usual case: protobuf stores them in heap strings), so a decoded column must not
// outlive the request message it came from.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "gpujoin/v1/gpujoin.pb.h"

namespace gpujoin::server {

static_assert(std::endian::native == std::endian::little,
              "packed columns are little-endian; a big-endian host would need byte swaps");

/// A decoded column: a view that either borrows the request's bytes or owns a copy.
/// Moving keeps the view valid (std::vector keeps its buffer on move).
template <typename T>
class DecodedColumn {
 public:
  DecodedColumn() = default;
  /// A view of memory owned elsewhere (the request message).
  static DecodedColumn Borrow(std::span<const T> view) {
    DecodedColumn c;
    c.view_ = view;
    c.present_ = true;
    return c;
  }
  /// Takes ownership of `values`.
  static DecodedColumn Own(std::vector<T> values) {
    DecodedColumn c;
    c.storage_ = std::move(values);
    c.view_ = std::span<const T>(c.storage_.data(), c.storage_.size());
    c.present_ = true;
    return c;
  }
  DecodedColumn(DecodedColumn&&) noexcept = default;
  DecodedColumn& operator=(DecodedColumn&&) noexcept = default;
  DecodedColumn(const DecodedColumn&) = delete;
  DecodedColumn& operator=(const DecodedColumn&) = delete;

  /// False for an optional column the request did not set.
  bool present() const { return present_; }
  std::span<const T> span() const { return view_; }
  size_t size() const { return view_.size(); }
  /// Bytes of the copy this column owns (0 when it borrows the message's memory).
  size_t owned_bytes() const { return storage_.capacity() * sizeof(T); }

 private:
  std::span<const T> view_;
  std::vector<T> storage_;
  bool present_ = false;
};

/// Whether a column must be set.
enum class Presence { kRequired, kOptional };

/// Decodes a uint32 column. `has_column` is the parent's has_<field>(); `field` is
/// the field path used in errors (e.g. "batches[2].keys"). INVALID_ARGUMENT when
/// both `packed` and `values` are set, when neither is set for a required column,
/// or when `packed` has a byte length that is not a multiple of 4.
absl::StatusOr<DecodedColumn<uint32_t>> DecodeU32Column(bool has_column,
                                                        const v1::U32Column& column,
                                                        std::string_view field,
                                                        Presence presence);

/// Same for float32 columns.
absl::StatusOr<DecodedColumn<float>> DecodeF32Column(bool has_column, const v1::F32Column& column,
                                                     std::string_view field, Presence presence);

/// Borrows or copies `bytes` as an array of T (little-endian). INVALID_ARGUMENT naming
/// `field` when the length is not a multiple of sizeof(T).
template <typename T>
absl::StatusOr<DecodedColumn<T>> DecodePackedBytes(std::string_view bytes, std::string_view field);

/// Output column written in place into a response `bytes` field: resizes `dest` to
/// rows * sizeof(T) and exposes it as a span of T (through a scratch vector when the
/// string's storage is not aligned for T; Finish() then copies it over).
template <typename T>
class PackedOutput {
 public:
  PackedOutput(std::string* dest, size_t rows) : dest_(dest), rows_(rows) {
    dest_->resize(rows * sizeof(T));
    if (reinterpret_cast<uintptr_t>(dest_->data()) % alignof(T) != 0) scratch_.resize(rows);
  }
  std::span<T> span() {
    if (!scratch_.empty()) return std::span<T>(scratch_);
    return std::span<T>(reinterpret_cast<T*>(dest_->data()), rows_);
  }
  /// Copies the scratch vector, if one was used, into the destination; `rows` may
  /// shrink the output to its first `rows` elements (joins truncate to the pair count).
  void Finish(size_t rows) {
    if (!scratch_.empty()) std::memcpy(dest_->data(), scratch_.data(), rows * sizeof(T));
    dest_->resize(rows * sizeof(T));
  }
  void Finish() { Finish(rows_); }

 private:
  std::string* dest_;
  size_t rows_;
  std::vector<T> scratch_;
};

/// Copies `values` into a packed little-endian byte string.
template <typename T>
std::string PackColumn(std::span<const T> values) {
  std::string out(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

/// Reads a packed little-endian byte string as a vector of T (sizes not a multiple
/// of sizeof(T) drop the tail). For clients and tests.
template <typename T>
std::vector<T> UnpackColumn(const std::string& bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

}  // namespace gpujoin::server
