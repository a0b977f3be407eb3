// Snapshots of key-schema indexes (key type columns: string and composite keys)
// through real gpujoind processes with --data-dir, CPU backend: a string-keyed
// index with payload built with wait_durable answers every lookup and join kind
// identically after a restart and reports its key schema; a composite
// (int64, string) keep_all index with nulls in both key columns and the empty
// string survives SaveIndex (its own file and a copy), LoadIndex of the copy
// under another name and a kill -9; a format version 1 file (testdata) loads at
// start; a damaged key-column section or a truncated file is skipped at start
// naming the section, and LoadIndex of it is refused the same way.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "build_messages.hpp"
#include "gpujoin/testing/files.hpp"
#include "gpujoin/testing/prometheus_text.hpp"
#include "gpujoin/v1/gpujoin.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "snapshot_bytes.hpp"
#include "snapshot_fixture.hpp"
#include "storage/snapshot_reader.hpp"
#include "wire/column_codec.hpp"

namespace gpujoin::server {
namespace {

namespace fs = std::filesystem;
using gpujoin::testing::MetricValue;
using gpujoin::testing::Slurp;
using gpujoin::testing::Spill;
using snapshot_testing::SectionTable;
using snapshot_testing::SnapshotIntegrationTest;
using ::testing::HasSubstr;
using testing::I64Col;
using testing::KeyChunk;
using testing::KeySpec;
using testing::StrCol;

// A string-keyed index: the empty string, strings one byte apart, an embedded
// NUL, non-ASCII text, a null key, a duplicate across chunks; int64 and string
// payload with nulls.
std::vector<v1::BuildIndexRequest> SkuMessages(const std::string& name) {
  v1::BuildIndexRequest spec = KeySpec(name, {{"sku", v1::COLUMN_TYPE_STRING}}, 64);
  spec.mutable_spec()->set_replace(true);
  spec.mutable_spec()->set_wait_durable(true);
  for (const auto& [column, type] :
       {std::pair{"price", v1::COLUMN_TYPE_INT64}, std::pair{"label", v1::COLUMN_TYPE_STRING}}) {
    auto* p = spec.mutable_spec()->add_payload();
    p->set_name(column);
    p->set_type(type);
  }
  auto chunk = [](std::vector<testing::Str> keys, std::vector<testing::I64> prices,
                  std::vector<testing::Str> labels) {
    v1::BuildIndexRequest c = KeyChunk({StrCol(keys)});
    *c.mutable_chunk()->add_payload() = I64Col(prices);
    c.mutable_chunk()->mutable_payload(0)->set_name("price");
    *c.mutable_chunk()->add_payload() = StrCol(labels);
    c.mutable_chunk()->mutable_payload(1)->set_name("label");
    return c;
  };
  return {spec,
          chunk({"", "a", "ab", "abc", "abd", std::nullopt}, {10, 11, std::nullopt, 13, 14, 15},
                {"empty", "", "x", std::nullopt, "y", "z"}),
          chunk({"a", "\xc3\xa9t\xc3\xa9", std::string("ab\0", 3)}, {16, 17, 18},
                {"dup", "utf8", "nul"})};
}

// The probe keys of SkuMessages: every stored key, misses, and a null.
std::vector<v1::Column> SkuProbe() {
  return {StrCol({"a", "", "abd", "abe", std::nullopt, "ab", std::string("ab\0", 3),
                  "\xc3\xa9t\xc3\xa9", "A", "abc", "", "b"})};
}

// A composite (id int64, s string) keep_all index in batch mode: nulls in
// each key column, the empty string, duplicates within and across chunks.
std::vector<v1::BuildIndexRequest> OrderMessages(const std::string& name) {
  v1::BuildIndexRequest spec =
      KeySpec(name, {{"id", v1::COLUMN_TYPE_INT64}, {"s", v1::COLUMN_TYPE_STRING}}, 32);
  spec.mutable_spec()->set_duplicates(v1::DUPLICATE_POLICY_KEEP_ALL);
  spec.mutable_spec()->set_replace(true);
  auto* p = spec.mutable_spec()->add_payload();
  p->set_name("qty");
  p->set_type(v1::COLUMN_TYPE_INT64);
  auto chunk = [](std::vector<testing::I64> ids, std::vector<testing::Str> s,
                  std::vector<testing::I64> qty) {
    v1::BuildIndexRequest c = KeyChunk({I64Col(ids), StrCol(s)});
    *c.mutable_chunk()->add_payload() = I64Col(qty);
    c.mutable_chunk()->mutable_payload(0)->set_name("qty");
    return c;
  };
  return {spec,
          chunk({1, 1, 3, std::nullopt, 2, 0}, {"x", "x", "", "x", std::nullopt, ""},
                {5, 6, 7, 8, 9, 10}),
          chunk({1, 2, -5, 1, 0}, {"x", "x", "", "", ""}, {11, std::nullopt, 13, 14, 15})};
}

std::vector<v1::Column> OrderProbe() {
  return {I64Col({1, 2, 3, 1, -5, 9, std::nullopt, 0, 2, 1}),
          StrCol({"x", "x", "", std::nullopt, "", "x", "x", "", std::nullopt, ""})};
}

class SnapshotKeyColumnsTest : public SnapshotIntegrationTest {
 protected:
  v1::IndexInfo BuildKeys(const std::vector<v1::BuildIndexRequest>& messages) {
    v1::BuildIndexResponse r;
    const grpc::Status s = testing::Build(*stub_, messages, &r);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return r.index();
  }

