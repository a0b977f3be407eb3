// A batch of an aggregate plan on the device (device_plan.hpp).
#include "cuda/plan/device_plan.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/plan/plan_table.hpp"
#include "cuda/cuda_error.hpp"
#include "cuda/index/lookup.hpp"
#include "cuda/lowering/lowering.hpp"
#include "cuda/payload/payload_ops.hpp"
#include "cuda/plan/plan_kernels.hpp"
#include "gpujoin/common/status_macros.hpp"
#include "gpujoin/engine/aggregation.hpp"

namespace gpujoin::engine::detail {
namespace {

// A filter expression in postfix order (PlanFilterOp); n-ary and/or fold
// pairwise, so the stack holds at most the expression's depth plus one.
void Emit(const PlanExpr& e, std::vector<PlanFilterOp>* ops,
          std::vector<PlanFilterLiteral>* literals) {
  PlanFilterOp op;
  op.column = e.column;
  op.compare = static_cast<uint8_t>(e.op);
  switch (e.kind) {
    case PlanExpr::Kind::kAnd:
    case PlanExpr::Kind::kOr:
      for (size_t k = 0; k < e.children.size(); ++k) {
        Emit(e.children[k], ops, literals);
        if (k > 0) {
          op.code = e.kind == PlanExpr::Kind::kAnd ? PlanFilterOp::kAnd : PlanFilterOp::kOr;
          ops->push_back(op);
        }
      }
      return;
    case PlanExpr::Kind::kNot:
      Emit(e.children[0], ops, literals);
      op.code = PlanFilterOp::kNot;
      ops->push_back(op);
      return;
    case PlanExpr::Kind::kIsNull:
    case PlanExpr::Kind::kIsNotNull:
      op.code = e.kind == PlanExpr::Kind::kIsNull ? PlanFilterOp::kIsNull : PlanFilterOp::kIsNotNull;
      ops->push_back(op);
      return;
    case PlanExpr::Kind::kCompare:
    case PlanExpr::Kind::kIn:
    case PlanExpr::Kind::kNotIn:
      op.code = e.kind == PlanExpr::Kind::kCompare ? PlanFilterOp::kCompare
                : e.kind == PlanExpr::Kind::kIn    ? PlanFilterOp::kIn
                                                   : PlanFilterOp::kNotIn;
      op.first_literal = static_cast<uint32_t>(literals->size());
      op.literals = static_cast<uint32_t>(e.literals.size());
      for (const PlanLiteral& l : e.literals) {
        PlanFilterLiteral d;
        d.integer = l.integer;
        d.real = l.real;
        d.kind = static_cast<uint8_t>(l.kind);
        d.boolean = l.boolean ? 1 : 0;
        literals->push_back(d);
      }
      ops->push_back(op);
      return;
  }
}

// Groups downloaded with the step counters, before their count is known.
constexpr uint64_t kPrefetchedGroups = 4096;

uint64_t NextPowerOfTwo(uint64_t v) {
  uint64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

class CudaPlanBatch final : public DevicePlanBatch {
 public:
  CudaPlanBatch(int device, std::unique_ptr<StreamContext> ctx, ReleaseStreamContext release)
      : device_(device), ctx_(std::move(ctx)), release_(std::move(release)) {}
  ~CudaPlanBatch() override {
    // Device memory goes back on the stream before the stream does.
    buffers_.clear();
    live_ = {};
    slot_of_row_ = {};
    entry_slots_ = {};
    release_(std::move(ctx_), failed_);
  }

  absl::Status Start(const DevicePlanInput& input) {
    absl::Status s = RunSteps(input);
    failed_ = !s.ok();
    return s;
  }

  const std::vector<uint64_t>& group_keys() const override { return keys_; }
  const std::vector<PlanStepStatistics>& statistics() const override { return statistics_; }
  uint64_t rows() const override { return reaching_; }

  absl::Status Aggregate(std::span<const uint32_t> codes, uint32_t groups,
                         std::span<const DeviceMeasureOutput> outputs) override {
    absl::Status s = RunMeasures(codes, groups, outputs);
    if (!s.ok()) failed_ = true;
    return s;
  }

  absl::StatusOr<PlanTable> Rows(PlanTable input) override {
    absl::StatusOr<PlanTable> rows = RowsOf(std::move(input));
    if (!rows.ok()) failed_ = true;
    return rows;
  }

 private:
  cudaStream_t stream() const { return ctx_->stream(); }

  // A device buffer of `bytes` owned by the batch.
  absl::StatusOr<uint8_t*> Buffer(size_t bytes, const char* what) {
    GPUJOIN_ASSIGN_OR_RETURN(auto b, Alloc<uint8_t>(bytes, *ctx_, what));
    buffers_.push_back(std::move(b));
    return buffers_.back().data();
  }

  absl::StatusOr<uint8_t*> Upload(const void* data, size_t bytes, const char* what) {
    GPUJOIN_ASSIGN_OR_RETURN(uint8_t * d, Buffer(bytes, what));
    if (bytes > 0) {
      const HostRange range{data, bytes};
      GPUJOIN_RETURN_IF_ERROR(ctx_->Upload(d, std::span<const HostRange>(&range, 1), what));
    }
    return d;
  }

  template <KeyWord K>
  absl::Status Lookup(const PlanLookupStep& step, const CudaHashIndex& index, size_t i,
                      PlanStepCounters* counters) {
    const std::string where = absl::StrCat("plan step ", i, " (lookup)");
    const PlanColumnRef key = columns_[step.key_columns[0]];
    const K* keys = static_cast<const K*>(key.data);
    if (key.type != (sizeof(K) == 4 ? ColumnType::kUint32 : ColumnType::kUint64) ||
        key.validity != nullptr) {
      GPUJOIN_ASSIGN_OR_RETURN(uint8_t * words, Buffer(rows_ * sizeof(K), "plan key words"));
      GPUJOIN_CUDA_RETURN(PlanKeyWords<K>(key, rows_, reinterpret_cast<K*>(words), stream()),
                          where);
      keys = reinterpret_cast<const K*>(words);
    }
    GPUJOIN_ASSIGN_OR_RETURN(uint8_t * values, Buffer(rows_ * 4, "plan lookup values"));
    GPUJOIN_ASSIGN_OR_RETURN(uint8_t * found, Buffer(rows_, "plan lookup found"));
    GPUJOIN_ASSIGN_OR_RETURN(uint8_t * probes, Buffer(rows_ * 4, "plan lookup probes"));
    GPUJOIN_ASSIGN_OR_RETURN(uint8_t * slots, Buffer(rows_ * 4, "plan lookup slots"));
    auto* stats = reinterpret_cast<DeviceQueryStats*>(ctx_->device_stats());
    GPUJOIN_CUDA_RETURN(cudaMemsetAsync(stats, 0, sizeof(*stats), stream()), where);
    GPUJOIN_CUDA_RETURN(
        LookupKeysSlots(index.table<K>(), keys, rows_, index.spec().probe_bound(),
                        reinterpret_cast<uint32_t*>(values), found,
                        reinterpret_cast<uint32_t*>(probes), reinterpret_cast<uint32_t*>(slots),
                        stats, stream()),
        where);
    GPUJOIN_CUDA_RETURN(PlanLookupOutcome(found, reinterpret_cast<const uint32_t*>(probes), rows_,
                                          step.kind, live_.data(), counters, stream()),
                        where);
    // The selected payload, gathered by slot (null where missing), then found.
    std::vector<FixedGather> gathers;
    GPUJOIN_ASSIGN_OR_RETURN(
        uint8_t * null_counts,
        Buffer(std::max<size_t>(step.select.size(), 1) * sizeof(unsigned long long),
               "plan gather null counts"));
    GPUJOIN_CUDA_RETURN(cudaMemsetAsync(null_counts, 0,
                                        std::max<size_t>(step.select.size(), 1) *
                                            sizeof(unsigned long long),
                                        stream()),
                        where);
    for (size_t k = 0; k < step.select.size(); ++k) {
      const std::optional<StoredColumn> stored = index.payload_column(step.select[k]);
      if (!stored.has_value()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": the index holds no payload column ", step.select[k]));
      }
      FixedGather g;
      g.column = *stored;
      GPUJOIN_ASSIGN_OR_RETURN(uint8_t * data,
                               Buffer(rows_ * ColumnWidth(stored->type), "plan gathered values"));
      GPUJOIN_ASSIGN_OR_RETURN(uint8_t * validity,
                               Buffer(BitmapBytes(rows_), "plan gathered validity"));
      g.data = data;
      g.validity = validity;
      g.null_count = reinterpret_cast<unsigned long long*>(null_counts) + k;
      gathers.push_back(g);
      columns_.push_back(PlanColumnRef{stored->type, data, validity});
    }
    if (!gathers.empty()) {
      GPUJOIN_CUDA_RETURN(
          GatherFixedColumns(gathers,
                             GatherRows{reinterpret_cast<const uint32_t*>(slots), rows_, nullptr},
                             stream()),
          where);
    }
    columns_.push_back(PlanColumnRef{ColumnType::kBool, found, nullptr});
    return absl::OkStatus();
  }

