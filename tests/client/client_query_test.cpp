// The client library's Query (plans in one round trip) against a real
// gpujoind (CPU backend): QueryAll with one lookup and its selected payload,
// two lookups (an integer key, then a string key column made by the first),
// filters whose nulls follow SQL, an aggregation with several measures (and
// the one group of an empty input), a stream-wide limit that stops the
// sending, results the server splits over several messages (a server with a
// small --max-message-bytes) reassembled by first_row, a batch refused for
// --max-result-bytes run again in halves, the streaming Query with a flush,
// in-band errors with the server's code, and the checks made before anything
// is sent. Expected rows are computed here from the inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpujoin/client/client.hpp"
#include "server_client_fixture.hpp"

namespace {

namespace gc = gpujoin::client;
using gc::AggregateOp;
using gc::Column;
using gc::ColumnType;
using gc::ColumnView;

Column Strings(std::string name, const std::vector<std::optional<std::string>>& values) {
  Column c(std::move(name), ColumnType::kString);
  for (const auto& v : values) {
    if (v) {
      EXPECT_TRUE(c.AppendString(*v).ok());
    } else {
      c.AppendNull();
    }
  }
  return c;
}

Column Doubles(std::string name, const std::vector<std::optional<double>>& values) {
  Column c(std::move(name), ColumnType::kFloat64);
  for (const auto& v : values) {
    if (v) {
      c.Append<double>(*v);
    } else {
      c.AppendNull();
    }
  }
  return c;
}

// The column named `name` of a result (a test failure when there is none).
const Column& Named(const std::vector<Column>& columns, const std::string& name) {
  for (const Column& c : columns) {
    if (c.name == name) return c;
  }
  ADD_FAILURE() << "no result column " << name;
  static const Column kNone;
  return kNone;
}

// The dimension: sensor IDs 0, 10, 20, ... (kSensors of them) with a type
// (one of kTypes, by ID) and a weight; the sites index maps types to sites.
constexpr uint32_t kSensors = 50;
const std::vector<std::string> kTypes = {"co2", "humidity", "pressure"};
std::string TypeOf(uint32_t id) { return kTypes[(id / 10) % kTypes.size()]; }
int64_t WeightOf(uint32_t id) { return static_cast<int64_t>(id) * 3 - 7; }

// The facts: event rows with a sensor ID (every third unknown) and a latency
// (every fifth null).
struct Events {
  std::vector<int64_t> id, sensor;
  std::vector<std::optional<double>> latency;
  Column id_col, sensor_col, latency_col;

  explicit Events(size_t n) {
    for (size_t i = 0; i < n; ++i) {
      id.push_back(static_cast<int64_t>(1000 + i));
      sensor.push_back(static_cast<int64_t>(i % 3 == 2 ? 7 : (i * 10) % (kSensors * 10)));
      latency.push_back(i % 5 == 4 ? std::nullopt
                                   : std::optional<double>(static_cast<double>(i % 17) / 4));
    }
    id_col = Column::Of<int64_t>("event_id", id);
    sensor_col = Column::Of<int64_t>("sensor_id", sensor);
    latency_col = Doubles("latency_ms", latency);
  }
  std::vector<ColumnView> views() const {
    return {id_col.view(), sensor_col.view(), latency_col.view()};
  }
  bool Known(size_t i) const { return sensor[i] % 10 == 0; }
};

class ClientQueryTest : public gpujoin::testing::ServerClientTest {
 protected:
  void SetUp() override {
    ServerClientTest::SetUp();
    if (HasFatalFailure()) return;
    gc::IndexSpec spec;
    spec.name = "qsensors";
    spec.replace = true;
    spec.payload = {{"type", ColumnType::kString}, {"weight", ColumnType::kInt64}};
    std::vector<uint32_t> keys;
    std::vector<std::optional<std::string>> types;
    std::vector<int64_t> weights;
    for (uint32_t i = 0; i < kSensors; ++i) {
      keys.push_back(i * 10);
      types.push_back(TypeOf(i * 10));
      weights.push_back(WeightOf(i * 10));
    }
    const Column t = Strings("type", types);
    const Column w = Column::Of<int64_t>("weight", weights);
    const std::vector<ColumnView> payload = {t.view(), w.view()};
    auto built = client_->BuildIndexFromColumns(spec, keys, {}, payload);
    ASSERT_TRUE(built.ok()) << built.status();

    // sites: keyed by the type string, payload site (pressure has none).
    gc::IndexSpec sites;
    sites.name = "qsites";
    sites.replace = true;
    sites.key_type = gc::KeyType::kColumns;
    sites.key_columns = {{"type", ColumnType::kString}};
    sites.payload = {{"site", ColumnType::kString}};
    const Column site_keys = Strings("type", {"co2", "humidity"});
    const Column site_names = Strings("site", {"plant-a", "warehouse"});
    const std::vector<ColumnView> key_views = {site_keys.view()};
    const std::vector<ColumnView> site_payload = {site_names.view()};
    auto built_sites = client_->BuildIndexFromColumns(sites, key_views, {}, site_payload);
    ASSERT_TRUE(built_sites.ok()) << built_sites.status();
  }

