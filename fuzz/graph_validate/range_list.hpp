// fuzz_graph_validate: the byte ranges each node declares (graph.hpp), for the
// brute-force overlap check and the check that nothing else is written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gpujoin/engine/graph.hpp"

namespace gpujoin::fuzz::graph_validate {

using namespace gpujoin::engine;

// One byte range of the graph, as the documentation of each node declares it,
// and where it comes from (node, field and up to two part numbers: a chunk, a
// batch or a column); its name is only formed for a failure message.
struct Range {
  uintptr_t begin = 0, end = 0;
  bool written = false;
  size_t node = 0;
  const char* field = "";
  int part = -1, subpart = -1;

  std::string Name() const {
    std::string name = absl::StrCat("node ", node, " ", field);
    if (part >= 0) absl::StrAppend(&name, " ", part);
    if (subpart >= 0) absl::StrAppend(&name, " chunk ", subpart);
    return name;
  }
};


class RangeList {
 public:
  template <typename T>
  void Add(std::span<T> s, bool written, size_t node, const char* field, int part = -1,
           int subpart = -1) {
    if (s.empty() || s.data() == nullptr) return;
    const auto begin = reinterpret_cast<uintptr_t>(s.data());
    ranges_.push_back(Range{begin, begin + s.size_bytes(), written, node, field, part, subpart});
  }
  template <typename T>
  void Chunks(const Chunked<T>& c, size_t node, const char* field, int part = -1) {
    for (size_t i = 0; i < c.size(); ++i) {
      Add(c[i], false, node, field, part, static_cast<int>(i));
    }
  }
  void Chunks(const KeyColumns& keys, size_t node, const char* field, int part = -1) {
    for (size_t c = 0; c < keys.columns.size(); ++c) {
      const HashColumn& col = keys.columns[c];
      Add(col.data, false, node, field, part, static_cast<int>(c));
      Add(col.offsets, false, node, field, part, static_cast<int>(c));
      Add(col.large_offsets, false, node, field, part, static_cast<int>(c));
      Add(col.validity, false, node, field, part, static_cast<int>(c));
    }
  }
  template <typename T>
  void Chunks(std::span<const T> words, size_t node, const char* field, int part = -1) {
    Add(words, false, node, field, part);
  }
  template <typename T>
  void Object(T* p, size_t node, const char* field, int part = -1) {
    if (p != nullptr) Add(std::span<T>(p, 1), true, node, field, part);
  }

  template <IndexKey K>
  void Node(size_t i, const BuildIndexNodeT<K>& n) {
    Chunks(n.keys, i, "keys");
    if (n.values) Chunks(*n.values, i, "values");
    Object(n.statistics, i, "statistics");
  }
  template <IndexKey K>
  void Node(size_t i, const BuildBatchIndexNodeT<K>& n) {
    for (size_t c = 0; c < n.chunks.size(); ++c) {
      Chunks(n.chunks[c].keys, i, "keys of chunk", static_cast<int>(c));
      Add(n.chunks[c].validity, false, i, "validity of chunk", static_cast<int>(c));
    }
    Object(n.statistics, i, "statistics");
  }
  template <IndexKey K>
  void Node(size_t i, const LookupNodeT<K>& n) {
    Chunks(n.keys, i, "keys");
    Add(n.values, true, i, "values");
    Add(n.found, true, i, "found");
    Add(n.probes, true, i, "probes");
    Add(n.match_counts, true, i, "match_counts");
    Object(n.statistics, i, "statistics");
  }
  template <IndexKey K>
  void Node(size_t i, const JoinNodeT<K>& n) {
    for (size_t b = 0; b < n.batches.size(); ++b) {
      const JoinBatchT<K>& jb = n.batches[b];
      const int part = static_cast<int>(b);
      Chunks(jb.keys, i, "keys of batch", part);
      Add(jb.left_rows, false, i, "left_rows of batch", part);
      Add(jb.out_left_rows, true, i, "out_left_rows of batch", part);
      Add(jb.out_right_rows, true, i, "out_right_rows of batch", part);
      Add(jb.found, true, i, "found of batch", part);
      Add(jb.probes, true, i, "probes of batch", part);
      Object(jb.result, i, "result of batch", part);
    }
  }
  void Node(size_t i, const AggregateNode& n) {
    Chunks(n.keys, i, "keys");
    std::visit(
        [&](const auto& c) {
          if constexpr (!std::is_same_v<std::decay_t<decltype(c)>, std::monostate>) {
            Chunks(c, i, "values");
          }
        },
        n.values);
    if (n.mask) Chunks(*n.mask, i, "mask");
    Add(n.output, true, i, "output");
    Add(n.overflow, true, i, "overflow");
    Add(n.contributing_rows, true, i, "contributing_rows");
  }
  void Node(size_t i, const HashNode& n) {
    for (size_t c = 0; c < n.columns.size(); ++c) {
      const int part = static_cast<int>(c);
      Add(n.columns[c].data, false, i, "data of column", part);
      Add(n.columns[c].offsets, false, i, "offsets of column", part);
      Add(n.columns[c].validity, false, i, "validity of column", part);
    }
    // Only the output that `bits` selects is written (graph.hpp).
    if (n.bits == HashBits::k32) Add(n.out32, true, i, "out32");
    if (n.bits == HashBits::k64) Add(n.out64, true, i, "out64");
    Add(n.out_validity, true, i, "out_validity");
  }

  // The first pair of ranges, one of them written, that share a byte.
  std::optional<std::string> Overlap() const {
    for (size_t a = 0; a < ranges_.size(); ++a) {
      for (size_t b = a + 1; b < ranges_.size(); ++b) {
        const Range& x = ranges_[a];
        const Range& y = ranges_[b];
        if ((x.written || y.written) && x.begin < y.end && y.begin < x.end) {
          return x.Name() + " and " + y.Name();
        }
      }
    }
    return std::nullopt;
  }

  bool Written(uintptr_t address) const {
    for (const Range& r : ranges_) {
      if (r.written && r.begin <= address && address < r.end) return true;
    }
    return false;
  }

 private:
  std::vector<Range> ranges_;
};

}  // namespace gpujoin::fuzz::graph_validate
