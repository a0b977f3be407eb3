// fuzz_make_corpus: the seeds of fuzz_lookup_wire.

#include <cstdint>
#include <string>

#include "make_corpus/seeds.hpp"

namespace gpujoin::fuzz::corpus {

void LookupWire(Writer& w) {
  const std::string t = "fuzz_lookup_wire";
  const std::string plain = Lookup("x", {3, 1000, 77}, true).SerializeAsString();
  w.Put(t, "plain", std::string(1, '\0') + plain);
  w.Put(t, "plain_cut3", std::string("\x03\x02\x05\x00", 4) + plain);
  w.Put(t, "plain_cut7", std::string("\x07\x01\x01\x01\x09\x00\x03\x04", 8) + plain);
  v1::LookupRequest as_values = Lookup("x", {});
  as_values.clear_keys();
  SetKeys(as_values.mutable_keys(), {1, 2}, true);
  w.Put(t, "values",
        std::string(1, '\x01') + std::string(1, '\x03') + as_values.SerializeAsString());
  // The keys field twice (protobuf merges them; the scan leaves it to protobuf).
  const std::string keys_field = v1::LookupRequest(Lookup("", {4})).SerializeAsString();
  w.Put(t, "keys_twice", std::string(1, '\0') + plain + keys_field);
  // Unknown fields of every wire type, before and after the keys.
  std::string unknown;
  unknown += std::string("\x48\x96\x01", 3);                   // field 9, varint
  unknown += std::string("\x51", 1) + std::string(8, '\x11');  // field 10, fixed64
  unknown += std::string("\x5d", 1) + std::string(4, '\x22');  // field 11, fixed32
  unknown += std::string(
      "\x62\x03"
      "abc",
      5);  // field 12, bytes
  w.Put(t, "unknown_fields", std::string(1, '\x02') + std::string("\x01\x04", 2) + unknown + plain);
  w.Put(t, "group", std::string(1, '\0') + plain + std::string("\x6b\x08\x01\x6c", 4));
  w.Put(t, "truncated", std::string(1, '\0') + plain.substr(0, plain.size() - 3));
  v1::LookupRequest ragged = Lookup("x", {});
  ragged.mutable_keys()->set_packed("\x01\x02\x03\x04\x05\x06");
  w.Put(t, "ragged_keys", std::string(1, '\0') + ragged.SerializeAsString());
  // Every tag and length in 5 bytes: protobuf reads them, so the scan must too.
  const std::string five("\x80\x80\x80\x00", 4);
  w.Put(t, "five_byte_varints",
        std::string(1, '\0') + "\x0a\x01x" + "\x92" + five + "\x8e" + five + "\x8a" + five +
            "\x84" + five + Packed({9}));
  // An unknown field inside keys.
  w.Put(t, "keys_unknown_inner",
        std::string(1, '\0') + "\x0a\x01x" + "\x12\x08" + "\x0a\x04" + Packed({9}) + "\x18\x01");
  v1::LookupRequest wide = Lookup("x64", {});
  wide.clear_keys();
  SetKeys64(wide.mutable_keys64(), {7, uint64_t{5} << 32 | 3});
  w.Put(t, "keys64", std::string("\x02\x03\x07", 3) + wide.SerializeAsString());
  v1::LookupRequest both = Lookup("x", {1});
  SetKeys64(both.mutable_keys64(), {1});
  w.Put(t, "keys_and_keys64", std::string(1, '\0') + both.SerializeAsString());
  v1::LookupRequest ragged64 = Lookup("x64", {});
  ragged64.clear_keys();
  ragged64.mutable_keys64()->set_packed(Packed({1, 2, 3}));
  w.Put(t, "keys64_ragged", std::string(1, '\0') + ragged64.SerializeAsString());
  w.Put(t, "invalid_utf8_index",
        std::string(1, '\0') + "\x0a\x02\xc3\x28" + "\x12\x06\x0a\x04" + Packed({1}));
  // Key columns beside packed keys (left to the protobuf parse of the other
  // fields), and alone (no keys field: the protobuf path), cut into slices.
  const FixtureKeyIndex c = QueryFixtureKeyIndexes()[1];
  v1::LookupRequest columns = Lookup(c.name, {1, 2});
  AppendKeyColumns(c.schema, KeyRowList(c.rows.begin(), c.rows.begin() + 3), true,
                   columns.mutable_key_columns());
  w.Put(t, "keys_and_key_columns",
        std::string("\x03\x05\x09\x30", 4) + columns.SerializeAsString());
  columns.clear_keys();
  w.Put(t, "key_columns_only", std::string("\x02\x04\x11", 3) + columns.SerializeAsString());
}

}  // namespace gpujoin::fuzz::corpus
