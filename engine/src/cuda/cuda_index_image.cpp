#include "cuda/cuda_index_image.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cuda/cuda_error.hpp"
#include "cuda/device_buffer.hpp"
#include "cuda/index/table.hpp"
#include "cuda/payload/record_layout.hpp"
#include "gpujoin/common/status_macros.hpp"

namespace gpujoin::engine::detail {
namespace {

// Bytes of one staging chunk; two of them alternate, so that filling (or
// draining) one overlaps the copy of the other.
constexpr size_t kChunkBytes = size_t{32} << 20;

// A stream of its own and two page-locked chunks (ordinary memory when
// page-locked memory is short: the copies then stop overlapping, nothing else).
class Transfer {
 public:
  static absl::StatusOr<std::unique_ptr<Transfer>> Create(int device) {
    auto t = std::unique_ptr<Transfer>(new Transfer());
    GPUJOIN_CUDA_RETURN(cudaSetDevice(device), "select device");
    GPUJOIN_CUDA_RETURN(cudaStreamCreateWithFlags(&t->stream_, cudaStreamNonBlocking),
                        "create image stream");
    for (int i = 0; i < 2; ++i) {
      auto pinned = PinnedBuffer::Allocate(kChunkBytes, "image staging");
      if (pinned.ok()) {
        t->pinned_[i] = std::move(*pinned);
        t->chunk_[i] = t->pinned_[i].data();
      } else {
        (void)cudaGetLastError();
        t->pageable_[i].resize(kChunkBytes);
        t->chunk_[i] = t->pageable_[i].data();
      }
      GPUJOIN_CUDA_RETURN(cudaEventCreateWithFlags(&t->done_[i], cudaEventDisableTiming),
                          "create image event");
    }
    return t;
  }
  ~Transfer() {
    if (stream_ != nullptr) (void)cudaStreamSynchronize(stream_);
    for (cudaEvent_t e : done_) {
      if (e != nullptr) (void)cudaEventDestroy(e);
    }
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  }

  /// Writes `bytes` bytes at device address `dst`; fill(out, offset, n) writes
  /// bytes [offset, offset + n) of the source to `out`. Chunks and the parts of
  /// a chunk filled in parallel are whole multiples of `unit` bytes (a slot
  /// word, a payload record), so that fill never sees a split unit.
  absl::Status Upload(void* dst, size_t bytes, size_t unit,
                      const std::function<void(uint8_t*, size_t, size_t)>& fill) {
    const size_t chunk_bytes = kChunkBytes / unit * unit;
    for (size_t offset = 0; offset < bytes; offset += chunk_bytes) {
      const size_t n = std::min(chunk_bytes, bytes - offset);
      GPUJOIN_CUDA_RETURN(cudaEventSynchronize(done_[next_]), "wait for image staging");
      InParallel(n, unit, [&](size_t begin, size_t part) {
        fill(chunk_[next_] + begin, offset + begin, part);
      });
      GPUJOIN_CUDA_RETURN(cudaMemcpyAsync(static_cast<uint8_t*>(dst) + offset, chunk_[next_], n,
                                          cudaMemcpyHostToDevice, stream_),
                          "upload index image");
      GPUJOIN_CUDA_RETURN(cudaEventRecord(done_[next_], stream_), "record image event");
      next_ ^= 1;
    }
    return absl::OkStatus();
  }

