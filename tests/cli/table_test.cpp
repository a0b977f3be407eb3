// Input readers of the gpujoin CLI: CSV/TSV quoting and errors, JSON Lines,
// .u32 files, format detection.
#include "input/table.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

namespace gpujoin::cli {
namespace {

Table MustParse(std::string_view text, char delim = ',') {
  auto t = ParseDelimited(text, delim, "in.csv");
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : Table{};
}

std::string ErrorOf(std::string_view text, char delim = ',') {
  auto t = ParseDelimited(text, delim, "in.csv");
  EXPECT_FALSE(t.ok());
  return t.ok() ? "" : std::string(t.status().message());
}

TEST(ParseDelimited, HeaderRowsAndLineNumbers) {
  Table t = MustParse("id,name\n1,alpha\n\n2,beta\n");
  ASSERT_EQ(t.header, (std::vector<std::string>{"id", "name"}));
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_EQ(t.rows[0].line, 2u);
  EXPECT_EQ(t.rows[1].line, 4u);  // the blank line 3 is skipped
  EXPECT_EQ(*t.rows[1].cells[1], "beta");
  EXPECT_EQ(t.Where(1), "in.csv:4");
}

TEST(ParseDelimited, QuotedFieldsWithDelimitersQuotesAndNewlines) {
  Table t = MustParse("a,b\r\n\"x,y\",\"say \"\"hi\"\"\"\r\n\"two\nlines\",3\r\n4,5");
  ASSERT_EQ(t.rows.size(), 3u);
  EXPECT_EQ(*t.rows[0].cells[0], "x,y");
  EXPECT_EQ(*t.rows[0].cells[1], "say \"hi\"");
  EXPECT_EQ(*t.rows[1].cells[0], "two\nlines");
  EXPECT_EQ(t.rows[1].line, 3u);
  EXPECT_EQ(t.rows[2].line, 5u);  // the quoted newline moved the line count on
  EXPECT_EQ(*t.rows[2].cells[1], "5");
}

TEST(ParseDelimited, UnquotedEmptyIsNullQuotedEmptyIsEmptyString) {
  Table t = MustParse("a,b,c\n,\"\",x\n");
  ASSERT_EQ(t.rows.size(), 1u);
  EXPECT_FALSE(t.rows[0].cells[0].has_value());
  ASSERT_TRUE(t.rows[0].cells[1].has_value());
  EXPECT_EQ(*t.rows[0].cells[1], "");
}

TEST(ParseDelimited, TabSeparatedAndByteOrderMark) {
  Table t = MustParse("\xEF\xBB\xBFk\tv\n7\thello, world\n", '\t');
  ASSERT_EQ(t.header, (std::vector<std::string>{"k", "v"}));
  EXPECT_EQ(*t.rows[0].cells[1], "hello, world");
}

TEST(ParseDelimited, ErrorsNameFileLineAndField) {
  EXPECT_EQ(ErrorOf("a,b\n1,2\n3\n"), "in.csv:3: 1 fields, but the header has 2");
  EXPECT_EQ(ErrorOf("a,b\n1,\"open\n"),
            "in.csv:2: field 2: unterminated quoted field (no closing '\"')");
  EXPECT_NE(ErrorOf("a,b\n1,x\"y\n").find("in.csv:2: field 2: a quote inside an unquoted field"),
            std::string::npos);
  EXPECT_EQ(ErrorOf("a,b\n\"q\"z,1\n"),
            "in.csv:2: field 1: unexpected character after the closing quote");
  EXPECT_EQ(ErrorOf(""), "in.csv: empty input (no header line)");
  EXPECT_EQ(ErrorOf("a,a\n"), "in.csv:1: header column 2 'a' repeats the name of column 1");
  EXPECT_EQ(ErrorOf("a,,b\n"), "in.csv:1: header column 2 has an empty name");
}

TEST(ParseDelimited, HeaderOnlyHasNoRows) {
  Table t = MustParse("a,b\n");
  EXPECT_EQ(t.header.size(), 2u);
  EXPECT_TRUE(t.rows.empty());
}

TEST(TableColumn, MissingColumnListsTheColumns) {
  Table t = MustParse("id,name\n");
  auto c = t.Column("nope");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "in.csv: no column 'nope' (columns: id, name)");
  EXPECT_EQ(*t.Column("name"), 1u);
}

TEST(ParseJsonLines, UnionOfKeysNullsAndScalars) {
  auto t = ParseJsonLines(
      "{\"id\": 5, \"s\": \"x\"}\n\n{\"id\": 6, \"f\": 1.5, \"b\": true, \"s\": null}\r\n",
      "in.jsonl");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->header, (std::vector<std::string>{"id", "s", "f", "b"}));
  ASSERT_EQ(t->rows.size(), 2u);
  EXPECT_EQ(t->rows[1].line, 3u);
  EXPECT_EQ(*t->rows[0].cells[0], "5");
  EXPECT_FALSE(t->rows[0].cells[2].has_value());  // key absent in row 1
  EXPECT_FALSE(t->rows[1].cells[1].has_value());  // explicit null
  EXPECT_EQ(*t->rows[1].cells[2], "1.5");
  EXPECT_EQ(*t->rows[1].cells[3], "true");
}

