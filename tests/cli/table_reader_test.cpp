// The CLI's batch reader: reading a file in batches, cut into
// pieces parsed in parallel, gives the rows, line numbers and errors of the
// whole-file parsers, whatever the batch and piece sizes (pieces that end
// inside quoted fields, CRLF, a byte order mark, multi-byte UTF-8); gzip and
// zstd inputs read like the plain file; binary formats are refused by name;
// and the reader's memory stays bounded on a 200 MB input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gpujoin/testing/compress.hpp"
#include "input/input_stream.hpp"
#include "input/table.hpp"
#include "input/table_reader.hpp"

namespace gpujoin::cli {
namespace {

namespace fs = std::filesystem;
using gpujoin::testing::Gzip;
using gpujoin::testing::Zstd;

class TableReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gpujoin_reader_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string Write(const std::string& name, const std::string& bytes) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p.string();
  }
  fs::path dir_;
};

// A random cell of CSV text: plain, quoted with delimiters, quotes, LF or CRLF
// inside, multi-byte UTF-8, a quoted empty string, or null.
std::string RandomField(std::mt19937_64& rng, char delim) {
  static const char* kPieces[] = {"a", "bc", "42", "-7", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80",
                                  " ", "x y", "\"", "\n", "\r\n", ",", "\t", "\"\""};
  switch (rng() % 6) {
    case 0:
      return "";  // null
    case 1:
      return "\"\"";  // empty string
    case 2: {
      std::string s;
      const int n = 1 + static_cast<int>(rng() % 6);
      for (int i = 0; i < n; ++i) {
        const std::string p = kPieces[rng() % 7];  // plain pieces only
        s += p;
      }
      return s;
    }
    default: {
      std::string s = "\"";
      const int n = 1 + static_cast<int>(rng() % 8);
      for (int i = 0; i < n; ++i) {
        std::string p = kPieces[rng() % (sizeof(kPieces) / sizeof(kPieces[0]))];
        if (p == "\"") p = "\"\"";
        if (p.size() == 1 && p[0] == delim) p = std::string(1, delim);
        s += p;
      }
      return s + "\"";
    }
  }
}

std::string RandomDelimited(uint64_t seed, size_t rows, char delim, bool crlf, bool bom) {
  std::mt19937_64 rng(seed);
  const size_t cols = 2 + rng() % 4;
  std::string text = bom ? "\xEF\xBB\xBF" : "";
  const char* eol = crlf ? "\r\n" : "\n";
  for (size_t c = 0; c < cols; ++c) text += (c ? std::string(1, delim) : "") + "c" + std::to_string(c);
  text += eol;
  for (size_t r = 0; r < rows; ++r) {
    if (rng() % 50 == 0) text += eol;  // a blank line
    for (size_t c = 0; c < cols; ++c) {
      if (c) text.push_back(delim);
      text += RandomField(rng, delim);
    }
    // The last record may end without a newline.
    if (r + 1 < rows || rng() % 2) text += eol;
  }
  return text;
}

void ExpectSameTable(const Table& want, const Table& got, const std::string& what) {
  ASSERT_EQ(got.header, want.header) << what;
  ASSERT_EQ(got.rows.size(), want.rows.size()) << what;
  for (size_t r = 0; r < want.rows.size(); ++r) {
    ASSERT_EQ(got.rows[r].line, want.rows[r].line) << what << " row " << r;
    ASSERT_EQ(got.rows[r].cells, want.rows[r].cells) << what << " row " << r;
  }
}

// All batches of `path`, concatenated, with the batch sizes checked.
absl::StatusOr<Table> ReadInBatches(const std::string& path, size_t batch_rows, size_t piece,
                                    int threads, InputFormat format = InputFormat::kAuto) {
  TableReader::Options o;
  o.format = format;
  o.batch_rows = batch_rows;
  o.piece_bytes = piece;
  o.threads = threads;
  auto reader = TableReader::Open(path, o);
  if (!reader.ok()) return reader.status();
  Table all = (*reader)->EmptyTable();
  Table batch;
  for (;;) {
    auto more = (*reader)->Next(&batch);
    if (!more.ok()) return more.status();
    if (!*more) break;
    EXPECT_LE(batch.rows.size(), batch_rows);
    EXPECT_GT(batch.rows.size(), 0u);
    EXPECT_EQ(batch.header, (*reader)->header());
    for (Row& r : batch.rows) all.rows.push_back(std::move(r));
  }
  return all;
}

