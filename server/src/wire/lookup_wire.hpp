// The Lookup RPC's bytes path without protobuf copies. The service
// receives Lookup requests as raw gRPC byte buffers and scans their wire format:
// when the keys come as one `keys.packed` or one `keys64.packed` field (the usual
// case, for uint32 and uint64 indexes), the packed bytes
// are copied once, straight from the received slices into a backend host buffer
// (page-locked on the CUDA backend), and every other field is parsed by protobuf
// from the few bytes around them. The response is assembled from the engine's
// output host buffer as gRPC slices that reference it (no copy), byte-identical to
// protobuf's serialisation of the same LookupResponse. Anything unusual (keys as a
// `values` list, a keys field repeated, both `keys` and `keys64`, unknown fields
// inside keys, malformed input) is left to the ordinary protobuf parse, so
// behaviour and errors are those of the protobuf path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "gpujoin/engine/host_buffer.hpp"
#include "gpujoin/engine/types.hpp"
#include "gpujoin/v1/gpujoin.pb.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"

namespace gpujoin::server {

/// A serialized LookupRequest accepted for the fast path.
struct LookupWire {
  /// The request's slices (references into the received buffer; no copy).
  std::vector<grpc::Slice> slices;
  /// Every field of the request except the keys (index, want_probes,
  /// max_probe_count, batch_id, unknown fields), parsed by protobuf.
  v1::LookupRequest fields;
  /// The width of the keys: kUint32 from `keys`, kUint64 from `keys64`.
  engine::KeyType key_type = engine::KeyType::kUint32;
  /// Where the packed key bytes lie in the concatenation of `slices`.
  size_t keys_offset = 0;
  size_t keys_bytes = 0;

  /// Bytes per key: 4 or 8.
  size_t key_bytes() const { return key_type == engine::KeyType::kUint64 ? 8 : 4; }
  /// Number of keys (keys_bytes is a non-zero multiple of key_bytes()).
  uint64_t rows() const { return keys_bytes / key_bytes(); }
  /// Copies the packed key bytes (keys_bytes of them) to `dst`.
  void CopyKeys(uint8_t* dst) const;
};

/// Scans serialized LookupRequest bytes given as slices. Returns the fast-path
/// view when the top-level message is well formed, exactly one of its fields 2
/// (`keys`) and 6 (`keys64`) occurs, exactly once, as a length-delimited field
/// whose payload is exactly one `packed` field (field 1) of a non-zero multiple of
/// 4 (`keys`) or 8 (`keys64`) bytes, and the remaining bytes parse as a
/// LookupRequest; std::nullopt otherwise (the caller then parses the whole
/// message with protobuf, which gives the request the usual checks and errors).
std::optional<LookupWire> ScanLookupRequest(std::vector<grpc::Slice> slices);

/// Same, for a received buffer (its slices are referenced, not copied).
std::optional<LookupWire> ScanLookupRequest(const grpc::ByteBuffer& buffer);

/// The result of a lookup whose outputs live in one backend host buffer.
struct PackedLookupResult {
  /// values (rows x 4 bytes), then probes (rows x 4, when `probes`), then match
  /// counts (rows x 4, when `match_counts`), then found (rows bytes).
  engine::HostBuffer outputs;
  uint64_t rows = 0;
  bool probes = false;
  bool match_counts = false;
  uint64_t index_version = 0;
  /// The index's mutation sequence the lookup saw.
  uint64_t mutation_sequence = 0;
  engine::QueryStatistics statistics;
  /// The gathered payload columns (LookupResponse.columns), in select order.
  google::protobuf::RepeatedPtrField<v1::Column> columns;

  /// Byte offsets of the outputs in `outputs`.
  size_t values_offset() const { return 0; }
  size_t probes_offset() const { return rows * 4; }
  size_t match_counts_offset() const { return rows * (probes ? 8 : 4); }
  size_t found_offset() const { return match_counts_offset() + (match_counts ? rows * 4 : 0); }
  /// Bytes `outputs` must hold.
  size_t bytes() const { return found_offset() + rows; }
};

/// Serialises the LookupResponse {batch_id, index_version, values, found, probes,
/// statistics, columns, match_counts, mutation_sequence} of `result` into a byte buffer whose column slices
/// reference the output host buffer and the gathered columns' bytes (kept alive
/// by the slices until gRPC releases them). The bytes equal protobuf's
/// serialisation of the same message.
grpc::ByteBuffer SerializeLookupResponse(uint64_t batch_id, PackedLookupResult result);

}  // namespace gpujoin::server