  gc::QueryTable Run(const gc::QueryPlan& plan, const std::vector<ColumnView>& columns,
                     gc::QueryOptions o = {}) {
    auto t = client_->QueryAll(plan, columns, o);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *std::move(t) : gc::QueryTable{};
  }
};

TEST_F(ClientQueryTest, OneLookupAddsTheSelectedPayloadInInputOrderAcrossBatches) {
  const Events ev(1000);
  gc::QueryPlan plan;
  plan.Lookup("qsensors", {"sensor_id"}, {"type", "weight"});
  gc::QueryOptions o;
  o.batch_rows = 64;  // 16 batches
  const gc::QueryTable t = Run(plan, ev.views(), o);
  std::vector<int64_t> want;
  for (size_t i = 0; i < ev.id.size(); ++i) {
    if (ev.Known(i)) want.push_back(ev.id[i]);
  }
  ASSERT_EQ(t.rows, want.size());
  const Column& id = Named(t.columns, "event_id");
  const Column& sensor = Named(t.columns, "sensor_id");
  const Column& type = Named(t.columns, "type");
  const Column& weight = Named(t.columns, "weight");
  const Column& found = Named(t.columns, "qsensors.found");
  ASSERT_EQ(id.length, want.size());
  for (uint64_t r = 0; r < t.rows; ++r) {
    EXPECT_EQ(id.Value<int64_t>(r), want[r]) << r;
    const auto s = static_cast<uint32_t>(sensor.Value<int64_t>(r));
    EXPECT_EQ(type.String(r), TypeOf(s)) << r;
    EXPECT_EQ(weight.Value<int64_t>(r), WeightOf(s)) << r;
    EXPECT_TRUE(found.Bool(r));
  }
  // One answer per batch, each with the lookup's statistics.
  ASSERT_EQ(t.answers.size(), 16u);
  uint64_t in = 0, out = 0;
  for (const gc::QueryResult& a : t.answers) {
    ASSERT_EQ(a.steps.size(), 1u);
    EXPECT_EQ(a.steps[0].step, 0u);
    EXPECT_EQ(a.steps[0].kind, "lookup");
    EXPECT_EQ(a.steps[0].index, "qsensors");
    EXPECT_GE(a.steps[0].index_version, 1u);
    EXPECT_EQ(a.steps[0].statistics.found, a.steps[0].rows_out);
    in += a.steps[0].rows_in;
    out += a.steps[0].rows_out;
    EXPECT_TRUE(a.columns.empty()) << "QueryAll moves the rows into the table";
  }
  EXPECT_EQ(in, ev.id.size());
  EXPECT_EQ(out, want.size());
}

TEST_F(ClientQueryTest, TwoLookupsTheSecondKeyedByAColumnTheFirstMade) {
  const Events ev(300);
  gc::QueryLookup first;
  first.index = "qsensors";
  first.key = {"sensor_id"};
  first.select = {"type"};
  first.kind = gc::JoinKind::kLeftOuter;
  gc::QueryLookup second;
  second.index = "qsites";
  second.key = {"type"};
  second.select = {"site"};
  second.prefix = "s_";
  second.kind = gc::JoinKind::kLeftAnti;  // the events whose type has no site (or no type)
  gc::QueryPlan plan;
  plan.Lookup(first).Lookup(second);
  const gc::QueryTable t = Run(plan, ev.views());
  std::vector<int64_t> want;
  for (size_t i = 0; i < ev.id.size(); ++i) {
    const bool has_site = ev.Known(i) && TypeOf(static_cast<uint32_t>(ev.sensor[i])) != "pressure";
    if (!has_site) want.push_back(ev.id[i]);
  }
  const Column& id = Named(t.columns, "event_id");
  ASSERT_EQ(id.length, want.size());
  for (uint64_t r = 0; r < id.length; ++r) EXPECT_EQ(id.Value<int64_t>(r), want[r]);
  const Column& site = Named(t.columns, "s_site");
  EXPECT_EQ(site.null_count, site.length) << "an anti lookup's payload is null";
  const Column& found = Named(t.columns, "qsites.found");
  for (uint64_t r = 0; r < found.length; ++r) EXPECT_FALSE(found.Bool(r));
}

TEST_F(ClientQueryTest, FilterNullsFollowSql) {
  const Events ev(200);
  auto ids = [&](const std::string& where) {
    gc::QueryPlan plan;
    plan.Filter(where);
    const gc::QueryTable t = Run(plan, ev.views());
    std::vector<int64_t> out;
    if (t.rows == 0) return out;
    const Column& id = Named(t.columns, "event_id");
    for (uint64_t r = 0; r < id.length; ++r) out.push_back(id.Value<int64_t>(r));
    return out;
  };
  std::vector<int64_t> is_null, not_above, either;
  for (size_t i = 0; i < ev.id.size(); ++i) {
    if (!ev.latency[i]) is_null.push_back(ev.id[i]);
    if (ev.latency[i] && !(*ev.latency[i] > 2)) not_above.push_back(ev.id[i]);
    if (!ev.latency[i] || *ev.latency[i] > 3) either.push_back(ev.id[i]);
  }
  EXPECT_EQ(ids("latency_ms is null"), is_null);
  EXPECT_EQ(ids("not latency_ms > 2"), not_above);  // not null is null: dropped
  EXPECT_EQ(ids("latency_ms > 3 or latency_ms is null"), either);
  EXPECT_EQ(ids("latency_ms > 1000"), std::vector<int64_t>{});
}

TEST_F(ClientQueryTest, AggregateGroupsInFirstArrivalOrderWithEveryMeasure) {
  const Events ev(500);
  gc::QueryPlan plan;
  plan.Lookup("qsensors", {"sensor_id"}, {"type", "weight"})
      .Aggregate({"type"}, {{AggregateOp::kCount},
                            {AggregateOp::kCount, "latency_ms", "with_latency"},
                            {AggregateOp::kSum, "weight"},
                            {AggregateOp::kMin, "latency_ms", "lo"},
                            {AggregateOp::kMax, "latency_ms", "hi"},
                            {AggregateOp::kMean, "latency_ms", "mean"}});
  gc::QueryOptions o;
  o.batch_rows = 100;
  const gc::QueryTable t = Run(plan, ev.views(), o);

  struct G {
    uint64_t count = 0, values = 0;
    int64_t weight = 0;
    double sum = 0, lo = INFINITY, hi = -INFINITY;
  };
  std::vector<std::string> order;
  std::map<std::string, G> want;
  for (size_t i = 0; i < ev.id.size(); ++i) {
    if (!ev.Known(i)) continue;
    const std::string type = TypeOf(static_cast<uint32_t>(ev.sensor[i]));
    if (!want.count(type)) order.push_back(type);
    G& g = want[type];
    ++g.count;
    g.weight += WeightOf(static_cast<uint32_t>(ev.sensor[i]));
    if (!ev.latency[i]) continue;
    ++g.values;
    g.sum += *ev.latency[i];
    g.lo = std::min(g.lo, *ev.latency[i]);
    g.hi = std::max(g.hi, *ev.latency[i]);
  }
  ASSERT_EQ(t.rows, order.size());
  const Column& type = Named(t.columns, "type");
  const Column& count = Named(t.columns, "count");
  const Column& with = Named(t.columns, "with_latency");
  const Column& weight = Named(t.columns, "sum_weight");
  const Column& lo = Named(t.columns, "lo");
  const Column& hi = Named(t.columns, "hi");
  const Column& mean = Named(t.columns, "mean");
  EXPECT_EQ(count.type, ColumnType::kUint64);
  EXPECT_EQ(weight.type, ColumnType::kInt64);
  EXPECT_EQ(lo.type, ColumnType::kFloat64);
  EXPECT_EQ(mean.type, ColumnType::kFloat64);
  for (uint64_t r = 0; r < t.rows; ++r) {
    const G& g = want.at(order[r]);
    EXPECT_EQ(type.String(r), order[r]);
    EXPECT_EQ(count.Value<uint64_t>(r), g.count);
    EXPECT_EQ(with.Value<uint64_t>(r), g.values);
    EXPECT_EQ(weight.Value<int64_t>(r), g.weight);
    EXPECT_EQ(lo.Value<double>(r), g.lo);
    EXPECT_EQ(hi.Value<double>(r), g.hi);
    EXPECT_NEAR(mean.Value<double>(r), g.sum / static_cast<double>(g.values), 1e-12);
  }
  // Five batch answers without rows, then the final one with the groups.
  ASSERT_EQ(t.answers.size(), 6u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_FALSE(t.answers[i].final);
    EXPECT_EQ(t.answers[i].rows, 0u);
  }
  EXPECT_TRUE(t.answers.back().final);
  EXPECT_EQ(t.answers.back().batch_id, 5u) << "the last request's batch_id plus one";
  EXPECT_EQ(t.answers.back().rows, order.size());
}

TEST_F(ClientQueryTest, AggregateWithoutGroupByHasOneRowEvenForNoInput) {
  const Events ev(0);
  gc::QueryPlan plan;
  plan.Aggregate({}, {{AggregateOp::kCount}, {AggregateOp::kSum, "latency_ms"}});
  const gc::QueryTable t = Run(plan, ev.views());
  ASSERT_EQ(t.rows, 1u);
  EXPECT_EQ(Named(t.columns, "count").Value<uint64_t>(0), 0u);
  EXPECT_FALSE(Named(t.columns, "sum_latency_ms").Valid(0)) << "a sum of no value is null";
}

TEST_F(ClientQueryTest, LimitIsStreamWideAndStopsTheSending) {
  const Events ev(2000);
  gc::QueryPlan plan;
  plan.Lookup("qsensors", {"sensor_id"}, {}).Limit(25);
  gc::QueryOptions o;
  o.batch_rows = 10;  // 200 batches; ~6.7 matches each
  o.stream.max_in_flight = 2;
  const gc::QueryTable t = Run(plan, ev.views(), o);
  std::vector<int64_t> want;
  for (size_t i = 0; i < ev.id.size() && want.size() < 25; ++i) {
    if (ev.Known(i)) want.push_back(ev.id[i]);
  }
  ASSERT_EQ(t.rows, 25u);
  const Column& id = Named(t.columns, "event_id");
  for (uint64_t r = 0; r < t.rows; ++r) EXPECT_EQ(id.Value<int64_t>(r), want[r]);
  EXPECT_LT(t.answers.size(), 20u) << "the sending stops once the limit is spent";

  o.stop_at_limit = false;
  const gc::QueryTable all = Run(plan, ev.views(), o);
  EXPECT_EQ(all.rows, 25u);
  EXPECT_EQ(all.answers.size(), 200u);
}

TEST_F(ClientQueryTest, StreamingQueryFlushAnswersTheGroupsSoFar) {
  const Events ev(90);
  gc::QueryPlan plan;
  plan.Aggregate({}, {{AggregateOp::kCount}});
  int sent = 0;
  auto source = [&]() -> std::optional<gc::QueryBatch> {
    if (sent == 3) return std::nullopt;
    gc::QueryBatch b;
    for (const ColumnView& v : ev.views()) b.columns.push_back(v.Slice(30 * sent, 30));
    b.flush = sent == 1;
    ++sent;
    return b;
  };
  std::vector<gc::QueryResult> results;
  const absl::Status st = client_->Query(plan, source, [&](gc::QueryResult&& r) {
    results.push_back(std::move(r));
    return absl::OkStatus();
  });
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_EQ(results.size(), 4u);
  EXPECT_EQ(results[0].rows, 0u);
  ASSERT_EQ(results[1].rows, 1u) << "a flush answers with the groups so far";
  EXPECT_EQ(Named(results[1].columns, "count").Value<uint64_t>(0), 60u);
  EXPECT_TRUE(results[3].final);
  EXPECT_EQ(results[3].batch_id, 3u);
  EXPECT_EQ(Named(results[3].columns, "count").Value<uint64_t>(0), 90u);
}

TEST_F(ClientQueryTest, ErrorsCarryTheServersCodeAndMessage) {
  const Events ev(10);
  gc::QueryPlan unknown;
  unknown.Lookup("no_such_index", {"sensor_id"});
  auto r = client_->QueryAll(unknown, ev.views());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound) << r.status();
  EXPECT_NE(r.status().message().find("no_such_index"), std::string::npos) << r.status();

