// End-to-end tests of the CLI's string and composite keys against a real
// gpujoind (CPU backend, free port): CSV build, lookup and join (ad hoc and
// resident, every join kind) on a UUID-like string key and on a (tenant,
// order) composite key, compared with a model computed here from the rows
// themselves, and the errors a user meets (a key of the wrong column count,
// a --key-type the index does not have, a cell that is not of its type).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gpujoin/testing/files.hpp"
#include "gpujoin/testing/server_process.hpp"
#include "gpujoin/testing/subprocess.hpp"

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using gpujoin::testing::RunOptions;
using gpujoin::testing::RunProcess;
using gpujoin::testing::RunResult;
using gpujoin::testing::ServerProcess;

const std::string kCli = GPUJOIN_CLI_BIN;

std::string Uuid(std::mt19937_64& rng) {
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < 32; ++i) {
    if (i == 8 || i == 12 || i == 16 || i == 20) s += '-';
    s += kHex[rng() % 16];
  }
  return s;
}

class CliKeyColumns : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("gpujoin_cli_keys_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    server_ = new ServerProcess(gpujoin::testing::ServerOptions{});
    address_ = server_->grpc_address();
  }
  static void TearDownTestSuite() {
    delete server_;
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void SetUp() override { ASSERT_FALSE(address_.empty()) << server_->log(); }

  static RunResult Cli(std::vector<std::string> args) {
    std::vector<std::string> argv = {kCli, "--server", address_, "--timeout", "60", "-q"};
    argv.insert(argv.end(), args.begin(), args.end());
    RunOptions o;
    o.unset_env = {"GPUJOIN_SERVER", "GPUJOIN_TOKEN"};
    return RunProcess(argv, o);
  }
  static std::string Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  static void ExpectError(const RunResult& r, const std::string& fragment) {
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find(fragment), std::string::npos) << "want '" << fragment << "' in " << r.err;
  }

  static inline fs::path dir_;
  static inline ServerProcess* server_ = nullptr;
  static inline std::string address_;
};

