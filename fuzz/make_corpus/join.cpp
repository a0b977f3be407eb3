// fuzz_make_corpus: the seeds of fuzz_join.

#include <cstdint>
#include <string>

#include "absl/strings/ascii.h"
#include "make_corpus/seeds.hpp"

namespace gpujoin::fuzz::corpus {

void JoinTarget(Writer& w) {
  const std::string t = "fuzz_join";
  auto join = [](const std::string& index) {
    v1::JoinRequest r;
    r.set_index(index);
    r.set_batch_id(3);
    return r;
  };
  v1::JoinRequest two = join("x");
  auto* b0 = two.add_batches();
  SetKeys(b0->mutable_keys(), {30, 5, 10, 30, 999});
  b0->set_first_left_row(7);
  b0->set_want_found(true);
  auto* b1 = two.add_batches();
  SetKeys(b1->mutable_keys(), {20, 20, 20}, true);
  b1->set_capacity(2);
  b1->set_want_probes(true);
  w.Put(t, "x_two_batches", two.SerializeAsString());
  v1::JoinRequest counted = two;
  counted.mutable_batches(0)->set_count_only(true);
  w.Put(t, "x_count_only", counted.SerializeAsString());
  v1::JoinRequest selected = two;
  selected.add_select("n");
  w.Put(t, "x_select_without_payload", selected.SerializeAsString());
  v1::JoinRequest rows = join("x");
  auto* b = rows.add_batches();
  SetKeys(b->mutable_keys(), {1, 2, 3, 0xffffffffu});
  SetKeys(b->mutable_left_rows(), {40, 41, 42, 43});
  w.Put(t, "x_left_rows", rows.SerializeAsString());
  v1::JoinRequest wrap = join("x");
  b = wrap.add_batches();
  SetKeys(b->mutable_keys(), {1, 2, 3});
  b->set_first_left_row(0xfffffffeu);
  w.Put(t, "x_first_left_row_near_max", wrap.SerializeAsString());
  v1::JoinRequest huge = join("x");
  b = huge.add_batches();
  SetKeys(b->mutable_keys(), {1});
  b->set_capacity((uint64_t{1} << 31) + 1);
  w.Put(t, "x_capacity_over_2_31", huge.SerializeAsString());
  v1::JoinRequest wide = join("x");
  b = wide.add_batches();
  SetKeys(b->mutable_keys(), {1});
  b->set_first_left_row(uint64_t{1} << 32);
  w.Put(t, "x_first_left_row_2_32", wide.SerializeAsString());
  v1::JoinRequest tight = join("tight");
  tight.set_max_probe_count(1);
  b = tight.add_batches();
  SetKeys(b->mutable_keys(), {1, 4, 7, 10, 13, 46});
  b->set_want_found(true);
  b->set_want_probes(true);
  w.Put(t, "tight", tight.SerializeAsString());
  w.Put(t, "no_batches", join("x").SerializeAsString());
  v1::JoinRequest both = join("x");
  b = both.add_batches();
  SetKeys(b->mutable_keys(), {1});
  SetKeys(b->mutable_left_rows(), {1});
  b->set_first_left_row(4);
  w.Put(t, "left_rows_and_first_left_row", both.SerializeAsString());
  v1::JoinRequest join64 = join("x64");
  b = join64.add_batches();
  SetKeys64(b->mutable_keys64(), {7, 8, uint64_t{2} << 32 | 3, 99, ~uint64_t{0}});
  b->set_capacity(3);
  b->set_want_found(true);
  b = join64.add_batches();
  SetKeys64(b->mutable_keys64(), {0xffffffffu, 1}, true);
  SetKeys(b->mutable_left_rows(), {70, 71});
  b->set_want_probes(true);
  w.Put(t, "x64_two_batches", join64.SerializeAsString());
  v1::JoinRequest mixed = join("x64");
  b = mixed.add_batches();
  SetKeys(b->mutable_keys(), {1});
  w.Put(t, "x64_with_uint32_keys", mixed.SerializeAsString());
  w.Put(t, "not_found", join("missing").SerializeAsString());
  // Every kind on the keep_all index (groups of 1 to 4 rows) and on "x".
  for (const v1::JoinKind kind : {v1::JOIN_KIND_INNER, v1::JOIN_KIND_LEFT_OUTER,
                                  v1::JOIN_KIND_LEFT_SEMI, v1::JOIN_KIND_LEFT_ANTI}) {
    v1::JoinRequest multi = join("xm");
    multi.set_kind(kind);
    b = multi.add_batches();
    SetKeys(b->mutable_keys(), {3, 999, 1000, 0xffffffffu, 17, 3});
    b->set_want_found(true);
    b->set_capacity(5);
    b = multi.add_batches();
    SetKeys(b->mutable_keys(), {1000, 2}, true);
    b->set_count_only(true);
    const std::string name = absl::AsciiStrToLower(v1::JoinKind_Name(kind));
    w.Put(t, "xm_" + name, multi.SerializeAsString());
    v1::JoinRequest plain = two;
    plain.set_kind(kind);
    w.Put(t, "x_" + name, plain.SerializeAsString());
  }
  v1::JoinRequest no_kind = two;
  no_kind.set_kind(static_cast<v1::JoinKind>(9));
  w.Put(t, "kind_that_is_none", no_kind.SerializeAsString());
  // Key-schema indexes: every variant of their key columns in one batch; all
  // keys under every join kind; two batches with left rows and a capacity.
  for (const FixtureKeyIndex& k : QueryFixtureKeyIndexes()) {
    for (auto& [name, columns] : KeyColumnVariants(k)) {
      v1::JoinRequest r = join(k.name);
      v1::LeftBatch* b = r.add_batches();
      *b->mutable_key_columns() = columns;
      b->set_want_found(true);
      b->set_want_probes(true);
      w.Put(t, k.name + "_" + name, r.SerializeAsString());
      if (name != "missing_and_nulls") continue;
      for (v1::JoinKind kind : {v1::JOIN_KIND_INNER, v1::JOIN_KIND_LEFT_OUTER,
                                v1::JOIN_KIND_LEFT_SEMI, v1::JOIN_KIND_LEFT_ANTI}) {
        r.set_kind(kind);
        w.Put(t, k.name + "_" + absl::AsciiStrToLower(v1::JoinKind_Name(kind)),
              r.SerializeAsString());
      }
      r.set_kind(v1::JOIN_KIND_INNER);
      v1::LeftBatch* b2 = r.add_batches();
      *b2->mutable_key_columns() = columns;
      std::vector<uint32_t> ids;
      for (uint64_t i = 0; i < columns.Get(0).length(); ++i)
        ids.push_back(static_cast<uint32_t>(100 + i));
      SetKeys(b2->mutable_left_rows(), ids);
      b2->set_capacity(3);
      r.set_max_probe_count(2);
      w.Put(t, k.name + "_two_batches", r.SerializeAsString());
      SetKeys(r.mutable_batches(1)->mutable_keys(), {1});
      w.Put(t, k.name + "_uint32_keys_in_batch_1", r.SerializeAsString());
    }
  }
  v1::JoinRequest x_columns = join("x");
  AppendKeyColumns(QueryFixtureKeyIndexes()[0].schema, {KeyTuple{"a"}}, true,
                   x_columns.add_batches()->mutable_key_columns());
  w.Put(t, "x_with_key_columns", x_columns.SerializeAsString());
}

}  // namespace gpujoin::fuzz::corpus
