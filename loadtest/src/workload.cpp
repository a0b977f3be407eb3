#include "workload.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "payload.hpp"

namespace gpujoin::loadtest {
namespace {

// Values use a different bijection from keys so that an answer that echoes keys
// (or row numbers) is never right by accident.
constexpr uint32_t kValueSalt = 0x5bd1e995u;

uint64_t HitsFor(const WorkloadSpec& spec, size_t rows) {
  if (spec.build_keys == 0) return 0;
  return static_cast<uint64_t>(std::llround(spec.hit_ratio * static_cast<double>(rows)));
}

// The distinct keys of a batch whose rows have key indexes `index` (keys are a
// bijection of their index), and those that are hits (below `build_keys`).
void CountDistinct(std::vector<uint64_t> index, uint64_t build_keys, PoolBatch* b) {
  std::sort(index.begin(), index.end());
  index.erase(std::unique(index.begin(), index.end()), index.end());
  b->distinct_keys = index.size();
  b->distinct_hits = static_cast<uint64_t>(
      std::lower_bound(index.begin(), index.end(), build_keys) - index.begin());
}

bool SameFloat(float a, float b, bool approximate) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (!approximate) return a == b;
  return std::fabs(a - b) <= 1e-6f * std::max(1.0f, std::fabs(a));
}

}  // namespace

std::string PoolBatch::KeyText(size_t r) const {
  if (!key_columns.empty()) return key_columns.RowText(r);
  return absl::StrCat(keys64.empty() ? uint64_t{keys[r]} : keys64[r]);
}

const char* RpcName(Rpc rpc) {
  switch (rpc) {
    case Rpc::kLookup:
      return "lookup";
    case Rpc::kJoin:
      return "join";
    case Rpc::kAggregate:
      return "aggregate";
    case Rpc::kMutate:
      return "mutate";
  }
  return "?";
}

absl::Status ValidateWorkloadSpec(const WorkloadSpec& spec) {
  if (!(spec.hit_ratio >= 0.0 && spec.hit_ratio <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--hit-ratio must be in [0, 1], got ", spec.hit_ratio));
  }
  if (spec.keyspace == 0 || spec.keyspace > (uint64_t{1} << 32)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--keyspace must be in [1, 2^32], got ", spec.keyspace));
  }
  if (spec.build_keys > 0xffffffffu) {
    return absl::InvalidArgumentError(
        absl::StrCat("--build-keys must be below 2^32, got ", spec.build_keys));
  }
  if (spec.rpc != Rpc::kAggregate && spec.build_keys > 0) {
    if (spec.hit_ratio > 0 && spec.build_keys < 2) {
      // One row could be the reserved key; keep at least two candidates.
      return absl::InvalidArgumentError("--build-keys must be at least 2 for hits");
    }
    if (spec.hit_ratio < 1.0 && spec.keyspace <= spec.build_keys) {
      return absl::InvalidArgumentError(
          absl::StrCat("--keyspace (", spec.keyspace, ") must exceed --build-keys (",
                       spec.build_keys, ") to draw misses at --hit-ratio ", spec.hit_ratio));
    }
  }
  if (spec.rpc == Rpc::kAggregate && spec.key_kind != KeyKind::kUint32) {
    return absl::InvalidArgumentError(absl::StrCat("--key-type ", KeyKindName(spec.key_kind),
                                                   " does not apply to --rpc aggregate (group "
                                                   "keys are dense uint32)"));
  }
  if (spec.rpc == Rpc::kAggregate && spec.groups == 0) {
    return absl::InvalidArgumentError("--groups must be positive for --rpc aggregate");
  }
  if (spec.multiplicity == 0) {
    return absl::InvalidArgumentError("--multiplicity must be at least 1");
  }
  if (spec.select_payload && (spec.rpc != Rpc::kLookup || spec.build_keys == 0)) {
    return absl::InvalidArgumentError(
        "--payload shapes the index the load tester builds and its lookups: it needs "
        "--build-keys and --rpc lookup");
  }
  if (spec.select_payload && BuildRows(spec) > kMaxPayloadRows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--payload: at most ", kMaxPayloadRows, " index rows (their tags stay below 2^31 bytes), "
        "got ", BuildRows(spec)));
  }
  if (spec.multiplicity > 1 && (spec.build_keys == 0 || spec.rpc == Rpc::kAggregate)) {
    return absl::InvalidArgumentError(
        "--multiplicity shapes the index the load tester builds: it needs --build-keys and "
        "--rpc lookup or join");
  }
  if (BuildRows(spec) > 0xffffffffu) {
    return absl::InvalidArgumentError(absl::StrCat("--build-keys x --multiplicity is ",
                                                   BuildRows(spec),
                                                   " rows; an index holds fewer than 2^32"));
  }
  if (spec.rpc == Rpc::kMutate && (spec.multiplicity > 1 || spec.keep_all)) {
    return absl::InvalidArgumentError(
        "--rpc mutate upserts into a lowest_row index: on a keep_all index (--multiplicity) "
        "every upsert would append a row to its key's group");
  }
  if (spec.join_kind != client::JoinKind::kInner && spec.rpc != Rpc::kJoin) {
    return absl::InvalidArgumentError("--join-kind applies to --rpc join only");
  }
  return absl::OkStatus();
}

