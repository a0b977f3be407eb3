// JoinParts (join_parts.hpp): random join responses (several batches, pairs,
// gathered columns of every layout with nulls and strings of any length, found
// and probes) cut for small message sizes reassemble into the response, every
// message within the size; a response that fits is one message; a pair that no
// message can carry is RESOURCE_EXHAUSTED naming it.
#include "wire/join_parts.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "google/protobuf/util/message_differencer.h"
#include "wire/column_codec.hpp"
#include "payload_model.hpp"

namespace gpujoin::server {
namespace {

using testing::Cell;
using ::testing::HasSubstr;

// A result column of `cells` as Operations writes it (validity only with nulls).
v1::Column ResultColumn(const std::string& name, v1::ColumnType type,
                        const std::vector<Cell>& cells) {
  v1::Column out;
  out.set_name(name);
  out.set_type(type);
  out.set_length(cells.size());
  std::string data, offsets = PackColumn<uint32_t>(std::vector<uint32_t>{0});
  std::string bits((cells.size() + 7) / 8, '\0'), validity = bits;
  uint64_t nulls = 0;
  for (size_t r = 0; r < cells.size(); ++r) {
    const Cell& cell = cells[r];
    if (cell) validity[r / 8] = static_cast<char>(validity[r / 8] | (1 << (r % 8)));
    nulls += cell ? 0 : 1;
    const size_t w = testing::WireWidth(type);
    if (w != 0) {
      data += cell ? *cell : std::string(w, '\0');
    } else if (type == v1::COLUMN_TYPE_BOOL) {
      if (cell && (*cell)[0]) bits[r / 8] = static_cast<char>(bits[r / 8] | (1 << (r % 8)));
    } else {
      if (cell) data += *cell;
      offsets += PackColumn<uint32_t>(std::vector<uint32_t>{static_cast<uint32_t>(data.size())});
    }
  }
  if (type == v1::COLUMN_TYPE_BOOL) data = bits;
  out.set_data(data);
  if (testing::IsVarWidth(type)) out.set_offsets(offsets);
  if (nulls != 0) out.set_validity(validity);
  out.set_null_count(nulls);
  return out;
}

// `max_bytes`: found and probes are dropped from a batch whose first part would
// not fit in a message (Operations refuses such a batch before it runs).
v1::JoinResponse RandomResponse(std::mt19937_64& rng, uint64_t max_bytes) {
  v1::JoinResponse r;
  r.set_index_version(1 + rng() % 1000);
  const v1::ColumnType types[] = {v1::COLUMN_TYPE_INT32, v1::COLUMN_TYPE_FLOAT64,
                                  v1::COLUMN_TYPE_BOOL, v1::COLUMN_TYPE_STRING,
                                  v1::COLUMN_TYPE_BINARY};
  std::vector<std::pair<std::string, v1::ColumnType>> select;
  for (int c = static_cast<int>(rng() % 4); c > 0; --c) {
    select.emplace_back("col" + std::to_string(c), types[rng() % std::size(types)]);
  }
  for (int b = static_cast<int>(1 + rng() % 4); b > 0; --b) {
    v1::JoinBatchResult* batch = r.add_results();
    batch->set_batch(static_cast<uint64_t>(r.results_size() - 1));
    const size_t rows = rng() % 600;
    const size_t pairs = rng() % 4 == 0 ? 0 : rng() % (rows + 1);
    std::vector<uint32_t> left, right;
    for (size_t p = 0; p < pairs; ++p) {
      left.push_back(static_cast<uint32_t>(rng()));
      right.push_back(static_cast<uint32_t>(rng()));
    }
    batch->set_left_rows(PackColumn<uint32_t>(left));
    batch->set_right_rows(PackColumn<uint32_t>(right));
    batch->set_count(pairs + rng() % 3);
    batch->set_capacity(pairs);
    batch->set_overflow(batch->count() > pairs);
    batch->mutable_statistics()->set_found(pairs);
    batch->mutable_statistics()->set_missing(rows - pairs);
    if (rng() % 3 == 0) batch->set_found(std::string(rows, '\1'));
    if (rng() % 3 == 0) batch->set_probes(std::string(rows * 4, '\2'));
    const bool count_only = rng() % 6 == 0;
    uint64_t names = 0;
    size_t strings = 0;
    for (const auto& [name, type] : select) {
      names += name.size();
      strings += testing::IsVarWidth(type) ? 1 : 0;
    }
    if (JoinParts::FirstPartBytes(batch->found().size() + batch->probes().size(),
                                  count_only ? 0 : select.size(), count_only ? 0 : names,
                                  count_only ? 0 : strings) > JoinParts::MessageRoom(max_bytes)) {
      batch->clear_found();
      batch->clear_probes();
    }
    if (count_only) continue;
    for (const auto& [name, type] : select) {
      const size_t max_len = rng() % 2 == 0 ? 3 : 200;
      *batch->add_columns() =
          ResultColumn(name, type, testing::RandomCells(type, pairs, rng, 30, max_len));
    }
  }
  return r;
}

TEST(JoinParts, RandomResponsesReassembleWithinTheMessageSize) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  int split = 0;
  for (int round = 0; round < 300; ++round) {
    SCOPED_TRACE(::testing::Message() << "round " << round);
    const uint64_t max_bytes = 4096 + rng() % 8192;
    const v1::JoinResponse response = RandomResponse(rng, max_bytes);
    auto parts = JoinParts::Plan(response, max_bytes);
    ASSERT_TRUE(parts.ok()) << parts.status();
    std::vector<v1::JoinResponse> messages;
    for (size_t k = 0; k < parts->size(); ++k) {
      messages.push_back(parts->Message(k));
      messages.back().set_batch_id(~uint64_t{0});  // the largest batch_id a caller stamps
    }
    if (messages.size() > 1) ++split;
    if (response.ByteSizeLong() + 11 <= max_bytes) EXPECT_EQ(messages.size(), 1u);
    const std::vector<v1::JoinResponse> whole = testing::Reassemble(messages, max_bytes);
    ASSERT_EQ(whole.size(), 1u);
    v1::JoinResponse expected = response;
    expected.set_batch_id(~uint64_t{0});
    std::string differences;
    google::protobuf::util::MessageDifferencer diff;
    diff.ReportDifferencesToString(&differences);
    EXPECT_TRUE(diff.Compare(whole[0], expected)) << differences.substr(0, 2000);
    EXPECT_TRUE(whole[0].SerializeAsString() == expected.SerializeAsString());
  }
  EXPECT_GT(split, 50);
}

TEST(JoinParts, APairNoMessageCanCarryIsRefused) {
  v1::JoinResponse r;
  v1::JoinBatchResult* b = r.add_results();
  b->set_batch(0);
  b->set_left_rows(PackColumn<uint32_t>(std::vector<uint32_t>{1, 2}));
  b->set_right_rows(PackColumn<uint32_t>(std::vector<uint32_t>{3, 4}));
  *b->add_columns() = ResultColumn("s", v1::COLUMN_TYPE_STRING, {"small", std::string(5000, 'x')});
  const auto parts = JoinParts::Plan(r, 4096);
  EXPECT_EQ(parts.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(parts.status().message(),
              HasSubstr("batches[0]: pair 1 with its gathered columns needs"));
  EXPECT_THAT(parts.status().message(), HasSubstr("--max-message-bytes=4096"));
  // With room for it, the pair travels alone.
  const auto roomy = JoinParts::Plan(r, 16384);
  ASSERT_TRUE(roomy.ok()) << roomy.status();
  EXPECT_EQ(roomy->size(), 1u);
}

// What a Join response counts against --max-pending-response-bytes until its
// last message is written: a one-message plan is handed over and serialised
// (twice its size); a split plan holds the response and one message with its
// serialised copy.
TEST(JoinParts, HeldBytesCountTheResponseAndTheMessageBeingWritten) {
  v1::JoinResponse r;
  v1::JoinBatchResult* b = r.add_results();
  b->set_batch(0);
  b->set_left_rows(PackColumn<uint32_t>(std::vector<uint32_t>(10000, 1)));
  b->set_right_rows(PackColumn<uint32_t>(std::vector<uint32_t>(10000, 2)));
  const uint64_t whole = r.ByteSizeLong();
  const auto one = JoinParts::Plan(r, 1 << 20);
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ(one->HeldBytes(), 2 * whole);
  const auto split = JoinParts::Plan(r, 8192);
  ASSERT_TRUE(split.ok()) << split.status();
  ASSERT_GT(split->size(), 1u);
  EXPECT_EQ(split->HeldBytes(), whole + 2 * JoinParts::MessageRoom(8192));
}

}  // namespace
}  // namespace gpujoin::server
