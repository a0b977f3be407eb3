// fuzz_make_corpus: the seeds of fuzz_column_codec.

#include <cstdint>
#include <limits>
#include <string>

#include "make_corpus/seeds.hpp"

namespace gpujoin::fuzz::corpus {

void ColumnCodec(Writer& w) {
  const std::string t = "fuzz_column_codec";
  v1::U32Column packed;
  SetKeys(&packed, {1, 2, 0xffffffffu, 7});
  for (int shift : {0, 1, 2, 3}) {
    w.Put(t, "packed_shift" + std::to_string(shift),
          std::string(1, static_cast<char>(shift)) + packed.SerializeAsString());
  }
  v1::U32Column values;
  SetKeys(&values, {5, 6, 7}, true);
  w.Put(t, "values", std::string(1, '\x10') + values.SerializeAsString());
  v1::U32Column both = packed;
  SetKeys(&both, {9}, true);
  w.Put(t, "both", std::string(1, '\x21') + both.SerializeAsString());
  v1::U32Column empty_values;
  empty_values.mutable_values();
  w.Put(t, "empty_values", std::string(1, '\x02') + empty_values.SerializeAsString());
  v1::U32Column ragged;
  ragged.set_packed(std::string("\x01\x02\x03\x04\x05", 5));
  w.Put(t, "ragged_packed", std::string(1, '\x03') + ragged.SerializeAsString());
  v1::F32Column floats;
  for (float f : {1.5f, -0.0f, std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN()}) {
    floats.mutable_values()->add_v(f);
  }
  w.Put(t, "float_values", std::string(1, '\x05') + floats.SerializeAsString());
  w.Put(t, "raw8", std::string("\x07\x01\x00\x00\x00\x02\x00\x00\x00", 9));
  w.Put(t, "raw7", std::string("\x06\x01\x00\x00\x00\x02\x00\x00", 8));
  w.Put(t, "mode_only", std::string(1, '\x00'));
  v1::U64Column wide;
  SetKeys64(&wide, {1, uint64_t{1} << 40, ~uint64_t{0}});
  w.Put(t, "u64_packed", std::string(1, '\x04') + wide.SerializeAsString());
  v1::LookupRequest both_keys;
  SetKeys(both_keys.mutable_keys(), {1, 2});
  SetKeys64(both_keys.mutable_keys64(), {3}, true);
  w.Put(t, "both_key_columns", std::string(1, '\x00') + both_keys.SerializeAsString());
  v1::LookupRequest keys64_only;
  SetKeys64(keys64_only.mutable_keys64(), {3, 4});
  w.Put(t, "keys64_only", std::string(1, '\x01') + keys64_only.SerializeAsString());
}

}  // namespace gpujoin::fuzz::corpus
