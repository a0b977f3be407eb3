#include "gpujoin/server/config.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

namespace gpujoin::server {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<std::optional<ServerConfig>> Parse(std::vector<const char*> args,
                                                  std::string* out = nullptr) {
  args.insert(args.begin(), "gpujoind");
  std::ostringstream os;
  auto r = ParseServerFlags(static_cast<int>(args.size()), args.data(), os);
  if (out != nullptr) *out = os.str();
  return r;
}

TEST(ByteSize, SuffixesAreBinaryMultiples) {
  EXPECT_EQ(*ParseByteSize("123", "f"), 123u);
  EXPECT_EQ(*ParseByteSize("4K", "f"), 4096u);
  EXPECT_EQ(*ParseByteSize("512m", "f"), 512ull << 20);
  EXPECT_EQ(*ParseByteSize("2G", "f"), 2ull << 30);
  EXPECT_EQ(*ParseByteSize("1TiB", "f"), 1ull << 40);
  EXPECT_EQ(*ParseByteSize("3KB", "f"), 3072u);
}

TEST(ByteSize, MalformedValuesNameTheFlag) {
  for (const char* bad : {"", "G", "12X", "1.5G", "-1", "99999999999999999999", "17179869184G"}) {
    auto r = ParseByteSize(bad, "--device-memory-limit");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("--device-memory-limit")) << bad;
  }
}

TEST(ServerFlags, Defaults) {
  auto r = Parse({});
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->has_value());
  const ServerConfig& c = **r;
  EXPECT_EQ(c.listen, "127.0.0.1:50051");
  EXPECT_EQ(c.metrics_listen, "127.0.0.1:9464");
  EXPECT_EQ(c.backend, engine::BackendKind::kAuto);
  EXPECT_EQ(c.device_memory_limit, 0u);
  EXPECT_GT(c.max_message_bytes, 4u << 20);  // well above gRPC's default 4 MiB
  EXPECT_EQ(c.tls_client_ca, "");
  EXPECT_EQ(c.auth_scope, AuthScope::kRpc);  // health, reflection and /metrics open
}

TEST(ServerFlags, AllFlagsParse) {
  auto r = Parse({"--listen=0.0.0.0:1", "--metrics-listen=none", "--backend=cpu",
                  "--device-memory-limit=1G", "--max-message-bytes=64M", "--log-level=debug",
                  "--auth-token-file=/t", "--tls-cert=/c", "--tls-key=/k",
                  "--max-inflight-per-stream=3", "--max-inflight-batches=9"});
  ASSERT_TRUE(r.ok()) << r.status();
  const ServerConfig& c = **r;
  EXPECT_EQ(c.listen, "0.0.0.0:1");
  EXPECT_EQ(c.metrics_listen, "");
  EXPECT_EQ(c.backend, engine::BackendKind::kCpu);
  EXPECT_EQ(c.device_memory_limit, 1ull << 30);
  EXPECT_EQ(c.max_message_bytes, 64ull << 20);
  EXPECT_EQ(c.log_level, LogLevel::kDebug);
  EXPECT_EQ(c.auth_token_file, "/t");
  EXPECT_EQ(c.max_inflight_per_stream, 3u);
  EXPECT_EQ(c.max_inflight_batches, 9u);
}

