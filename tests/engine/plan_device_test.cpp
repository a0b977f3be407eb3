// Plans of the device path's shape (gpujoin/engine/plan_device.hpp)
// on every backend against the CPU backend's host path, on fresh random
// inputs: uint32 and uint64 indexes with nullable int32, uint32, int64,
// float32 and float64 payload; input keys with nulls, negatives and values
// beyond the key word; one or two lookups of every kind; random filters with
// SQL nulls, NaN and literals of every numeric kind; group-bys on input,
// payload and found columns, labelled strings through index A's dictionary;
// every measure the device takes. The plans run
// as the backend's lowered batch (on the GPU for CUDA, over the CPU
// backend's nodes for the CPU), the reference step by step on the host path
// (PlanLimits::device_batches off): groups, their order, counts, integer
// sums, minima and maxima must be equal, float sums close. The same plans over batches of a repeated shape (captured and
// replayed as CUDA Graphs on CUDA) must answer as they do the first time.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/plan/plan_table.hpp"  // engine/src: TakeRows
#include "gpujoin/engine/dictionary.hpp"
#include "gpujoin/engine/plan.hpp"
#include "gpujoin/engine/plan_device.hpp"
#include "test_backends.hpp"

#if defined(GPUJOIN_HAVE_CUDA)
#include "cuda/plan/plan_program.hpp"  // engine/src: PlanGraphCounters
#endif

