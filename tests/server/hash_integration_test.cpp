// Hash over Arrow's types through a real gpujoind, CPU backend by
// default ($GPUJOIN_TEST_BACKEND=cuda on the H200):
//  - random column trees of every type (nested three levels: struct, list,
//    large list, fixed-size list, map, dictionary with every index width) hash
//    exactly as the engine run directly on the same buffers, at 32 and 64 bits;
//  - hashing a slice equals slicing the hash, and padding any child's buffers in
//    front (its offset moved past the padding) changes nothing;
//  - a dictionary hashes as its decoded values, a valid index to a null entry is
//    null, and null index slots are never read;
//  - the null contract at each level (struct field nulls the row, list element
//    does not);
//  - every malformed request is refused in-band with INVALID_ARGUMENT naming the
//    path and the sizes, and the stream goes on;
//  - payload columns keep refusing the hash-only types.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "build_messages.hpp"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/graph.hpp"
#include "wire/column_codec.hpp"
#include "wire/hash_wire.hpp"
#include "gpujoin/testing/server_process.hpp"
#include "gpujoin/v1/gpujoin.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "hash_model.hpp"
#include "test_util.hpp"

namespace gpujoin::server {
namespace {

using gpujoin::testing::ServerProcess;
using ::testing::HasSubstr;
using testing::ModelColumn;
using testing::ModelGenerator;

struct Answer {
  std::vector<uint64_t> hashes;  // widened
  std::vector<bool> valid;
  std::string error;  // empty when OK
  int code = 0;
};

struct BadCase;

class HashIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<ServerProcess>(gpujoin::testing::ServerOptions{});
    ASSERT_TRUE(server_->ready()) << "gpujoind did not become ready; log:\n" << server_->log();
    stub_ = v1::GpuJoin::NewStub(
        grpc::CreateChannel(server_->grpc_address(), grpc::InsecureChannelCredentials()));
    backend_ = testing::CpuBackend();
  }

  static Answer FromResponse(const v1::HashResponse& r, uint32_t bits) {
    Answer a;
    if (r.has_error()) {
      a.error = r.error().message();
      a.code = r.error().code();
      return a;
    }
    if (bits == 32) {
      for (uint32_t h : UnpackColumn<uint32_t>(r.hashes())) a.hashes.push_back(h);
    } else {
      a.hashes = UnpackColumn<uint64_t>(r.hashes());
    }
    uint64_t nulls = 0;
    for (size_t i = 0; i < a.hashes.size(); ++i) {
      a.valid.push_back((static_cast<uint8_t>(r.validity()[i / 8]) >> (i % 8)) & 1);
      nulls += !a.valid.back();
    }
    EXPECT_EQ(r.null_count(), nulls);
    return a;
  }

  // One stream: every request written, then every answer read (small: no deadlock).
  std::vector<Answer> HashMany(const std::vector<v1::HashRequest>& requests) {
    grpc::ClientContext ctx;
    auto stream = stub_->Hash(&ctx);
    for (const auto& r : requests) EXPECT_TRUE(stream->Write(r));
    stream->WritesDone();
    std::vector<Answer> out;
    v1::HashResponse resp;
    size_t i = 0;
    while (stream->Read(&resp)) {
      out.push_back(FromResponse(resp, i < requests.size() && requests[i].bits() == 32 ? 32 : 64));
      ++i;
    }
    grpc::Status s = stream->Finish();
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(out.size(), requests.size());
    return out;
  }

  static v1::HashRequest Request(const std::vector<ModelColumn>& columns, uint32_t bits) {
    v1::HashRequest r;
    for (const ModelColumn& c : columns) *r.add_columns() = testing::ToWire(c);
    r.set_bits(bits);
    return r;
  }

  Answer HashOne(const std::vector<ModelColumn>& columns, uint32_t bits = 64) {
    auto a = HashMany({Request(columns, bits)});
    return a.empty() ? Answer{} : a[0];
  }

  // Sends each bad case followed by a good batch of `good` in one stream: each
  // bad one is refused in band (INVALID_ARGUMENT and its message), the good one
  // after it still hashed. Defined beside BadCase.
  void ExpectRefusedInBand(const std::vector<BadCase>& cases, const ModelColumn& good);

