// The client-side side of a mutation before anything is sent: the checks of a
// batch (CheckMutateBatch, CheckMutateBatchFor), the cutting of a whole input
// into requests that fit a message (PlanMutation), and the sums of what the
// requests applied (MutateSummary::Add).
#include <algorithm>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "gpujoin/client/mutate.hpp"
#include "gpujoin/common/status_macros.hpp"
#include "wire.hpp"

namespace gpujoin::client {
namespace {

// Bytes of a field header (a tag and a length varint) at most.
constexpr uint64_t kFieldHeader = 11;

// An upper bound on the bytes the delete keys [pos, pos + n) add to a request.
uint64_t DeleteBytes(const MutateBatch& b, uint64_t pos, uint64_t n) {
  return n == 0 ? 0 : detail::EncodedKeyBytes(b.delete_keys.subspan(pos, n));
}

// An upper bound on the bytes the upsert rows [pos, pos + n) (keys, values and
// every payload column) add to a request.
uint64_t UpsertBytes(const MutateBatch& b, uint64_t pos, uint64_t n) {
  if (n == 0) return 0;
  uint64_t bytes = detail::EncodedKeyBytes(b.upsert_keys.subspan(pos, n));
  if (!b.values.empty()) bytes += kFieldHeader + 4 * n;
  for (const ColumnView& p : b.payload) bytes += detail::EncodedColumnBytes(p.Slice(pos, n));
  return bytes;
}

// The most rows n <= max_rows from `pos` whose bytes(pos, n) fit in `budget`
// (bytes grows with n).
template <typename Bytes>
uint64_t Fit(const Bytes& bytes, uint64_t pos, uint64_t max_rows, uint64_t budget) {
  uint64_t lo = 0, hi = max_rows;
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo + 1) / 2;
    if (bytes(pos, mid) <= budget) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

std::string PayloadWhat(std::string_view what, size_t i, std::string_view name) {
  return absl::StrCat(std::string(what), " payload[", i, "] ('", std::string(name), "')");
}

}  // namespace

absl::Status CheckMutateBatch(const MutateBatch& b, std::string_view what) {
  const std::string w(what);
  GPUJOIN_RETURN_IF_ERROR(CheckKeys(b.upsert_keys, absl::StrCat(w, " upsert_keys")));
  GPUJOIN_RETURN_IF_ERROR(CheckKeys(b.delete_keys, absl::StrCat(w, " delete_keys")));
  const uint64_t rows = b.upsert_keys.size();
  if (!b.values.empty() && b.values.size() != rows) {
    return absl::InvalidArgumentError(
        absl::StrCat(w, ": values has ", b.values.size(), " rows but upsert_keys has ", rows));
  }
  std::set<std::string_view> names;
  for (size_t i = 0; i < b.payload.size(); ++i) {
    const ColumnView& v = b.payload[i];
    const std::string col = PayloadWhat(w, i, v.name);
    if (v.name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          w, " payload[", i, "]: a payload column needs the name of the index's column"));
    }
    if (!names.insert(v.name).second) {
      return absl::InvalidArgumentError(absl::StrCat(col, ": the column is given twice"));
    }
    if (v.length != rows) {
      return absl::InvalidArgumentError(
          absl::StrCat(col, " has ", v.length, " rows but upsert_keys has ", rows));
    }
    GPUJOIN_RETURN_IF_ERROR(CheckColumnView(v, col));
  }
  return absl::OkStatus();
}