// A dimension of UUID keys and a fact table whose keys are half hits; the
// outputs of build + lookup, both join forms and every --how are those of a
// map model, with batches of 64 rows so that many are in flight.
TEST_F(CliKeyColumns, UuidStringKeyBuildLookupAndJoins) {
  std::mt19937_64 rng(32);
  std::vector<std::string> uuids;
  std::ostringstream dim, facts;
  dim << "id,name\n";
  std::map<std::string, std::vector<size_t>> rows_of;  // id -> dimension rows
  for (size_t i = 0; i < 500; ++i) {
    uuids.push_back(Uuid(rng));
    dim << uuids.back() << ",n" << i << "\n";
    rows_of[uuids.back()].push_back(i);
  }
  // A repeated key: a keep_all join yields both rows.
  dim << uuids[7] << ",again\n";
  rows_of[uuids[7]].push_back(500);
  facts << "fid,id\n";
  std::vector<std::string> fact_ids;
  for (size_t i = 0; i < 700; ++i) {
    fact_ids.push_back(i % 2 ? uuids[rng() % uuids.size()] : Uuid(rng));
    facts << i << "," << fact_ids.back() << "\n";
  }
  const std::string dim_csv = Write("dim.csv", dim.str());
  const std::string facts_csv = Write("facts.csv", facts.str());
  auto name_of = [](size_t row) { return row == 500 ? std::string("again") : "n" + std::to_string(row); };

  RunResult b = Cli({"--json", "index", "build", "uuids", "--from", dim_csv, "--key", "id",
                     "--replace"});
  ASSERT_EQ(b.code, 0) << b.err;
  const Json built = Json::parse(b.out);
  EXPECT_EQ(built["key_kind"], "columns");
  EXPECT_EQ(built["index"]["key_columns"], Json::parse(R"([{"name":"id","type":"string"}])"));
  EXPECT_EQ(built["index"]["statistics"]["unique_keys"], 500);

  RunResult l = Cli({"--batch-rows", "64", "lookup", "uuids", "--from", facts_csv, "--key", "id",
                     "--select", "name"});
  ASSERT_EQ(l.code, 0) << l.err;
  std::ostringstream want_lookup;
  want_lookup << "fid,id,value,found,name\n";
  for (size_t i = 0; i < fact_ids.size(); ++i) {
    auto it = rows_of.find(fact_ids[i]);
    want_lookup << i << "," << fact_ids[i] << ",";
    if (it == rows_of.end()) {
      want_lookup << ",false,\n";
    } else {
      want_lookup << it->second[0] << ",true," << name_of(it->second[0]) << "\n";
    }
  }
  EXPECT_EQ(l.out, want_lookup.str());

  for (const std::string how : {"inner", "left", "semi", "anti"}) {
    SCOPED_TRACE(how);
    std::ostringstream want;
    want << "fid,id,name\n";
    for (size_t i = 0; i < fact_ids.size(); ++i) {
      auto it = rows_of.find(fact_ids[i]);
      const bool hit = it != rows_of.end();
      if ((how == "semi" && !hit) || (how == "anti" && hit) || (how == "inner" && !hit)) continue;
      if (!hit) {
        want << i << "," << fact_ids[i] << ",\n";
        continue;
      }
      const size_t n = how == "semi" ? 1 : it->second.size();
      for (size_t k = 0; k < n; ++k) {
        want << i << "," << fact_ids[i] << "," << name_of(it->second[k]) << "\n";
      }
    }
    RunResult adhoc = Cli({"--batch-rows", "64", "join", "--left", facts_csv, "--right", dim_csv,
                           "--on", "id", "--how", how});
    ASSERT_EQ(adhoc.code, 0) << adhoc.err;
    EXPECT_EQ(adhoc.out, want.str());
  }
  // The resident index keeps the lowest row of the repeated key.
  RunResult resident =
      Cli({"join", "--left", facts_csv, "--right", "index:uuids", "--on", "id", "--how", "semi"});
  ASSERT_EQ(resident.code, 0) << resident.err;
  RunResult adhoc_semi =
      Cli({"join", "--left", facts_csv, "--right", dim_csv, "--on", "id", "--how", "semi"});
  EXPECT_EQ(resident.out, adhoc_semi.out);
}

