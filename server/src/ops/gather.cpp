#include "ops/gather.hpp"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpujoin::server {
namespace {

// Zeroes the bits of a bitmap's last byte past `bits` (the wire promises them 0).
void ClearTail(std::string* bitmap, uint64_t bits) {
  if (bits % 8 != 0 && !bitmap->empty()) {
    (*bitmap)[bits / 8] =
        static_cast<char>(static_cast<uint8_t>((*bitmap)[bits / 8]) & ((1u << (bits % 8)) - 1));
  }
}

// The index's column names for an error message: all of them, or the first 16.
std::string ColumnList(const IndexVersion& version) {
  const std::vector<std::string>& names = version.payload_names;
  if (names.empty()) return "it has no payload columns";
  constexpr size_t kShown = 16;
  std::string list = absl::StrJoin(
      names.begin(), names.begin() + std::min(names.size(), kShown), ", ",
      [](std::string* out, const std::string& n) { absl::StrAppend(out, "\"", n, "\""); });
  if (names.size() > kShown) absl::StrAppend(&list, ", ... (", names.size(), " in all)");
  return absl::StrCat("its payload columns are ", list);
}

}  // namespace

absl::StatusOr<std::vector<SelectedColumn>> ResolveSelect(
    const IndexVersion& version, const google::protobuf::RepeatedPtrField<std::string>& select) {
  std::vector<SelectedColumn> selected;
  if (select.empty()) return selected;
  const std::vector<engine::PayloadColumnInfo>& payload = version.index->payload();
  std::map<std::string_view, uint32_t> by_name;
  for (uint32_t i = 0; i < version.payload_names.size() && i < payload.size(); ++i) {
    by_name.emplace(version.payload_names[i], i);
  }
  std::map<std::string_view, int> seen;
  for (int i = 0; i < select.size(); ++i) {
    const std::string& name = select.Get(i);
    auto [previous, inserted] = seen.emplace(name, i);
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat("select[", i, "]: column \"", name,
                                                     "\" is selected twice (also select[",
                                                     previous->second, "])"));
    }
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      return absl::InvalidArgumentError(absl::StrCat("select[", i, "]: index \"", version.name,
                                                     "\" has no payload column \"", name, "\" (",
                                                     ColumnList(version), ")"));
    }
    selected.push_back(SelectedColumn{it->second, name, payload[it->second].type});
  }
  return selected;
}

uint64_t GatheredFixedBytes(std::span<const SelectedColumn> selected, uint64_t rows) {
  uint64_t bytes = 0;
  for (const SelectedColumn& c : selected) {
    bytes += engine::BitmapBytes(rows);  // validity
    if (engine::IsVariableWidth(c.type)) {
      bytes += (rows + 1) * sizeof(uint32_t);
    } else if (c.type == engine::ColumnType::kBool) {
      bytes += engine::BitmapBytes(rows);
    } else {
      bytes += rows * engine::ColumnWidth(c.type);
    }
  }
  return bytes;
}

// Host bytes of one selected column's objects besides its name and rows.
constexpr uint64_t kGatheredColumnObjectBytes = 256;

uint64_t GatheredObjectBytes(std::span<const SelectedColumn> selected) {
  static_assert(sizeof(v1::Column) + sizeof(engine::GatherOutput) + 64 <=
                kGatheredColumnObjectBytes);
  uint64_t bytes = 0;
  for (const SelectedColumn& c : selected) bytes += kGatheredColumnObjectBytes + c.name.size();
  return bytes;
}

uint64_t GatheredHeaderBytes(std::span<const SelectedColumn> selected) {
  // Per column: its own tag and length, the name's, type, length and null_count
  // varints, and the tags and lengths of data, offsets and validity.
  constexpr uint64_t kPerColumn = 6 + 6 + 11 + 11 + 11 + 3 * 6;
  uint64_t bytes = 0;
  for (const SelectedColumn& c : selected) bytes += kPerColumn + c.name.size();
  return bytes;
}

size_t VariableWidthCount(std::span<const SelectedColumn> selected) {
  size_t n = 0;
  for (const SelectedColumn& c : selected) n += engine::IsVariableWidth(c.type) ? 1 : 0;
  return n;
}

GatherTarget::GatherTarget(std::span<const SelectedColumn> selected, uint64_t rows,
                           uint64_t max_string_bytes,
                           google::protobuf::RepeatedPtrField<v1::Column>* out)
    : max_string_bytes_(max_string_bytes) {
  // Reserved up front: the engine outputs point at the targets' null counts.
  targets_.reserve(selected.size());
  for (const SelectedColumn& c : selected) {
    Target t;
    t.column = c.column;
    t.type = c.type;
    t.message = out->Add();
    t.message->set_name(c.name);
    t.message->set_type(ToWireColumnType(c.type));
    t.message->set_length(rows);
    if (engine::IsVariableWidth(c.type)) {
      t.offsets.emplace(t.message->mutable_offsets(), rows + 1);
    } else if (c.type == engine::ColumnType::kBool) {
      t.message->mutable_data()->resize(engine::BitmapBytes(rows));
    } else {
      t.message->mutable_data()->resize(rows * engine::ColumnWidth(c.type));
    }
    t.message->mutable_validity()->resize(engine::BitmapBytes(rows));
    targets_.push_back(std::move(t));
  }
}

std::vector<engine::GatherOutput> GatherTarget::Outputs() {
  std::vector<engine::GatherOutput> outputs;
  outputs.reserve(targets_.size());
  for (Target& t : targets_) {
    engine::GatherOutput o;
    o.column = t.column;
    o.validity =
        std::span<uint8_t>(reinterpret_cast<uint8_t*>(t.message->mutable_validity()->data()),
                           t.message->validity().size());
    if (t.offsets) {
      o.offsets = t.offsets->span();
      o.string_bytes = t.message->mutable_data();
      o.max_string_bytes = max_string_bytes_;
    } else {
      o.data = std::span<std::byte>(reinterpret_cast<std::byte*>(t.message->mutable_data()->data()),
                                    t.message->data().size());
    }
    o.null_count = &t.null_count;
    outputs.push_back(o);
  }
  return outputs;
}

uint64_t GatherTarget::Finish(uint64_t kept) {
  uint64_t bytes = 0;
  for (Target& t : targets_) {
    v1::Column* m = t.message;
    m->set_length(kept);
    if (t.offsets) {
      t.offsets->Finish(kept + 1);
    } else if (t.type == engine::ColumnType::kBool) {
      m->mutable_data()->resize(engine::BitmapBytes(kept));
      ClearTail(m->mutable_data(), kept);
    } else {
      m->mutable_data()->resize(kept * engine::ColumnWidth(t.type));
    }
    if (t.null_count == 0) {
      m->clear_validity();
    } else {
      m->mutable_validity()->resize(engine::BitmapBytes(kept));
      ClearTail(m->mutable_validity(), kept);
    }
    m->set_null_count(t.null_count);
    bytes += m->data().size() + m->offsets().size() + m->validity().size();
  }
  return bytes;
}

}  // namespace gpujoin::server
