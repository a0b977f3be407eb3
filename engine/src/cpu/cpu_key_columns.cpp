#include "cpu/cpu_key_columns.hpp"

#include <algorithm>
#include <cstring>

#include "common/key_columns.hpp"
#include "gpujoin/common/bitmap.hpp"
#include "hashing/hash_host.hpp"

namespace gpujoin::engine::cpu {

StoredKeys::StoredKeys(const std::vector<ColumnType>& types, uint64_t rows, bool validity,
                       std::span<const uint64_t> value_bytes)
    : types_(types), columns_(types.size()), capacity_(rows), validity_(validity) {
  for (size_t c = 0; c < types.size(); ++c) {
    Column& col = columns_[c];
    if (IsVariableWidth(types[c])) {
      col.offsets.reserve(rows + 1);
      col.offsets.push_back(0);
      if (c < value_bytes.size()) col.data.reserve(value_bytes[c]);
    } else {
      col.data.reserve(rows * ColumnWidth(types[c]));
    }
    if (validity) col.validity.assign(BitmapBytes(rows), 0);
  }
  RefreshView();
}

void StoredKeys::Append(const KeyColumns& keys) {
  const uint64_t rows = keys.rows();
  for (size_t c = 0; c < columns_.size(); ++c) {
    const HashColumn& in = keys.columns[c];
    Column& col = columns_[c];
    if (IsVariableWidth(types_[c])) {
      for (uint64_t r = 0; r < rows; ++r) {
        const detail::KeyValue v = detail::KeyValueAt(in, r);
        col.data.insert(col.data.end(), v.data, v.data + v.size);
        col.offsets.push_back(static_cast<int64_t>(col.data.size()));
      }
    } else if (rows > 0) {
      const size_t width = ColumnWidth(types_[c]);
      const uint8_t* from = in.data.data() + in.offset * width;
      col.data.insert(col.data.end(), from, from + rows * width);
    }
    if (validity_) {
      for (uint64_t r = 0; r < rows; ++r) {
        const bool valid = in.validity.empty() || BitAt(in.validity, in.offset + r);
        SetBit(col.validity.data(), rows_ + r, valid);
      }
    }
  }
  rows_ += rows;
  RefreshView();
}

uint64_t StoredKeys::bytes() const {
  uint64_t bytes = 0;
  for (const Column& col : columns_) {
    bytes += col.data.size() + col.offsets.size() * sizeof(int64_t) + col.validity.size();
  }
  return bytes;
}

std::vector<PayloadImage> StoredKeys::ToImages() const {
  std::vector<PayloadImage> out;
  for (size_t c = 0; c < columns_.size(); ++c) {
    const Column& col = columns_[c];
    PayloadImage p;
    p.type = types_[c];
    p.nullable = validity_;
    if (validity_) {
      uint64_t nulls = 0;
      for (uint64_t r = 0; r < rows_; ++r) nulls += BitAt(col.validity, r) ? 0 : 1;
      p.null_count = nulls;
      p.validity = ImageBuffer(BitmapBytes(rows_));
      if (rows_ > 0) std::memcpy(p.validity.data(), col.validity.data(), BitmapBytes(rows_));
    }
    const uint64_t data_bytes =
        IsVariableWidth(types_[c]) ? static_cast<uint64_t>(col.offsets.back())
                                   : rows_ * ColumnWidth(types_[c]);
    p.data = ImageBuffer(data_bytes);
    if (data_bytes > 0) std::memcpy(p.data.data(), col.data.data(), data_bytes);
    if (IsVariableWidth(types_[c])) {
      p.offsets = ImageBuffer((rows_ + 1) * sizeof(uint64_t));
      std::memcpy(p.offsets.data(), col.offsets.data(), (rows_ + 1) * sizeof(uint64_t));
    }
    out.push_back(std::move(p));
  }
  return out;
}

StoredKeys StoredKeys::FromImages(const std::vector<ColumnType>& types, uint64_t rows,
                                  const std::vector<PayloadImage>& images) {
  bool validity = false;
  std::vector<uint64_t> value_bytes;
  for (const PayloadImage& p : images) {
    validity = validity || p.nullable;
    value_bytes.push_back(p.data.size());
  }
  StoredKeys keys(types, rows, validity, value_bytes);
  for (size_t c = 0; c < types.size(); ++c) {
    const PayloadImage& p = images[c];
    Column& col = keys.columns_[c];
    const auto* bytes = reinterpret_cast<const uint8_t*>(p.data.data());
    col.data.assign(bytes, bytes + p.data.size());
    if (IsVariableWidth(types[c])) {
      const std::span<const uint64_t> offsets = p.offsets.as<uint64_t>();
      col.offsets.assign(offsets.begin(), offsets.end());
    }
    if (p.nullable) {
      std::memcpy(col.validity.data(), p.validity.data(), p.validity.size());
    } else if (validity) {
      for (uint64_t r = 0; r < rows; ++r) SetBit(col.validity.data(), r, true);
    }
  }
  keys.rows_ = rows;
  keys.RefreshView();
  return keys;
}

void StoredKeys::RefreshView() {
  view_.columns.resize(columns_.size());
  for (size_t c = 0; c < columns_.size(); ++c) {
    HashColumn& v = view_.columns[c];
    const Column& col = columns_[c];
    v.type = types_[c];
    v.data = col.data;
    v.large_offsets = col.offsets;
    v.validity = col.validity;
    v.offset = 0;
    v.length = rows_;
  }
  views_ = detail::KeyViews(view_);
}

void KeyFingerprints(const KeyColumns& keys, uint32_t bits, std::span<uint64_t> fps,
                     std::span<uint8_t> valid, ThreadPool& pool) {
  const uint64_t rows = keys.rows();
  if (rows == 0) return;
  HashNode node;
  node.columns = keys.columns;
  node.bits = HashBits::k64;
  node.out64 = fps;
  std::vector<uint8_t> bitmap(BitmapBytes(rows));
  node.out_validity = bitmap;
  // Ranges start at multiples of 8 so each owns whole validity bytes.
  constexpr uint64_t kMinRowsPerTask = 8192;
  const uint64_t tasks =
      std::clamp<uint64_t>(rows / kMinRowsPerTask, 1, uint64_t{pool.size()} * 4);
  const uint64_t per_task = ((rows + tasks - 1) / tasks + 7) / 8 * 8;
  const uint64_t mask = bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  pool.ParallelFor(tasks, [&](size_t t) {
    const uint64_t first = t * per_task;
    if (first >= rows) return;
    const uint64_t n = std::min(per_task, rows - first);
    detail::HashRowsHost(node, first, n);
    for (uint64_t r = first; r < first + n; ++r) {
      fps[r] &= mask;
      valid[r] = BitAt(bitmap, r) ? 1 : 0;
    }
  });
}

}  // namespace gpujoin::engine::cpu