  // The engine's answer on the same buffers, without the server.
  Answer Direct(const std::vector<ModelColumn>& columns, uint32_t bits) {
    const uint64_t rows = columns[0].length;
    engine::HashNode node;
    for (const ModelColumn& c : columns) node.columns.push_back(testing::ToEngine(c));
    std::vector<uint32_t> out32(rows);
    std::vector<uint64_t> out64(rows);
    std::vector<uint8_t> validity((rows + 7) / 8);
    node.bits = bits == 32 ? engine::HashBits::k32 : engine::HashBits::k64;
    if (bits == 32) {
      node.out32 = out32;
    } else {
      node.out64 = out64;
    }
    node.out_validity = validity;
    engine::CommandGraph g;
    g.Add(std::move(node));
    Answer a;
    absl::Status s = backend_->Run(g);
    if (!s.ok()) {
      a.error = std::string(s.message());
      a.code = static_cast<int>(s.code());
      return a;
    }
    for (uint64_t r = 0; r < rows; ++r) {
      a.hashes.push_back(bits == 32 ? out32[r] : out64[r]);
      a.valid.push_back((validity[r / 8] >> (r % 8)) & 1);
    }
    return a;
  }

  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<v1::GpuJoin::Stub> stub_;
  std::unique_ptr<engine::Backend> backend_;
};

std::string Describe(const ModelColumn& m) {
  std::string s = v1::ColumnType_Name(m.type).substr(12);
  if (m.children.empty()) return s;
  s += "<";
  for (size_t i = 0; i < m.children.size(); ++i) s += (i ? "," : "") + Describe(m.children[i]);
  return s + ">";
}

// Random trees: the server answers as the engine does, slices hash as slices,
// and padding every node's buffers changes nothing.
TEST_F(HashIntegrationTest, RandomTreesMatchTheEngineSliceAndIgnoreChildOffsets) {
  ModelGenerator gen(22);
  int nested = 0;
  for (int round = 0; round < 60; ++round) {
    const uint64_t rows = gen.Uniform(0, 40);
    std::vector<ModelColumn> columns;
    const uint64_t count = gen.Uniform(1, 3);
    for (uint64_t i = 0; i < count; ++i) columns.push_back(gen.Column(rows, 3));
    std::string what;
    for (const auto& c : columns) {
      what += Describe(c) + " ";
      nested += !c.children.empty();
    }
    SCOPED_TRACE(what + "rows " + std::to_string(rows));
    for (uint32_t bits : {32u, 64u}) {
      const Answer direct = Direct(columns, bits);
      ASSERT_TRUE(direct.error.empty()) << direct.error;
      const uint64_t a = rows == 0 ? 0 : gen.Uniform(0, rows - 1);
      const uint64_t n = rows == 0 ? 0 : gen.Uniform(0, rows - a);
      std::vector<ModelColumn> slice = columns, padded;
      for (ModelColumn& c : slice) {
        c.offset += a;
        c.length = n;
      }
      for (const ModelColumn& c : columns) {
        padded.push_back(testing::PadEveryNode(c, gen.Uniform(1, 9), gen.rng()));
      }
      const auto got =
          HashMany({Request(columns, bits), Request(slice, bits), Request(padded, bits)});
      ASSERT_EQ(got.size(), 3u);
      for (const Answer& g : got) ASSERT_TRUE(g.error.empty()) << g.error;
      EXPECT_EQ(got[0].hashes, direct.hashes);
      EXPECT_EQ(got[0].valid, direct.valid);
      for (uint64_t r = 0; r < rows; ++r) {
        if (!direct.valid[r]) EXPECT_EQ(direct.hashes[r], 0u) << r;
      }
      ASSERT_EQ(got[1].hashes.size(), n);
      for (uint64_t r = 0; r < n; ++r) {
        EXPECT_EQ(got[1].hashes[r], got[0].hashes[a + r]) << "slice row " << r;
        EXPECT_EQ(got[1].valid[r], got[0].valid[a + r]) << "slice row " << r;
      }
      EXPECT_EQ(got[2].hashes, got[0].hashes) << "padded buffers";
      EXPECT_EQ(got[2].valid, got[0].valid) << "padded buffers";
    }
  }
  EXPECT_GT(nested, 20);  // the draw covers nested columns, not just flat ones
}

