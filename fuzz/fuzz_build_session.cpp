// Fuzz target: one BuildIndex stream, as the service runs it: BuildSession::Add
// for each message, then BuildSession::Finish (server/src/ops/build_session.cpp), on the
// CPU backend with a 64 KiB memory budget (8192 slots at most) and staging limits
// of 2 and 3 KiB (--max-staged-bytes and --max-build-staged-bytes, in either order
// by the input's length being odd or even). Before each input
// the registry holds one index, "old", so that replace and create-only builds
// meet a live name (a new index is dropped after its checks; the harness starts
// over after "old" was replaced).
//
// Input: a sequence of frames (fuzz_support.hpp SplitFrames), each the bytes of
// one BuildIndexRequest; a frame that does not parse ends the stream with an
// error, as in the service (nothing is installed). Checked:
//  - the stream's status is OK, INVALID_ARGUMENT, RESOURCE_EXHAUSTED or
//    ALREADY_EXISTS (FAILED_PRECONDITION for spec.wait_durable, the harness
//    having no --data-dir), and the documented errors are never OK (a chunk before the
//    spec, two specs, a bad name, key type or duplicate policy, keys of the other width than the
//    spec's, explicit values with batch mode, values without explicit_values, a
//    row base or validity without batch mode, generated values reaching
//    0xffffffff, a live name without replace, a max_probe_count above the
//    capacity the index would have; payload: a bad or repeated column
//    name or type in the spec, a chunk column that is not declared, of another
//    type, with data, offsets or validity of the wrong size, or a column whose
//    rows do not add up to the keys');
//  - a refusal that names spec.max_probe_count is one for a bound above the
//    capacity the index would have: spec.capacity, the one sized for
//    spec.expected_rows, or, for a table sized from the rows sent, the one for
//    all of them (never the interim size of the rows of the first chunks);
//  - a failed build installs nothing: "old" keeps its version, no other name
//    appears, and the budgets hold only what "old" holds once the session is gone;
//  - a successful build is installed under its name (the next version when it replaced
//    "old"), with the spec's capacity and probe bound, statistics that add up to
//    its rows (invalid rows = reserved keys and masked rows), a table in the
//    layout every backend keeps, and, when no row overflowed, exactly the distinct
//    valid keys, each with the value of its first row (first_value + row, the
//    explicit value, or row_base + position), and, for keep_all, max_group_rows
//    the most valid rows of one key (0 for lowest_row); its payload columns are the spec's,
//    by name and type, each with at most one null per retained key; the budget
//    then holds the live tables (payload included) and the staging budget nothing;
//  - key schemas (spec.key_type KEY_TYPE_COLUMNS): each chunk's key_columns are
//    checked by the documented rules (key_model.hpp: count, name, type, length,
//    data, offsets, UTF-8, validity), a refusal for them naming the field; a
//    successful build's table holds exactly the model's keys (a map from each
//    key's tuple of byte strings to its build rows, the lowest in the table, a
//    row with a null or masked out invalid), and the index answers a lookup of
//    every build row's key and one beside it (found, value, probes, match
//    count) as the model does.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <optional>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "fuzz_support.hpp"
#include "gpujoin/engine/dictionary.hpp"
#include "wire/column_codec.hpp"

