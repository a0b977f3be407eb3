#include "observe/metrics.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "test_util.hpp"

namespace gpujoin::server {
namespace {

using testing::CpuBackend;
using ::testing::HasSubstr;
using testing::MakeVersion;
using ::testing::Not;
using testing::Render;

// Families by name, from the registry the exposer serves.
std::map<std::string, prometheus::MetricFamily> Families(const Metrics& m) {
  std::map<std::string, prometheus::MetricFamily> out;
  for (prometheus::MetricFamily& f : m.registry()->Collect()) out.emplace(f.name, std::move(f));
  return out;
}

// The label values of one series, by label name.
std::map<std::string, std::string> LabelsOf(const prometheus::ClientMetric& metric) {
  std::map<std::string, std::string> out;
  for (const auto& label : metric.label) out[label.name] = label.value;
  return out;
}

// Every family that deploy/ (dashboards, alert rules) or docs/metrics.md names,
// with its type and whether its series carry the `index` label.
struct FamilySpec {
  const char* name;
  prometheus::MetricType type;
  bool per_index;
};
const FamilySpec kFamilies[] = {
    {"gpujoin_index_capacity_slots", prometheus::MetricType::Gauge, true},
    {"gpujoin_index_load_factor", prometheus::MetricType::Gauge, true},
    {"gpujoin_index_unique_keys", prometheus::MetricType::Gauge, true},
    {"gpujoin_index_duplicate_rows", prometheus::MetricType::Gauge, true},
    {"gpujoin_index_overflow_rows", prometheus::MetricType::Gauge, true},
    {"gpujoin_index_invalid_rows", prometheus::MetricType::Gauge, true},
    {"gpujoin_index_build_probes", prometheus::MetricType::Gauge, true},
    {"gpujoin_index_build_max_probes", prometheus::MetricType::Gauge, true},
    {"gpujoin_index_probe_bound", prometheus::MetricType::Gauge, true},
    {"gpujoin_index_device_bytes", prometheus::MetricType::Gauge, true},
    {"gpujoin_index_payload_bytes", prometheus::MetricType::Gauge, true},
    {"gpujoin_index_version", prometheus::MetricType::Gauge, true},
    {"gpujoin_index_source_rows", prometheus::MetricType::Gauge, true},
    {"gpujoin_index_build_seconds", prometheus::MetricType::Gauge, true},
    {"gpujoin_index_mutation_sequence", prometheus::MetricType::Gauge, true},
    {"gpujoin_index_rehashes", prometheus::MetricType::Gauge, true},
    {"gpujoin_index_builds_total", prometheus::MetricType::Counter, true},
    {"gpujoin_query_rows_total", prometheus::MetricType::Counter, true},
    {"gpujoin_query_found_total", prometheus::MetricType::Counter, true},
    {"gpujoin_query_missing_total", prometheus::MetricType::Counter, true},
    {"gpujoin_query_probes_total", prometheus::MetricType::Counter, true},
    {"gpujoin_query_max_probes", prometheus::MetricType::Gauge, true},
    {"gpujoin_join_pairs_total", prometheus::MetricType::Counter, true},
    {"gpujoin_join_overflow_batches_total", prometheus::MetricType::Counter, true},
    {"gpujoin_index_info", prometheus::MetricType::Gauge, true},
    {"gpujoin_gathered_bytes_total", prometheus::MetricType::Counter, false},
    {"gpujoin_rpc_duration_seconds", prometheus::MetricType::Histogram, false},
    {"gpujoin_rpc_phase_seconds", prometheus::MetricType::Histogram, false},
    {"gpujoin_rpc_batches_total", prometheus::MetricType::Counter, false},
    {"gpujoin_rpc_rows_total", prometheus::MetricType::Counter, false},
    {"gpujoin_rpc_errors_total", prometheus::MetricType::Counter, false},
    {"gpujoin_device_memory_used_bytes", prometheus::MetricType::Gauge, false},
    {"gpujoin_device_memory_budget_bytes", prometheus::MetricType::Gauge, false},
    {"gpujoin_device_memory_total_bytes", prometheus::MetricType::Gauge, false},
    {"gpujoin_backend_info", prometheus::MetricType::Gauge, false},
    {"gpujoin_build_info", prometheus::MetricType::Gauge, false},
    {"gpujoin_serving", prometheus::MetricType::Gauge, false},
    {"gpujoin_inflight_batches", prometheus::MetricType::Gauge, false},
    {"gpujoin_indexes", prometheus::MetricType::Gauge, false},
    {"gpujoin_pending_response_bytes", prometheus::MetricType::Gauge, false},
    {"gpujoin_pending_response_limit_bytes", prometheus::MetricType::Gauge, false},
    {"gpujoin_pending_response_refusals_total", prometheus::MetricType::Counter, false},
    {"gpujoin_paused_streams", prometheus::MetricType::Gauge, false},
    {"gpujoin_mutation_batches_total", prometheus::MetricType::Counter, false},
    {"gpujoin_mutation_rows_total", prometheus::MetricType::Counter, false},
    {"gpujoin_mutation_rehashes_total", prometheus::MetricType::Counter, false},
    {"gpujoin_mutation_seconds", prometheus::MetricType::Histogram, false},
};

// A scrape lists a family only once it has a series (prometheus-cpp exports no
// empty family). So at start-up (Metrics constructed, then what Server::Start
// sets) every family without an `index` label is there with its zero-valued
// series, and with the first index every per-index family is.
TEST(Metrics, EveryFamilyExistsAtStartUpWithItsType) {
  auto backend = CpuBackend();
  Metrics m;
  m.SetBackendInfo("cpu", "host");
  m.SetBuildInfo("0.1.0", "cpu", "host");
  auto families = Families(m);
  for (const FamilySpec& spec : kFamilies) {
    if (spec.per_index) {
      EXPECT_FALSE(families.contains(spec.name)) << spec.name << " has series without an index";
      continue;
    }
    auto it = families.find(spec.name);
    ASSERT_NE(it, families.end()) << spec.name << " is not exported at start-up";
    EXPECT_EQ(it->second.type, spec.type) << spec.name;
    EXPECT_FALSE(it->second.help.empty()) << spec.name << " has no help text";
  }

  m.SetIndex(*MakeVersion(*backend, "orders", 16));
  families = Families(m);
  for (const FamilySpec& spec : kFamilies) {
    auto it = families.find(spec.name);
    ASSERT_NE(it, families.end()) << spec.name << " is not exported once an index is live";
    EXPECT_EQ(it->second.type, spec.type) << spec.name;
    EXPECT_FALSE(it->second.help.empty()) << spec.name << " has no help text";
  }
  EXPECT_EQ(families.size(), std::size(kFamilies)) << "a family was added: list it in kFamilies";
}

// Regression: gpujoin_index_max_probe_count was a gauge with the `_count` suffix
// that Prometheus reserves for histograms and summaries (`promtool check metrics`
// rejects it). The naming rules that promtool checks, on every family.
TEST(Metrics, FamilyNamesFollowPrometheusNaming) {
  auto backend = CpuBackend();
  Metrics m;
  m.SetIndex(*MakeVersion(*backend, "orders", 16));
  for (const auto& [name, family] : Families(m)) {
    EXPECT_TRUE(absl::StartsWith(name, "gpujoin_")) << name;
    const bool total = absl::EndsWith(name, "_total");
    EXPECT_EQ(total, family.type == prometheus::MetricType::Counter)
        << name << ": counters, and only counters, end in _total";
    if (family.type != prometheus::MetricType::Histogram &&
        family.type != prometheus::MetricType::Summary) {
      for (const char* reserved : {"_count", "_sum", "_bucket"}) {
        EXPECT_FALSE(absl::EndsWith(name, reserved))
            << name << ": " << reserved << " is reserved for histograms";
      }
    }
  }
}

TEST(Metrics, RpcErrorsHaveAZeroSeriesForEveryRpcAndCodeAtStartUp) {
  Metrics m;
  const auto families = Families(m);
  const prometheus::MetricFamily& errors = families.at("gpujoin_rpc_errors_total");
  std::set<std::pair<std::string, std::string>> seen;
  for (const prometheus::ClientMetric& series : errors.metric) {
    auto labels = LabelsOf(series);
    EXPECT_EQ(series.counter.value, 0) << labels["rpc"] << " " << labels["code"];
    seen.emplace(labels["rpc"], labels["code"]);
  }
  std::set<std::pair<std::string, std::string>> want;
  for (std::string_view rpc : kRpcNames) {
    for (std::string_view code : kRpcErrorCodes) want.emplace(rpc, code);
  }
  EXPECT_EQ(seen, want);
  // The codes the alert rules and dashboards single out are among them.
  const std::string text = Render(*m.registry());
  for (const char* code : {"INVALID_ARGUMENT", "NOT_FOUND", "RESOURCE_EXHAUSTED", "INTERNAL",
                           "UNKNOWN", "UNAVAILABLE", "UNAUTHENTICATED", "CANCELLED"}) {
    EXPECT_THAT(text, HasSubstr("gpujoin_rpc_errors_total{code=\"" + std::string(code) +
                                "\",rpc=\"Lookup\"} 0"));
  }
  // Duration, batches and rows too, for every RPC.
  for (const char* family :
       {"gpujoin_rpc_batches_total", "gpujoin_rpc_rows_total", "gpujoin_rpc_duration_seconds"}) {
    EXPECT_EQ(families.at(family).metric.size(), std::size(kRpcNames)) << family;
  }
  // And the five phases of a stream batch.
  EXPECT_EQ(families.at("gpujoin_rpc_phase_seconds").metric.size(), 5 * std::size(kRpcNames));
}

TEST(Metrics, APhaseIsObservedUnderItsRpcAndName) {
  Metrics m;
  m.ObserveRpcPhase("Lookup", Metrics::RpcPhase::kExecute, 0.00002);
  m.ObserveRpcPhase("Lookup", Metrics::RpcPhase::kWait, 0.5);
  const std::string text = Render(*m.registry());
  EXPECT_THAT(text, HasSubstr(
                        "gpujoin_rpc_phase_seconds_count{phase=\"execute\",rpc=\"Lookup\"} 1"));
  EXPECT_THAT(text, HasSubstr(
                        "gpujoin_rpc_phase_seconds_bucket{phase=\"execute\",rpc=\"Lookup\",le=\"2.5e-05\"} 1"));
  EXPECT_THAT(text, HasSubstr("gpujoin_rpc_phase_seconds_count{phase=\"wait\",rpc=\"Lookup\"} 1"));
  EXPECT_THAT(text, HasSubstr("gpujoin_rpc_phase_seconds_count{phase=\"decode\",rpc=\"Join\"} 0"));
}

TEST(Metrics, AnUnlistedErrorCodeIsCountedOnFirstUse) {
  Metrics m;
  m.CountRpcError("Join", "DATA_LOSS");
  m.CountRpcError("Join", "INTERNAL");
  const std::string text = Render(*m.registry());
  EXPECT_THAT(text, HasSubstr("gpujoin_rpc_errors_total{code=\"DATA_LOSS\",rpc=\"Join\"} 1"));
  EXPECT_THAT(text, HasSubstr("gpujoin_rpc_errors_total{code=\"INTERNAL\",rpc=\"Join\"} 1"));
  EXPECT_THAT(text, HasSubstr("gpujoin_rpc_errors_total{code=\"INTERNAL\",rpc=\"Hash\"} 0"));
}

TEST(Metrics, AnIndexHasEveryBuildResultFromItsFirstBuild) {
  auto backend = CpuBackend();
  Metrics m;
  m.SetIndex(*MakeVersion(*backend, "orders", 16));
  m.CountBuild("orders", BuildResult::kOk);
  const auto families = Families(m);
  std::map<std::string, double> by_result;
  for (const auto& series : families.at("gpujoin_index_builds_total").metric) {
    auto labels = LabelsOf(series);
    EXPECT_EQ(labels["index"], "orders");
    by_result[labels["result"]] = series.counter.value;
  }
  std::map<std::string, double> want;
  for (BuildResult result : kBuildResults) want[std::string(BuildResultName(result))] = 0;
  want["ok"] = 1;
  EXPECT_EQ(by_result, want);
}

TEST(Metrics, BuildInfoNamesVersionBackendAndDevice) {
  Metrics m;
  // Server::Start sets it; until then the family has no series and is not exported.
  EXPECT_FALSE(Families(m).contains("gpujoin_build_info"));
  m.SetBuildInfo("0.1.0", "cpu", "host");
  EXPECT_THAT(Render(*m.registry()),
              HasSubstr("gpujoin_build_info{backend=\"cpu\",device=\"host\",version=\"0.1.0\"} 1"));
  // A second call replaces the series: one build_info series per process.
  m.SetBuildInfo("0.2.0", "cuda", "NVIDIA H200");
  const auto info = Families(m).at("gpujoin_build_info");
  ASSERT_EQ(info.metric.size(), 1u);
  EXPECT_EQ(LabelsOf(info.metric[0]),
            (std::map<std::string, std::string>{
                {"backend", "cuda"}, {"device", "NVIDIA H200"}, {"version", "0.2.0"}}));
  EXPECT_EQ(info.metric[0].gauge.value, 1);
}

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
  EXPECT_THAT(text, HasSubstr("gpujoin_index_probe_bound{index=\"orders\"} 16"));
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
  EXPECT_THAT(text,
              HasSubstr("gpujoin_rpc_errors_total{code=\"INVALID_ARGUMENT\",rpc=\"Lookup\"} 2"));
}

// Regression: every failed build with a new name created a
// permanent gpujoin_index_builds_total{index=...} series (no drop can remove a
// name that was never live), so /metrics grew without bound.
TEST(Metrics, FailedBuildsOfNamesThatAreNotLiveCreateNoSeries) {
  Metrics m;
  const std::string before = Render(*m.registry());
  for (int i = 0; i < 1000; ++i) {
    m.CountBuild("never" + std::to_string(i), BuildResult::kInvalidArgument);
    m.CountBuild("never" + std::to_string(i), BuildResult::kResourceExhausted);
  }
  // A family without series is not collected at all.
  const auto families = Families(m);
  const auto builds = families.find("gpujoin_index_builds_total");
  EXPECT_TRUE(builds == families.end() || builds->second.metric.empty());
  const std::string after = Render(*m.registry());
  EXPECT_THAT(after, Not(HasSubstr("index=\"")));
  EXPECT_EQ(after.size(), before.size());
}

TEST(Metrics, FailedRebuildOfALiveIndexIsCountedAndRemovedByDrop) {
  auto backend = CpuBackend();
  Metrics m;
  m.SetIndex(*MakeVersion(*backend, "x", 16));
  m.CountBuild("x", BuildResult::kOk);
  m.CountBuild("x", BuildResult::kResourceExhausted);
  std::string text = Render(*m.registry());
  EXPECT_THAT(text, HasSubstr("gpujoin_index_builds_total{index=\"x\",result=\"ok\"} 1"));
  EXPECT_THAT(text,
              HasSubstr("gpujoin_index_builds_total{index=\"x\",result=\"resource_exhausted\"} 1"));
  m.RemoveIndex("x");
  EXPECT_THAT(Render(*m.registry()), Not(HasSubstr("index=\"x\"")));
  // A build of the dropped name that fails afterwards does not bring them back.
  m.CountBuild("x", BuildResult::kInvalidArgument);
  EXPECT_THAT(Render(*m.registry()), Not(HasSubstr("index=\"x\"")));
}

}  // namespace
}  // namespace gpujoin::server