// `dict` decoded: one flat column of its type holding each row's entry.
ModelColumn Decoded(const ModelColumn& dict) {
  const ModelColumn& values = dict.children[0];
  ModelColumn out;
  out.type = values.type;
  out.byte_width = values.byte_width;
  out.length = dict.length;
  out.validity.assign((dict.length + 7) / 8, '\0');
  const uint32_t iw = ModelGenerator::IndexWidth(dict.index_type);
  const uint32_t w = testing::FixedWidth(values.type);
  std::vector<int64_t> offsets = {0};
  for (uint64_t r = 0; r < dict.length; ++r) {
    uint64_t e = 0;
    std::memcpy(&e, dict.data.data() + (dict.offset + r) * iw, iw);
    const bool valid = dict.Valid(dict.offset + r) && values.Valid(values.offset + e);
    if (valid) out.validity[r / 8] |= static_cast<char>(1u << (r % 8));
    const uint64_t p = valid ? values.offset + e : 0;
    if (w != 0 || values.type == v1::COLUMN_TYPE_FIXED_SIZE_BINARY) {
      const uint32_t width = w != 0 ? w : values.byte_width;
      out.data += valid ? values.data.substr(p * width, width) : std::string(width, '\0');
    } else if (values.type == v1::COLUMN_TYPE_BOOL) {
      if (out.data.size() * 8 <= r) out.data.push_back('\0');
      if (valid && ((static_cast<uint8_t>(values.data[p / 8]) >> (p % 8)) & 1)) {
        out.data[r / 8] |= static_cast<char>(1u << (r % 8));
      }
    } else {
      int64_t b = 0, e2 = 0;
      if (valid) {
        b = testing::IsLarge(values.type) ? values.offsets64[p] : values.offsets32[p];
        e2 = testing::IsLarge(values.type) ? values.offsets64[p + 1] : values.offsets32[p + 1];
      }
      out.data += values.data.substr(b, e2 - b);
      offsets.push_back(static_cast<int64_t>(out.data.size()));
    }
  }
  if (testing::IsBinaryLike(values.type)) {
    if (testing::IsLarge(values.type)) {
      out.offsets64 = offsets;
    } else {
      out.offsets32.assign(offsets.begin(), offsets.end());
    }
  }
  return out;
}

TEST_F(HashIntegrationTest, DictionaryHashesAsItsDecodedValues) {
  ModelGenerator gen(7);
  int null_entries_hit = 0;
  for (int round = 0; round < 40; ++round) {
    const uint64_t rows = gen.Uniform(1, 50);
    ModelColumn dict = gen.Dictionary(rows, gen.Uniform(0, 1) == 1);
    ModelColumn decoded = Decoded(dict);
    SCOPED_TRACE(Describe(dict) + " index " + v1::ColumnType_Name(dict.index_type));
    for (uint32_t bits : {32u, 64u}) {
      const auto got = HashMany({Request({dict}, bits), Request({decoded}, bits)});
      ASSERT_EQ(got.size(), 2u);
      ASSERT_TRUE(got[0].error.empty()) << got[0].error;
      ASSERT_TRUE(got[1].error.empty()) << got[1].error;
      EXPECT_EQ(got[0].hashes, got[1].hashes);
      EXPECT_EQ(got[0].valid, got[1].valid);
    }
    for (uint64_t r = 0; r < rows; ++r) {
      null_entries_hit += dict.Valid(dict.offset + r) &&
                          !((static_cast<uint8_t>(decoded.validity[r / 8]) >> (r % 8)) & 1);
    }
  }
  EXPECT_GT(null_entries_hit, 5);  // valid indices to null entries were drawn

  // Two dictionaries, different order and an unused entry, the same values: equal hashes.
  ModelColumn a;
  a.type = v1::COLUMN_TYPE_DICTIONARY;
  a.index_type = v1::COLUMN_TYPE_UINT8;
  a.data = std::string("\x00\x01\x00\x02", 4);
  a.length = 4;
  ModelColumn av;
  av.type = v1::COLUMN_TYPE_STRING;
  av.data = "redgreenblue";
  av.offsets32 = {0, 3, 8, 12};
  av.length = 3;
  a.children = {av};
  ModelColumn b = a;
  b.index_type = v1::COLUMN_TYPE_INT64;
  b.data.clear();
  for (int64_t i : {3, 2, 3, 0}) b.data.append(reinterpret_cast<const char*>(&i), 8);
  ModelColumn bv;
  bv.type = v1::COLUMN_TYPE_STRING;
  bv.data = "bluexgreenred";
  bv.offsets32 = {0, 4, 5, 10, 13};
  bv.length = 4;
  b.children = {bv};
  ModelColumn plain = av;
  plain.data = "redgreenredblue";
  plain.offsets32 = {0, 3, 8, 11, 15};
  plain.length = 4;
  const Answer ha = HashOne({a}), hb = HashOne({b}), hp = HashOne({plain});
  ASSERT_TRUE(ha.error.empty() && hb.error.empty() && hp.error.empty())
      << ha.error << hb.error << hp.error;
  EXPECT_EQ(ha.hashes, hp.hashes);
  EXPECT_EQ(hb.hashes, hp.hashes);
  EXPECT_EQ(ha.hashes[0], ha.hashes[2]);
  EXPECT_NE(ha.hashes[0], ha.hashes[1]);
}

