// fuzz_make_corpus: the seeds of fuzz_hash.

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "make_corpus/seeds.hpp"

namespace gpujoin::fuzz::corpus {

void HashTarget(Writer& w) {
  const std::string t = "fuzz_hash";
  auto column = [](v1::ColumnType type, const std::string& data, uint64_t offset, uint64_t length) {
    v1::HashColumn c;
    c.set_type(type);
    c.set_data(data);
    c.set_offset(offset);
    c.set_length(length);
    return c;
  };
  const std::string bytes32 = Packed({1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  const std::string bytes64 = bytes32 + bytes32;
  int n = 0;
  for (v1::ColumnType type :
       {v1::COLUMN_TYPE_UINT32, v1::COLUMN_TYPE_INT32, v1::COLUMN_TYPE_FLOAT32,
        v1::COLUMN_TYPE_UINT64, v1::COLUMN_TYPE_INT64, v1::COLUMN_TYPE_FLOAT64}) {
    v1::HashRequest r;
    const bool wide = type == v1::COLUMN_TYPE_UINT64 || type == v1::COLUMN_TYPE_INT64 ||
                      type == v1::COLUMN_TYPE_FLOAT64;
    *r.add_columns() = column(type, wide ? bytes64 : bytes32, 1, 9);
    r.mutable_columns(0)->set_validity(std::string("\xfb\x03", 2));
    r.set_bits(n % 2 == 0 ? 64 : 32);
    w.Put(t, "fixed_" + std::to_string(n++), r.SerializeAsString());
  }
  v1::HashRequest binary;
  v1::HashColumn b = column(v1::COLUMN_TYPE_BINARY, "helloworldgpujoin", 1, 3);
  b.set_offsets(Packed({0, 5, 10, 13, 17}));
  *binary.add_columns() = b;
  *binary.add_columns() = column(v1::COLUMN_TYPE_UINT32, bytes32, 6, 3);
  binary.mutable_columns(1)->set_validity(std::string("\xbf\x02", 2));
  w.Put(t, "binary_and_u32", binary.SerializeAsString());
  v1::HashRequest decreasing = binary;
  decreasing.mutable_columns(0)->set_offsets(Packed({0, 9, 4, 13, 17}));
  w.Put(t, "binary_offsets_decrease", decreasing.SerializeAsString());
  v1::HashRequest past = binary;
  past.mutable_columns(0)->set_offsets(Packed({0, 5, 10, 13, 99}));
  w.Put(t, "binary_offsets_past_data", past.SerializeAsString());
  v1::HashRequest short_data;
  *short_data.add_columns() = column(v1::COLUMN_TYPE_UINT64, bytes32, 0, 6);
  w.Put(t, "data_too_short", short_data.SerializeAsString());
  v1::HashRequest lengths;
  *lengths.add_columns() = column(v1::COLUMN_TYPE_UINT32, bytes32, 0, 3);
  *lengths.add_columns() = column(v1::COLUMN_TYPE_UINT32, bytes32, 0, 4);
  w.Put(t, "lengths_differ", lengths.SerializeAsString());
  v1::HashRequest bits;
  *bits.add_columns() = column(v1::COLUMN_TYPE_UINT32, bytes32, 0, 3);
  bits.set_bits(16);
  w.Put(t, "bits_16", bits.SerializeAsString());
  v1::HashRequest far;
  *far.add_columns() = column(v1::COLUMN_TYPE_UINT32, bytes32, uint64_t{1} << 41, 1);
  w.Put(t, "offset_2_41", far.SerializeAsString());
  w.Put(t, "no_columns", v1::HashRequest().SerializeAsString());

  // Nested and dictionary columns: list<struct<int32, string>>, a
  // map, a dictionary with a null entry, and one index outside the dictionary.
  v1::HashColumn ids = column(v1::COLUMN_TYPE_INT32, bytes32, 1, 4);
  v1::HashColumn words = column(v1::COLUMN_TYPE_STRING, "abcdef", 0, 5);
  words.set_offsets(Packed({0, 1, 2, 3, 4, 6}));
  words.set_validity(std::string("\x1d", 1));
  v1::HashColumn elems = column(v1::COLUMN_TYPE_STRUCT, "", 0, 4);
  *elems.add_children() = ids;
  *elems.add_children() = words;
  v1::HashColumn list = column(v1::COLUMN_TYPE_LIST, "", 1, 3);
  list.set_offsets(Packed({0, 0, 2, 2, 4}));
  list.set_validity(std::string("\x0b", 1));
  *list.add_children() = elems;
  v1::HashColumn map = column(v1::COLUMN_TYPE_MAP, "", 0, 3);
  map.set_offsets(Packed({0, 1, 3, 4}));
  *map.add_children() = words;
  map.mutable_children(0)->set_validity("");
  *map.add_children() = column(v1::COLUMN_TYPE_INT8, "\x01\x02\x03\x04", 0, 4);
  v1::HashColumn dict = column(v1::COLUMN_TYPE_DICTIONARY, std::string("\x00\x01\x04", 3), 0, 3);
  dict.set_index_type(v1::COLUMN_TYPE_UINT8);
  *dict.add_children() = words;
  v1::HashRequest nested;
  *nested.add_columns() = list;
  *nested.add_columns() = map;
  *nested.add_columns() = dict;
  w.Put(t, "nested_list_map_dictionary", nested.SerializeAsString());
  v1::HashRequest outside = nested;
  outside.mutable_columns(2)->set_data(std::string("\x00\x05\x04", 3));
  w.Put(t, "dictionary_index_outside", outside.SerializeAsString());
}

}  // namespace gpujoin::fuzz::corpus
