// The load tester's RESP2 client: the reply parser on canned byte streams
// (every type, nil, replies split across reads at every byte, malformed and
// oversized input refused with a bounded buffer), command encoding, a
// connection to a scripted loopback peer (split replies, a closed peer, a
// silent one), and the check of MGET answers against a lookup batch.
#include "redis_client.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "redis_stream.hpp"
#include "workload.hpp"

namespace gpujoin::loadtest {
namespace {

using Type = RespReply::Type;

// Every whole reply of `bytes` fed at once; the test fails on a parse error.
std::vector<RespReply> ParseAll(RespParser& p, std::string_view bytes) {
  p.Feed(bytes);
  std::vector<RespReply> out;
  for (;;) {
    auto r = p.Next();
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok() || !r->has_value()) return out;
    out.push_back(std::move(**r));
  }
}

// The error status of the first reply of `bytes` (OK when it parses or needs more).
absl::Status FirstError(std::string_view bytes, RespLimits limits = {}) {
  RespParser p(limits);
  p.Feed(bytes);
  auto r = p.Next();
  return r.status();
}

constexpr std::string_view kMixed =
    "+OK\r\n-ERR wrong number of arguments\r\n:-42\r\n$5\r\nhe\r\nl\r\n$0\r\n\r\n$-1\r\n"
    "*-1\r\n*0\r\n*3\r\n$1\r\n7\r\n$-1\r\n*2\r\n:1\r\n+x\r\n";

void ExpectMixed(const std::vector<RespReply>& r) {
  ASSERT_EQ(r.size(), 9u);
  EXPECT_EQ(r[0].type, Type::kSimpleString);
  EXPECT_EQ(r[0].str, "OK");
  EXPECT_EQ(r[1].type, Type::kError);
  EXPECT_EQ(r[1].str, "ERR wrong number of arguments");
  EXPECT_EQ(r[2].type, Type::kInteger);
  EXPECT_EQ(r[2].integer, -42);
  EXPECT_EQ(r[3].type, Type::kBulkString);
  EXPECT_EQ(r[3].str, "he\r\nl");  // a bulk string is binary: CRLF inside is data
  EXPECT_EQ(r[4].type, Type::kBulkString);
  EXPECT_EQ(r[4].str, "");
  EXPECT_TRUE(r[5].is_nil());  // nil bulk string
  EXPECT_TRUE(r[6].is_nil());  // nil array
  EXPECT_EQ(r[7].type, Type::kArray);
  EXPECT_TRUE(r[7].elements.empty());
  ASSERT_EQ(r[8].type, Type::kArray);
  ASSERT_EQ(r[8].elements.size(), 3u);
  EXPECT_EQ(r[8].elements[0].str, "7");
  EXPECT_TRUE(r[8].elements[1].is_nil());
  ASSERT_EQ(r[8].elements[2].elements.size(), 2u);
  EXPECT_EQ(r[8].elements[2].elements[0].integer, 1);
  EXPECT_EQ(r[8].elements[2].elements[1].str, "x");
}

TEST(RespParser, ParsesEveryTypeAndNil) {
  RespParser p;
  ExpectMixed(ParseAll(p, kMixed));
  EXPECT_EQ(p.buffered(), 0u);
}

// A reply split at any byte, or fed one byte at a time, resumes where it stopped.
TEST(RespParser, ResumesRepliesSplitAcrossReads) {
  for (size_t cut = 0; cut <= kMixed.size(); ++cut) {
    SCOPED_TRACE(cut);
    RespParser p;
    std::vector<RespReply> got = ParseAll(p, kMixed.substr(0, cut));
    for (RespReply& r : ParseAll(p, kMixed.substr(cut))) got.push_back(std::move(r));
    ExpectMixed(got);
  }
  RespParser p;
  std::vector<RespReply> got;
  for (char c : kMixed) {
    for (RespReply& r : ParseAll(p, std::string_view(&c, 1))) got.push_back(std::move(r));
  }
  ExpectMixed(got);
}

TEST(RespParser, RefusesMalformedInput) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"?what\r\n", "unexpected RESP type byte"},
      {":12x\r\n", "bad RESP integer"},
      {":\r\n", "bad RESP integer"},
      {"$-2\r\n", "bad RESP bulk string length"},
      {"$abc\r\n", "bad RESP bulk string length"},
      {"$\r\n", "bad RESP bulk string length"},
      {"$99999999999999999999\r\n", "bad RESP bulk string length"},
      {"$3\r\nabcd\r\n", "not followed by CRLF"},
      {"*-2\r\n", "bad RESP array length"},
      {"*1x\r\n", "bad RESP array length"},
  };
  for (const auto& [bytes, message] : cases) {
    SCOPED_TRACE(bytes);
    const absl::Status s = FirstError(bytes);
    EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
    EXPECT_NE(s.message().find(message), std::string::npos) << s;
  }
}