uint64_t BuildRows(const WorkloadSpec& spec) {
  return spec.build_keys * std::max<uint64_t>(spec.multiplicity, 1);
}

namespace {

bool Wide(const WorkloadSpec& spec) {
  return spec.key_kind == KeyKind::kUint64 && spec.rpc != Rpc::kAggregate;
}

// String and composite keys (KeyColumnData).
bool HasKeyColumns(const WorkloadSpec& spec) {
  return KeyTypeOf(spec.key_kind) == client::KeyType::kColumns && spec.rpc != Rpc::kAggregate;
}

}  // namespace

BuildData MakeBuildData(const WorkloadSpec& spec) {
  BuildData d;
  const uint64_t rows = BuildRows(spec);
  const bool columns = HasKeyColumns(spec);
  if (columns) {
    d.key_columns = KeyColumnData(spec.key_kind, rows);
  } else if (Wide(spec)) {
    d.keys64.resize(rows);
  } else {
    d.keys.resize(rows);
  }
  d.values.resize(rows);
  for (uint64_t r = 0; r < rows; ++r) {
    const uint64_t i = r % spec.build_keys;  // the key index of row r
    if (columns) {
      d.key_columns.Append(spec.key_kind, i, spec.seed);
    } else if (Wide(spec)) {
      d.keys64[r] = Mix64(i, spec.seed);
    } else {
      d.keys[r] = Mix(static_cast<uint32_t>(i), spec.seed);
    }
    d.values[r] = Mix(static_cast<uint32_t>(r), spec.seed ^ kValueSalt);
  }
  d.key_columns.Seal();
  if (spec.select_payload) d.payload = PayloadColumnsOf(d.values);
  return d;
}

uint64_t BatchPool::RequestBytes(const WorkloadSpec& spec) const {
  const KeyKind kind = spec.rpc == Rpc::kAggregate ? KeyKind::kUint32 : spec.key_kind;
  uint64_t bytes = uint64_t{KeyWireBytes(kind)} * batch_rows;
  if (spec.rpc == Rpc::kAggregate && spec.aggregate_op != client::AggregateOp::kCount) {
    bytes += uint64_t{4} * batch_rows;
  }
  if (spec.rpc == Rpc::kMutate) {
    if (explicit_values) bytes += uint64_t{4} * batch_rows;
    for (const client::Column& c : null_payload)
      bytes += c.data.size() + 4 * c.offsets.size() + c.validity.size();
  }
  return bytes;
}

size_t PoolSizeFor(size_t batch_rows, size_t budget_bytes, uint32_t pairs_per_row,
                   uint32_t key_bytes) {
  // keys, expected values and found flags (5 bytes per row), and 8 bytes per join pair.
  const size_t per_batch = std::max<size_t>(
      1, batch_rows * (key_bytes + 5 + 8 * size_t{std::max<uint32_t>(pairs_per_row, 1)}));
  return std::clamp<size_t>(budget_bytes / per_batch, 2, 64);
}