  absl::Status Filter(const PlanFilterStep& step, size_t i, PlanStepCounters* counters) {
    std::vector<PlanFilterOp> ops;
    std::vector<PlanFilterLiteral> literals;
    Emit(step.where, &ops, &literals);
    GPUJOIN_ASSIGN_OR_RETURN(uint8_t * d_ops,
                             Upload(ops.data(), ops.size() * sizeof(PlanFilterOp), "plan filter"));
    GPUJOIN_ASSIGN_OR_RETURN(
        uint8_t * d_literals,
        Upload(literals.data(), literals.size() * sizeof(PlanFilterLiteral), "plan literals"));
    GPUJOIN_ASSIGN_OR_RETURN(
        uint8_t * d_columns,
        Upload(columns_.data(), columns_.size() * sizeof(PlanColumnRef), "plan columns"));
    GPUJOIN_CUDA_RETURN(
        PlanFilter(reinterpret_cast<const PlanColumnRef*>(d_columns),
                   reinterpret_cast<const PlanFilterOp*>(d_ops), static_cast<uint32_t>(ops.size()),
                   reinterpret_cast<const PlanFilterLiteral*>(d_literals), rows_, live_.data(),
                   counters, stream()),
        absl::StrCat("plan step ", i, " (filter)"));
    return absl::OkStatus();
  }

