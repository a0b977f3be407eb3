// CheckColumnBuffers (wire/column_check.hpp): the offsets of string and binary
// columns are counted against the column's length without wrapping, at every
// length a request may claim.
#include "wire/column_check.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace gpujoin::server {
namespace {

std::string Offsets(std::initializer_list<int32_t> offsets) {
  std::string out;
  for (int32_t o : offsets) out.append(reinterpret_cast<const char*>(&o), 4);
  return out;
}

// Reproduces a read past the end of the offsets (found while modelling key columns for
// fuzz_lookup): a key column of length 2^64 - 1 with no offsets passed the count check, length + 1
// having wrapped to 0, and its offsets[0] and offsets[length] were then read.
TEST(ColumnCheck, LargestLengthWithoutOffsetsIsRefused) {
  for (const auto& [wire, type] :
       {std::pair{v1::COLUMN_TYPE_STRING, engine::ColumnType::kString},
        std::pair{v1::COLUMN_TYPE_BINARY, engine::ColumnType::kBinary}}) {
    v1::Column c;
    c.set_type(wire);
    c.set_length(UINT64_MAX);
    c.set_data("abc");
    const auto checked = CheckColumnBuffers(c, type, "key_columns[0]", "the keys");
    ASSERT_FALSE(checked.ok());
    EXPECT_EQ(checked.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(checked.status().message(),
              "key_columns[0].offsets: 0 int32 offsets, need length 18446744073709551615 + 1 = "
              "2^64");
  }
}

TEST(ColumnCheck, OffsetsCountOneMoreThanTheRows) {
  v1::Column c;
  c.set_type(v1::COLUMN_TYPE_STRING);
  c.set_length(2);
  c.set_data("abc");
  c.set_offsets(Offsets({0, 1}));
  auto checked = CheckColumnBuffers(c, engine::ColumnType::kString, "payload[0]");
  ASSERT_FALSE(checked.ok());
  EXPECT_EQ(checked.status().message(),
            "payload[0].offsets: 2 int32 offsets, need length 2 + 1 = 3");
  c.set_offsets(Offsets({0, 1, 3}));
  checked = CheckColumnBuffers(c, engine::ColumnType::kString, "payload[0]");
  ASSERT_TRUE(checked.ok()) << checked.status();
  EXPECT_EQ(checked->rows, 2u);
  EXPECT_EQ(checked->data, "abc");
  // No rows: one offset, and none is too few.
  c.set_length(0);
  c.set_offsets(Offsets({0}));
  EXPECT_TRUE(CheckColumnBuffers(c, engine::ColumnType::kString, "payload[0]").ok());
  c.clear_offsets();
  EXPECT_FALSE(CheckColumnBuffers(c, engine::ColumnType::kString, "payload[0]").ok());
}

}  // namespace
}  // namespace gpujoin::server
