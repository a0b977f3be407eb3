// Fuzz target: the Lookup bytes path of server/src/wire/lookup_wire.cpp, against
// protobuf.
//
// Input: one byte n (n % 8 cuts), n cut lengths of one byte each, then the bytes
// of a serialized LookupRequest, which are handed to ScanLookupRequest as slices
// of those lengths (empty slices included) and the rest as one more slice.
// Checked, differentially:
//  - a request the scan accepts is one protobuf parses, with the same fields:
//    `fields` equals protobuf's message without keys, the key type is that of the
//    one column sent, and the key bytes CopyKeys writes equal keys.packed or
//    keys64.packed (a non-empty multiple of 4 or 8 bytes);
//  - the scan accepts every canonically encoded request that protobuf parses
//    whose top level holds no group and exactly one keys or keys64 field that is
//    exactly one non-empty packed field of whole rows (checked on protobuf's own
//    reading of the fields, as unknown fields);
//  - how the bytes are cut into slices changes nothing;
//  - SerializeLookupResponse of a result built from the same bytes (with probes
//    and match counts as the first byte's two low bits say) equals protobuf's
//    serialisation of the same LookupResponse.
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fuzz_check.hpp"
#include "google/protobuf/unknown_field_set.h"
#include "gpujoin/engine/backend.hpp"
#include "wire/column_codec.hpp"
#include "wire/lookup_wire.hpp"
#include "grpcpp/support/byte_buffer.h"