// Every bound is checked against the declared size, before any byte of the
// value arrives: a broken peer cannot make the parser buffer or allocate more.
TEST(RespParser, RefusesWhatPassesALimit) {
  RespLimits limits;
  limits.max_bulk_bytes = 16;
  limits.max_line_bytes = 32;
  limits.max_elements = 4;
  limits.max_reply_bytes = 20;
  limits.max_depth = 2;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"$17\r\n", "bulk string of 17 bytes"},
      {"$1048577\r\n", "bulk string of 1048577 bytes"},
      {"*5\r\n", "array of 5 elements"},
      {"*2\r\n*3\r\n", "array of 3 elements"},  // 2 + 3 elements in one reply
      {"*1\r\n*1\r\n*1\r\n", "nested deeper than 2"},
      {"+" + std::string(40, 'a'), "line longer than 32 bytes"},  // no CRLF in sight
      {"*2\r\n$16\r\n0123456789abcdef\r\n$16\r\n", "more than 20 bytes"},
  };
  for (const auto& [bytes, message] : cases) {
    SCOPED_TRACE(bytes);
    const absl::Status s = FirstError(bytes, limits);
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
    EXPECT_NE(s.message().find(message), std::string::npos) << s;
  }
  // A huge declared bulk string is refused at its header, not awaited.
  RespParser p;
  p.Feed("$2000000000\r\n");
  EXPECT_EQ(p.Next().status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(RespParser, StaysFailedAfterAnError) {
  RespParser p;
  p.Feed("!\r\n");
  EXPECT_FALSE(p.Next().ok());
  p.Feed("+OK\r\n");
  EXPECT_FALSE(p.Next().ok());
}

TEST(RespParser, WaitsForTheRestOfAPartialReply) {
  RespParser p;
  p.Feed("*2\r\n$3\r\nab");
  auto r = p.Next();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->has_value());
  p.Feed("c\r\n$-1\r\n");
  r = p.Next();
  ASSERT_TRUE(r.ok() && r->has_value());
  ASSERT_EQ((*r)->elements.size(), 2u);
  EXPECT_EQ((*r)->elements[0].str, "abc");
  EXPECT_TRUE((*r)->elements[1].is_nil());
}

TEST(RespCommandBuffer, EncodesArraysOfBulkStrings) {
  RespCommandBuffer b;
  b.Command({"SET", "k", ""});
  b.Begin(3);
  b.Arg("MGET");
  b.Arg(uint64_t{0});
  b.Arg(uint64_t{4294967295});
  EXPECT_EQ(b.data(),
            "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n"
            "*3\r\n$4\r\nMGET\r\n$1\r\n0\r\n$10\r\n4294967295\r\n");
}

