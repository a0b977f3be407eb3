// The client library's Hash over Arrow's types against a real
// gpujoind (CPU backend): columns made with HashColumnBuilder (list, large
// list, fixed-size list, map, struct, dictionary, every flat type, nulls at
// each level) hash the same whatever the batching (HashAll cuts every child to
// each batch's rows) and slicing; the builder's layout is Arrow's; bad columns
// fail CheckHashColumn before anything is sent; a dictionary hashes as its values.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "gpujoin/client/client.hpp"
#include "gpujoin/client/hash_column.hpp"
#include "gpujoin/testing/server_process.hpp"
#include "server_client_fixture.hpp"
#include "hash_batches.hpp"

namespace {

using gpujoin::client::Client;
using gpujoin::client::ColumnType;
using gpujoin::client::HashColumn;
using gpujoin::client::HashColumnBuilder;
using gpujoin::testing::ServerProcess;
namespace gc = gpujoin::client;

class ClientHashTest : public gpujoin::testing::ServerClientTest {
 protected:
  gc::HashResult MustHash(const std::vector<HashColumn>& columns, uint32_t bits,
                          size_t batch_rows = 1 << 20) {
    auto r = client_->HashAll(columns, bits, batch_rows);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *std::move(r) : gc::HashResult{};
  }
};

// Random rows of a few nested shapes, built with the builder.
struct Tables {
  HashColumnBuilder list{ColumnType::kList};               // list<int64>
  HashColumnBuilder large{ColumnType::kLargeList};         // large_list<string>
  HashColumnBuilder fixed{ColumnType::kFixedSizeList, 2};  // fixed_size_list<uint8, 2>
  HashColumnBuilder map{ColumnType::kMap};                 // map<string, float64>
  HashColumnBuilder st{ColumnType::kStruct};               // struct<a: int16, b: list<bool>>
  HashColumnBuilder dict{ColumnType::kDictionary, 0, ColumnType::kUint16};  // of large_string
  uint64_t rows = 0;

  Tables(uint64_t n, uint32_t seed) : rows(n) {
    std::mt19937_64 rng(seed);
    auto pick = [&](uint64_t k) { return rng() % k; };
    list.AddChild(HashColumnBuilder(ColumnType::kInt64));
    large.AddChild(HashColumnBuilder(ColumnType::kLargeString));
    fixed.AddChild(HashColumnBuilder(ColumnType::kUint8));
    map.AddChild(HashColumnBuilder(ColumnType::kString));
    map.AddChild(HashColumnBuilder(ColumnType::kFloat64));
    st.AddChild(HashColumnBuilder(ColumnType::kInt16));
    HashColumnBuilder& b = st.AddChild(HashColumnBuilder(ColumnType::kList));
    b.AddChild(HashColumnBuilder(ColumnType::kBool));
    HashColumnBuilder& words = dict.AddChild(HashColumnBuilder(ColumnType::kLargeString));
    for (const char* w : {"red", "green", "blue"}) EXPECT_TRUE(words.AppendBytes(w).ok());
    words.AppendNull();  // entry 3 is null
    for (uint64_t r = 0; r < n; ++r) {
      const bool null = pick(5) == 0;
      if (null) {
        list.AppendNull();
        large.AppendNull();
        fixed.AppendNull();
        map.AppendNull();
        st.AppendNull();
        dict.AppendNull();
        continue;
      }
      for (uint64_t k = pick(4); k > 0; --k) {
        if (pick(6) == 0) {
          list.child(0).AppendNull();
        } else {
          EXPECT_TRUE(list.child(0).Append<int64_t>(static_cast<int64_t>(pick(5)) - 2).ok());
        }
        EXPECT_TRUE(large.child(0).AppendBytes(std::string(pick(3), 'x')).ok());
      }
      EXPECT_TRUE(list.AppendNested().ok());
      EXPECT_TRUE(large.AppendNested().ok());
      for (int k = 0; k < 2; ++k) EXPECT_TRUE(fixed.child(0).Append<uint8_t>(pick(3)).ok());
      EXPECT_TRUE(fixed.AppendNested().ok());
      for (uint64_t k = pick(3); k > 0; --k) {
        EXPECT_TRUE(
            map.child(0).AppendBytes(std::string(1, static_cast<char>('a' + pick(3)))).ok());
        if (pick(4) == 0) {
          map.child(1).AppendNull();
        } else {
          EXPECT_TRUE(map.child(1).Append<double>(static_cast<double>(pick(3))).ok());
        }
      }
      EXPECT_TRUE(map.AppendNested().ok());
      if (pick(6) == 0) {
        st.child(0).AppendNull();  // a null field nulls the struct row
      } else {
        EXPECT_TRUE(st.child(0).Append<int16_t>(static_cast<int16_t>(pick(4))).ok());
      }
      for (uint64_t k = pick(3); k > 0; --k)
        EXPECT_TRUE(st.child(1).child(0).AppendBool(pick(2)).ok());
      EXPECT_TRUE(st.child(1).AppendNested().ok());
      EXPECT_TRUE(st.AppendNested().ok());
      EXPECT_TRUE(dict.AppendIndex(static_cast<int64_t>(pick(4))).ok());
    }
  }

