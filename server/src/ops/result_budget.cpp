// The bytes a response or a result may take: --max-message-bytes less framing
// for one response message, --max-result-bytes for the host bytes of a whole
// result, and how the selected string columns of a lookup or a join share what
// is left.
#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"
#include "ops/operations.hpp"
#include "ops/result_budget.hpp"

namespace gpujoin::server {

uint64_t Operations::ResponseLimit() const {
  // Leave room for the response's other fields and framing.
  return state_.config.max_message_bytes -
         std::min<uint64_t>(4096, state_.config.max_message_bytes / 2);
}

uint64_t Operations::ResultLimit() const {
  return state_.config.max_result_bytes == 0 ? kDefaultMaxResultBytes
                                             : state_.config.max_result_bytes;
}

absl::Status Operations::CheckResponseSize(uint64_t bytes, std::string_view what) const {
  const uint64_t limit = ResponseLimit();
  if (bytes > limit) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(what), " would need a ", bytes, " byte response, more than the ", limit,
        " bytes allowed by --max-message-bytes=", state_.config.max_message_bytes,
        "; split the batch"));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> Operations::CheckLookup(const IndexVersion& version,
                                                 const v1::LookupRequest& request, uint64_t rows,
                                                 std::span<const SelectedColumn> selected) const {
  const uint32_t capacity = version.index->spec().capacity;
  if (request.max_probe_count() > capacity) {
    return absl::InvalidArgumentError(absl::StrCat("max_probe_count: ", request.max_probe_count(),
                                                   " exceeds the capacity ", capacity,
                                                   " of index \"", version.name, "\""));
  }
  const engine::KeyType key_type = version.index->key_type();
  const std::string what = absl::StrCat(key_type == engine::KeyType::kUint64    ? "keys64"
                                        : key_type == engine::KeyType::kColumns ? "key_columns"
                                                                                : "keys",
                                        ": ", rows, " rows");
  const uint64_t fixed =
      rows * (5 + (request.want_probes() ? 4 : 0) + (request.want_match_counts() ? 4 : 0)) +
      GatheredFixedBytes(selected, rows);
  // The columns' own fields count against the message, not the result bytes.
  const uint64_t headers = GatheredHeaderBytes(selected);
  GPUJOIN_RETURN_IF_ERROR(CheckResponseSize(
      fixed + headers,
      selected.empty() ? what : absl::StrCat(what, " gathering ", selected.size(), " columns")));
  const uint64_t result_limit = ResultLimit();
  if (fixed > result_limit) {
    return absl::ResourceExhaustedError(absl::StrCat(
        what, " gathering ", selected.size(), " columns need ", fixed,
        " bytes of results, above --max-result-bytes=", result_limit, "; split the batch"));
  }
  const size_t strings = VariableWidthCount(selected);
  if (strings == 0) return uint64_t{0};
  // The selected string columns share what is left of the response equally.
  const uint64_t room = std::min(ResponseLimit() - headers - fixed, result_limit - fixed);
  return std::min<uint64_t>(0x7fffffff, room / strings);
}

JoinResultBudget::JoinResultBudget(std::span<const SelectedColumn> selected, uint64_t limit,
                                   uint64_t batches, uint64_t key_columns)
    : selected_(selected),
      limit_(limit),
      batches_(batches),
      batch_objects_(kJoinBatchObjectBytes + key_columns * kKeyColumnObjectBytes),
      column_objects_(GatheredObjectBytes(selected)) {}

uint64_t JoinResultBudget::PairBytes(uint64_t n) const {
  return n * 8 + GatheredFixedBytes(selected_, n);
}

absl::Status JoinResultBudget::Refuse(uint64_t bytes) const {
  return absl::ResourceExhaustedError(absl::StrCat(
      "batches: the results of ", batches_, " batches (pair capacities",
      selected_.empty() ? "" : absl::StrCat(" and ", selected_.size(), " gathered columns"),
      ") need ", bytes, " bytes, above --max-result-bytes=", limit_,
      "; lower the capacities (count_only sizes them), select fewer columns or split the "
      "request"));
}

absl::Status JoinResultBudget::CheckBatchObjects() const {
  // Host objects every batch costs whatever its rows: its buffers, engine batch
  // and response result. An empty batch is a few request bytes, so these, not
  // the message size, must bound a request of many batches.
  const uint64_t batch_objects = batches_ * batch_objects_;
  if (batch_objects > limit_) return Refuse(batch_objects);
  return absl::OkStatus();
}

void JoinResultBudget::AddBatch(bool count_only, uint64_t head, uint64_t allocated) {
  bytes_ += batch_objects_ + (count_only ? 0 : column_objects_) + head + PairBytes(allocated);
}

absl::Status JoinResultBudget::Check() const {
  if (bytes_ > limit_) return Refuse(bytes_);
  return absl::OkStatus();
}

uint64_t JoinResultBudget::Grow(uint64_t allocated, uint64_t wanted) {
  if (wanted == allocated) return allocated;
  const uint64_t floor = PairBytes(allocated);
  uint64_t lo = allocated, hi = wanted;  // the most pairs that fit
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo + 1) / 2;
    if (bytes_ + PairBytes(mid) - floor <= limit_) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  bytes_ += PairBytes(lo) - floor;
  return lo;
}

uint64_t JoinResultBudget::StringShare(uint64_t string_outputs) const {
  if (string_outputs == 0) return 0;
  return std::min<uint64_t>(0x7fffffff, (limit_ - bytes_) / string_outputs);
}

}  // namespace gpujoin::server