namespace gpujoin::engine::testing {
namespace {

class PlanDeviceTest : public BackendTest {};

// A random fixed-width column of `type` with nulls (when `nullable`), small
// values (so that groups repeat), negatives for signed types and NaN, -0 and
// infinities for floats.
PlanColumn RandomColumn(ColumnType type, uint64_t rows, bool nullable, uint64_t range,
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

ColumnView ViewOf(const PlanColumn& c) {
  return ColumnView{c.type, c.rows, c.data, {}, c.validity};
}

PlanLiteral RandomLiteral(ColumnType type, std::mt19937_64& rng) {
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

PlanExpr RandomExpr(const std::vector<ColumnType>& types, int depth, std::mt19937_64& rng) {
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

Trial RandomTrial(std::mt19937_64& rng, bool aggregate) {
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

Indexes BuildIndexes(Backend& backend, const Trial& t) {
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
PlanLimits HostPath() {
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

RunResult RunPlan(Backend& backend, const Trial& t, const Indexes& ix, const PlanLimits& limits) {
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
void ExpectSameTable(const PlanTable& got, const PlanTable& want, const std::string& what,
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

TEST_P(PlanDeviceTest, RandomDevicePlansEqualTheHostPath) {
  auto reference = CreateBackend(BackendKind::kCpu);
  ASSERT_TRUE(reference.ok());
  std::mt19937_64 rng(std::random_device{}());
  const uint64_t seed = rng();
  rng.seed(seed);
  for (int trial = 0; trial < 120; ++trial) {
    const Trial t = RandomTrial(rng, trial % 2 == 0);
    const std::string what = "seed " + std::to_string(seed) + " trial " + std::to_string(trial);
    std::vector<ColumnType> input_types;
    for (const PlanColumn& c : t.batches[0].columns) input_types.push_back(c.type);
    const Indexes mine = BuildIndexes(*backend_, t);
    const Indexes theirs = BuildIndexes(**reference, t);
    const std::vector<const HashIndex*> indexes = {mine.a.get(), mine.b.get()};
    ASSERT_TRUE(DevicePlanShapeOf(t.plan, input_types, indexes).has_value()) << what;
    const RunResult got = RunPlan(*backend_, t, mine, PlanLimits{});
    const RunResult want = RunPlan(**reference, t, theirs, HostPath());
    ASSERT_TRUE(want.status.ok()) << what << ": " << want.status;
    ASSERT_TRUE(got.status.ok()) << what << ": " << got.status;
    ExpectSameTable(got.groups, want.groups, what);
    ASSERT_EQ(got.rows.size(), want.rows.size()) << what;
    for (size_t b = 0; b < want.rows.size(); ++b) {
      ExpectSameTable(got.rows[b], want.rows[b], what + " batch " + std::to_string(b), true);
    }
    for (size_t b = 0; b < want.statistics.size(); ++b) {
      for (size_t s = 0; s < want.statistics[b].size(); ++s) {
        const PlanStepStatistics& g = got.statistics[b][s];
        const PlanStepStatistics& w = want.statistics[b][s];
        EXPECT_EQ(g.ran, w.ran) << what << " batch " << b << " step " << s;
        EXPECT_FALSE(w.on_device) << what;
        // The plan's first step runs in the backend's lowered batch.
        if (s == 0) EXPECT_TRUE(g.on_device) << what;
        EXPECT_EQ(g.rows_in, w.rows_in) << what << " batch " << b << " step " << s;
        EXPECT_EQ(g.rows_out, w.rows_out) << what << " batch " << b << " step " << s;
        EXPECT_EQ(g.query.found, w.query.found) << what << " batch " << b << " step " << s;
        EXPECT_EQ(g.query.missing, w.query.missing) << what << " batch " << b << " step " << s;
      }
    }
  }
}

// A batch's rows in another order: the same shape (rows, column types, a
// validity or not) with other values at each row.
PlanTable Shuffled(const PlanTable& t, std::mt19937_64& rng) {
  std::vector<uint32_t> order(t.rows);
  std::iota(order.begin(), order.end(), 0u);
  std::shuffle(order.begin(), order.end(), rng);
  PlanTable out = plan_detail::TakeRows(t, order);
  out.rows = t.rows;
  for (size_t c = 0; c < t.columns.size(); ++c) {
    // A shuffled column keeps its validity (so its shape) even without nulls.
    if (!t.columns[c].validity.empty() && out.columns[c].validity.empty()) {
      out.columns[c].validity.assign(BitmapBytes(t.rows), 0xff);
    }
  }
  return out;
}

struct GraphCount {
  uint64_t captures = 0, replays = 0, failures = 0;
};
GraphCount PlanGraphs() {
#if defined(GPUJOIN_HAVE_CUDA)
  const detail::GraphTotals t = detail::PlanGraphCounters();
  return {t.captures, t.replays, t.capture_failures};
#else
  return {};
#endif
}

// Each trial's batches run four times, in a new row order each time: on CUDA
// the first round runs as queued, the second captures each batch's shape, the
// later ones replay it (with cuda_plan_graphs off nothing is captured); every
// round answers as the CPU backend's host path does on the same rows.
TEST_P(PlanDeviceTest, RepeatedShapesReplayTheSameAnswers) {
  auto reference = CreateBackend(BackendKind::kCpu);
  ASSERT_TRUE(reference.ok());
  const bool cuda = GetParam().kind == BackendKind::kCuda;
  std::mt19937_64 rng(std::random_device{}());
  const uint64_t seed = rng();
  rng.seed(seed);
  for (const bool graphs : {true, false}) {
    std::unique_ptr<Backend> plain;
    Backend* backend = backend_.get();
    if (!graphs) {
      if (!cuda) continue;
      BackendOptions options;
      options.cuda_plan_graphs = false;
      auto created = CreateBackend(BackendKind::kCuda, options);
      ASSERT_TRUE(created.ok()) << created.status();
      plain = std::move(*created);
      backend = plain.get();
    }
    const GraphCount before = PlanGraphs();
    for (int trial = 0; trial < 16; ++trial) {
      const Trial t = RandomTrial(rng, trial % 2 == 0);
      const Indexes mine = BuildIndexes(*backend, t);
      const Indexes theirs = BuildIndexes(**reference, t);
      for (int round = 0; round < 4; ++round) {
        const std::string what = "seed " + std::to_string(seed) + " trial " +
                                 std::to_string(trial) + " round " + std::to_string(round) +
                                 (graphs ? "" : " (graphs off)");
        Trial r = t;
        for (PlanTable& b : r.batches) b = Shuffled(b, rng);
        const RunResult got = RunPlan(*backend, r, mine, PlanLimits{});
        const RunResult want = RunPlan(**reference, r, theirs, HostPath());
        ASSERT_TRUE(want.status.ok()) << what << ": " << want.status;
        ASSERT_TRUE(got.status.ok()) << what << ": " << got.status;
        ExpectSameTable(got.groups, want.groups, what);
        ASSERT_EQ(got.rows.size(), want.rows.size()) << what;
        for (size_t b = 0; b < want.rows.size(); ++b) {
          ExpectSameTable(got.rows[b], want.rows[b], what + " batch " + std::to_string(b), true);
        }
        for (size_t b = 0; b < want.statistics.size(); ++b) {
          for (size_t s = 0; s < want.statistics[b].size(); ++s) {
            EXPECT_EQ(got.statistics[b][s].rows_out, want.statistics[b][s].rows_out)
                << what << " batch " << b << " step " << s;
            EXPECT_EQ(got.statistics[b][s].query.found, want.statistics[b][s].query.found)
                << what << " batch " << b << " step " << s;
          }
        }
      }
    }
    const GraphCount after = PlanGraphs();
    EXPECT_EQ(after.failures, before.failures);
    if (cuda && graphs) {
      EXPECT_GT(after.captures, before.captures);
      EXPECT_GT(after.replays, before.replays);
    } else {
      EXPECT_EQ(after.captures, before.captures);
      EXPECT_EQ(after.replays, before.replays);
    }
  }
}

// More distinct groups than the limit: RESOURCE_EXHAUSTED naming it, and the
// batch adds nothing (a later batch within the limit still aggregates).
TEST_P(PlanDeviceTest, TheGroupLimitHoldsAndAFailedBatchAddsNothing) {
  Plan plan;
  PlanAggregateStep agg;
  agg.group_by = {0};
  agg.measures = {{AggregateOp::kCount, PlanMeasure::kNoColumn}, {AggregateOp::kSum, 1}};
  plan.steps.emplace_back(agg);
  plan.aggregate_input_types = {ColumnType::kInt32, ColumnType::kFloat64};
  PlanLimits limits;
  limits.max_groups = 3;
  limits.groups_limit_name = "--test-groups";
  ASSERT_TRUE(DevicePlanShapeOf(plan, plan.aggregate_input_types, {}).has_value());
  PlanRun run(backend_.get(), plan, limits);
  const auto table = [](std::vector<int32_t> groups) {
    PlanTable t;
    t.rows = groups.size();
    PlanColumn g, v;
    g.type = ColumnType::kInt32;
    g.rows = t.rows;
    g.data.resize(t.rows * 4);
    std::memcpy(g.data.data(), groups.data(), t.rows * 4);
    v.type = ColumnType::kFloat64;
    v.rows = t.rows;
    v.data.resize(t.rows * 8);
    for (uint64_t r = 0; r < t.rows; ++r) {
      const double x = 1.5;
      std::memcpy(v.data.data() + r * 8, &x, 8);
    }
    t.columns = {g, v};
    return t;
  };
  std::vector<PlanStepStatistics> stats;
  ASSERT_TRUE(run.RunBatch(table({7, 7, 9}), {}, &stats).ok());
  auto over = run.RunBatch(table({1, 2, 3, 4, 5, 7}), {}, &stats);
  ASSERT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted) << over.status();
  EXPECT_NE(over.status().message().find("--test-groups"), std::string::npos) << over.status();
  ASSERT_TRUE(run.RunBatch(table({9, 5}), {}, &stats).ok());
  auto groups = run.Groups({}, &stats);
  ASSERT_TRUE(groups.ok()) << groups.status();
  ASSERT_EQ(groups->rows, 3u);
  const int32_t keys[] = {7, 9, 5};
  const uint64_t counts[] = {2, 2, 1};
  for (uint64_t r = 0; r < 3; ++r) {
    EXPECT_EQ(groups->columns[0].value<int32_t>(r), keys[r]);
    EXPECT_EQ(groups->columns[1].value<uint64_t>(r), counts[r]);
    EXPECT_DOUBLE_EQ(groups->columns[2].value<double>(r), 1.5 * counts[r]);
  }
}

// One batch with more groups than come back with the step counters (4096),
// and one with more distinct keys than the limit in itself: the device's
// group table stops there and the batch fails as on the host, adding nothing.
TEST_P(PlanDeviceTest, ManyGroupsInOneBatch) {
  Plan plan;
  PlanAggregateStep agg;
  agg.group_by = {0};
  agg.measures = {{AggregateOp::kCount, PlanMeasure::kNoColumn}, {AggregateOp::kMin, 1}};
  plan.steps.emplace_back(agg);
  plan.aggregate_input_types = {ColumnType::kUint32, ColumnType::kInt32};
  const auto batch = [](uint64_t rows, uint32_t distinct) {
    PlanTable t;
    t.rows = rows;
    PlanColumn g, v;
    g.type = ColumnType::kUint32;
    v.type = ColumnType::kInt32;
    g.rows = v.rows = rows;
    g.data.resize(rows * 4);
    v.data.resize(rows * 4);
    for (uint64_t r = 0; r < rows; ++r) {
      const uint32_t key = static_cast<uint32_t>((r * 7919) % distinct) * 3;
      const int32_t value = static_cast<int32_t>(r % 1000) - 500;
      std::memcpy(g.data.data() + r * 4, &key, 4);
      std::memcpy(v.data.data() + r * 4, &value, 4);
    }
    t.columns = {g, v};
    return t;
  };
  auto reference = CreateBackend(BackendKind::kCpu);
  ASSERT_TRUE(reference.ok());
  PlanLimits limits;
  limits.max_groups = 10000;
  PlanLimits host = limits;
  host.device_batches = false;
  PlanRun mine(backend_.get(), plan, limits), theirs(reference->get(), plan, host);
  std::vector<PlanStepStatistics> stats;
  for (PlanRun* run : {&mine, &theirs}) {
    ASSERT_TRUE(run->RunBatch(batch(30000, 9000), {}, &stats).ok());
    auto over = run->RunBatch(batch(40000, 20000), {}, &stats);
    ASSERT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted) << over.status();
  }
  auto got = mine.Groups({}, &stats);
  auto want = theirs.Groups({}, &stats);
  ASSERT_TRUE(got.ok() && want.ok());
  ASSERT_EQ(want->rows, 9000u);
  ExpectSameTable(*got, *want, "groups", true);
}

INSTANTIATE_TEST_SUITE_P(Backends, PlanDeviceTest, ::testing::ValuesIn(AllBackends()), BackendName);

}  // namespace
}  // namespace gpujoin::engine::testing