  /// Reads `bytes` bytes from device address `src`; drain(in, offset, n) takes
  /// bytes [offset, offset + n) (parts of a chunk in parallel, whole multiples
  /// of `unit`; kChunkBytes is a multiple of every unit used).
  absl::Status Download(const void* src, size_t bytes, size_t unit,
                        const std::function<void(const uint8_t*, size_t, size_t)>& drain) {
    // Two chunks in flight: queue the copy of chunk k + 1 before draining chunk k.
    size_t queued = 0, drained = 0;
    auto queue = [&]() -> absl::Status {
      const size_t n = std::min(kChunkBytes, bytes - queued);
      const int slot = int((queued / kChunkBytes) & 1);
      GPUJOIN_CUDA_RETURN(cudaMemcpyAsync(chunk_[slot], static_cast<const uint8_t*>(src) + queued,
                                          n, cudaMemcpyDeviceToHost, stream_),
                          "download index image");
      GPUJOIN_CUDA_RETURN(cudaEventRecord(done_[slot], stream_), "record image event");
      queued += n;
      return absl::OkStatus();
    };
    if (bytes > 0) GPUJOIN_RETURN_IF_ERROR(queue());
    while (drained < bytes) {
      const int slot = int((drained / kChunkBytes) & 1);
      const size_t n = std::min(kChunkBytes, bytes - drained);
      GPUJOIN_CUDA_RETURN(cudaEventSynchronize(done_[slot]), "wait for index image");
      if (queued < bytes) GPUJOIN_RETURN_IF_ERROR(queue());
      InParallel(n, unit, [&](size_t begin, size_t part) {
        drain(chunk_[slot] + begin, drained + begin, part);
      });
      drained += n;
    }
    return absl::OkStatus();
  }

  /// Waits for every queued upload.
  absl::Status Finish() {
    GPUJOIN_CUDA_RETURN(cudaStreamSynchronize(stream_), "finish index image");
    return absl::OkStatus();
  }

 private:
  Transfer() = default;

  // Runs fn(begin, part) over [0, n) in parts of whole units on up to 8 host
  // threads: the conversions of the table and the records are memory bound,
  // and one thread alone would bound the restore below the PCIe copy.
  static void InParallel(size_t n, size_t unit, const std::function<void(size_t, size_t)>& fn) {
    constexpr size_t kMinPart = size_t{4} << 20;
    const size_t units = n / unit;
    const size_t threads = std::clamp<size_t>(
        std::min<size_t>(std::thread::hardware_concurrency(), n / kMinPart), 1, 8);
    if (threads <= 1) {
      fn(0, n);
      return;
    }
    const size_t per = (units + threads - 1) / threads;
    // Part p: units [p * per, (p + 1) * per); the last one also takes a tail
    // shorter than a unit (none where n is a multiple of it, as callers make it).
    auto bounds = [&](size_t p) {
      const size_t begin = std::min(units, p * per) * unit;
      const size_t end = p + 1 == threads ? n : std::min(units, (p + 1) * per) * unit;
      return std::pair<size_t, size_t>{begin, end};
    };
    std::vector<std::thread> pool;
    for (size_t p = 1; p < threads; ++p) {
      const auto [begin, end] = bounds(p);
      if (end > begin) pool.emplace_back([&fn, begin, end] { fn(begin, end - begin); });
    }
    const auto [begin, end] = bounds(0);
    if (end > begin) fn(begin, end - begin);
    for (auto& th : pool) th.join();
  }

