#include "gpujoin/server/metrics.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_util.hpp"

namespace gpujoin::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::CpuBackend;
using testing::MakeVersion;
using testing::Render;

TEST(Metrics, ServiceGaugesAndBackendInfo) {
  Metrics m;
  m.SetBackendInfo("cpu", "host");
  m.SetDeviceMemory(10, 20, 30);
  m.SetServing(true);
  m.SetInflightBatches(3);
  m.SetIndexCount(2);
  const std::string text = Render(*m.registry());
  EXPECT_THAT(text, HasSubstr("gpujoin_backend_info{backend=\"cpu\",device=\"host\"} 1"));
  EXPECT_THAT(text, HasSubstr("gpujoin_device_memory_used_bytes 10"));
  EXPECT_THAT(text, HasSubstr("gpujoin_device_memory_budget_bytes 20"));
  EXPECT_THAT(text, HasSubstr("gpujoin_device_memory_total_bytes 30"));
  EXPECT_THAT(text, HasSubstr("gpujoin_serving 1"));
  EXPECT_THAT(text, HasSubstr("gpujoin_inflight_batches 3"));
  EXPECT_THAT(text, HasSubstr("gpujoin_indexes 2"));
}

TEST(Metrics, PerIndexSeriesAppearAndDisappearWithTheIndex) {
  auto backend = CpuBackend();
  Metrics m;
  auto v = MakeVersion(*backend, "orders", 16);
  v->version = 3;
  m.SetIndex(*v);
  m.CountBuild("orders", BuildResult::kOk);
  engine::QueryStatistics st;
  st.found = 4;
  st.missing = 1;
  st.total_probes = 7;
  st.max_probes = 2;
  m.RecordQuery("orders", QueryOp::kLookup, 5, st);
  m.RecordJoinBatch("orders", 9, true);
  std::string text = Render(*m.registry());
  EXPECT_THAT(text, HasSubstr("gpujoin_index_capacity_slots{index=\"orders\"} 16"));
  EXPECT_THAT(text, HasSubstr("gpujoin_index_version{index=\"orders\"} 3"));
  EXPECT_THAT(text, HasSubstr("gpujoin_index_max_probe_count{index=\"orders\"} 16"));
  EXPECT_THAT(text, HasSubstr("gpujoin_index_builds_total{index=\"orders\",result=\"ok\"} 1"));
  EXPECT_THAT(text, HasSubstr("gpujoin_query_rows_total{index=\"orders\",op=\"lookup\"} 5"));
  EXPECT_THAT(text, HasSubstr("gpujoin_query_found_total{index=\"orders\",op=\"lookup\"} 4"));
  EXPECT_THAT(text, HasSubstr("gpujoin_query_missing_total{index=\"orders\",op=\"lookup\"} 1"));
  EXPECT_THAT(text, HasSubstr("gpujoin_query_probes_total{index=\"orders\",op=\"lookup\"} 7"));
  EXPECT_THAT(text, HasSubstr("gpujoin_query_max_probes{index=\"orders\",op=\"lookup\"} 2"));
  EXPECT_THAT(text, HasSubstr("gpujoin_join_pairs_total{index=\"orders\"} 9"));
  EXPECT_THAT(text, HasSubstr("gpujoin_join_overflow_batches_total{index=\"orders\"} 1"));

  m.RemoveIndex("orders");
  text = Render(*m.registry());
  EXPECT_THAT(text, Not(HasSubstr("index=\"orders\"")));
  // An in-flight batch finishing after the drop must not bring the series back.
  m.RecordQuery("orders", QueryOp::kLookup, 5, st);
  m.RecordJoinBatch("orders", 1, false);
  EXPECT_THAT(Render(*m.registry()), Not(HasSubstr("index=\"orders\"")));
}

TEST(Metrics, RpcSeriesExistFromTheStartAndErrorsCountByCode) {
  Metrics m;
  std::string text = Render(*m.registry());
  for (std::string_view rpc : kRpcNames) {
    EXPECT_THAT(text, HasSubstr("gpujoin_rpc_batches_total{rpc=\"" + std::string(rpc) + "\"} 0"));
  }
  m.ObserveRpc("Lookup", 0.002, 100);
  m.CountRpcError("Lookup", "INVALID_ARGUMENT");
  m.CountRpcError("Lookup", "INVALID_ARGUMENT");
  text = Render(*m.registry());
  EXPECT_THAT(text, HasSubstr("gpujoin_rpc_batches_total{rpc=\"Lookup\"} 1"));
  EXPECT_THAT(text, HasSubstr("gpujoin_rpc_rows_total{rpc=\"Lookup\"} 100"));
  EXPECT_THAT(text, HasSubstr("gpujoin_rpc_duration_seconds_count{rpc=\"Lookup\"} 1"));
  EXPECT_THAT(text, HasSubstr("gpujoin_rpc_errors_total{code=\"INVALID_ARGUMENT\",rpc=\"Lookup\"} 2"));
}

TEST(Metrics, FailedFirstBuildCountIsRemovedByDrop) {
  Metrics m;
  m.CountBuild("x", BuildResult::kResourceExhausted);
  EXPECT_THAT(Render(*m.registry()),
              HasSubstr("gpujoin_index_builds_total{index=\"x\",result=\"resource_exhausted\"} 1"));
  m.RemoveIndex("x");
  EXPECT_THAT(Render(*m.registry()), Not(HasSubstr("index=\"x\"")));
}

}  // namespace
}  // namespace gpujoin::server
