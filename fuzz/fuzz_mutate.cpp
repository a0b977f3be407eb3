// Fuzz target: a Mutate stream (server/src/ops/mutate.cpp) on the CPU backend,
// each batch run as the stream reactor runs it (MutateTraits: Process, the
// in-band error of a bad batch, Seal), against a dictionary model
// (mutate_model.hpp) of one index per input: uint32, uint64 or a key schema
// (the query fixture's "s", "c" or "cm"); lowest_row or keep_all; row IDs or
// explicit values; with or without a payload column (int64, string, bool or
// binary); a fuzzed capacity, max_load_factor, probe bound, first value and
// --max-mutation-rows.
//
// Input: frames (SplitFrames): the index's setup and build rows, then up to 24
// batches, each drawing its delete and upsert keys from a universe of keys that
// collide and differ by a byte (the reserved word and a null key among them) or
// taking them raw, with at most one defect (mutate_model.hpp, mutate_input: a
// wrong key field, both packed and listed keys, ragged packed keys, malformed
// key columns, missing / extra / both-way values, values for a row-ID index, a
// missing / renamed / retyped / longer / shorter / malformed payload column,
// payload without upserts, an empty batch, a bad or unknown index name).
// Checked after the build and after every batch:
//  - the answer is the one the documented checks give, in their order: a bad
//    batch is answered in-band (error code and a message naming the field; the
//    response carries the batch ID and nothing else), an upsert key no index
//    can hold names its row, more rows than --max-mutation-rows and row IDs
//    past 0xfffffffe are RESOURCE_EXHAUSTED;
//  - a refused batch changes nothing: the index's description (sequence,
//    capacity, statistics, bytes, next row ID) is byte for byte the same, the
//    budget holds the same bytes, and the content is the model's;
//  - an applied batch reports the model's counts (upsert rows, inserted,
//    updated, deleted and not found keys, deleted rows), the next mutation
//    sequence, the build version, statistics of the model's keys and rows
//    (no overflow), the capacity GrownCapacity gives (at least that with a
//    probe bound), `rehashed` exactly when it grew, and the description agrees
//    (rehashes, next row ID, probe bound); the budget holds exactly the
//    table's bytes and the staging budget nothing;
//  - the content: a lookup of every key of the universe and every key the input
//    named gives, per key, found, the value of its first row, its group's size
//    and its first row's payload, and the mutation sequence; an inner join of
//    the same keys gives every row of each key's group in group order, with its
//    payload.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "fuzz_support.hpp"
#include "mutate_batches.hpp"
#include "mutate_model.hpp"
#include "rpc/rpc_traits.hpp"
#include "wire/column_codec.hpp"

namespace gpujoin::fuzz {
namespace {

using namespace mutate_input;

constexpr uint64_t kBudgetBytes = uint64_t{64} << 20;

// `keys` for a failure message: each key's columns escaped, or null.
std::string KeysText(const KeyRowList& keys) {
  std::string out = "[";
  for (const auto& key : keys) {
    if (out.size() > 1) out += ", ";
    if (!key) {
      out += "null";
      continue;
    }
    for (size_t c = 0; c < key->size(); ++c) {
      absl::StrAppend(&out, c == 0 ? "\"" : "\"|\"", absl::CEscape((*key)[c]));
    }
    out += "\"";
  }
  return out + "]";
}

class Fixture {
 public:
  explicit Fixture(uint64_t max_rows) : harness_(kBudgetBytes, Config(max_rows)) {}

  void Run(const std::vector<std::string_view>& frames) {
    harness_.Reset();
    Reader setup_in(frames.empty() ? std::string_view() : frames[0]);
    s_ = ReadSetup(setup_in);
    model_ = MutationModel(s_.keep_all, s_.words());
    named_.clear();
    if (!BuildIndex(setup_in)) return;
    CheckIndex("after the build");
    for (size_t b = 1; b < frames.size(); ++b) {
      Reader in(frames[b]);
      RunBatch(static_cast<uint32_t>(b), in);
    }
  }

 private:
  static server::ServerConfig Config(uint64_t max_rows) {
    server::ServerConfig config;
    config.max_mutation_rows = max_rows;
    return config;
  }

