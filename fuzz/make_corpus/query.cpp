// fuzz_make_corpus: the seeds of fuzz_query (its input layout is described
// in fuzz_query.cpp: a plan frame, then batch frames).

#include <cstdint>
#include <string>
#include <vector>

#include "make_corpus/seeds.hpp"

namespace gpujoin::fuzz::corpus {
namespace {

using Bytes = std::vector<uint8_t>;

std::string Str(const Bytes& b) { return std::string(b.begin(), b.end()); }

// A batch frame of `rows` rows (8 columns, column-major cell codes: code % 8 ==
// 7 is null, code / 8 picks a value), a flush flag and a defect byte.
std::string Batch(uint8_t rows, bool flush, uint8_t defect, uint8_t salt) {
  Bytes b{uint8_t(rows | (flush ? 0x80 : 0))};
  for (int c = 0; c < 8; ++c) {
    for (uint8_t r = 0; r < rows; ++r) b.push_back(uint8_t((r * 8 + c * 3 + salt) % 120));
  }
  b.push_back(defect);
  return Str(b);
}

std::string Input(const Bytes& plan, const std::vector<std::string>& batches) {
  std::vector<std::string> frames{Str(plan)};
  frames.insert(frames.end(), batches.begin(), batches.end());
  return Frames(frames);
}

}  // namespace

void QueryTarget(Writer& w) {
  const std::string t = "fuzz_query";
  const std::vector<std::string> batches = {Batch(6, false, 0, 0), Batch(9, false, 0, 5),
                                            Batch(0, false, 0, 0), Batch(12, false, 0, 11)};
  // One lookup per index, each join kind (steps: lookup = 0, index, key code, kind, found).
  for (uint8_t index = 0; index < 7; ++index) {
    for (uint8_t kind = 0; kind < 5; ++kind) {
      w.Put(t, "lookup-" + std::to_string(index) + "-kind" + std::to_string(kind),
            Input({1, 0, index, uint8_t(index % 3), kind, uint8_t(kind & 1), 0}, batches));
    }
  }
  // Lookups in a row, each counting the rows the one before passed on: x then
  // x (outer) then tight on u (semi), and c (anti) then x.
  w.Put(t, "lookup-chain", Input({3, 0, 0, 0, 1, 0, 0, 0, 0, 2, 1, 0, 1, 1, 3, 1, 0}, batches));
  w.Put(t, "lookup-chain-anti", Input({2, 0, 5, 0, 4, 1, 0, 0, 0, 1, 0, 0}, batches));
  // lookup xm (left outer), filter k < 1000 and not (s is null), limit 7.
  w.Put(t, "lookup-filter-limit",
        Input({3, 0, 3, 0, 2, 1, 1, 0, 6, 0, 0, 0x40, 0, 2, 2, 3, 0, 0, 0, 3, 15, 0}, batches));
  // lookup c (k, s, i), aggregate by the found column, filter on the count.
  w.Put(t, "aggregate-by-found", Input({3, 0, 5, 0, 1, 1, 5, 8, 1, 5, 1, 0x60, 0, 0}, batches));
  // aggregate by s with a flush, no groups: count of all rows.
  w.Put(t, "aggregate-flush",
        Input({1, 5, 4, 0}, {Batch(5, true, 0, 1), Batch(3, false, 0, 2), Batch(4, true, 0, 3)}));
  w.Put(t, "aggregate-none", Input({2, 5, 8, 3, 5, 0}, batches));
  // in-lists and is null over strings and binary.
  w.Put(t, "filter-in", Input({2, 1, 0x24, 4, 0, 9, 17, 25, 1, 0x83, 5, 0, 0}, batches));
  // Plans the server refuses: an unknown index, a wrong key type, an empty
  // project, a float group, two aggregates, a literal of the wrong kind, 65 steps.
  w.Put(t, "unknown-index", Input({1, 0, 7, 0, 1, 0, 0}, batches));
  w.Put(t, "wrong-key", Input({1, 0, 4, 7, 1, 0, 0}, batches));
  w.Put(t, "empty-project", Input({1, 4, 0, 0}, batches));
  w.Put(t, "float-group", Input({1, 5, 6, 0}, batches));
  w.Put(t, "two-aggregates", Input({2, 5, 8, 5, 8, 0}, batches));
  w.Put(t, "wrong-literal", Input({1, 1, 5, 0, 0xff, 3, 0}, batches));
  w.Put(t, "65-steps", Input({0, 0xff}, batches));
  // Raw filter text (even length byte): "k = 1 or s = 'a'" from the alphabet.
  w.Put(t, "raw-filter",
        Input({1, 3, 20, 0, 16, 12, 16, 10, 19, 16, 19, 22, 16, 3, 0, 0}, batches));
  // A ragged first batch: that batch's error, and the plan serves the next.
  w.Put(t, "ragged-first",
        Input({1, 0, 0, 0, 1, 0, 0}, {Batch(4, false, 3 | 2 << 3, 0), Batch(4, false, 0, 1)}));
  // Bad batches between good ones: a column less, renamed, ragged, retyped.
  w.Put(t, "bad-batches",
        Input({1, 0, 0, 0, 1, 0, 0},
              {Batch(4, false, 0, 0), Batch(4, false, 1 | 2 << 3, 0), Batch(4, false, 2, 1),
               Batch(4, false, 3 | 4 << 3, 2), Batch(4, false, 4, 3), Batch(4, false, 0, 4)}));
}

}  // namespace gpujoin::fuzz::corpus