TEST(ParseJsonLines, Errors) {
  auto bad = ParseJsonLines("{\"a\":1}\n{\"a\":\n", "e.jsonl");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "e.jsonl:2: not valid JSON");
  auto arr = ParseJsonLines("[1,2]\n", "e.jsonl");
  ASSERT_FALSE(arr.ok());
  EXPECT_EQ(arr.status().message(), "e.jsonl:1: expected a JSON object, got array");
}

TEST(ParseU32, LittleEndianRowsAndSizeCheck) {
  const unsigned char bytes[] = {1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x78, 0x56, 0x34, 0x12};
  auto t = ParseU32(std::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)), "k.u32");
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->rows.size(), 3u);
  EXPECT_EQ(*t->rows[0].cells[0], "1");
  EXPECT_EQ(*t->rows[1].cells[0], "4294967295");
  EXPECT_EQ(*t->rows[2].cells[0], "305419896");
  EXPECT_EQ(t->Where(2), "k.u32:row 3");
  auto odd = ParseU32(std::string_view("abcde"), "k.u32");
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.status().message().find("size 5 bytes is not a multiple of 4"), std::string::npos);
}

// .u64 and .i64 files: one reader templated on the element type;
// int64 values are written back signed, uint64 ones unsigned.
TEST(ParseBinaryColumn, Uint64AndInt64RowsAndSizeCheck) {
  const std::vector<uint64_t> words = {5000000000ull, ~uint64_t{0}, uint64_t{1} << 63};
  const std::string_view bytes(reinterpret_cast<const char*>(words.data()), words.size() * 8);
  auto u = ParseBinaryColumn<uint64_t>(bytes, "k.u64");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->format, InputFormat::kU64);
  EXPECT_EQ(*u->rows[0].cells[0], "5000000000");
  EXPECT_EQ(*u->rows[1].cells[0], "18446744073709551615");
  EXPECT_EQ(*u->rows[2].cells[0], "9223372036854775808");
  auto i = ParseBinaryColumn<int64_t>(bytes, "k.i64");
  ASSERT_TRUE(i.ok()) << i.status();
  EXPECT_EQ(i->format, InputFormat::kI64);
  EXPECT_EQ(*i->rows[0].cells[0], "5000000000");
  EXPECT_EQ(*i->rows[1].cells[0], "-1");
  EXPECT_EQ(*i->rows[2].cells[0], "-9223372036854775808");
  EXPECT_EQ(i->Where(1), "k.i64:row 2");
  auto odd = ParseBinaryColumn<int64_t>(bytes.substr(0, 12), "k.i64");
  ASSERT_FALSE(odd.ok());
  EXPECT_EQ(odd.status().message(),
            "k.i64: size 12 bytes is not a multiple of 8 (.i64 files hold little-endian int64 "
            "values)");
  EXPECT_EQ(*ParseInputFormat("u64"), InputFormat::kU64);
  EXPECT_EQ(*ParseInputFormat("i64"), InputFormat::kI64);
}

TEST(ReadTable, DetectsFormatByExtensionAndContent) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("gpujoin_table_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name, std::ios::binary) << text;
    return (dir / name).string();
  };
  auto u64 = ReadTable(write("a.u64", std::string(16, '\x01')));
  ASSERT_TRUE(u64.ok());
  EXPECT_EQ(u64->format, InputFormat::kU64);
  auto i64 = ReadTable(write("a.i64", std::string(8, '\xff')));
  ASSERT_TRUE(i64.ok());
  EXPECT_EQ(i64->format, InputFormat::kI64);
  EXPECT_EQ(*i64->rows[0].cells[0], "-1");
  auto jl = ReadTable(write("a.jsonl", "{\"k\":1}\n"));
  ASSERT_TRUE(jl.ok());
  EXPECT_EQ(jl->format, InputFormat::kJsonLines);
  auto sniff_json = ReadTable(write("noext", "{\"k\":1}\n"));
  ASSERT_TRUE(sniff_json.ok());
  EXPECT_EQ(sniff_json->format, InputFormat::kJsonLines);
  auto sniff_tsv = ReadTable(write("data.txt", "k\tv\n1\t2\n"));
  ASSERT_TRUE(sniff_tsv.ok());
  EXPECT_EQ(sniff_tsv->format, InputFormat::kTsv);
  auto csv = ReadTable(write("x.csv", "k,v\n1,2\n"));
  ASSERT_TRUE(csv.ok());
  EXPECT_EQ(csv->format, InputFormat::kCsv);
  auto forced = ReadTable(write("y.dat", "k;v\n"), InputFormat::kCsv);
  ASSERT_TRUE(forced.ok());
  EXPECT_EQ(forced->header.size(), 1u);
  auto missing = ReadTable((dir / "none.csv").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("none.csv: cannot open"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(ParseInputFormat, KnownAndUnknownNames) {
  EXPECT_EQ(*ParseInputFormat("tsv"), InputFormat::kTsv);
  EXPECT_FALSE(ParseInputFormat("xml").ok());
}

}  // namespace
}  // namespace gpujoin::cli
