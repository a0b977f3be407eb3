// gpujoin::client Hash columns: checks, the row builder, the wire encoding and
// the cutting of HashAll batches.
#include "gpujoin/client/hash_column.hpp"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "gpujoin/common/bitmap.hpp"
#include "gpujoin/common/status_macros.hpp"
#include "hash_batches.hpp"

namespace gpujoin::client {
namespace {

std::string Name(ColumnType t) { return std::string(ColumnTypeName(t)); }

// The bytes per row of the types whose `data` has a fixed stride (0 for the others).
uint64_t DataStride(const HashColumn& c) {
  if (c.type == ColumnType::kFixedSizeBinary) return c.byte_width;
  if (c.type == ColumnType::kDictionary) return ValueWidth(c.index_type);
  return ValueWidth(c.type);
}

// Checks offsets [offset, offset + length] of `o`: present, from >= 0, non-decreasing, the
// last at most `limit`.
template <typename T>
absl::Status CheckOffsets(std::span<const T> o, const HashColumn& c, const std::string& what,
                          uint64_t limit, std::string_view limit_name) {
  const uint64_t end = c.offset + c.length;
  if (o.size() < end + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": offsets has ", o.size(), " entries, needs ", end + 1));
  }
  if (o[c.offset] < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": offsets[", c.offset, "] is negative (", o[c.offset], ")"));
  }
  for (uint64_t i = c.offset; i < end; ++i) {
    if (o[i + 1] < o[i]) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": offsets[", i + 1, "] = ", o[i + 1],
                                                     " is below offsets[", i, "] = ", o[i]));
    }
  }
  if (static_cast<uint64_t>(o[end]) > limit) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": offsets[", end, "] = ", o[end],
                                                   " is beyond ", std::string(limit_name), " (",
                                                   limit, ")"));
  }
  return absl::OkStatus();
}

absl::Status Check(const HashColumn& c, const std::string& what, uint32_t depth) {
  if (depth > kMaxHashDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": nested ", depth, " levels deep; at most ", kMaxHashDepth));
  }
  const uint64_t end = c.offset + c.length;
  auto fail = [&](std::string_view buffer, uint64_t has, std::string_view unit, uint64_t needs) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " (", Name(c.type), ", ", c.length, " rows from row ", c.offset,
        "): ", std::string(buffer), " has ", has, " ", std::string(unit), ", needs ", needs));
  };
  const int want = ChildCount(c.type);  // -1: a struct takes any number
  if (want >= 0 && c.children.size() != static_cast<size_t>(want)) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " (", Name(c.type), "): ", c.children.size(), " children, needs ", want));
  }
  if (c.type == ColumnType::kDictionary && !IsDictionaryIndexType(c.index_type)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": index type ", Name(c.index_type),
                                                   " is not an integer type (int8 .. uint64)"));
  }
  for (size_t k = 0; k < c.children.size(); ++k) {
    if (auto s = Check(c.children[k], absl::StrCat(what, ".children[", k, "]"), depth + 1);
        !s.ok()) {
      return s;
    }
  }
  if (const uint64_t w = DataStride(c); w != 0 || c.type == ColumnType::kFixedSizeBinary) {
    if (c.data.size() / std::max<uint64_t>(w, 1) < end && w != 0) {
      return fail("data", c.data.size(), "bytes", end * w);
    }
  } else if (c.type == ColumnType::kBool) {
    if (c.data.size() < BitmapBytes(end))
      return fail("data", c.data.size(), "bytes", BitmapBytes(end));
  } else if (IsByteStringType(c.type)) {
    if (HasLargeOffsets(c.type)) {
      if (auto s = CheckOffsets(c.large_offsets, c, what, c.data.size(), "data"); !s.ok()) return s;
    } else if (auto s = CheckOffsets(c.offsets, c, what, c.data.size(), "data"); !s.ok()) {
      return s;
    }
  } else if (IsOffsetListType(c.type)) {
    uint64_t rows = c.children[0].length;
    if (c.type == ColumnType::kMap) rows = std::min(rows, c.children[1].length);
    if (HasLargeOffsets(c.type)) {
      if (auto s = CheckOffsets(c.large_offsets, c, what, rows, "the values' rows"); !s.ok()) {
        return s;
      }
    } else if (auto s = CheckOffsets(c.offsets, c, what, rows, "the children's rows"); !s.ok()) {
      return s;
    }
  } else if (c.type == ColumnType::kFixedSizeList) {
    if (c.byte_width != 0 && c.children[0].length / c.byte_width < end) {
      return fail("children[0]", c.children[0].length, "rows", end * c.byte_width);
    }
  } else if (c.type == ColumnType::kStruct) {
    for (size_t k = 0; k < c.children.size(); ++k) {
      if (c.children[k].length < end) {
        return fail(absl::StrCat("children[", k, "]"), c.children[k].length, "rows", end);
      }
    }
  }
  if (!c.validity.empty() && c.validity.size() < BitmapBytes(end)) {
    return fail("validity", c.validity.size(), "bytes", BitmapBytes(end));
  }
  return absl::OkStatus();
}

}  // namespace

