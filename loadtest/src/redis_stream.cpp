#include "redis_stream.hpp"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "payload.hpp"

namespace gpujoin::loadtest {
namespace {

using Clock = std::chrono::steady_clock;

// A reply's shape for messages: its type, and the text of an error or string.
std::string Describe(const RespReply& r) {
  std::string out = RespTypeName(r.type);
  if (r.type == RespReply::Type::kError || r.type == RespReply::Type::kSimpleString) {
    absl::StrAppend(&out, " '", r.str.substr(0, 200), "'");
  } else if (r.type == RespReply::Type::kInteger) {
    absl::StrAppend(&out, " ", r.integer);
  } else if (r.type == RespReply::Type::kArray) {
    absl::StrAppend(&out, " of ", r.elements.size());
  }
  return out;
}

absl::Status ExpectOk(const absl::StatusOr<RespReply>& r, std::string_view command) {
  if (!r.ok()) return r.status();
  if (r->type == RespReply::Type::kSimpleString && r->str == "OK") return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("redis answered ", std::string(command), " with ", Describe(*r)));
}

}  // namespace

absl::StatusOr<std::string> RedisVersion(RedisConnection& conn) {
  auto info = conn.Call({"INFO", "server"});
  if (!info.ok()) return info.status();
  if (info->type != RespReply::Type::kBulkString) return std::string("redis");
  constexpr std::string_view kField = "redis_version:";
  const size_t at = info->str.find(kField);
  if (at == std::string::npos) return std::string("redis");
  const size_t begin = at + kField.size();
  const size_t end = info->str.find_first_of("\r\n", begin);
  return absl::StrCat("redis ", info->str.substr(begin, end - begin));
}

std::string RedisValueOf(uint32_t value, bool payload) {
  if (!payload) return absl::StrCat(value);
  return absl::StrCat(value, ",", PayloadInt64Of(value), ",", PayloadStringOf(value));
}

absl::Status LoadIntoRedis(RedisConnection& conn, const BuildData& data, size_t chunk_keys) {
  const bool payload = !data.payload.empty();
  if (absl::Status s = ExpectOk(conn.Call({"FLUSHDB"}), "FLUSHDB"); !s.ok()) return s;
  // MSETs are pipelined a few deep: Redis buffers its "+OK"s, so writing ahead
  // of the replies cannot deadlock, and the depth bounds what is in the air.
  constexpr size_t kDepth = 8;
  chunk_keys = std::max<size_t>(1, chunk_keys);
  size_t unanswered = 0;
  for (size_t at = 0; at < data.keys.size(); at += chunk_keys) {
    const size_t n = std::min(chunk_keys, data.keys.size() - at);
    RespCommandBuffer& out = conn.pending();
    out.Begin(1 + 2 * n);
    out.Arg("MSET");
    for (size_t i = at; i < at + n; ++i) {
      out.Arg(uint64_t{data.keys[i]});
      if (payload) {
        out.Arg(RedisValueOf(data.values[i], true));
      } else {
        out.Arg(uint64_t{data.values[i]});
      }
    }
    if (absl::Status s = conn.Flush(); !s.ok()) return s;
    if (++unanswered == kDepth) {
      if (absl::Status s = ExpectOk(conn.Read(), "MSET"); !s.ok()) return s;
      --unanswered;
    }
  }
  for (; unanswered > 0; --unanswered) {
    if (absl::Status s = ExpectOk(conn.Read(), "MSET"); !s.ok()) return s;
  }
  auto size = conn.Call({"DBSIZE"});
  if (!size.ok()) return size.status();
  if (size->type != RespReply::Type::kInteger ||
      size->integer != static_cast<int64_t>(data.keys.size())) {
    return absl::FailedPreconditionError(
        absl::StrCat("redis at ", conn.address(), " holds ", Describe(*size), " keys after ",
                     data.keys.size(), " were loaded (another client writing to it?)"));
  }
  return absl::OkStatus();
}

RespLimits MgetLimits(size_t batch_rows, bool payload) {
  RespLimits limits;
  limits.max_elements = std::max<size_t>(batch_rows, 1);
  // A uint32 value is at most 10 digits, with its payload at most 43 bytes
  // (10 + 1 + 20 + 1 + 11); an error reply is one line.
  limits.max_bulk_bytes = 64;
  limits.max_reply_bytes =
      (payload ? 56 : 16) * limits.max_elements + limits.max_line_bytes;
  limits.max_depth = 1;
  return limits;
}

