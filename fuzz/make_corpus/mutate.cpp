// fuzz_make_corpus: the seeds of fuzz_mutate.

#include <cstdint>
#include <string>
#include <vector>

#include "make_corpus/seeds.hpp"
#include "mutate_model.hpp"

namespace gpujoin::fuzz::corpus {
namespace {

using namespace mutate_input;
using Codes = std::vector<uint8_t>;

// The setup frame (mutate_model.hpp): flags, shape, --max-mutation-rows, build keys.
std::string SetupFrame(uint8_t flags, uint8_t shape, uint8_t max_rows, const Codes& build) {
  std::string f{char(flags), char(shape), char(max_rows)};
  for (uint8_t c : build) f.push_back(char(c));
  return f;
}

// One batch frame: at most 15 delete and 15 upsert key codes.
std::string BatchFrame(uint8_t op, const Codes& deletes, const Codes& upserts, uint16_t nulls = 0,
                       uint8_t flags = 0) {
  std::string f{char(op), char(deletes.size() | upserts.size() << 4), char(nulls & 0xff),
                char(nulls >> 8), char(flags)};
  for (uint8_t c : deletes) f.push_back(char(c));
  for (uint8_t c : upserts) f.push_back(char(c));
  return f;
}

std::string Input(const std::string& setup, const std::vector<std::string>& batches) {
  std::vector<std::string> frames{setup};
  frames.insert(frames.end(), batches.begin(), batches.end());
  return Frames(frames);
}

Codes Range(uint8_t first, uint8_t n) {
  Codes c;
  for (uint8_t i = 0; i < n; ++i) c.push_back(uint8_t(first + i));
  return c;
}

}  // namespace

void MutateTarget(Writer& w) {
  const std::string t = "fuzz_mutate";
  const char* kinds[] = {"u32", "u64", "s", "c", "cm"};
  const uint8_t payload_types[] = {kPayloadInt64, kPayloadString, kPayloadBool, kPayloadBinary};
  for (uint8_t kind = 0; kind < 5; ++kind) {
    // The last key of the universe is the reserved word or the null key.
    const uint8_t last = uint8_t(KeyUniverse(KeyKind(kind)).size() - 1);
    for (int shape = 0; shape < 4; ++shape) {
      const bool keep_all = (shape & 1) != 0;
      const bool explicit_values = (shape & 2) != 0;
      const uint8_t flags =
          uint8_t(kind | (keep_all ? kKeepAll : 0) | (explicit_values ? kExplicitValues : 0) |
                  kPayload | payload_types[(kind + shape) % 4]);
      const std::string name = std::string(kinds[kind]) + (keep_all ? "_keep_all" : "_lowest_row") +
                               (explicit_values ? "_values" : "_row_ids");
      // Semantics: growth past several rehashes, keys repeated within a batch,
      // deletes of present, absent, repeated and reserved/null keys, re-inserts
      // of deleted keys, delete-only batches, nulls in the payload.
      w.Put(t, name,
            Input(SetupFrame(flags, /*capacity 4*/ 1, 0, {0, 1, 2, 1, last}),
                  {BatchFrame(kNone, {}, Range(3, 10), 0x0104),
                   BatchFrame(kNone, {1, 1, 40, last}, {5, 5, 6, 5, 1}, 0x0002, 1),
                   BatchFrame(kKeysAsList | kDeletesAsList | kValuesAsList, {5, 6, 7},
                              {7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21}),
                   BatchFrame(kNone, {2, 3, 4}, {}), BatchFrame(kNone, {}, {2, 3, 3, 1}, 0xffff),
                   BatchFrame(kNone, Range(0, 15), Range(20, 15))}));
      // Every defect once, between clean batches.
      std::vector<std::string> batches;
      for (uint8_t d = 1; d < kDefects; ++d) {
        batches.push_back(BatchFrame(d, {d, 1}, {uint8_t(d + 1), uint8_t(d + 2), 4}, 0, 2 * d));
      }
      batches.push_back(BatchFrame(kNone, {}, {last}));  // reserved or null: names row 0
      batches.push_back(BatchFrame(kUpsertKeyColumns, {}, {3}, 0, 7 << 2));  // nulls in key columns
      w.Put(t, name + "_defects", Input(SetupFrame(flags, 0, 0, {0, 1}), batches));
    }
  }
  // Delete keys no index can hold, repeated: each distinct one counts once as
  // not found (a regression: each occurrence was counted).
  const uint8_t null_row = uint8_t(KeyUniverse(kSchemaS).size() - 1);
  w.Put(t, "u32_repeated_reserved_deletes",
        Input(SetupFrame(kUint32, 0, 0, {1, 2}),
              {BatchFrame(kNone, {63, 63, 1, 1, 40, 40}, {}), BatchFrame(kNone, {63}, {63})}));
  w.Put(t, "s_repeated_null_deletes",
        Input(SetupFrame(kSchemaS | kKeepAll, 0, 0, {0, 1, 0}),
              {BatchFrame(kNone, {null_row, null_row, 0, 0}, {}),
               BatchFrame(kDeleteKeyColumns, {1, 2, 3, 4}, {}, 0, 7 << 2)}));
  // --max-mutation-rows=8 and 3: a batch at the limit and one past it.
  w.Put(t, "u32_max_rows_8",
        Input(SetupFrame(kUint32, 0, 1, {0}),
              {BatchFrame(kNone, {1, 2}, Range(3, 6)), BatchFrame(kNone, {1, 2}, Range(3, 7))}));
  w.Put(t, "c_max_rows_3",
        Input(SetupFrame(kSchemaC | kPayload, 0, 2, {0}),
              {BatchFrame(kNone, {1}, {2, 3}), BatchFrame(kNone, {1, 2}, {3, 4})}));
  // Row IDs from first_value 0xfffffffa: the batch that would pass 0xfffffffe.
  w.Put(t, "u64_row_ids_run_out",
        Input(SetupFrame(kUint64, 3 << 6, 0, {0, 1}),
              {BatchFrame(kNone, {}, {2, 3}), BatchFrame(kNone, {}, {4, 5}),
               BatchFrame(kNone, {0}, {})}));
  // max_load_factor 1.0 and 0.25, probe bounds 1 and 2.
  w.Put(t, "u32_load_factor_1",
        Input(SetupFrame(kUint32 | kKeepAll, 1 | 2 << 2, 0, {0, 1, 2, 3}),
              {BatchFrame(kNone, {}, {4}), BatchFrame(kNone, {}, Range(5, 12))}));
  w.Put(t, "s_load_factor_quarter",
        Input(SetupFrame(kSchemaS | kPayload | kPayloadString, 2 | 3 << 2, 0, {0, 1}),
              {BatchFrame(kNone, {}, Range(2, 8)), BatchFrame(kNone, {0, 1}, Range(10, 5))}));
  w.Put(t, "u32_probe_bound_1",
        Input(SetupFrame(kUint32 | kExplicitValues, 2 | 3 << 4, 0, {0}),
              {BatchFrame(kNone, {}, Range(1, 15)), BatchFrame(kNone, {}, Range(16, 15))}));
  w.Put(t, "u64_probe_bound_2_keep_all",
        Input(SetupFrame(kUint64 | kKeepAll | kPayload | kPayloadBool, 1 | 2 << 4, 0, {8, 9}),
              {BatchFrame(kNone, {}, Range(8, 8)), BatchFrame(kNone, {9}, Range(8, 8))}));
  // Raw keys: words that differ in one bit, and key columns of any bytes.
  w.Put(t, "u32_raw_keys",
        Input(SetupFrame(kUint32, 0, 0, {kRawKey, 1, 0, 0, 0}),
              {BatchFrame(kNone, {}, {kRawKey, 3, 0, 0, 0}),
               BatchFrame(kNone, {kRawKey, 1, 0, 0, 0}, {kRawKey, 1, 0, 0, 0x80})}));
  w.Put(t, "cm_raw_keys",
        Input(SetupFrame(kSchemaCm | kKeepAll, 0, 0,
                         {0, kRawKey, 1, 0, 0, 0, 2, 0xff, 0xfe, 9, 9, 9, 9, 9, 9, 9, 9}),
              {BatchFrame(kNone, {}, {kRawKey, 1, 0, 0, 0, 0, 9, 9, 9, 9, 9, 9, 9, 9})}));
  // An empty index (no build rows) filled by its first batch.
  w.Put(t, "c_empty_build",
        Input(SetupFrame(kSchemaC | kExplicitValues | kPayload | kPayloadBinary, 0, 0, {}),
              {BatchFrame(kNone, {0}, Range(0, 12))}));
}

}  // namespace gpujoin::fuzz::corpus
