// fuzz_graph_validate: the nodes of a fuzzed command graph, of every kind and
// key word, mostly well formed, made by GraphMaker.
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "gpujoin/engine/graph.hpp"
#include "graph_validate/graph_maker.hpp"

namespace gpujoin::fuzz::graph_validate {

using namespace gpujoin::engine;

struct Objects {
  std::vector<std::unique_ptr<BuildStatistics>> build;
  std::vector<std::unique_ptr<QueryStatistics>> query;
  std::vector<std::unique_ptr<JoinResult>> join;
};

// A node that carries keys of kind K: a key word or key columns (its index may
// be keyed otherwise).
template <IndexKey K>
Node MakeKeyNode(int kind, GraphMaker& m, const std::vector<HashIndex*>& indexes,
                 Objects& objects) {
  FuzzedDataProvider& in = m.in();
  switch (kind) {
    case 0: {
      BuildIndexNodeT<K> n;
      n.index = m.Pick(indexes);
      const size_t rows = m.Rows();
      n.keys = m.Keys<K>(rows);
      if (in.ConsumeBool()) n.values = m.Chunks<uint32_t>(m.Length(rows));
      n.first_value = in.ConsumeIntegral<uint32_t>();
      n.statistics = m.Object(objects.build);
      return n;
    }
    case 1: {
      BuildBatchIndexNodeT<K> n;
      n.index = m.Pick(indexes);
      const int chunks = in.ConsumeIntegralInRange<int>(0, 3);
      for (int c = 0; c < chunks; ++c) {
        BatchChunkT<K> chunk;
        const size_t rows = m.Rows();
        chunk.keys = m.ChunkKeys<K>(rows);
        chunk.row_base = in.ConsumeIntegral<uint32_t>();
        chunk.validity = m.Optional<const uint32_t>(rows);
        n.chunks.push_back(chunk);
      }
      n.statistics = m.Object(objects.build);
      return n;
    }
    case 2: {
      LookupNodeT<K> n;
      n.index = m.Pick(indexes);
      const size_t rows = m.Rows();
      n.keys = m.Keys<K>(rows, /*may_be_huge=*/true);
      n.values = m.Span<uint32_t>(rows);
      n.found = m.Optional<uint8_t>(rows);
      n.probes = m.Optional<uint32_t>(rows);
      n.match_counts = m.Optional<uint32_t>(rows);
      n.statistics = m.Object(objects.query);
      n.max_probe_count = m.ProbeCount(n.index == nullptr ? 0 : n.index->spec().capacity);
      return n;
    }
    default: {
      JoinNodeT<K> n;
      n.index = m.Pick(indexes);
      n.max_probe_count = m.ProbeCount(n.index == nullptr ? 0 : n.index->spec().capacity);
      // 4 is no kind: refused.
      n.kind = static_cast<JoinKind>(in.ConsumeIntegralInRange<int>(0, 4));
      const int batches = in.ConsumeIntegralInRange<int>(0, 3);
      for (int b = 0; b < batches; ++b) {
        JoinBatchT<K> jb;
        const size_t rows = m.Rows();
        jb.keys = m.Keys<K>(rows, /*may_be_huge=*/true);
        jb.left_rows = m.Optional<const uint32_t>(rows);
        jb.first_left_row = in.ConsumeIntegral<uint32_t>();
        const size_t capacity = in.ConsumeIntegralInRange<size_t>(0, rows + 2);
        jb.out_left_rows = m.Span<uint32_t>(capacity);
        jb.out_right_rows = m.Span<uint32_t>(capacity);
        jb.result = m.Object(objects.join, /*required=*/in.ConsumeIntegralInRange<int>(0, 15) != 0);
        jb.found = m.Optional<uint8_t>(rows);
        jb.probes = m.Optional<uint32_t>(rows);
        n.batches.push_back(jb);
      }
      return n;
    }
  }
}

inline Node MakeNode(GraphMaker& m, const std::vector<HashIndex*>& indexes, Objects& objects) {
  FuzzedDataProvider& in = m.in();
  const int kind = in.ConsumeIntegralInRange<int>(0, 5);
  if (kind < 4) {
    switch (in.ConsumeIntegralInRange<int>(0, 2)) {
      case 0:
        return MakeKeyNode<uint32_t>(kind, m, indexes, objects);
      case 1:
        return MakeKeyNode<uint64_t>(kind, m, indexes, objects);
      default:
        return MakeKeyNode<ColumnKey>(kind, m, indexes, objects);
    }
  }
  switch (kind) {
    case 4: {
      AggregateNode n;
      n.op = static_cast<AggregateOp>(in.ConsumeIntegralInRange<int>(0, 4));
      const bool count = n.op == AggregateOp::kCount;
      const size_t rows = m.Rows();
      const size_t groups = in.ConsumeIntegralInRange<size_t>(0, 20);
      n.keys = m.Chunks<uint32_t>(rows);
      // Values belong to value ops (float32, int64 or uint32 here); rarely to count,
      // or missing from a value op. Overflow flags belong to integer sums.
      const bool wrong = in.ConsumeIntegralInRange<int>(0, 7) == 0;
      if (count == wrong) {
        switch (in.ConsumeIntegralInRange<int>(0, 2)) {
          case 0:
            n.values = m.Chunks<float>(m.Length(rows));
            break;
          case 1:
            n.values = m.Chunks<int64_t>(m.Length(rows));
            break;
          default:
            n.values = m.Chunks<uint32_t>(m.Length(rows));
            break;
        }
      }
      if (in.ConsumeBool()) n.mask = m.Chunks<uint32_t>(m.Length(rows));
      n.output = m.MaybeHuge<uint64_t>(groups);
      n.overflow = m.Optional<uint8_t>(groups);
      n.contributing_rows = m.Optional<uint32_t>(groups);
      return n;
    }
    default: {
      HashNode n;
      n.bits = static_cast<HashBits>(in.ConsumeIntegralInRange<int>(0, 2));
      const int columns = in.ConsumeIntegralInRange<int>(0, 3);
      const uint64_t rows = m.Rows();
      for (int c = 0; c < columns; ++c) {
        HashColumn col;
        col.type = static_cast<ColumnType>(in.ConsumeIntegralInRange<int>(0, 7));
        col.offset = m.RowCount(in.ConsumeIntegralInRange<uint64_t>(0, 9));
        col.length = m.RowCount(rows);
        // The rows the column needs when offset and length are small.
        const size_t end = static_cast<size_t>(std::min<uint64_t>(col.offset + col.length, 64));
        const size_t width = col.type == ColumnType::kBinary ? 0
                             : col.type == ColumnType::kUint64 || col.type == ColumnType::kInt64 ||
                                     col.type == ColumnType::kFloat64
                                 ? 8
                                 : 4;
        if (col.type == ColumnType::kBinary) {
          col.data = m.Span<const uint8_t>(in.ConsumeIntegralInRange<size_t>(0, 200));
          col.offsets = m.Span<const int32_t>(end + 1);
          m.Offsets(col.offsets, col.data.size());
        } else {
          col.data = m.Span<const uint8_t>(end * width);
          if (in.ConsumeIntegralInRange<int>(0, 15) == 0) col.offsets = m.Span<const int32_t>(end);
        }
        col.validity = m.Optional<const uint8_t>((end + 7) / 8);
        n.columns.push_back(col);
      }
      n.out32 = n.bits == HashBits::k32 || in.ConsumeBool() ? m.Span<uint32_t>(rows)
                                                            : std::span<uint32_t>();
      n.out64 = n.bits != HashBits::k32 || in.ConsumeBool() ? m.Span<uint64_t>(rows)
                                                            : std::span<uint64_t>();
      n.out_validity = m.Span<uint8_t>((rows + 7) / 8);
      return n;
    }
  }
}

}  // namespace gpujoin::fuzz::graph_validate
