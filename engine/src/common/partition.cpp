#include "gpujoin/engine/partition.hpp"

#include <charconv>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "gpujoin/engine/hashing.hpp"
#include "hashing/hash_host.hpp"

namespace gpujoin::engine {

uint32_t JumpHash(uint64_t key, uint32_t buckets) {
  int64_t b = -1, j = 0;
  while (j < static_cast<int64_t>(buckets)) {
    b = j;
    key = key * 2862933555777941757ull + 1;
    j = static_cast<int64_t>(static_cast<double>(b + 1) *
                             (static_cast<double>(int64_t{1} << 31) /
                              static_cast<double>((key >> 33) + 1)));
  }
  return static_cast<uint32_t>(b);
}

namespace {

// The parts of the rows `node` hashes (its columns set; outputs are made here).
void PartsOfNode(HashNode node, uint64_t rows, uint32_t parts, std::span<uint32_t> out) {
  if (rows == 0) return;
  if (parts <= 1) {
    std::fill(out.begin(), out.begin() + static_cast<ptrdiff_t>(rows), 0u);
    return;
  }
  // In slices, so that a large batch needs little scratch memory.
  constexpr uint64_t kSlice = 1 << 16;
  std::vector<uint64_t> hashes(std::min(rows, kSlice));
  std::vector<uint8_t> validity(BitmapBytes(hashes.size()));
  for (uint64_t first = 0; first < rows; first += kSlice) {
    const uint64_t n = std::min(kSlice, rows - first);
    HashNode slice = node;
    for (HashColumn& c : slice.columns) {
      c.offset += first;
      c.length = n;
    }
    slice.bits = HashBits::k64;
    slice.out64 = std::span<uint64_t>(hashes.data(), n);
    slice.out_validity = std::span<uint8_t>(validity.data(), BitmapBytes(n));
    detail::HashRowsHost(slice);
    for (uint64_t r = 0; r < n; ++r) {
      out[first + r] = BitAt(slice.out_validity, r) ? PartitionOfHash(hashes[r], parts) : 0;
    }
  }
}

template <class K>
void WordParts(std::span<const K> keys, uint32_t parts, std::span<uint32_t> out) {
  HashColumn c;
  c.type = sizeof(K) == 4 ? ColumnType::kUint32 : ColumnType::kUint64;
  c.data = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(keys.data()), keys.size_bytes());
  c.length = keys.size();
  HashNode node;
  node.columns.push_back(c);
  PartsOfNode(std::move(node), keys.size(), parts, out);
}

}  // namespace

void PartitionsOf(std::span<const uint32_t> keys, uint32_t parts, std::span<uint32_t> out) {
  WordParts(keys, parts, out);
}

void PartitionsOf(std::span<const uint64_t> keys, uint32_t parts, std::span<uint32_t> out) {
  WordParts(keys, parts, out);
}

void PartitionsOf(const KeyColumns& keys, uint32_t parts, std::span<uint32_t> out) {
  HashNode node;
  node.columns = keys.columns;
  PartsOfNode(std::move(node), keys.rows(), parts, out);
}

absl::StatusOr<ShardIdentity> ParseShardIdentity(const std::string& text, const std::string& flag) {
  const auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": \"", text, "\" ", std::string(why),
                                                   " (I/N: this process serves shard I of N, "
                                                   "0 <= I < N <= 65536)"));
  };
  const size_t slash = text.find('/');
  if (slash == std::string::npos) return bad("has no '/'");
  ShardIdentity id;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  auto [p1, e1] = std::from_chars(begin, begin + slash, id.index);
  auto [p2, e2] = std::from_chars(begin + slash + 1, end, id.count);
  if (e1 != std::errc() || p1 != begin + slash || e2 != std::errc() || p2 != end) {
    return bad("is not two numbers I/N");
  }
  if (id.count == 0 || id.count > 65536) return bad("has N outside [1, 65536]");
  if (id.index >= id.count) return bad("has I not below N");
  return id;
}

}  // namespace gpujoin::engine