ModelColumn Int32s(std::vector<int32_t> v, std::string validity = "") {
  ModelColumn m;
  m.type = v1::COLUMN_TYPE_INT32;
  m.data = testing::Bytes(v);
  m.length = v.size();
  m.validity = std::move(validity);
  return m;
}

TEST_F(HashIntegrationTest, NullContractAtEachLevel) {
  // struct<a: int32, b: int32>, rows: {1,1}, {2,null}, null, {4,4}.
  ModelColumn s;
  s.type = v1::COLUMN_TYPE_STRUCT;
  s.length = 4;
  s.validity = "\x0b";                                                // row 2 null
  s.children = {Int32s({1, 2, 3, 4}), Int32s({1, 2, 3, 4}, "\x0d")};  // b row 1 null
  const Answer hs = HashOne({s});
  ASSERT_TRUE(hs.error.empty()) << hs.error;
  EXPECT_EQ(hs.valid, (std::vector<bool>{true, false, false, true}));
  EXPECT_EQ(hs.hashes[1], 0u);
  EXPECT_EQ(hs.hashes[2], 0u);

  // A struct under a list nulls the element, not the list row; list rows
  // [ {1} ], [ null-field ], [], null.
  ModelColumn inner;
  inner.type = v1::COLUMN_TYPE_STRUCT;
  inner.length = 2;
  inner.children = {Int32s({1, 7}, "\x01")};
  ModelColumn list;
  list.type = v1::COLUMN_TYPE_LIST;
  list.length = 4;
  list.offsets32 = {0, 1, 2, 2, 2};
  list.validity = "\x07";
  list.children = {inner};
  const Answer hl = HashOne({list});
  ASSERT_TRUE(hl.error.empty()) << hl.error;
  EXPECT_EQ(hl.valid, (std::vector<bool>{true, true, true, false}));
  EXPECT_NE(hl.hashes[0], hl.hashes[1]);  // [{f: 1}] vs [null]
  EXPECT_NE(hl.hashes[1], hl.hashes[2]);  // [null] vs []

  // [null] and [0] differ; [null, 5] and [5, null] differ.
  ModelColumn l2;
  l2.type = v1::COLUMN_TYPE_LIST;
  l2.length = 4;
  l2.offsets32 = {0, 1, 2, 4, 6};
  l2.children = {Int32s({0, 0, 0, 5, 5, 0}, "\x1a")};  // values 0, 2 and 5 null
  const Answer h2 = HashOne({l2});
  ASSERT_TRUE(h2.error.empty()) << h2.error;
  EXPECT_EQ(h2.valid, (std::vector<bool>(4, true)));
  EXPECT_NE(h2.hashes[0], h2.hashes[1]);
  EXPECT_NE(h2.hashes[2], h2.hashes[3]);

  // A null in any top-level column nulls the row; a NULL column nulls every row.
  ModelColumn nulls;
  nulls.type = v1::COLUMN_TYPE_NULL;
  nulls.length = 4;
  const Answer hn = HashOne({Int32s({1, 2, 3, 4}), nulls});
  ASSERT_TRUE(hn.error.empty()) << hn.error;
  EXPECT_EQ(hn.valid, (std::vector<bool>(4, false)));
  EXPECT_EQ(hn.hashes, (std::vector<uint64_t>(4, 0)));
}

