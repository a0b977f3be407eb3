// Known-answer vectors of the Hash operation, shared by the host and device
// tests. Computed once and reviewed: each value was reproduced independently
// with Debian's libxxhash (XXH32/XXH64, seed 0) plus the documented float
// canonicalisation and column combine (docs/hashing.md), and the binary rows are
// xxHash's published test vectors. These values are part of the API: a change
// here is a breaking change for every client that stored a hash.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "hash_test_util.hpp"

namespace gpujoin::engine::testing {

struct KnownAnswerCase {
  std::string name;
  std::vector<OwnedColumn> columns;
  std::vector<std::optional<uint32_t>> expected32;  ///< nullopt = null row
  std::vector<std::optional<uint64_t>> expected64;
};

inline std::vector<KnownAnswerCase> KnownAnswerCases() {
  return {
      // uint32 {0, 1, 42, 0xffffffff}
      {"uint32",
       {FixedColumn<uint32_t>(ColumnType::kUint32, std::vector<uint32_t>{0, 1, 42, 0xFFFFFFFFu})},
       {0x08D6D969u, 0xF3BB7693u, 0x454235D1u, 0x04079E5Fu},
       {0x3AEFA6FD5CF2DEB4ull, 0xF42F94001FCB5351ull, 0xD756D7B62FC50BF1ull,
        0x7F78E4BDA3ADDF93ull}},
      // int32 {-1, 0, 7, INT32_MIN}: the same bytes as uint32 hash the same (-1 == 0xffffffff)
      {"int32",
       {FixedColumn<int32_t>(ColumnType::kInt32,
                             std::vector<int32_t>{-1, 0, 7, std::numeric_limits<int32_t>::min()})},
       {0x04079E5Fu, 0x08D6D969u, 0xE68BC8F8u, 0x59FBD9C1u},
       {0x7F78E4BDA3ADDF93ull, 0x3AEFA6FD5CF2DEB4ull, 0xB7CA480E9B960D0Eull,
        0x822E51211BF08373ull}},
      // uint64 {0, 1, 2^64-1, 0x0123456789abcdef}
      {"uint64",
       {FixedColumn<uint64_t>(
           ColumnType::kUint64,
           std::vector<uint64_t>{0, 1, 0xFFFFFFFFFFFFFFFFull, 0x0123456789ABCDEFull})},
       {0xDEB39513u, 0x08ED6331u, 0xC182C6D9u, 0x10AE029Bu},
       {0x34C96ACDCADB1BBBull, 0x9F29CB17A2A49995ull, 0x85D136ADB773C6C9ull,
        0xEA3C52081E9843ECull}},
      // int64 {-1, 42, INT64_MIN}
      {"int64",
       {FixedColumn<int64_t>(ColumnType::kInt64,
                             std::vector<int64_t>{-1, 42, std::numeric_limits<int64_t>::min()})},
       {0xC182C6D9u, 0x8B06618Du, 0x1CCC7DDBu},
       {0x85D136ADB773C6C9ull, 0xB556806FB6D14353ull, 0x3F425EACF01544E0ull}},
      // float32 bits {+0, -0, 1.5, NaN, NaN with payload and sign, +inf}: -0 == +0, NaNs equal
      {"float32",
       {FixedColumn<uint32_t>(ColumnType::kFloat32,
                              std::vector<uint32_t>{0x00000000u, 0x80000000u, 0x3FC00000u,
                                                    0x7FC00000u, 0xFFC00001u, 0x7F800000u})},
       {0x08D6D969u, 0x08D6D969u, 0xA9D25F4Eu, 0x820A9667u, 0x820A9667u, 0x5FFD9248u},
       {0x3AEFA6FD5CF2DEB4ull, 0x3AEFA6FD5CF2DEB4ull, 0x4F2D82595C483A0Dull, 0xD65166E46DF1863Eull,
        0xD65166E46DF1863Eull, 0xA066C2EF108D15B8ull}},
      // float64 bits {+0, -0, 3.25, NaN, signalling NaN, -inf}
      {"float64",
       {FixedColumn<uint64_t>(ColumnType::kFloat64,
                              std::vector<uint64_t>{0, 0x8000000000000000ull, 0x400A000000000000ull,
                                                    0x7FF8000000000000ull, 0x7FF0000000000001ull,
                                                    0xFFF0000000000000ull})},
       {0xDEB39513u, 0xDEB39513u, 0xEE636A17u, 0x844362C2u, 0x844362C2u, 0x4B22929Cu},
       {0x34C96ACDCADB1BBBull, 0x34C96ACDCADB1BBBull, 0xE6B2E9FFF4717555ull, 0xE9ADB09FEE122AACull,
        0xE9ADB09FEE122AACull, 0x328B3FF0C87B53D2ull}},
      // binary {"", "a", "abc", 39-byte string, null}: the xxHash reference vectors
      {"binary",
       {BinaryColumn({"", "a", "abc", "Nobody inspects the spammish repetition", std::nullopt})},
       {0x02CC5D05u, 0x550D7456u, 0x32D153FFu, 0xE2293B2Fu, std::nullopt},
       {0xEF46DB3751D8E999ull, 0xD24EC4F1A98C6E5Bull, 0x44BC2CF5AD770999ull, 0xFBCEA83C8A378BF1ull,
        std::nullopt}},
      // (uint32, binary) {(1,"x"), (1,""), (2,null), (null,"z")}
      {"composite",
       {FixedColumn<uint32_t>(ColumnType::kUint32,
                              std::vector<std::optional<uint32_t>>{1, 1, 2, std::nullopt}),
        BinaryColumn({"x", "", std::nullopt, "z"})},
       {0x312371B9u, 0xAD548036u, std::nullopt, std::nullopt},
       {0xDF65DB6222ACAC39ull, 0xB36ED88ED47F7D08ull, std::nullopt, std::nullopt}},
      // (int64, float64, uint32) {(5,-0.0,9), (5,+0.0,9)}: equal after canonicalisation
      {"composite3",
       {FixedColumn<int64_t>(ColumnType::kInt64, std::vector<int64_t>{5, 5}),
        FixedColumn<uint64_t>(ColumnType::kFloat64,
                              std::vector<uint64_t>{0x8000000000000000ull, 0}),
        FixedColumn<uint32_t>(ColumnType::kUint32, std::vector<uint32_t>{9, 9})},
       {0x8170D93Eu, 0x8170D93Eu},
       {0xA1D9A32A2056408Dull, 0xA1D9A32A2056408Dull}},
  };
}

}  // namespace gpujoin::engine::testing