namespace gpujoin::fuzz {
namespace {

template <typename T, typename Column>
std::vector<T> Values(const Column& c) {
  if (!c.packed().empty()) return server::UnpackColumn<T>(c.packed());
  return std::vector<T>(c.values().v().begin(), c.values().v().end());
}

template <typename Column>
bool Present(bool has, const Column& c) {
  return has && (!c.packed().empty() || c.has_values());
}

// Staging limits small enough for inputs of a few KiB: the host staging budget
// below the per-build limit, or the other way round, so that each refusal is met.
server::ServerConfig BuildConfig(bool staging_first) {
  server::ServerConfig config;
  config.max_staged_bytes = staging_first ? 2048 : 3072;
  config.max_build_staged_bytes = staging_first ? 3072 : 2048;
  return config;
}

// What the messages of a stream say, as far as the checks need it.
struct Stream {
  bool have_spec = false;
  v1::IndexSpec spec;
  bool must_fail = false;  // a documented error was sent
  std::string why;         // which
  bool wide = false;       // spec.key_type is uint64
  // spec.key_type is columns: a key schema (when the spec's is one the rules
  // accept), whose chunks' key_columns the model decodes (key_model.hpp).
  bool columns = false;
  std::optional<KeySchemaModel> schema;
  uint64_t chunks = 0;  // chunk messages taken
  // The field a refusal must name: set when the first documented error is one
  // of a chunk's key columns (the first thing a chunk's checks decode).
  std::string field;
  // The rows of the chunks, in order: key (of the spec's width, as uint64_t; 0
  // for a key schema), its key columns' tuple (a key schema; nullopt: a null),
  // value (for explicit values), generated value and validity.
  std::vector<uint64_t> keys;
  KeyRowList key_rows;
  std::vector<uint32_t> values, row_values;
  std::vector<bool> valid;
  // Payload: the declared columns' types and the rows sent for each.
  std::map<std::string, v1::ColumnType> payload_types;
  std::map<std::string, uint64_t> payload_rows;

  void Error(std::string reason) {
    if (!must_fail) why = std::move(reason);
    must_fail = true;
  }

