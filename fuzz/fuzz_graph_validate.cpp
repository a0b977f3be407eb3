// Fuzz target: the engine's command-graph validator (CommandGraph::Validate,
// engine/src/common/graph_validate.cpp, with the hash-node checks of
// engine/src/hashing/hash_host.cpp), and the CPU backend behind it.
//
// Input: consumed with libFuzzer's FuzzedDataProvider: the contents of a 2 KiB
// arena, two fresh indexes (capacity, probe bound, uint32 or uint64 keys,
// lowest_row or keep_all, built or not), then up to four nodes of any kind and
// key word (joins of every join kind, and rarely one that is none), mostly well formed
// (consistent lengths, valid binary offsets) with deviations, whose spans lie
// anywhere in the arena (or, rarely, are spans of 2^32 and more rows that must be
// refused) and whose statistics and results may lie in the arena too. Checked:
//  - a graph in which a written range overlaps any other range (found by brute
//    force over every pair) is refused, and an overlap the validator reports is
//    one that exists; a graph with an oversized span is refused;
//  - Backend::Run returns exactly what Validate returns, and a refused graph
//    changes nothing: not a byte of the arena, not an index;
//  - an accepted graph runs (under ASan and UBSan) and writes nothing outside its
//    declared written ranges; its outputs are consistent (build statistics add up
//    to the rows, lookups' found flags match their values and match counts,
//    join counts are those the kind allows for the found and missing rows (at
//    most the largest group per found row on keep_all), aggregation counts are
//    bounded by the rows, hash bitmaps have no stray bits).
//
// graph_validate/ holds the parts: graph_maker.hpp and make_node.hpp make the
// graph, range_list.hpp the ranges it declares, output_checks.hpp the checks
// of an accepted graph's outputs.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fuzz_check.hpp"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/graph.hpp"
#include "graph_validate/graph_maker.hpp"
#include "graph_validate/make_node.hpp"
#include "graph_validate/output_checks.hpp"
#include "graph_validate/range_list.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpujoin;
  using namespace gpujoin::engine;
  using namespace gpujoin::fuzz;
  using namespace gpujoin::fuzz::graph_validate;
  static Backend* backend = [] {
    BackendOptions options;
    options.cpu_threads = 1;
    auto b = CreateBackend(BackendKind::kCpu, options);
    FUZZ_CHECK(b.ok(), Describe(b.status()));
    return b->release();
  }();
  // Exactly the arena's size on the heap, so that ASan catches any access past it.
  static uint8_t* arena = new uint8_t[kArenaBytes];
  FuzzedDataProvider in(data, size);
  const std::vector<uint8_t> contents =
      in.ConsumeBytes<uint8_t>(in.ConsumeIntegralInRange<size_t>(0, kArenaBytes));
  std::memset(arena, 0x5a, kArenaBytes);
  if (!contents.empty()) std::memcpy(arena, contents.data(), contents.size());

  // Two fresh indexes of any key kind; the second (a key word) may have been built before
  // the graph (from the arena's first 16 keys).
  std::vector<std::unique_ptr<HashIndex>> owned;
  for (int i = 0; i < 2; ++i) {
    HashIndexSpec spec;
    spec.capacity = uint32_t{1} << in.ConsumeIntegralInRange<int>(0, 6);
    spec.max_probe_count = in.ConsumeIntegralInRange<uint32_t>(0, spec.capacity);
    spec.key_type = static_cast<KeyType>(in.ConsumeIntegralInRange<int>(0, 2));
    // A key schema: the (string, int64) pair the node maker sends mostly.
    if (spec.key_type == KeyType::kColumns) spec.key_columns = {ColumnType::kString, ColumnType::kInt64};
    spec.duplicates = in.ConsumeBool() ? DuplicatePolicy::kKeepAll : DuplicatePolicy::kLowestRow;
    auto index = backend->CreateIndex(spec);
    FUZZ_CHECK(index.ok(), Describe(index.status()));
    owned.push_back(std::move(*index));
  }
  if (owned[1]->key_type() != KeyType::kColumns && in.ConsumeBool()) {
    CommandGraph prebuild;
    if (owned[1]->key_type() == KeyType::kUint64) {
      BuildIndexNode64 n;
      n.index = owned[1].get();
      n.keys = {std::span<const uint64_t>(reinterpret_cast<const uint64_t*>(arena), 16)};
      prebuild.Add(std::move(n));
    } else {
      BuildIndexNode n;
      n.index = owned[1].get();
      n.keys = {std::span<const uint32_t>(reinterpret_cast<const uint32_t*>(arena), 16)};
      prebuild.Add(std::move(n));
    }
    const absl::Status s = backend->Run(prebuild);
    FUZZ_CHECK(s.ok(), Describe(s));
  }
  const std::vector<HashIndex*> indexes = {owned[0].get(), owned[1].get(), nullptr};

  GraphMaker maker(in, arena);
  Objects objects;
  CommandGraph graph;
  const int nodes = in.ConsumeIntegralInRange<int>(0, 4);
  for (int i = 0; i < nodes; ++i) graph.Add(MakeNode(maker, indexes, objects));

  RangeList ranges;
  for (size_t i = 0; i < graph.nodes().size(); ++i) {
    std::visit([&](const auto& n) { ranges.Node(i, n); }, graph.nodes()[i]);
  }
  const std::optional<std::string> overlap = ranges.Overlap();

  const absl::Status valid = graph.Validate();
  FUZZ_CHECK(!(valid.ok() && overlap), "accepted a graph whose " + *overlap + " overlap");
  FUZZ_CHECK(!(valid.ok() && maker.huge()), "accepted a span of 2^32 and more rows");
  FUZZ_CHECK(valid.ok() || !MessageHas(valid, "overlaps") || overlap,
             "reported an overlap that does not exist: " + Describe(valid));

  GroupBounds().clear();
  for (const auto& index : owned) {
    GroupBounds()[index.get()] = index->build_statistics().max_group_rows;
  }
  for (const Node& node : graph.nodes()) std::visit([](const auto& n) { BoundGroups(n); }, node);

  const std::vector<uint8_t> before(arena, arena + kArenaBytes);
  std::vector<bool> built;
  for (const auto& index : owned) built.push_back(index->built());
  const absl::Status ran = backend->Run(graph);
  FUZZ_CHECK(ran == valid,
             absl::StrCat("Run returned ", Describe(ran), " but Validate ", Describe(valid)));
  const bool changed = std::memcmp(before.data(), arena, kArenaBytes) != 0;
  for (size_t b = 0; changed && b < kArenaBytes; ++b) {
    if (before[b] == arena[b]) continue;
    FUZZ_CHECK(valid.ok(),
               absl::StrCat("a refused graph changed arena byte ", b, " (", Describe(valid), ")"));
    FUZZ_CHECK(ranges.Written(reinterpret_cast<uintptr_t>(arena + b)),
               absl::StrCat("the graph wrote arena byte ", b, ", outside its written ranges"));
  }
  if (!valid.ok()) {
    for (size_t i = 0; i < owned.size(); ++i) {
      FUZZ_CHECK(owned[i]->built() == built[i], "a refused graph built an index");
    }
    return 0;
  }
  for (size_t i = 0; i < graph.nodes().size(); ++i) {
    std::visit([&](const auto& n) { CheckOutputs(absl::StrCat("node ", i), n); }, graph.nodes()[i]);
  }
  return 0;
}