  // Builds index kIndex from the setup's build rows; false when the shape is
  // not one this target checks (generated values past 0xfffffffe, overflow).
  bool BuildIndex(Reader& in) {
    KeyRowList keys;
    while (!in.done() && keys.size() < kMaxBuildRows) keys.push_back(ReadKey(in, s_));
    for (const auto& k : keys) named_.insert(k);
    const uint32_t rows = static_cast<uint32_t>(keys.size());
    if (!s_.explicit_values && rows > 0 && uint64_t{s_.first_value} + rows - 1 > 0xfffffffeu) {
      return false;  // refused by the build (fuzz_build_session's concern)
    }
    std::vector<uint32_t> values;
    std::vector<Cell> cells;
    for (uint32_t r = 0; r < rows; ++r) {
      values.push_back(s_.explicit_values ? 10000 + 7 * r : s_.first_value + r);
      cells.push_back(r % 4 == 3 ? std::nullopt : CellOf(s_.payload_type, 0, r));
      model_.AddBuildRow(keys[r], ModelRow{values[r], cells[r]});
    }
    next_row_id_ = s_.explicit_values ? 0 : uint64_t{s_.first_value} + rows;

    server::BuildSession session(&harness_.ops());
    v1::BuildIndexRequest spec;
    v1::IndexSpec& sp = *spec.mutable_spec();
    sp.set_name(kIndex);
    sp.set_capacity(s_.capacity);
    sp.set_max_probe_count(s_.probe_bound);
    sp.set_explicit_values(s_.explicit_values);
    if (!s_.explicit_values) sp.set_first_value(s_.first_value);
    if (s_.max_load_factor != 0) sp.set_max_load_factor(s_.max_load_factor);
    if (s_.keep_all) sp.set_duplicates(v1::DUPLICATE_POLICY_KEEP_ALL);
    sp.set_key_type(s_.kind == kUint32   ? v1::KEY_TYPE_UINT32
                    : s_.kind == kUint64 ? v1::KEY_TYPE_UINT64
                                         : v1::KEY_TYPE_COLUMNS);
    for (size_t c = 0; c < s_.schema.size(); ++c) {
      v1::KeyColumnSpec& k = *sp.add_key_columns();
      k.set_name(s_.schema.names[c]);
      k.set_type(s_.schema.types[c]);
    }
    if (s_.payload) {
      v1::PayloadColumnSpec& p = *sp.add_payload();
      p.set_name(kColumn);
      p.set_type(s_.payload_type);
    }
    absl::Status status = session.Add(std::move(spec));
    FUZZ_CHECK(status.ok(), Describe(status));
    v1::BuildIndexRequest chunk;
    v1::BuildChunk& c = *chunk.mutable_chunk();
    // Zero rows as an empty packed column, as a client sends them.
    if (s_.kind == kUint32) {
      *c.mutable_keys() = Words32(keys, false);
    } else if (s_.kind == kUint64) {
      *c.mutable_keys64() = Words64(keys, false);
    } else {
      AppendKeyColumns(s_.schema, keys, /*named=*/true, c.mutable_key_columns());
      // Raw string keys that are not UTF-8 fail the build (fuzz_build_session's concern).
      if (!ModelKeyColumns(c.key_columns(), s_.schema, "", true).error.empty()) return false;
    }
    if (s_.explicit_values) {
      *c.mutable_values()->mutable_packed() = server::PackColumn<uint32_t>(values);
    }
    if (s_.payload) *c.add_payload() = CellColumn(kColumn, s_.payload_type, cells);
    status = session.Add(std::move(chunk));
    FUZZ_CHECK(status.ok(), Describe(status));
    std::atomic<bool> cancelled{false};
    auto built = session.Finish(cancelled);
    FUZZ_CHECK(built.ok(), Describe(built.status()));
    // A build whose rows found no slot within the probe bound lacks keys the
    // model has: not a start this target checks mutations from.
    if ((*built)->index->build_statistics().overflow_rows != 0) return false;
    version_ = (*built)->version;
    sequence_ = 0;
    rehashes_ = 0;
    capacity_ = s_.capacity;
    return true;
  }

