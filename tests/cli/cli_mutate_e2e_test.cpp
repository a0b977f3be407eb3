// End-to-end tests of `gpujoin index upsert|delete` against a real gpujoind
// (CPU backend, free port): upserts and deletes on a row-ID index with
// payload, an explicit-values index, a composite key schema and a keep_all
// index, each checked by a lookup afterwards and by the reported counts and
// mutation sequence; files larger than a request (--batch-rows, the server's
// --max-mutation-rows); and the errors a user meets (a column the index does
// not have, a payload column the file lacks, --value on a row-ID index, a bad
// cell, a request the server refuses half-way), each naming what was applied.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "gpujoin/testing/server_process.hpp"
#include "gpujoin/testing/subprocess.hpp"

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using gpujoin::testing::RunOptions;
using gpujoin::testing::RunProcess;
using gpujoin::testing::RunResult;
using gpujoin::testing::ServerOptions;
using gpujoin::testing::ServerProcess;

const std::string kCli = GPUJOIN_CLI_BIN;

class CliMutate : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("gpujoin_cli_mutate_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    server_ = new ServerProcess(ServerOptions{});
    address_ = server_->grpc_address();
  }
  static void TearDownTestSuite() {
    delete server_;
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void SetUp() override { ASSERT_FALSE(address_.empty()) << server_->log(); }

  static RunResult Cli(std::vector<std::string> args, const std::string& address = address_) {
    std::vector<std::string> argv = {kCli, "--server", address, "--timeout", "60", "-q"};
    argv.insert(argv.end(), args.begin(), args.end());
    RunOptions o;
    o.unset_env = {"GPUJOIN_SERVER", "GPUJOIN_TOKEN"};
    return RunProcess(argv, o);
  }
  // The --json report of a command that must succeed.
  static Json Report(std::vector<std::string> args, const std::string& address = address_) {
    args.insert(args.begin(), "--json");
    RunResult r = Cli(args, address);
    EXPECT_EQ(r.code, 0) << r.err;
    return r.code == 0 ? Json::parse(r.out) : Json();
  }
  static std::string Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  static void ExpectError(const RunResult& r, int code, const std::string& fragment) {
    EXPECT_EQ(r.code, code) << r.err;
    EXPECT_NE(r.err.find(fragment), std::string::npos) << "want '" << fragment << "' in " << r.err;
  }

  static inline fs::path dir_;
  static inline ServerProcess* server_ = nullptr;
  static inline std::string address_;
};

// A row-ID index with payload: an upsert updates a key (the last row of a key
// in the file wins) and inserts another with the next row IDs; a delete
// removes one key and counts an absent one; the lookup sees both.
TEST_F(CliMutate, UpsertAndDeleteRowIdIndexWithPayload) {
  const std::string fruit = Write("fruit.csv", "id,name,price\n1,apple,1.5\n2,fig,2\n3,kiwi,0.5\n");
  ASSERT_EQ(Cli({"index", "build", "fruit", "--from", fruit, "--key", "id", "--replace"}).code, 0);
  // Columns in another order than the build's: matched by name.
  const std::string changes =
      Write("changes.csv", "price,id,name\n2.25,2,fig\n1,4,plum\n1.25,4,ripe plum\n");
  Json up = Report({"index", "upsert", "fruit", "--from", changes, "--key", "id"});
  EXPECT_EQ(up["operation"], "upsert");
  EXPECT_EQ(up["upsert_rows"], 3);
  EXPECT_EQ(up["inserted_keys"], 1);
  EXPECT_EQ(up["updated_keys"], 1);
  EXPECT_EQ(up["mutation_sequence"], 1);
  EXPECT_EQ(up["requests"], 1);
  EXPECT_EQ(up["index_version"], 1);
  EXPECT_EQ(up["statistics"]["unique_keys"], 4);

  const std::string gone = Write("gone.csv", "id\n1\n9\n");
  Json del = Report({"index", "delete", "fruit", "--from", gone, "--key", "id"});
  EXPECT_EQ(del["deleted_keys"], 1);
  EXPECT_EQ(del["not_found_keys"], 1);
  EXPECT_EQ(del["deleted_rows"], 1);
  EXPECT_EQ(del["mutation_sequence"], 2);

  const std::string ids = Write("ids.csv", "id\n1\n2\n3\n4\n");
  RunResult l = Cli({"lookup", "fruit", "--from", ids, "--key", "id", "--select", "name,price"});
  ASSERT_EQ(l.code, 0) << l.err;
  EXPECT_EQ(l.out,
            "id,value,found,name,price\n1,,false,,\n2,3,true,fig,2.25\n3,2,true,kiwi,0.5\n"
            "4,5,true,ripe plum,1.25\n");

  Json d = Report({"index", "describe", "fruit"});
  EXPECT_EQ(d["index"]["mutation_sequence"], 2);
  EXPECT_EQ(d["index"]["next_row_id"], 6);
  RunResult text = Cli({"index", "describe", "fruit"});
  EXPECT_NE(
      text.out.find("mutations    sequence 2 (batches applied since the build), next row ID 6"),
      std::string::npos)
      << text.out;

  // The human report.
  const std::string more = Write("more.csv", "id,name,price\n5,pear,3\n");
  RunResult human = RunProcess(
      {kCli, "--server", address_, "index", "upsert", "fruit", "--from", more, "--key", "id"},
      RunOptions{.unset_env = {"GPUJOIN_SERVER", "GPUJOIN_TOKEN"}});
  ASSERT_EQ(human.code, 0) << human.err;
  EXPECT_NE(human.out.find("upserted     1 row of " + more +
                           " into index fruit (version 1)\n"
                           "keys         1 inserted, 0 updated\n"
                           "sequence     3 (1 request)\n"),
            std::string::npos)
      << human.out;
}