TEST_F(TableReaderTest, BatchesOfRandomCsvEqualTheWholeFileParse) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    const char delim = seed % 3 == 0 ? '\t' : ',';
    const std::string text = RandomDelimited(seed, 3000, delim, seed % 2 == 0, seed % 4 == 1);
    ASSERT_GT(text.size(), 32u << 10);  // several pieces at every piece size below
    const std::string path = Write(delim == '\t' ? "r.tsv" : "r.csv", text);
    auto want = ParseDelimited(std::string_view(text), delim, path);
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_EQ(want->rows.size(), 3000u);
    for (size_t piece : {size_t{1}, size_t{7}, size_t{61}, size_t{4096}, size_t{4} << 20}) {
      for (size_t batch : {size_t{1}, size_t{999}, SIZE_MAX}) {
        for (int threads : {1, 3}) {
          const std::string what = "seed " + std::to_string(seed) + " piece " +
                                   std::to_string(piece) + " batch " + std::to_string(batch) +
                                   " threads " + std::to_string(threads);
          if (piece == 1 && batch != 999) continue;  // byte-sized pieces are slow; once is enough
          auto got = ReadInBatches(path, batch, piece, threads);
          ASSERT_TRUE(got.ok()) << what << ": " << got.status();
          ExpectSameTable(*want, *got, what);
        }
      }
    }
  }
}

TEST_F(TableReaderTest, ErrorsAreTheWholeFileParsersErrors) {
  const std::string good = RandomDelimited(11, 2000, ',', false, false);
  // Each broken file: the error the whole-file parser reports, from any piece size.
  const std::vector<std::string> broken = {
      good + "1,\"open\n",                       // unterminated quote at the end
      good.substr(0, good.size() / 2) + "\n\"q\"z" + good.substr(good.size() / 2),
      good.substr(0, good.size() / 3) + "\nx\"y\n" + good.substr(good.size() / 3),
      good + "\na,b,c,d,e,f,g,h\n",              // a row of the wrong width
      good.substr(0, good.size() / 2) + "\nbare\rcr\n",
  };
  for (size_t i = 0; i < broken.size(); ++i) {
    const std::string path = Write("bad" + std::to_string(i) + ".csv", broken[i]);
    auto want = ParseDelimited(std::string_view(broken[i]), ',', path);
    ASSERT_FALSE(want.ok()) << i;
    for (size_t piece : {size_t{5}, size_t{333}, size_t{1} << 20}) {
      auto got = ReadInBatches(path, 100, piece, 2);
      ASSERT_FALSE(got.ok()) << i << " piece " << piece;
      EXPECT_EQ(got.status().message(), want.status().message()) << i << " piece " << piece;
    }
  }
  EXPECT_EQ(ReadInBatches(Write("empty.csv", ""), 10, 10, 1).status().message(),
            (dir_ / "empty.csv").string() + ": empty input (no header line)");
}

