// The CLI's key plans (columns/key_columns.hpp): --key-type parsing, which
// keys become integer keys and which key columns, the types both sides of an
// ad-hoc join agree on, resident indexes with key columns, and the key
// columns read from cells, with the errors naming the cell or the option.
#include "columns/key_columns.hpp"

#include <gtest/gtest.h>

#include "parse_csv.hpp"

namespace gpujoin::cli {
namespace {

using client::ColumnType;
using testing::Csv;

TEST(ParseKeyTypeFlag, IntegerKindsStrAndPerColumnTypes) {
  EXPECT_EQ(ParseKeyTypeFlag("u64")->kind, KeyKind::kU64);
  auto str = ParseKeyTypeFlag("str");
  ASSERT_TRUE(str.ok());
  EXPECT_EQ(str->kind, KeyKind::kColumns);
  EXPECT_EQ(str->TypeOf("anything"), ColumnType::kString);
  auto per = ParseKeyTypeFlag("id:i64,sku:str,raw:bin,n:u32");
  ASSERT_TRUE(per.ok()) << per.status();
  EXPECT_EQ(per->TypeOf("id"), ColumnType::kInt64);
  EXPECT_EQ(per->TypeOf("sku"), ColumnType::kString);
  EXPECT_EQ(per->TypeOf("raw"), ColumnType::kBinary);
  EXPECT_EQ(per->TypeOf("n"), ColumnType::kUint32);
  EXPECT_FALSE(per->TypeOf("other").has_value());
  EXPECT_EQ(ParseKeyTypeFlag("zz").status().message(),
            "--key-type: unknown key type 'zz' (expected auto, u32, u64, i64, str or COL:TYPE,...)");
  EXPECT_EQ(ParseKeyTypeFlag("id:float").status().message(),
            "--key-type 'id:float': unknown key column type 'float' (expected i32, i64, u32, u64, "
            "str or bin)");
  EXPECT_EQ(ParseKeyTypeFlag(":i64").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PlanKey, IntegersStayIntegerKeysAndTextMakesAStringKey) {
  const Table t = Csv("id,sku,n\n1,A-1,-3\n2,B-2,4\n");
  auto ints = PlanKey(t, {"id"}, KeyTypeFlag{});
  ASSERT_TRUE(ints.ok()) << ints.status();
  EXPECT_EQ(ints->kind, KeyKind::kU32);
  auto s = PlanKey(t, {"sku"}, KeyTypeFlag{});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->kind, KeyKind::kColumns);
  EXPECT_EQ(s->TypesText(), "sku:str");
  auto composite = PlanKey(t, {"n", "sku"}, KeyTypeFlag{});
  ASSERT_TRUE(composite.ok());
  EXPECT_EQ(composite->TypesText(), "n:i64,sku:str");
  auto given = PlanKey(t, {"id"}, *ParseKeyTypeFlag("str"));
  ASSERT_TRUE(given.ok());
  EXPECT_EQ(given->TypesText(), "id:str");
  EXPECT_EQ(PlanKey(t, {"id"}, *ParseKeyTypeFlag("sku:str")).status().message(),
            "--key-type: 'sku' is not a key column (the key: id)");
  // Numbers that fit no integer type stay numbers, named by the integer
  // parse; a null cell stays the integer path's error.
  EXPECT_EQ(PlanKey(Csv("k\n99999999999999999999\n"), {"k"}, KeyTypeFlag{}).status().message(),
            "t.csv:2: column 'k' (1): '99999999999999999999' fits no key type (it needs more than "
            "64 bits)");
  EXPECT_EQ(PlanKey(Csv("k,v\n1,a\n,b\n", "n.csv"), {"k"}, KeyTypeFlag{}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*InferKeyColumnType(Csv("k\n1\n18446744073709551615\n"), "k"), ColumnType::kUint64);
  EXPECT_EQ(*InferKeyColumnType(Csv("k\n-1\n18446744073709551615\n"), "k"), ColumnType::kInt64);
  EXPECT_EQ(*InferKeyColumnType(Csv("k\n-1\n0x1f\nx\n"), "k"), ColumnType::kString);
}

TEST(ReadKeys, KeyColumnsOfTheirTypesWithNulls) {
  const Table t = Csv("a,b\n-7,x\n,\"\"\n2147483647,\n");
  KeyPlan plan;
  plan.columns = {"a", "b"};
  plan.kind = KeyKind::kColumns;
  plan.types = {ColumnType::kInt32, ColumnType::kString};
  auto k = ReadKeys(t, plan);
  ASSERT_TRUE(k.ok()) << k.status();
  ASSERT_EQ(k->size(), 3u);
  ASSERT_EQ(k->columns.size(), 2u);
  EXPECT_EQ(k->columns[0].Value<int32_t>(0), -7);
  EXPECT_FALSE(k->columns[0].Valid(1));
  EXPECT_EQ(k->columns[1].String(1), "");  // a quoted "" is an empty string
  EXPECT_TRUE(k->columns[1].Valid(1));
  EXPECT_FALSE(k->columns[1].Valid(2));
  const client::Keys keys = k->keys();
  EXPECT_EQ(keys.type(), client::KeyType::kColumns);
  EXPECT_EQ(keys.column_count(), 2u);
  EXPECT_TRUE(client::CheckKeys(keys, "keys").ok());

  plan.types = {ColumnType::kUint32, ColumnType::kString};
  EXPECT_EQ(ReadKeys(t, plan).status().message(),
            "t.csv:2: column 'a' (1): '-7' is not a uint32 key (--key-type a:u32; str reads the "
            "column as text)");
}

TEST(JoinKeyPlans, TheWiderTypePerColumn) {
  const Table left = Csv("id,sku\n1,A\n");
  const Table right = Csv("id,sku\n18446744073709551615,7\n");
  auto l = PlanKey(left, {"id", "sku"}, KeyTypeFlag{});
  auto r = PlanKey(right, {"id", "sku"}, KeyTypeFlag{});
  ASSERT_TRUE(l.ok() && r.ok());
  auto both = JoinKeyPlans(*l, *r);
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(both->first.TypesText(), "id:u64,sku:str");
  EXPECT_EQ(both->second.types, both->first.types);
  // An integer side and a string side: both strings.
  auto li = PlanKey(left, {"id"}, KeyTypeFlag{});
  auto rs = PlanKey(left, {"sku"}, KeyTypeFlag{});
  auto mixed = JoinKeyPlans(*li, *rs);
  ASSERT_TRUE(mixed.ok());
  EXPECT_EQ(mixed->first.TypesText(), "id:str");
  EXPECT_EQ(JoinKeyPlans(*l, *li).status().message(),
            "join: --on: the left key has 2 columns but the right key has 1");
}

TEST(PlanForIndex, AnIndexWithKeyColumnsNamesItsKeyInErrors) {
  client::IndexInfo info;
  info.name = "orders";
  info.key_type = client::KeyType::kColumns;
  info.key_columns = {{"tenant", ColumnType::kInt64}, {"order", ColumnType::kString}};
  auto plan = PlanForIndex("t,o", KeyTypeFlag{}, info, "--key");
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(plan->has_value());
  EXPECT_EQ((*plan)->types, (std::vector<ColumnType>{ColumnType::kInt64, ColumnType::kString}));
  EXPECT_EQ(PlanForIndex("t", KeyTypeFlag{}, info, "--key").status().message(),
            "--key 't': 1 key columns, but index 'orders' has a key of 2 (tenant:i64,order:str); "
            "name one column of the file per key column, in that order");
  EXPECT_EQ(PlanForIndex("t,o", *ParseKeyTypeFlag("u64"), info, "--key").status().code(),
            absl::StatusCode::kInvalidArgument);
  client::IndexInfo ints;
  ints.name = "n";
  EXPECT_FALSE(PlanForIndex("k", KeyTypeFlag{}, ints, "--key")->has_value());
  EXPECT_EQ(PlanForIndex("a,b", KeyTypeFlag{}, ints, "--on").status().message(),
            "--on 'a,b': 2 key columns, but index 'n' has one uint32 key column");
}

// The keys of a resident index, batch by batch: a uint64 index reads int64
// keys once one is negative (later batches keep the type), a uint32 index
// names a cell that does not fit, and key columns read as the index's.
TEST(IndexKeyReader, ReadsBatchesAsTheIndexTakesThem) {
  client::IndexInfo wide;
  wide.name = "w";
  wide.key_type = client::KeyType::kUint64;
  auto reader = IndexKeyReader::Make("k", KeyTypeFlag{}, wide, "--key");
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto first = reader->Read(Csv("k\n-5\n7\n"));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->kind, KeyKind::kI64);
  EXPECT_EQ(first->u64, (std::vector<uint64_t>{static_cast<uint64_t>(-5), 7}));
  auto second = reader->Read(Csv("k\n9\n"));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->kind, KeyKind::kI64);