TEST(ServerFlags, MutualTlsAndAuthScope) {
  auto r = Parse({"--tls-cert=/c", "--tls-key=/k", "--tls-client-ca=/ca", "--auth-token-file=/t",
                  "--auth-scope=all"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->tls_client_ca, "/ca");
  EXPECT_EQ((*r)->auth_scope, AuthScope::kAll);
  r = Parse({"--auth-token-file=/t", "--auth-scope=rpc"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->auth_scope, AuthScope::kRpc);
}

TEST(ServerFlags, MutualTlsAndAuthScopeErrorsNameTheFlag) {
  auto r = Parse({"--tls-client-ca=/ca"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("--tls-client-ca requires --tls-cert"));
  // --tls-key alone is the older error; the client CA needs both.
  EXPECT_THAT(Parse({"--tls-key=/k", "--tls-client-ca=/ca"}).status().message(),
              HasSubstr("--tls-key"));
  r = Parse({"--auth-token-file=/t", "--auth-scope=everything"});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("--auth-scope: 'everything' is not rpc or all"));
  r = Parse({"--auth-scope=all"});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("--auth-scope=all requires --auth-token-file"));
}

TEST(ServerFlags, RepeatedFlagTakesTheLastValue) {
  auto r = Parse({"--executor-threads=2", "--executor-threads=1"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->executor_threads, 1u);
}

TEST(ServerFlags, BadValuesAreRejectedPrecisely) {
  EXPECT_THAT(Parse({"--backend=tpu"}).status().message(), HasSubstr("backend"));
  EXPECT_THAT(Parse({"--log-level=loud"}).status().message(), HasSubstr("log-level"));
  EXPECT_THAT(Parse({"--tls-cert=/c"}).status().message(), HasSubstr("--tls-key"));
  EXPECT_THAT(Parse({"--max-message-bytes=3G"}).status().message(),
              HasSubstr("--max-message-bytes"));
  EXPECT_THAT(Parse({"--max-inflight-per-stream=0"}).status().message(), HasSubstr("at least 1"));
  EXPECT_FALSE(Parse({"--no-such-flag"}).ok());
}

// The CUDA backend's switches are flags that land in the engine's BackendOptions
// (the engine reads no environment variables).
TEST(ServerFlags, CudaBackendOptions) {
  const engine::BackendOptions defaults = (*Parse({}))->backend_options;
  EXPECT_EQ(defaults.cuda_build_path, engine::CudaBuildPath::kAuto);
  EXPECT_EQ(defaults.cuda_build_transient_max_bytes, 0u);
  EXPECT_FALSE(defaults.cuda_spin_wait);
  EXPECT_EQ(defaults.cuda_wait_poll_us, 0u);
  EXPECT_TRUE(defaults.cuda_join_graphs);
  EXPECT_TRUE(defaults.cuda_aggregate_graphs);
  EXPECT_TRUE(defaults.cuda_plan_graphs);
  auto r = Parse({"--cuda-build-path=tiles", "--cuda-build-transient-max-bytes=2G",
                  "--cuda-spin-wait", "--cuda-wait-poll-us=30", "--cuda-join-graphs=false",
                  "--cuda-aggregate-graphs=false", "--cuda-plan-graphs=false"});
  ASSERT_TRUE(r.ok()) << r.status();
  const engine::BackendOptions& o = (*r)->backend_options;
  EXPECT_EQ(o.cuda_build_path, engine::CudaBuildPath::kTiles);
  EXPECT_EQ(o.cuda_build_transient_max_bytes, 2ull << 30);
  EXPECT_TRUE(o.cuda_spin_wait);
  EXPECT_EQ(o.cuda_wait_poll_us, 30u);
  EXPECT_FALSE(o.cuda_join_graphs);
  EXPECT_FALSE(o.cuda_aggregate_graphs);
  EXPECT_FALSE(o.cuda_plan_graphs);
  EXPECT_EQ((*Parse({"--cuda-build-path=direct"}))->backend_options.cuda_build_path,
            engine::CudaBuildPath::kDirect);
}

TEST(ServerFlags, MaxConcurrentBuilds) {
  EXPECT_EQ((*Parse({}))->max_concurrent_builds, 16u);
  EXPECT_EQ((*Parse({"--max-concurrent-builds=3"}))->max_concurrent_builds, 3u);
  EXPECT_THAT(Parse({"--max-concurrent-builds=0"}).status().message(),
              HasSubstr("--max-concurrent-builds: must be at least 1"));
}

TEST(ServerFlags, MaxAggregateGroups) {
  EXPECT_EQ((*Parse({}))->max_aggregate_groups, uint64_t{1} << 22);
  EXPECT_EQ((*Parse({"--max-aggregate-groups=100"}))->max_aggregate_groups, 100u);
  EXPECT_THAT(Parse({"--max-aggregate-groups=0"}).status().message(),
              HasSubstr("--max-aggregate-groups: 0 is outside [1, 4294967295]"));
}

TEST(WalSync, ParsesEveryModeAndPrintsItBack) {
  using Mode = WalSyncPolicy::Mode;
  EXPECT_EQ(*ParseWalSync("always"), (WalSyncPolicy{Mode::kAlways, 0}));
  EXPECT_EQ(*ParseWalSync("off"), (WalSyncPolicy{Mode::kOff, 0}));
  EXPECT_EQ(*ParseWalSync("batch-ms:1"), (WalSyncPolicy{Mode::kBatch, 1}));
  EXPECT_EQ(*ParseWalSync("batch-ms:10000"), (WalSyncPolicy{Mode::kBatch, 10000}));
  EXPECT_EQ(*ParseWalSync("batch-ms:007"), (WalSyncPolicy{Mode::kBatch, 7}));
  for (const char* text : {"always", "off", "batch-ms:1", "batch-ms:250", "batch-ms:10000"}) {
    auto policy = ParseWalSync(text);
    ASSERT_TRUE(policy.ok()) << text;
    EXPECT_EQ(policy->ToString(), text);
    EXPECT_EQ(*ParseWalSync(policy->ToString()), *policy);
  }
  EXPECT_EQ(WalSyncPolicy{}.ToString(), "always");  // the default
}

TEST(WalSync, AnythingElseIsRefusedNamingTheFlag) {
  for (const char* bad :
       {"", "Always", "always ", "on", "none", "batch", "batch-ms", "batch-ms:", "batch-ms:0",
        "batch-ms:10001", "batch-ms:-5", "batch-ms:+5", "batch-ms:5ms", "batch-ms: 5",
        "batch-ms:1.5", "batch-ms:99999999999999999999", "batch-ms:4294967297"}) {
    auto r = ParseWalSync(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("--wal-sync")) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("always, batch-ms:N with N in [1, 10000]")) << bad;
  }
}

// --wal-sync and --wal-compact-bytes only mean something beside --data-dir (no
// log without it); --max-mutation-rows bounds every Mutate batch.
TEST(ServerFlags, MutationFlags) {
  const ServerConfig defaults = **Parse({"--data-dir=/d"});
  EXPECT_EQ(defaults.wal_sync, WalSyncPolicy{});
  EXPECT_EQ(defaults.wal_sync.mode, WalSyncPolicy::Mode::kAlways);
  EXPECT_EQ(defaults.wal_compact_bytes, uint64_t{64} << 20);
  EXPECT_EQ(defaults.max_mutation_rows, 4194304u);
  EXPECT_EQ((*Parse({}))->max_mutation_rows, 4194304u);

  auto r = Parse({"--data-dir=/d", "--wal-sync=batch-ms:5", "--wal-compact-bytes=1M",
                  "--max-mutation-rows=10"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->wal_sync, (WalSyncPolicy{WalSyncPolicy::Mode::kBatch, 5}));
  EXPECT_EQ((*r)->wal_compact_bytes, uint64_t{1} << 20);
  EXPECT_EQ((*r)->max_mutation_rows, 10u);
  EXPECT_EQ((*Parse({"--data-dir=/d", "--wal-sync=off"}))->wal_sync.mode,
            WalSyncPolicy::Mode::kOff);
  EXPECT_EQ((*Parse({"--max-mutation-rows=2147483647"}))->max_mutation_rows, 2147483647u);
  EXPECT_EQ((*Parse({"--max-mutation-rows=1"}))->max_mutation_rows, 1u);

  EXPECT_EQ(Parse({"--wal-sync=off"}).status().message(), "--wal-sync requires --data-dir");
  EXPECT_EQ(Parse({"--wal-compact-bytes=1M"}).status().message(),
            "--wal-compact-bytes requires --data-dir");
  EXPECT_THAT(Parse({"--data-dir=/d", "--wal-sync=sometimes"}).status().message(),
              HasSubstr("--wal-sync: \"sometimes\" is not a sync mode"));
  EXPECT_THAT(Parse({"--data-dir=/d", "--wal-sync=batch-ms:0"}).status().message(),
              HasSubstr("--wal-sync: \"batch-ms:0\" is outside the range"));
  EXPECT_THAT(Parse({"--data-dir=/d", "--wal-compact-bytes=0"}).status().message(),
              HasSubstr("--wal-compact-bytes: must be at least 1"));
  EXPECT_THAT(Parse({"--data-dir=/d", "--wal-compact-bytes=lots"}).status().message(),
              HasSubstr("--wal-compact-bytes"));
  for (const char* bad : {"--max-mutation-rows=0", "--max-mutation-rows=2147483648"}) {
    auto r = Parse({bad});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("--max-mutation-rows")) << bad;
  }
  EXPECT_THAT(Parse({"--max-mutation-rows=many"}).status().message(),
              HasSubstr("--max-mutation-rows"));

  std::string help;
  ASSERT_TRUE(Parse({"--help"}, &help).ok());
  EXPECT_THAT(help, HasSubstr("--wal-sync"));
  EXPECT_THAT(help, HasSubstr("--wal-compact-bytes"));
  EXPECT_THAT(help, HasSubstr("--max-mutation-rows"));
}

TEST(ServerFlags, DrainGrace) {
  EXPECT_EQ((*Parse({}))->drain_grace_seconds, 1.0);
  EXPECT_EQ((*Parse({"--drain-grace=0"}))->drain_grace_seconds, 0.0);
  EXPECT_THAT(Parse({"--drain-grace=-1"}).status().message(), HasSubstr("--drain-grace"));
  EXPECT_THAT(Parse({"--drain-grace=301"}).status().message(), HasSubstr("[0, 300]"));
}

TEST(ServerFlags, BadCudaOptionsAreRejectedPrecisely) {
  EXPECT_THAT(Parse({"--cuda-build-path=waves"}).status().message(),
              HasSubstr("--cuda-build-path: 'waves' is not auto, direct or tiles"));
  EXPECT_THAT(Parse({"--cuda-build-transient-max-bytes=lots"}).status().message(),
              HasSubstr("--cuda-build-transient-max-bytes"));
  EXPECT_THAT(Parse({"--cuda-wait-poll-us=2000000"}).status().message(),
              HasSubstr("--cuda-wait-poll-us: 2000000 is over 1000000"));
  EXPECT_FALSE(Parse({"--cuda-join-graphs=maybe"}).ok());
}

TEST(ServerFlags, InlineBatchRowsRange) {
  auto r = Parse({"--inline-batch-rows=0"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->inline_batch_rows, 0);
  EXPECT_EQ((*Parse({}))->inline_batch_rows, -1);  // per-backend default
  for (const char* bad : {"--inline-batch-rows=-2", "--inline-batch-rows=65537"}) {
    auto bad_r = Parse({bad});
    ASSERT_FALSE(bad_r.ok()) << bad;
    EXPECT_THAT(bad_r.status().message(), HasSubstr("--inline-batch-rows")) << bad;
    EXPECT_THAT(bad_r.status().message(), HasSubstr("[-1, 65536]")) << bad;
  }
}

TEST(ServerFlags, ExecutorThreadsDefaultPerBackend) {
  ServerConfig c;
  EXPECT_EQ(ResolveExecutorThreads(c, engine::BackendKind::kCpu, 1), 2u);
  EXPECT_EQ(ResolveExecutorThreads(c, engine::BackendKind::kCpu, 16), 16u);
  // CUDA: cores, but within [2, 16] (spinning waits, 16 pooled stream contexts).
  EXPECT_EQ(ResolveExecutorThreads(c, engine::BackendKind::kCuda, 1), 2u);
  EXPECT_EQ(ResolveExecutorThreads(c, engine::BackendKind::kCuda, 8), 8u);
  EXPECT_EQ(ResolveExecutorThreads(c, engine::BackendKind::kCuda, 16), 16u);
  EXPECT_EQ(ResolveExecutorThreads(c, engine::BackendKind::kCuda, 64), 16u);
  c.executor_threads = 5;
  EXPECT_EQ(ResolveExecutorThreads(c, engine::BackendKind::kCpu, 16), 5u);
  EXPECT_EQ(ResolveExecutorThreads(c, engine::BackendKind::kCuda, 16), 5u);
}

TEST(ServerFlags, InlineBatchRowsDefaultPerBackend) {
  ServerConfig c;
  EXPECT_EQ(ResolveInlineBatchRows(c, engine::BackendKind::kCpu), 4096u);
  EXPECT_EQ(ResolveInlineBatchRows(c, engine::BackendKind::kCuda), 0u);
  c.inline_batch_rows = 100;
  EXPECT_EQ(ResolveInlineBatchRows(c, engine::BackendKind::kCpu), 100u);
  // GPU work never runs on a gRPC thread, whatever the flag says.
  EXPECT_EQ(ResolveInlineBatchRows(c, engine::BackendKind::kCuda), 0u);
  c.inline_batch_rows = 0;
  EXPECT_EQ(ResolveInlineBatchRows(c, engine::BackendKind::kCpu), 0u);
}

TEST(ServerFlags, HelpPrintsAndReturnsNoConfig) {
  std::string out;
  auto r = Parse({"--help"}, &out);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
  EXPECT_THAT(out, HasSubstr("--device-memory-limit"));
}

TEST(ServerFlags, MaxResultBytes) {
  // 0: resolved by Server::Start (an eighth of physical memory, at most 4 GiB).
  EXPECT_EQ((*Parse({}))->max_result_bytes, 0u);
  EXPECT_EQ((*Parse({"--max-result-bytes=64K"}))->max_result_bytes, 65536u);
  EXPECT_EQ((*Parse({"--max-result-bytes=8G"}))->max_result_bytes, uint64_t{8} << 30);
  EXPECT_THAT(Parse({"--max-result-bytes=0"}).status().message(),
              HasSubstr("--max-result-bytes: must be at least 1"));
  EXPECT_THAT(Parse({"--max-result-bytes=lots"}).status().message(),
              HasSubstr("--max-result-bytes"));
}

TEST(ServerFlags, MaxPendingResponseBytes) {
  // 0: resolved by Server::Start (an eighth of physical memory, at most 2 GiB).
  EXPECT_EQ((*Parse({}))->max_pending_response_bytes, 0u);
  EXPECT_EQ((*Parse({"--max-pending-response-bytes=64M"}))->max_pending_response_bytes,
            uint64_t{64} << 20);
  EXPECT_EQ((*Parse({"--max-pending-response-bytes=1"}))->max_pending_response_bytes, 1u);
  EXPECT_THAT(Parse({"--max-pending-response-bytes=0"}).status().message(),
              HasSubstr("--max-pending-response-bytes: must be at least 1"));
  EXPECT_THAT(Parse({"--max-pending-response-bytes=lots"}).status().message(),
              HasSubstr("--max-pending-response-bytes"));
  std::string help;
  ASSERT_TRUE(Parse({"--help"}, &help).ok());
  EXPECT_THAT(help, HasSubstr("--max-pending-response-bytes"));
}

TEST(ServerFlags, MaxPendingResponseBytesDefault) {
  ServerConfig c;
  // An eighth of physical memory, at most 2 GiB.
  EXPECT_EQ(ResolveMaxPendingResponseBytes(c, uint64_t{8} << 30), uint64_t{1} << 30);
  EXPECT_EQ(ResolveMaxPendingResponseBytes(c, uint64_t{64} << 30), uint64_t{2} << 30);
  // Physical memory unknown (0): the 2 GiB cap.
  EXPECT_EQ(ResolveMaxPendingResponseBytes(c, 0), uint64_t{2} << 30);
  // Set: as given.
  c.max_pending_response_bytes = 12345;
  EXPECT_EQ(ResolveMaxPendingResponseBytes(c, uint64_t{64} << 30), 12345u);
}

TEST(ServerFlags, Devices) {
  auto none = Parse({});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE((*none)->devices.empty());
  EXPECT_FALSE((*none)->all_devices);
  auto two = Parse({"--devices", "1,0"});
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ((*two)->devices, (std::vector<int>{1, 0}));
  auto all = Parse({"--devices=all"});
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_TRUE((*all)->all_devices);
  EXPECT_TRUE((*all)->devices.empty());
  auto last = Parse({"--devices", "63"});
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ((*last)->devices, (std::vector<int>{63}));
  // One device and a shard: a shard on that device.
  auto shard = Parse({"--devices", "2", "--shard", "1/4"});
  ASSERT_TRUE(shard.ok()) << shard.status();
  EXPECT_EQ((*shard)->devices, (std::vector<int>{2}));
}

TEST(ServerFlags, BadDevicesAreRefusedNamingTheFlag) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"0,0", "names device 0 twice"},        {"0,x", "\"x\", which is not"},
      {"", "\"\", which is not"},              {",1", "\"\", which is not"},
      {"1,", "\"\", which is not"},            {"64", "past the last"},
      {"-1", "which is not"},                 {"007", "which is not"},
      {"ALL", "which is not"},                {" 1", "which is not"},
  };
  for (const auto& [text, why] : cases) {
    auto r = Parse({"--devices", text});
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(r.status().message(), HasSubstr("--devices")) << text;
    EXPECT_THAT(r.status().message(), HasSubstr(why)) << text << ": " << r.status();
  }
  auto group_shard = Parse({"--devices", "0,1", "--shard", "0/2"});
  ASSERT_FALSE(group_shard.ok());
  EXPECT_THAT(group_shard.status().message(), HasSubstr("--shard"));
  auto all_shard = Parse({"--devices", "all", "--shard", "0/2"});
  ASSERT_FALSE(all_shard.ok());
  auto all_cpu = Parse({"--devices", "all", "--backend", "cpu"});
  ASSERT_FALSE(all_cpu.ok());
  EXPECT_THAT(all_cpu.status().message(), HasSubstr("--devices all"));
  auto empty_listen = Parse({"--listen", ""});
  ASSERT_FALSE(empty_listen.ok());
  EXPECT_THAT(empty_listen.status().message(), HasSubstr("--listen"));
}

