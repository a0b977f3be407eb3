#include "gpujoin/engine/dictionary.hpp"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gpujoin/engine/hash_index.hpp"

namespace gpujoin::engine {

StringDictionary::StringDictionary() : offsets_{0}, codes_(0, Hash{this}, Eq{this}) {}

StringDictionary::StringDictionary(const StringDictionary& other)
    : bytes_(other.bytes_), offsets_(other.offsets_), codes_(0, Hash{this}, Eq{this}) {
  Rehash();
}

StringDictionary& StringDictionary::operator=(const StringDictionary& other) {
  if (this != &other) {
    bytes_ = other.bytes_;
    offsets_ = other.offsets_;
    Rehash();
  }
  return *this;
}

StringDictionary::StringDictionary(StringDictionary&& other) noexcept
    : bytes_(std::move(other.bytes_)),
      offsets_(std::move(other.offsets_)),
      codes_(0, Hash{this}, Eq{this}) {
  other.offsets_.assign(1, 0);
  other.codes_.clear();
  Rehash();
}

StringDictionary& StringDictionary::operator=(StringDictionary&& other) noexcept {
  if (this != &other) {
    bytes_ = std::move(other.bytes_);
    offsets_ = std::move(other.offsets_);
    other.bytes_.clear();
    other.offsets_.assign(1, 0);
    other.codes_.clear();
    Rehash();
  }
  return *this;
}

StringDictionary::~StringDictionary() = default;

void StringDictionary::Rehash() {
  codes_ = absl::flat_hash_set<uint32_t, Hash, Eq>(size(), Hash{this}, Eq{this});
  for (uint32_t c = 0; c < size(); ++c) codes_.insert(c);
}

uint32_t StringDictionary::Find(std::string_view value) const {
  auto it = codes_.find(value);
  return it == codes_.end() ? kAbsent : *it;
}

uint32_t StringDictionary::Add(std::string_view value) {
  auto it = codes_.find(value);
  if (it != codes_.end()) return *it;
  const uint32_t code = size();
  bytes_.insert(bytes_.end(), value.begin(), value.end());
  offsets_.push_back(bytes_.size());
  codes_.insert(code);
  return code;
}

uint64_t StringDictionary::bytes() const {
  // By the contents, not the buffers' capacities: the same dictionary counts
  // the same however it was made (a build, a snapshot load).
  return bytes_.size() + offsets_.size() * sizeof(uint64_t) + size() * (2 * sizeof(uint32_t) + 1);
}

absl::StatusOr<StringDictionary> StringDictionary::FromValues(std::string_view bytes,
                                                              std::vector<uint64_t> offsets) {
  if (offsets.empty() || offsets.front() != 0 || offsets.back() != bytes.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dictionary: ", offsets.size(), " offsets do not span its ", bytes.size(), " bytes"));
  }
  if (offsets.size() - 1 >= StringDictionary::kAbsent) {
    return absl::InvalidArgumentError(
        absl::StrCat("dictionary: ", offsets.size() - 1, " values are more than codes can name"));
  }
  for (size_t i = 1; i < offsets.size(); ++i) {
    if (offsets[i] < offsets[i - 1]) {
      return absl::InvalidArgumentError(
          absl::StrCat("dictionary: offsets[", i, "] = ", offsets[i], " is below offsets[", i - 1,
                       "] = ", offsets[i - 1]));
    }
  }
  StringDictionary d;
  d.bytes_.assign(bytes.begin(), bytes.end());
  d.offsets_ = std::move(offsets);
  d.Rehash();
  if (d.codes_.size() != d.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("dictionary: ", d.size() - d.codes_.size(), " of its ", d.size(),
                     " values repeat an earlier one"));
  }
  return d;
}

ColumnView CodesColumn::View() const {
  ColumnView v;
  v.type = ColumnType::kUint32;
  v.rows = codes.size();
  v.data = std::as_bytes(std::span<const uint32_t>(codes));
  v.validity = validity;
  return v;
}

absl::StatusOr<CodesColumn> EncodeColumn(const ColumnView& column, StringDictionary& dictionary,
                                         uint64_t max_values, uint64_t max_bytes) {
  CodesColumn out;
  out.codes.assign(column.rows, 0);
  if (!column.validity.empty()) out.validity.assign(BitmapBytes(column.rows), 0);
  const char* base = reinterpret_cast<const char*>(column.data.data());
  for (uint64_t r = 0; r < column.rows; ++r) {
    if (!column.validity.empty()) {
      if (!BitAt(column.validity, r)) continue;
      out.validity[r / 8] |= uint8_t(1u << (r % 8));
    }
    const std::string_view value(base + column.offsets[r],
                                 column.offsets[r + 1] - column.offsets[r]);
    uint32_t code = dictionary.Find(value);
    if (code == StringDictionary::kAbsent) {
      if (dictionary.size() >= max_values) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "the dictionary would hold more than ", max_values, " distinct values"));
      }
      if (dictionary.value_bytes().size() + value.size() > max_bytes) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "the dictionary's values would take more than ", max_bytes, " bytes"));
      }
      code = dictionary.Add(value);
    }
    out.codes[r] = code;
  }
  return out;
}

}  // namespace gpujoin::engine

namespace gpujoin::engine {

const PayloadDictionary* HashIndex::LiveDictionaryOf(uint32_t column) const {
  if (dictionaries_ == nullptr) return nullptr;
  for (const PayloadDictionary& d : *dictionaries_) {
    if (d.column == column && !d.retired) return &d;
  }
  return nullptr;
}

uint64_t HashIndex::dictionary_bytes() const {
  uint64_t bytes = 0;
  if (dictionaries_ != nullptr) {
    for (const PayloadDictionary& d : *dictionaries_) bytes += d.values.bytes();
  }
  return bytes;
}

}  // namespace gpujoin::engine
