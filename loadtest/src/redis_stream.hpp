// The load tester's Redis target (--redis): the index's key -> value mapping
// loaded into Redis (keys and values as decimal text), lookups as pipelined
// MGETs on one connection per stream with latency from a batch's write to its
// reply, as the gRPC streams measure it, and the check of an MGET answer
// against a batch's expected lookup answer.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "redis_client.hpp"
#include "workload.hpp"

namespace gpujoin::loadtest {

/// What the server at `conn` is, for the report ("redis 7.0.15"); "redis" when
/// INFO does not say.
absl::StatusOr<std::string> RedisVersion(RedisConnection& conn);

/// What Redis holds for a key of value `value`: the decimal value, followed
/// with `payload` (--payload) by ",<int64>,<tag>" of its payload row.
std::string RedisValueOf(uint32_t value, bool payload);

/// Replaces the contents of the connection's database with `data`'s mapping
/// (uint32 keys and values, one value per key: multiplicity 1; RedisValueOf,
/// with the payload when `data` has --payload columns): FLUSHDB, then
/// MSET of `chunk_keys` pairs per command, several in flight, then DBSIZE must
/// equal the key count. FAILED_PRECONDITION when a reply is not what these
/// commands answer (an error reply, a wrong key count), with the reply.
absl::Status LoadIntoRedis(RedisConnection& conn, const BuildData& data, size_t chunk_keys = 8192);

/// Limits on the replies to MGETs of up to `batch_rows` keys of uint32 values
/// (RedisValueOf, with `payload` or without).
RespLimits MgetLimits(size_t batch_rows, bool payload = false);

/// One MGET answer of a Redis stream.
struct RedisResult {
  uint64_t batch_id = 0;                ///< position of its batch in the stream's writes
  std::chrono::nanoseconds latency{0};  ///< from the batch's write to its reply's arrival
  absl::Status error;                   ///< an error reply (UNKNOWN, with Redis's message)
  RespReply reply;                      ///< the reply otherwise
};

/// The next batch to send, or null when the stream should end.
using RedisBatchSource = std::function<const PoolBatch*()>;
/// Receives every answer in order, on the calling thread of RunRedisStream.
using RedisResultSink = std::function<void(RedisResult&&)>;

/// Runs one pipelined MGET stream on `conn`: a writer thread sends one
/// `MGET key...` of each source batch's uint32 keys while the calling thread
/// reads the replies, with at most `in_flight` batches unanswered. Returns OK
/// once the source ended and every batch was answered; else the connection's
/// error (the connection is then unusable).
absl::Status RunRedisStream(RedisConnection& conn, int in_flight, const RedisBatchSource& source,
                            const RedisResultSink& sink);

/// Checks an MGET answer to a lookup batch of a known mapping, as CheckLookup
/// checks a server's: every answer an array of one element per key, each a bulk
/// string or nil, with exactly `batch.hits` non-nil ones; with `full`, every row
/// against expected_found (nil for a missing key) and expected_values
/// (RedisValueOf the expected value, with `payload` or without). Returns the
/// first difference, or "".
std::string CheckRedisLookup(const PoolBatch& batch, const RespReply& reply, bool full,
                             bool payload = false);

}  // namespace gpujoin::loadtest
