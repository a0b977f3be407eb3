// gpujoin-loadtest --payload (lookups of an index the load tester builds): the
// index has two payload columns, an INT64 and a short STRING, whose rows derive
// from each row's value, and every lookup selects both; an answer's payload row
// is checked against the value it found. The echo service answers the same
// columns and the Redis target holds them after the value.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gpujoin/client/client.hpp"
#include "workload.hpp"

namespace gpujoin::loadtest {

/// --payload: the two payload columns of the load tester's index, selected by
/// every lookup, and their rows for a row of value `value` (a tag of 4 to 11
/// characters).
inline constexpr char kPayloadInt64Name[] = "lt_int64";
inline constexpr char kPayloadStringName[] = "lt_tag";
/// Index rows --payload allows: their tags (at most 11 bytes) stay below 2^31 bytes.
inline constexpr uint64_t kMaxPayloadRows = 150'000'000;
int64_t PayloadInt64Of(uint32_t value);
std::string PayloadStringOf(uint32_t value);

/// The two --payload columns for rows of `values`, null where `found` is 0
/// (found may be empty: every row valid). The echo service answers with them.
std::vector<client::Column> PayloadColumnsOf(std::span<const uint32_t> values,
                                             std::span<const uint8_t> found = {});

/// Checks the two --payload columns of a Lookup answer to `batch`: names,
/// types and lengths; with `full` every row against the value the answer found
/// (PayloadInt64Of, PayloadStringOf; null where missing). "" when right.
std::string CheckLookupPayload(const PoolBatch& batch, const client::LookupResult& result,
                               bool full);

}  // namespace gpujoin::loadtest
