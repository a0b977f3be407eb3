// A batch of a plan on the device (device_plan.hpp): its steps' program
// (plan_program.hpp), then the measures or the rows.
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
#include "cuda/plan/plan_program.hpp"
#include "gpujoin/common/status_macros.hpp"
#include "gpujoin/engine/aggregation.hpp"

namespace gpujoin::engine::detail {
namespace {

class CudaPlanBatch final : public DevicePlanBatch {
 public:
  CudaPlanBatch(int device, std::unique_ptr<StreamContext> ctx, ReleaseStreamContext release)
      : device_(device), ctx_(std::move(ctx)), release_(std::move(release)) {}
  ~CudaPlanBatch() override {
    // Device memory goes back on the stream before the stream does.
    buffers_.clear();
    own_.reset();
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

  // The program of `input`'s shape: the context's captured one when it has
  // seen the shape before (captured now on the second sight), else one made
  // for this batch (also when a capture failed: the shape then runs so).
  absl::Status Program(const DevicePlanInput& input) {
    GPUJOIN_ASSIGN_OR_RETURN(PlanProgram::Shape shape, PlanProgram::ShapeOf(input));
    absl::StatusOr<PlanProgram*> cached = ctx_->plan_graphs().GetWith(
        shape, [&] { return PlanProgram::Capture(input, shape, *ctx_); });
    if (cached.ok() && *cached != nullptr) {
      program_ = *cached;
      return absl::OkStatus();
    }
    GPUJOIN_ASSIGN_OR_RETURN(own_, PlanProgram::Make(input, shape, *ctx_));
    program_ = own_.get();
    return absl::OkStatus();
  }

  absl::Status RunSteps(const DevicePlanInput& input) {
    rows_ = input.table->rows;
    GPUJOIN_RETURN_IF_ERROR(Program(input));
    const PlanProgram& p = *program_;
    // The results of the first wait: the counters, then (aggregate plans) the
    // flags and the first groups, or (row plans) the rows and made columns.
    counters_.resize(std::max<size_t>(p.lookups().size(), 1));
    std::vector<void*> results = {counters_.data()};
    // A row plan runs its program in Rows (its results are the rows).
    if (!input.aggregate) return absl::OkStatus();
    unsigned int flags[2] = {0, 0};
    std::vector<unsigned long long> entry_keys(p.prefetched());
    std::vector<uint32_t> entry_firsts(p.prefetched());
    results.insert(results.end(), {flags, entry_keys.data(), entry_firsts.data()});
    GPUJOIN_RETURN_IF_ERROR(program_->Run(*input.table, results, *ctx_));
    if (flags[0] != 0) return GroupLimitError(input.max_groups, input.groups_limit_name);
    const uint32_t n = flags[1];
    if (n > p.prefetched()) {
      entry_keys.resize(n);
      entry_firsts.resize(n);
      const HostPiece groups_pieces[2] = {{entry_keys.data(), p.group_keys(), n * 8ull},
                                          {entry_firsts.data(), p.group_firsts(), n * 4ull}};
      GPUJOIN_RETURN_IF_ERROR(ctx_->DownloadAll(groups_pieces, "plan groups"));
    }
    order_.resize(n);
    std::iota(order_.begin(), order_.end(), 0u);
    std::sort(order_.begin(), order_.end(),
              [&](uint32_t a, uint32_t b) { return entry_firsts[a] < entry_firsts[b]; });
    keys_.resize(n);
    for (uint32_t k = 0; k < n; ++k) keys_[k] = entry_keys[order_[k]];
    SetStatistics();
    measures_ = input.measures;
    return absl::OkStatus();
  }

  // The steps' statistics from their counters.
  void SetStatistics() {
    const std::vector<bool>& lookups = program_->lookups();
    statistics_.assign(lookups.size(), PlanStepStatistics{});
    reaching_ = rows_;
    for (size_t i = 0; i < lookups.size(); ++i) {
      const PlanStepCounters& c = counters_[i];
      PlanStepStatistics& st = statistics_[i];
      st.ran = true;
      st.on_device = true;
      st.rows_in = c.rows_in;
      st.rows_out = c.rows_out;
      if (lookups[i]) st.query = QueryStatistics{c.found, c.missing, c.total_probes, c.max_probes};
      reaching_ = c.rows_out;
    }
  }

  absl::StatusOr<PlanTable> RowsOf(PlanTable input) {
    GPUJOIN_CUDA_RETURN(cudaSetDevice(device_), "select device");
    // One wait: the counters, the live rows and every column the steps made.
    const PlanProgram& p = *program_;
    std::vector<uint8_t> live(rows_);
    std::vector<void*> results = {counters_.data(), live.data()};
    const size_t made = p.columns().size() - p.input_columns();
    std::vector<PlanColumn> columns(made);
    for (size_t k = 0; k < made; ++k) {
      const PlanColumnRef& ref = p.columns()[p.input_columns() + k];
      PlanColumn& c = columns[k];
      c.type = ref.type;
      c.rows = rows_;
      // Found flags come as bytes; every other column as its values.
      c.data.resize(ref.type == ColumnType::kBool ? rows_ : rows_ * ColumnWidth(ref.type));
      results.push_back(c.data.data());
      if (ref.validity != nullptr) {
        c.validity.resize(BitmapBytes(rows_));
        results.push_back(c.validity.data());
      }
    }
    GPUJOIN_RETURN_IF_ERROR(program_->Run(input, results, *ctx_));
    SetStatistics();
    for (PlanColumn& c : columns) {
      if (c.type == ColumnType::kBool) {
        std::vector<std::byte> bits(BitmapBytes(rows_), std::byte{0});
        for (uint64_t r = 0; r < rows_; ++r) {
          if (c.data[r] != std::byte{0}) SetBit(reinterpret_cast<uint8_t*>(bits.data()), r, true);
        }
        c.data = std::move(bits);
      }
      plan_detail::DropValidityWithoutNulls(c);
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
    const PlanProgram& p = *program_;
    GPUJOIN_ASSIGN_OR_RETURN(uint8_t * slot_codes, Buffer(p.capacity() * 4, "plan slot codes"));
    GPUJOIN_ASSIGN_OR_RETURN(uint8_t * row_codes, Buffer(rows_ * 4, "plan row codes"));
    GPUJOIN_CUDA_RETURN(
        PlanRowCodes(p.entry_slots(), reinterpret_cast<const uint32_t*>(d_entry_codes), n,
                     reinterpret_cast<uint32_t*>(slot_codes), p.slot_of_row(), p.live(), rows_,
                     reinterpret_cast<uint32_t*>(row_codes), stream()),
        "plan aggregate (codes)");
    for (size_t m = 0; m < measures_.size(); ++m) {
      const DeviceMeasure& measure = measures_[m];
      const std::string where = absl::StrCat("plan aggregate (measure ", m, ")");
      const void* values = nullptr;
      const uint32_t* mask = nullptr;
      if (measure.column != PlanMeasure::kNoColumn) {
        const PlanColumnRef& c = p.columns()[measure.column];
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
  // The steps' program: the context's captured one, or own_.
  PlanProgram* program_ = nullptr;
  std::unique_ptr<PlanProgram> own_;
  std::vector<PlanStepCounters> counters_;
  std::vector<DeviceBuffer<uint8_t>> buffers_;
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