  gc::QueryPlan bad_where;
  bad_where.Filter("latency_ms >");
  r = client_->QueryAll(bad_where, ev.views());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();

  gc::QueryPlan no_column;
  no_column.Filter("nope = 1");
  r = client_->QueryAll(no_column, ev.views());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_NE(r.status().message().find("nope"), std::string::npos) << r.status();

  // In the stream the error is the batch's, and the stream goes on: a plan
  // error answers every batch.
  int sent = 0;
  std::vector<absl::Status> errors;
  const absl::Status st = client_->Query(
      unknown,
      [&]() -> std::optional<gc::QueryBatch> {
        if (sent++ == 2) return std::nullopt;
        return gc::QueryBatch{ev.views(), false};
      },
      [&](gc::QueryResult&& res) {
        errors.push_back(res.error);
        return absl::OkStatus();
      });
  EXPECT_TRUE(st.ok()) << st;
  ASSERT_GE(errors.size(), 2u);
  for (const absl::Status& e : errors) EXPECT_EQ(e.code(), absl::StatusCode::kNotFound) << e;
}

TEST_F(ClientQueryTest, ChecksBeforeAnythingIsSent) {
  const Events ev(10);
  gc::QueryPlan plan;
  plan.Limit(1);
  EXPECT_EQ(client_->QueryAll(gc::QueryPlan(), ev.views()).status().code(),
            absl::StatusCode::kInvalidArgument);
  const Column other = Column::Of<int64_t>("other", std::vector<int64_t>{1});
  std::vector<ColumnView> uneven = ev.views();
  uneven.push_back(other.view());
  auto r = client_->QueryAll(plan, uneven);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("column 3 ('other') has 1 rows"), std::string::npos)
      << r.status();
  const absl::Status none = client_->Query(
      plan, [] { return std::optional<gc::QueryBatch>(); },
      [](gc::QueryResult&&) { return absl::OkStatus(); });
  EXPECT_EQ(none.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(none.message().find("needs a first batch with columns"), std::string::npos) << none;
}

