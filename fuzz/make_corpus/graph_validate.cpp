// fuzz_make_corpus: the seeds of fuzz_graph_validate.

#include <random>
#include <string>

#include "make_corpus/seeds.hpp"

namespace gpujoin::fuzz::corpus {

void GraphTarget(Writer& w) {
  // FuzzedDataProvider input has no structure to seed: fixed pseudo-random bytes
  // of a few lengths (and all-zero and all-one inputs) start the search.
  const std::string t = "fuzz_graph_validate";
  std::mt19937 rng(20240601);
  for (size_t length : {24, 64, 128, 256, 400, 700, 1200, 2600}) {
    std::string bytes(length, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    w.Put(t, "random_" + std::to_string(length), bytes);
  }
  w.Put(t, "zeros_256", std::string(256, '\0'));
  w.Put(t, "ones_256", std::string(256, '\xff'));
}

}  // namespace gpujoin::fuzz::corpus
