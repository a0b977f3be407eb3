// Byte-level edits of snapshot files for the snapshot tests (the layout of
// docs/operations.md, "Snapshot format"): the section table, and the header's
// checksum recomputed after an edit, so that a test can damage one thing at a
// time and keep the rest consistent.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "storage/snapshot_format.hpp"

namespace gpujoin::server::snapshot_testing {

/// Recomputes the header checksum of the snapshot in `bytes` after an edit.
inline void ResealHeader(std::string& bytes) {
  uint32_t header_bytes;
  std::memcpy(&header_bytes, bytes.data() + 20, 4);
  const uint64_t h = XxHash64(bytes.data(), header_bytes - 8);
  std::memcpy(bytes.data() + header_bytes - 8, &h, 8);
}

/// One entry of a snapshot's section table; `at` is the entry's byte offset.
struct TableEntry {
  uint32_t type = 0, column = 0;
  uint64_t offset = 0, length = 0;
  size_t at = 0;
};

/// The section table of the snapshot in `bytes`.
inline std::vector<TableEntry> SectionTable(const std::string& bytes) {
  uint32_t sections;
  std::memcpy(&sections, bytes.data() + 16, 4);
  std::vector<TableEntry> out(sections);
  for (uint32_t i = 0; i < sections; ++i) {
    TableEntry& e = out[i];
    e.at = 64 + size_t{40} * i;
    std::memcpy(&e.type, bytes.data() + e.at, 4);
    std::memcpy(&e.column, bytes.data() + e.at + 4, 4);
    std::memcpy(&e.offset, bytes.data() + e.at + 8, 8);
    std::memcpy(&e.length, bytes.data() + e.at + 16, 8);
  }
  return out;
}

}  // namespace gpujoin::server::snapshot_testing