TEST_F(TableReaderTest, BatchesOfJsonLinesEqualTheWholeFileParse) {
  std::mt19937_64 rng(5);
  std::string text;
  const char* keys[] = {"id", "name", "x", "late"};
  for (int r = 0; r < 4000; ++r) {
    text += "{";
    bool first = true;
    for (int k = 0; k < (r < 10 ? 3 : 4); ++k) {
      if (rng() % 4 == 0) continue;
      if (!first) text += ", ";
      first = false;
      text += "\"" + std::string(keys[k]) + "\": ";
      switch (rng() % 5) {
        case 0:
          text += std::to_string(rng() % 100000);
          break;
        case 1:
          text += "\"s\\\"\\u00e9\xE2\x82\xAC" + std::to_string(r) + "\"";
          break;
        case 2:
          text += "null";
          break;
        case 3:
          text += "1.5e3";
          break;
        default:
          text += "[1, {\"a\": true}]";
          break;
      }
    }
    text += r % 3 == 0 ? "}\r\n" : "}\n";
    if (r % 97 == 0) text += "\n";
  }
  const std::string path = Write("r.jsonl", text);
  auto want = ParseJsonLines(text, path);
  ASSERT_TRUE(want.ok()) << want.status();
  for (size_t piece : {size_t{13}, size_t{1000}, size_t{4} << 20}) {
    auto whole = ReadInBatches(path, SIZE_MAX, piece, 2);
    ASSERT_TRUE(whole.ok()) << whole.status();
    ExpectSameTable(*want, *whole, "piece " + std::to_string(piece));
  }
  // In batches, the first batch's keys are the columns ("late" appears after
  // row 10, inside the first batch of 100 rows).
  auto batched = ReadInBatches(path, 100, 1000, 2);
  ASSERT_TRUE(batched.ok()) << batched.status();
  ExpectSameTable(*want, *batched, "batches of 100");

  // A key first seen after the first batch is left out, with a note.
  TableReader::Options o;
  o.batch_rows = 5;
  o.piece_bytes = 100;
  auto reader = TableReader::Open(path, o);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->header().size(), 3u);
  Table b;
  while (*(*reader)->Next(&b)) EXPECT_EQ(b.rows[0].cells.size(), 3u);
  const auto notes = (*reader)->TakeNotes();
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("key 'late' first appears after the first batch"), std::string::npos)
      << notes[0];
}

TEST_F(TableReaderTest, JsonCellKindsKeepNumbersBooleansAndNestedValues) {
  auto t = ParseJsonLines("{\"n\": 5, \"s\": \"5\", \"b\": true, \"a\": [1,2], \"m\": 1}\n"
                          "{\"n\": 1.25e2, \"s\": \"x\", \"b\": false, \"a\": null, \"m\": \"y\"}\n",
                          "k.jsonl");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->header, (std::vector<std::string>{"n", "s", "b", "a", "m"}));
  EXPECT_EQ(t->cell_kinds, (std::vector<CellKind>{CellKind::kNumber, CellKind::kText,
                                                  CellKind::kBool, CellKind::kJson,
                                                  CellKind::kText}));
  EXPECT_EQ(*t->rows[1].cells[0], "1.25e2");  // a number keeps its spelling
  EXPECT_EQ(*t->rows[0].cells[3], "[1,2]");   // nested values: compact JSON
  auto bad = ParseJsonLines("{\"k\": 01}\n", "k.jsonl");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "k.jsonl:1: not valid JSON");
  auto trailing = ParseJsonLines("{\"k\": 1} 2\n", "k.jsonl");
  ASSERT_FALSE(trailing.ok());
  EXPECT_EQ(trailing.status().message(), "k.jsonl:1: not valid JSON");
}

TEST_F(TableReaderTest, GzipAndZstdInputsReadLikeThePlainFile) {
  const std::string text = RandomDelimited(21, 3000, ',', true, true);
  auto want = ReadTable(Write("plain.csv", text));
  ASSERT_TRUE(want.ok()) << want.status();
  const std::string gz = Gzip(text);
  const std::string zs = Zstd(text);
  // Two gzip members and two zstd frames one after the other read as one file.
  const std::string half_a = text.substr(0, text.size() / 2), half_b = text.substr(text.size() / 2);
  const std::vector<std::pair<std::string, std::string>> files = {
      {"a.csv.gz", gz},          {"a.csv.zst", zs},
      {"gz_by_magic.csv", gz},   {"zst_by_magic.csv", zs},
      {"two.csv.gz", Gzip(half_a) + Gzip(half_b)}, {"two.csv.zst", Zstd(half_a) + Zstd(half_b)}};
  for (const auto& [name, bytes] : files) {
    const std::string path = Write(name, bytes);
    for (size_t piece : {size_t{77}, size_t{4} << 20}) {
      auto got = ReadInBatches(path, 500, piece, 2);
      ASSERT_TRUE(got.ok()) << name << ": " << got.status();
      ExpectSameTable(*want, *got, name);
    }
  }
  // A .u32 key file compressed.
  std::string keys;
  for (uint32_t k = 0; k < 1000; ++k) keys.append(reinterpret_cast<const char*>(&k), 4);
  auto u32 = ReadTable(Write("k.u32.gz", Gzip(keys)));
  ASSERT_TRUE(u32.ok()) << u32.status();
  ASSERT_EQ(u32->rows.size(), 1000u);
  EXPECT_EQ(*u32->rows[999].cells[0], "999");
  EXPECT_EQ(u32->format, InputFormat::kU32);
  // Truncated input is an error naming the file, not a short table.
  auto cut = ReadTable(Write("cut.csv.gz", gz.substr(0, gz.size() / 2)));
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("truncated"), std::string::npos) << cut.status();
}

