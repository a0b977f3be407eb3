// Fuzz target: Operations::Join (server/src/ops/join.cpp) on the CPU backend,
// against the query fixture's installed indexes: four keyed by words of both
// widths (one keep_all) and three keyed by key schemas (one keep_all;
// QueryFixture).
//
// Input: the bytes of one JoinRequest message. Checked:
//  - the status is the one the documented checks give (the kind, index name and index,
//    batches, max_probe_count, select (the fixture's indexes have no payload),
//    each batch's keys and keys64 columns and the key field the index's key type
//    takes (a key schema's key_columns checked column by column as
//    key_model.hpp documents, the INVALID_ARGUMENT naming the field), left_rows,
//    first_left_row, capacity unless count_only, and whether the batch's first
//    response message can carry its found and probes; then --max-result-bytes);
//  - an OK response has one result per batch, in order (JoinBatchResult.batch),
//    whose pairs are exactly the reference model's pairs of the request's kind
//    in left order (left row = left_rows[r] or first_left_row + r), then group
//    order (inner and outer: a pair per match, outer and anti: (left row,
//    0xffffffff) for a row without one, semi: the first match once), truncated
//    to the pair capacity (none for count_only), with the required count, the
//    overflow flag, statistics, and found / probes when asked; for key columns
//    the model is a map from each key's tuple of byte strings to its build rows,
//    where a left row with a null never matches and examines no slot.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fuzz_support.hpp"
#include "gpujoin/server/config.hpp"
#include "ops/result_budget.hpp"
#include "wire/column_codec.hpp"
#include "wire/join_parts.hpp"

