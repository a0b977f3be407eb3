// The lowered plan batch on a host backend's nodes (node_plan_batch.hpp).
#include "common/plan/node_plan_batch.hpp"

#include <algorithm>
#include <deque>
#include <string>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/plan/plan_aggregate.hpp"
#include "common/plan/plan_filter.hpp"
#include "common/plan/plan_table.hpp"
#include "gpujoin/common/status_macros.hpp"
#include "gpujoin/engine/graph.hpp"

namespace gpujoin::engine::plan_detail {
namespace {

class NodePlanBatch final : public DevicePlanBatch {
 public:
  explicit NodePlanBatch(Backend& backend) : backend_(backend) {}

  absl::Status Start(const DevicePlanInput& input) {
    const PlanTable& table = *input.table;
    rows_ = table.rows;
    for (const PlanColumn& c : table.columns) columns_.push_back(&c);
    live_.assign(rows_, 1);
    reaching_ = rows_;
    for (size_t i = 0; i < input.steps; ++i) {
      PlanStepStatistics st;
      st.ran = true;
      st.on_device = true;
      if (const auto* lookup = std::get_if<PlanLookupStep>(&input.plan->steps[i])) {
        GPUJOIN_RETURN_IF_ERROR(
            Lookup(*lookup, input.gathered[i], *input.indexes[lookup->index_slot], i, &st));
      } else {
        Filter(std::get<PlanFilterStep>(input.plan->steps[i]), &st);
      }
      reaching_ = st.rows_out;
      statistics_.push_back(st);
    }
    if (!input.aggregate) return absl::OkStatus();
    const auto& agg = std::get<PlanAggregateStep>(input.plan->steps[input.steps]);
    GPUJOIN_RETURN_IF_ERROR(GroupKeys(agg, input));
    measures_ = input.measures;
    return absl::OkStatus();
  }

  const std::vector<uint64_t>& group_keys() const override { return keys_; }
  const std::vector<PlanStepStatistics>& statistics() const override { return statistics_; }
  uint64_t rows() const override { return reaching_; }

  absl::Status Aggregate(std::span<const uint32_t> codes, uint32_t groups,
                         std::span<const DeviceMeasureOutput> outputs) override {
    // Every live row's code; the others are masked out of every measure.
    std::vector<uint32_t> row_codes(rows_, 0), live_mask(rows_, 0);
    for (uint64_t r = 0; r < rows_; ++r) {
      if (live_[r] == 0) continue;
      row_codes[r] = codes[entry_of_row_[r]];
      live_mask[r] = 1;
    }
    std::vector<std::vector<uint32_t>> masks(measures_.size());
    CommandGraph graph;
    for (size_t m = 0; m < measures_.size(); ++m) {
      const DeviceMeasure& measure = measures_[m];
      AggregateNode node;
      node.op = measure.op;
      node.keys = ChunkedU32{std::span<const uint32_t>(row_codes)};
      node.mask = ChunkedU32{std::span<const uint32_t>(live_mask)};
      if (measure.column != PlanMeasure::kNoColumn) {
        const PlanColumn& c = *columns_[measure.column];
        if (measure.op != AggregateOp::kCount) node.values = ValuesOf(c);
        if (!c.validity.empty()) {
          masks[m] = live_mask;
          for (uint64_t r = 0; r < rows_; ++r) {
            if (!c.valid(r)) masks[m][r] = 0;
          }
          node.mask = ChunkedU32{std::span<const uint32_t>(masks[m])};
        }
      }
      node.output = outputs[m].output.first(groups);
      node.contributing_rows = outputs[m].contributing_rows.first(groups);
      if (measure.overflow) node.overflow = outputs[m].overflow.first(groups);
      graph.Add(std::move(node));
    }
    if (graph.empty()) return absl::OkStatus();
    return backend_.Run(graph);
  }

  absl::StatusOr<PlanTable> Rows(PlanTable input) override {
    for (PlanColumn& c : made_) {
      DropValidityWithoutNulls(c);
      input.columns.push_back(std::move(c));
    }
    made_.clear();
    input.names.resize(input.columns.size());
    const std::vector<uint32_t> kept = SelectedRows(live_);
    if (kept.size() == rows_) return input;
    PlanTable out = TakeRows(input, kept);
    out.rows = kept.size();
    return out;
  }

 private:
  // A column the steps made, addressed by position like the input's.
  PlanColumn& Made(ColumnType type) {
    PlanColumn& c = made_.emplace_back();
    c.type = type;
    c.rows = rows_;
    columns_.push_back(&c);
    return c;
  }

