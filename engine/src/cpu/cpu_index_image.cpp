#include "cpu/cpu_index_image.hpp"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "cpu/cpu_hash_index.hpp"

namespace gpujoin::engine::cpu {
namespace {

// Slots per task of the table copies (a task copies 8-16 MiB at most).
constexpr size_t kSlotsPerTask = size_t{1} << 20;

// memcpy of `bytes` split over the pool (the copies of large arrays run at the
// memory bandwidth of several cores, not one).
void ParallelCopy(std::byte* dst, const std::byte* src, size_t bytes, ThreadPool& pool) {
  constexpr size_t kBytesPerTask = size_t{8} << 20;
  const size_t tasks = (bytes + kBytesPerTask - 1) / kBytesPerTask;
  if (tasks <= 1) {
    if (bytes != 0) std::memcpy(dst, src, bytes);
    return;
  }
  pool.ParallelFor(tasks, [&](size_t t) {
    const size_t begin = t * kBytesPerTask;
    std::memcpy(dst + begin, src + begin, std::min(kBytesPerTask, bytes - begin));
  });
}

template <class T>
ImageBuffer CopyOf(const HostArray<T>& array, ThreadPool& pool) {
  ImageBuffer out(array.size() * sizeof(T));
  ParallelCopy(out.data(), reinterpret_cast<const std::byte*>(array.data()), out.size(), pool);
  return out;
}

template <class T>
HostArray<T> ArrayOf(const ImageBuffer& buffer, ThreadPool& pool) {
  HostArray<T> out(buffer.size() / sizeof(T));
  ParallelCopy(reinterpret_cast<std::byte*>(out.data()), buffer.data(), buffer.size(), pool);
  return out;
}

template <IndexKey K>
IndexImage Export(const CpuHashIndex<K>& index, ThreadPool& pool) {
  using Word = typename CpuHashIndex<K>::Word;
  IndexImage image;
  image.spec = index.spec();
  image.statistics = index.build_statistics();
  image.built_rows = index.built_rows();
  image.built = index.built();
  const size_t capacity = index.spec().capacity;
  image.keys = ImageBuffer(capacity * sizeof(Word));
  image.values = ImageBuffer(capacity * sizeof(uint32_t));
  Word* keys = image.keys.as<Word>().data();
  uint32_t* values = image.values.as<uint32_t>().data();
  pool.ParallelFor((capacity + kSlotsPerTask - 1) / kSlotsPerTask, [&](size_t t) {
    const size_t begin = t * kSlotsPerTask;
    index.CopyTableOut(keys, values, begin, std::min(capacity, begin + kSlotsPerTask));
  });
  if (index.keeps_all()) {
    if (index.group_ranges().size() == 0) {  // never built: every group empty
      image.group_ranges = ImageBuffer(capacity * sizeof(GroupRange));
      std::memset(image.group_ranges.data(), 0, image.group_ranges.size());
    } else {
      image.group_ranges = CopyOf(index.group_ranges(), pool);
    }
    image.group_values = CopyOf(index.group_values(), pool);
  }
  const std::vector<PayloadColumnInfo>& infos = index.payload();
  const std::vector<StoredColumn>& stored = index.stored_payload();
  for (size_t c = 0; c < stored.size(); ++c) {
    PayloadImage p;
    p.type = stored[c].type;
    p.nullable = stored[c].validity.size() != 0;
    p.null_count = c < infos.size() ? infos[c].null_count : stored[c].null_count;
    p.data = CopyOf(stored[c].data, pool);
    p.offsets = CopyOf(stored[c].offsets, pool);
    p.validity = CopyOf(stored[c].validity, pool);
    image.payload.push_back(std::move(p));
  }
  if constexpr (std::is_same_v<K, ColumnKey>) {
    image.key_columns = index.stored_keys().ToImages();
    image.row_values = CopyOf(index.row_values(), pool);
  }
  return image;
}

template <IndexKey K>
std::unique_ptr<HashIndex> Import(const IndexImage& image, ThreadPool& pool,
                                  uint32_t fingerprint_bits) {
  using Word = typename CpuHashIndex<K>::Word;
  auto index = std::make_unique<CpuHashIndex<K>>(image.spec, fingerprint_bits);
  const size_t capacity = image.spec.capacity;
  if constexpr (std::is_same_v<K, ColumnKey>) {
    const uint64_t rows = image.row_values.size() / sizeof(uint32_t);
    index->SetKeys(StoredKeys::FromImages(image.spec.key_columns, rows, image.key_columns),
                   ArrayOf<uint32_t>(image.row_values, pool));
  }
  const Word* keys = image.keys.as<Word>().data();
  const uint32_t* values = image.values.as<uint32_t>().data();
  pool.ParallelFor((capacity + kSlotsPerTask - 1) / kSlotsPerTask, [&](size_t t) {
    const size_t begin = t * kSlotsPerTask;
    index->CopyTableIn(keys, values, begin, std::min(capacity, begin + kSlotsPerTask));
  });
  if (index->keeps_all()) {
    index->SetGroups(ArrayOf<GroupRange>(image.group_ranges, pool),
                     ArrayOf<uint32_t>(image.group_values, pool));
  }
  const uint64_t positions = image.shape().positions();
  std::vector<StoredColumn> columns;
  std::vector<PayloadColumnInfo> infos;
  for (const PayloadImage& p : image.payload) {
    StoredColumn s;
    s.type = p.type;
    s.slots = positions;
    s.data = ArrayOf<std::byte>(p.data, pool);
    s.offsets = ArrayOf<uint64_t>(p.offsets, pool);
    s.validity = ArrayOf<uint8_t>(p.validity, pool);
    s.null_count = p.null_count;
    infos.push_back(s.Info());
    columns.push_back(std::move(s));
  }
  index->SetPayload(std::move(columns));
  if (image.built) index->RecordBuild(image.statistics, image.built_rows, std::move(infos));
  return index;
}

}  // namespace

absl::StatusOr<IndexImage> ExportCpuIndex(const HashIndex& index, ThreadPool& pool) {
  if (const auto* i32 = dynamic_cast<const CpuHashIndex<uint32_t>*>(&index)) {
    return Export(*i32, pool);
  }
  if (const auto* i64 = dynamic_cast<const CpuHashIndex<uint64_t>*>(&index)) {
    return Export(*i64, pool);
  }
  if (const auto* columns = dynamic_cast<const CpuHashIndex<ColumnKey>*>(&index)) {
    return Export(*columns, pool);
  }
  return absl::InvalidArgumentError(absl::StrCat("export: the index belongs to the ",
                                                 std::string(BackendKindName(index.backend())),
                                                 " backend, not cpu"));
}

std::unique_ptr<HashIndex> ImportCpuIndex(const IndexImage& image, ThreadPool& pool,
                                          uint32_t fingerprint_bits) {
  switch (image.spec.key_type) {
    case KeyType::kUint64:
      return Import<uint64_t>(image, pool, fingerprint_bits);
    case KeyType::kColumns:
      return Import<ColumnKey>(image, pool, fingerprint_bits);
    default:
      return Import<uint32_t>(image, pool, fingerprint_bits);
  }
}

}  // namespace gpujoin::engine::cpu