namespace gpujoin::fuzz {
namespace {

using google::protobuf::UnknownField;
using google::protobuf::UnknownFieldSet;

std::vector<grpc::Slice> Cut(std::string_view bytes, const std::vector<size_t>& lengths) {
  std::vector<grpc::Slice> slices;
  size_t at = 0;
  for (size_t n : lengths) {
    n = std::min(n, bytes.size() - at);
    slices.emplace_back(bytes.data() + at, n);
    at += n;
  }
  slices.emplace_back(bytes.data() + at, bytes.size() - at);
  return slices;
}

// Whether protobuf reads `bytes` as a request the fast path is for: canonically
// encoded (protobuf writes the fields it read back to the same bytes: minimal
// varints, which is what clients send; protobuf also accepts encodings the scan
// may leave to it, such as a 5-byte tag whose high bits it drops), no group at
// the top level, and exactly one keys field (2) holding exactly one non-empty
// packed field (1) of whole rows.
bool FastShaped(std::string_view bytes) {
  UnknownFieldSet top;
  if (!top.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return false;
  std::string canonical;
  if (!top.SerializeToString(&canonical) || canonical != bytes) return false;
  int keys_fields = 0;
  const UnknownField* keys = nullptr;
  for (int i = 0; i < top.field_count(); ++i) {
    const UnknownField& f = top.field(i);
    if (f.type() == UnknownField::TYPE_GROUP) return false;
    if (f.number() == 2 || f.number() == 6) {
      ++keys_fields;
      keys = &f;
    }
  }
  if (keys_fields != 1 || keys->type() != UnknownField::TYPE_LENGTH_DELIMITED) return false;
  const size_t width = keys->number() == 6 ? 8 : 4;
  UnknownFieldSet column;
  const std::string& payload = keys->length_delimited();
  if (!column.ParseFromArray(payload.data(), static_cast<int>(payload.size())) ||
      !column.SerializeToString(&canonical) || canonical != payload) {
    return false;
  }
  if (column.field_count() != 1) return false;
  const UnknownField& packed = column.field(0);
  return packed.number() == 1 && packed.type() == UnknownField::TYPE_LENGTH_DELIMITED &&
         !packed.length_delimited().empty() && packed.length_delimited().size() % width == 0;
}

void CheckScan(std::string_view bytes, const std::vector<size_t>& cuts) {
  v1::LookupRequest parsed;
  const bool parses = parsed.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
  std::optional<server::LookupWire> wire = server::ScanLookupRequest(Cut(bytes, cuts));
  const std::string what =
      absl::StrCat("ScanLookupRequest(", bytes.size(), " bytes, ", cuts.size() + 1, " slices)");

  // How the bytes are cut changes nothing.
  const std::optional<server::LookupWire> whole = server::ScanLookupRequest(Cut(bytes, {}));
  FUZZ_CHECK(wire.has_value() == whole.has_value(), what + ": the answer depends on the slicing");

  if (!wire.has_value()) {
    FUZZ_CHECK(!(parses && FastShaped(bytes)),
               what + ": declined a request protobuf parses with one plain packed keys field");
    return;
  }
  FUZZ_CHECK(parses, what + ": accepted bytes protobuf does not parse");
  const bool wide = wire->key_type == engine::KeyType::kUint64;
  const size_t width = wide ? 8 : 4;
  // The keys came in exactly one packed column: keys (uint32) or keys64 (uint64).
  FUZZ_CHECK(wide ? (parsed.has_keys64() && !parsed.keys64().has_values() && !parsed.has_keys())
                  : (parsed.has_keys() && !parsed.keys().has_values() && !parsed.has_keys64()),
             what + ": accepted a request whose keys are not one packed column of its width");
  const std::string& packed = wide ? parsed.keys64().packed() : parsed.keys().packed();
  FUZZ_CHECK(wire->key_bytes() == width && wire->keys_bytes == packed.size() &&
                 wire->keys_bytes % width == 0 && wire->keys_bytes != 0 &&
                 wire->rows() * width == wire->keys_bytes,
             absl::StrCat(what, ": ", wire->keys_bytes, " key bytes (", wire->rows(), " rows of ",
                          wire->key_bytes(), " bytes); protobuf has ", packed.size()));
  FUZZ_CHECK(wire->keys_offset + wire->keys_bytes <= bytes.size() &&
                 bytes.substr(wire->keys_offset, wire->keys_bytes) == packed,
             absl::StrCat(what, ": keys_offset ", wire->keys_offset,
                          " does not point at the packed keys"));
  std::string copied(wire->keys_bytes, '\0');
  wire->CopyKeys(reinterpret_cast<uint8_t*>(copied.data()));
  FUZZ_CHECK(copied == packed, what + ": CopyKeys differs from the packed keys");
  FUZZ_CHECK(!wire->fields.has_keys() && !wire->fields.has_keys64(),
             what + ": fields holds a key column");
  v1::LookupRequest rest = parsed;
  rest.clear_keys();
  rest.clear_keys64();
  FUZZ_CHECK(rest.SerializeAsString() == wire->fields.SerializeAsString(),
             what + ": fields differ from protobuf's parse without keys:\n  scan: " +
                 wire->fields.ShortDebugString() + "\n  protobuf: " + rest.ShortDebugString());
  FUZZ_CHECK(whole->keys_offset == wire->keys_offset && whole->keys_bytes == wire->keys_bytes &&
                 whole->key_type == wire->key_type,
             what + ": the key range depends on the slicing");
}

// SerializeLookupResponse against protobuf, for a result whose outputs are `bytes`.
void CheckResponse(engine::Backend& backend, std::string_view bytes, uint8_t mode) {
  server::PackedLookupResult result;
  result.probes = (mode & 1) != 0;
  result.match_counts = (mode & 2) != 0;
  const size_t per_row = 5 + (result.probes ? 4 : 0) + (result.match_counts ? 4 : 0);
  result.rows = bytes.size() / per_row;
  result.index_version = mode >> 2;
  const size_t n = result.rows * per_row;
  if (n >= 8) {
    uint64_t a = 0;
    std::memcpy(&a, bytes.data(), 8);
    result.statistics = engine::QueryStatistics{a & 0xffff, a >> 16 & 0xffff, a >> 32, a >> 48};
  }
  auto outputs = backend.AllocateHostBuffer(n);
  FUZZ_CHECK(outputs.ok(), Describe(outputs.status()));
  result.outputs = std::move(*outputs);
  if (n != 0) std::memcpy(result.outputs.data(), bytes.data(), n);

  v1::LookupResponse expected;
  const uint64_t batch_id = uint64_t{mode} * 0x0101010101ull;
  expected.set_batch_id(batch_id);
  expected.set_index_version(result.index_version);
  expected.set_values(std::string(bytes.substr(result.values_offset(), result.rows * 4)));
  expected.set_found(std::string(bytes.substr(result.found_offset(), result.rows)));
  if (result.probes) {
    expected.set_probes(std::string(bytes.substr(result.probes_offset(), result.rows * 4)));
  }
  if (result.match_counts) {
    expected.set_match_counts(
        std::string(bytes.substr(result.match_counts_offset(), result.rows * 4)));
  }
  auto* s = expected.mutable_statistics();
  s->set_found(result.statistics.found);
  s->set_missing(result.statistics.missing);
  s->set_total_probes(result.statistics.total_probes);
  s->set_max_probes(result.statistics.max_probes);

  const uint64_t rows = result.rows;
  grpc::ByteBuffer buffer = server::SerializeLookupResponse(batch_id, std::move(result));
  std::vector<grpc::Slice> slices;
  FUZZ_CHECK(buffer.Dump(&slices).ok(), "ByteBuffer::Dump failed");
  std::string flat;
  for (const grpc::Slice& slice : slices) {
    flat.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  FUZZ_CHECK(flat == expected.SerializeAsString(),
             absl::StrCat("SerializeLookupResponse of ", rows, " rows differs from protobuf"));
}

}  // namespace
}  // namespace gpujoin::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpujoin;
  using namespace gpujoin::fuzz;
  static engine::Backend* backend = [] {
    engine::BackendOptions options;
    options.cpu_threads = 1;
    auto b = engine::CreateBackend(engine::BackendKind::kCpu, options);
    FUZZ_CHECK(b.ok(), Describe(b.status()));
    return b->release();
  }();
  if (size == 0) return 0;
  const size_t cuts = std::min<size_t>(data[0] % 8, size - 1);
  std::vector<size_t> lengths(data + 1, data + 1 + cuts);
  const std::string_view request = AsView(data + 1 + cuts, size - 1 - cuts);
  CheckScan(request, lengths);
  CheckResponse(*backend, request, data[0]);
  return 0;
}
