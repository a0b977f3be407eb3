#include "join_assembler.hpp"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"
#include "wire.hpp"

namespace gpujoin::client::detail {

namespace {

// A batch whose parts have all arrived holds min(count, capacity) pairs (none
// when count-only, whose capacity is 0): a lost last part shows here.
absl::Status CheckComplete(const JoinResult& out, size_t batch) {
  const JoinPairs& jp = out.results[batch];
  const uint64_t want = std::min(jp.count, jp.capacity);
  if (jp.left_rows.size() != want) {
    return absl::InternalError(absl::StrCat("join answer holds ", jp.left_rows.size(),
                                            " pairs of batch ", batch, ", not min(count ", jp.count,
                                            ", capacity ", jp.capacity, ") = ", want));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status JoinAssembler::Add(const pb::JoinResponse& r, JoinResult* out) {
  const bool multi = continuing_ || r.more();
  if (continuing_ && r.index_version() != out->index_version) {
    return absl::InternalError(absl::StrCat("join answer parts ran on index versions ",
                                            out->index_version, " and ", r.index_version()));
  }
  continuing_ = r.more();
  out->index_version = r.index_version();
  out->mutation_sequence = r.mutation_sequence();
  if (r.has_error()) {
    out->error = FromBatchError(r.error());
    out->results.clear();
    return absl::OkStatus();
  }
  if (!out->error.ok()) return absl::OkStatus();  // an earlier part failed the batch
  for (int i = 0; i < r.results_size(); ++i) {
    const pb::JoinBatchResult& pr = r.results(i);
    const uint64_t started = out->results.size();
    const bool continues = multi && started > 0 && pr.batch() == started - 1;
    if (!continues) {
      if (pr.batch() != started && (multi || pr.batch() != 0)) {
        return absl::InternalError(absl::StrCat("join answer holds batch ", pr.batch(),
                                                " where batch ", started, " was expected"));
      }
      if (pr.first_pair() != 0) {
        return absl::InternalError(absl::StrCat("join answer starts batch ", started, " at pair ",
                                                pr.first_pair(), ", not 0"));
      }
      if (started > 0) GPUJOIN_RETURN_IF_ERROR(CheckComplete(*out, started - 1));
      out->results.emplace_back();
    }
    const uint64_t batch = out->results.size() - 1;
    JoinPairs& jp = out->results.back();
    if (continues && pr.first_pair() != jp.left_rows.size()) {
      return absl::InternalError(absl::StrCat("join answer continues batch ", batch, " at pair ",
                                              pr.first_pair(), " after ", jp.left_rows.size(),
                                              " pairs"));
    }
    std::vector<uint32_t> left, right;
    GPUJOIN_RETURN_IF_ERROR(Unpack(pr.left_rows(), "left_rows", &left));
    GPUJOIN_RETURN_IF_ERROR(Unpack(pr.right_rows(), "right_rows", &right));
    if (left.size() != right.size()) {
      return absl::InternalError(absl::StrCat("server sent ", left.size(), " left rows but ",
                                              right.size(), " right rows in batch ", batch));
    }
    const uint64_t part_pairs = left.size();
    if (!continues) {
      jp.count = pr.count();
      jp.capacity = pr.capacity();
      jp.overflow = pr.overflow();
      jp.statistics = ToQueryStatistics(pr.statistics());
      jp.found.assign(pr.found().begin(), pr.found().end());
      GPUJOIN_RETURN_IF_ERROR(Unpack(pr.probes(), "probes", &jp.probes));
      jp.left_rows = std::move(left);
      jp.right_rows = std::move(right);
    } else {
      jp.left_rows.insert(jp.left_rows.end(), left.begin(), left.end());
      jp.right_rows.insert(jp.right_rows.end(), right.begin(), right.end());
    }
    if (continues && pr.columns_size() != static_cast<int>(jp.columns.size())) {
      return absl::InternalError(absl::StrCat("join answer part of batch ", batch, " carries ",
                                              pr.columns_size(), " columns, its first part ",
                                              jp.columns.size()));
    }
    for (int c = 0; c < pr.columns_size(); ++c) {
      const std::string field = absl::StrCat("results[", i, "].columns[", c, "]");
      GPUJOIN_ASSIGN_OR_RETURN(Column col, DecodeColumn(pr.columns(c), field));
      if (col.length != part_pairs) {
        return absl::InternalError(absl::StrCat("server sent ", field, " of ", col.length,
                                                " rows for ", part_pairs, " pairs"));
      }
      if (!continues) {
        jp.columns.push_back(std::move(col));
      } else {
        if (col.name != jp.columns[c].name) {
          return absl::InternalError(absl::StrCat("join answer part of batch ", batch,
                                                  " carries column '", col.name, "' where '",
                                                  jp.columns[c].name, "' was expected"));
        }
        const absl::Status st = jp.columns[c].AppendRows(col.view());
        if (!st.ok()) return absl::InternalError(absl::StrCat(field, ": ", st.message()));
      }
    }
  }
  if (!r.more() && !out->results.empty()) {
    GPUJOIN_RETURN_IF_ERROR(CheckComplete(*out, out->results.size() - 1));
  }
  return absl::OkStatus();
}

}  // namespace gpujoin::client::detail