  template <KeyWord K>
  absl::Status Probe(const PlanLookupStep& step, std::span<const uint32_t> select,
                     const HashIndex& index, size_t i, std::vector<uint8_t>* found,
                     std::vector<uint32_t>* probes) {
    std::vector<K> converted;
    const std::span<const K> keys = KeyWordsOf<K>(*columns_[step.key_columns[0]], &converted);
    std::vector<uint32_t> values(rows_);
    found->assign(rows_, 0);
    probes->assign(rows_, 0);
    LookupNodeT<K> node;
    node.index = &index;
    node.keys = Chunked<K>{keys};
    node.values = values;
    node.found = *found;
    node.probes = *probes;
    // The selected payload per row (null where missing), then the found flag.
    for (uint32_t column : select) {
      if (column >= index.payload().size()) {
        return absl::InvalidArgumentError(absl::StrCat("plan step ", i,
                                                       " (lookup): the index holds no payload "
                                                       "column ",
                                                       column));
      }
      PlanColumn& c = Made(index.payload()[column].type);
      c.data.resize(c.type == ColumnType::kBool ? BitmapBytes(rows_) : rows_ * ColumnWidth(c.type));
      c.validity.assign(BitmapBytes(rows_), 0);
      GatherOutput out;
      out.column = column;
      out.data = c.data;
      out.validity = c.validity;
      node.gather.push_back(out);
    }
    CommandGraph graph;
    graph.Add(std::move(node));
    return backend_.Run(graph);
  }

  absl::Status Lookup(const PlanLookupStep& step, std::span<const uint32_t> select,
                      const HashIndex& index, size_t i, PlanStepStatistics* st) {
    std::vector<uint8_t> found;
    std::vector<uint32_t> probes;
    GPUJOIN_RETURN_IF_ERROR(index.key_type() == KeyType::kUint64
                                ? Probe<uint64_t>(step, select, index, i, &found, &probes)
                                : Probe<uint32_t>(step, select, index, i, &found, &probes));
    PlanColumn& flag = Made(ColumnType::kBool);
    flag.data.assign(BitmapBytes(rows_), std::byte{0});
    // The step's outcome over the rows reaching it; its kind narrows them.
    for (uint64_t r = 0; r < rows_; ++r) {
      if (found[r] != 0) SetBit(reinterpret_cast<uint8_t*>(flag.data.data()), r, true);
      if (live_[r] == 0) continue;
      ++st->rows_in;
      ++(found[r] != 0 ? st->query.found : st->query.missing);
      st->query.total_probes += probes[r];
      st->query.max_probes = std::max<uint64_t>(st->query.max_probes, probes[r]);
      const bool keep = step.kind == JoinKind::kLeftOuter ? true
                        : step.kind == JoinKind::kLeftAnti ? found[r] == 0
                                                           : found[r] != 0;
      live_[r] = keep ? 1 : 0;
      st->rows_out += keep ? 1 : 0;
    }
    return absl::OkStatus();
  }

  void Filter(const PlanFilterStep& step, PlanStepStatistics* st) {
    const std::vector<uint8_t> truth = EvaluateFilter(step.where, columns_, rows_);
    for (uint64_t r = 0; r < rows_; ++r) {
      if (live_[r] == 0) continue;
      ++st->rows_in;
      live_[r] = truth[r] == kTrue ? 1 : 0;
      st->rows_out += live_[r];
    }
  }

  // The distinct packed keys of the live rows in first-row order, and each
  // live row's entry among them.
  absl::Status GroupKeys(const PlanAggregateStep& agg, const DevicePlanInput& input) {
    std::vector<const PlanColumn*> by;
    for (uint32_t c : agg.group_by) by.push_back(columns_[c]);
    absl::flat_hash_map<uint64_t, uint32_t> entries;
    entry_of_row_.assign(rows_, 0);
    for (uint64_t r = 0; r < rows_; ++r) {
      if (live_[r] == 0) continue;
      const PackedKey packed = PackKey(by, r, input.layout.bits);
      const uint64_t key = packed.first | packed.second << input.layout.value_bits;
      auto [it, inserted] = entries.try_emplace(key, static_cast<uint32_t>(keys_.size()));
      if (inserted) {
        if (keys_.size() + 1 > input.max_groups) {
          return GroupLimitError(input.max_groups, input.groups_limit_name);
        }
        keys_.push_back(key);
      }
      entry_of_row_[r] = it->second;
    }
    return absl::OkStatus();
  }

  Backend& backend_;
  uint64_t rows_ = 0;
  uint64_t reaching_ = 0;
  std::vector<const PlanColumn*> columns_;  // the input's, then the made ones
  std::deque<PlanColumn> made_;             // stable addresses
  std::vector<uint8_t> live_;
  std::vector<uint32_t> entry_of_row_;
  std::vector<uint64_t> keys_;
  std::vector<PlanStepStatistics> statistics_;
  std::vector<DeviceMeasure> measures_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<DevicePlanBatch>> StartNodePlanBatch(Backend& backend,
                                                                     const DevicePlanInput& input) {
  auto batch = std::make_unique<NodePlanBatch>(backend);
  GPUJOIN_RETURN_IF_ERROR(batch->Start(input));
  return std::unique_ptr<DevicePlanBatch>(std::move(batch));
}

}  // namespace gpujoin::engine::plan_detail