BatchPool MakeBatchPool(const WorkloadSpec& spec, size_t batch_rows, size_t count) {
  BatchPool pool;
  pool.batch_rows = batch_rows;
  pool.known_mapping = spec.build_keys > 0 && spec.rpc != Rpc::kAggregate;
  pool.multiplicity = std::max<uint32_t>(spec.multiplicity, 1);
  pool.keep_all = spec.keep_all;
  pool.join_kind = spec.join_kind;
  pool.select_payload = spec.select_payload;
  pool.batches.resize(count);
  // Mutate batches draw apart from the lookups beside them.
  std::mt19937_64 rng(spec.seed * 0x9e3779b97f4a7c15ull + batch_rows +
                      (spec.rpc == Rpc::kMutate ? 0x6d75746174650000ull : 0));
  const uint64_t hits = HitsFor(spec, batch_rows);
  std::vector<uint8_t> is_hit(batch_rows);

  const bool wide = Wide(spec);
  const bool columns = HasKeyColumns(spec);
  std::vector<uint64_t> key_index;  // each row's key index (Mutate: distinct counts)
  if (spec.rpc == Rpc::kMutate) {
    pool.explicit_values = spec.explicit_values;
    for (const client::PayloadColumnSpec& p : spec.payload) {
      client::Column c(p.name, p.type);
      for (size_t r = 0; r < batch_rows; ++r) c.AppendNull();
      pool.null_payload.push_back(std::move(c));
    }
  }
  for (PoolBatch& b : pool.batches) {
    if (columns) {
      b.key_columns = KeyColumnData(spec.key_kind, batch_rows);
    } else if (wide) {
      b.keys64.resize(batch_rows);
    } else {
      b.keys.resize(batch_rows);
    }
    if (spec.rpc == Rpc::kAggregate) {
      std::uniform_int_distribution<uint32_t> group(0, spec.groups - 1);
      std::uniform_int_distribution<int> small(0, 15);
      b.agg_values.resize(batch_rows);
      b.expected_counts.assign(spec.groups, 0);
      const bool count_only = spec.aggregate_op == client::AggregateOp::kCount;
      std::vector<double> sum(count_only ? 0 : spec.groups, 0.0);
      std::vector<float> mn(count_only ? 0 : spec.groups, INFINITY);
      std::vector<float> mx(count_only ? 0 : spec.groups, -INFINITY);
      for (size_t r = 0; r < batch_rows; ++r) {
        const uint32_t g = group(rng);
        const float v = static_cast<float>(small(rng));
        b.keys[r] = g;
        b.agg_values[r] = v;
        ++b.expected_counts[g];
        if (!count_only) {
          sum[g] += v;
          mn[g] = std::min(mn[g], v);
          mx[g] = std::max(mx[g], v);
        }
      }
      if (!count_only) {
        b.expected_agg.resize(spec.groups);
        for (uint32_t g = 0; g < spec.groups; ++g) {
          const uint32_t n = b.expected_counts[g];
          float out = 0.0f;
          switch (spec.aggregate_op) {
            case client::AggregateOp::kSum:
              out = static_cast<float>(sum[g]);
              break;
            case client::AggregateOp::kMin:
              out = n ? mn[g] : NAN;
              break;
            case client::AggregateOp::kMax:
              out = n ? mx[g] : NAN;
              break;
            case client::AggregateOp::kMean:
              out = n ? static_cast<float>(sum[g]) / static_cast<float>(n) : NAN;
              break;
            case client::AggregateOp::kCount:
              break;
          }
          b.expected_agg[g] = out;
        }
      }
      continue;
    }

    if (!pool.known_mapping) {
      // Never the reserved key, which a Mutate upsert may not carry. The key is
      // a bijection of the drawn index, so distinct indexes are distinct keys.
      std::uniform_int_distribution<uint64_t> any(0, spec.keyspace - 1);
      auto draw = [&](auto key_of, auto reserved) {
        for (;;) {
          const uint64_t i = any(rng);
          const auto k = key_of(i);
          if (k == reserved) continue;
          key_index.push_back(i);
          return k;
        }
      };
      key_index.clear();
      for (auto& k : b.keys)
        k = draw([](uint64_t i) { return static_cast<uint32_t>(i); }, kMissing);
      for (auto& k : b.keys64) {  // over the full 64-bit range
        k = draw([&](uint64_t i) { return Mix64(i, spec.seed); }, kMissing64);
      }
      if (columns) {
        for (size_t r = 0; r < batch_rows; ++r) {
          key_index.push_back(any(rng));
          b.key_columns.Append(spec.key_kind, key_index.back(), spec.seed);
        }
        b.key_columns.Seal();
      }
      if (spec.rpc == Rpc::kMutate) {
        CountDistinct(key_index, spec.build_keys, &b);
        // Values of an unknown mapping: any (only structure is checked).
        b.mapped_values.resize(batch_rows);
        for (size_t r = 0; r < batch_rows; ++r) {
          b.mapped_values[r] = Mix(static_cast<uint32_t>(key_index[r]), spec.seed ^ kValueSalt);
        }
      }
      continue;
    }

    // Exactly `hits` hit rows at shuffled positions.
    std::fill(is_hit.begin(), is_hit.end(), 0);
    std::fill(is_hit.begin(), is_hit.begin() + static_cast<ptrdiff_t>(hits), 1);
    std::shuffle(is_hit.begin(), is_hit.end(), rng);
    std::uniform_int_distribution<uint64_t> hit_row(0, spec.build_keys - 1);
    std::uniform_int_distribution<uint64_t> miss_row(std::min(spec.build_keys, spec.keyspace - 1),
                                                     spec.keyspace - 1);
    b.expected_values.resize(batch_rows);
    b.expected_found.resize(batch_rows);
    b.mapped_values.resize(batch_rows);
    b.hits = hits;
    key_index.assign(batch_rows, 0);
    const client::JoinKind kind = spec.join_kind;
    const bool all_matches =
        kind == client::JoinKind::kInner || kind == client::JoinKind::kLeftOuter;
    const bool unmatched =
        kind == client::JoinKind::kLeftOuter || kind == client::JoinKind::kLeftAnti;
    for (size_t r = 0; r < batch_rows; ++r) {
      if (is_hit[r]) {
        uint32_t i;
        bool reserved;
        do {  // the one row whose key is the reserved empty key was never inserted
          i = static_cast<uint32_t>(hit_row(rng));
          if (columns) {  // no key is reserved
            b.key_columns.Append(spec.key_kind, i, spec.seed);
            reserved = false;
          } else if (wide) {
            b.keys64[r] = Mix64(i, spec.seed);
            reserved = b.keys64[r] == kMissing64;
          } else {
            b.keys[r] = Mix(i, spec.seed);
            reserved = b.keys[r] == kMissing;
          }
        } while (reserved);
        b.expected_values[r] = Mix(i, spec.seed ^ kValueSalt);
        b.expected_found[r] = 1;
        b.mapped_values[r] = b.expected_values[r];
        key_index[r] = i;
        if (kind == client::JoinKind::kLeftAnti) continue;
        // The key's rows i, i + build_keys, ... in source order (semi: the first).
        const uint32_t group = all_matches ? pool.multiplicity : 1;
        for (uint32_t t = 0; t < group; ++t) {
          const auto row = static_cast<uint32_t>(i + uint64_t{t} * spec.build_keys);
          b.expected_left.push_back(static_cast<uint32_t>(r));
          b.expected_right.push_back(Mix(row, spec.seed ^ kValueSalt));
        }
      } else {
        uint64_t j;
        bool reserved;
        do {  // never the reserved key, which a Mutate upsert may not carry
          j = miss_row(rng);
          if (columns) {
            reserved = false;
          } else if (wide) {
            b.keys64[r] = Mix64(j, spec.seed);
            reserved = b.keys64[r] == kMissing64;
          } else {
            b.keys[r] = Mix(static_cast<uint32_t>(j), spec.seed);
            reserved = b.keys[r] == kMissing;
          }
        } while (reserved);
        if (columns) b.key_columns.Append(spec.key_kind, j, spec.seed);
        b.mapped_values[r] = Mix(static_cast<uint32_t>(j), spec.seed ^ kValueSalt);
        key_index[r] = j;
        b.expected_values[r] = kMissing;
        b.expected_found[r] = 0;
        if (unmatched) {
          b.expected_left.push_back(static_cast<uint32_t>(r));
          b.expected_right.push_back(kMissing);
        }
      }
    }
    b.key_columns.Seal();
    if (spec.rpc == Rpc::kMutate) CountDistinct(key_index, spec.build_keys, &b);
    if (spec.select_payload) {
      for (const client::Column& c : PayloadColumnsOf(b.expected_values, b.expected_found))
        b.payload_bytes += c.data.size() + 4 * c.offsets.size() + c.validity.size();
    }
  }
  return pool;
}