TEST(HostLimits, DefaultsComeFromTheHostAndAreSharedGivenValuesKept) {
  const uint64_t host = uint64_t{64} << 30;
  ServerConfig c;
  const ServerConfig one = ResolveHostLimits(c, host, 1);
  EXPECT_EQ(one.max_staged_bytes, host / 4);
  EXPECT_EQ(one.max_build_staged_bytes, host / 4);
  EXPECT_EQ(one.max_result_bytes, kDefaultMaxResultBytes);  // an eighth is above the cap
  EXPECT_EQ(one.max_pending_response_bytes, kDefaultMaxPendingResponseBytes);
  const ServerConfig four = ResolveHostLimits(c, host, 4);
  EXPECT_EQ(four.max_staged_bytes, host / 16);
  EXPECT_EQ(four.max_result_bytes, kDefaultMaxResultBytes / 4);
  EXPECT_EQ(four.max_pending_response_bytes, kDefaultMaxPendingResponseBytes / 4);
  c.max_staged_bytes = 1000;
  c.max_build_staged_bytes = 5000;
  c.max_result_bytes = 77;
  c.max_pending_response_bytes = 88;
  const ServerConfig given = ResolveHostLimits(c, host, 4);
  EXPECT_EQ(given.max_staged_bytes, 1000u);
  EXPECT_EQ(given.max_build_staged_bytes, 1000u);  // at most the staged total
  EXPECT_EQ(given.max_result_bytes, 77u);
  EXPECT_EQ(given.max_pending_response_bytes, 88u);
}

}  // namespace
}  // namespace gpujoin::server