// An explicit-values index takes --value (required), a row-ID index refuses it.
TEST_F(CliMutate, ExplicitValuesNeedValue) {
  const std::string dim = Write("dim.csv", "k,v,label\n10,100,a\n20,200,b\n");
  ASSERT_EQ(
      Cli({"index", "build", "vals", "--from", dim, "--key", "k", "--value", "v", "--replace"})
          .code,
      0);
  const std::string up = Write("vals_up.csv", "k,v,label\n20,222,B\n30,300,c\n");
  ExpectError(Cli({"index", "upsert", "vals", "--from", up, "--key", "k"}), 2,
              "index 'vals' has explicit values (built with --value): give --value COL");
  Json r = Report({"index", "upsert", "vals", "--from", up, "--key", "k", "--value", "v"});
  EXPECT_EQ(r["inserted_keys"], 1);
  EXPECT_EQ(r["updated_keys"], 1);
  const std::string probe = Write("vals_probe.csv", "k\n10\n20\n30\n");
  RunResult l = Cli({"lookup", "vals", "--from", probe, "--key", "k", "--select", "label"});
  ASSERT_EQ(l.code, 0) << l.err;
  EXPECT_EQ(l.out, "k,value,found,label\n10,100,true,a\n20,222,true,B\n30,300,true,c\n");

  const std::string rowid = Write("rowid.csv", "k,v\n1,5\n");
  ASSERT_EQ(
      Cli({"index", "build", "rowid", "--from", rowid, "--key", "k", "--no-payload", "--replace"})
          .code,
      0);
  ExpectError(Cli({"index", "upsert", "rowid", "--from", rowid, "--key", "k", "--value", "v"}), 2,
              "index 'rowid' has row-ID values: its upserted rows get the next row IDs (from 1); "
              "leave --value out");
}

// A composite key (tenant int64, order string): --key names the file's columns
// in the index's key order; a delete with a null key column counts not found.
TEST_F(CliMutate, CompositeKey) {
  const std::string orders = Write("orders.csv", "tenant,order_id,total\n1,a,10\n2,a,20\n1,b,30\n");
  ASSERT_EQ(
      Cli({"index", "build", "orders", "--from", orders, "--key", "tenant,order_id", "--replace"})
          .code,
      0);
  // The file's key columns are the index's by position, whatever their names.
  const std::string up = Write("orders_up.csv", "t,o,total\n2,a,21\n3,z,5\n");
  ExpectError(Cli({"index", "upsert", "orders", "--from", up, "--key", "t"}), 2,
              "--key 't': 1 key columns, but index 'orders' has a key of 2");
  Json r = Report({"index", "upsert", "orders", "--from", up, "--key", "t,o"});
  EXPECT_EQ(r["inserted_keys"], 1);
  EXPECT_EQ(r["updated_keys"], 1);
  const std::string del = Write("orders_del.csv", "tenant,order_id\n1,a\n,b\n");
  r = Report({"index", "delete", "orders", "--from", del, "--key", "tenant,order_id"});
  EXPECT_EQ(r["deleted_keys"], 1);
  EXPECT_EQ(r["not_found_keys"], 1);
  const std::string probe = Write("orders_probe.csv", "tenant,order_id\n1,a\n2,a\n1,b\n3,z\n");
  RunResult l =
      Cli({"lookup", "orders", "--from", probe, "--key", "tenant,order_id", "--select", "total"});
  ASSERT_EQ(l.code, 0) << l.err;
  EXPECT_EQ(l.out,
            "tenant,order_id,value,found,total\n1,a,,false,\n2,a,3,true,21\n1,b,2,true,30\n"
            "3,z,4,true,5\n");
}