std::string CheckLookup(const BatchPool& pool, const PoolBatch& batch,
                        const client::LookupResult& result, bool full) {
  // Every answer: sizes and statistics (O(1)). Sampled answers: every row, with
  // memcmp against the expected columns when the mapping is known (cheap enough
  // not to slow the client), else row by row for structure.
  const size_t n = batch.rows();
  if (result.values.size() != n || result.found.size() != n) {
    return absl::StrCat("lookup answer has ", result.values.size(), " values and ",
                        result.found.size(), " found flags for ", n, " keys");
  }
  const auto& s = result.statistics;
  if (s.found + s.missing != n) {
    return absl::StrCat("statistics say found ", s.found, " + missing ", s.missing, " for ", n,
                        " keys");
  }
  if (pool.known_mapping && (pool.mutated ? s.found < batch.hits : s.found != batch.hits)) {
    return absl::StrCat("statistics say ", s.found, " keys found, expected ",
                        pool.mutated ? "at least " : "", batch.hits);
  }
  if (pool.keep_all && result.match_counts.size() != n) {
    return absl::StrCat("lookup answer has ", result.match_counts.size(), " match counts for ", n,
                        " keys");
  }
  if (pool.select_payload) {
    if (std::string e = CheckLookupPayload(batch, result, full); !e.empty()) return e;
  }
  if (!full) return "";
  if (pool.keep_all) {
    for (size_t r = 0; r < n; ++r) {
      const uint32_t m = result.match_counts[r];
      const bool right = pool.known_mapping ? m == (batch.expected_found[r] ? pool.multiplicity : 0)
                                            : (result.found[r] ? m >= 1 : m == 0);
      if (!right) {
        return absl::StrCat("row ", r, " key ", batch.KeyText(r), ": ", m,
                            " matches, found=", int{result.found[r]}, " (multiplicity ",
                            pool.multiplicity, ")");
      }
    }
  }
  if (pool.known_mapping) {
    if (std::memcmp(result.values.data(), batch.expected_values.data(), 4 * n) == 0 &&
        std::memcmp(result.found.data(), batch.expected_found.data(), n) == 0) {
      return "";
    }
    uint64_t found = 0;
    for (size_t r = 0; r < n; ++r) {
      found += result.found[r] == 1 ? 1 : 0;
      // A miss that a mutation inserted holds the value of its key index.
      const bool inserted = pool.mutated && !batch.expected_found[r] && result.found[r] == 1 &&
                            result.values[r] == batch.mapped_values[r];
      if (!inserted && (result.found[r] != batch.expected_found[r] ||
                        result.values[r] != batch.expected_values[r])) {
        return absl::StrCat(
            "row ", r, " key ", batch.KeyText(r), ": got found=", int{result.found[r]},
            " value=", result.values[r], ", expected found=", int{batch.expected_found[r]},
            " value=", batch.expected_values[r],
            pool.mutated
                ? absl::StrCat(" (or found with the mapped value ", batch.mapped_values[r], ")")
                : std::string());
      }
    }
    if (found != s.found) {
      return absl::StrCat("statistics say found ", s.found, " but ", found, " rows are found");
    }
    return "";
  }
  uint64_t found = 0;
  for (size_t r = 0; r < n; ++r) {
    if (result.found[r] > 1) {
      return absl::StrCat("row ", r, ": found flag is ", int{result.found[r]}, ", not 0 or 1");
    }
    if (!result.found[r] && result.values[r] != kMissing) {
      return absl::StrCat("row ", r, ": missing but value is ", result.values[r]);
    }
    found += result.found[r];
  }
  if (found != s.found) {
    return absl::StrCat("statistics say found ", s.found, " but ", found, " rows are found");
  }
  return "";
}

