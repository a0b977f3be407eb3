// Join continuation: a JoinResponse larger than the server's max
// message size is sent as several messages with the same batch_id, `more` set on
// all but the last (the proto's JoinResponse comment and docs/api.md,
// "Continuation"). Each message carries results in batch order; a batch's pairs
// and gathered columns may be split over consecutive messages
// (JoinBatchResult.batch, first_pair), and count, capacity, overflow,
// statistics, found and probes travel in the batch's first part only.
// Appending each batch's parts in order gives the whole result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "gpujoin/v1/gpujoin.pb.h"

namespace gpujoin::server {

/// The messages one join's response is sent as.
class JoinParts {
 public:
  /// Plans the messages for `response`, a whole response as Operations::Join
  /// writes it (results in batch order, JoinBatchResult.batch set, first_pair 0).
  /// A response that fits in `max_message_bytes` (with room for its batch_id) is
  /// one message, unchanged; a larger one is cut into messages whose serialised
  /// size stays below `max_message_bytes` less the room Operations keeps for
  /// framing (min(4096, max_message_bytes / 2)). RESOURCE_EXHAUSTED naming the
  /// batch and the pair when one pair with its gathered values (or a batch's
  /// first part alone: its found and probes) does not fit in a message by itself.
  static absl::StatusOr<JoinParts> Plan(v1::JoinResponse response, uint64_t max_message_bytes);

  /// The most bytes a batch's first part may take in a message of its own: the
  /// message and result fields, `found_and_probes` bytes, and `columns` gathered
  /// columns (`variable_width` of them strings) whose names have `name_bytes`
  /// in all, before any pair. Plan refuses a batch whose first part exceeds the
  /// room of a message; Operations checks it before running the join.
  static uint64_t FirstPartBytes(uint64_t found_and_probes, size_t columns, uint64_t name_bytes,
                                 size_t variable_width);

  /// The bytes of one message Plan fills: `max_message_bytes` less the room kept
  /// for framing.
  static uint64_t MessageRoom(uint64_t max_message_bytes);

  /// Number of messages (at least 1).
  size_t size() const { return parts_.empty() ? 1 : parts_.size(); }

  /// Host bytes the plan may hold until its last message is written, counted
  /// against --max-pending-response-bytes: the response, and while a message is
  /// sealed that message and its serialised copy (for a one-message plan, the
  /// response handed over and its serialised copy).
  uint64_t HeldBytes() const;

  /// Message `k` < size(): its results, index_version and `more` (batch_id is
  /// the caller's). A one-message plan hands over the response itself (call it
  /// once); a split plan copies the message's share of the response.
  v1::JoinResponse Message(size_t k);

 private:
  /// A batch's pairs [first, first + pairs) in one message; `head` carries the
  /// batch's count, capacity, overflow, statistics, found and probes.
  struct Piece {
    int batch = 0;
    uint64_t first = 0;
    uint64_t pairs = 0;
    bool head = false;
  };

  v1::JoinResponse response_;
  std::vector<std::vector<Piece>> parts_;  // empty: one message, the response as it is
  uint64_t room_ = 0;                      // MessageRoom of a split plan
};

}  // namespace gpujoin::server