HashColumn::HashColumn(const ColumnView& view)
    : type(view.type),
      data(view.data),
      offsets(view.offsets),
      validity(view.validity),
      offset(view.offset),
      length(view.length) {}

HashColumn HashColumn::Slice(uint64_t begin, uint64_t count) const {
  HashColumn c = *this;
  begin = std::min(begin, length);
  c.offset = offset + begin;
  c.length = std::min(count, length - begin);
  return c;
}

absl::Status CheckHashColumn(const HashColumn& column, std::string_view what) {
  return Check(column, std::string(what), 1);
}

// ---------------------------------------------------------------- HashColumnBuilder

HashColumnBuilder::HashColumnBuilder(ColumnType type, uint32_t byte_width, ColumnType index_type)
    : type_(type), byte_width_(byte_width), index_type_(index_type) {
  if (IsByteStringType(type) || IsOffsetListType(type)) {
    if (HasLargeOffsets(type)) {
      large_offsets_.push_back(0);
    } else {
      offsets_.push_back(0);
    }
  }
}

HashColumnBuilder& HashColumnBuilder::AddChild(HashColumnBuilder child) {
  children_.push_back(std::move(child));
  return children_.back();
}

void HashColumnBuilder::MarkValid() {
  if (validity_.size() * 8 <= length_) validity_.push_back(0);
  validity_[length_ / 8] |= static_cast<uint8_t>(1u << (length_ % 8));
  ++length_;
}

absl::Status HashColumnBuilder::WrongKind(const std::string& what) const {
  return absl::InvalidArgumentError(
      absl::StrCat("cannot append ", what, " to a ", Name(type_), " column"));
}

absl::Status HashColumnBuilder::PushOffset(uint64_t end) {
  if (HasLargeOffsets(type_)) {
    large_offsets_.push_back(static_cast<int64_t>(end));
    return absl::OkStatus();
  }
  if (end > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
    return absl::OutOfRangeError(absl::StrCat("a ", Name(type_), " column holds at most 2^31 - 1 ",
                                              IsByteStringType(type_) ? "bytes" : "values",
                                              "; use the large_ type"));
  }
  offsets_.push_back(static_cast<int32_t>(end));
  return absl::OkStatus();
}

absl::Status HashColumnBuilder::AppendBool(bool value) {
  if (type_ != ColumnType::kBool) return WrongKind("a bool");
  if (data_.size() * 8 <= length_) data_.push_back(0);
  if (value) data_[length_ / 8] |= static_cast<uint8_t>(1u << (length_ % 8));
  MarkValid();
  return absl::OkStatus();
}

absl::Status HashColumnBuilder::AppendBytes(std::string_view value) {
  if (IsByteStringType(type_)) {
    GPUJOIN_RETURN_IF_ERROR(PushOffset(data_.size() + value.size()));
  } else if (type_ == ColumnType::kDecimal128 || type_ == ColumnType::kFixedSizeBinary) {
    const size_t w = type_ == ColumnType::kDecimal128 ? 16 : byte_width_;
    if (value.size() != w) {
      return absl::InvalidArgumentError(
          absl::StrCat("a ", Name(type_), " value has ", w, " bytes, got ", value.size()));
    }
  } else {
    return WrongKind("bytes");
  }
  data_.insert(data_.end(), value.begin(), value.end());
  MarkValid();
  return absl::OkStatus();
}