  void RunBatch(uint32_t b, Reader& in) {
    Batch batch = MakeBatch(s_, b, in, next_row_id_, model_);
    for (const auto& k : batch.deletes) named_.insert(k);
    for (const auto& k : batch.upserts) named_.insert(k);
    const std::string what =
        absl::StrCat("batch ", b, " (", batch.request.ShortDebugString().substr(0, 400), ")");
    const v1::IndexInfo before = Info();
    const uint64_t budget_before = harness_.budget().used_bytes();

    // As the stream reactor runs a batch.
    using Traits = server::detail::MutateTraits;
    v1::MutateResponse out;
    const absl::Status status = Traits::Process(harness_.ops(), batch.request, &out, nullptr);
    if (!status.ok()) Traits::SetBatchError(&out, status);
    grpc::ByteBuffer wire;
    Traits::Seal(batch.request, &out, &wire);
    v1::MutateResponse got;
    FUZZ_CHECK(grpc::SerializationTraits<v1::MutateResponse>::Deserialize(&wire, &got).ok(),
               what + ": the response does not parse");
    FUZZ_CHECK(got.batch_id() == batch.request.batch_id(),
               absl::StrCat(what, ": batch_id ", got.batch_id()));

    Expected expected = batch.expected;
    // A probe bound below the capacity may make the table grow until the budget
    // runs out (keys whose home slots agree at every capacity): a refusal.
    if (expected.code == absl::StatusCode::kOk && s_.probe_bound != 0 && got.has_error() &&
        got.error().code() == int(absl::StatusCode::kResourceExhausted) &&
        got.error().message().find("device memory budget") != std::string::npos) {
      expected = {absl::StatusCode::kResourceExhausted, "device memory budget"};
    }
    if (expected.code != absl::StatusCode::kOk) {
      FUZZ_CHECK(
          got.has_error() && got.error().code() == int(expected.code) &&
              got.error().message().find(expected.text) != std::string::npos,
          absl::StrCat(what, ": answered ", got.ShortDebugString().substr(0, 600), "; expected ",
                       absl::StatusCodeToString(expected.code), " naming \"", expected.text, "\""));
      v1::MutateResponse rest = got;
      rest.clear_error();
      rest.clear_batch_id();
      FUZZ_CHECK(rest.ByteSizeLong() == 0,
                 absl::StrCat(what, ": an in-band error beside ", rest.ShortDebugString()));
      const v1::IndexInfo after = Info();
      FUZZ_CHECK(after.SerializeAsString() == before.SerializeAsString(),
                 absl::StrCat(what, ": a refused batch changed the index: ",
                              before.ShortDebugString(), " became ", after.ShortDebugString()));
      FUZZ_CHECK(harness_.budget().used_bytes() == budget_before,
                 absl::StrCat(what, ": a refused batch left ", harness_.budget().used_bytes(),
                              " bytes of the budget used, not ", budget_before));
      CheckIndex(what);
      return;
    }
    FUZZ_CHECK(!got.has_error(), absl::StrCat(what, ": answered ", got.error().ShortDebugString()));
    const engine::MutationCounts want = model_.Apply(batch.delete_keys, batch.upserts, batch.rows);
    engine::MutationCounts counts;
    counts.upsert_rows = got.upsert_rows();
    counts.inserted_keys = got.inserted_keys();
    counts.updated_keys = got.updated_keys();
    counts.deleted_keys = got.deleted_keys();
    counts.not_found_keys = got.not_found_keys();
    counts.deleted_rows = got.deleted_rows();
    FUZZ_CHECK(
        counts == want,
        absl::StrCat(what, ": counts ", got.ShortDebugString().substr(0, 600),
                     "; expected upsert_rows ", want.upsert_rows, " inserted ", want.inserted_keys,
                     " updated ", want.updated_keys, " deleted ", want.deleted_keys, " not_found ",
                     want.not_found_keys, " deleted_rows ", want.deleted_rows, " for deletes ",
                     KeysText(batch.deletes), " and upserts ", KeysText(batch.upserts)));
    ++sequence_;
    if (!s_.explicit_values) next_row_id_ += batch.upserts.size();
    FUZZ_CHECK(
        got.mutation_sequence() == sequence_ && got.index_version() == version_ && !got.durable(),
        absl::StrCat(what, ": sequence ", got.mutation_sequence(), " version ", got.index_version(),
                     "; expected ", sequence_, " and ", version_));
    // The capacity: the smallest power of two at least the last one holding the
    // keys at max_load_factor; a probe bound may make it larger.
    const uint64_t live = model_.keys().size();
    uint64_t grown = capacity_;
    while (double(live) > s_.load_factor() * double(grown)) grown *= 2;
    const uint32_t capacity = got.capacity();
    FUZZ_CHECK(capacity != 0 && (capacity & (capacity - 1)) == 0 &&
                   (s_.probe_bound == 0 ? capacity == grown : capacity >= grown),
               absl::StrCat(what, ": capacity ", capacity, " for ", live, " keys after ", capacity_,
                            " at max_load_factor ", s_.load_factor(), "; expected ", grown));
    FUZZ_CHECK(
        got.rehashed() == (capacity != capacity_),
        absl::StrCat(what, ": rehashed ", got.rehashed(), " from ", capacity_, " to ", capacity));
    rehashes_ += capacity != capacity_ ? 1 : 0;
    capacity_ = capacity;
    CheckStatistics(got.statistics(), got.load_factor(), what);
    CheckIndex(what);
  }