std::string CheckJoin(const BatchPool& pool, const PoolBatch& batch,
                      const client::JoinResult& result, bool full) {
  const size_t n = batch.rows();
  if (result.results.size() != 1) {
    return absl::StrCat("join answer has ", result.results.size(), " results for 1 left batch");
  }
  const client::JoinPairs& p = result.results[0];
  if (p.left_rows.size() != p.right_rows.size()) {
    return absl::StrCat(p.left_rows.size(), " left rows but ", p.right_rows.size(), " right rows");
  }
  if (p.overflow || p.count != p.left_rows.size()) {
    return absl::StrCat("count ", p.count, " capacity ", p.capacity, " overflow=", p.overflow,
                        " with ", p.left_rows.size(), " pairs");
  }
  const uint64_t found = p.statistics.found, missing = p.statistics.missing;
  if (found + missing != n) {
    return absl::StrCat("statistics say found ", found, " missing ", missing, " for ", n, " rows");
  }
  // The count each kind yields from the statistics: exact for semi and anti,
  // and for inner and left outer on a lowest_row index (one pair per row).
  const client::JoinKind kind = pool.join_kind;
  const bool repeats =
      pool.keep_all && (kind == client::JoinKind::kInner || kind == client::JoinKind::kLeftOuter);
  uint64_t least = found;  // inner
  if (kind == client::JoinKind::kLeftOuter) least = n;
  if (kind == client::JoinKind::kLeftAnti) least = missing;
  if (repeats ? p.count < least : p.count != least) {
    return absl::StrCat(p.count, " pairs of a ", std::string(client::JoinKindName(kind)),
                        " join, but statistics say found ", found, " missing ", missing);
  }
  if (pool.known_mapping && found != batch.hits) {
    return absl::StrCat("statistics say ", found, " keys found, expected ", batch.hits);
  }
  if (pool.known_mapping && p.count != batch.expected_left.size()) {
    return absl::StrCat(p.count, " pairs, expected ", batch.expected_left.size());
  }
  if (!full) return "";
  const size_t pairs = p.left_rows.size();
  if (pool.known_mapping &&
      (pairs == 0 ||
       (std::memcmp(p.left_rows.data(), batch.expected_left.data(), 4 * pairs) == 0 &&
        std::memcmp(p.right_rows.data(), batch.expected_right.data(), 4 * pairs) == 0))) {
    return "";
  }
  for (size_t k = 0; k < pairs; ++k) {
    const bool ordered = k == 0 || p.left_rows[k] > p.left_rows[k - 1] ||
                         (repeats && p.left_rows[k] == p.left_rows[k - 1]);
    if (p.left_rows[k] >= n || !ordered) {
      return absl::StrCat("pair ", k, ": left row ", p.left_rows[k],
                          " out of order or out of range [0, ", n, ")");
    }
    if (kind == client::JoinKind::kLeftAnti && p.right_rows[k] != kMissing) {
      return absl::StrCat("pair ", k, ": an anti pair with right row ", p.right_rows[k]);
    }
    if (pool.known_mapping &&
        (p.left_rows[k] != batch.expected_left[k] || p.right_rows[k] != batch.expected_right[k])) {
      return absl::StrCat("pair ", k, ": got [", p.left_rows[k], ", ", p.right_rows[k],
                          "], expected [", batch.expected_left[k], ", ", batch.expected_right[k],
                          "]");
    }
  }
  return "";
}

