// Fuzz target: Operations::Lookup and Operations::LookupPacked (server/src/
// operations.cpp) on the CPU backend, against four installed indexes of both
// key widths, one of them keep_all (QueryFixture).
//
// Input: the bytes of one LookupRequest message, taken as the service takes it:
// the bytes path (ScanLookupRequest, then LookupPacked) when the scan accepts it,
// else protobuf's parse and Lookup. Checked:
//  - the status is the one the documented checks give, in their order (index
//    name, the keys and keys64 columns, the index, the key width, select (the
//    fixture's indexes have no payload), max_probe_count, response size);
//  - an OK response has one value and one found byte per key (and probes and
//    match counts when asked), and every row, probe count, match count (the
//    key's group size on the keep_all index, else 1; 0 when missing) and
//    statistic equals the reference model read from the index's table;
//  - when the scan accepts the bytes, LookupPacked gives the same status (code
//    and message) as Lookup, and its serialised response the same bytes.
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fuzz_support.hpp"
#include "wire/column_codec.hpp"
#include "wire/lookup_wire.hpp"

namespace gpujoin::fuzz {
namespace {

// Whether a column is set (a non-empty packed field or a values list), and
// whether it decodes (not both, packed a multiple of `width`).
template <typename Column>
bool Present(bool has, const Column& c) {
  return has && (!c.packed().empty() || c.has_values());
}
template <typename Column>
bool Decodes(bool has, const Column& c, size_t width) {
  if (!has) return true;
  if (!c.packed().empty() && c.has_values()) return false;
  return c.packed().size() % width == 0;
}

// The status code the documented checks give `request`, in their order: the
// name, both key columns, a key column at all, the index, key columns sent to
// an index of key words, the key width, the probe bound and the response size.
absl::StatusCode ExpectedCode(const QueryFixture& fixture, const v1::LookupRequest& request) {
  using absl::StatusCode;
  if (!ValidIndexName(request.index())) return StatusCode::kInvalidArgument;
  if (!Decodes(request.has_keys(), request.keys(), 4) ||
      !Decodes(request.has_keys64(), request.keys64(), 8)) {
    return StatusCode::kInvalidArgument;
  }
  const bool narrow = Present(request.has_keys(), request.keys());
  const bool wide = Present(request.has_keys64(), request.keys64());
  // Key columns stand in for the keys until the index is known (its key type
  // decides which field it takes); the fixture's indexes are keyed by words.
  if (!narrow && !wide && request.key_columns_size() == 0) return StatusCode::kInvalidArgument;
  const auto [version, ref] = fixture.Find(request.index());
  if (version == nullptr) return StatusCode::kNotFound;
  if (request.key_columns_size() > 0) return StatusCode::kInvalidArgument;
  const bool index_wide = ref->key_type == engine::KeyType::kUint64;
  if (index_wide ? narrow : wide) return StatusCode::kInvalidArgument;
  if (request.select_size() > 0) return StatusCode::kInvalidArgument;  // no payload columns
  if (request.max_probe_count() > ref->capacity) return StatusCode::kInvalidArgument;
  const uint64_t rows = index_wide ? (request.keys64().packed().size() / 8 +
                                      static_cast<uint64_t>(request.keys64().values().v_size()))
                                   : (request.keys().packed().size() / 4 +
                                      static_cast<uint64_t>(request.keys().values().v_size()));
  const uint64_t per_row =
      5 + (request.want_probes() ? 4 : 0) + (request.want_match_counts() ? 4 : 0);
  if (rows * per_row > fixture.response_limit()) {
    return StatusCode::kInvalidArgument;
  }
  return StatusCode::kOk;
}

// The keys of the index's width, as uint64_t.
std::vector<uint64_t> Keys(const v1::LookupRequest& request, engine::KeyType type) {
  if (type == engine::KeyType::kUint64) {
    if (!request.keys64().packed().empty()) {
      return server::UnpackColumn<uint64_t>(request.keys64().packed());
    }
    return std::vector<uint64_t>(request.keys64().values().v().begin(),
                                 request.keys64().values().v().end());
  }
  if (!request.keys().packed().empty()) {
    const std::vector<uint32_t> k = server::UnpackColumn<uint32_t>(request.keys().packed());
    return std::vector<uint64_t>(k.begin(), k.end());
  }
  return std::vector<uint64_t>(request.keys().values().v().begin(),
                               request.keys().values().v().end());
}

void CheckResponse(const QueryFixture& fixture, const v1::LookupRequest& request,
                   const v1::LookupResponse& response) {
  const auto [version, ref] = fixture.Find(request.index());
  const std::vector<uint64_t> keys = Keys(request, ref->key_type);
  const size_t rows = keys.size();
  const std::string what = absl::StrCat("lookup of ", rows, " keys in \"", request.index(),
                                        "\" (max_probe_count ", request.max_probe_count(), ")");
  FUZZ_CHECK(response.values().size() == rows * 4 && response.found().size() == rows &&
                 response.probes().size() == (request.want_probes() ? rows * 4 : 0) &&
                 response.match_counts().size() == (request.want_match_counts() ? rows * 4 : 0),
             absl::StrCat(what, ": response columns of ", response.values().size(), ", ",
                          response.found().size(), ", ", response.probes().size(), " and ",
                          response.match_counts().size(), " bytes"));
  FUZZ_CHECK(response.index_version() == version->version,
             absl::StrCat(what, ": index_version ", response.index_version()));
  const std::vector<uint32_t> values = server::UnpackColumn<uint32_t>(response.values());
  const std::vector<uint32_t> probes = server::UnpackColumn<uint32_t>(response.probes());
  const std::vector<uint32_t> counts = server::UnpackColumn<uint32_t>(response.match_counts());
  uint64_t found = 0, total_probes = 0, max_probes = 0;
  for (size_t r = 0; r < rows; ++r) {
    const ReferenceIndex::Entry* e = ref->Find(keys[r], request.max_probe_count());
    const uint32_t want_value = e != nullptr ? e->value : engine::kEmptyKey;
    const uint32_t want_probes = ref->Probes(keys[r], request.max_probe_count());
    FUZZ_CHECK(values[r] == want_value && response.found()[r] == (e != nullptr ? 1 : 0),
               absl::StrCat(what, ": row ", r, " key ", keys[r], " gave value ", values[r],
                            " found ", int(response.found()[r]), "; expected ", want_value));
    if (request.want_probes()) {
      FUZZ_CHECK(probes[r] == want_probes,
                 absl::StrCat(what, ": row ", r, " key ", keys[r], " examined ", probes[r],
                              " slots; expected ", want_probes));
    }
    if (request.want_match_counts()) {
      const uint32_t want_count =
          e != nullptr ? static_cast<uint32_t>(ref->Matches(keys[r], *e).size()) : 0;
      FUZZ_CHECK(counts[r] == want_count,
                 absl::StrCat(what, ": row ", r, " key ", keys[r], " has ", counts[r],
                              " matches; expected ", want_count));
    }
    found += e != nullptr ? 1 : 0;
    total_probes += want_probes;
    max_probes = std::max<uint64_t>(max_probes, want_probes);
  }
  const v1::QueryStatistics& s = response.statistics();
  FUZZ_CHECK(s.found() == found && s.missing() == rows - found &&
                 s.total_probes() == total_probes && s.max_probes() == max_probes,
             absl::StrCat(what, ": statistics ", s.ShortDebugString(), "; expected found ", found,
                          " missing ", rows - found, " total_probes ", total_probes, " max_probes ",
                          max_probes));
}

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  FUZZ_CHECK(buffer.Dump(&slices).ok(), "ByteBuffer::Dump failed");
  std::string out;
  for (const grpc::Slice& s : slices)
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

}  // namespace
}  // namespace gpujoin::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpujoin;
  using namespace gpujoin::fuzz;
  static QueryFixture* fixture = new QueryFixture();
  v1::LookupRequest request;
  const bool parses = request.ParseFromArray(data, static_cast<int>(size));
  std::optional<server::LookupWire> wire =
      server::ScanLookupRequest(std::vector<grpc::Slice>{grpc::Slice(data, size)});
  FUZZ_CHECK(parses || !wire.has_value(), "the scan accepted bytes protobuf does not parse");
  if (!parses) return 0;  // the service ends the stream: "message N could not be parsed"

  v1::LookupResponse response;
  const absl::Status status = fixture->ops().Lookup(request, &response);
  const absl::StatusCode expected = ExpectedCode(*fixture, request);
  FUZZ_CHECK(status.code() == expected,
             absl::StrCat("Lookup returned ", Describe(status), "; expected ",
                          absl::StatusCodeToString(expected), " for ",
                          request.ShortDebugString().substr(0, 300)));
  if (status.ok()) CheckResponse(*fixture, request, response);

  if (wire.has_value()) {
    server::PackedLookupResult result;
    const absl::Status packed = fixture->ops().LookupPacked(
        wire->fields, wire->key_type, wire->rows(), [&](uint8_t* dst) { wire->CopyKeys(dst); },
        &result);
    FUZZ_CHECK(
        packed.code() == status.code() && packed.message() == status.message(),
        absl::StrCat("LookupPacked returned ", Describe(packed), "; Lookup ", Describe(status)));
    if (packed.ok()) {
      response.set_batch_id(request.batch_id());
      FUZZ_CHECK(Flatten(server::SerializeLookupResponse(request.batch_id(), std::move(result))) ==
                     response.SerializeAsString(),
                 "the bytes path's response differs from protobuf's serialisation of Lookup's");
    }
  }
  return 0;
}