  // The statistics and load factor of the model's content.
  void CheckStatistics(const v1::BuildStatistics& st, double load_factor, const std::string& what) {
    const uint64_t keys = model_.keys().size();
    const uint64_t rows = model_.live_rows();
    FUZZ_CHECK(
        st.unique_keys() == keys && st.duplicate_rows() == rows - keys && st.overflow_rows() == 0 &&
            st.invalid_rows() == 0 &&
            st.max_group_rows() == (s_.keep_all ? model_.largest_group() : 0),
        absl::StrCat(what, ": statistics ", st.ShortDebugString(), "; expected ", keys, " keys of ",
                     rows, " rows, the largest group ", model_.largest_group()));
    const double want = double(keys) / double(capacity_);
    FUZZ_CHECK(load_factor >= want - 1e-12 && load_factor <= want + 1e-12,
               absl::StrCat(what, ": load_factor ", load_factor, "; expected ", want));
  }

  v1::IndexInfo Info() {
    v1::DescribeIndexRequest request;
    request.set_name(kIndex);
    v1::DescribeIndexResponse response;
    const absl::Status status = harness_.ops().DescribeIndex(request, &response);
    FUZZ_CHECK(status.ok(), Describe(status));
    return response.index();
  }

  // The description, the budgets and the content against the model.
  void CheckIndex(const std::string& what) {
    const v1::IndexInfo info = Info();
    FUZZ_CHECK(info.version() == version_ && info.mutation_sequence() == sequence_ &&
                   info.capacity() == capacity_ && info.rehashes() == rehashes_ &&
                   info.next_row_id() == next_row_id_ &&
                   info.max_probe_count() == (s_.probe_bound == 0 ? capacity_ : s_.probe_bound) &&
                   info.max_load_factor() == s_.load_factor(),
               absl::StrCat(what, ": described as ", info.ShortDebugString(),
                            "; expected sequence ", sequence_, " capacity ", capacity_,
                            " rehashes ", rehashes_, " next_row_id ", next_row_id_));
    if (sequence_ > 0) CheckStatistics(info.statistics(), info.load_factor(), what);
    const auto version = harness_.registry().Get(kIndex);
    FUZZ_CHECK(version != nullptr, what + ": the index is gone");
    FUZZ_CHECK(harness_.budget().used_bytes() == version->index->held_bytes() &&
                   info.device_bytes() == version->index->held_bytes() &&
                   harness_.staging().used_bytes() == 0,
               absl::StrCat(what, ": the budget holds ", harness_.budget().used_bytes(),
                            " bytes and the staging budget ", harness_.staging().used_bytes(),
                            " for a table of ", version->index->held_bytes()));
    CheckContent(what);
  }