  std::vector<HashColumn> Views() const {
    return {list.view(), large.view(), fixed.view(), map.view(), st.view(), dict.view()};
  }
};

TEST_F(ClientHashTest, NestedColumnsHashAlikeWhateverTheBatchingAndSlicing) {
  const Tables t(203, 22);
  const std::vector<HashColumn> all = t.Views();
  for (uint32_t bits : {32u, 64u}) {
    for (size_t c = 0; c < all.size(); ++c) {
      SCOPED_TRACE("column " + std::to_string(c) + " bits " + std::to_string(bits));
      const gc::HashResult whole = MustHash({all[c]}, bits);
      ASSERT_EQ(whole.hashes.size(), t.rows);
      for (size_t batch : {1, 3, 8, 13, 64}) {
        const gc::HashResult b = MustHash({all[c]}, bits, batch);
        EXPECT_EQ(b.hashes, whole.hashes) << "batch " << batch;
        EXPECT_EQ(b.validity, whole.validity) << "batch " << batch;
      }
      const gc::HashResult slice = MustHash({all[c].Slice(17, 150)}, bits, 11);
      ASSERT_EQ(slice.hashes.size(), 150u);
      for (size_t i = 0; i < 150; ++i) {
        EXPECT_EQ(slice.hashes[i], whole.hashes[17 + i]) << i;
        EXPECT_EQ(slice.Valid(i), whole.Valid(17 + i)) << i;
      }
    }
    // All six as one composite key: a row is null when any column is.
    const gc::HashResult composite = MustHash(all, bits, 7);
    EXPECT_EQ(composite.hashes, MustHash(all, bits).hashes);
    EXPECT_GT(composite.null_count, t.list.null_count());
  }
}

TEST_F(ClientHashTest, TheNullContractAndDictionaryThroughTheBuilder) {
  // list<int32>: [1, 2], [], null, [null], [0].
  HashColumnBuilder list(ColumnType::kList);
  HashColumnBuilder& v = list.AddChild(HashColumnBuilder(ColumnType::kInt32));
  ASSERT_TRUE(v.Append<int32_t>(1).ok());
  ASSERT_TRUE(v.Append<int32_t>(2).ok());
  ASSERT_TRUE(list.AppendNested().ok());
  ASSERT_TRUE(list.AppendNested().ok());
  list.AppendNull();
  v.AppendNull();
  ASSERT_TRUE(list.AppendNested().ok());
  ASSERT_TRUE(v.Append<int32_t>(0).ok());
  ASSERT_TRUE(list.AppendNested().ok());
  const HashColumn lv = list.view();
  EXPECT_EQ(std::vector<int32_t>(lv.offsets.begin(), lv.offsets.end()),
            (std::vector<int32_t>{0, 2, 2, 2, 3, 4}));
  ASSERT_EQ(lv.validity.size(), 1u);
  EXPECT_EQ(lv.validity[0], 0b11011);
  const gc::HashResult h = MustHash({lv}, 64);
  EXPECT_EQ(h.null_count, 1u);
  EXPECT_FALSE(h.Valid(2));
  EXPECT_TRUE(h.Valid(3));
  EXPECT_NE(h.hashes[3], h.hashes[4]);  // [null] vs [0]
  EXPECT_NE(h.hashes[1], h.hashes[3]);  // [] vs [null]

  // Dictionary (int8 indices) == its decoded strings; an index to the null entry is null.
  HashColumnBuilder dict(ColumnType::kDictionary, 0, ColumnType::kInt8);
  HashColumnBuilder& d = dict.AddChild(HashColumnBuilder(ColumnType::kString));
  ASSERT_TRUE(d.AppendBytes("b").ok());
  d.AppendNull();
  ASSERT_TRUE(d.AppendBytes("a").ok());
  HashColumnBuilder plain(ColumnType::kString);
  for (int i : {2, 0, 1, 2, -1}) {
    if (i < 0) {
      dict.AppendNull();
      plain.AppendNull();
      continue;
    }
    ASSERT_TRUE(dict.AppendIndex(i).ok());
    if (i == 1) {
      plain.AppendNull();
    } else {
      ASSERT_TRUE(plain.AppendBytes(i == 0 ? "b" : "a").ok());
    }
  }
  const gc::HashResult hd = MustHash({dict.view()}, 32, 2);
  const gc::HashResult hp = MustHash({plain.view()}, 32);
  EXPECT_EQ(hd.hashes, hp.hashes);
  EXPECT_EQ(hd.validity, hp.validity);
  EXPECT_EQ(hd.null_count, 2u);
}

TEST_F(ClientHashTest, BuilderAndCheckErrors) {
  HashColumnBuilder i16(ColumnType::kInt16);
  EXPECT_EQ(i16.Append<int32_t>(1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(i16.AppendBytes("x").code(), absl::StatusCode::kInvalidArgument);
  HashColumnBuilder dec(ColumnType::kDecimal128);
  EXPECT_EQ(dec.AppendBytes("short").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(dec.AppendBytes(std::string(16, '\1')).ok());
  HashColumnBuilder dict(ColumnType::kDictionary, 0, ColumnType::kUint8);
  EXPECT_EQ(dict.AppendIndex(256).code(), absl::StatusCode::kInvalidArgument);
  HashColumnBuilder st(ColumnType::kStruct);
  st.AddChild(HashColumnBuilder(ColumnType::kInt64));
  EXPECT_EQ(st.AppendNested().code(), absl::StatusCode::kInvalidArgument);  // field not appended
  HashColumnBuilder fsl(ColumnType::kFixedSizeList, 3);
  HashColumnBuilder& vals = fsl.AddChild(HashColumnBuilder(ColumnType::kFloat32));
  ASSERT_TRUE(vals.Append<float>(1).ok());
  EXPECT_EQ(fsl.AppendNested().code(), absl::StatusCode::kInvalidArgument);
  fsl.AppendNull();  // pads the values to 3
  EXPECT_EQ(vals.length(), 3u);

  // A list whose offsets run past its values, a struct field too short, a map
  // with one child: refused before anything is sent.
  std::vector<int64_t> values = {1, 2};
  std::vector<int32_t> offsets = {0, 1, 3};
  HashColumn v;
  v.type = ColumnType::kInt64;
  v.data = std::span(reinterpret_cast<const uint8_t*>(values.data()), 16);
  v.length = 2;
  HashColumn list;
  list.type = ColumnType::kList;
  list.offsets = offsets;
  list.length = 2;
  list.children = {v};
  auto r = client_->HashAll({list}, 64);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "hash column 0: offsets[2] = 3 is beyond the children's rows (2)");
  HashColumn st2;
  st2.type = ColumnType::kStruct;
  st2.length = 3;
  st2.children = {v};
  r = client_->HashAll({st2}, 64);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "hash column 0 (struct, 3 rows from row 0): children[0] has 2 rows, needs 3");
  HashColumn map = list;
  map.type = ColumnType::kMap;
  r = client_->HashAll({map}, 64);
  EXPECT_EQ(r.status().message(), "hash column 0 (map): 1 children, needs 2");
  // The server's checks (a dictionary index outside the dictionary) come back in-band.
  HashColumnBuilder bad(ColumnType::kDictionary, 0, ColumnType::kInt32);
  ASSERT_TRUE(bad.AddChild(HashColumnBuilder(ColumnType::kInt32)).Append<int32_t>(7).ok());
  ASSERT_TRUE(bad.AppendIndex(1).ok());
  r = client_->HashAll({bad.view()}, 64);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(
      r.status().message().find("columns[0].data[0]: index 1 (row 0) is outside the dictionary"),
      std::string::npos)
      << r.status();
}

// A cut carries only its rows' bytes: the children of the rows, rebased offsets.
TEST(CutHashRows, CarriesOnlyTheRowsBytes) {
  HashColumnBuilder list(ColumnType::kList);
  HashColumnBuilder& s = list.AddChild(HashColumnBuilder(ColumnType::kString));
  for (int r = 0; r < 20; ++r) {
    for (int k = 0; k < 3; ++k) ASSERT_TRUE(s.AppendBytes(std::string(r + 1, 'a' + k)).ok());
    ASSERT_TRUE(list.AppendNested().ok());
  }
  gc::detail::HashCutScratch scratch;
  const HashColumn cut = gc::detail::CutHashRows(list.view(), 10, 3, &scratch);
  EXPECT_EQ(cut.offset, 2u);  // row 10 is bit 2 of the byte from row 8
  EXPECT_EQ(cut.length, 3u);
  // Rows 8 and 9 are only there to start a byte: empty, their offsets never read.
  EXPECT_EQ(std::vector<int32_t>(cut.offsets.begin(), cut.offsets.end()),
            (std::vector<int32_t>{0, 0, 0, 3, 6, 9}));
  ASSERT_EQ(cut.children.size(), 1u);
  const HashColumn& strings = cut.children[0];
  EXPECT_EQ(strings.offset, 6u);  // value 30 (row 10's first) is bit 6 of the byte from value 24
  EXPECT_EQ(strings.length, 9u);
  EXPECT_EQ(strings.data.size(), 3u * (11 + 12 + 13));
  EXPECT_EQ(std::vector<int32_t>(strings.offsets.begin(), strings.offsets.begin() + 7),
            std::vector<int32_t>(7, 0));
}

}  // namespace
