// The snapshot file format (server/src/storage/snapshot_format.hpp and
// snapshot_reader.hpp, docs/operations.md
// "Snapshot format"): xxHash64 against reference vectors (libxxhash 0.8.1), the
// parallel section checksum, a round trip of every index kind (key-schema
// indexes' key columns and row values, format version 2, included), a format
// version 1 file written by the version 1 writer (testdata), and every
// corruption detected before anything is installed: each single flipped byte of
// a whole file, every truncation, appended bytes, a newer format version (its
// message names both versions), a section table that disagrees with the
// metadata, and a damaged key-column or row-values section named.
#include "storage/snapshot_format.hpp"
#include "storage/snapshot_reader.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/testing/files.hpp"
#include "index_image_cases.hpp"
#include "snapshot_bytes.hpp"

namespace gpujoin::server {
namespace {

namespace et = engine::testing;
using gpujoin::testing::Slurp;
using gpujoin::testing::Spill;
using snapshot_testing::ResealHeader;
using snapshot_testing::SectionTable;
using snapshot_testing::TableEntry;

TEST(XxHash64Test, MatchesReferenceVectors) {
  EXPECT_EQ(XxHash64("", 0), 0xef46db3751d8e999ull);
  EXPECT_EQ(XxHash64("a", 1), 0xd24ec4f1a98c6e5bull);
  EXPECT_EQ(XxHash64("abc", 3), 0x44bc2cf5ad770999ull);
  std::string bytes;
  for (int r = 0; r < 3; ++r) {
    for (int i = 0; i < 256; ++i) bytes.push_back(char(i));
  }
  EXPECT_EQ(XxHash64(bytes.data(), bytes.size()), 0x8e03c838c596036full);
  const std::string s37 = "0123456789abcdef0123456789abcdef01234";
  EXPECT_EQ(XxHash64(s37.data(), s37.size(), 7), 0x12b6d879083cd1f2ull);
  EXPECT_EQ(XxHash64("xxhash", 6, 0x9E3779B185EBCA87ull), 0xd72e0867c7000864ull);
}

TEST(SectionChecksumTest, ParallelEqualsSerialAndSeesEveryBlock) {
  std::vector<uint8_t> data((size_t{9} << 20) + 123);
  std::mt19937_64 rng(5);
  for (auto& b : data) b = uint8_t(rng());
  const uint64_t serial = SectionChecksum(data.data(), data.size(), 1);
  EXPECT_EQ(SectionChecksum(data.data(), data.size(), 4), serial);
  data[(size_t{8} << 20) + 5] ^= 1;  // the third block
  EXPECT_NE(SectionChecksum(data.data(), data.size(), 4), serial);
  EXPECT_NE(SectionChecksum(data.data(), 0), SectionChecksum(data.data(), 1));
}

// The checksum is part of the file format: these values were computed by the
// checksum as format version 1 shipped it (before the reader hashed blocks
// piecewise on many threads), so a change of the combine fails here.
TEST(SectionChecksumTest, MatchesFormatVersion1) {
  std::vector<uint8_t> data((size_t{9} << 20) + 123);
  std::mt19937_64 rng(5);
  for (auto& b : data) b = uint8_t(rng());
  EXPECT_EQ(SectionChecksum(data.data(), data.size(), 3), 0x150b48609f98dab4ull);
  EXPECT_EQ(SectionChecksum(data.data(), size_t{8} << 20), 0x29c1c7a9c1cb9d87ull);
  EXPECT_EQ(SectionChecksum(data.data(), 0), 0xef46db3751d8e999ull);
}

class SnapshotFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto b = engine::CreateBackend(engine::BackendKind::kCpu);
    ASSERT_TRUE(b.ok());
    cpu_ = std::move(*b);
    dir_ = std::filesystem::temp_directory_path() /
           ("gpujoin_snapshot_format_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  SnapshotMeta MetaFor(const std::string& name, size_t columns, size_t key_columns = 0) {
    SnapshotMeta m;
    m.name = name;
    m.version = 7;
    m.first_value = 3;
    m.explicit_values = true;
    m.build_seconds = 0.25;
    m.built_unix_millis = 1234567890123;
    for (size_t c = 0; c < columns; ++c) m.payload_names.push_back("col" + std::to_string(c));
    for (size_t c = 0; c < key_columns; ++c) {
      m.key_column_names.push_back("key" + std::to_string(c));
    }
    return m;
  }

