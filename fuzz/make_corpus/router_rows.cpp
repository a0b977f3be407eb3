// fuzz_make_corpus: the seeds of fuzz_router_rows (a shard count byte, then a
// LookupRequest whose keys the router splits).

#include <cstdint>
#include <string>

#include "make_corpus/seeds.hpp"

namespace gpujoin::fuzz::corpus {
namespace {

v1::Column StringColumn(const std::string& name, const std::vector<std::string>& values,
                        const std::string& validity) {
  v1::Column c;
  c.set_name(name);
  c.set_type(v1::COLUMN_TYPE_STRING);
  c.set_length(values.size());
  std::string offsets(4, '\0'), data;
  for (const std::string& v : values) {
    data += v;
    const int32_t end = static_cast<int32_t>(data.size());
    offsets.append(reinterpret_cast<const char*>(&end), 4);
  }
  c.set_offsets(offsets);
  c.set_data(data);
  if (!validity.empty()) c.set_validity(validity);
  return c;
}

v1::Column Int64Column(const std::string& name, const std::vector<int64_t>& values) {
  v1::Column c;
  c.set_name(name);
  c.set_type(v1::COLUMN_TYPE_INT64);
  c.set_length(values.size());
  c.set_data(std::string(reinterpret_cast<const char*>(values.data()), 8 * values.size()));
  return c;
}

}  // namespace

void RouterRowsTarget(Writer& w) {
  const std::string t = "fuzz_router_rows";
  w.Put(t, "u32_three_shards", std::string(1, '\x02') +
                                   Lookup("x", {1, 2, 3, 4, 5, 0xffffffffu, 7, 7}).SerializeAsString());
  w.Put(t, "u32_values_one_shard",
        std::string(1, '\x00') + [] {
          v1::LookupRequest r = Lookup("x", {});
          r.clear_keys();
          SetKeys(r.mutable_keys(), {9, 8, 7}, true);
          return r.SerializeAsString();
        }());
  v1::LookupRequest wide = Lookup("x", {});
  wide.clear_keys();
  SetKeys64(wide.mutable_keys64(), {1, uint64_t{1} << 40, ~uint64_t{0}, 5});
  w.Put(t, "u64_eight_shards", std::string(1, '\x07') + wide.SerializeAsString());
  v1::LookupRequest strings = Lookup("s", {});
  strings.clear_keys();
  *strings.add_key_columns() = StringColumn("sku", {"a", "", "ab", "a", "b\xc3\xa9"}, "\x1b");
  w.Put(t, "strings_with_a_null", std::string(1, '\x03') + strings.SerializeAsString());
  v1::LookupRequest pair = Lookup("p", {});
  pair.clear_keys();
  *pair.add_key_columns() = Int64Column("tenant", {0, -1, 7, 0});
  *pair.add_key_columns() = StringColumn("sku", {"x", "y", "x", "x"}, "");
  w.Put(t, "composite", std::string(1, '\x01') + pair.SerializeAsString());
  v1::LookupRequest empty = Lookup("x", {});
  w.Put(t, "empty", std::string(1, '\x04') + empty.SerializeAsString());
  v1::LookupRequest ragged = Lookup("x", {});
  ragged.mutable_keys()->set_packed("\x01\x02\x03");
  w.Put(t, "ragged", std::string(1, '\x02') + ragged.SerializeAsString());
}

}  // namespace gpujoin::fuzz::corpus