  // Lookups and an inner join of every key the input can name.
  void CheckContent(const std::string& what) {
    std::set<std::optional<KeyTuple>> probe_set(s_.universe.begin(), s_.universe.end());
    probe_set.insert(named_.begin(), named_.end());
    const KeyRowList probe(probe_set.begin(), probe_set.end());
    const auto* model_keys = &model_.keys();
    auto group = [&](const std::optional<KeyTuple>& key) -> const std::vector<ModelRow>* {
      if (!model_.Holdable(key)) return nullptr;
      const auto it = model_keys->find(*key);
      return it == model_keys->end() ? nullptr : &it->second;
    };

    v1::LookupRequest lookup;
    lookup.set_index(kIndex);
    lookup.set_want_match_counts(true);
    if (s_.payload) lookup.add_select(kColumn);
    PutProbeKeys(s_, probe, &lookup);
    v1::LookupResponse l;
    const absl::Status looked = harness_.ops().Lookup(lookup, &l);
    FUZZ_CHECK(looked.ok(), absl::StrCat(what, ": lookup: ", Describe(looked)));
    const size_t n = probe.size();
    FUZZ_CHECK(l.values().size() == 4 * n && l.found().size() == n &&
                   l.match_counts().size() == 4 * n && l.mutation_sequence() == sequence_ &&
                   l.index_version() == version_ && l.columns_size() == (s_.payload ? 1 : 0),
               absl::StrCat(what, ": lookup of ", n, " keys answered ",
                            l.ShortDebugString().substr(0, 300)));
    const std::vector<uint32_t> values = server::UnpackColumn<uint32_t>(l.values());
    const std::vector<uint32_t> matches = server::UnpackColumn<uint32_t>(l.match_counts());
    std::vector<Cell> cells(n);
    if (s_.payload) cells = ReadCells(l.columns(0), kColumn, s_.payload_type, n, what);
    for (size_t i = 0; i < n; ++i) {
      const std::vector<ModelRow>* g = group(probe[i]);
      const uint32_t want_value = g ? g->front().value : engine::kEmptyKey;
      const Cell want_cell = g && s_.payload ? g->front().payload : std::nullopt;
      FUZZ_CHECK(l.found()[i] == (g ? 1 : 0) && values[i] == want_value &&
                     matches[i] == (g ? g->size() : 0) && cells[i] == want_cell,
                 absl::StrCat(what, ": lookup row ", i, " found ", int(l.found()[i]), " value ",
                              values[i], " matches ", matches[i], " payload ",
                              cells[i] ? absl::CEscape(*cells[i]) : "null", "; expected found ",
                              g ? 1 : 0, " value ", want_value, " matches ", g ? g->size() : 0,
                              " payload ", want_cell ? absl::CEscape(*want_cell) : "null"));
    }

    v1::JoinRequest join;
    join.set_index(kIndex);
    if (s_.payload) join.add_select(kColumn);
    v1::LeftBatch* left = join.add_batches();
    PutProbeKeys(s_, probe, left);
    left->set_capacity(uint64_t{1} << 20);
    v1::JoinResponse j;
    const absl::Status joined = harness_.ops().Join(join, &j);
    FUZZ_CHECK(joined.ok() && j.results_size() == 1,
               absl::StrCat(what, ": join: ", Describe(joined)));
    std::vector<uint32_t> want_left, want_right;
    std::vector<Cell> want_cells;
    for (size_t i = 0; i < n; ++i) {
      const std::vector<ModelRow>* g = group(probe[i]);
      if (g == nullptr) continue;
      for (const ModelRow& row : *g) {
        want_left.push_back(static_cast<uint32_t>(i));
        want_right.push_back(row.value);
        want_cells.push_back(s_.payload ? row.payload : std::nullopt);
      }
    }
    const v1::JoinBatchResult& res = j.results(0);
    FUZZ_CHECK(res.count() == want_left.size() && !res.overflow() &&
                   server::UnpackColumn<uint32_t>(res.left_rows()) == want_left &&
                   server::UnpackColumn<uint32_t>(res.right_rows()) == want_right &&
                   j.mutation_sequence() == sequence_,
               absl::StrCat(what, ": join gave ", res.count(), " pairs; expected ",
                            want_left.size(), " (each key's group in order)"));
    if (s_.payload) {
      FUZZ_CHECK(res.columns_size() == 1, what + ": join without its payload column");
      FUZZ_CHECK(ReadCells(res.columns(0), kColumn, s_.payload_type, want_left.size(),
                           what + " (join)") == want_cells,
                 what + ": the join's payload is not each group row's");
    }
  }

  Harness harness_;
  Setup s_;
  MutationModel model_{false, true};
  std::set<std::optional<KeyTuple>> named_;  // every key the input named
  uint64_t version_ = 0;
  uint64_t sequence_ = 0;
  uint64_t rehashes_ = 0;
  uint64_t next_row_id_ = 0;
  uint32_t capacity_ = 0;
};

}  // namespace
}  // namespace gpujoin::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpujoin::fuzz;
  const std::vector<std::string_view> frames =
      SplitFrames(AsView(data, size), 1 + mutate_input::kMaxBatches);
  // One fixture per --max-mutation-rows (the setup frame's byte 2 picks).
  static Fixture* fixtures[4] = {};
  const uint8_t choice = frames.empty() || frames[0].size() < 3 ? 0 : uint8_t(frames[0][2]) & 3;
  if (fixtures[choice] == nullptr) fixtures[choice] = new Fixture(mutate_input::MaxRowsOf(choice));
  fixtures[choice]->Run(frames);
  return 0;
}