  // Records `m` (which Add accepted or rejected) and the documented errors in it.
  void Take(const v1::BuildIndexRequest& m) {
    if (m.has_spec()) {
      if (have_spec) return Error("a second spec");
      have_spec = true;
      spec = m.spec();
      if (!ValidIndexName(spec.name())) Error("an invalid name");
      if (spec.explicit_values() && spec.batch_mode()) Error("explicit_values with batch_mode");
      if (spec.name() == "old" && !spec.replace()) Error("a live name without replace");
      // The harness has no --data-dir: FAILED_PRECONDITION.
      if (spec.wait_durable()) Error("wait_durable without --data-dir");
      if (spec.key_type() != v1::KEY_TYPE_UNSPECIFIED && spec.key_type() != v1::KEY_TYPE_UINT32 &&
          spec.key_type() != v1::KEY_TYPE_UINT64 && spec.key_type() != v1::KEY_TYPE_COLUMNS) {
        Error("a key type that is none");
      }
      wide = spec.key_type() == v1::KEY_TYPE_UINT64;
      columns = spec.key_type() == v1::KEY_TYPE_COLUMNS;
      if (!columns && spec.key_columns_size() > 0) Error("key columns for an integer key type");
      if (columns) {
        schema = ModelKeySchema(spec.key_columns());
        if (!schema) Error("a key schema the rules refuse");
      }
      if (spec.duplicates() != v1::DUPLICATE_POLICY_UNSPECIFIED &&
          spec.duplicates() != v1::DUPLICATE_POLICY_LOWEST_ROW &&
          spec.duplicates() != v1::DUPLICATE_POLICY_KEEP_ALL) {
        Error("a duplicate policy that is none");
      }
      for (const v1::PayloadColumnSpec& p : spec.payload()) {
        if (!ValidColumnName(p.name())) Error("an invalid payload column name");
        if (p.type() <= v1::COLUMN_TYPE_UNSPECIFIED || p.type() > v1::COLUMN_TYPE_STRING) {
          Error("a payload column type that is none");
        }
        if (!payload_types.emplace(p.name(), p.type()).second) Error("a payload column twice");
        payload_rows[p.name()] = 0;
      }
      return;
    }
    if (!m.has_chunk()) return Error("a message with neither spec nor chunk");
    if (!have_spec) return Error("a chunk before the spec");
    const v1::BuildChunk& c = m.chunk();
    const std::string prefix = absl::StrCat("chunks[", chunks++, "].");
    if (columns && (Present(c.has_keys(), c.keys()) || Present(c.has_keys64(), c.keys64()))) {
      Error("integer keys for a key schema");
    }
    if (!columns && c.key_columns_size() > 0) Error("key columns for an integer index");
    std::vector<uint64_t> k;
    KeyRowList k_rows;
    if (columns) {
      if (!schema) return;  // the spec was refused
      // A batch chunk needs keys unless it carries payload only.
      KeyColumnsOutcome decoded = ModelKeyColumns(c.key_columns(), *schema, prefix,
                                                  spec.batch_mode() && c.payload_size() == 0);
      if (!decoded.error.empty()) {
        if (!must_fail) field = decoded.error;
        return Error("key columns the rules refuse (" + decoded.error + ")");
      }
      k_rows = std::move(decoded.rows);
      k.assign(k_rows.size(), 0);
    } else if (wide) {
      k = Values<uint64_t>(c.keys64());
    } else {
      for (uint32_t key : Values<uint32_t>(c.keys())) k.push_back(key);
    }
    const std::vector<uint32_t> v = Values<uint32_t>(c.values());
    const std::vector<uint32_t> mask = Values<uint32_t>(c.validity());
    if (!columns &&
        (wide ? Present(c.has_keys(), c.keys()) : Present(c.has_keys64(), c.keys64()))) {
      Error("keys of the other width");
    }
    if (Present(c.has_values(), c.values()) && !spec.explicit_values()) {
      Error("values without explicit_values");
    }
    if (!spec.batch_mode() && c.row_base() != 0) Error("a row base without batch_mode");
    if (!spec.batch_mode() && Present(c.has_validity(), c.validity())) {
      Error("validity without batch_mode");
    }
    if (spec.batch_mode() && !k.empty() && c.row_base() + k.size() - 1 > 0xfffffffeu) {
      Error("a row base whose last row reaches 0xffffffff");
    }
    if (!spec.batch_mode() && !spec.explicit_values() && !k.empty() &&
        spec.first_value() + keys.size() + k.size() - 1 > 0xfffffffeu) {
      Error("a first value whose last row reaches 0xffffffff");
    }
    for (size_t r = 0; r < k.size(); ++r) {
      keys.push_back(k[r]);
      key_rows.push_back(columns ? std::optional<KeyTuple>(std::move(k_rows[r])) : std::nullopt);
      valid.push_back(mask.empty() || r >= mask.size() || mask[r] != 0);
      row_values.push_back(spec.batch_mode()
                               ? static_cast<uint32_t>(c.row_base() + r)
                               : static_cast<uint32_t>(spec.first_value() + keys.size() - 1));
    }
    values.insert(values.end(), v.begin(), v.end());
    for (const v1::Column& p : c.payload()) TakePayload(p);
  }

  // The documented size rules of one payload chunk column.
  void TakePayload(const v1::Column& p) {
    auto it = payload_types.find(p.name());
    if (it == payload_types.end()) return Error("an undeclared payload column");
    if (p.type() != it->second) return Error("a payload column of another type");
    const uint64_t rows = p.length();
    if (rows > 0xffffffffu) return Error("a payload chunk of more rows than a build has");
    const uint64_t bitmap = (rows + 7) / 8;
    if (!p.validity().empty() && p.validity().size() != bitmap) {
      Error("a payload validity bitmap of the wrong size");
    }
    switch (p.type()) {
      case v1::COLUMN_TYPE_STRING:
      case v1::COLUMN_TYPE_BINARY:
        if (p.offsets().size() != (rows + 1) * 4) Error("payload offsets of the wrong count");
        break;
      case v1::COLUMN_TYPE_BOOL:
        if (p.data().size() != bitmap || !p.offsets().empty()) {
          Error("a payload bool bitmap of the wrong size");
        }
        break;
      default: {
        const uint64_t width = p.type() == v1::COLUMN_TYPE_UINT32 ||
                                       p.type() == v1::COLUMN_TYPE_INT32 ||
                                       p.type() == v1::COLUMN_TYPE_FLOAT32
                                   ? 4
                                   : 8;
        if (p.data().size() != rows * width || !p.offsets().empty()) {
          Error("fixed-width payload data of the wrong size");
        }
      }
    }
    payload_rows[p.name()] += rows;
  }

