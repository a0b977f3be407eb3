// Fuzz target: Operations::Lookup and Operations::LookupPacked (server/src/
// operations.cpp) on the CPU backend, against the query fixture's installed
// indexes: four keyed by words of both widths (one keep_all) and three keyed
// by key schemas (string, binary and integer key columns, composites, one
// keep_all; QueryFixture).
//
// Input: the bytes of one LookupRequest message, taken as the service takes it:
// the bytes path (ScanLookupRequest, then LookupPacked) when the scan accepts it,
// else protobuf's parse and Lookup. Checked:
//  - the status is the one the documented checks give, in their order (index
//    name, the keys and keys64 columns, the index, the key field the index's key
//    type takes, a key schema's key_columns (count, then each column's name,
//    type, length, data, offsets, UTF-8 and validity: key_model.hpp), select
//    (the fixture's indexes have no payload), max_probe_count, response size),
//    and an INVALID_ARGUMENT for key columns names the field the model names;
//  - an OK response has one value and one found byte per key (and probes and
//    match counts when asked), and every row, probe count, match count (the
//    key's group size on a keep_all index, else 1; 0 when missing) and
//    statistic equals the reference model: read from the index's table for key
//    words; for key columns a map from each key's tuple of byte strings to its
//    build rows (the lowest first), nulls never matching and examining no slot;
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

// What the documented checks give `request`: the code and, for some
// INVALID_ARGUMENTs, text the message must contain (the field).
struct Expected {
  absl::StatusCode code = absl::StatusCode::kOk;
  std::string field;
};

// The checks in their order: the name, both key columns, a key field at all,
// the index, the key field its key type takes (a key schema's key columns
// checked by the model), select, the probe bound and the response size.
Expected ExpectedStatus(const QueryFixture& fixture, const v1::LookupRequest& request) {
  using absl::StatusCode;
  const Expected invalid{StatusCode::kInvalidArgument, ""};
  if (!ValidIndexName(request.index())) return invalid;
  if (!Decodes(request.has_keys(), request.keys(), 4) ||
      !Decodes(request.has_keys64(), request.keys64(), 8)) {
    return invalid;
  }
  const bool narrow = Present(request.has_keys(), request.keys());
  const bool wide = Present(request.has_keys64(), request.keys64());
  // Key columns stand in for the keys until the index is known (its key type
  // decides which field it takes).
  if (!narrow && !wide && request.key_columns_size() == 0) return invalid;
  const auto [version, ref] = fixture.Find(request.index());
  const auto [cversion, cref] = fixture.FindColumns(request.index());
  if (version == nullptr && cversion == nullptr) return {StatusCode::kNotFound, ""};
  uint64_t rows = 0, capacity = 0;
  if (cref != nullptr) {
    if (narrow || wide) return {StatusCode::kInvalidArgument, narrow ? "keys: " : "keys64: "};
    const KeyColumnsOutcome keys =
        ModelKeyColumns(request.key_columns(), cref->schema, "", /*required=*/true);
    if (!keys.error.empty()) return {StatusCode::kInvalidArgument, keys.error};
    rows = keys.rows.size();
    capacity = cref->capacity;
  } else {
    if (request.key_columns_size() > 0) return {StatusCode::kInvalidArgument, "key_columns: "};
    const bool index_wide = ref->key_type == engine::KeyType::kUint64;
    if (index_wide ? narrow : wide) return invalid;
    rows = index_wide ? (request.keys64().packed().size() / 8 +
                         static_cast<uint64_t>(request.keys64().values().v_size()))
                      : (request.keys().packed().size() / 4 +
                         static_cast<uint64_t>(request.keys().values().v_size()));
    capacity = ref->capacity;
  }
  if (request.select_size() > 0) return invalid;  // no payload columns
  if (request.max_probe_count() > capacity)
    return {StatusCode::kInvalidArgument, "max_probe_count"};
  const uint64_t per_row =
      5 + (request.want_probes() ? 4 : 0) + (request.want_match_counts() ? 4 : 0);
  if (rows * per_row > fixture.response_limit()) return invalid;
  return {};
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

// The model's answer for every row of an accepted request.
std::vector<RowAnswer> Answers(QueryFixture& fixture, const v1::LookupRequest& request) {
  std::vector<RowAnswer> answers;
  const uint64_t bound = request.max_probe_count();
  if (const ColumnReference* cref = fixture.FindColumns(request.index()).second) {
    const KeyRowList keys =
        ModelKeyColumns(request.key_columns(), cref->schema, "", /*required=*/true).rows;
    const std::vector<uint64_t> fps = Fingerprints(fixture.harness().backend(), cref->schema, keys);
    for (size_t r = 0; r < keys.size(); ++r)
      answers.push_back(cref->Answer(keys[r], fps[r], bound));
    return answers;
  }
  const ReferenceIndex* ref = fixture.Find(request.index()).second;
  for (uint64_t key : Keys(request, ref->key_type)) {
    const ReferenceIndex::Entry* e = ref->Find(key, bound);
    RowAnswer a;
    a.probes = ref->Probes(key, bound);
    if (e != nullptr) a.matches = ref->Matches(key, *e);
    answers.push_back(std::move(a));
  }
  return answers;
}

void CheckResponse(QueryFixture& fixture, const v1::LookupRequest& request,
                   const v1::LookupResponse& response) {
  const auto [word_version, ref] = fixture.Find(request.index());
  const server::IndexVersion* version =
      word_version != nullptr ? word_version : fixture.FindColumns(request.index()).first;
  const std::vector<RowAnswer> answers = Answers(fixture, request);
  const size_t rows = answers.size();
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
    const RowAnswer& a = answers[r];
    const bool hit = !a.matches.empty();
    const uint32_t want_value = hit ? a.matches.front() : engine::kEmptyKey;
    FUZZ_CHECK(values[r] == want_value && response.found()[r] == (hit ? 1 : 0),
               absl::StrCat(what, ": row ", r, " gave value ", values[r], " found ",
                            int(response.found()[r]), "; expected ", want_value));
    if (request.want_probes()) {
      FUZZ_CHECK(probes[r] == a.probes, absl::StrCat(what, ": row ", r, " examined ", probes[r],
                                                     " slots; expected ", a.probes));
    }
    if (request.want_match_counts()) {
      FUZZ_CHECK(counts[r] == a.matches.size(),
                 absl::StrCat(what, ": row ", r, " has ", counts[r], " matches; expected ",
                              a.matches.size()));
    }
    found += hit ? 1 : 0;
    total_probes += a.probes;
    max_probes = std::max<uint64_t>(max_probes, a.probes);
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
  const Expected expected = ExpectedStatus(*fixture, request);
  FUZZ_CHECK(status.code() == expected.code && MessageHas(status, expected.field),
             absl::StrCat("Lookup returned ", Describe(status), "; expected ",
                          absl::StatusCodeToString(expected.code), " naming \"", expected.field,
                          "\" for ", request.ShortDebugString().substr(0, 300)));
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