// (tenant, order) keys whose columns, swapped, are other keys; the right file
// names its key columns otherwise (--on a=x,b=y) and its tenants as text.
TEST_F(CliKeyColumns, CompositeKeyBuildLookupAndJoins) {
  const std::string orders = Write("orders.csv",
                                   "tenant,order_id,total\n"
                                   "1,a,10\n"
                                   "2,a,20\n"
                                   "1,b,30\n"
                                   "1,a,11\n"
                                   "-5,,40\n");
  const std::string items = Write("items.csv",
                                  "tid,oid,item\n"
                                  "1,a,pen\n"
                                  "2,b,cup\n"
                                  "1,b,ink\n"
                                  "a,1,swapped\n"
                                  "-5,,null-order\n");
  RunResult b = Cli({"index", "build", "orders", "--from", orders, "--key", "tenant,order_id",
                     "--duplicates", "keep_all", "--replace"});
  ASSERT_EQ(b.code, 0) << b.err;
  RunResult d = Cli({"index", "describe", "orders"});
  ASSERT_EQ(d.code, 0) << d.err;
  EXPECT_NE(d.out.find("keys         columns (tenant:i64,order_id:str)"), std::string::npos)
      << d.out;
  EXPECT_NE(d.out.find("invalid      1"), std::string::npos) << d.out;  // the null order_id

  // The index's tenant is int64: the swapped row's 'a' is not one.
  RunResult bad = Cli({"lookup", "orders", "--from", items, "--key", "tid,oid"});
  ExpectError(bad, "items.csv:5: column 'tid' (1): 'a' is not an int64 key");
  const std::string good = Write("good.csv",
                                 "tid,oid,item\n"
                                 "1,a,pen\n"
                                 "2,b,cup\n"
                                 "1,b,ink\n"
                                 "-5,,null-order\n");
  RunResult l = Cli({"lookup", "orders", "--from", good, "--key", "tid,oid", "--select", "total"});
  ASSERT_EQ(l.code, 0) << l.err;
  EXPECT_EQ(l.out,
            "tid,oid,item,value,found,matches,total\n"
            "1,a,pen,0,true,2,10\n"
            "2,b,cup,,false,0,\n"
            "1,b,ink,2,true,1,30\n"
            "-5,,null-order,,false,0,\n");
  RunResult j = Cli({"join", "--left", good, "--right", "index:orders", "--on", "tid,oid"});
  ASSERT_EQ(j.code, 0) << j.err;
  EXPECT_EQ(j.out,
            "tid,oid,item,total\n"
            "1,a,pen,10\n"
            "1,a,pen,11\n"
            "1,b,ink,30\n");

  // Ad hoc, both sides' columns renamed: the swapped row makes the left
  // tenant a string column, so both sides join as strings.
  RunResult adhoc = Cli({"join", "--left", items, "--right", orders, "--on",
                         "tid=tenant,oid=order_id", "--how", "left"});
  ASSERT_EQ(adhoc.code, 0) << adhoc.err;
  EXPECT_EQ(adhoc.out,
            "tid,oid,item,total\n"
            "1,a,pen,10\n"
            "1,a,pen,11\n"
            "2,b,cup,\n"
            "1,b,ink,30\n"
            "a,1,swapped,\n"
            "-5,,null-order,\n");
  // JSON output keeps the key columns' cells as they were written.
  RunResult json = Cli({"--json", "join", "--left", good, "--right", orders, "--on",
                        "tid=tenant,oid=order_id", "--how", "anti"});
  ASSERT_EQ(json.code, 0) << json.err;
  EXPECT_EQ(Json::parse(json.out)["rows"],
            Json::parse(R"([{"tid":"2","oid":"b","item":"cup","total":null},
                            {"tid":"-5","oid":null,"item":"null-order","total":null}])"));
}

TEST_F(CliKeyColumns, ErrorsNameTheKeyAndTheOption) {
  const std::string t = Write("t.csv", "sku,n\nA-1,1\nB-2,2\n");
  ASSERT_EQ(Cli({"index", "build", "skus", "--from", t, "--key", "sku", "--replace"}).code, 0);
  ExpectError(Cli({"lookup", "skus", "--from", t, "--key", "sku,n"}),
              "--key 'sku,n': 2 key columns, but index 'skus' has a key of 1 (sku:str)");
  ExpectError(Cli({"lookup", "skus", "--from", t, "--key", "sku", "--key-type", "u64"}),
              "--key-type u64: index 'skus' is keyed by columns (sku:str); leave --key-type out");
  ExpectError(Cli({"lookup", "skus", "--from", t, "--key", "sku", "--key-type", "sku:bin"}),
              "--key-type sku:bin: key column 0 of index 'skus' is sku:str");
  ExpectError(Cli({"index", "build", "x", "--from", t, "--key", "sku", "--key-type", "sku:i64"}),
              "t.csv:2: column 'sku' (1): 'A-1' is not an int64 key (--key-type sku:i64");
  ExpectError(Cli({"index", "build", "x", "--from", t, "--key", "sku", "--key-type", "sku:float"}),
              "unknown key column type 'float'");
  ExpectError(Cli({"join", "--left", t, "--right", t, "--on", "sku,zz"}),
              "t.csv: no column 'zz'");
  ASSERT_EQ(Cli({"index", "build", "ints", "--from", t, "--key", "n", "--replace"}).code, 0);
  ExpectError(Cli({"join", "ints", "--left", t, "--on", "n,sku"}),
              "--on 'n,sku': 2 key columns, but index 'ints' has one uint32 key column");
}

}  // namespace