TEST_F(TableReaderTest, BinaryFormatsAreUnsupportedByName) {
  const std::string parquet = Write("data.bin", std::string("PAR1\x15\x04\x15", 7) + "xxxx");
  auto p = ReadTable(parquet);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(), parquet + ": unsupported format: parquet (convert to CSV or JSONL)");
  auto ext = ReadTable(Write("t.parquet", "id\n1\n"));
  ASSERT_FALSE(ext.ok());
  EXPECT_NE(ext.status().message().find("unsupported format: parquet"), std::string::npos);
  auto arrow = ReadTable(Write("t.feather", "ARROW1\0\0"));
  ASSERT_FALSE(arrow.ok());
  EXPECT_NE(arrow.status().message().find("unsupported format: arrow"), std::string::npos);
  auto orc = ReadTable(Write("t.orc.gz", Gzip("ORC....")));
  ASSERT_FALSE(orc.ok());
  EXPECT_NE(orc.status().message().find("unsupported format: orc"), std::string::npos);
  // A raw key file may start with any bytes.
  auto keys = ReadTable(Write("k.u32", "PAR1"));
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_EQ(keys->rows.size(), 1u);
}

uint64_t RssBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

// Regression for the finding (2.2 GiB of client memory for a 245 MB
// CSV): reading a 200 MB file in batches holds a few pieces and batches.
TEST_F(TableReaderTest, ReadingA200MbFileKeepsMemoryBounded) {
  const std::string path = (dir_ / "big.csv").string();
  {
    std::ofstream out(path, std::ios::binary);
    out << "id,name,score\n";
    std::string chunk;
    uint64_t bytes = 0;
    for (uint64_t i = 0; bytes < (200ull << 20); ++i) {
      chunk += std::to_string(i * 2654435761u % 100000007);
      chunk += i % 7 == 0 ? ",\"quoted, with\nnewline\"," : ",plain name,";
      chunk += std::to_string(i % 1000);
      chunk += '\n';
      if (chunk.size() > (1 << 20)) {
        out << chunk;
        bytes += chunk.size();
        chunk.clear();
      }
    }
    out << chunk;
  }
  const uint64_t before = RssBytes();
  uint64_t peak = before;
  TableReader::Options o;
  o.batch_rows = 1 << 16;
  auto reader = TableReader::Open(path, o);
  ASSERT_TRUE(reader.ok()) << reader.status();
  Table batch;
  uint64_t rows = 0;
  while (true) {
    auto more = (*reader)->Next(&batch);
    ASSERT_TRUE(more.ok()) << more.status();
    if (!*more) break;
    rows += batch.rows.size();
    peak = std::max(peak, RssBytes());
  }
  EXPECT_GT(rows, 5'000'000u);
  EXPECT_EQ((*reader)->bytes_read(), fs::file_size(path));
  // Whole, the file's rows would take well over 1 GiB.
  EXPECT_LT(peak - before, 160ull << 20) << "peak RSS grew by " << ((peak - before) >> 20) << " MiB";
}

}  // namespace
}  // namespace gpujoin::cli