  absl::Status RunSteps(const DevicePlanInput& input) {
    const Plan& plan = *input.plan;
    const PlanTable& table = *input.table;
    rows_ = table.rows;
    const size_t at = input.steps;
    input_columns_ = table.columns.size();
    for (size_t c = 0; c < table.columns.size(); ++c) {
      const PlanColumn& column = table.columns[c];
      if (c >= input.uploaded.size() || !input.uploaded[c]) {
        columns_.push_back(PlanColumnRef{column.type, nullptr, nullptr});  // host only
        continue;
      }
      GPUJOIN_ASSIGN_OR_RETURN(uint8_t * data,
                               Upload(column.data.data(), column.data.size(), "plan input column"));
      const uint8_t* validity = nullptr;
      if (!column.validity.empty()) {
        GPUJOIN_ASSIGN_OR_RETURN(validity, Upload(column.validity.data(), column.validity.size(),
                                                  "plan input validity"));
      }
      columns_.push_back(PlanColumnRef{column.type, data, validity});
    }
    GPUJOIN_ASSIGN_OR_RETURN(live_, Alloc<uint8_t>(rows_, *ctx_, "plan live rows"));
    GPUJOIN_CUDA_RETURN(cudaMemsetAsync(live_.data(), 1, rows_, stream()), "plan live rows");
    GPUJOIN_ASSIGN_OR_RETURN(
        uint8_t * counters_bytes,
        Buffer(std::max<size_t>(at, 1) * sizeof(PlanStepCounters), "plan step counters"));
    auto* counters = reinterpret_cast<PlanStepCounters*>(counters_bytes);
    GPUJOIN_CUDA_RETURN(
        cudaMemsetAsync(counters, 0, std::max<size_t>(at, 1) * sizeof(PlanStepCounters), stream()),
        "plan step counters");
    for (size_t i = 0; i < at; ++i) {
      if (const auto* lookup = std::get_if<PlanLookupStep>(&plan.steps[i])) {
        GPUJOIN_ASSIGN_OR_RETURN(
            const CudaHashIndex* index,
            ReadableIndex(input.indexes[lookup->index_slot], absl::StrCat("plan step ", i)));
        if (index->key_type() == KeyType::kUint32) {
          GPUJOIN_RETURN_IF_ERROR(Lookup<uint32_t>(*lookup, *index, i, counters + i));
        } else {
          GPUJOIN_RETURN_IF_ERROR(Lookup<uint64_t>(*lookup, *index, i, counters + i));
        }
      } else {
        GPUJOIN_RETURN_IF_ERROR(Filter(std::get<PlanFilterStep>(plan.steps[i]), i, counters + i));
      }
    }
    for (size_t i = 0; i < at; ++i) lookups_.push_back(std::holds_alternative<PlanLookupStep>(plan.steps[i]));
    counters_ = counters;
    if (!input.aggregate) return absl::OkStatus();
    // Group keys: a table of at most twice the rows (or the group limit) slots.
    const auto& agg = std::get<PlanAggregateStep>(plan.steps[at]);
    PlanGroupColumns group;
    group.count = static_cast<uint32_t>(agg.group_by.size());
    group.value_bits = input.layout.value_bits;
    for (size_t j = 0; j < agg.group_by.size(); ++j) {
      group.columns[j] = columns_[agg.group_by[j]];
      group.bits[j] = input.layout.bits[j];
    }
    capacity_ = NextPowerOfTwo(std::max<uint64_t>(64, 2 * (std::min(rows_, input.max_groups) + 1)));
    GPUJOIN_ASSIGN_OR_RETURN(uint8_t * keys, Buffer(capacity_ * 8, "plan group table"));
    GPUJOIN_ASSIGN_OR_RETURN(uint8_t * firsts, Buffer(capacity_ * 4, "plan group first rows"));
    GPUJOIN_ASSIGN_OR_RETURN(slot_of_row_, Alloc<uint32_t>(rows_, *ctx_, "plan group slots"));
    // Flags: full, the collected groups' count, then the inserted keys' count.
    GPUJOIN_ASSIGN_OR_RETURN(uint8_t * flags, Buffer(16, "plan group flags"));
    GPUJOIN_ASSIGN_OR_RETURN(uint8_t * out_keys, Buffer(capacity_ * 8, "plan groups"));
    GPUJOIN_ASSIGN_OR_RETURN(uint8_t * out_firsts, Buffer(capacity_ * 4, "plan groups' rows"));
    GPUJOIN_ASSIGN_OR_RETURN(entry_slots_, Alloc<uint32_t>(capacity_, *ctx_, "plan groups' slots"));
    const char* where = "plan aggregate (group keys)";
    GPUJOIN_CUDA_RETURN(cudaMemsetAsync(keys, 0xff, capacity_ * 8, stream()), where);
    GPUJOIN_CUDA_RETURN(cudaMemsetAsync(firsts, 0xff, capacity_ * 4, stream()), where);
    GPUJOIN_CUDA_RETURN(cudaMemsetAsync(flags, 0, 16, stream()), where);
    auto* full = reinterpret_cast<unsigned int*>(flags);
    GPUJOIN_CUDA_RETURN(
        PlanGroupKeys(group, live_.data(), rows_, reinterpret_cast<unsigned long long*>(keys),
                      reinterpret_cast<uint32_t*>(firsts), capacity_, input.max_groups,
                      slot_of_row_.data(), full, reinterpret_cast<unsigned long long*>(flags + 8),
                      stream()),
        where);
    GPUJOIN_CUDA_RETURN(
        PlanCollectGroups(reinterpret_cast<const unsigned long long*>(keys),
                          reinterpret_cast<const uint32_t*>(firsts), capacity_,
                          reinterpret_cast<unsigned long long*>(out_keys),
                          reinterpret_cast<uint32_t*>(out_firsts), entry_slots_.data(), full + 1,
                          stream()),
        where);
    // One wait: the counters, the flags and the first kPrefetchedGroups groups
    // (a second one only for more groups than that).
    const uint64_t prefetched = std::min<uint64_t>(capacity_, kPrefetchedGroups);
    std::vector<PlanStepCounters> host_counters(std::max<size_t>(at, 1));
    unsigned int host_flags[2] = {0, 0};
    const DeviceRange pieces[4] = {{counters, host_counters.size() * sizeof(PlanStepCounters)},
                                   {flags, sizeof host_flags},
                                   {out_keys, prefetched * 8},
                                   {out_firsts, prefetched * 4}};
    const uint8_t* got[4] = {nullptr, nullptr, nullptr, nullptr};
    GPUJOIN_RETURN_IF_ERROR(ctx_->DownloadGathered(pieces, got, "plan counters"));
    std::memcpy(host_counters.data(), got[0], host_counters.size() * sizeof(PlanStepCounters));
    std::memcpy(host_flags, got[1], sizeof host_flags);
    if (host_flags[0] != 0) {
      return GroupLimitError(input.max_groups, input.groups_limit_name);
    }
    const uint32_t n = host_flags[1];
    std::vector<unsigned long long> entry_keys(n);
    std::vector<uint32_t> entry_firsts(n);
    if (n <= prefetched) {
      std::memcpy(entry_keys.data(), got[2], n * 8ull);
      std::memcpy(entry_firsts.data(), got[3], n * 4ull);
    } else {
      const HostPiece groups_pieces[2] = {{entry_keys.data(), out_keys, n * 8ull},
                                          {entry_firsts.data(), out_firsts, n * 4ull}};
      GPUJOIN_RETURN_IF_ERROR(ctx_->DownloadAll(groups_pieces, "plan groups"));
    }
    order_.resize(n);
    std::iota(order_.begin(), order_.end(), 0u);
    std::sort(order_.begin(), order_.end(),
              [&](uint32_t a, uint32_t b) { return entry_firsts[a] < entry_firsts[b]; });
    keys_.resize(n);
    for (uint32_t k = 0; k < n; ++k) keys_[k] = entry_keys[order_[k]];
    SetStatistics(host_counters);
    measures_ = input.measures;
    return absl::OkStatus();
  }