  cudaStream_t stream_ = nullptr;
  PinnedBuffer pinned_[2];
  std::vector<uint8_t> pageable_[2];
  uint8_t* chunk_[2] = {nullptr, nullptr};
  cudaEvent_t done_[2] = {nullptr, nullptr};
  int next_ = 0;
};

// Copies `bytes` of host memory into a chunk.
std::function<void(uint8_t*, size_t, size_t)> FromHost(const void* src) {
  return [src](uint8_t* chunk, size_t offset, size_t n) {
    std::memcpy(chunk, static_cast<const uint8_t*>(src) + offset, n);
  };
}
std::function<void(const uint8_t*, size_t, size_t)> ToHost(void* dst) {
  return [dst](const uint8_t* chunk, size_t offset, size_t n) {
    std::memcpy(static_cast<uint8_t*>(dst) + offset, chunk, n);
  };
}

// Copies `count` values of `width` bytes, `src_stride` bytes apart from `src`
// to `dst_stride` bytes apart at `dst`: between a dense column and the payload
// records. The record widths (8 and 4) copy as constant-size moves, where a
// memcpy of a run-time size is a library call per value.
template <size_t Width>
void CopyValues(const std::byte* src, size_t src_stride, std::byte* dst, size_t dst_stride,
                uint64_t count) {
  for (uint64_t i = 0; i < count; ++i) {
    std::memcpy(dst + i * dst_stride, src + i * src_stride, Width);
  }
}
void CopyValues(size_t width, const std::byte* src, size_t src_stride, std::byte* dst,
                size_t dst_stride, uint64_t count) {
  switch (width) {
    case 8:
      return CopyValues<8>(src, src_stride, dst, dst_stride, count);
    case 4:
      return CopyValues<4>(src, src_stride, dst, dst_stride, count);
    default:
      for (uint64_t i = 0; i < count; ++i) {
        std::memcpy(dst + i * dst_stride, src + i * src_stride, width);
      }
  }
}

// Bitmap bits past `bits` cleared (the pad slots of a tiny table are empty, so
// this only guards against a stray bit).
void ClearTail(ImageBuffer& bitmap, uint64_t bits) {
  if (bits % 8 == 0 || bitmap.size() == 0) return;
  auto& last = bitmap.data()[bitmap.size() - 1];
  last = std::byte(uint8_t(last) & uint8_t((1u << (bits % 8)) - 1));
}

// The image's key word of key kind K: the key, or a key schema's fingerprint.
template <IndexKey K>
using ImageKey = std::conditional_t<KeyWord<K>, K, uint64_t>;

// Slot word <-> the image's (key, value) of a slot. Empty: the reserved key
// and value 0, or (a key schema's) fingerprint 0 and row kNoRow.
template <IndexKey K>
void ImageOfSlot(SlotWord<K> w, ImageKey<K>& key, uint32_t& value) {
  if constexpr (std::is_same_v<K, uint32_t>) {
    key = uint32_t(w >> 32);
    value = key == kEmptyKeyOf<K> ? 0u : uint32_t(w);
  } else if constexpr (std::is_same_v<K, uint64_t>) {
    key = w.key;
    value = key == kEmptyKeyOf<K> ? 0u : uint32_t(w.tag);
  } else {
    const bool empty = w.tag == kEmptySlot;
    key = empty ? 0 : w.key;
    value = empty ? kEmptySlotRow : uint32_t(w.tag);
  }
}
template <IndexKey K>
SlotWord<K> SlotOfImage(ImageKey<K> key, uint32_t value) {
  if constexpr (std::is_same_v<K, uint32_t>) {
    return key == kEmptyKeyOf<K> ? kEmptySlot : (uint64_t(key) << 32) | value;
  } else if constexpr (std::is_same_v<K, uint64_t>) {
    return key == kEmptyKeyOf<K> ? Slot64{kEmptySlot, kEmptySlot} : Slot64{key, uint64_t(value)};
  } else {
    return value == kEmptySlotRow ? Slot64{kEmptySlot, kEmptySlot} : Slot64{key, uint64_t(value)};
  }
}

template <IndexKey K>
absl::Status ExportTable(const CudaHashIndex& index, Transfer& t, IndexImage& image) {
  const size_t capacity = index.spec().capacity;
  image.keys = ImageBuffer(capacity * sizeof(ImageKey<K>));
  image.values = ImageBuffer(capacity * 4);
  ImageKey<K>* keys = image.keys.as<ImageKey<K>>().data();
  uint32_t* values = image.values.as<uint32_t>().data();
  using Word = SlotWord<K>;
  return t.Download(index.table<K>().slots, capacity * sizeof(Word), sizeof(Word),
                    [&](const uint8_t* chunk, size_t offset, size_t n) {
                      const Word* words = reinterpret_cast<const Word*>(chunk);
                      const size_t first = offset / sizeof(Word);
                      for (size_t i = 0; i < n / sizeof(Word); ++i) {
                        ImageOfSlot<K>(words[i], keys[first + i], values[first + i]);
                      }
                    });
}

template <IndexKey K>
absl::Status ImportTable(const IndexImage& image, CudaHashIndex& index, Transfer& t) {
  const size_t capacity = image.spec.capacity;
  const ImageKey<K>* keys = image.keys.as<ImageKey<K>>().data();
  const uint32_t* values = image.values.as<uint32_t>().data();
  using Word = SlotWord<K>;
  // The pad of a table under 4 slots stays as Create left it (empty).
  return t.Upload(index.table<K>().slots, capacity * sizeof(Word), sizeof(Word),
                  [&](uint8_t* chunk, size_t offset, size_t n) {
                    Word* words = reinterpret_cast<Word*>(chunk);
                    const size_t first = offset / sizeof(Word);
                    for (size_t i = 0; i < n / sizeof(Word); ++i) {
                      words[i] = SlotOfImage<K>(keys[first + i], values[first + i]);
                    }
                  });
}

// A key schema's stored key columns and row values into the image (the CPU
// backend's layout: uint64 offsets, validity only where the build had nulls).
absl::Status ExportKeys(const CudaHashIndex& index, Transfer& t, IndexImage& image) {
  const CudaKeys& keys = index.keys();
  const std::vector<ColumnType>& types = index.spec().key_columns;
  const uint64_t rows = keys.rows;
  for (size_t c = 0; c < types.size() && !keys.data.empty(); ++c) {
    PayloadImage p;
    p.type = types[c];
    if (IsVariableWidth(types[c])) {
      p.offsets = ImageBuffer((rows + 1) * 8);
      GPUJOIN_RETURN_IF_ERROR(
          t.Download(keys.offsets[c].data(), p.offsets.size(), 1, ToHost(p.offsets.data())));
      p.data = ImageBuffer(p.offsets.as<uint64_t>()[rows]);
    } else {
      p.data = ImageBuffer(rows * ColumnWidth(types[c]));
    }
    GPUJOIN_RETURN_IF_ERROR(
        t.Download(keys.data[c].data(), p.data.size(), 1, ToHost(p.data.data())));
    p.nullable = keys.validity[c].size() != 0;
    if (p.nullable) {
      p.validity = ImageBuffer(BitmapBytes(rows));
      GPUJOIN_RETURN_IF_ERROR(
          t.Download(keys.validity[c].data(), p.validity.size(), 1, ToHost(p.validity.data())));
    }
    image.key_columns.push_back(std::move(p));
  }
  image.row_values = ImageBuffer(rows * 4);
  GPUJOIN_RETURN_IF_ERROR(t.Download(keys.row_values.data(), image.row_values.size(), 1,
                                     ToHost(image.row_values.data())));
  // The image's null counts, which the device does not keep.
  for (PayloadImage& p : image.key_columns) {
    if (!p.nullable) continue;
    uint64_t nulls = 0;
    for (uint64_t r = 0; r < rows; ++r) nulls += BitAt(p.validity.as<uint8_t>(), r) ? 0 : 1;
    p.null_count = nulls;
    ClearTail(p.validity, rows);
  }
  return absl::OkStatus();
}

// A key schema's key columns and row values from the image, as a build stores
// them (CudaKeys). Uploads are queued on `t` (Finish waits for them).
absl::StatusOr<CudaKeys> ImportKeys(const IndexImage& image, int device, Transfer& t) {
  CudaKeys keys;
  keys.rows = image.row_values.size() / 4;
  std::vector<HashView> views;
  for (size_t c = 0; c < image.key_columns.size(); ++c) {
    const PayloadImage& p = image.key_columns[c];
    const ImageBuffer& bytes = p.data;
    GPUJOIN_ASSIGN_OR_RETURN(
        auto data, CudaHashIndex::AllocatePayload<uint8_t>(StoredKeyDataBytes(bytes.size()), device,
                                                           "key column values"));
    GPUJOIN_RETURN_IF_ERROR(
        t.Upload(data.data(), data.bytes(), 1, [&](uint8_t* chunk, size_t offset, size_t n) {
          const size_t have = offset < bytes.size() ? std::min(n, bytes.size() - offset) : 0;
          if (have > 0) std::memcpy(chunk, bytes.data() + offset, have);
          std::memset(chunk + have, 0, n - have);
        }));
    DeviceBuffer<int64_t> offsets;
    if (p.offsets.size() > 0) {
      GPUJOIN_ASSIGN_OR_RETURN(offsets, CudaHashIndex::AllocatePayload<int64_t>(
                                            p.offsets.size() / 8, device, "key column offsets"));
      GPUJOIN_RETURN_IF_ERROR(
          t.Upload(offsets.data(), p.offsets.size(), 1, FromHost(p.offsets.data())));
    }
    DeviceBuffer<uint8_t> validity;
    if (p.nullable) {
      GPUJOIN_ASSIGN_OR_RETURN(validity, CudaHashIndex::AllocatePayload<uint8_t>(
                                             p.validity.size(), device, "key column validity"));
      GPUJOIN_RETURN_IF_ERROR(
          t.Upload(validity.data(), p.validity.size(), 1, FromHost(p.validity.data())));
    }
    views.push_back(
        StoredKeyView(image.spec.key_columns[c], data.data(), offsets.data(), validity.data()));
    keys.data.push_back(std::move(data));
    keys.offsets.push_back(std::move(offsets));
    keys.validity.push_back(std::move(validity));
  }
  GPUJOIN_ASSIGN_OR_RETURN(keys.views, CudaHashIndex::AllocatePayload<HashView>(
                                           views.size(), device, "key column views"));
  GPUJOIN_ASSIGN_OR_RETURN(
      keys.row_values, CudaHashIndex::AllocatePayload<uint32_t>(keys.rows, device, "row values"));
  GPUJOIN_RETURN_IF_ERROR(
      t.Upload(keys.views.data(), views.size() * sizeof(HashView), 1, FromHost(views.data())));
  GPUJOIN_RETURN_IF_ERROR(t.Upload(keys.row_values.data(), image.row_values.size(), 1,
                                   FromHost(image.row_values.data())));
  // `views` is read by the queued copy.
  GPUJOIN_RETURN_IF_ERROR(t.Finish());
  return keys;
}

}  // namespace

absl::StatusOr<IndexImage> ExportCudaIndex(const CudaHashIndex& index) {
  GPUJOIN_ASSIGN_OR_RETURN(auto t, Transfer::Create(index.device()));
  IndexImage image;
  image.spec = index.spec();
  image.statistics = index.build_statistics();
  image.built_rows = index.built_rows();
  image.built = index.built();
  const uint64_t capacity = index.spec().capacity;
  if (index.key_type() == KeyType::kColumns) {
    GPUJOIN_RETURN_IF_ERROR(ExportTable<ColumnKey>(index, *t, image));
    GPUJOIN_RETURN_IF_ERROR(ExportKeys(index, *t, image));
  } else if (index.key_type() == KeyType::kUint64) {
    GPUJOIN_RETURN_IF_ERROR(ExportTable<uint64_t>(index, *t, image));
  } else {
    GPUJOIN_RETURN_IF_ERROR(ExportTable<uint32_t>(index, *t, image));
  }
  const CudaGroups& groups = index.stored_groups();
  if (index.keeps_all()) {
    image.group_ranges = ImageBuffer(capacity * sizeof(GroupRange));
    if (groups.ranges.size() == 0) {  // no build finished: every group empty
      std::memset(image.group_ranges.data(), 0, image.group_ranges.size());
    } else {
      GPUJOIN_RETURN_IF_ERROR(t->Download(groups.ranges.data(), image.group_ranges.size(), 1,
                                          ToHost(image.group_ranges.data())));
    }
    image.group_values = ImageBuffer(groups.values.bytes());
    GPUJOIN_RETURN_IF_ERROR(t->Download(groups.values.data(), groups.values.bytes(), 1,
                                        ToHost(image.group_values.data())));
  }
  const uint64_t positions =
      index.keeps_all() ? groups.values.size() : capacity;  // the canonical count
  const CudaPayload& stored = index.stored_payload();
  const std::vector<PayloadColumnInfo>& infos = index.payload();
  // The records once, then each fixed-width column out of them.
  ImageBuffer records;  // not zeroed first: the download writes every byte
  if (stored.stride > 0 && positions > 0) {
    records = ImageBuffer(positions * stored.stride);
    GPUJOIN_RETURN_IF_ERROR(
        t->Download(stored.records.data(), records.size(), 1, ToHost(records.data())));
  }
  for (size_t c = 0; c < stored.columns.size(); ++c) {
    const CudaPayloadColumn& column = stored.columns[c];
    PayloadImage p;
    p.type = column.type;
    p.nullable = column.validity.size() != 0;
    p.null_count = c < infos.size() ? infos[c].null_count : 0;
    if (column.record_offset != kNotInRecord) {
      const size_t width = ColumnWidth(column.type);
      p.data = ImageBuffer(positions * width);
      CopyValues(width, records.data() + column.record_offset, stored.stride, p.data.data(), width,
                 positions);
    } else if (column.type == ColumnType::kBool) {
      p.data = ImageBuffer(BitmapBytes(positions));
      GPUJOIN_RETURN_IF_ERROR(
          t->Download(column.data.data(), p.data.size(), 1, ToHost(p.data.data())));
      ClearTail(p.data, positions);
    } else {
      p.offsets = ImageBuffer((positions + 1) * 8);
      GPUJOIN_RETURN_IF_ERROR(
          t->Download(column.offsets.data(), p.offsets.size(), 1, ToHost(p.offsets.data())));
      // The pad slots of a tiny table are empty: the bytes end at offsets[positions].
      p.data = ImageBuffer(p.offsets.as<uint64_t>()[positions]);
      GPUJOIN_RETURN_IF_ERROR(
          t->Download(column.data.data(), p.data.size(), 1, ToHost(p.data.data())));
    }
    if (p.nullable) {
      p.validity = ImageBuffer(BitmapBytes(positions));
      GPUJOIN_RETURN_IF_ERROR(
          t->Download(column.validity.data(), p.validity.size(), 1, ToHost(p.validity.data())));
      ClearTail(p.validity, positions);
    }
    image.payload.push_back(std::move(p));
  }
  GPUJOIN_RETURN_IF_ERROR(t->Finish());
  return image;
}

absl::StatusOr<std::unique_ptr<CudaHashIndex>> ImportCudaIndex(const IndexImage& image, int device,
                                                               uint32_t fingerprint_bits) {
  GPUJOIN_ASSIGN_OR_RETURN(auto index, CudaHashIndex::Create(image.spec, device, fingerprint_bits));
  GPUJOIN_ASSIGN_OR_RETURN(auto t, Transfer::Create(device));
  if (image.spec.key_type == KeyType::kColumns) {
    GPUJOIN_RETURN_IF_ERROR(ImportTable<ColumnKey>(image, *index, *t));
    GPUJOIN_ASSIGN_OR_RETURN(CudaKeys keys, ImportKeys(image, device, *t));
    index->SetKeys(std::move(keys));
  } else if (image.spec.key_type == KeyType::kUint64) {
    GPUJOIN_RETURN_IF_ERROR(ImportTable<uint64_t>(image, *index, *t));
  } else {
    GPUJOIN_RETURN_IF_ERROR(ImportTable<uint32_t>(image, *index, *t));
  }
  const uint64_t capacity = image.spec.capacity;
  const bool keep_all = image.spec.duplicates == DuplicatePolicy::kKeepAll;
  if (keep_all) {
    CudaGroups groups;
    GPUJOIN_ASSIGN_OR_RETURN(groups.ranges, CudaHashIndex::AllocatePayload<GroupRange>(
                                                capacity, device, "group ranges"));
    GPUJOIN_ASSIGN_OR_RETURN(groups.values,
                             CudaHashIndex::AllocatePayload<uint32_t>(image.group_values.size() / 4,
                                                                      device, "group values"));
    GPUJOIN_RETURN_IF_ERROR(t->Upload(groups.ranges.data(), image.group_ranges.size(), 1,
                                      FromHost(image.group_ranges.data())));
    GPUJOIN_RETURN_IF_ERROR(t->Upload(groups.values.data(), image.group_values.size(), 1,
                                      FromHost(image.group_values.data())));
    GPUJOIN_RETURN_IF_ERROR(t->Finish());
    index->SetGroups(std::move(groups));
  }
  // Positions in the image, and what the CUDA layout stores (a tiny table's pad).
  const uint64_t positions = image.shape().positions();
  const uint64_t slots = keep_all ? positions : TableAllocationSlots(image.spec.capacity);
  std::vector<ColumnType> types;
  for (const PayloadImage& p : image.payload) types.push_back(p.type);
  const PayloadRecordLayout layout = RecordLayoutOf(types);
  CudaPayload stored;
  stored.stride = layout.stride;
  if (layout.stride > 0) {
    GPUJOIN_ASSIGN_OR_RETURN(
        stored.records, CudaHashIndex::AllocatePayload<uint8_t>(layout.RecordBytes(slots), device,
                                                                "payload records"));
    // Record by record: the chunk's records interleave every fixed-width column.
    // Records without padding are covered by their values (RecordLayoutOf packs
    // them from offset 0), so only the records past `positions` need zeros.
    const bool padded = layout.stride != layout.value_bytes;
    GPUJOIN_RETURN_IF_ERROR(t->Upload(
        stored.records.data(), stored.records.bytes(), layout.stride,
        [&](uint8_t* chunk, size_t offset, size_t n) {
          const uint64_t first = offset / layout.stride;
          const uint64_t count = n / layout.stride;
          const uint64_t live = first < positions ? std::min(count, positions - first) : 0;
          if (padded) {
            std::memset(chunk, 0, n);
          } else if (live < count) {
            std::memset(chunk + live * layout.stride, 0, (count - live) * layout.stride);
          }
          for (size_t c = 0; c < image.payload.size() && live > 0; ++c) {
            if (layout.offsets[c] == kNotInRecord) continue;
            const size_t width = ColumnWidth(types[c]);
            CopyValues(width, image.payload[c].data.data() + first * width, width,
                       reinterpret_cast<std::byte*>(chunk) + layout.offsets[c], layout.stride,
                       live);
          }
        }));
  }
  std::vector<PayloadColumnInfo> infos;
  for (size_t c = 0; c < image.payload.size(); ++c) {
    const PayloadImage& p = image.payload[c];
    CudaPayloadColumn column;
    column.type = p.type;
    // Bitmaps of `slots` bits: the pad (if any) shares the image's last byte.
    auto upload_bitmap = [&](const ImageBuffer& bits, DeviceBuffer<uint8_t>& out,
                             const char* what) -> absl::Status {
      GPUJOIN_ASSIGN_OR_RETURN(
          out, CudaHashIndex::AllocatePayload<uint8_t>(BitmapBytes(slots), device, what));
      return t->Upload(out.data(), out.bytes(), 1, [&](uint8_t* chunk, size_t offset, size_t n) {
        const size_t have = offset < bits.size() ? std::min(n, bits.size() - offset) : 0;
        if (have > 0) std::memcpy(chunk, bits.data() + offset, have);
        std::memset(chunk + have, 0, n - have);
      });
    };
    if (layout.offsets[c] != kNotInRecord) {
      column.record_offset = layout.offsets[c];
      column.record_bytes = slots * ColumnWidth(p.type);
      if (c == layout.padded_column) column.record_bytes += layout.PaddingBytes(slots);
    } else if (p.type == ColumnType::kBool) {
      GPUJOIN_RETURN_IF_ERROR(upload_bitmap(p.data, column.data, "payload"));
    } else {
      GPUJOIN_ASSIGN_OR_RETURN(column.offsets, CudaHashIndex::AllocatePayload<uint64_t>(
                                                   slots + 1, device, "payload offsets"));
      const std::span<const uint64_t> offsets = p.offsets.as<uint64_t>();
      GPUJOIN_RETURN_IF_ERROR(t->Upload(column.offsets.data(), column.offsets.bytes(), 8,
                                        [&](uint8_t* chunk, size_t offset, size_t n) {
                                          uint64_t* out = reinterpret_cast<uint64_t*>(chunk);
                                          const size_t first = offset / 8;
                                          for (size_t i = 0; i < n / 8; ++i) {
                                            out[i] =
                                                offsets[std::min<size_t>(first + i, positions)];
                                          }
                                        }));
      GPUJOIN_ASSIGN_OR_RETURN(column.data, CudaHashIndex::AllocatePayload<uint8_t>(
                                                p.data.size(), device, "payload string bytes"));
      GPUJOIN_RETURN_IF_ERROR(
          t->Upload(column.data.data(), p.data.size(), 1, FromHost(p.data.data())));
    }
    if (p.nullable)
      GPUJOIN_RETURN_IF_ERROR(upload_bitmap(p.validity, column.validity, "payload validity"));
    infos.push_back(PayloadColumnInfo{p.type, p.null_count, column.bytes()});
    stored.columns.push_back(std::move(column));
  }
  // The chunks' fills referenced the image and the columns: wait before returning.
  GPUJOIN_RETURN_IF_ERROR(t->Finish());
  index->SetPayload(std::move(stored));
  if (image.built) index->RecordBuild(image.statistics, image.built_rows, std::move(infos));
  return index;
}

}  // namespace gpujoin::engine::detail