TEST_F(HashIntegrationTest, FlatTypesHashTheirBytes) {
  // STRING hashes as BINARY; int8 -1 as uint8 255; bool is bit-packed (row 8 lies
  // in the second byte).
  ModelColumn bin;
  bin.type = v1::COLUMN_TYPE_BINARY;
  bin.data = "abcxyz";
  bin.offsets32 = {0, 3, 3, 6};
  bin.length = 3;
  ModelColumn str = bin;
  str.type = v1::COLUMN_TYPE_STRING;
  EXPECT_EQ(HashOne({bin}).hashes, HashOne({str}).hashes);
  ModelColumn i8;
  i8.type = v1::COLUMN_TYPE_INT8;
  i8.data = "\xff\x01";
  i8.length = 2;
  ModelColumn u8 = i8;
  u8.type = v1::COLUMN_TYPE_UINT8;
  EXPECT_EQ(HashOne({i8}).hashes, HashOne({u8}).hashes);
  ModelColumn bits;
  bits.type = v1::COLUMN_TYPE_BOOL;
  bits.data = std::string("\x01\x01", 2);  // rows 0 and 8 true
  bits.length = 10;
  const Answer hb = HashOne({bits});
  ASSERT_TRUE(hb.error.empty()) << hb.error;
  EXPECT_EQ(hb.hashes[0], hb.hashes[8]);
  EXPECT_NE(hb.hashes[0], hb.hashes[1]);
  EXPECT_EQ(hb.hashes[1], hb.hashes[9]);
  // fixed_size_binary(0): every valid row alike, the nulls null.
  ModelColumn empty;
  empty.type = v1::COLUMN_TYPE_FIXED_SIZE_BINARY;
  empty.length = 5;
  empty.offset = 3;
  empty.validity = "\xd8";  // rows 3, 4, 6, 7 of 8 physical
  const Answer he = HashOne({empty});
  ASSERT_TRUE(he.error.empty()) << he.error;
  EXPECT_EQ(he.valid, (std::vector<bool>{true, true, false, true, true}));
  EXPECT_EQ(he.hashes[0], he.hashes[4]);
}

// A list nested `levels` deep around one int32 value.
ModelColumn Chain(uint32_t levels) {
  ModelColumn m = Int32s({5});
  for (uint32_t i = 1; i < levels; ++i) {
    ModelColumn l;
    l.type = v1::COLUMN_TYPE_LIST;
    l.length = 1;
    l.offsets32 = {0, 1};
    l.children = {m};
    m = std::move(l);
  }
  return m;
}

struct BadCase {
  std::string what;
  std::vector<ModelColumn> columns;
  std::string message;  // the whole message, or a part of it when `substring`
  bool substring = false;
  std::function<void(v1::HashRequest*)> tweak = nullptr;  // edits after ToWire
};

// The well-formed columns the bad cases start from: three int32 rows, and a
// string, list, struct and dictionary column of three rows each.
struct GoodColumns {
  ModelColumn i32, str, list, st, dict;
};

GoodColumns MakeGoodColumns() {
  GoodColumns g;
  g.i32 = Int32s({1, 2, 3});
  ModelColumn& i32 = g.i32;
  ModelColumn& str = g.str;
  ModelColumn& list = g.list;
  ModelColumn& st = g.st;
  ModelColumn& dict = g.dict;
  str.type = v1::COLUMN_TYPE_STRING;
  str.data = "abcdef";
  str.offsets32 = {0, 2, 4, 6};
  str.length = 3;
  list.type = v1::COLUMN_TYPE_LIST;
  list.length = 3;
  list.offsets32 = {0, 1, 2, 3};
  list.children = {i32};
  st.type = v1::COLUMN_TYPE_STRUCT;
  st.length = 3;
  st.children = {i32, str, i32};
  dict.type = v1::COLUMN_TYPE_DICTIONARY;
  dict.index_type = v1::COLUMN_TYPE_UINT8;
  dict.data = std::string("\x00\x01\x02", 3);
  dict.length = 3;
  dict.children = {str};
  return g;
}

// `m` as `f` edits it.
template <class F>
ModelColumn With(ModelColumn m, F f) {
  f(m);
  return m;
}