  // The capacity the index would have (docs/api.md, BuildIndex): spec.capacity,
  // or the power of two holding spec.expected_rows or, with neither, all the
  // rows sent (at least one) at the target load factor; nullopt when the spec's
  // sizing is itself refused. `rows_known`: the whole input has been taken.
  std::optional<uint64_t> FinalCapacity(bool rows_known) const {
    if (spec.capacity() != 0) return spec.capacity();
    const double lf = spec.target_load_factor() == 0 ? 0.5 : spec.target_load_factor();
    if (!(lf > 0 && lf <= 1)) return std::nullopt;
    if (spec.expected_rows() == 0 && !rows_known) return std::nullopt;
    const uint64_t rows = spec.expected_rows() != 0 ? spec.expected_rows()
                                                    : std::max<uint64_t>(keys.size(), 1);
    const double needed = std::ceil(static_cast<double>(rows) / lf);
    if (needed > static_cast<double>(uint64_t{1} << 31)) return std::nullopt;
    return std::bit_ceil(std::max<uint64_t>(1, static_cast<uint64_t>(needed)));
  }

  // Whether a refusal may name spec.max_probe_count: the bound is above 2^32 - 1
  // or above the capacity the index would have.
  bool ProbeBoundRefusable(bool rows_known) const {
    if (spec.max_probe_count() > 0xffffffffu) return true;
    const std::optional<uint64_t> capacity = FinalCapacity(rows_known);
    return capacity && spec.max_probe_count() > *capacity;
  }

