// The pipelined bidirectional-stream loop shared by Lookup, Join, Aggregate,
// Hash and Mutate: a writer thread pulls batches from the source and writes
// them while the calling thread reads answers, with at most max_in_flight
// batches outstanding. Internal to the client library.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gpujoin/client/stream_options.hpp"

namespace gpujoin::client::detail {

/// The `more` of RunStream for calls whose every answer is one message.
inline constexpr auto kWhole = [](const auto&) { return false; };

/// Runs one stream to completion.
/// encode(const Batch&, uint64_t batch_id, Req*) -> absl::Status fills a request
/// (a non-OK status aborts the stream with that status).
/// decode(Resp&, Result*) -> absl::Status fills a result from one response
/// message (non-OK = malformed answer). more(const Resp&) -> bool: the answer
/// continues in the next message, which decode then adds to the same result;
/// the batch counts as in flight until its last message.
/// Results reach `sink` in order with batch_id and latency set.
template <typename Req, typename Resp, typename Batch, typename Result, typename Encode,
          typename Decode, typename More>
absl::Status RunStream(grpc::ClientContext* ctx, grpc::ClientReaderWriter<Req, Resp>* stream,
                       const BatchSource<Batch>& source, Encode encode, Decode decode, More more,
                       const ResultSink<Result>& sink, const StreamOptions& options) {
  using Clock = std::chrono::steady_clock;
  const size_t window = options.max_in_flight < 1 ? 1 : static_cast<size_t>(options.max_in_flight);

  std::mutex mu;
  std::condition_variable cv;
  std::deque<Clock::time_point> sent;  // write time of every unanswered batch, in order
  bool reader_done = false;            // no more answers will be read
  absl::Status first_error;            // the first client-side error (writer or reader)

  auto fail = [&](absl::Status s) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (first_error.ok()) first_error = std::move(s);
    }
    ctx->TryCancel();
    cv.notify_all();
  };

  std::thread writer([&] {
    uint64_t id = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return sent.size() < window || reader_done || !first_error.ok(); });
        if (reader_done || !first_error.ok()) break;
      }
      if (options.cancelled && options.cancelled()) {
        fail(absl::CancelledError("cancelled by the caller"));
        break;
      }
      std::optional<Batch> batch = source();
      if (!batch) break;
      Req req;
      absl::Status st = encode(*batch, id, &req);
      if (!st.ok()) {
        fail(std::move(st));
        break;
      }
      {
        std::lock_guard<std::mutex> lock(mu);
        sent.push_back(Clock::now());
      }
      if (!stream->Write(req)) break;  // the stream is over; Finish() says why
      ++id;
    }
    stream->WritesDone();
  });

  Resp resp;
  uint64_t expected = 0;
  Result result;  // the answer being read (several messages when `more`)
  while (stream->Read(&resp)) {
    absl::Status st = decode(resp, &result);
    if (st.ok() && resp.batch_id() != expected) {
      st = absl::InternalError(absl::StrCat("server answered batch ", resp.batch_id(),
                                            " where batch ", expected, " was expected"));
    }
    if (!st.ok()) {
      fail(std::move(st));
      break;
    }
    if (more(resp)) continue;
    Clock::time_point t0;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (sent.empty()) {
        t0 = Clock::now();
      } else {
        t0 = sent.front();
        sent.pop_front();
      }
    }
    cv.notify_all();
    result.batch_id = expected++;
    result.latency = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0);
    st = sink(std::move(result));
    result = Result();
    if (!st.ok()) {
      fail(std::move(st));
      break;
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    reader_done = true;
  }
  cv.notify_all();
  writer.join();
  // Drain anything still in the stream after a local failure so Finish() does not block.
  if (!first_error.ok()) {
    while (stream->Read(&resp)) {
    }
  }
  grpc::Status gs = stream->Finish();
  if (!first_error.ok()) return first_error;
  if (!gs.ok()) return absl::Status(static_cast<absl::StatusCode>(gs.error_code()), gs.error_message());
  size_t unanswered;
  {
    std::lock_guard<std::mutex> lock(mu);
    unanswered = sent.size();
  }
  if (unanswered != 0) {
    return absl::InternalError(absl::StrCat("stream ended with ", unanswered,
                                            " batches unanswered"));
  }
  return absl::OkStatus();
}

}  // namespace gpujoin::client::detail
