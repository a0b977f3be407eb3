// gpujoind's snapshot flags: --data-dir off by default,
// --max-snapshot-bytes with suffixes and only beside --data-dir, the test-only
// delays hidden from --help.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "gpujoin/server/config.hpp"

namespace gpujoin::server {
namespace {

absl::StatusOr<std::optional<ServerConfig>> Parse(std::vector<std::string> args,
                                                  std::ostream& out) {
  args.insert(args.begin(), "gpujoind");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return ParseServerFlags(static_cast<int>(argv.size()), argv.data(), out);
}

TEST(SnapshotConfigTest, FlagsAndTheirChecks) {
  std::ostringstream out;
  auto none = Parse({}, out);
  ASSERT_TRUE(none.ok() && none->has_value());
  EXPECT_EQ((*none)->data_dir, "");
  EXPECT_EQ((*none)->max_snapshot_bytes, 0u);

  auto set = Parse({"--data-dir=/var/lib/gpujoin", "--max-snapshot-bytes=64M",
                    "--snapshot-test-write-delay-ms=5", "--snapshot-test-load-delay-ms=7"},
                   out);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ((*set)->data_dir, "/var/lib/gpujoin");
  EXPECT_EQ((*set)->max_snapshot_bytes, uint64_t{64} << 20);
  EXPECT_EQ((*set)->snapshot_test_write_delay_ms, 5u);
  EXPECT_EQ((*set)->snapshot_test_load_delay_ms, 7u);

  auto alone = Parse({"--max-snapshot-bytes=1G"}, out);
  EXPECT_TRUE(absl::IsInvalidArgument(alone.status()));
  EXPECT_EQ(alone.status().message(), "--max-snapshot-bytes requires --data-dir");
  auto bad = Parse({"--data-dir=/d", "--max-snapshot-bytes=lots"}, out);
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status()));
  EXPECT_NE(bad.status().message().find("--max-snapshot-bytes"), std::string::npos);
}

TEST(SnapshotConfigTest, HelpNamesTheFlagsButNotTheTestHooks) {
  std::ostringstream out;
  auto help = Parse({"--help"}, out);
  ASSERT_TRUE(help.ok());
  EXPECT_FALSE(help->has_value());
  EXPECT_NE(out.str().find("--data-dir"), std::string::npos);
  EXPECT_NE(out.str().find("--max-snapshot-bytes"), std::string::npos);
  EXPECT_EQ(out.str().find("--snapshot-test-"), std::string::npos) << out.str();
}

}  // namespace
}  // namespace gpujoin::server