// A server with a small message limit splits a batch's result over several
// messages; the client reassembles them by first_row.
class ClientQuerySplitTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    gpujoin::testing::ServerOptions o;
    o.extra_args = {"--max-message-bytes=65536"};
    server_ = new gpujoin::testing::ServerProcess(o);
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static inline gpujoin::testing::ServerProcess* server_ = nullptr;
};

TEST_F(ClientQuerySplitTest, ResultsLargerThanAMessageAreReassembled) {
  ASSERT_TRUE(server_->ready()) << server_->log();
  gc::ConnectOptions co;
  co.address = server_->grpc_address();
  co.deadline = std::chrono::seconds(60);
  auto c = gc::Client::Connect(co);
  ASSERT_TRUE(c.ok()) << c.status();
  // Every key carries a 200-byte payload string: a batch's result is several
  // times its input (about 16 bytes a row).
  gc::IndexSpec spec;
  spec.name = "wide";
  spec.replace = true;
  spec.payload = {{"blob", ColumnType::kString}};
  std::vector<uint32_t> keys;
  std::vector<std::optional<std::string>> blobs;
  for (uint32_t k = 0; k < 100; ++k) {
    keys.push_back(k);
    blobs.push_back(std::string(200, static_cast<char>('a' + k % 26)));
  }
  const Column blob = Strings("blob", blobs);
  const std::vector<ColumnView> payload = {blob.view()};
  ASSERT_TRUE((*c)->BuildIndexFromColumns(spec, keys, {}, payload).ok());

  std::vector<int64_t> row, key;
  for (int64_t i = 0; i < 3000; ++i) {
    row.push_back(i);
    key.push_back(i % 100);
  }
  const Column row_col = Column::Of<int64_t>("row", row);
  const Column key_col = Column::Of<int64_t>("k", key);
  gc::QueryPlan plan;
  plan.Lookup("wide", {"k"}, {"blob"});
  auto t = (*c)->QueryAll(plan, std::vector<ColumnView>{row_col.view(), key_col.view()});
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->rows, 3000u);
  const Column& r = Named(t->columns, "row");
  const Column& b = Named(t->columns, "blob");
  for (uint64_t i = 0; i < 3000; ++i) {
    ASSERT_EQ(r.Value<int64_t>(i), static_cast<int64_t>(i));
    ASSERT_EQ(b.String(i), *blobs[i % 100]) << i;
  }
  // One answer per input batch, however many messages it took.
  uint64_t in = 0;
  for (const gc::QueryResult& a : t->answers) in += a.steps.empty() ? 0 : a.steps[0].rows_in;
  EXPECT_EQ(in, 3000u);
  EXPECT_LT(t->answers.size(), 10u) << "the input fits in a few requests";
}