namespace gpujoin::fuzz {
namespace {

template <typename Column>
bool Present(bool has, const Column& c) {
  return has && (!c.packed().empty() || c.has_values());
}

// Whether an optional column decodes: not both set, packed a multiple of `width`.
template <typename Column>
bool Decodes(bool has, const Column& c, size_t width) {
  if (!has) return true;
  if (!c.packed().empty() && c.has_values()) return false;
  return c.packed().size() % width == 0;
}

template <typename T, typename Column>
std::vector<uint64_t> Values(const Column& c) {
  std::vector<uint64_t> out;
  if (!c.packed().empty()) {
    for (T v : server::UnpackColumn<T>(c.packed())) out.push_back(v);
  } else {
    out.assign(c.values().v().begin(), c.values().v().end());
  }
  return out;
}

// The batch's keys of the index's width, as uint64_t.
std::vector<uint64_t> Keys(const v1::LeftBatch& b, engine::KeyType type) {
  return type == engine::KeyType::kUint64 ? Values<uint64_t>(b.keys64()) : Values<uint32_t>(b.keys());
}

// What the documented checks give `request`: the code and, for some
// INVALID_ARGUMENTs, text the message must contain (the field).
struct Expected {
  absl::StatusCode code = absl::StatusCode::kOk;
  std::string field;
};

// The checks in their order: the index, batches, max_probe_count, then per
// batch its key fields (decoding, the field the index's key type takes, a key
// schema's columns), left_rows, first_left_row and capacity, then the response
// size.
Expected ExpectedStatus(const QueryFixture& fixture, const v1::JoinRequest& request) {
  using absl::StatusCode;
  const Expected invalid{StatusCode::kInvalidArgument, ""};
  if (request.kind() < v1::JOIN_KIND_UNSPECIFIED || request.kind() > v1::JOIN_KIND_LEFT_ANTI) {
    return invalid;
  }
  if (!ValidIndexName(request.index())) return invalid;
  const auto [version, ref] = fixture.Find(request.index());
  const auto [cversion, cref] = fixture.FindColumns(request.index());
  if (version == nullptr && cversion == nullptr) return {StatusCode::kNotFound, ""};
  if (request.batches_size() == 0) return invalid;
  const uint64_t index_capacity = cref != nullptr ? cref->capacity : ref->capacity;
  if (request.max_probe_count() > index_capacity)
    return {StatusCode::kInvalidArgument, "max_probe_count"};
  if (request.select_size() > 0) return invalid;  // no payload columns
  const uint64_t key_columns = cref != nullptr ? cref->schema.size() : 0;
  const uint64_t batch_objects =
      server::kJoinBatchObjectBytes + key_columns * server::kKeyColumnObjectBytes;
  if (request.batches_size() * batch_objects > server::kDefaultMaxResultBytes) {
    return {StatusCode::kResourceExhausted, ""};
  }
  uint64_t result_bytes = 0;
  for (int i = 0; i < request.batches_size(); ++i) {
    const v1::LeftBatch& b = request.batches(i);
    const std::string field = absl::StrCat("batches[", i, "].");
    if (!Decodes(b.has_keys(), b.keys(), 4) || !Decodes(b.has_keys64(), b.keys64(), 8)) {
      return invalid;
    }
    const bool narrow = Present(b.has_keys(), b.keys());
    const bool wide = Present(b.has_keys64(), b.keys64());
    uint64_t rows = 0;
    if (cref != nullptr) {
      if (narrow || wide)
        return {StatusCode::kInvalidArgument, field + (narrow ? "keys: " : "keys64: ")};
      const KeyColumnsOutcome keys =
          ModelKeyColumns(b.key_columns(), cref->schema, field, /*required=*/true);
      if (!keys.error.empty()) return {StatusCode::kInvalidArgument, keys.error};
      rows = keys.rows.size();
    } else {
      if (b.key_columns_size() > 0) return {StatusCode::kInvalidArgument, field + "key_columns: "};
      const bool index_wide = ref->key_type == engine::KeyType::kUint64;
      if (index_wide ? (narrow || !wide) : (wide || !narrow)) return invalid;
      rows = Keys(b, ref->key_type).size();
    }
    if (!Decodes(b.has_left_rows(), b.left_rows(), 4)) return invalid;
    if (Present(b.has_left_rows(), b.left_rows()) &&
        (Values<uint32_t>(b.left_rows()).size() != rows || b.first_left_row() != 0)) {
      return invalid;
    }
    if (b.first_left_row() > 0xffffffffu) return invalid;
    // Generated left row IDs stay below 0xffffffff (no wrap past 2^32).
    if (!Present(b.has_left_rows(), b.left_rows()) && rows != 0 &&
        b.first_left_row() + rows - 1 > 0xfffffffeu) {
      return invalid;
    }
    const uint64_t capacity = b.count_only() ? 0 : b.capacity() == 0 ? rows : b.capacity();
    if (capacity > (uint64_t{1} << 31)) return invalid;
    // Found and probes travel whole in the batch's first response message.
    const uint64_t head = rows * ((b.want_found() ? 1 : 0) + (b.want_probes() ? 4 : 0));
    if (server::JoinParts::FirstPartBytes(head, 0, 0, 0) >
        server::JoinParts::MessageRoom(fixture.max_message_bytes())) {
      return invalid;
    }
    result_bytes += batch_objects + std::min(capacity, rows) * 8 + head;
  }
  if (result_bytes > server::kDefaultMaxResultBytes) return {StatusCode::kResourceExhausted, ""};
  return {};
}

// The model's answer for every left row of batch `b` of an accepted request.
std::vector<RowAnswer> Answers(QueryFixture& fixture, const v1::JoinRequest& request, int i) {
  const v1::LeftBatch& b = request.batches(i);
  std::vector<RowAnswer> answers;
  const uint64_t bound = request.max_probe_count();
  if (const ColumnReference* cref = fixture.FindColumns(request.index()).second) {
    const KeyRowList keys =
        ModelKeyColumns(b.key_columns(), cref->schema, absl::StrCat("batches[", i, "]."), true)
            .rows;
    const std::vector<uint64_t> fps = Fingerprints(fixture.harness().backend(), cref->schema, keys);
    for (size_t r = 0; r < keys.size(); ++r)
      answers.push_back(cref->Answer(keys[r], fps[r], bound));
    return answers;
  }
  const ReferenceIndex* ref = fixture.Find(request.index()).second;
  for (uint64_t key : Keys(b, ref->key_type)) {
    const ReferenceIndex::Entry* e = ref->Find(key, bound);
    RowAnswer a;
    a.probes = ref->Probes(key, bound);
    if (e != nullptr) a.matches = ref->Matches(key, *e);
    answers.push_back(std::move(a));
  }
  return answers;
}

void CheckResponse(QueryFixture& fixture, const v1::JoinRequest& request,
                   const v1::JoinResponse& response) {
  const auto [word_version, ref] = fixture.Find(request.index());
  const auto [column_version, cref] = fixture.FindColumns(request.index());
  const server::IndexVersion* version = word_version != nullptr ? word_version : column_version;
  const bool build_overflowed = ref != nullptr ? ref->build_overflowed : cref->build_overflowed;
  FUZZ_CHECK(
      response.results_size() == request.batches_size(),
      absl::StrCat(response.results_size(), " results for ", request.batches_size(), " batches"));
  FUZZ_CHECK(response.index_version() == version->version,
             absl::StrCat("index_version ", response.index_version()));
  for (int i = 0; i < request.batches_size(); ++i) {
    const v1::LeftBatch& b = request.batches(i);
    const v1::JoinBatchResult& result = response.results(i);
    const std::vector<RowAnswer> answers = Answers(fixture, request, i);
    const std::vector<uint64_t> left_rows = Values<uint32_t>(b.left_rows());
    const uint64_t rows = answers.size();
    const uint64_t capacity = b.count_only() ? 0 : b.capacity() == 0 ? rows : b.capacity();
    const std::string what =
        absl::StrCat("join batch ", i, " (", rows, " keys, capacity ", capacity, ", index \"",
                     request.index(), "\", max_probe_count ", request.max_probe_count(), ")");
    std::vector<uint32_t> want_left, want_right;
    uint64_t total_probes = 0, max_probes = 0, found = 0;
    std::string want_found;
    std::vector<uint32_t> want_probe_counts;
    for (uint64_t r = 0; r < rows; ++r) {
      // Left row IDs are uint32: first_left_row + r as the engine computes it.
      const uint32_t id = left_rows.empty() ? static_cast<uint32_t>(b.first_left_row() + r)
                                            : static_cast<uint32_t>(left_rows[r]);
      const std::vector<uint32_t>& matches = answers[r].matches;
      auto pair = [&](uint32_t right) {
        want_left.push_back(id);
        want_right.push_back(right);
      };
      switch (request.kind()) {
        case v1::JOIN_KIND_LEFT_OUTER:
          if (matches.empty()) pair(engine::kEmptyKey);
          [[fallthrough]];
        case v1::JOIN_KIND_UNSPECIFIED:
        case v1::JOIN_KIND_INNER:
          for (uint32_t v : matches) pair(v);
          break;
        case v1::JOIN_KIND_LEFT_SEMI:
          if (!matches.empty()) pair(matches.front());
          break;
        default:  // JOIN_KIND_LEFT_ANTI (ExpectedStatus admitted no other)
          if (matches.empty()) pair(engine::kEmptyKey);
          break;
      }
      found += matches.empty() ? 0 : 1;
      want_found.push_back(matches.empty() ? 0 : 1);
      const uint32_t p = answers[r].probes;
      want_probe_counts.push_back(p);
      total_probes += p;
      max_probes = std::max<uint64_t>(max_probes, p);
    }
    const uint64_t count = want_left.size();
    const uint64_t kept = std::min(count, capacity);
    want_left.resize(kept);
    want_right.resize(kept);
    FUZZ_CHECK(result.count() == count && result.capacity() == capacity,
               absl::StrCat(what, ": count ", result.count(), " capacity ", result.capacity(),
                            "; expected count ", count));
    FUZZ_CHECK(result.batch() == static_cast<uint64_t>(i) && result.first_pair() == 0,
               absl::StrCat(what, ": batch ", result.batch(), " first_pair ", result.first_pair()));
    // Count-only: no pairs were asked for, so only a lossy build makes the count short.
    FUZZ_CHECK(result.overflow() == ((!b.count_only() && count > capacity) || build_overflowed),
               absl::StrCat(what, ": overflow ", result.overflow(), " with count ", count));
    FUZZ_CHECK(result.columns_size() == 0, what + ": columns without a select");
    FUZZ_CHECK(
        server::UnpackColumn<uint32_t>(result.left_rows()) == want_left &&
            server::UnpackColumn<uint32_t>(result.right_rows()) == want_right &&
            result.left_rows().size() == kept * 4 && result.right_rows().size() == kept * 4,
        absl::StrCat(what, ", kind ", v1::JoinKind_Name(request.kind()),
                     ": pairs differ from the reference (", result.left_rows().size(), " and ",
                     result.right_rows().size(), " bytes, expected ", kept, " pairs)"));
    const v1::QueryStatistics& s = result.statistics();
    FUZZ_CHECK(s.found() == found && s.missing() == rows - found &&
                   s.total_probes() == total_probes && s.max_probes() == max_probes,
               absl::StrCat(what, ": statistics ", s.ShortDebugString()));
    FUZZ_CHECK(result.found() == (b.want_found() ? want_found : std::string()),
               what + ": found column differs");
    FUZZ_CHECK(server::UnpackColumn<uint32_t>(result.probes()) ==
                       (b.want_probes() ? want_probe_counts : std::vector<uint32_t>()) &&
                   result.probes().size() == (b.want_probes() ? rows * 4 : 0),
               what + ": probes column differs");
  }
}

}  // namespace
}  // namespace gpujoin::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpujoin;
  using namespace gpujoin::fuzz;
  static QueryFixture* fixture = new QueryFixture();
  v1::JoinRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  v1::JoinResponse response;
  const absl::Status status = fixture->ops().Join(request, &response);
  const Expected expected = ExpectedStatus(*fixture, request);
  FUZZ_CHECK(status.code() == expected.code && MessageHas(status, expected.field),
             absl::StrCat("Join returned ", Describe(status), "; expected ",
                          absl::StatusCodeToString(expected.code), " naming \"", expected.field,
                          "\" for ", request.ShortDebugString().substr(0, 300)));
  if (status.ok()) CheckResponse(*fixture, request, response);
  return 0;
}