// keep_all: upserted rows join their groups; a delete removes whole groups.
TEST_F(CliMutate, KeepAllGroups) {
  const std::string events = Write("events.csv", "user,kind\n1,a\n1,b\n2,c\n");
  ASSERT_EQ(Cli({"index", "build", "events", "--from", events, "--key", "user", "--duplicates",
                 "keep_all", "--replace"})
                .code,
            0);
  const std::string more = Write("events_more.csv", "user,kind\n1,d\n3,e\n");
  Json r = Report({"index", "upsert", "events", "--from", more, "--key", "user"});
  EXPECT_EQ(r["upsert_rows"], 2);
  const std::string users = Write("users.csv", "user\n1\n3\n");
  RunResult j = Cli({"join", "events", "--left", users, "--on", "user", "--select", "kind"});
  ASSERT_EQ(j.code, 0) << j.err;
  // The group's rows, then the upserted row (row IDs 3 and 4).
  EXPECT_EQ(j.out, "left_row,right_row,kind\n0,0,a\n0,1,b\n0,3,d\n1,4,e\n");
  const std::string one = Write("user1.csv", "user\n1\n");
  r = Report({"index", "delete", "events", "--from", one, "--key", "user"});
  EXPECT_EQ(r["deleted_keys"], 1);
  EXPECT_EQ(r["deleted_rows"], 3);
}

// A file of many batches and a server that takes 3 rows per request: one
// request per 3 rows, the counts summed, the sequence of the last request.
TEST_F(CliMutate, ManyRequests) {
  ServerOptions o;
  o.extra_args = {"--max-mutation-rows=3"};
  ServerProcess small(o);
  ASSERT_FALSE(small.grpc_address().empty()) << small.log();
  std::ostringstream build, up;
  build << "id,n\n";
  up << "id,n\n";
  for (int i = 0; i < 20; ++i) build << i << "," << i << "\n";
  for (int i = 10; i < 30; ++i) up << i << "," << -i << "\n";
  const std::string b = Write("many_build.csv", build.str());
  const std::string u = Write("many_up.csv", up.str());
  ASSERT_EQ(Cli({"index", "build", "many", "--from", b, "--key", "id"}, small.grpc_address()).code,
            0);
  Json r = Report({"--batch-rows", "7", "index", "upsert", "many", "--from", u, "--key", "id"},
                  small.grpc_address());
  // Batches of 7, 7 and 6 rows, each in requests of at most 3 rows: 3 + 3 + 2.
  EXPECT_EQ(r["requests"], 8);
  EXPECT_EQ(r["mutation_sequence"], 8);
  EXPECT_EQ(r["upsert_rows"], 20);
  EXPECT_EQ(r["inserted_keys"], 10);
  EXPECT_EQ(r["updated_keys"], 10);
}

// The errors name what is wrong and what was applied before it.
TEST_F(CliMutate, ErrorsNameTheColumnAndWhatWasApplied) {
  const std::string base = Write("err.csv", "id,name\n1,a\n2,b\n");
  ASSERT_EQ(Cli({"index", "build", "err", "--from", base, "--key", "id", "--replace"}).code, 0);
  ExpectError(Cli({"index", "upsert", "err", "--from", Write("err_extra.csv", "id,name,x\n3,c,1\n"),
                   "--key", "id"}),
              2, "column 'x' is not a payload column of index 'err' (its payload: name)");
  ExpectError(
      Cli({"index", "upsert", "err", "--from", Write("err_less.csv", "id\n3\n"), "--key", "id"}), 2,
      "has no column 'name': index 'err' stores payload column 'name' (str)");
  ExpectError(Cli({"index", "upsert", "no_such_index", "--from", base, "--key", "id"}), 1,
              "index upsert no_such_index: NOT_FOUND");
  // A bad key cell in the second batch: the first batch was applied.
  const std::string bad = Write("err_bad.csv", "id,name\n5,e\n6,f\nx,g\n");
  ExpectError(Cli({"--batch-rows", "2", "index", "upsert", "err", "--from", bad, "--key", "id"}), 2,
              "2 input rows in 1 request before it were applied (mutation sequence 1)");
  // The reserved key in the second batch: the server refuses that request.
  const std::string reserved = Write("err_reserved.csv", "id,name\n7,g\n8,h\n4294967295,i\n9,j\n");
  RunResult r =
      Cli({"--batch-rows", "2", "index", "upsert", "err", "--from", reserved, "--key", "id"});
  ExpectError(r, 1, "index upsert err: INVALID_ARGUMENT");
  EXPECT_NE(r.err.find("(the request of 2 rows from " + reserved +
                       ":4; nothing of it was applied; 2 input rows in 1 request were applied "
                       "(mutation sequence 2))"),
            std::string::npos)
      << r.err;
  const std::string probe = Write("err_probe.csv", "id\n5\n7\n9\n");
  RunResult l = Cli({"lookup", "err", "--from", probe, "--key", "id"});
  ASSERT_EQ(l.code, 0) << l.err;
  EXPECT_EQ(l.out, "id,value,found\n5,2,true\n7,4,true\n9,,false\n");
}

}  // namespace