TEST(SplitHostPort, AcceptsHostPortOnly) {
  std::string host, port;
  EXPECT_TRUE(SplitHostPort("localhost:6379", "--redis", &host, &port).ok());
  EXPECT_EQ(host, "localhost");
  EXPECT_EQ(port, "6379");
  EXPECT_TRUE(SplitHostPort("[::1]:7000", "--redis", &host, &port).ok());
  EXPECT_EQ(host, "::1");
  for (const char* bad : {"localhost", ":6379", "host:", "host:63x9"}) {
    EXPECT_EQ(SplitHostPort(bad, "--redis", &host, &port).code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

// A loopback peer that accepts one connection and runs `script` on it.
class ScriptedPeer {
 public:
  explicit ScriptedPeer(std::function<void(int fd)> script) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(listen(listen_fd_, 1), 0);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    address_ = absl::StrCat("127.0.0.1:", ntohs(a.sin_port));
    thread_ = std::thread([this, script = std::move(script)] {
      const int fd = accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) return;
      script(fd);
      close(fd);
    });
  }
  ~ScriptedPeer() {
    thread_.join();
    close(listen_fd_);
  }
  const std::string& address() const { return address_; }

 private:
  int listen_fd_ = -1;
  std::string address_;
  std::thread thread_;
};

// Reads until `n` bytes came (or the peer closed).
std::string ReadBytes(int fd, size_t n) {
  std::string got;
  char buf[256];
  while (got.size() < n) {
    const ssize_t k = read(fd, buf, std::min(sizeof buf, n - got.size()));
    if (k <= 0) break;
    got.append(buf, static_cast<size_t>(k));
  }
  return got;
}

void WriteSlowly(int fd, const std::vector<std::string_view>& pieces) {
  for (std::string_view p : pieces) {
    ASSERT_EQ(write(fd, p.data(), p.size()), static_cast<ssize_t>(p.size()));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

TEST(RedisConnection, ReadsRepliesArrivingInPieces) {
  constexpr std::string_view kCommand = "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
  ScriptedPeer peer([&](int fd) {
    EXPECT_EQ(ReadBytes(fd, kCommand.size() * 2), std::string(kCommand) + std::string(kCommand));
    WriteSlowly(fd, {"$", "5\r", "\nhel", "lo\r\n*2\r\n:7", "\r\n$-1\r", "\n"});
  });
  auto conn = RedisConnection::Connect(peer.address());
  ASSERT_TRUE(conn.ok()) << conn.status();
  (*conn)->pending().Command({"GET", "k"});
  (*conn)->pending().Command({"GET", "k"});
  ASSERT_TRUE((*conn)->Flush().ok());
  auto a = (*conn)->Read();
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->str, "hello");
  auto b = (*conn)->Read();
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(b->elements.size(), 2u);
  EXPECT_EQ(b->elements[0].integer, 7);
  EXPECT_TRUE(b->elements[1].is_nil());
}

TEST(RedisConnection, AClosedPeerIsUnavailableAndASilentOneTimesOut) {
  {
    ScriptedPeer peer([](int fd) { WriteSlowly(fd, {"$5\r\nhe"}); });
    auto conn = RedisConnection::Connect(peer.address());
    ASSERT_TRUE(conn.ok()) << conn.status();
    const auto r = (*conn)->Read();
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
    EXPECT_NE(r.status().message().find("closed the connection"), std::string::npos);
  }
  {
    ScriptedPeer peer([](int fd) { ReadBytes(fd, 1 << 20); });  // reads until we close
    RedisOptions options;
    options.io_timeout = std::chrono::milliseconds(100);
    auto conn = RedisConnection::Connect(peer.address(), options);
    ASSERT_TRUE(conn.ok()) << conn.status();
    const auto r = (*conn)->Call({"PING"});
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
    conn->reset();  // closes, so the peer's read ends
  }
  {
    // A peer announcing a bulk string past the limit is refused at the header.
    ScriptedPeer peer([](int fd) { WriteSlowly(fd, {"$999999999\r\n"}); });
    auto conn = RedisConnection::Connect(peer.address());
    ASSERT_TRUE(conn.ok()) << conn.status();
    EXPECT_EQ((*conn)->Read().status().code(), absl::StatusCode::kResourceExhausted);
  }
}

TEST(RedisConnection, NobodyListeningIsUnavailable) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  const std::string address =
      absl::StrCat("127.0.0.1:", ntohs(a.sin_port));  // bound, not listening
  const auto conn = RedisConnection::Connect(address);
  EXPECT_EQ(conn.status().code(), absl::StatusCode::kUnavailable) << conn.status();
  close(fd);
}

// The MGET reply a correct Redis gives `b`.
RespReply RightMget(const PoolBatch& b) {
  RespReply r;
  r.type = Type::kArray;
  for (size_t i = 0; i < b.rows(); ++i) {
    RespReply e;
    if (b.expected_found[i]) {
      e.type = Type::kBulkString;
      e.str = absl::StrCat(b.expected_values[i]);
    }
    r.elements.push_back(std::move(e));
  }
  return r;
}

TEST(CheckRedisLookup, AcceptsTheRightAnswerAndCatchesWrongOnes) {
  WorkloadSpec spec;
  spec.build_keys = 1000;
  spec.hit_ratio = 0.7;
  const BatchPool pool = MakeBatchPool(spec, 64, 2);
  const PoolBatch& b = pool.batches[0];
  size_t hit = 0, miss = 0;
  while (!b.expected_found[hit]) ++hit;
  while (b.expected_found[miss]) ++miss;
  const RespReply right = RightMget(b);
  EXPECT_EQ(CheckRedisLookup(b, right, true), "");

  RespReply wrong_value = right;
  wrong_value.elements[hit].str = absl::StrCat(b.expected_values[hit] + 1);
  EXPECT_EQ(CheckRedisLookup(b, wrong_value, false), "");  // sampled out: shape only
  EXPECT_NE(CheckRedisLookup(b, wrong_value, true).find(absl::StrCat("row ", hit)),
            std::string::npos);

  RespReply not_a_number = right;
  not_a_number.elements[hit].str += "x";
  EXPECT_NE(CheckRedisLookup(b, not_a_number, true), "");

  // A hit answered nil and a miss answered found: the hit count still matches,
  // so only the full check sees it.
  RespReply swapped = right;
  std::swap(swapped.elements[hit], swapped.elements[miss]);
  EXPECT_EQ(CheckRedisLookup(b, swapped, false), "");
  EXPECT_NE(CheckRedisLookup(b, swapped, true).find("expected"), std::string::npos);

  RespReply lost_hit = right;
  lost_hit.elements[hit] = RespReply();
  EXPECT_NE(CheckRedisLookup(b, lost_hit, false).find("MGET found"), std::string::npos);

  RespReply short_answer = right;
  short_answer.elements.pop_back();
  EXPECT_NE(CheckRedisLookup(b, short_answer, false).find("MGET of 64 keys"), std::string::npos);

  RespReply integer_inside = right;
  integer_inside.elements[miss].type = Type::kInteger;
  EXPECT_NE(CheckRedisLookup(b, integer_inside, false).find("integer"), std::string::npos);

  RespReply error;
  error.type = Type::kError;
  error.str = "ERR boom";
  EXPECT_NE(CheckRedisLookup(b, error, false).find("ERR boom"), std::string::npos);
}

// The limits of an MGET answer admit a whole right answer of the batch size
// and refuse one element more.
TEST(MgetLimits, AdmitOneBatchAndNoMore) {
  WorkloadSpec spec;
  spec.build_keys = 100;
  spec.hit_ratio = 1.0;
  const BatchPool pool = MakeBatchPool(spec, 50, 1);
  std::string bytes = "*50\r\n";
  for (uint32_t v : pool.batches[0].expected_values) {
    const std::string text = absl::StrCat(v);
    absl::StrAppend(&bytes, "$", text.size(), "\r\n", text, "\r\n");
  }
  RespParser p(MgetLimits(50));
  p.Feed(bytes);
  auto r = p.Next();
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ(CheckRedisLookup(pool.batches[0], **r, true), "");
  EXPECT_EQ(FirstError("*51\r\n", MgetLimits(50)).code(), absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace gpujoin::loadtest
