// Hash: the request's columns decoded and checked (wire/hash_wire), one hash node
// run, the hashes and their validity encoded.
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"
#include "gpujoin/engine/graph.hpp"
#include "ops/operations.hpp"
#include "wire/hash_wire.hpp"

namespace gpujoin::server {

absl::Status Operations::Hash(const v1::HashRequest& request, v1::HashResponse* response) {
  engine::HashBits bits;
  switch (request.bits()) {
    case 0:
    case 64:
      bits = engine::HashBits::k64;
      break;
    case 32:
      bits = engine::HashBits::k32;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("bits: ", request.bits(), " is not 32 or 64 (0 means 64)"));
  }
  // The decoded views borrow the request (and aligned copies of its offsets held
  // by `decoded`), which both outlive the graph run below.
  GPUJOIN_ASSIGN_OR_RETURN(DecodedHashColumns decoded, DecodeHashColumns(request));
  const uint64_t rows = decoded.rows;
  engine::HashNode node;
  node.bits = bits;
  node.columns = std::move(decoded.columns);
  const uint64_t width = bits == engine::HashBits::k32 ? 4 : 8;
  GPUJOIN_RETURN_IF_ERROR(
      CheckResponseSize(rows * width + (rows + 7) / 8, absl::StrCat("columns: ", rows, " rows")));

  std::optional<PackedOutput<uint32_t>> out32;
  std::optional<PackedOutput<uint64_t>> out64;
  if (bits == engine::HashBits::k32) {
    out32.emplace(response->mutable_hashes(), rows);
    node.out32 = out32->span();
  } else {
    out64.emplace(response->mutable_hashes(), rows);
    node.out64 = out64->span();
  }
  PackedOutput<uint8_t> validity(response->mutable_validity(), (rows + 7) / 8);
  node.out_validity = validity.span();
  engine::CommandGraph graph;
  graph.Add(std::move(node));
  GPUJOIN_RETURN_IF_ERROR(RunGraph(graph));
  if (out32) out32->Finish();
  if (out64) out64->Finish();
  validity.Finish();
  uint64_t valid = 0;
  const std::string& bitmap = response->validity();
  for (uint64_t r = 0; r < rows; ++r)
    valid += (static_cast<uint8_t>(bitmap[r / 8]) >> (r % 8)) & 1u;
  response->set_null_count(rows - valid);
  return absl::OkStatus();
}

}  // namespace gpujoin::server