  // Everything a lookup (found, values, probes, match counts, every payload
  // column) and the four join kinds (pairs, found, payload) answer for
  // `keys`, serialised, index versions cleared.
  std::string KeyAnswers(const std::string& index, const std::vector<v1::Column>& keys,
                         const v1::IndexInfo& info) {
    std::string out;
    {
      grpc::ClientContext ctx;
      auto stream = stub_->Lookup(&ctx);
      v1::LookupRequest r;
      r.set_index(index);
      r.set_want_probes(true);
      r.set_want_match_counts(true);
      for (const auto& p : info.payload()) r.add_select(p.name());
      for (const v1::Column& k : keys) *r.add_key_columns() = k;
      EXPECT_TRUE(stream->Write(r));
      stream->WritesDone();
      v1::LookupResponse resp;
      while (stream->Read(&resp)) {
        EXPECT_FALSE(resp.has_error()) << resp.error().message();
        resp.clear_index_version();
        out += resp.SerializeAsString();
      }
      EXPECT_TRUE(stream->Finish().ok());
    }
    for (v1::JoinKind kind : {v1::JOIN_KIND_INNER, v1::JOIN_KIND_LEFT_OUTER,
                              v1::JOIN_KIND_LEFT_SEMI, v1::JOIN_KIND_LEFT_ANTI}) {
      grpc::ClientContext ctx;
      auto stream = stub_->Join(&ctx);
      v1::JoinRequest j;
      j.set_index(index);
      j.set_kind(kind);
      for (const auto& p : info.payload()) j.add_select(p.name());
      v1::LeftBatch* b = j.add_batches();
      b->set_capacity(1024);
      b->set_want_found(true);
      for (const v1::Column& k : keys) *b->add_key_columns() = k;
      EXPECT_TRUE(stream->Write(j));
      stream->WritesDone();
      v1::JoinResponse resp;
      while (stream->Read(&resp)) {
        EXPECT_FALSE(resp.has_error()) << resp.error().message();
        resp.clear_index_version();
        out += resp.SerializeAsString();
      }
      const grpc::Status s = stream->Finish();
      EXPECT_TRUE(s.ok()) << s.error_message();
    }
    return out;
  }