  // The steps' statistics from their counters.
  void SetStatistics(const std::vector<PlanStepCounters>& counters) {
    statistics_.assign(lookups_.size(), PlanStepStatistics{});
    reaching_ = rows_;
    for (size_t i = 0; i < lookups_.size(); ++i) {
      const PlanStepCounters& c = counters[i];
      PlanStepStatistics& st = statistics_[i];
      st.ran = true;
      st.on_device = true;
      st.rows_in = c.rows_in;
      st.rows_out = c.rows_out;
      if (lookups_[i]) st.query = QueryStatistics{c.found, c.missing, c.total_probes, c.max_probes};
      reaching_ = c.rows_out;
    }
  }

  absl::StatusOr<PlanTable> RowsOf(PlanTable input) {
    GPUJOIN_CUDA_RETURN(cudaSetDevice(device_), "select device");
    // One wait: the counters, the live rows and every column the steps made.
    std::vector<PlanStepCounters> counters(std::max<size_t>(lookups_.size(), 1));
    std::vector<uint8_t> live(rows_);
    std::vector<HostPiece> pieces = {
        {counters.data(), counters_, counters.size() * sizeof(PlanStepCounters)},
        {live.data(), live_.data(), rows_}};
    const size_t made = columns_.size() - input_columns_;
    std::vector<PlanColumn> columns(made);
    for (size_t k = 0; k < made; ++k) {
      const PlanColumnRef& ref = columns_[input_columns_ + k];
      PlanColumn& c = columns[k];
      c.type = ref.type;
      c.rows = rows_;
      // Found flags come as bytes; every other column as its values.
      c.data.resize(ref.type == ColumnType::kBool ? rows_ : rows_ * ColumnWidth(ref.type));
      pieces.push_back({c.data.data(), ref.data, c.data.size()});
      if (ref.validity != nullptr) {
        c.validity.resize(BitmapBytes(rows_));
        pieces.push_back({c.validity.data(), ref.validity, c.validity.size()});
      }
    }
    GPUJOIN_RETURN_IF_ERROR(ctx_->DownloadAll(pieces, "plan rows"));
    SetStatistics(counters);
    for (PlanColumn& c : columns) {
      if (c.type == ColumnType::kBool) {
        std::vector<std::byte> bits(BitmapBytes(rows_), std::byte{0});
        for (uint64_t r = 0; r < rows_; ++r) {
          if (c.data[r] != std::byte{0}) SetBit(reinterpret_cast<uint8_t*>(bits.data()), r, true);
        }
        c.data = std::move(bits);
      }
      // As the host path: a validity only where a row is null.
      bool any_null = false;
      for (uint64_t r = 0; r < rows_ && !c.validity.empty() && !any_null; ++r) any_null = !c.valid(r);
      if (!any_null) c.validity.clear();
      input.columns.push_back(std::move(c));
    }
    input.names.resize(input.columns.size());
    const std::vector<uint32_t> kept = plan_detail::SelectedRows(live);
    if (kept.size() == rows_) return input;
    PlanTable out = plan_detail::TakeRows(input, kept);
    out.rows = kept.size();
    return out;
  }