absl::Status HashColumnBuilder::AppendIndex(int64_t index) {
  if (type_ != ColumnType::kDictionary) return WrongKind("a dictionary index");
  const size_t w = ValueWidth(index_type_);
  const bool is_signed = index_type_ == ColumnType::kInt8 || index_type_ == ColumnType::kInt16 ||
                         index_type_ == ColumnType::kInt32 || index_type_ == ColumnType::kInt64;
  const int bits = static_cast<int>(w * 8) - (is_signed ? 1 : 0);
  if (index < 0 || (bits < 63 && index >= (int64_t{1} << bits))) {
    return absl::InvalidArgumentError(
        absl::StrCat("dictionary index ", index, " does not fit ", Name(index_type_)));
  }
  const size_t at = data_.size();
  data_.resize(at + w);
  std::memcpy(data_.data() + at, &index, w);  // little-endian: the low w bytes
  MarkValid();
  return absl::OkStatus();
}

absl::Status HashColumnBuilder::AppendNested() {
  switch (type_) {
    case ColumnType::kStruct:
      for (size_t k = 0; k < children_.size(); ++k) {
        if (children_[k].length() != length_ + 1) {
          return absl::InvalidArgumentError(absl::StrCat("struct row ", length_, ": field ", k,
                                                         " has ", children_[k].length(),
                                                         " rows, needs ", length_ + 1));
        }
      }
      break;
    case ColumnType::kFixedSizeList:
      if (children_.size() != 1 || children_[0].length() != (length_ + 1) * uint64_t{byte_width_}) {
        return absl::InvalidArgumentError(
            absl::StrCat("fixed_size_list row ", length_, ": the values have ",
                         children_.empty() ? 0 : children_[0].length(), " rows, need ",
                         (length_ + 1) * byte_width_));
      }
      break;
    case ColumnType::kList:
    case ColumnType::kLargeList:
    case ColumnType::kMap: {
      const size_t want = type_ == ColumnType::kMap ? 2 : 1;
      if (children_.size() != want ||
          (want == 2 && children_[0].length() != children_[1].length())) {
        return absl::InvalidArgumentError(
            absl::StrCat(Name(type_), " row ", length_, ": needs ", want, " children",
                         want == 2 ? " with as many keys as items" : ""));
      }
      GPUJOIN_RETURN_IF_ERROR(PushOffset(children_[0].length()));
      break;
    }
    default:
      return WrongKind("a nested row");
  }
  MarkValid();
  return absl::OkStatus();
}

void HashColumnBuilder::AppendNull() {
  if (const size_t w = ValueWidth(type_)) {
    data_.resize(data_.size() + w, 0);
  } else if (type_ == ColumnType::kFixedSizeBinary) {
    data_.resize(data_.size() + byte_width_, 0);
  } else if (type_ == ColumnType::kDictionary) {
    data_.resize(data_.size() + ValueWidth(index_type_), 0);
  } else if (type_ == ColumnType::kBool) {
    if (data_.size() * 8 <= length_) data_.push_back(0);
  } else if (IsByteStringType(type_) || IsOffsetListType(type_)) {
    if (HasLargeOffsets(type_)) {
      large_offsets_.push_back(large_offsets_.back());
    } else {
      offsets_.push_back(offsets_.back());
    }
  } else if (type_ == ColumnType::kStruct) {
    for (HashColumnBuilder& f : children_) {
      while (f.length() < length_ + 1) f.AppendNull();
    }
  } else if (type_ == ColumnType::kFixedSizeList && !children_.empty()) {
    while (children_[0].length() < (length_ + 1) * uint64_t{byte_width_}) {
      children_[0].AppendNull();
    }
  }
  if (validity_.size() * 8 <= length_) validity_.push_back(0);
  has_nulls_ = true;
  ++null_count_;
  ++length_;
}

HashColumn HashColumnBuilder::view() const {
  HashColumn c;
  c.type = type_;
  c.data = data_;
  c.offsets = offsets_;
  c.large_offsets = large_offsets_;
  if (has_nulls_ && type_ != ColumnType::kNull) c.validity = validity_;  // kNull has no buffers
  c.length = length_;
  c.byte_width = byte_width_;
  c.index_type = index_type_;
  for (const HashColumnBuilder& k : children_) c.children.push_back(k.view());
  return c;
}

// ---------------------------------------------------------------- wire