  grpc::Status Save(const std::string& name, const std::string& file,
                    v1::SaveIndexResponse* out = nullptr) {
    grpc::ClientContext ctx;
    v1::SaveIndexRequest r;
    r.set_name(name);
    r.set_file(file);
    v1::SaveIndexResponse ignored;
    return stub_->SaveIndex(&ctx, r, out == nullptr ? &ignored : out);
  }
  grpc::Status LoadFile(const std::string& name, const std::string& file,
                        v1::LoadIndexResponse* out = nullptr) {
    grpc::ClientContext ctx;
    v1::LoadIndexRequest r;
    r.set_name(name);
    r.set_file(file);
    r.set_replace(true);
    v1::LoadIndexResponse ignored;
    return stub_->LoadIndex(&ctx, r, out == nullptr ? &ignored : out);
  }
};

TEST_F(SnapshotKeyColumnsTest, StringKeyedIndexWithPayloadSurvivesARestart) {
  Start();
  // wait_durable: the build returns once skus.gjsnap holds it.
  const v1::IndexInfo built = BuildKeys(SkuMessages("skus"));
  EXPECT_EQ(built.durable_version(), built.version());
  ASSERT_TRUE(fs::exists(dir_ / "skus.gjsnap"));
  auto reader = SnapshotReader::Open((dir_ / "skus.gjsnap").string());
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ(reader->format_version(), kSnapshotFormatVersion);
  EXPECT_EQ(reader->meta().key_column_names, (std::vector<std::string>{"sku"}));
  EXPECT_EQ(reader->shape().key_rows, 9u);

  auto before = Describe("skus");
  ASSERT_TRUE(before.ok()) << before.status();
  const std::string answers = KeyAnswers("skus", SkuProbe(), *before);
  ASSERT_THAT(answers, HasSubstr("empty"));  // the empty string's payload was found

  Start();  // the same --data-dir
  EXPECT_THAT(server_->log(), HasSubstr("loaded snapshot \"skus.gjsnap\" as index \"skus\""));
  auto after = Describe("skus");
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(Durable(*after), Durable(*before));
  EXPECT_EQ(after->key_type(), v1::KEY_TYPE_COLUMNS);
  ASSERT_EQ(after->key_columns_size(), 1);
  EXPECT_EQ(after->key_columns(0).name(), "sku");
  EXPECT_EQ(after->key_columns(0).type(), v1::COLUMN_TYPE_STRING);
  EXPECT_EQ(after->statistics().invalid_rows(), 1u);
  EXPECT_EQ(after->durable_version(), after->version());
  EXPECT_EQ(KeyAnswers("skus", SkuProbe(), *after), answers);
  EXPECT_EQ(MetricValue(Metrics(), "gpujoin_snapshot_loads_total"), 1);
}

TEST_F(SnapshotKeyColumnsTest, CompositeKeepAllWithNullsSavesLoadsAndSurvivesAKill) {
  Start();
  BuildKeys(OrderMessages("orders"));
  v1::SaveIndexResponse saved;
  grpc::Status s = Save("orders", "", &saved);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(saved.file(), "orders.gjsnap");
  s = Save("orders", "orders-copy.bin", &saved);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(saved.bytes(), fs::file_size(dir_ / "orders-copy.bin"));
  auto info = Describe("orders");
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_EQ(info->key_columns_size(), 2);
  EXPECT_EQ(info->statistics().invalid_rows(), 2u);  // a null id, a null s
  const std::string answers = KeyAnswers("orders", OrderProbe(), *info);

  // The copy under another name answers alike and gets its own snapshot.
  v1::LoadIndexResponse loaded;
  s = LoadFile("copy", "orders-copy.bin", &loaded);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(loaded.index().key_columns(1).name(), "s");
  EXPECT_EQ(KeyAnswers("copy", OrderProbe(), loaded.index()), answers);
  ASSERT_TRUE(WaitForLog(Written("copy", 1))) << server_->log();

  Kill();
  Start();
  EXPECT_THAT(server_->log(), HasSubstr("snapshots loaded: 2 indexes"));
  for (const std::string name : {"orders", "copy"}) {
    SCOPED_TRACE(name);
    auto again = Describe(name);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(again->duplicates(), v1::DUPLICATE_POLICY_KEEP_ALL);
    EXPECT_EQ(again->key_columns(0).name(), "id");
    EXPECT_EQ(again->key_columns(0).type(), v1::COLUMN_TYPE_INT64);
    EXPECT_EQ(again->key_columns(1).type(), v1::COLUMN_TYPE_STRING);
    EXPECT_EQ(KeyAnswers(name, OrderProbe(), *again), answers);
  }
}

// A snapshot written by the format version 1 writer (testdata: a uint64
// keep_all index with payload) loads at start: its keys are found with their
// groups' sizes.
TEST_F(SnapshotKeyColumnsTest, FormatVersion1FileLoadsAtStart) {
  const std::string fixture =
      std::string(GPUJOIN_SERVER_TESTDATA) + "/format_v1_keep_all_uint64.gjsnap";
  fs::copy_file(fixture, dir_ / "old.gjsnap");
  auto reader = SnapshotReader::Open(fixture);
  ASSERT_TRUE(reader.ok()) << reader.status();
  ASSERT_EQ(reader->format_version(), 1u);
  auto image = reader->ReadImage(1);
  ASSERT_TRUE(image.ok()) << image.status();
  std::vector<uint64_t> keys;
  std::vector<uint32_t> sizes;
  const auto slot_keys = image->keys.as<uint64_t>();
  const auto ranges = image->group_ranges.as<uint32_t>();
  for (size_t slot = 0; slot < slot_keys.size(); ++slot) {
    if (slot_keys[slot] == ~uint64_t{0}) continue;
    keys.push_back(slot_keys[slot]);
    sizes.push_back(ranges[2 * slot + 1]);
  }
  ASSERT_FALSE(keys.empty());

  Start();
  EXPECT_THAT(server_->log(), HasSubstr("loaded snapshot \"old.gjsnap\" as index \"old\""));
  auto info = Describe("old");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->key_type(), v1::KEY_TYPE_UINT64);
  EXPECT_EQ(info->duplicates(), v1::DUPLICATE_POLICY_KEEP_ALL);
  EXPECT_EQ(info->payload_size(), 5);
  EXPECT_EQ(info->key_columns_size(), 0);
  grpc::ClientContext ctx;
  auto stream = stub_->Lookup(&ctx);
  v1::LookupRequest r;
  r.set_index("old");
  r.set_want_match_counts(true);
  *r.mutable_keys64()->mutable_packed() = PackColumn<uint64_t>(keys);
  ASSERT_TRUE(stream->Write(r));
  stream->WritesDone();
  v1::LookupResponse resp;
  ASSERT_TRUE(stream->Read(&resp));
  ASSERT_TRUE(stream->Finish().ok());
  ASSERT_FALSE(resp.has_error()) << resp.error().message();
  EXPECT_EQ(resp.found(), std::string(keys.size(), '\1'));
  EXPECT_EQ(UnpackColumn<uint32_t>(resp.match_counts()), sizes);
}

TEST_F(SnapshotKeyColumnsTest, DamagedKeyColumnSectionsAreSkippedNamingTheSection) {
  Start();
  for (const std::string name : {"flipped", "truncated", "intact"}) BuildKeys(SkuMessages(name));
  server_.reset();
  // A byte of the key column's string bytes in flipped.gjsnap.
  std::string bytes = Slurp(dir_ / "flipped.gjsnap");
  size_t section = 0;
  for (const auto& e : SectionTable(bytes)) {
    if (e.type == 9 && e.column == 0) {  // key column 0 data
      bytes[e.offset + e.length - 1] ^= 0x20;
      break;
    }
    ++section;
  }
  Spill(dir_ / "flipped.gjsnap", bytes);
  // The row values, the last section, cut short: a torn write.
  bytes = Slurp(dir_ / "truncated.gjsnap");
  Spill(dir_ / "truncated.gjsnap", bytes.substr(0, bytes.size() - 70));

  Start();
  const std::string what = "section " + std::to_string(section) + " (key column 0 data)";
  EXPECT_THAT(server_->log(), HasSubstr("snapshot \"flipped.gjsnap\" skipped (corrupt): snapshot "
                                        "\"flipped.gjsnap\": " +
                                        what + " checksum mismatch"));
  EXPECT_THAT(server_->log(), HasSubstr("snapshot \"truncated.gjsnap\" skipped (truncated)"));
  EXPECT_THAT(server_->log(), HasSubstr("snapshots loaded: 1 indexes"));
  EXPECT_FALSE(Describe("flipped").ok());
  auto intact = Describe("intact");
  ASSERT_TRUE(intact.ok()) << intact.status();
  EXPECT_THAT(KeyAnswers("intact", SkuProbe(), *intact), HasSubstr("utf8"));
  const std::string metrics = Metrics();
  EXPECT_EQ(MetricValue(metrics, "gpujoin_snapshot_load_failures_total{reason=\"corrupt\"}"), 1);
  EXPECT_EQ(MetricValue(metrics, "gpujoin_snapshot_load_failures_total{reason=\"truncated\"}"), 1);

  // LoadIndex refuses it the same way, and the file stays.
  const grpc::Status s = LoadFile("flipped", "flipped.gjsnap");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DATA_LOSS) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr(what + " checksum mismatch"));
  EXPECT_TRUE(fs::exists(dir_ / "flipped.gjsnap"));
}

}  // namespace
}  // namespace gpujoin::server