  client::IndexInfo narrow;
  narrow.name = "n";
  EXPECT_EQ(IndexKeyReader::Make("k", *ParseKeyTypeFlag("u64"), narrow, "--key").status().code(),
            absl::StatusCode::kInvalidArgument);
  auto u32 = IndexKeyReader::Make("k", KeyTypeFlag{}, narrow, "--key");
  ASSERT_TRUE(u32.ok());
  ASSERT_TRUE(u32->Read(Csv("k\n1\n")).ok());
  auto big = u32->Read(Csv("k\n1\n4294967296\n", "b.csv"));
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("b.csv:3"), std::string::npos) << big.status();

  client::IndexInfo orders;
  orders.name = "orders";
  orders.key_type = client::KeyType::kColumns;
  orders.key_columns = {{"tenant", ColumnType::kInt64}, {"order", ColumnType::kString}};
  auto cols = IndexKeyReader::Make("t,o", KeyTypeFlag{}, orders, "--key");
  ASSERT_TRUE(cols.ok()) << cols.status();
  auto keys = cols->Read(Csv("t,o\n1,a\n,b\n"));
  ASSERT_TRUE(keys.ok()) << keys.status();
  ASSERT_EQ(keys->columns.size(), 2u);
  EXPECT_EQ(keys->columns[0].null_count, 1u);
  EXPECT_EQ(keys->columns[1].String(1), "b");
}

}  // namespace
}  // namespace gpujoin::cli
