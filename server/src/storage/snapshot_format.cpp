// The snapshot format's checksums and the helpers its reader, writer and store
// share (file identities, the kind of a file that is not regular, the reason
// label of a failed load).
#include "storage/snapshot_format.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "storage/snapshot_layout.hpp"

namespace gpujoin::server {
namespace detail {

std::string SectionName(uint32_t type, uint32_t column) {
  switch (type) {
    case kMeta:
      return "metadata";
    case kKeys:
      return "keys";
    case kValues:
      return "values";
    case kGroupRanges:
      return "group ranges";
    case kGroupValues:
      return "group values";
    case kPayloadData:
      return absl::StrCat("payload ", column, " data");
    case kPayloadOffsets:
      return absl::StrCat("payload ", column, " offsets");
    case kPayloadValidity:
      return absl::StrCat("payload ", column, " validity");
    case kKeyData:
      return absl::StrCat("key column ", column, " data");
    case kKeyOffsets:
      return absl::StrCat("key column ", column, " offsets");
    case kKeyValidity:
      return absl::StrCat("key column ", column, " validity");
    case kRowValues:
      return "row values";
  }
  return absl::StrCat("type ", type);
}

uint64_t CombineBlockHashes(const uint64_t* hashes, size_t blocks, uint64_t section_bytes) {
  return XxHash64(hashes, blocks * 8, section_bytes);
}

}  // namespace detail

using detail::kBlockBytes;
using detail::XxHash64State;
using detail::kBlockSeed;
using detail::BlockCount;
using detail::CombineBlockHashes;

uint64_t XxHash64(const void* data, size_t len, uint64_t seed) {
  XxHash64State state(seed);
  state.Update(data, len);
  return state.Digest();
}

uint64_t SectionChecksum(const void* data, size_t bytes, unsigned threads) {
  const auto* p = static_cast<const uint8_t*>(data);
  const size_t blocks = BlockCount(bytes);
  std::vector<uint64_t> hashes(blocks);
  auto hash_block = [&](size_t b) {
    hashes[b] =
        XxHash64(p + b * kBlockBytes, std::min(kBlockBytes, bytes - b * kBlockBytes), kBlockSeed);
  };
  threads = std::max(1u, std::min<unsigned>(threads, unsigned(blocks)));
  if (threads <= 1) {
    for (size_t b = 0; b < blocks; ++b) hash_block(b);
  } else {
    std::atomic<size_t> next{0};
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) {
      pool.emplace_back([&] {
        for (size_t b; (b = next.fetch_add(1)) < blocks;) hash_block(b);
      });
    }
    for (auto& t : pool) t.join();
  }
  return CombineBlockHashes(hashes.data(), blocks, bytes);
}

std::string_view FileKindName(unsigned mode) {
  switch (mode & S_IFMT) {
    case S_IFREG:
      return "a regular file";
    case S_IFDIR:
      return "a directory";
    case S_IFIFO:
      return "a FIFO";
    case S_IFLNK:
      return "a symbolic link";
    case S_IFSOCK:
      return "a socket";
    case S_IFCHR:
      return "a character device";
    case S_IFBLK:
      return "a block device";
    default:
      return "not a regular file";
  }
}

FileIdentity IdentityOf(const struct stat& st) {
  return FileIdentity{uint64_t(st.st_dev), uint64_t(st.st_ino), uint64_t(st.st_size),
                      int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

std::string_view SnapshotLoadFailureReason(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kFailedPrecondition:
      return "version";
    case absl::StatusCode::kOutOfRange:
      return "truncated";
    case absl::StatusCode::kDataLoss:
      return "corrupt";
    case absl::StatusCode::kResourceExhausted:
      return "budget";
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kAlreadyExists:
      return "invalid";
    case absl::StatusCode::kUnimplemented:
      return "unsupported";
    default:
      return "io_error";
  }
}

}  // namespace gpujoin::server
