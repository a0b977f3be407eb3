// Reassembles the answer to one Join request from the response messages the
// server split it into (JoinResponse.more; JoinBatchResult.batch and
// first_pair): the client's JoinResult has one JoinPairs per left batch, as if
// one message had carried it. Internal to the client library (and its unit tests).
#pragma once

#include "absl/status/status.h"
#include "gpujoin/client/join.hpp"
#include "gpujoin/v1/gpujoin.pb.h"

namespace gpujoin::client::detail {

/// Feeds the parts of consecutive Join answers, in arrival order.
class JoinAssembler {
 public:
  /// Adds response `r` to `out`, the result of the request it answers (a fresh
  /// JoinResult for a request's first part, the same one for its later parts).
  /// The answer is complete when `r.more()` is false. In a single message the
  /// results are the batches in order (`batch`, when set, must be the
  /// position); over several, a result whose `batch` is the last one started
  /// continues it and must start at the pairs received so far (`first_pair`),
  /// and any other must start the next batch at pair 0. Count, capacity,
  /// overflow, statistics, found and probes come from a batch's first part;
  /// gathered columns are appended part by part and must have as many rows as
  /// the part has pairs; a batch whose parts have all arrived must hold
  /// min(count, capacity) pairs. Inconsistent parts are INTERNAL naming the
  /// batch and the numbers. An in-band error sets `out->error` and drops the results.
  absl::Status Add(const ::gpujoin::v1::JoinResponse& r, JoinResult* out);

  /// True between a part with `more` set and the answer's last part.
  bool in_progress() const { return continuing_; }

 private:
  bool continuing_ = false;
};

}  // namespace gpujoin::client::detail
