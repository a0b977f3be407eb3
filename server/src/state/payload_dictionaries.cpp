#include "state/payload_dictionaries.hpp"

#include <utility>

namespace gpujoin::server {

std::vector<engine::ColumnView> DictionaryBuild::Views() const {
  std::vector<engine::ColumnView> views;
  for (const engine::CodesColumn& c : codes) views.push_back(c.View());
  return views;
}

std::vector<engine::PayloadShape> DictionaryBuild::Shapes() const {
  std::vector<engine::PayloadShape> shapes;
  for (const engine::CodesColumn& c : codes) shapes.push_back(engine::PayloadShapeOf(c.View()));
  return shapes;
}

DictionaryBuild MakeDictionaries(std::span<const engine::ColumnView> payload,
                                 uint64_t max_values) {
  DictionaryBuild out;
  out.dictionaries = std::make_shared<std::vector<engine::PayloadDictionary>>();
  if (max_values == 0) return out;
  uint64_t value_bytes = 0;
  for (size_t c = 0; c < payload.size(); ++c) {
    if (!engine::IsVariableWidth(payload[c].type)) continue;
    engine::PayloadDictionary d;
    d.column = static_cast<uint32_t>(c);
    d.codes_column = static_cast<uint32_t>(payload.size() + out.codes.size());
    absl::StatusOr<engine::CodesColumn> codes = engine::EncodeColumn(
        payload[c], d.values, max_values, engine::kMaxDictionaryValueBytes - value_bytes);
    if (!codes.ok()) continue;  // too many distinct values: no dictionary
    value_bytes += d.values.value_bytes().size();
    out.bytes += d.values.bytes();
    out.codes.push_back(*std::move(codes));
    out.dictionaries->push_back(std::move(d));
  }
  return out;
}

DictionaryAppend::DictionaryAppend(const engine::HashIndex& index,
                                   std::span<const engine::ColumnView> payload,
                                   uint64_t max_values) {
  const std::vector<engine::PayloadDictionary>* dictionaries = index.dictionaries();
  if (dictionaries == nullptr) return;
  uint64_t value_bytes = 0;  // of every dictionary, with this batch's new values
  for (const engine::PayloadDictionary& d : *dictionaries) value_bytes += d.values.value_bytes().size();
  for (const engine::PayloadDictionary& d : *dictionaries) {
    Column& out = columns_.emplace_back();
    const uint64_t rows = d.column < payload.size() ? payload[d.column].rows : 0;
    out.codes.codes.assign(rows, 0);
    if (d.retired || rows == 0) {
      if (rows != 0) out.codes.validity.assign(engine::BitmapBytes(rows), 0);
      continue;
    }
    const engine::ColumnView& column = payload[d.column];
    absl::flat_hash_map<std::string, uint32_t> fresh;
    if (!column.validity.empty()) out.codes.validity.assign(engine::BitmapBytes(rows), 0);
    const char* base = reinterpret_cast<const char*>(column.data.data());
    for (uint64_t r = 0; r < rows && !out.retire; ++r) {
      if (!column.validity.empty()) {
        if (!engine::BitAt(column.validity, r)) continue;
        out.codes.validity[r / 8] |= uint8_t(1u << (r % 8));
      }
      const std::string_view value(base + column.offsets[r],
                                   column.offsets[r + 1] - column.offsets[r]);
      uint32_t code = d.values.Find(value);
      if (code == engine::StringDictionary::kAbsent) {
        auto [it, inserted] = fresh.try_emplace(std::string(value), 0);
        if (inserted) {
          if (d.values.size() + out.added.size() >= max_values ||
              value_bytes + value.size() > engine::kMaxDictionaryValueBytes) {
            out.retire = true;
            break;
          }
          value_bytes += value.size();
          it->second = static_cast<uint32_t>(d.values.size() + out.added.size());
          out.added.emplace_back(value);
        }
        code = it->second;
      }
      out.codes.codes[r] = code;
    }
    if (out.retire) {
      // Its values leave the total: the retired dictionary is emptied at Commit.
      for (const std::string& v : out.added) value_bytes -= v.size();
      value_bytes -= d.values.value_bytes().size();
      out.added.clear();
      out.codes.validity.assign(engine::BitmapBytes(rows), 0);
      std::fill(out.codes.codes.begin(), out.codes.codes.end(), 0u);
    }
  }
}

std::vector<engine::ColumnView> DictionaryAppend::Views() const {
  std::vector<engine::ColumnView> views;
  for (const Column& c : columns_) views.push_back(c.codes.View());
  return views;
}

uint64_t DictionaryAppend::GrowthBytes() const {
  uint64_t bytes = 0;
  for (const Column& c : columns_) {
    for (const std::string& v : c.added) {
      bytes += v.size() + sizeof(uint64_t) + 2 * sizeof(uint32_t) + 1;
    }
  }
  return bytes;
}

void DictionaryAppend::Commit(engine::HashIndex& index) const {
  std::vector<engine::PayloadDictionary>* dictionaries = index.mutable_dictionaries();
  if (dictionaries == nullptr) return;
  for (size_t i = 0; i < columns_.size() && i < dictionaries->size(); ++i) {
    engine::PayloadDictionary& d = (*dictionaries)[i];
    if (columns_[i].retire) {
      d.retired = true;
      d.values = engine::StringDictionary();  // its memory goes; the codes column stays null
    }
    if (d.retired) continue;
    for (const std::string& v : columns_[i].added) d.values.Add(v);
  }
}

}  // namespace gpujoin::server