// Bad shapes: lengths, types, and buffers or children a type does not take.
std::vector<BadCase> ShapeBadCases(const GoodColumns& g) {
  const ModelColumn& i32 = g.i32;
  const ModelColumn& str = g.str;
  const ModelColumn& list = g.list;
  const ModelColumn& st = g.st;
  const ModelColumn& dict = g.dict;
  auto with = [](ModelColumn m, auto f) { return With(std::move(m), f); };
  return {
      {"no columns", {}, "columns: at least one column is required"},
      {"lengths", {i32, Int32s({1, 2})}, "columns[1].length: 2 differs from columns[0].length 3"},
      {"offset range",
       {with(i32, [](auto& m) { m.offset = (uint64_t{1} << 40) + 1; })},
       "columns[0]: offset 1099511627777 + length 3 is out of range (at most 2^40 rows each)"},
      {"type 0",
       {with(i32, [](auto& m) { m.type = v1::COLUMN_TYPE_UNSPECIFIED; })},
       "columns[0].type: COLUMN_TYPE_UNSPECIFIED is not a column type"},
      {"type 99",
       {i32},
       "columns[0].type: 99 is not a column type",
       false,
       [](v1::HashRequest* r) {
         r->mutable_columns(0)->set_type(static_cast<v1::ColumnType>(99));
       }},
      {"byte_width on int32",
       {with(i32, [](auto& m) { m.byte_width = 4; })},
       "columns[0].byte_width: 4 is set for a COLUMN_TYPE_INT32 column (only FIXED_SIZE_BINARY "
       "and FIXED_SIZE_LIST take it)"},
      {"index_type on a list",
       {with(list, [](auto& m) { m.index_type = v1::COLUMN_TYPE_INT8; })},
       "columns[0].index_type: COLUMN_TYPE_INT8 is set for a COLUMN_TYPE_LIST column (only "
       "DICTIONARY takes it)"},
      {"data on a struct",
       {with(st, [](auto& m) { m.data = "xx"; })},
       "columns[0].data: set (2 bytes) for a COLUMN_TYPE_STRUCT column, which has no value buffer"},
      {"offsets on int32",
       {with(i32, [](auto& m) { m.offsets32 = {0}; })},
       "columns[0].offsets: set (4 bytes) for a fixed-width column"},
      {"offsets on a struct",
       {with(st,
             [](auto& m) {
               m.offsets32 = {0, 1};
             })},
       "columns[0].offsets: set (8 bytes) for a COLUMN_TYPE_STRUCT column, which has no offsets"},
      {"children of int32",
       {with(i32, [&](auto& m) { m.children = {i32}; })},
       "columns[0].children: 1 children for a COLUMN_TYPE_INT32 column; it takes none"},
      {"list without values",
       {with(list, [](auto& m) { m.children.clear(); })},
       "columns[0].children: 0 children for a COLUMN_TYPE_LIST column; it takes 1 (the values)"},
      {"map with one child",
       {with(list, [](auto& m) { m.type = v1::COLUMN_TYPE_MAP; })},
       "columns[0].children: 1 children for a COLUMN_TYPE_MAP column; it takes 2 (the keys, then "
       "the items)"},
      {"dictionary with two",
       {with(dict, [&](auto& m) { m.children.push_back(str); })},
       "columns[0].children: 2 children for a COLUMN_TYPE_DICTIONARY column; it takes 1 (the "
       "dictionary)"},
  };
}

