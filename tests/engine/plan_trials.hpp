// Random plans of the lowered batch's shape (gpujoin/engine/plan_device.hpp)
// for the plan tests: two indexes (uint32 keys with nullable int32, uint32,
// float64 payload and a labelled string column with its dictionary; uint64
// keys with int64 and float32 payload), batches with keys that are null,
// negative or past the key word, one or two lookups of every kind, random
// filters with SQL nulls, NaN and literals of every numeric kind, group-bys
// on input, payload, found and labelled columns, every measure the lowering
// takes; running them, and comparing tables.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/dictionary.hpp"
#include "gpujoin/engine/graph.hpp"
#include "gpujoin/engine/plan.hpp"

namespace gpujoin::engine::testing {

// A random fixed-width column of `type` with nulls (when `nullable`), small
// values (so that groups repeat), negatives for signed types and NaN, -0 and
// infinities for floats.
inline PlanColumn RandomColumn(ColumnType type, uint64_t rows, bool nullable, uint64_t range,
                        std::mt19937_64& rng) {
  PlanColumn c;
  c.type = type;
  c.rows = rows;
  c.data.resize(rows * ColumnWidth(type));
  if (nullable) c.validity.assign(BitmapBytes(rows), 0);
  for (uint64_t r = 0; r < rows; ++r) {
    const bool valid = !nullable || rng() % 7 != 0;
    if (nullable) SetBit(c.validity.data(), r, valid);
    std::byte* at = c.data.data() + r * ColumnWidth(type);
    const int64_t v = valid ? static_cast<int64_t>(rng() % range) - (rng() % 5 == 0 ? 3 : 0) : 0;
    const auto put = [at]<class T>(T x) { std::memcpy(at, &x, sizeof x); };
    double real = static_cast<double>(v) / 2;
    if (valid && rng() % 11 == 0) {
      const double specials[] = {std::nan(""), -0.0, INFINITY, -INFINITY};
      real = specials[rng() % 4];
    }
    switch (type) {
      case ColumnType::kInt32: put(static_cast<int32_t>(v)); break;
      case ColumnType::kUint32: put(static_cast<uint32_t>(v < 0 ? -v : v)); break;
      case ColumnType::kInt64:
        put(v + (valid && rng() % 13 == 0 ? int64_t{1} << 40 : 0));
        break;
      case ColumnType::kUint64: put(static_cast<uint64_t>(v < 0 ? -v : v)); break;
      case ColumnType::kFloat32: put(valid ? static_cast<float>(real) : 0.0f); break;
      default: put(valid ? real : 0.0); break;
    }
  }
  return c;
}

inline ColumnView ViewOf(const PlanColumn& c) {
  return ColumnView{c.type, c.rows, c.data, {}, c.validity};
}

inline PlanLiteral RandomLiteral(ColumnType type, std::mt19937_64& rng) {
  PlanLiteral l;
  if (type == ColumnType::kBool) {
    l.kind = PlanLiteral::Kind::kBool;
    l.boolean = rng() % 2 == 0;
  } else if (rng() % 3 == 0) {
    l.kind = PlanLiteral::Kind::kFloat;
    const double reals[] = {0.5, 2.0, -0.0, 7.25, std::nan(""), 1e30};
    l.real = reals[rng() % 6];
  } else {
    l.integer = static_cast<int64_t>(rng() % 12) - 2;
  }
  return l;
}

inline PlanExpr RandomExpr(const std::vector<ColumnType>& types, int depth, std::mt19937_64& rng) {
  PlanExpr e;
  const int pick = static_cast<int>(rng() % (depth >= 4 ? 4 : 7));
  if (pick >= 4) {
    e.kind = pick == 4 ? PlanExpr::Kind::kAnd : pick == 5 ? PlanExpr::Kind::kOr : PlanExpr::Kind::kNot;
    const size_t n = e.kind == PlanExpr::Kind::kNot ? 1 : 2 + rng() % 2;
    for (size_t k = 0; k < n; ++k) e.children.push_back(RandomExpr(types, depth + 1, rng));
    return e;
  }
  do {
    e.column = static_cast<uint32_t>(rng() % types.size());
  } while (types[e.column] == ColumnType::kString);  // a host-only column
  const ColumnType t = types[e.column];
  if (pick == 0) {
    e.kind = rng() % 2 ? PlanExpr::Kind::kIsNull : PlanExpr::Kind::kIsNotNull;
  } else if (pick == 1) {
    e.kind = rng() % 2 ? PlanExpr::Kind::kIn : PlanExpr::Kind::kNotIn;
    for (size_t k = 0, n = 1 + rng() % 3; k < n; ++k) e.literals.push_back(RandomLiteral(t, rng));
  } else {
    e.kind = PlanExpr::Kind::kCompare;
    e.op = static_cast<CompareOp>(t == ColumnType::kBool ? rng() % 2 : rng() % 6);
    e.literals.push_back(RandomLiteral(t, rng));
  }
  return e;
}

// The indexes of one trial, built on `backend`.
struct Indexes {
  std::unique_ptr<HashIndex> a, b;
};

// Index A's labelled column: strings (with nulls) and their dictionary codes.
struct Labels {
  std::string bytes;
  std::vector<uint64_t> offsets = {0};
  std::vector<uint8_t> validity;
  StringDictionary values;
  CodesColumn codes;
};

struct Trial {
  std::vector<uint32_t> keys_a;
  std::vector<uint64_t> keys_b;
  std::vector<PlanColumn> payload_a, payload_b;
  std::shared_ptr<Labels> labels = std::make_shared<Labels>();  // index A's column 3
  std::vector<PlanTable> batches;
  Plan plan;
  bool aggregate = true;
};

inline Trial RandomTrial(std::mt19937_64& rng, bool aggregate) {
  Trial t;
  t.aggregate = aggregate;
  const uint64_t rows_a = 1 + rng() % 400, rows_b = 1 + rng() % 300;
  for (uint64_t r = 0; r < rows_a; ++r) t.keys_a.push_back(static_cast<uint32_t>(rng() % 500));
  for (uint64_t r = 0; r < rows_b; ++r) t.keys_b.push_back((uint64_t{1} << 33) + rng() % 400);
  for (ColumnType type : {ColumnType::kInt32, ColumnType::kUint32, ColumnType::kFloat64}) {
    t.payload_a.push_back(RandomColumn(type, rows_a, true, 9, rng));
  }
  for (ColumnType type : {ColumnType::kInt64, ColumnType::kFloat32}) {
    t.payload_b.push_back(RandomColumn(type, rows_b, rng() % 2 == 0, 6, rng));
  }
  // A's column 3: strings of a few values (some equal but for one byte), coded
  // by a dictionary in another order than first seen.
  Labels& l = *t.labels;
  l.validity.assign(BitmapBytes(rows_a), 0);
  l.values.Add("type-b");
  for (uint64_t r = 0; r < rows_a; ++r) {
    const bool valid = rng() % 9 != 0;
    SetBit(l.validity.data(), r, valid);
    if (valid) l.bytes += "type-" + std::string(1, static_cast<char>('a' + rng() % 5));
    l.offsets.push_back(l.bytes.size());
  }
  auto codes = EncodeColumn(
      ColumnView{ColumnType::kString, rows_a, std::as_bytes(std::span(l.bytes)), l.offsets,
                 l.validity},
      l.values, 100, 1000);
  EXPECT_TRUE(codes.ok()) << codes.status();
  l.codes = *std::move(codes);
  // Input: key (int64, int32 or uint32: nulls, negatives, beyond uint32),
  // key_b (uint64), v (float64), cat (int32), name (string).
  const size_t batches = 1 + rng() % 3;
  const size_t key_type = rng() % 3;
  for (size_t i = 0; i < batches; ++i) {
    const uint64_t rows = rng() % 4 == 0 ? 1 + rng() % 3 : 1 + rng() % 2000;
    PlanTable b;
    b.rows = rows;
    const ColumnType key_types[] = {ColumnType::kInt64, ColumnType::kInt32, ColumnType::kUint32};
    PlanColumn key = RandomColumn(key_types[key_type], rows, true, 560, rng);
    PlanColumn key_b;
    key_b.type = ColumnType::kUint64;
    key_b.rows = rows;
    key_b.data.resize(rows * 8);
    for (uint64_t r = 0; r < rows; ++r) {
      const uint64_t k = rng() % 3 == 0 ? rng() % 450 : (uint64_t{1} << 33) + rng() % 450;
      std::memcpy(key_b.data.data() + r * 8, &k, 8);
    }
    // A string column no step reads: it stays on the host and comes through.
    PlanColumn name;
    name.type = ColumnType::kString;
    name.rows = rows;
    name.offsets.push_back(0);
    for (uint64_t r = 0; r < rows; ++r) {
      const std::string v = "n" + std::to_string(rng() % 1000);
      for (char ch : v) name.data.push_back(static_cast<std::byte>(ch));
      name.offsets.push_back(static_cast<uint32_t>(name.data.size()));
    }
    b.columns = {key, key_b, RandomColumn(ColumnType::kFloat64, rows, true, 20, rng),
                 RandomColumn(ColumnType::kInt32, rows, true, 4, rng), name};
    b.names.resize(b.columns.size());
    t.batches.push_back(std::move(b));
  }
  std::vector<ColumnType> types = {t.batches[0].columns[0].type, ColumnType::kUint64,
                                   ColumnType::kFloat64, ColumnType::kInt32, ColumnType::kString};
  Plan& plan = t.plan;
  plan.index_slots = 2;
  const JoinKind kinds[] = {JoinKind::kInner, JoinKind::kLeftOuter, JoinKind::kLeftSemi,
                            JoinKind::kLeftAnti};
  PlanLookupStep a;
  a.index_slot = 0;
  a.key_type = KeyType::kUint32;
  a.key_columns = {0};
  a.kind = kinds[rng() % 4];
  for (uint32_t c = 0; c < 3; ++c) {
    if (rng() % 3 != 0) a.select.push_back(c);
  }
  // The labelled strings (aggregate plans: the lowering groups their codes).
  uint32_t label_column = ~0u;
  if (aggregate && rng() % 2 == 0) {
    a.select_labels.assign(a.select.size(), -1);
    a.select.push_back(3);
    a.select_labels.push_back(0);
    plan.label_types = {ColumnType::kString};
  }
  plan.steps.emplace_back(a);
  for (uint32_t c : a.select) {
    if (c == 3) label_column = static_cast<uint32_t>(types.size());
    // Filters and measures leave the labels (label ids) alone.
    types.push_back(c == 3 ? ColumnType::kString : t.payload_a[c].type);
  }
  types.push_back(ColumnType::kBool);
  if (rng() % 2 == 0) {
    plan.steps.emplace_back(PlanFilterStep{RandomExpr(types, 0, rng)});
  }
  if (rng() % 2 == 0) {
    PlanLookupStep b;
    b.index_slot = 1;
    b.key_type = KeyType::kUint64;
    b.key_columns = {1};
    b.kind = rng() % 2 ? JoinKind::kLeftOuter : kinds[rng() % 4];
    for (uint32_t c = 0; c < 2; ++c) {
      if (rng() % 2 != 0) b.select.push_back(c);
    }
    plan.steps.emplace_back(b);
    for (uint32_t c : b.select) types.push_back(t.payload_b[c].type);
    types.push_back(ColumnType::kBool);
  }
  if (rng() % 2 == 0) {
    plan.steps.emplace_back(PlanFilterStep{RandomExpr(types, 0, rng)});
  }
  if (!aggregate) {
    // The host's part of a row plan: a projection and a limit over the stream.
    if (rng() % 2 == 0) {
      PlanProjectStep project;
      for (uint32_t c = 0; c < types.size(); ++c) {
        if (rng() % 2 == 0) project.columns.push_back(c);
      }
      if (project.columns.empty()) project.columns.push_back(4);
      plan.steps.emplace_back(project);
    }
    if (rng() % 2 == 0) plan.steps.emplace_back(PlanLimitStep{rng() % 1500});
    return t;
  }
  PlanAggregateStep agg;
  // Group by some of: cat (3), a found column, integer payload columns.
  std::vector<uint32_t> groupable;
  for (uint32_t c = 0; c < types.size(); ++c) {
    if (c == 3 || (c > 3 && (types[c] == ColumnType::kInt32 || types[c] == ColumnType::kUint32 ||
                             types[c] == ColumnType::kBool))) {
      groupable.push_back(c);
    }
  }
  // The device packs a group key into 63 bits (one 32-bit column, a label's
  // code in 3 bits, found flags and null flags), the host into 64 (a label
  // id 32 bits).
  bool wide = false;
  unsigned host_bits = 0;
  if (label_column != ~0u && rng() % 3 != 0) {
    agg.group_by.push_back(label_column);
    agg.group_labels = {0};
    host_bits = 32;
  }
  for (uint32_t c : groupable) {
    if (rng() % 3 != 0 || agg.group_by.size() >= 3) continue;
    const unsigned bits = types[c] == ColumnType::kBool ? 1 : 32;
    if (host_bits + bits > 64) continue;
    if (types[c] != ColumnType::kBool) {
      if (wide) continue;
      wide = true;
    }
    host_bits += bits;
    agg.group_by.push_back(c);
    if (!agg.group_labels.empty()) agg.group_labels.push_back(-1);
  }
  agg.measures.push_back({AggregateOp::kCount, PlanMeasure::kNoColumn});
  for (uint32_t c = 2; c < types.size(); ++c) {
    const ColumnType type = types[c];
    if (type == ColumnType::kBool || type == ColumnType::kString || rng() % 2 == 0) continue;
    const AggregateOp ops[] = {AggregateOp::kCount, AggregateOp::kSum, AggregateOp::kMin,
                               AggregateOp::kMax, AggregateOp::kMean};
    PlanMeasure m{ops[rng() % 5], c};
    // 64-bit integer sums and means are the host's (exact in halves).
    if (type == ColumnType::kInt64 && (m.op == AggregateOp::kSum || m.op == AggregateOp::kMean)) {
      m.op = AggregateOp::kMax;
    }
    m.finite_only = m.op == AggregateOp::kCount && rng() % 2 == 0;
    agg.measures.push_back(m);
  }
  plan.steps.emplace_back(agg);
  plan.aggregate_input_types = types;
  if (label_column != ~0u) plan.aggregate_input_types[label_column] = ColumnType::kUint32;
  return t;
}

inline Indexes BuildIndexes(Backend& backend, const Trial& t) {
  Indexes out;
  for (int which = 0; which < 2; ++which) {
    HashIndexSpec spec;
    spec.key_type = which == 0 ? KeyType::kUint32 : KeyType::kUint64;
    spec.capacity = 2048;
    auto index = backend.CreateIndex(spec);
    EXPECT_TRUE(index.ok()) << index.status();
    CommandGraph g;
    const auto& payload = which == 0 ? t.payload_a : t.payload_b;
    std::vector<ColumnView> views;
    for (const PlanColumn& c : payload) views.push_back(ViewOf(c));
    if (which == 0) {
      // Column 3, the labelled strings, and 4, their codes.
      const Labels& l = *t.labels;
      views.push_back(ColumnView{ColumnType::kString, t.keys_a.size(),
                                 std::as_bytes(std::span(l.bytes)), l.offsets, l.validity});
      views.push_back(l.codes.View());
      BuildIndexNode n;
      n.index = index->get();
      n.keys = ChunkedU32{std::span<const uint32_t>(t.keys_a)};
      n.payload = views;
      g.Add(std::move(n));
    } else {
      BuildIndexNode64 n;
      n.index = index->get();
      n.keys = Chunked<uint64_t>{std::span<const uint64_t>(t.keys_b)};
      n.payload = views;
      g.Add(std::move(n));
    }
    EXPECT_TRUE(backend.Run(g).ok());
    if (which == 0) {
      auto d = std::make_shared<std::vector<PayloadDictionary>>(1);
      (*d)[0].column = 3;
      (*d)[0].codes_column = 4;
      (*d)[0].values = t.labels->values;
      (*index)->AttachDictionaries(d);
    }
    (which == 0 ? out.a : out.b) = std::move(*index);
  }
  return out;
}

// The reference: every step on the CPU backend's host path.
inline PlanLimits HostPath() {
  PlanLimits limits;
  limits.device_batches = false;
  return limits;
}

struct RunResult {
  absl::Status status;
  PlanTable groups;
  std::vector<PlanTable> rows;  // row plans: per batch
  std::vector<std::vector<PlanStepStatistics>> statistics;  // per batch
};

inline RunResult RunPlan(Backend& backend, const Trial& t, const Indexes& ix, const PlanLimits& limits) {
  RunResult out;
  PlanRun run(&backend, t.plan, limits);
  const std::vector<const HashIndex*> indexes = {ix.a.get(), ix.b.get()};
  for (const PlanTable& b : t.batches) {
    std::vector<PlanStepStatistics> stats;
    auto r = run.RunBatch(b, indexes, &stats);
    if (!r.ok()) {
      out.status = r.status();
      return out;
    }
    out.statistics.push_back(stats);
    out.rows.push_back(*std::move(r));
  }
  if (!t.aggregate) return out;
  std::vector<PlanStepStatistics> stats;
  auto groups = run.Groups(indexes, &stats);
  if (!groups.ok()) {
    out.status = groups.status();
    return out;
  }
  out.groups = *std::move(groups);
  return out;
}

// Equal tables; float values within a relative 1e-9 (float32: 1e-4) unless
// `exact`, where every value's bytes must match.
inline void ExpectSameTable(const PlanTable& got, const PlanTable& want, const std::string& what,
                     bool exact = false) {
  ASSERT_EQ(got.rows, want.rows) << what;
  ASSERT_EQ(got.columns.size(), want.columns.size()) << what;
  for (size_t c = 0; c < want.columns.size(); ++c) {
    const PlanColumn& g = got.columns[c];
    const PlanColumn& w = want.columns[c];
    ASSERT_EQ(g.type, w.type) << what << " column " << c;
    EXPECT_EQ(g.validity.empty(), w.validity.empty()) << what << " column " << c;
    for (uint64_t r = 0; r < want.rows; ++r) {
      ASSERT_EQ(g.valid(r), w.valid(r)) << what << " column " << c << " row " << r;
      if (!w.valid(r)) continue;
      if (w.type == ColumnType::kString) {
        EXPECT_EQ(g.text(r), w.text(r)) << what << " column " << c << " row " << r;
      } else if (!exact && (w.type == ColumnType::kFloat64 || w.type == ColumnType::kFloat32)) {
        const double a = w.type == ColumnType::kFloat64 ? g.value<double>(r) : g.value<float>(r);
        const double b = w.type == ColumnType::kFloat64 ? w.value<double>(r) : w.value<float>(r);
        if (std::isnan(b)) {
          EXPECT_TRUE(std::isnan(a)) << what << " column " << c << " row " << r;
        } else if (std::isinf(b)) {
          EXPECT_EQ(a, b) << what << " column " << c << " row " << r;
        } else {
          const double tol = (w.type == ColumnType::kFloat64 ? 1e-9 : 1e-4) *
                             std::max(1.0, std::fabs(b));
          EXPECT_NEAR(a, b, tol) << what << " column " << c << " row " << r;
        }
      } else if (w.type == ColumnType::kBool) {
        EXPECT_EQ(BitAt(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(g.data.data()),
                                                 g.data.size()),
                        r),
                  BitAt(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(w.data.data()),
                                                 w.data.size()),
                        r))
            << what << " column " << c << " row " << r;
      } else {
        const size_t width = ColumnWidth(w.type);
        EXPECT_EQ(std::memcmp(g.data.data() + r * width, w.data.data() + r * width, width), 0)
            << what << " column " << c << " row " << r;
      }
    }
  }
}