// A keep_all lookup expands a batch past --max-result-bytes: QueryAll's
// automatic batches run the query again in batches of half the refused one's
// rows until they fit; batches the caller gives get the server's error.
class ClientQueryResultLimitTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    gpujoin::testing::ServerOptions o;
    o.extra_args = {"--max-message-bytes=1M", "--max-result-bytes=1M"};
    server_ = new gpujoin::testing::ServerProcess(o);
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static inline gpujoin::testing::ServerProcess* server_ = nullptr;
};

TEST_F(ClientQueryResultLimitTest, ARefusedBatchRunsTheQueryAgainInHalves) {
  ASSERT_TRUE(server_->ready()) << server_->log();
  gc::ConnectOptions co;
  co.address = server_->grpc_address();
  co.deadline = std::chrono::seconds(60);
  auto c = gc::Client::Connect(co);
  ASSERT_TRUE(c.ok()) << c.status();
  // 100 keys of 100 rows each.
  gc::IndexSpec spec;
  spec.name = "many";
  spec.replace = true;
  spec.duplicates = gc::DuplicatePolicy::kKeepAll;
  spec.payload = {{"n", ColumnType::kInt64}};
  std::vector<uint32_t> keys;
  std::vector<int64_t> n;
  for (uint32_t r = 0; r < 10000; ++r) {
    keys.push_back(r % 100);
    n.push_back(r);
  }
  const Column nc = Column::Of<int64_t>("n", n);
  const std::vector<ColumnView> payload = {nc.view()};
  ASSERT_TRUE((*c)->BuildIndexFromColumns(spec, keys, {}, payload).ok());
  // 2000 input rows: 200000 result rows, several MB in one batch.
  std::vector<int64_t> id, key;
  for (int64_t i = 0; i < 2000; ++i) {
    id.push_back(i);
    key.push_back(i % 100);
  }
  const Column idc = Column::Of<int64_t>("id", id);
  const Column keyc = Column::Of<int64_t>("k", key);
  const std::vector<ColumnView> input = {idc.view(), keyc.view()};
  gc::QueryPlan plan;
  plan.Lookup("many", {"k"}, {"n"})
      .Aggregate({}, {{AggregateOp::kCount}, {AggregateOp::kSum, "n"}});

  auto t = (*c)->QueryAll(plan, input);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->rows, 1u);
  EXPECT_EQ(Named(t->columns, "count").Value<uint64_t>(0), 200000u);
  // Each input row matches its key's 100 rows: n = key + 100 * j.
  int64_t sum = 0;
  for (int64_t i = 0; i < 2000; ++i) {
    for (int64_t j = 0; j < 100; ++j) sum += key[i] + 100 * j;
  }
  EXPECT_EQ(Named(t->columns, "sum_n").Value<int64_t>(0), sum);
  EXPECT_GT(t->answers.size(), 2u) << "the input went in several smaller batches";

  gc::QueryOptions given;
  given.batch_rows = 2000;
  auto refused = (*c)->QueryAll(plan, input, given);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_NE(refused.status().message().find("--max-result-bytes"), std::string::npos)
      << refused.status();
}

}  // namespace