// Bad buffers: validity, data and offsets too short, out of order or out of range.
std::vector<BadCase> BufferBadCases(const GoodColumns& g) {
  const ModelColumn& i32 = g.i32;
  const ModelColumn& str = g.str;
  const ModelColumn& list = g.list;
  const ModelColumn& st = g.st;
  auto with = [](ModelColumn m, auto f) { return With(std::move(m), f); };
  return {
      {"validity on NULL",
       {with(ModelColumn{},
             [](auto& m) {
               m.type = v1::COLUMN_TYPE_NULL;
               m.length = 3;
               m.validity = "\x07";
             })},
       "columns[0].validity: set (1 bytes) for a COLUMN_TYPE_NULL column, whose rows are all null"},
      {"child validity short",
       {with(st,
             [](auto& m) {
               m.children[2].offset = 6;
               m.children[2].data.resize(36);
               m.children[2].validity = "\x07";
             })},
       "columns[0].children[2].validity: 1 bytes, need ceil((offset 6 + length 3) / 8) = 2"},
      {"int16 data short",
       {with(i32,
             [](auto& m) {
               m.type = v1::COLUMN_TYPE_INT16;
               m.length = 7;
             })},
       "columns[0].data: 12 bytes, need (offset 0 + length 7) * 2 = 14"},
      {"decimal128 data short",
       {with(i32,
             [](auto& m) {
               m.type = v1::COLUMN_TYPE_DECIMAL128;
               m.length = 1;
             })},
       "columns[0].data: 12 bytes, need (offset 0 + length 1) * 16 = 16"},
      {"fixed_size_binary short",
       {with(i32,
             [](auto& m) {
               m.type = v1::COLUMN_TYPE_FIXED_SIZE_BINARY;
               m.byte_width = 5;
             })},
       "columns[0].data: 12 bytes, need (offset 0 + length 3) * 5 = 15"},
      {"bool data short",
       {with(i32,
             [](auto& m) {
               m.type = v1::COLUMN_TYPE_BOOL;
               m.length = 97;
             })},
       "columns[0].data: 12 bytes, need ceil((offset 0 + length 97) / 8) = 13"},
      {"string offsets few",
       {with(st, [](auto& m) { m.children[1].offsets32.pop_back(); })},
       "columns[0].children[1].offsets: 3 offsets (32-bit), need offset 0 + length 3 + 1 = 4"},
      {"string offsets ragged",
       {str},
       "columns[0].offsets: byte length 15 is not a multiple of 4 (the element size)",
       false,
       [](v1::HashRequest* r) { r->mutable_columns(0)->mutable_offsets()->pop_back(); }},
      {"string offset negative",
       {with(str, [](auto& m) { m.offsets32[0] = -1; })},
       "columns[0].offsets[0]: -1 is negative"},
      {"string offsets decrease",
       {with(str, [](auto& m) { m.offsets32[2] = 1; })},
       "columns[0].offsets[2]: 1 is below the previous offset 2"},
      {"string past its bytes",
       {with(str, [](auto& m) { m.offsets32[3] = 7; })},
       "columns[0].offsets[3]: 7 is beyond columns[0].data (6 bytes)"},
      {"large string offsets",
       {with(str,
             [](auto& m) {
               m.type = v1::COLUMN_TYPE_LARGE_STRING;
               m.offsets64 = {0, 2, 4, 9};
               m.offsets32.clear();
             })},
       "columns[0].offsets[3]: 9 is beyond columns[0].data (6 bytes)"},
      {"large string with int32 offsets",
       {with(str,
             [](auto& m) {
               m.type = v1::COLUMN_TYPE_LARGE_STRING;
               m.offsets32 = {0, 2, 4, 6, 6, 6};  // 24 bytes: three int64 offsets
             })},
       "columns[0].offsets: 3 offsets (64-bit), need offset 0 + length 3 + 1 = 4"},
      {"list past its values",
       {with(list, [](auto& m) { m.offsets32[3] = 4; })},
       "columns[0].offsets[3]: 4 is beyond columns[0].children[0].length (3 rows)"},
      {"map items short",
       {with(list,
             [&](auto& m) {
               m.type = v1::COLUMN_TYPE_MAP;
               m.children = {i32, Int32s({1, 2})};
             })},
       "columns[0].offsets[3]: 3 is beyond columns[0].children[1].length (2 rows)"},
      {"large list offsets",
       {with(list,
             [](auto& m) {
               m.type = v1::COLUMN_TYPE_LARGE_LIST;
               m.offsets64 = {0, 1, 0, 3};
               m.offsets32.clear();
             })},
       "columns[0].offsets[2]: 0 is below the previous offset 1"},
      {"fixed-size list short",
       {with(list,
             [](auto& m) {
               m.type = v1::COLUMN_TYPE_FIXED_SIZE_LIST;
               m.offsets32.clear();
               m.byte_width = 2;
             })},
       "columns[0].children[0].length: 3 rows, need (offset 0 + length 3) * list size "
       "(byte_width) 2 = 6"},
      {"struct field short",
       {with(st,
             [](auto& m) {
               m.offset = 1;
               m.length = 2;
               m.children[1] = Int32s({1, 2});
             })},
       "columns[0].children[1].length: 2 rows, but the struct addresses field rows up to offset 1 "
       "+ length 2 = 3"},
  };
}

// Bad dictionary indexes, and trees past the depth and node limits.
std::vector<BadCase> IndexAndLimitBadCases(const GoodColumns& g) {
  const ModelColumn& dict = g.dict;
  auto with = [](ModelColumn m, auto f) { return With(std::move(m), f); };
  return {
      {"index type float",
       {with(dict, [](auto& m) { m.index_type = v1::COLUMN_TYPE_FLOAT32; })},
       "columns[0].index_type: COLUMN_TYPE_FLOAT32 is not an index type (INT8, UINT8, INT16, "
       "UINT16, INT32, UINT32, INT64 or UINT64; UNSPECIFIED is INT32)"},
      {"index data short",
       {with(dict, [](auto& m) { m.index_type = v1::COLUMN_TYPE_INT16; })},
       "columns[0].data: 3 bytes, need (offset 0 + length 3) * 2 = 6"},
      {"index out of range",
       {with(dict, [](auto& m) { m.data[1] = 3; })},
       "columns[0].data[1]: index 3 (row 1) is outside the dictionary columns[0].children[0] of 3 "
       "rows"},
      {"index negative",
       {with(dict,
             [](auto& m) {
               m.index_type = v1::COLUMN_TYPE_INT8;
               m.data[2] = '\xfe';
             })},
       "columns[0].data[2]: index -2 (row 2) is outside the dictionary columns[0].children[0] of "
       "3 rows"},
      {"uint64 index past int64",
       {with(dict,
             [](auto& m) {
               m.index_type = v1::COLUMN_TYPE_UINT64;
               m.data = std::string(24, '\0');
               m.data.replace(8, 8, std::string(8, '\xff'));
             })},
       "columns[0].data[1]: index 18446744073709551615 (row 1) is outside the dictionary "
       "columns[0].children[0] of 3 rows"},
      {"too deep",
       {Chain(kMaxHashDepth + 1)},
       "columns[0]" +
           [] {
             std::string p;
             for (uint32_t i = 1; i < kMaxHashDepth + 1; ++i) p += ".children[0]";
             return p;
           }() +
           ": nested 65 levels deep; at most 64 levels are hashed"},
      {"too many nodes",
       {with(ModelColumn{},
             [](auto& m) {
               m.type = v1::COLUMN_TYPE_STRUCT;
               m.length = 0;
               m.children.assign(kMaxHashNodes, ModelColumn{.type = v1::COLUMN_TYPE_NULL});
             })},
       "columns[0].children[4095]: the request has more than 4096 columns counting every child; "
       "at most 4096 are hashed in one request"},
  };
}