absl::Status CheckMutateBatchFor(const MutateBatch& b, const IndexInfo& index,
                                 std::string_view what) {
  GPUJOIN_RETURN_IF_ERROR(CheckMutateBatch(b, what));
  const std::string w(what);
  GPUJOIN_RETURN_IF_ERROR(CheckKeysFor(b.upsert_keys, index.key_type, index.key_columns,
                                       absl::StrCat(w, " upsert_keys")));
  GPUJOIN_RETURN_IF_ERROR(CheckKeysFor(b.delete_keys, index.key_type, index.key_columns,
                                       absl::StrCat(w, " delete_keys")));
  if (b.upsert_keys.empty()) return absl::OkStatus();
  if (index.explicit_values && b.values.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(w, ": index '", index.name,
                     "' has explicit values: give one value per upsert row (values)"));
  }
  if (!index.explicit_values && !b.values.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(w, ": index '", index.name,
                     "' has row-ID values (explicit_values false): upserted rows get the next row "
                     "IDs (from ",
                     index.next_row_id, "); send no values"));
  }
  for (size_t i = 0; i < b.payload.size(); ++i) {
    const ColumnView& v = b.payload[i];
    auto it = std::find_if(index.payload.begin(), index.payload.end(),
                           [&](const PayloadColumnInfo& p) { return p.name == v.name; });
    if (it == index.payload.end()) {
      std::string names;
      for (const PayloadColumnInfo& p : index.payload) {
        absl::StrAppend(&names, names.empty() ? "" : ", ", p.name);
      }
      return absl::InvalidArgumentError(
          absl::StrCat(PayloadWhat(w, i, v.name), ": index '", index.name,
                       "' has no payload column '", std::string(v.name), "' (",
                       names.empty() ? "it stores no payload" : "payload: " + names, ")"));
    }
    if (it->type != v.type) {
      return absl::InvalidArgumentError(
          absl::StrCat(PayloadWhat(w, i, v.name), ": ", std::string(ColumnTypeName(v.type)),
                       " rows for a column index '", index.name, "' stores as ",
                       std::string(ColumnTypeName(it->type))));
    }
  }
  for (const PayloadColumnInfo& p : index.payload) {
    if (std::none_of(b.payload.begin(), b.payload.end(),
                     [&](const ColumnView& v) { return v.name == p.name; })) {
      return absl::InvalidArgumentError(
          absl::StrCat(w, ": payload column '", p.name, "' of index '", index.name,
                       "' is not given; an upsert carries every payload column of the index"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<MutatePlan> PlanMutation(const MutateBatch& changes, size_t max_rows,
                                        uint64_t max_bytes) {
  if (max_rows == 0) return absl::InvalidArgumentError("max_rows must be positive");
  GPUJOIN_RETURN_IF_ERROR(CheckMutateBatch(changes, "changes"));
  const uint64_t deletes = changes.delete_keys.size();
  const uint64_t upserts = changes.upsert_keys.size();
  auto delete_bytes = [&](uint64_t pos, uint64_t n) { return DeleteBytes(changes, pos, n); };
  auto upsert_bytes = [&](uint64_t pos, uint64_t n) { return UpsertBytes(changes, pos, n); };
  MutatePlan plan;
  uint64_t d = 0, u = 0;
  while (d < deletes || u < upserts) {
    uint64_t budget = max_bytes;
    uint64_t rows_left = max_rows;
    uint64_t nd = 0, nu = 0;
    if (d < deletes) {
      nd = Fit(delete_bytes, d, std::min(rows_left, deletes - d), budget);
      if (nd == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("delete row ", d, "'s key needs ", DeleteBytes(changes, d, 1),
                         " bytes, more than a Mutate request holds (", max_bytes,
                         ", from ConnectOptions::max_message_bytes)"));
      }
      budget -= DeleteBytes(changes, d, nd);
      rows_left -= nd;
    }
    // Upserts join a request only once every delete is sent: deletes apply first.
    if (d + nd == deletes && u < upserts && rows_left > 0) {
      nu = Fit(upsert_bytes, u, std::min(rows_left, upserts - u), budget);
      if (nu == 0 && nd == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("upsert row ", u, " (its key, value and payload) needs ",
                         UpsertBytes(changes, u, 1), " bytes, more than a Mutate request holds (",
                         max_bytes, ", from ConnectOptions::max_message_bytes)"));
      }
    }
    MutateBatch b;
    b.delete_keys = changes.delete_keys.subspan(d, nd);
    b.upsert_keys = changes.upsert_keys.subspan(u, nu);
    if (!changes.values.empty()) b.values = changes.values.subspan(u, nu);
    if (nu > 0) {
      for (const ColumnView& p : changes.payload) b.payload.push_back(p.Slice(u, nu));
    }
    MutateRequestResult range;
    range.delete_begin = d;
    range.delete_end = d + nd;
    range.upsert_begin = u;
    range.upsert_end = u + nu;
    plan.batches.push_back(std::move(b));
    plan.ranges.push_back(range);
    d += nd;
    u += nu;
  }
  return plan;
}

void MutateSummary::Add(MutateRequestResult&& request) {
  const MutateResult& r = request.result;
  if (r.error.ok()) {
    upsert_rows += r.upsert_rows;
    inserted_keys += r.inserted_keys;
    updated_keys += r.updated_keys;
    deleted_keys += r.deleted_keys;
    not_found_keys += r.not_found_keys;
    deleted_rows += r.deleted_rows;
    if (r.rehashed) ++rehashes;
    index_version = r.index_version;
    mutation_sequence = r.mutation_sequence;
    capacity = r.capacity;
    load_factor = r.load_factor;
    statistics = r.statistics;
    durable = (applied_requests == 0 || durable) && r.durable;
    ++applied_requests;
  }
  requests.push_back(std::move(request));
}

}  // namespace gpujoin::client