// Equal runs: both succeeded, the same groups (floats close), the same rows
// of every batch byte for byte, and the same statistics of every step.
inline void ExpectSameRun(const RunResult& got, const RunResult& want, const std::string& what) {
  ASSERT_TRUE(want.status.ok()) << what << ": " << want.status;
  ASSERT_TRUE(got.status.ok()) << what << ": " << got.status;
  ExpectSameTable(got.groups, want.groups, what);
  ASSERT_EQ(got.rows.size(), want.rows.size()) << what;
  for (size_t b = 0; b < want.rows.size(); ++b) {
    ExpectSameTable(got.rows[b], want.rows[b], what + " batch " + std::to_string(b), true);
  }
  ASSERT_EQ(got.statistics.size(), want.statistics.size()) << what;
  for (size_t b = 0; b < want.statistics.size(); ++b) {
    for (size_t s = 0; s < want.statistics[b].size(); ++s) {
      const PlanStepStatistics& g = got.statistics[b][s];
      const PlanStepStatistics& w = want.statistics[b][s];
      const std::string where = what + " batch " + std::to_string(b) + " step " + std::to_string(s);
      EXPECT_EQ(g.ran, w.ran) << where;
      EXPECT_EQ(g.rows_in, w.rows_in) << where;
      EXPECT_EQ(g.rows_out, w.rows_out) << where;
      EXPECT_EQ(g.query.found, w.query.found) << where;
      EXPECT_EQ(g.query.missing, w.query.missing) << where;
    }
  }
}

}  // namespace gpujoin::engine::testing
