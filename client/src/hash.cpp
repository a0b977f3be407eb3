// Client::Hash (a pipelined stream of column batches hashed row-wise) and
// HashAll, which hashes whole in-memory columns in batches, each cut to the
// bytes its rows need.
#include <algorithm>
#include <deque>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client_impl.hpp"
#include "gpujoin/client/client.hpp"
#include "gpujoin/common/status_macros.hpp"
#include "hash_batches.hpp"
#include "stream_runner.hpp"
#include "wire.hpp"

namespace gpujoin::client {

namespace pb = ::gpujoin::v1;
using detail::AppendColumns;
using detail::DecodeBatchHeader;
using detail::DecodeColumns;
using detail::SetColumn;
using detail::SetKeys;
using detail::SetPacked;
using detail::ToQueryStatistics;
using detail::Unpack;

absl::Status Client::Hash(const BatchSource<HashBatch>& source, const ResultSink<HashResult>& sink,
                          const StreamOptions& options) {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx, options.deadline);
  auto stream = impl_->stub_->Hash(&ctx);
  // The requested width of every batch in flight, to widen the answers.
  std::mutex bits_mu;
  std::deque<uint32_t> bits_in_flight;
  auto encode = [&](const HashBatch& b, uint64_t id, pb::HashRequest* r) -> absl::Status {
    if (b.bits != 32 && b.bits != 64) {
      return absl::InvalidArgumentError(
          absl::StrCat("hash batch ", id, ": bits must be 32 or 64, got ", b.bits));
    }
    if (b.columns.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("hash batch ", id, " has no columns"));
    }
    for (const HashColumn& c : b.columns) detail::EncodeHashColumn(c, r->add_columns());
    r->set_bits(b.bits);
    r->set_batch_id(id);
    std::lock_guard<std::mutex> lock(bits_mu);
    bits_in_flight.push_back(b.bits);
    return absl::OkStatus();
  };
  auto decode = [&](pb::HashResponse& r, HashResult* out) -> absl::Status {
    {
      std::lock_guard<std::mutex> lock(bits_mu);
      if (!bits_in_flight.empty()) {
        out->bits = bits_in_flight.front();
        bits_in_flight.pop_front();
      }
    }
    if (DecodeBatchHeader(r, out)) return absl::OkStatus();
    if (out->bits == 32) {
      std::vector<uint32_t> h;
      GPUJOIN_RETURN_IF_ERROR(Unpack(r.hashes(), "hashes", &h));
      out->hashes.assign(h.begin(), h.end());
    } else {
      GPUJOIN_RETURN_IF_ERROR(Unpack(r.hashes(), "hashes", &out->hashes));
    }
    out->validity.assign(r.validity().begin(), r.validity().end());
    if (out->validity.size() < (out->hashes.size() + 7) / 8) {
      return absl::InternalError(absl::StrCat("server sent a validity bitmap of ",
                                              out->validity.size(), " bytes for ",
                                              out->hashes.size(), " rows"));
    }
    out->null_count = r.null_count();
    return absl::OkStatus();
  };
  return detail::RunStream<pb::HashRequest, pb::HashResponse, HashBatch, HashResult>(
      &ctx, stream.get(), source, encode, decode, detail::kWhole, sink, options);
}

absl::StatusOr<HashResult> Client::HashAll(const std::vector<HashColumn>& columns, uint32_t bits,
                                           size_t batch_rows, const StreamOptions& options,
                                           const ProgressCallback& progress) {
  if (columns.empty()) return absl::InvalidArgumentError("hash needs at least one column");
  if (batch_rows == 0) return absl::InvalidArgumentError("batch_rows must be positive");
  const uint64_t rows = columns[0].length;
  for (size_t i = 0; i < columns.size(); ++i) {
    const HashColumn& c = columns[i];
    if (c.length != rows) {
      return absl::InvalidArgumentError(
          absl::StrCat("hash column ", i, " has ", c.length, " rows but column 0 has ", rows));
    }
    GPUJOIN_RETURN_IF_ERROR(CheckHashColumn(c, absl::StrCat("hash column ", i)));
  }
  // Each batch cuts every column (children included) to its rows, at the byte
  // holding the first row's bit, so bitmaps never need shifting; offsets are
  // rebased into `scratch`, which lives until the batch has been encoded.
  detail::HashCutScratch scratch;
  uint64_t pos = 0;
  bool sent_any = false;
  BatchSource<HashBatch> source = [&]() -> std::optional<HashBatch> {
    if (pos >= rows && sent_any) return std::nullopt;
    sent_any = true;
    const uint64_t n = std::min<uint64_t>(batch_rows, rows - pos);
    HashBatch b;
    b.bits = bits;
    scratch = {};
    for (const HashColumn& c : columns)
      b.columns.push_back(detail::CutHashRows(c, pos, n, &scratch));
    pos += n;
    return b;
  };
  HashResult all;
  all.bits = bits;
  all.validity.assign((rows + 7) / 8, 0);
  all.hashes.reserve(rows);
  Progress p;
  p.total_rows = rows;
  GPUJOIN_RETURN_IF_ERROR(Hash(
      source,
      [&](HashResult&& r) -> absl::Status {
        if (!r.error.ok()) return r.error;
        const uint64_t at = all.hashes.size();
        for (size_t k = 0; k < r.hashes.size(); ++k) {
          if (r.Valid(k)) all.validity[(at + k) / 8] |= static_cast<uint8_t>(1u << ((at + k) % 8));
        }
        all.hashes.insert(all.hashes.end(), r.hashes.begin(), r.hashes.end());
        all.null_count += r.null_count;
        all.batch_id = r.batch_id;
        all.latency = r.latency;
        p.rows_sent += r.hashes.size();
        p.bytes_sent += r.hashes.size() * (bits / 8);
        if (progress) progress(p);
        return absl::OkStatus();
      },
      options));
  if (all.hashes.size() != rows) {
    return absl::InternalError(
        absl::StrCat("hash answered ", all.hashes.size(), " of ", rows, " rows"));
  }
  return all;
}

}  // namespace gpujoin::client
