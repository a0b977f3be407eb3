// Fuzz target: how gpujoin-router splits a request's rows over its shards
// and merges them back (server/src/router/wire_rows.hpp).
//
// Input: one byte (the shard count, 1 + byte % 8), then a LookupRequest.
// Checked, for any keys (uint32 words, uint64 words or key columns of any
// type and buffers): KeyedRowsOf either refuses them with INVALID_ARGUMENT or
// gives every row a shard below the count; SplitRows puts every row in
// exactly one part, in input order; every part's keys (WithKeysAt) partition
// to that part's shard again; and the parts merged back (GatherColumn for key
// columns, the words for key words) are the request's keys row by row, nulls
// and all.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fuzz_check.hpp"
#include "router/wire_rows.hpp"
#include "wire/column_codec.hpp"

namespace gpujoin::fuzz {
namespace {

using server::router::KeyedRows;
using server::router::RowRef;
using server::router::RowSplit;

bool Bit(const std::string& bits, uint64_t i) {
  return (static_cast<uint8_t>(bits[i / 8]) >> (i % 8)) & 1u;
}

// Row `r` of `c` as comparable bytes: a null flag, then the value.
std::string Cell(const v1::Column& c, uint64_t r) {
  if (!c.validity().empty() && !Bit(c.validity(), r)) return std::string(1, '\0');
  std::string out(1, '\1');
  switch (c.type()) {
    case v1::COLUMN_TYPE_STRING:
    case v1::COLUMN_TYPE_BINARY: {
      int32_t b, e;
      std::memcpy(&b, c.offsets().data() + 4 * r, 4);
      std::memcpy(&e, c.offsets().data() + 4 * (r + 1), 4);
      out.append(c.data(), b, e - b);
      break;
    }
    case v1::COLUMN_TYPE_BOOL:
      out.push_back(Bit(c.data(), r) ? '\1' : '\0');
      break;
    default: {
      absl::StatusOr<engine::ColumnType> type = server::FromWireColumnType(c.type(), "column");
      FUZZ_CHECK(type.ok(), "a checked column has no type");
      const uint64_t width = engine::ColumnWidth(*type);
      out.append(c.data(), r * width, width);
      break;
    }
  }
  return out;
}

void Check(uint32_t shards, const v1::LookupRequest& request) {
  absl::StatusOr<KeyedRows> keys = server::router::KeyedRowsOf(request, shards, "");
  if (!keys.ok()) {
    FUZZ_CHECK(keys.status().code() == absl::StatusCode::kInvalidArgument,
               "KeyedRowsOf refused keys with " + Describe(keys.status()));
    return;
  }
  const uint64_t rows = keys->rows();
  FUZZ_CHECK(keys->parts().size() == rows, "parts() and rows() disagree");
  for (uint32_t p : keys->parts()) {
    FUZZ_CHECK(p < shards, absl::StrCat("a row went to shard ", p, " of ", shards));
  }
  const RowSplit split = server::router::SplitRows(keys->parts(), shards);
  std::vector<uint8_t> seen(rows, 0);
  for (uint32_t s = 0; s < shards; ++s) {
    for (size_t i = 0; i < split.rows[s].size(); ++i) {
      const uint32_t r = split.rows[s][i];
      FUZZ_CHECK(r < rows && seen[r] == 0, absl::StrCat("row ", r, " split twice or out of range"));
      FUZZ_CHECK(i == 0 || split.rows[s][i - 1] < r, "a part's rows are out of input order");
      FUZZ_CHECK(split.part[r] == s && split.position[r] == i, "part/position disagree with rows");
      seen[r] = 1;
    }
  }
  for (uint64_t r = 0; r < rows; ++r) FUZZ_CHECK(seen[r] == 1, absl::StrCat("row ", r, " lost"));

  std::vector<v1::LookupRequest> parts;
  for (uint32_t s = 0; s < shards; ++s) {
    absl::StatusOr<v1::LookupRequest> part =
        server::router::WithKeysAt(request, *keys, split.rows[s]);
    FUZZ_CHECK(part.ok(), "the keys of checked rows were refused: " + Describe(part.status()));
    // Each part's keys belong to its shard, read again as a shard's router would.
    absl::StatusOr<KeyedRows> again = server::router::KeyedRowsOf(*part, shards, "");
    FUZZ_CHECK(again.ok(), "a part's keys were refused: " + Describe(again.status()));
    FUZZ_CHECK(again->rows() == split.rows[s].size(), "a part has other rows than its split");
    for (uint32_t p : again->parts()) {
      FUZZ_CHECK(p == s, absl::StrCat("a key of shard ", s, "'s part partitions to shard ", p));
    }
    parts.push_back(*std::move(part));
  }

  // Merged back, the parts are the request's keys.
  if (request.key_columns_size() > 0) {
    std::vector<RowRef> refs(rows);
    for (uint64_t r = 0; r < rows; ++r) refs[r] = {split.part[r], split.position[r]};
    for (int c = 0; c < request.key_columns_size(); ++c) {
      std::vector<const v1::Column*> sources;
      for (const v1::LookupRequest& p : parts) sources.push_back(&p.key_columns(c));
      absl::StatusOr<v1::Column> merged =
          server::router::GatherColumn(sources, refs, absl::StrCat("key_columns[", c, "]"));
      FUZZ_CHECK(merged.ok(), "merging checked parts failed: " + Describe(merged.status()));
      FUZZ_CHECK(merged->length() == rows && merged->type() == request.key_columns(c).type(),
                 "the merged column's length or type differs");
      for (uint64_t r = 0; r < rows; ++r) {
        FUZZ_CHECK(Cell(*merged, r) == Cell(request.key_columns(c), r),
                   absl::StrCat("key_columns[", c, "] row ", r, " differs after the merge"));
      }
    }
  } else if (request.has_keys64() || request.has_keys()) {
    for (uint32_t s = 0; s < shards; ++s) {
      const std::vector<uint32_t>& at = split.rows[s];
      if (request.has_keys64()) {  // KeyedRows reads keys64 before keys
        auto mine = server::router::WordsOf(parts[s].keys64(), "keys64");
        auto all = server::router::WordsOf(request.keys64(), "keys64");
        FUZZ_CHECK(mine.ok() && all.ok() && mine->size() == at.size(), "keys64 parts differ");
        for (size_t i = 0; i < at.size(); ++i) {
          FUZZ_CHECK((*mine)[i] == (*all)[at[i]], "a keys64 word differs after the split");
        }
      } else {
        auto mine = server::router::WordsOf(parts[s].keys(), "keys");
        auto all = server::router::WordsOf(request.keys(), "keys");
        FUZZ_CHECK(mine.ok() && all.ok() && mine->size() == at.size(), "keys parts differ");
        for (size_t i = 0; i < at.size(); ++i) {
          FUZZ_CHECK((*mine)[i] == (*all)[at[i]], "a keys word differs after the split");
        }
      }
    }
  }
}

}  // namespace
}  // namespace gpujoin::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint32_t shards = 1 + data[0] % 8;
  gpujoin::v1::LookupRequest request;
  if (!request.ParseFromArray(data + 1, static_cast<int>(size - 1))) return 0;
  gpujoin::fuzz::Check(shards, request);
  return 0;
}