  absl::Status RunMeasures(std::span<const uint32_t> codes, uint32_t groups,
                           std::span<const DeviceMeasureOutput> outputs) {
    GPUJOIN_CUDA_RETURN(cudaSetDevice(device_), "select device");
    const uint32_t n = static_cast<uint32_t>(order_.size());
    std::vector<uint32_t> entry_codes(n);
    for (uint32_t k = 0; k < n; ++k) entry_codes[order_[k]] = codes[k];
    GPUJOIN_ASSIGN_OR_RETURN(uint8_t * d_entry_codes,
                             Upload(entry_codes.data(), n * 4ull, "plan group codes"));
    GPUJOIN_ASSIGN_OR_RETURN(uint8_t * slot_codes, Buffer(capacity_ * 4, "plan slot codes"));
    GPUJOIN_ASSIGN_OR_RETURN(uint8_t * row_codes, Buffer(rows_ * 4, "plan row codes"));
    GPUJOIN_CUDA_RETURN(
        PlanRowCodes(entry_slots_.data(), reinterpret_cast<const uint32_t*>(d_entry_codes), n,
                     reinterpret_cast<uint32_t*>(slot_codes), slot_of_row_.data(), live_.data(),
                     rows_, reinterpret_cast<uint32_t*>(row_codes), stream()),
        "plan aggregate (codes)");
    for (size_t m = 0; m < measures_.size(); ++m) {
      const DeviceMeasure& measure = measures_[m];
      const std::string where = absl::StrCat("plan aggregate (measure ", m, ")");
      const void* values = nullptr;
      const uint32_t* mask = nullptr;
      if (measure.column != PlanMeasure::kNoColumn) {
        const PlanColumnRef& c = columns_[measure.column];
        if (measure.op != AggregateOp::kCount) values = c.data;
        if (c.validity != nullptr) {
          GPUJOIN_ASSIGN_OR_RETURN(uint8_t * bytes, Buffer(rows_ * 4, "plan measure mask"));
          GPUJOIN_CUDA_RETURN(
              PlanMaskOf(c.validity, rows_, reinterpret_cast<uint32_t*>(bytes), stream()), where);
          mask = reinterpret_cast<const uint32_t*>(bytes);
        }
      }
      GPUJOIN_RETURN_IF_ERROR(AggregateDevice(
          *ctx_, where, measure.op, reinterpret_cast<const uint32_t*>(row_codes), values,
          measure.value_type, mask, rows_, groups,
          {outputs[m].output, outputs[m].contributing_rows, outputs[m].overflow}));
    }
    return absl::OkStatus();
  }