absl::Status RunRedisStream(RedisConnection& conn, int in_flight, const RedisBatchSource& source,
                            const RedisResultSink& sink) {
  const size_t window = static_cast<size_t>(std::max(1, in_flight));
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Clock::time_point> sent;  // write time of every unanswered batch, in order
  bool writer_done = false;            // no more batches will be written
  bool reader_done = false;            // no more replies will be read
  absl::Status first_error;

  auto fail = [&](absl::Status s) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (first_error.ok()) first_error = std::move(s);
    }
    conn.Shutdown();  // wakes the other side from a blocked send or receive
    cv.notify_all();
  };

  std::thread writer([&] {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return sent.size() < window || reader_done || !first_error.ok(); });
        if (reader_done || !first_error.ok()) break;
      }
      const PoolBatch* batch = source();
      if (batch == nullptr) break;
      // Encoded before the clock starts, as the gRPC client encodes a request
      // before stamping its write.
      RespCommandBuffer& out = conn.pending();
      out.Begin(1 + batch->keys.size());
      out.Arg("MGET");
      for (uint32_t k : batch->keys) out.Arg(uint64_t{k});
      {
        std::lock_guard<std::mutex> lock(mu);
        sent.push_back(Clock::now());
      }
      cv.notify_all();
      if (absl::Status s = conn.Flush(); !s.ok()) {
        fail(std::move(s));
        break;
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      writer_done = true;
    }
    cv.notify_all();
  });

  uint64_t next_id = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return !sent.empty() || writer_done || !first_error.ok(); });
      if (!first_error.ok() || sent.empty()) break;  // failed, or written and all answered
    }
    auto reply = conn.Read();
    const Clock::time_point now = Clock::now();
    if (!reply.ok()) {
      fail(reply.status());
      break;
    }
    Clock::time_point t0;
    {
      std::lock_guard<std::mutex> lock(mu);
      t0 = sent.front();
      sent.pop_front();
    }
    cv.notify_all();
    RedisResult r;
    r.batch_id = next_id++;
    r.latency = std::chrono::duration_cast<std::chrono::nanoseconds>(now - t0);
    if (reply->type == RespReply::Type::kError) {
      r.error = absl::UnknownError(absl::StrCat("redis answered MGET with ", reply->str));
    } else {
      r.reply = *std::move(reply);
    }
    sink(std::move(r));
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    reader_done = true;
  }
  cv.notify_all();
  writer.join();
  std::lock_guard<std::mutex> lock(mu);
  return first_error;
}

std::string CheckRedisLookup(const PoolBatch& batch, const RespReply& reply, bool full,
                             bool payload) {
  const size_t n = batch.keys.size();
  if (reply.type != RespReply::Type::kArray || reply.elements.size() != n) {
    return absl::StrCat("MGET of ", n, " keys answered ", Describe(reply));
  }
  // Every answer: the shape and the hit count, in one pass (the reply was parsed
  // whole anyway).
  uint64_t found = 0;
  for (size_t r = 0; r < n; ++r) {
    const RespReply& e = reply.elements[r];
    if (e.type == RespReply::Type::kBulkString) {
      ++found;
    } else if (e.type != RespReply::Type::kNil) {
      return absl::StrCat("row ", r, " key ", batch.KeyText(r), ": MGET answered ", Describe(e));
    }
  }
  if (found != batch.hits) {
    return absl::StrCat("MGET found ", found, " keys, expected ", batch.hits);
  }
  if (!full) return "";
  for (size_t r = 0; r < n; ++r) {
    const RespReply& e = reply.elements[r];
    const bool want_found = batch.expected_found[r] != 0;
    const std::string want =
        want_found ? RedisValueOf(batch.expected_values[r], payload) : std::string("nil");
    if (e.is_nil() != !want_found || (want_found && e.str != want)) {
      return absl::StrCat("row ", r, " key ", batch.KeyText(r), ": got ",
                          e.is_nil() ? "nil" : absl::StrCat("'", e.str, "'"), ", expected ",
                          want_found ? absl::StrCat("'", want, "'") : want);
    }
  }
  return "";
}

}  // namespace gpujoin::loadtest