std::string CheckAggregate(const WorkloadSpec& spec, const BatchPool& pool, const PoolBatch& batch,
                           const client::AggregateResult& result, bool full) {
  (void)pool;
  const uint32_t g = spec.groups;
  if (result.rows != batch.keys.size()) {
    return absl::StrCat("answer covers ", result.rows, " rows, batch has ", batch.keys.size());
  }
  const bool count_only = spec.aggregate_op == client::AggregateOp::kCount;
  if (count_only) {
    if (result.counts.size() != g) {
      return absl::StrCat("answer has ", result.counts.size(), " counts for ", g, " groups");
    }
  } else {
    if (result.values.size() != g) {
      return absl::StrCat("answer has ", result.values.size(), " values for ", g, " groups");
    }
    if (!result.contributing_rows.empty() && result.contributing_rows.size() != g) {
      return absl::StrCat("answer has ", result.contributing_rows.size(), " contributing_rows for ",
                          g, " groups");
    }
  }
  if (!full) return "";
  const std::vector<uint32_t>& counts = count_only ? result.counts : result.contributing_rows;
  for (uint32_t k = 0; k < counts.size(); ++k) {
    if (counts[k] != batch.expected_counts[k]) {
      return absl::StrCat("group ", k, ": ", count_only ? "count " : "contributing rows ",
                          counts[k], ", expected ", batch.expected_counts[k]);
    }
  }
  if (!count_only) {
    const bool approximate = spec.aggregate_op == client::AggregateOp::kMean;
    for (uint32_t k = 0; k < g; ++k) {
      if (!SameFloat(result.values[k], batch.expected_agg[k], approximate)) {
        return absl::StrCat("group ", k, ": ",
                            std::string(client::AggregateOpName(spec.aggregate_op)), " ",
                            result.values[k], ", expected ", batch.expected_agg[k]);
      }
    }
  }
  return "";
}

}  // namespace gpujoin::loadtest