  // At the end of the input: every payload column has one row per key row, and
  // the probe bound fits the table the rows size.
  void End() {
    for (const auto& [name, rows] : payload_rows) {
      if (rows != keys.size()) Error("payload rows that do not add up to the keys'");
    }
    if (ProbeBoundRefusable(/*rows_known=*/true)) Error("a max_probe_count above the capacity");
  }
};

// Looks up every build row's key of key-schema index `v` (a null for an
// invalid row) and a key beside the first valid one, and checks found, value,
// probes and match count of each row against the model `ref`.
void CheckColumnLookup(Harness& h, const ColumnReference& ref, const server::IndexVersion& v,
                       const std::string& what) {
  KeyRowList query = ref.rows;
  for (const auto& row : ref.rows) {
    if (!row) continue;
    KeyTuple near = *row;
    if (ref.schema.types[0] == v1::COLUMN_TYPE_STRING ||
        ref.schema.types[0] == v1::COLUMN_TYPE_BINARY) {
      near[0].push_back('~');
    } else {
      near[0][0] = static_cast<char>(near[0][0] ^ 1);
    }
    query.push_back(std::move(near));
    break;
  }
  v1::LookupRequest request;
  request.set_index(v.name);
  request.set_want_probes(true);
  request.set_want_match_counts(true);
  AppendKeyColumns(ref.schema, query, /*named=*/true, request.mutable_key_columns());
  v1::LookupResponse response;
  const absl::Status status = h.ops().Lookup(request, &response);
  FUZZ_CHECK(status.ok(), what + ": a lookup of its keys returned " + Describe(status));
  const size_t rows = query.size();
  FUZZ_CHECK(
      response.values().size() == rows * 4 && response.found().size() == rows &&
          response.probes().size() == rows * 4 && response.match_counts().size() == rows * 4,
      absl::StrCat(what, ": a lookup of ", rows, " keys answered ", response.found().size()));
  const std::vector<uint32_t> values = server::UnpackColumn<uint32_t>(response.values());
  const std::vector<uint32_t> probes = server::UnpackColumn<uint32_t>(response.probes());
  const std::vector<uint32_t> counts = server::UnpackColumn<uint32_t>(response.match_counts());
  const std::vector<uint64_t> fps = Fingerprints(h.backend(), ref.schema, query);
  for (size_t r = 0; r < rows; ++r) {
    const RowAnswer a = ref.Answer(query[r], fps[r], 0);
    const bool hit = !a.matches.empty();
    FUZZ_CHECK(response.found()[r] == (hit ? 1 : 0) &&
                   values[r] == (hit ? a.matches.front() : engine::kEmptyKey) &&
                   probes[r] == a.probes && counts[r] == a.matches.size(),
               absl::StrCat(what, ": lookup row ", r, " gave found ", int(response.found()[r]),
                            " value ", values[r], " probes ", probes[r], " matches ", counts[r],
                            "; the model: found ", hit, " value ",
                            hit ? a.matches.front() : engine::kEmptyKey, " probes ", a.probes,
                            " matches ", a.matches.size()));
  }
}

// The table of key-schema build `v` against the model of its rows (invalid:
// masked out or a null key column), its statistics, and a lookup of its keys.
void CheckColumnTable(Harness& h, const Stream& s, const server::IndexVersion& v,
                      const std::string& what) {
  const engine::HashIndex& index = *v.index;
  const uint64_t rows = s.keys.size();
  KeyRowList valid_rows;
  std::vector<uint32_t> values;
  uint64_t invalid = 0;
  for (size_t r = 0; r < rows; ++r) {
    const bool ok = s.valid[r] && s.key_rows[r].has_value();
    valid_rows.push_back(ok ? std::optional<KeyTuple>(s.key_rows[r]) : std::nullopt);
    invalid += ok ? 0 : 1;
    values.push_back(s.spec.explicit_values() ? s.values[r] : s.row_values[r]);
  }
  const engine::BuildStatistics& st = index.build_statistics();
  FUZZ_CHECK(st.unique_keys + st.duplicate_rows + st.overflow_rows + st.invalid_rows == rows &&
                 st.invalid_rows == invalid,
             absl::StrCat(what, ": statistics unique ", st.unique_keys, " duplicate ",
                          st.duplicate_rows, " overflow ", st.overflow_rows, " invalid ",
                          st.invalid_rows, " for ", rows, " rows (", invalid, " invalid)"));
  const ColumnReference ref =
      ReadColumnReference(h.backend(), index, *s.schema, std::move(valid_rows), std::move(values));
  if (st.overflow_rows != 0) {
    FUZZ_CHECK(ref.keep_all || st.max_group_rows == 0,
               absl::StrCat(what, ": max_group_rows ", st.max_group_rows, " on lowest_row"));
    return;
  }
  uint64_t largest = 0;
  for (const auto& [key, group] : ref.groups) largest = std::max<uint64_t>(largest, group.size());
  FUZZ_CHECK(
      st.unique_keys == ref.groups.size() &&
          st.duplicate_rows == rows - invalid - ref.groups.size() &&
          st.max_group_rows == (ref.keep_all ? largest : 0),
      absl::StrCat(what, ": unique_keys ", st.unique_keys, " duplicate_rows ", st.duplicate_rows,
                   " max_group_rows ", st.max_group_rows, " for ", ref.groups.size(),
                   " distinct valid keys (the largest of ", largest, " rows)"));
  CheckColumnLookup(h, ref, v, what);
}

// `old_version`: the version of "old" before the build (a replacement is the
// next one); `old_bytes`: what its table holds.
void CheckInstalled(Harness& h, const Stream& s, const server::IndexVersion& v,
                    uint64_t old_version, uint64_t old_bytes) {
  const std::string what = absl::StrCat("build of \"", s.spec.name(), "\"");
  FUZZ_CHECK(v.name == s.spec.name() && h.registry().Get(v.name).get() == &v,
             what + ": not the live version of its name");
  // A new name may have been built (and dropped) by an earlier input.
  FUZZ_CHECK(s.spec.name() == "old" ? v.version == old_version + 1 : v.version >= 1,
             absl::StrCat(what, ": version ", v.version, " (\"old\" had ", old_version, ")"));
  const engine::HashIndex& index = *v.index;
  if (s.spec.capacity() != 0) {
    FUZZ_CHECK(index.spec().capacity == s.spec.capacity(),
               absl::StrCat(what, ": capacity ", index.spec().capacity));
  }
  if (s.columns) {
    FUZZ_CHECK(index.key_type() == engine::KeyType::kColumns &&
                   index.spec().key_columns.size() == static_cast<size_t>(s.spec.key_columns_size()),
               what + ": the index has the wrong key type or schema");
  } else {
    FUZZ_CHECK(index.key_type() == (s.wide ? engine::KeyType::kUint64 : engine::KeyType::kUint32),
               what + ": the index has the wrong key type");
  }
  FUZZ_CHECK(index.spec().max_probe_count == s.spec.max_probe_count(),
             absl::StrCat(what, ": max_probe_count ", index.spec().max_probe_count));
  const bool keep_all = s.spec.duplicates() == v1::DUPLICATE_POLICY_KEEP_ALL;
  FUZZ_CHECK(index.spec().duplicates == (keep_all ? engine::DuplicatePolicy::kKeepAll
                                                  : engine::DuplicatePolicy::kLowestRow),
             what + ": the index has the wrong duplicate policy");
  const uint64_t rows = s.keys.size();
  FUZZ_CHECK(index.built() && index.built_rows() == rows,
             absl::StrCat(what, ": built_rows ", index.built_rows(), " for ", rows, " rows"));
  if (s.spec.explicit_values()) {
    FUZZ_CHECK(s.values.size() == rows,
               absl::StrCat(what, ": ", s.values.size(), " values accepted for ", rows, " keys"));
  }
  const engine::BuildStatistics& st = index.build_statistics();
  if (s.columns) {
    CheckColumnTable(h, s, v, what);
  } else {
    // The reference: each distinct valid key and the value of its first row.
    std::map<uint64_t, uint32_t> first;
    std::map<uint64_t, uint64_t> valid_rows;  // per key
    uint64_t invalid = 0;
    for (size_t r = 0; r < rows; ++r) {
      if (s.keys[r] == (s.wide ? engine::kEmptyKey64 : engine::kEmptyKey) || !s.valid[r]) {
        ++invalid;
        continue;
      }
      first.emplace(s.keys[r], s.spec.explicit_values() ? s.values[r] : s.row_values[r]);
      ++valid_rows[s.keys[r]];
    }
    FUZZ_CHECK(st.unique_keys + st.duplicate_rows + st.overflow_rows + st.invalid_rows == rows &&
                   st.invalid_rows == invalid,
               absl::StrCat(what, ": statistics unique ", st.unique_keys, " duplicate ",
                            st.duplicate_rows, " overflow ", st.overflow_rows, " invalid ",
                            st.invalid_rows, " for ", rows, " rows (", invalid, " invalid)"));
    const ReferenceIndex ref = ReadReference(index);
    for (const auto& [key, entry] : ref.entries) {
      FUZZ_CHECK(first.count(key) == 1, absl::StrCat(what, ": key ", key, " was never sent"));
      if (!s.spec.explicit_values()) {
        FUZZ_CHECK(entry.value != engine::kEmptyKey,
                   absl::StrCat(what, ": key ", key, " has the generated value 0xffffffff"));
      }
    }
    if (st.overflow_rows == 0) {
      FUZZ_CHECK(ref.entries.size() == first.size() && st.unique_keys == first.size() &&
                     st.duplicate_rows == rows - invalid - first.size(),
                 absl::StrCat(what, ": ", ref.entries.size(), " keys in the table, ", first.size(),
                              " distinct valid keys sent"));
      for (const auto& [key, value] : first) {
        FUZZ_CHECK(ref.entries.at(key).value == value,
                   absl::StrCat(what, ": key ", key, " has value ", ref.entries.at(key).value,
                                "; its first row's is ", value));
      }
      // Without overflow a keep_all group holds every valid row of its key.
      uint64_t largest = 0;
      for (const auto& [key, n] : valid_rows) largest = std::max(largest, n);
      FUZZ_CHECK(st.max_group_rows == (keep_all ? largest : 0),
                 absl::StrCat(what, ": max_group_rows ", st.max_group_rows,
                              "; the largest key has ", largest, " valid rows"));
    } else {
      FUZZ_CHECK(keep_all || st.max_group_rows == 0,
                 absl::StrCat(what, ": max_group_rows ", st.max_group_rows, " on lowest_row"));
    }
  }
  // The declared columns, then a codes column per dictionary (one for each
  // string or binary column with few enough distinct values).
  const size_t dictionaries = index.dictionaries() == nullptr ? 0 : index.dictionaries()->size();
  FUZZ_CHECK(index.payload().size() == static_cast<size_t>(s.spec.payload_size()) + dictionaries &&
                 v.payload_names.size() == static_cast<size_t>(s.spec.payload_size()),
             absl::StrCat(what, ": ", index.payload().size(), " payload columns stored (",
                          dictionaries, " of dictionary codes), ", s.spec.payload_size(),
                          " declared"));
  if (index.dictionaries() != nullptr) {
    for (size_t k = 0; k < dictionaries; ++k) {
      const engine::PayloadDictionary& d = (*index.dictionaries())[k];
      FUZZ_CHECK(d.column < v.payload_names.size() &&
                     engine::IsVariableWidth(index.payload()[d.column].type) &&
                     d.codes_column == v.payload_names.size() + k &&
                     index.payload()[d.codes_column].type == engine::ColumnType::kUint32,
                 absl::StrCat(what, ": dictionary ", k, " codes column ", d.column, " into ",
                              d.codes_column));
    }
  }
  for (size_t i = 0; i < v.payload_names.size(); ++i) {
    const v1::PayloadColumnSpec& declared = s.spec.payload(static_cast<int>(i));
    const engine::PayloadColumnInfo& stored = index.payload()[i];
    FUZZ_CHECK(v.payload_names[i] == declared.name() &&
                   server::ToWireColumnType(stored.type) == declared.type() &&
                   stored.null_count <= st.unique_keys,
               absl::StrCat(what, ": payload column ", i, " \"", v.payload_names[i], "\" of type ",
                            static_cast<int>(stored.type), " with ", stored.null_count,
                            " nulls; declared \"", declared.name(), "\" of type ",
                            static_cast<int>(declared.type())));
  }
  FUZZ_CHECK(
      h.budget().used_bytes() == old_bytes + index.held_bytes() && h.staging().used_bytes() == 0,
      absl::StrCat(what, ": budget holds ", h.budget().used_bytes(), " bytes (tables ", old_bytes,
                   " + ", index.held_bytes(), "), staging ", h.staging().used_bytes()));
}

}  // namespace
}  // namespace gpujoin::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpujoin;
  using namespace gpujoin::fuzz;
  // Inputs of odd length run with the staging budget as the first limit.
  static Harness* harnesses[2] = {new Harness(64 << 10, BuildConfig(false)),
                                  new Harness(64 << 10, BuildConfig(true))};
  static std::shared_ptr<const server::IndexVersion> olds[2];
  Harness& h = *harnesses[size % 2];
  std::shared_ptr<const server::IndexVersion>& old = olds[size % 2];
  static uint64_t installs = 0;
  // A failed build leaves the state as it was (checked below) and a new index is
  // dropped again, so only a replaced "old" (or, to bound the registry's record
  // of names built, every 4096th install) makes the next input start over.
  if (old == nullptr) {
    h.Reset();
    old = h.Build<uint32_t>("old", 16, 0, 0, {1, 2, 3, 4});
  }
  const uint64_t old_bytes = old->index->held_bytes();
  const uint64_t old_version = old->version;

  Stream stream;
  absl::Status status;
  bool finished = false;  // every message was added and Finish ran
  std::shared_ptr<const server::IndexVersion> installed;
  {
    server::BuildSession session(&h.ops());
    for (std::string_view frame : SplitFrames(AsView(data, size), 64)) {
      v1::BuildIndexRequest message;
      if (!message.ParseFromArray(frame.data(), static_cast<int>(frame.size()))) {
        status = absl::InvalidArgumentError("message could not be parsed");
        break;
      }
      stream.Take(message);
      status = session.Add(std::move(message));
      if (!status.ok()) break;
    }
    if (status.ok()) {
      stream.End();
      std::atomic<bool> cancelled{false};
      auto built = session.Finish(cancelled);
      finished = true;
      status = built.status();
      if (built.ok()) installed = *built;
    }
  }
  using absl::StatusCode;
  FUZZ_CHECK(status.ok() || status.code() == StatusCode::kInvalidArgument ||
                 status.code() == StatusCode::kResourceExhausted ||
                 status.code() == StatusCode::kAlreadyExists ||
                 (status.code() == StatusCode::kFailedPrecondition && stream.spec.wait_durable()),
             "the build returned " + Describe(status));
  FUZZ_CHECK(!(status.ok() && stream.must_fail), "the build succeeded despite " + stream.why);
  FUZZ_CHECK(stream.field.empty() || MessageHas(status, stream.field),
             absl::StrCat("the build returned ", Describe(status), "; expected a refusal naming \"",
                          stream.field, "\""));
  if (absl::StrContains(status.message(), "max_probe_count")) {
    FUZZ_CHECK(stream.ProbeBoundRefusable(finished),
               absl::StrCat("a probe bound of ", stream.spec.max_probe_count(),
                            " refused although it fits the capacity the index would have: ",
                            Describe(status)));
  }
  if (status.code() == StatusCode::kAlreadyExists) {
    FUZZ_CHECK(stream.spec.name() == "old" && !stream.spec.replace(),
               "ALREADY_EXISTS for \"" + stream.spec.name() + "\": " + Describe(status));
  }
  if (status.ok()) {
    FUZZ_CHECK(installed != nullptr, "an OK build returned no version");
    // `old` is still held here, so its table stays counted even when replaced.
    CheckInstalled(h, stream, *installed, old_version, old_bytes);
    const bool replaced = stream.spec.name() == "old";
    FUZZ_CHECK(h.registry().size() == (replaced ? 1u : 2u),
               absl::StrCat(h.registry().size(), " live indexes after one build"));
    installed.reset();
    if (replaced || ++installs % 4096 == 0) {
      old.reset();  // the next input starts over
    } else {
      v1::DropIndexRequest drop;
      drop.set_name(stream.spec.name());
      v1::DropIndexResponse dropped;
      const absl::Status s = h.ops().DropIndex(drop, &dropped);
      FUZZ_CHECK(s.ok() && h.registry().size() == 1 && h.budget().used_bytes() == old_bytes,
                 absl::StrCat("dropping \"", stream.spec.name(), "\": ", Describe(s), ", ",
                              h.budget().used_bytes(), " budget bytes held after"));
    }
  } else {
    const auto live = h.registry().Get("old");
    FUZZ_CHECK(live == old && live->version == old_version && h.registry().size() == 1,
               "a failed build changed the registry: " + Describe(status));
    FUZZ_CHECK(h.budget().used_bytes() == old_bytes && h.staging().used_bytes() == 0,
               absl::StrCat("a failed build left ", h.budget().used_bytes() - old_bytes,
                            " budget bytes and ", h.staging().used_bytes(), " staging bytes held (",
                            Describe(status), ")"));
  }
  return 0;
}