void HashIntegrationTest::ExpectRefusedInBand(const std::vector<BadCase>& cases,
                                              const ModelColumn& good) {
  std::vector<v1::HashRequest> requests;
  for (const BadCase& c : cases) {
    v1::HashRequest r;
    for (const ModelColumn& m : c.columns) *r.add_columns() = testing::ToWire(m);
    if (c.tweak) c.tweak(&r);
    requests.push_back(std::move(r));
    // A good batch after each bad one: the stream goes on.
    requests.push_back(Request({good}, 32));
  }
  const auto got = HashMany(requests);
  ASSERT_EQ(got.size(), requests.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const Answer& bad = got[2 * i];
    EXPECT_EQ(bad.code, static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT)) << cases[i].what;
    if (cases[i].substring) {
      EXPECT_THAT(bad.error, HasSubstr(cases[i].message)) << cases[i].what;
    } else {
      EXPECT_EQ(bad.error, cases[i].message) << cases[i].what;
    }
    EXPECT_TRUE(got[2 * i + 1].error.empty()) << cases[i].what << ": " << got[2 * i + 1].error;
    EXPECT_EQ(got[2 * i + 1].hashes.size(), 3u);
  }
}

TEST_F(HashIntegrationTest, BadInputIsRefusedInBandNamingThePath) {
  const GoodColumns g = MakeGoodColumns();
  std::vector<BadCase> cases = ShapeBadCases(g);
  for (const std::vector<BadCase>& more : {BufferBadCases(g), IndexAndLimitBadCases(g)}) {
    cases.insert(cases.end(), more.begin(), more.end());
  }
  ASSERT_NO_FATAL_FAILURE(ExpectRefusedInBand(cases, g.i32));
  // The deepest and the largest trees allowed are hashed.
  const Answer deepest = HashOne({Chain(kMaxHashDepth)});
  EXPECT_TRUE(deepest.error.empty()) << deepest.error;
  ModelColumn wide;
  wide.type = v1::COLUMN_TYPE_STRUCT;
  wide.length = 1;
  wide.children.assign(kMaxHashNodes - 1, Int32s({9}));
  const Answer widest = HashOne({wide});
  EXPECT_TRUE(widest.error.empty()) << widest.error;
  // A null index slot is never read, whatever it holds.
  ModelColumn null_slot = g.dict;
  null_slot.data[1] = '\xff';
  null_slot.validity = "\x05";
  const Answer ns = HashOne({null_slot});
  ASSERT_TRUE(ns.error.empty()) << ns.error;
  EXPECT_EQ(ns.valid, (std::vector<bool>{true, false, true}));
}

TEST_F(HashIntegrationTest, PayloadColumnsRefuseHashOnlyTypes) {
  v1::BuildIndexRequest spec;
  spec.mutable_spec()->set_name("p");
  spec.mutable_spec()->set_capacity(64);
  auto* col = spec.mutable_spec()->add_payload();
  col->set_name("s");
  col->set_type(v1::COLUMN_TYPE_STRUCT);
  v1::BuildIndexResponse built;
  const grpc::Status s = testing::Build(*stub_, {spec}, &built);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(),
              HasSubstr("spec.payload[0].type: COLUMN_TYPE_STRUCT is a Hash-only type, not a "
                        "payload column type"));
}

}  // namespace
}  // namespace gpujoin::server
