// PayloadStaging (payload_staging.hpp): payload chunks of random sizes (bitmaps
// continued at every bit position, several parts of a column in one chunk,
// validity sent with and without nulls, garbage bits past the rows) staged into
// the contiguous engine columns a single chunk would give; GrowthBytes counts
// exactly what Append adds; declarations and totals are checked.
#include "wire/payload_staging.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "payload_model.hpp"

namespace gpujoin::server {
namespace {

using testing::Cell;
using ::testing::HasSubstr;
using testing::ModelColumn;

// The cells of a staged engine column.
std::vector<Cell> CellsOf(const engine::ColumnView& v) {
  std::vector<Cell> cells(v.rows);
  const auto* data = reinterpret_cast<const char*>(v.data.data());
  for (uint64_t r = 0; r < v.rows; ++r) {
    if (!v.validity.empty() && !engine::BitAt(v.validity, r)) continue;
    if (engine::IsVariableWidth(v.type)) {
      cells[r] = std::string(data + v.offsets[r], v.offsets[r + 1] - v.offsets[r]);
    } else if (v.type == engine::ColumnType::kBool) {
      const auto* bits = reinterpret_cast<const uint8_t*>(v.data.data());
      cells[r] = std::string(1, static_cast<char>((bits[r / 8] >> (r % 8)) & 1));
    } else {
      const size_t w = engine::ColumnWidth(v.type);
      cells[r] = std::string(data + r * w, w);
    }
  }
  return cells;
}

google::protobuf::RepeatedPtrField<v1::PayloadColumnSpec> Specs(
    const std::vector<ModelColumn>& columns) {
  google::protobuf::RepeatedPtrField<v1::PayloadColumnSpec> specs;
  for (const auto& c : columns) {
    auto* s = specs.Add();
    s->set_name(c.name);
    s->set_type(c.type);
  }
  return specs;
}

TEST(PayloadStaging, RandomChunksStageTheContiguousColumns) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  const v1::ColumnType types[] = {v1::COLUMN_TYPE_UINT32,  v1::COLUMN_TYPE_INT64,
                                  v1::COLUMN_TYPE_FLOAT32, v1::COLUMN_TYPE_BOOL,
                                  v1::COLUMN_TYPE_STRING,  v1::COLUMN_TYPE_BINARY};
  for (int round = 0; round < 40; ++round) {
    const size_t rows = rng() % 400;
    std::vector<ModelColumn> model;
    for (size_t i = 0; i < std::size(types); ++i) {
      // Some columns without any null: they must stay without a validity bitmap.
      const int nulls = rng() % 3 == 0 ? 0 : static_cast<int>(rng() % 50);
      model.push_back(ModelColumn{"c" + std::to_string(i), types[i],
                                  testing::RandomCells(types[i], rows, rng, nulls, 20)});
    }
    PayloadStaging staging;
    ASSERT_TRUE(staging.Declare(Specs(model)).ok());
    std::vector<size_t> sent(model.size(), 0);
    int chunk_index = 0;
    while (true) {
      google::protobuf::RepeatedPtrField<v1::Column> chunk;
      bool left = false;
      for (size_t c = 0; c < model.size(); ++c) {
        // Zero to two parts of each column per chunk, 0 to 19 rows each.
        for (int parts = static_cast<int>(rng() % 3); parts > 0 && sent[c] < rows; --parts) {
          const size_t n = std::min<size_t>(rng() % 20, rows - sent[c]);
          *chunk.Add() = testing::WireChunk(model[c], sent[c], n, rng() % 4 == 0, rng() % 2 == 0);
          sent[c] += n;
        }
        left = left || sent[c] < rows;
      }
      auto parts = staging.Validate(chunk, absl::StrCat("chunks[", chunk_index++, "]"), 1 << 20);
      ASSERT_TRUE(parts.ok()) << parts.status();
      const uint64_t before = staging.bytes();
      const uint64_t growth = staging.GrowthBytes(*parts);
      staging.Append(*parts);
      EXPECT_EQ(staging.bytes(), before + growth);
      if (!left) break;
    }
    ASSERT_TRUE(staging.CheckRows(rows).ok());
    const std::vector<engine::ColumnView> views = staging.Views();
    const std::vector<engine::PayloadShape> shapes = staging.Shapes();
    ASSERT_EQ(views.size(), model.size());
    for (size_t c = 0; c < model.size(); ++c) {
      SCOPED_TRACE(model[c].name);
      EXPECT_EQ(views[c].rows, rows);
      EXPECT_EQ(CellsOf(views[c]), model[c].cells);
      bool any_null = false;
      for (const Cell& cell : model[c].cells) any_null = any_null || !cell.has_value();
      EXPECT_EQ(!views[c].validity.empty(), any_null);
      EXPECT_EQ(shapes[c].nullable, any_null);
      if (any_null) {
        ASSERT_EQ(views[c].validity.size(), engine::BitmapBytes(rows));
      }
      if (engine::IsVariableWidth(views[c].type)) {
        ASSERT_EQ(views[c].offsets.size(), rows + 1);
        EXPECT_EQ(views[c].offsets[0], 0u);
        EXPECT_EQ(views[c].offsets[rows], views[c].data.size());
        EXPECT_EQ(shapes[c].string_bytes, views[c].data.size());
      }
    }
    staging.Clear();
    EXPECT_EQ(staging.bytes(), 8u * 2);  // the two string columns' first offset
  }
}

TEST(PayloadStaging, DeclarationRules) {
  PayloadStaging staging;
  std::vector<ModelColumn> many;
  for (size_t i = 0; i <= kMaxPayloadColumns; ++i) {
    many.push_back(ModelColumn{"c" + std::to_string(i), v1::COLUMN_TYPE_INT32, {}});
  }
  absl::Status s = staging.Declare(Specs(many));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("spec.payload: 1025 columns, at most 1024"));
  many.pop_back();
  EXPECT_TRUE(staging.Declare(Specs(many)).ok());
  s = staging.Declare(Specs({ModelColumn{std::string(129, 'x'), v1::COLUMN_TYPE_INT32, {}}}));
  EXPECT_THAT(s.message(), HasSubstr("spec.payload[0].name: column name has 129 characters"));
}

TEST(PayloadStaging, RowsPastTheBuildLimitAreRefused) {
  PayloadStaging staging;
  ASSERT_TRUE(staging.Declare(Specs({ModelColumn{"b", v1::COLUMN_TYPE_BOOL, {}}})).ok());
  google::protobuf::RepeatedPtrField<v1::Column> chunk;
  v1::Column* c = chunk.Add();
  c->set_name("b");
  c->set_type(v1::COLUMN_TYPE_BOOL);
  c->set_length(17);
  c->set_data(std::string(3, '\0'));
  auto parts = staging.Validate(chunk, "chunks[4]", 16);
  EXPECT_EQ(parts.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(parts.status().message(),
              HasSubstr("chunks[4].payload[0] (column \"b\").length: 17 rows after 0 would "
                        "exceed 16 rows"));
}

}  // namespace
}  // namespace gpujoin::server
