// Writes the seed corpus of every fuzz target: fuzz_make_corpus DIR writes
// DIR/<target>/<seed> (scripts/fuzz --corpus regenerates fuzz/corpus with it).
// Seeds are small valid requests and the edge cases each target's checks are
// about; the output is the same on every run. Each target's seeds are in
// make_corpus/<target>.cpp.
#include <cstdio>

#include "make_corpus/seeds.hpp"

int main(int argc, char** argv) {
  using namespace gpujoin::fuzz::corpus;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR (writes OUTPUT_DIR/<target>/<seed>)\n", argv[0]);
    return 2;
  }
  Writer w(argv[1]);
  ColumnCodec(w);
  LookupWire(w);
  LookupTarget(w);
  JoinTarget(w);
  AggregateTarget(w);
  HashTarget(w);
  BuildTarget(w);
  GraphTarget(w);
  DataFilesTarget(w);
  MutateTarget(w);
  QueryTarget(w);
  RouterRowsTarget(w);
  std::printf("wrote %d seeds under %s\n", w.count(), argv[1]);
  return 0;
}