  int device_;
  std::unique_ptr<StreamContext> ctx_;
  ReleaseStreamContext release_;
  bool failed_ = false;
  uint64_t rows_ = 0;
  uint64_t reaching_ = 0;
  uint64_t capacity_ = 0;
  size_t input_columns_ = 0;
  std::vector<bool> lookups_;  // per device step: a lookup (else a filter)
  const PlanStepCounters* counters_ = nullptr;
  std::vector<DeviceBuffer<uint8_t>> buffers_;
  std::vector<PlanColumnRef> columns_;
  DeviceBuffer<uint8_t> live_;
  DeviceBuffer<uint32_t> slot_of_row_;
  DeviceBuffer<uint32_t> entry_slots_;
  std::vector<uint32_t> order_;  // key k's collected entry
  std::vector<uint64_t> keys_;
  std::vector<PlanStepStatistics> statistics_;
  std::vector<DeviceMeasure> measures_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<DevicePlanBatch>> StartDevicePlanBatch(
    const DevicePlanInput& input, int device, std::unique_ptr<StreamContext> ctx,
    ReleaseStreamContext release) {
  auto batch = std::make_unique<CudaPlanBatch>(device, std::move(ctx), std::move(release));
  GPUJOIN_RETURN_IF_ERROR(batch->Start(input));
  return std::unique_ptr<DevicePlanBatch>(std::move(batch));
}

}  // namespace gpujoin::engine::detail
