// fuzz_make_corpus: the seeds of fuzz_lookup.

#include <cstdint>
#include <string>

#include "make_corpus/seeds.hpp"

namespace gpujoin::fuzz::corpus {

void LookupTarget(Writer& w) {
  const std::string t = "fuzz_lookup";
  const std::vector<uint32_t> keys = QueryFixtureKeys();
  w.Put(t, "x_all_keys", Lookup("x", keys, true).SerializeAsString());
  w.Put(t, "x_missing", Lookup("x", {33, 999, 0xffffffffu, 5}, true).SerializeAsString());
  w.Put(t, "x_bound1", Lookup("x", {0, 1, 2, 3, 1000, 1007}, true, 1).SerializeAsString());
  w.Put(t, "x_bound_over_capacity", Lookup("x", {1}, false, 65).SerializeAsString());
  w.Put(t, "tight", Lookup("tight", {1, 4, 7, 10, 13, 16, 46, 2}, true).SerializeAsString());
  w.Put(t, "tight_bound16", Lookup("tight", {1, 4, 7, 46}, true, 16).SerializeAsString());
  v1::LookupRequest listed = Lookup("x", {});
  listed.clear_keys();
  SetKeys(listed.mutable_keys(), {20, 21, 1001}, true);
  w.Put(t, "x_values_list", listed.SerializeAsString());
  v1::LookupRequest empty = Lookup("x", {});
  empty.clear_keys();
  empty.mutable_keys()->mutable_values();
  w.Put(t, "x_zero_rows", empty.SerializeAsString());
  auto lookup64 = [](const std::vector<uint64_t>& keys, bool values_list) {
    v1::LookupRequest r = Lookup("x64", {}, true);
    r.clear_keys();
    SetKeys64(r.mutable_keys64(), keys, values_list);
    return r.SerializeAsString();
  };
  w.Put(t, "x64_all_keys", lookup64(QueryFixtureKeys64(), false));
  w.Put(t, "x64_missing_and_reserved",
        lookup64({17, uint64_t{9} << 32 | 3, 3, ~uint64_t{0}, 0xfffffffeu}, true));
  w.Put(t, "x64_with_uint32_keys", Lookup("x64", {1, 2}).SerializeAsString());
  v1::LookupRequest narrow_wide = Lookup("x", {});
  narrow_wide.clear_keys();
  SetKeys64(narrow_wide.mutable_keys64(), {1});
  w.Put(t, "x_with_uint64_keys", narrow_wide.SerializeAsString());
  w.Put(t, "not_found", Lookup("nope", {1}).SerializeAsString());
  w.Put(t, "dotdot", Lookup("..", {1}).SerializeAsString());
  w.Put(t, "bad_name", Lookup("a/b", {1}).SerializeAsString());
  v1::LookupRequest no_keys = Lookup("x", {});
  no_keys.clear_keys();
  w.Put(t, "no_keys", no_keys.SerializeAsString());
  std::vector<uint32_t> many(900);
  for (size_t i = 0; i < many.size(); ++i) many[i] = static_cast<uint32_t>(i % 50);
  w.Put(t, "x_over_response_limit", Lookup("x", many).SerializeAsString());
  // Match counts on the keep_all index and on a lowest_row one (1 / 0).
  v1::LookupRequest counts = Lookup("xm", {3, 1000, 5, 17, 0xfffffffeu, 33, 0xffffffffu}, true);
  counts.set_want_match_counts(true);
  w.Put(t, "xm_match_counts", counts.SerializeAsString());
  v1::LookupRequest counts_x = Lookup("x", {3, 33, 5}, false);
  counts_x.set_want_match_counts(true);
  counts_x.set_want_probes(true);
  w.Put(t, "x_match_counts_and_probes", counts_x.SerializeAsString());
  // Key-schema indexes: every variant of their key columns, with probes and
  // match counts; a probe bound of 1; integer keys for them and key columns
  // for a word index.
  for (const FixtureKeyIndex& k : QueryFixtureKeyIndexes()) {
    for (auto& [name, columns] : KeyColumnVariants(k)) {
      v1::LookupRequest r;
      r.set_index(k.name);
      r.set_want_probes(true);
      r.set_want_match_counts(name == "all_keys" || name == "missing_and_nulls");
      *r.mutable_key_columns() = columns;
      w.Put(t, k.name + "_" + name, r.SerializeAsString());
      if (name == "all_keys") {
        r.set_max_probe_count(1);
        w.Put(t, k.name + "_bound1", r.SerializeAsString());
        SetKeys(r.mutable_keys(), {1, 2});
        w.Put(t, k.name + "_with_uint32_keys_too", r.SerializeAsString());
        v1::LookupRequest on_x = Lookup("x", {});
        on_x.clear_keys();
        *on_x.mutable_key_columns() = columns;
        w.Put(t, "x_with_key_columns_of_" + k.name, on_x.SerializeAsString());
      }
    }
    w.Put(t, k.name + "_with_uint64_keys", [&] {
      v1::LookupRequest r = Lookup(k.name, {});
      r.clear_keys();
      SetKeys64(r.mutable_keys64(), {1});
      return r.SerializeAsString();
    }());
    v1::LookupRequest no_keys = Lookup(k.name, {});
    no_keys.clear_keys();
    w.Put(t, k.name + "_no_keys", no_keys.SerializeAsString());
  }
}

}  // namespace gpujoin::fuzz::corpus