  // Writes the snapshot of a fresh build of `c`; returns the path.
  std::string WriteCase(const et::ImageCase& c, engine::IndexImage* image_out = nullptr) {
    const et::ImageSource source = et::MakeSource(c);
    auto index = et::BuildCase(*cpu_, c, source);
    auto image = cpu_->ExportIndex(*index);
    EXPECT_TRUE(image.ok());
    const std::string path = (dir_ / (et::CaseName(c) + ".gjsnap")).string();
    const int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
    EXPECT_GE(fd, 0);
    const SnapshotMeta meta = MetaFor("idx", image->payload.size(), image->key_columns.size());
    EXPECT_TRUE(WriteSnapshot(fd, meta, *image).ok());
    ::close(fd);
    EXPECT_EQ(std::filesystem::file_size(path), SnapshotFileBytes(meta, *image));
    if (image_out != nullptr) *image_out = std::move(*image);
    return path;
  }

  // Open and ReadImage: the first error, or OK.
  static absl::Status Load(const std::string& path) {
    auto reader = SnapshotReader::Open(path);
    if (!reader.ok()) return reader.status();
    return reader->ReadImage(2).status();
  }

  std::unique_ptr<engine::Backend> cpu_;
  std::filesystem::path dir_;
};

std::vector<et::ImageCase> EveryKind() {
  std::vector<et::ImageCase> cases = et::AllImageCases();
  for (const et::ImageCase& c : et::KeyColumnImageCases()) cases.push_back(c);
  return cases;
}

TEST_F(SnapshotFileTest, RoundTripOfEveryKind) {
  for (const et::ImageCase& c : EveryKind()) {
    SCOPED_TRACE(et::CaseName(c));
    engine::IndexImage written;
    const std::string path = WriteCase(c, &written);
    auto reader = SnapshotReader::Open(path);
    ASSERT_TRUE(reader.ok()) << reader.status();
    EXPECT_EQ(reader->format_version(), kSnapshotFormatVersion);
    EXPECT_EQ(reader->meta().name, "idx");
    EXPECT_EQ(reader->meta().version, 7u);
    EXPECT_EQ(reader->meta().first_value, 3u);
    EXPECT_TRUE(reader->meta().explicit_values);
    EXPECT_EQ(reader->meta().built_unix_millis, 1234567890123);
    EXPECT_EQ(reader->meta().payload_names.size(), written.payload.size());
    // The shape, known before the image is read, counts the key columns and
    // row values: the budget reserves them.
    const engine::IndexImageShape shape = written.shape();
    EXPECT_EQ(reader->shape().spec.key_columns, written.spec.key_columns);
    EXPECT_EQ(reader->shape().key_rows, shape.key_rows);
    EXPECT_EQ(reader->shape().key_columns, shape.key_columns);
    EXPECT_EQ(reader->shape().payload, shape.payload);
    EXPECT_EQ(engine::KeyStorageBytes(reader->shape()) != 0,
              c.key_type == engine::KeyType::kColumns);
    if (c.key_type == engine::KeyType::kColumns) {
      EXPECT_EQ(reader->meta().key_column_names, (std::vector<std::string>{"key0", "key1"}));
    } else {
      EXPECT_TRUE(reader->meta().key_column_names.empty());
    }
    auto image = reader->ReadImage(3);
    ASSERT_TRUE(image.ok()) << image.status();
    EXPECT_EQ(engine::ImageDifference(written, *image), "");
    EXPECT_EQ(image->bytes(), written.bytes());
    auto imported = cpu_->ImportIndex(*image);
    ASSERT_TRUE(imported.ok()) << imported.status();
    EXPECT_EQ(engine::ImportedIndexBytes(*cpu_, reader->shape()), (*imported)->memory_bytes());
  }
}

// The key-schema cases hold what a key can hold: null keys (invalid rows,
// stored with a 0 validity bit) and the empty string, and they survive the file.
TEST_F(SnapshotFileTest, KeyColumnsKeepNullsAndTheEmptyString) {
  const et::ImageCase c = et::KeyColumnImageCases()[0];
  engine::IndexImage written;
  const std::string path = WriteCase(c, &written);
  auto reader = SnapshotReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto image = reader->ReadImage(2);
  ASSERT_TRUE(image.ok()) << image.status();
  ASSERT_EQ(image->key_columns.size(), 2u);
  const engine::PayloadImage& str = image->key_columns[0];
  EXPECT_EQ(str.type, engine::ColumnType::kString);
  ASSERT_TRUE(str.nullable);
  EXPECT_GT(str.null_count, 0u);
  EXPECT_EQ(str.null_count, written.key_columns[0].null_count);
  EXPECT_EQ(image->key_columns[1].type, engine::ColumnType::kInt64);
  const std::span<const uint64_t> offsets = str.offsets.as<uint64_t>();
  const std::span<const uint8_t> valid = str.validity.as<uint8_t>();
  size_t empty_valid = 0;
  for (size_t r = 0; r + 1 < offsets.size(); ++r) {
    empty_valid += offsets[r] == offsets[r + 1] && (valid[r / 8] >> (r % 8) & 1);
  }
  EXPECT_GT(empty_valid, 0u) << "no row keyed by the empty string";
  EXPECT_EQ(image->row_values.size(), c.rows * 4);
  EXPECT_GT(image->statistics.invalid_rows, 0u);
  EXPECT_EQ(engine::ImageDifference(written, *image), "");
}

// A small keep_all index with payload: every byte of its file matters.
et::ImageCase SmallCase() {
  return {engine::KeyType::kUint64, engine::DuplicatePolicy::kKeepAll, 8, 0, 12, 5, true, 9};
}
// The same of a (string, int64) key schema: its key columns and row values too.
et::ImageCase SmallKeyCase() {
  return {engine::KeyType::kColumns, engine::DuplicatePolicy::kKeepAll, 8, 0, 12, 5, true, 9};
}

TEST_F(SnapshotFileTest, EveryFlippedByteIsDetected) {
  for (const et::ImageCase& c : {SmallCase(), SmallKeyCase()}) {
    SCOPED_TRACE(et::CaseName(c));
    const std::string path = WriteCase(c);
    const std::string good = Slurp(path);
    ASSERT_TRUE(Load(path).ok());
    ASSERT_LT(good.size(), 16384u) << "keep the file small: every byte is flipped";
    const std::string bad = path + ".bad";
    for (size_t i = 0; i < good.size(); ++i) {
      std::string copy = good;
      copy[i] = char(copy[i] ^ 0x10);
      Spill(bad, copy);
      const absl::Status s = Load(bad);
      EXPECT_FALSE(s.ok()) << "a flipped byte at " << i << " of " << good.size() << " was loaded";
    }
  }
}

TEST_F(SnapshotFileTest, EveryTruncationAndAppendIsDetected) {
  for (const et::ImageCase& c : {SmallCase(), SmallKeyCase()}) {
    SCOPED_TRACE(et::CaseName(c));
    const std::string path = WriteCase(c);
    const std::string good = Slurp(path);
    const std::string bad = path + ".bad";
    for (size_t n = 0; n < good.size(); ++n) {
      Spill(bad, good.substr(0, n));
      const absl::Status s = Load(bad);
      ASSERT_FALSE(s.ok()) << "truncated to " << n;
      EXPECT_TRUE(absl::IsOutOfRange(s)) << n << ": " << s;
      EXPECT_EQ(SnapshotLoadFailureReason(s), "truncated");
    }
    Spill(bad, good + std::string(64, '\0'));
    EXPECT_TRUE(absl::IsOutOfRange(Load(bad)));
  }
}

// Format version 4: a string column's dictionary (its codes column is the
// image's last payload column) comes back with its values, and the codes
// column's name is not a declared column's; a dictionary naming columns of
// other types is corrupt.
TEST_F(SnapshotFileTest, DictionariesRoundTrip) {
  const et::ImageCase c = SmallCase();
  const et::ImageSource source = et::MakeSource(c);
  auto index = et::BuildCase(*cpu_, c, source);
  auto image = cpu_->ExportIndex(*index);
  ASSERT_TRUE(image.ok());
  ASSERT_EQ(image->payload.size(), 5u);  // int64, string, bool, float64, uint32
  auto write = [&](uint32_t column, const std::string& name) {
    SnapshotMeta meta = MetaFor("idx", 4);
    engine::PayloadDictionary d;
    d.column = column;
    d.codes_column = 4;
    d.values.Add("alpha");
    d.values.Add("alphb");
    d.values.Add("");
    meta.dictionaries.push_back(d);
    const std::string path = (dir_ / name).string();
    const int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
    EXPECT_GE(fd, 0);
    EXPECT_TRUE(WriteSnapshot(fd, meta, *image).ok());
    ::close(fd);
    EXPECT_EQ(std::filesystem::file_size(path), SnapshotFileBytes(meta, *image));
    return path;
  };
  auto reader = SnapshotReader::Open(write(1, "dict.gjsnap"));
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ(reader->meta().payload_names,
            (std::vector<std::string>{"col0", "col1", "col2", "col3"}));
  ASSERT_EQ(reader->meta().dictionaries.size(), 1u);
  const engine::PayloadDictionary& d = reader->meta().dictionaries[0];
  EXPECT_EQ(d.column, 1u);
  EXPECT_EQ(d.codes_column, 4u);
  EXPECT_FALSE(d.retired);
  ASSERT_EQ(d.values.size(), 3u);
  EXPECT_EQ(d.values.Value(1), "alphb");
  EXPECT_EQ(d.values.Find(""), 2u);
  EXPECT_TRUE(reader->ReadImage(2).ok());

  const absl::Status s = Load(write(0, "dict_of_int.gjsnap"));  // column 0 is int64
  EXPECT_TRUE(absl::IsDataLoss(s) || absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find("dictionary 0 does not parse"), std::string::npos) << s.message();
}

// Format version 5 keeps IndexSpec.placement; a byte other than 0 or 1 is corrupt.
TEST_F(SnapshotFileTest, PlacementRoundTrips) {
  const et::ImageCase c = SmallKeyCase();
  const et::ImageSource source = et::MakeSource(c);
  auto index = et::BuildCase(*cpu_, c, source);
  auto image = cpu_->ExportIndex(*index);
  ASSERT_TRUE(image.ok());
  for (const bool replicated : {false, true}) {
    SnapshotMeta meta = MetaFor("idx", image->payload.size(), image->key_columns.size());
    meta.replicated = replicated;
    const std::string path = (dir_ / (replicated ? "r.gjsnap" : "p.gjsnap")).string();
    const int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(WriteSnapshot(fd, meta, *image).ok());
    ::close(fd);
    EXPECT_EQ(std::filesystem::file_size(path), SnapshotFileBytes(meta, *image));
    auto reader = SnapshotReader::Open(path);
    ASSERT_TRUE(reader.ok()) << reader.status();
    EXPECT_EQ(reader->meta().replicated, replicated);
    EXPECT_TRUE(reader->ReadImage(2).ok());
  }
}

TEST_F(SnapshotFileTest, NewerFormatVersionIsRefusedNamingBoth) {
  ASSERT_EQ(kSnapshotFormatVersion, 5u);
  const std::string path = WriteCase(SmallKeyCase());
  std::string bytes = Slurp(path);
  const uint32_t newer = 6;
  std::memcpy(bytes.data() + 8, &newer, 4);
  ResealHeader(bytes);  // a consistent newer file
  Spill(path, bytes);
  const absl::Status s = Load(path);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find("format version 6 is not supported"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("reads format versions 1 to 5"), std::string::npos) << s.message();
  EXPECT_EQ(SnapshotLoadFailureReason(s), "version");
}

// tests/server/testdata/format_v1_keep_all_uint64.gjsnap was written by the
// format version 1 writer (before key schemas) from SmallCase() and
// MetaFor("idx", 5): it loads as it did, into the image a build gives today.
TEST_F(SnapshotFileTest, FormatVersion1FileStillLoads) {
  const std::string path =
      std::string(GPUJOIN_SERVER_TESTDATA) + "/format_v1_keep_all_uint64.gjsnap";
  auto reader = SnapshotReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ(reader->format_version(), 1u);
  EXPECT_EQ(reader->meta().name, "idx");
  EXPECT_EQ(reader->meta().version, 7u);
  EXPECT_EQ(reader->meta().payload_names,
            (std::vector<std::string>{"col0", "col1", "col2", "col3", "col4"}));
  EXPECT_TRUE(reader->meta().key_column_names.empty());
  EXPECT_EQ(reader->shape().spec.key_type, engine::KeyType::kUint64);
  EXPECT_EQ(reader->shape().key_rows, 0u);
  auto image = reader->ReadImage(2);
  ASSERT_TRUE(image.ok()) << image.status();
  engine::IndexImage fresh;
  WriteCase(SmallCase(), &fresh);
  EXPECT_EQ(engine::ImageDifference(fresh, *image), "");
  ASSERT_TRUE(cpu_->ImportIndex(*image).ok());

  // Version 1 has no key schema: a version 1 file claiming key type columns
  // (2) is refused, its checksums recomputed so that only the meaning is wrong.
  std::string bytes = Slurp(path);
  const std::vector<TableEntry> table = SectionTable(bytes);
  ASSERT_EQ(table[0].type, 1u);
  const size_t key_type_at = table[0].offset + 4 + 3 + 1;  // after the name "idx" and backend
  ASSERT_EQ(bytes[key_type_at], char(engine::KeyType::kUint64));
  bytes[key_type_at] = char(engine::KeyType::kColumns);
  const uint64_t checksum = SectionChecksum(bytes.data() + table[0].offset, table[0].length);
  std::memcpy(bytes.data() + 64 + 24, &checksum, 8);
  ResealHeader(bytes);
  const std::string bad = (dir_ / "v1_columns.gjsnap").string();
  Spill(bad, bytes);
  const absl::Status s = Load(bad);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_NE(s.message().find("metadata does not parse"), std::string::npos) << s.message();
}

TEST_F(SnapshotFileTest, SectionTableMustMatchTheMetadata) {
  const std::string path = WriteCase(SmallCase());
  std::string bytes = Slurp(path);
  // Shorten the keys section's length by 8 (table entry 1) and re-seal the
  // header: the checksums hold, the sizes do not.
  uint64_t length;
  std::memcpy(&length, bytes.data() + 64 + 40 + 16, 8);
  length -= 8;
  std::memcpy(bytes.data() + 64 + 40 + 16, &length, 8);
  ResealHeader(bytes);
  Spill(path, bytes);
  const absl::Status s = Load(path);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_NE(s.message().find("keys"), std::string::npos) << s.message();
}

// Every key-schema section (each key column's data, offsets and validity, the
// row values): a length 8 bytes short of what the metadata implies is refused
// at Open naming the section, and a flipped byte at ReadImage as a checksum
// mismatch naming it.
TEST_F(SnapshotFileTest, KeyColumnSectionsAreCheckedAndNamed) {
  const std::string path = WriteCase(et::KeyColumnImageCases()[1]);
  const std::string good = Slurp(path);
  const std::vector<TableEntry> table = SectionTable(good);
  const std::string bad = path + ".bad";
  std::vector<std::string> named;
  for (size_t i = 0; i < table.size(); ++i) {
    const TableEntry& e = table[i];
    // Section types 9 to 12 (snapshot_layout.hpp): a key column's data,
    // offsets and validity, the row values.
    if (e.type < 9 || e.type > 12) continue;
    const char* kinds[] = {"data", "offsets", "validity"};
    const std::string what =
        e.type == 12 ? "row values" : absl::StrCat("key column ", e.column, " ", kinds[e.type - 9]);
    SCOPED_TRACE(what);
    named.push_back(what);
    ASSERT_GE(e.length, 8u);
    std::string copy = good;
    const uint64_t shorter = e.length - 8;
    std::memcpy(copy.data() + e.at + 16, &shorter, 8);
    ResealHeader(copy);
    Spill(bad, copy);
    absl::Status s = SnapshotReader::Open(bad).status();
    EXPECT_TRUE(absl::IsDataLoss(s)) << s;
    EXPECT_NE(
        s.message().find(absl::StrCat("section ", i, " is ", what, " of ", shorter,
                                      " bytes; the metadata implies ", what, " of ", e.length)),
        std::string::npos)
        << s.message();

    copy = good;
    copy[e.offset + e.length / 2] ^= 0x04;
    Spill(bad, copy);
    s = Load(bad);
    EXPECT_TRUE(absl::IsDataLoss(s)) << s;
    EXPECT_NE(s.message().find(absl::StrCat("section ", i, " (", what, ") checksum mismatch")),
              std::string::npos)
        << s.message();
    EXPECT_EQ(SnapshotLoadFailureReason(s), "corrupt");
  }
  EXPECT_EQ(named, (std::vector<std::string>{"key column 0 data", "key column 0 offsets",
                                             "key column 0 validity", "key column 1 data",
                                             "key column 1 validity", "row values"}));
}

// Sections of several 4 MiB checksum blocks, with and without a tail (the
// string offsets are 8 MiB + 8 bytes): ReadImage reads and hashes the blocks of
// all sections on any number of threads into the image the writer wrote, and a
// byte flipped in any block names its section.
TEST_F(SnapshotFileTest, MultiBlockSectionsOnAnyNumberOfThreads) {
  const et::ImageCase big{engine::KeyType::kUint64,
                          engine::DuplicatePolicy::kLowestRow,
                          uint32_t{1} << 20,
                          0,
                          300000,
                          uint64_t{1} << 40,
                          true,
                          11};
  engine::IndexImage written;
  const std::string path = WriteCase(big, &written);
  for (unsigned threads : {1u, 3u, 16u, 0u}) {
    SCOPED_TRACE(threads);
    auto reader = SnapshotReader::Open(path);
    ASSERT_TRUE(reader.ok()) << reader.status();
    auto image = reader->ReadImage(threads);
    ASSERT_TRUE(image.ok()) << image.status();
    EXPECT_EQ(engine::ImageDifference(written, *image), "");
  }
  const std::string good = Slurp(path);
  uint32_t sections;
  std::memcpy(&sections, good.data() + 16, 4);
  const std::string bad = path + ".bad";
  size_t multi_block = 0, with_tail = 0;
  for (uint32_t i = 1; i < sections; ++i) {
    uint64_t offset, length;
    std::memcpy(&offset, good.data() + 64 + 40 * i + 8, 8);
    std::memcpy(&length, good.data() + 64 + 40 * i + 16, 8);
    if (length <= (uint64_t{4} << 20)) continue;
    ++multi_block;
    with_tail += length % (uint64_t{4} << 20) != 0;
    // The first byte of the second block, and the section's last byte.
    for (uint64_t at : {offset + (uint64_t{4} << 20), offset + length - 1}) {
      SCOPED_TRACE(at);
      std::string copy = good;
      copy[at] = char(copy[at] ^ 0x01);
      Spill(bad, copy);
      const absl::Status s = Load(bad);
      EXPECT_TRUE(absl::IsDataLoss(s)) << s;
      EXPECT_NE(s.message().find(absl::StrCat("section ", i, " (")), std::string::npos)
          << s.message();
      EXPECT_NE(s.message().find("checksum mismatch"), std::string::npos) << s.message();
    }
  }
  EXPECT_GE(multi_block, 3u);
  EXPECT_GE(with_tail, 1u);
}

// A file cut short after Open (a concurrent truncation): the blocks past the
// end are a short read, OUT_OF_RANGE, not a checksum mismatch.
TEST_F(SnapshotFileTest, FileShortenedAfterOpenIsAShortRead) {
  const et::ImageCase big{engine::KeyType::kUint32,
                          engine::DuplicatePolicy::kLowestRow,
                          uint32_t{1} << 21,
                          0,
                          200000,
                          uint64_t{1} << 30,
                          false,
                          12};
  const std::string path = WriteCase(big);
  auto reader = SnapshotReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  const absl::Status s = reader->ReadImage(4).status();
  EXPECT_TRUE(absl::IsOutOfRange(s)) << s;
  EXPECT_NE(s.message().find("truncated"), std::string::npos) << s.message();
}

TEST_F(SnapshotFileTest, NotASnapshot) {
  const std::string path = (dir_ / "junk.gjsnap").string();
  Spill(path, std::string(200, 'x'));
  EXPECT_TRUE(absl::IsDataLoss(Load(path)));
  EXPECT_TRUE(absl::IsNotFound(Load((dir_ / "missing.gjsnap").string())));
}

}  // namespace
}  // namespace gpujoin::server