namespace detail {

void EncodeHashColumn(const HashColumn& c, v1::HashColumn* out) {
  out->set_type(static_cast<v1::ColumnType>(static_cast<int>(c.type) + 1));
  out->set_data(reinterpret_cast<const char*>(c.data.data()), c.data.size());
  if (HasLargeOffsets(c.type)) {
    out->set_offsets(reinterpret_cast<const char*>(c.large_offsets.data()),
                     c.large_offsets.size_bytes());
  } else if (IsByteStringType(c.type) || IsOffsetListType(c.type)) {
    out->set_offsets(reinterpret_cast<const char*>(c.offsets.data()), c.offsets.size_bytes());
  }
  if (!c.validity.empty()) {
    out->set_validity(reinterpret_cast<const char*>(c.validity.data()), c.validity.size());
  }
  out->set_offset(c.offset);
  out->set_length(c.length);
  if (c.type == ColumnType::kFixedSizeBinary || c.type == ColumnType::kFixedSizeList) {
    out->set_byte_width(c.byte_width);
  }
  if (c.type == ColumnType::kDictionary) {
    out->set_index_type(static_cast<v1::ColumnType>(static_cast<int>(c.index_type) + 1));
  }
  for (const HashColumn& k : c.children) EncodeHashColumn(k, out->add_children());
}

namespace {

// Entries [base, base + n] of `o` minus o[base + skip], in a vector owned by
// `store`. The first `skip` rows are not hashed and their offsets were never
// checked, so they become empty rows at 0.
template <typename T>
std::span<const T> Rebase(std::span<const T> o, uint64_t base, uint64_t skip, uint64_t n,
                          std::deque<std::vector<T>>* store) {
  std::vector<T>& v = store->emplace_back(n + 1, T{0});
  for (uint64_t k = skip; k <= n; ++k) v[k] = o[base + k] - o[base + skip];
  return v;
}

}  // namespace

HashColumn CutHashRows(const HashColumn& c, uint64_t first, uint64_t count,
                       HashCutScratch* scratch) {
  const uint64_t phys = c.offset + first;
  const uint64_t base = phys - phys % 8;
  const uint64_t local_end = phys % 8 + count;  // physical rows of the cut
  HashColumn s;
  s.type = c.type;
  s.offset = phys % 8;
  s.length = count;
  s.byte_width = c.byte_width;
  s.index_type = c.index_type;
  if (!c.validity.empty()) s.validity = c.validity.subspan(base / 8, BitmapBytes(local_end));
  if (const uint64_t w = DataStride(c); w != 0) {
    s.data = c.data.subspan(base * w, local_end * w);
    if (c.type == ColumnType::kDictionary) s.children = c.children;  // indices address it whole
  } else if (c.type == ColumnType::kBool) {
    s.data = c.data.subspan(base / 8, BitmapBytes(local_end));
  } else if (IsByteStringType(c.type)) {
    if (HasLargeOffsets(c.type)) {
      s.large_offsets = Rebase(c.large_offsets, base, s.offset, local_end, &scratch->large_offsets);
      s.data = c.data.subspan(c.large_offsets[phys], s.large_offsets[local_end]);
    } else {
      s.offsets = Rebase(c.offsets, base, s.offset, local_end, &scratch->offsets);
      s.data = c.data.subspan(c.offsets[phys], s.offsets[local_end]);
    }
  } else if (IsOffsetListType(c.type)) {
    uint64_t from, rows;
    if (HasLargeOffsets(c.type)) {
      s.large_offsets = Rebase(c.large_offsets, base, s.offset, local_end, &scratch->large_offsets);
      from = c.large_offsets[phys];
      rows = s.large_offsets[local_end];
    } else {
      s.offsets = Rebase(c.offsets, base, s.offset, local_end, &scratch->offsets);
      from = c.offsets[phys];
      rows = s.offsets[local_end];
    }
    for (const HashColumn& k : c.children)
      s.children.push_back(CutHashRows(k, from, rows, scratch));
  } else if (c.type == ColumnType::kFixedSizeList) {
    s.children.push_back(
        CutHashRows(c.children[0], base * c.byte_width, local_end * c.byte_width, scratch));
  } else if (c.type == ColumnType::kStruct) {
    for (const HashColumn& k : c.children)
      s.children.push_back(CutHashRows(k, base, local_end, scratch));
  }
  return s;
}

}  // namespace detail
}  // namespace gpujoin::client
