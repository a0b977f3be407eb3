// A plan batch's device work up to its first wait, run as queued or replayed
// as a CUDA Graph (plan_program.hpp).
#include "cuda/plan/plan_program.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <variant>

#include "absl/strings/str_cat.h"
#include "cuda/cuda_error.hpp"
#include "cuda/index/lookup.hpp"
#include "cuda/lowering/lowering.hpp"
#include "cuda/payload/payload_ops.hpp"
#include "cuda/stream_context.hpp"
#include "gpujoin/common/status_macros.hpp"

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

// The group flags: full, the collected groups' count, the inserted keys' count.
constexpr size_t kFlagsBytes = 16;

// Groups downloaded with the step counters, before their count is known.
constexpr uint64_t kPrefetchedGroups = 4096;

size_t Align(size_t v, size_t to) { return (v + to - 1) / to * to; }

uint64_t NextPowerOfTwo(uint64_t v) {
  uint64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

uint64_t Word(const void* p) { return reinterpret_cast<uintptr_t>(p); }

std::string StepName(size_t i, const char* kind) {
  return absl::StrCat("plan step ", i, " (", kind, ")");
}

// The index of a lookup step and the table it probes, as the program bakes them in.
absl::StatusOr<const CudaHashIndex*> IndexOf(const DevicePlanInput& input,
                                             const PlanLookupStep& step, size_t i) {
  return ReadableIndex(input.indexes[step.index_slot], absl::StrCat("plan step ", i));
}

}  // namespace

bool PlanProgram::Capturable(const Shape& shape) {
  return shape.rows != 0 && shape.rows <= Limits::kMaxRows &&
         shape.input_bytes <= Limits::kMaxInputBytes;
}

GraphCounters& PlanProgram::Counters() {
  static GraphCounters counters;
  return counters;
}

GraphTotals PlanGraphCounters() { return PlanProgram::Counters().Totals(); }

absl::StatusOr<PlanProgram::Shape> PlanProgram::ShapeOf(const DevicePlanInput& input) {
  const PlanTable& table = *input.table;
  const Plan& plan = *input.plan;
  Shape s;
  s.rows = table.rows;
  std::vector<uint64_t>& w = s.words;
  w.push_back(table.columns.size());
  uint64_t input_bytes = 0;
  for (size_t c = 0; c < table.columns.size(); ++c) {
    const PlanColumn& column = table.columns[c];
    const bool up = c < input.uploaded.size() && input.uploaded[c];
    w.push_back(static_cast<uint64_t>(column.type) | (up ? 0x100u : 0u));
    if (up) {
      w.push_back(column.data.size());
      w.push_back(column.validity.size());
      input_bytes += Align(column.data.size(), 256) + Align(column.validity.size(), 256);
    }
  }
  s.input_bytes = input_bytes;
  for (size_t i = 0; i < input.steps; ++i) {
    if (const auto* lookup = std::get_if<PlanLookupStep>(&plan.steps[i])) {
      GPUJOIN_ASSIGN_OR_RETURN(const CudaHashIndex* index, IndexOf(input, *lookup, i));
      const bool wide = index->key_type() == KeyType::kUint64;
      w.insert(w.end(), {1, lookup->key_columns[0], static_cast<uint64_t>(lookup->kind),
                         wide ? 64u : 32u,
                         wide ? Word(index->table<uint64_t>().slots)
                              : Word(index->table<uint32_t>().slots),
                         index->spec().capacity, index->spec().probe_bound(),
                         input.gathered[i].size()});
      for (uint32_t column : input.gathered[i]) {
        const std::optional<StoredColumn> stored = index->payload_column(column);
        if (!stored.has_value()) {
          return absl::InvalidArgumentError(absl::StrCat(
              StepName(i, "lookup"), ": the index holds no payload column ", column));
        }
        w.insert(w.end(), {static_cast<uint64_t>(stored->type), Word(stored->data),
                           stored->stride, stored->offset, Word(stored->offsets),
                           Word(stored->validity)});
      }
    } else {
      std::vector<PlanFilterOp> ops;
      std::vector<PlanFilterLiteral> literals;
      Emit(std::get<PlanFilterStep>(plan.steps[i]).where, &ops, &literals);
      w.insert(w.end(), {2, ops.size(), literals.size()});
      for (const PlanFilterOp& op : ops) {
        w.insert(w.end(), {uint64_t{op.code} | uint64_t{op.compare} << 8, op.column,
                           op.first_literal, op.literals});
      }
      for (const PlanFilterLiteral& l : literals) {
        w.insert(w.end(), {static_cast<uint64_t>(l.integer),
                           static_cast<uint64_t>(static_cast<unsigned __int128>(l.integer) >> 64),
                           std::bit_cast<uint64_t>(l.real),
                           uint64_t{l.kind} | uint64_t{l.boolean} << 8});
      }
    }
  }
  if (input.aggregate) {
    const auto& agg = std::get<PlanAggregateStep>(plan.steps[input.steps]);
    w.insert(w.end(), {3, agg.group_by.size(), input.layout.value_bits, input.max_groups});
    for (size_t j = 0; j < agg.group_by.size(); ++j) {
      w.insert(w.end(), {agg.group_by[j], input.layout.bits[j]});
    }
  } else {
    w.push_back(4);
  }
  return s;
}

PlanProgram::~PlanProgram() {
  // The graph first, then device memory (on the stream it was taken on).
  graph_.reset();
  buffers_.clear();
}

absl::StatusOr<uint8_t*> PlanProgram::Buffer(size_t bytes, const char* what) {
  GPUJOIN_ASSIGN_OR_RETURN(auto b, DeviceBuffer<uint8_t>::Async(bytes, stream_, what));
  buffers_.push_back(std::move(b));
  return buffers_.back().data();
}

absl::StatusOr<std::unique_ptr<PlanProgram>> PlanProgram::Make(const DevicePlanInput& input,
                                                               const Shape& shape,
                                                               StreamContext& ctx) {
  std::unique_ptr<PlanProgram> p(new PlanProgram());
  p->shape_ = shape;
  p->stream_ = ctx.stream();
  GPUJOIN_RETURN_IF_ERROR(p->Lay(input, ctx));
  return p;
}

absl::StatusOr<std::unique_ptr<PlanProgram>> PlanProgram::Capture(const DevicePlanInput& input,
                                                                  const Shape& shape,
                                                                  StreamContext& ctx) {
  GPUJOIN_ASSIGN_OR_RETURN(std::unique_ptr<PlanProgram> p, Make(input, shape, ctx));
  GPUJOIN_ASSIGN_OR_RETURN(p->in_, PinnedBuffer::Allocate(std::max<size_t>(p->arena_bytes_, 1),
                                                          "plan graph input"));
  GPUJOIN_ASSIGN_OR_RETURN(p->out_, PinnedBuffer::Allocate(std::max<size_t>(p->result_bytes_, 1),
                                                           "plan graph results"));
  auto graph = std::make_unique<CapturedGraph>();
  const cudaStream_t stream = ctx.stream();
  std::string failed;
  GPUJOIN_RETURN_IF_ERROR(graph->Capture(stream, "capture plan graph", [&] {
    cudaError_t e = cudaSuccess;
    if (p->arena_bytes_ > 0) {
      e = cudaMemcpyAsync(p->arena_, p->in_.data(), p->arena_bytes_, cudaMemcpyHostToDevice,
                          stream);
    }
    if (e == cudaSuccess) e = p->Enqueue(stream, &failed);
    for (const Piece& r : p->results_) {
      if (e != cudaSuccess) break;
      if (r.bytes > 0) {
        e = cudaMemcpyAsync(p->out_.data() + r.at, r.device, r.bytes, cudaMemcpyDeviceToHost,
                            stream);
      }
    }
    return e;
  }));
  p->graph_ = std::move(graph);
  return p;
}

cudaError_t PlanProgram::Enqueue(cudaStream_t stream, std::string* failed) const {
  for (const Call& call : calls_) {
    const cudaError_t e = call.run(stream);
    if (e != cudaSuccess) {
      *failed = call.where;
      return e;
    }
  }
  return cudaSuccess;
}

absl::Status PlanProgram::Run(const PlanTable& table, std::span<void* const> results,
                              StreamContext& ctx) {
  const auto source = [&](size_t k) -> HostRange {
    const PlanColumn& c = table.columns[input_of_[k] / 2];
    return input_of_[k] % 2 == 0 ? HostRange{c.data.data(), c.data.size()}
                                 : HostRange{c.validity.data(), c.validity.size()};
  };
  if (graph_ != nullptr) {
    for (size_t k = 0; k < inputs_.size(); ++k) {
      const HostRange r = source(k);
      if (r.bytes > 0) std::memcpy(in_.data() + inputs_[k].at, r.data, r.bytes);
    }
    GPUJOIN_CUDA_RETURN(graph_->Launch(ctx.stream()), "replay plan graph");
    GPUJOIN_RETURN_IF_ERROR(ctx.Synchronize("plan graph"));
    for (size_t k = 0; k < results_.size(); ++k) {
      if (results_[k].bytes > 0) {
        std::memcpy(results[k], out_.data() + results_[k].at, results_[k].bytes);
      }
    }
    return absl::OkStatus();
  }
  for (size_t k = 0; k < inputs_.size(); ++k) {
    const HostRange r = source(k);
    if (r.bytes > 0) {
      GPUJOIN_RETURN_IF_ERROR(
          ctx.Upload(inputs_[k].device, std::span<const HostRange>(&r, 1), "plan input column"));
    }
  }
  std::string failed;
  if (const cudaError_t e = Enqueue(ctx.stream(), &failed); e != cudaSuccess) {
    return CudaStatus(e, failed);
  }
  std::vector<HostPiece> pieces;
  for (size_t k = 0; k < results_.size(); ++k) {
    pieces.push_back({results[k], results_[k].device, results_[k].bytes});
  }
  return ctx.DownloadAll(pieces, "plan results");
}

absl::Status PlanProgram::Lay(const DevicePlanInput& input, StreamContext& ctx) {
  const Plan& plan = *input.plan;
  const PlanTable& table = *input.table;
  const uint64_t rows = table.rows;
  // The input arena: every uploaded column's values and validity, 256-aligned.
  input_columns_ = table.columns.size();
  for (size_t c = 0; c < table.columns.size(); ++c) {
    const PlanColumn& column = table.columns[c];
    if (c >= input.uploaded.size() || !input.uploaded[c]) continue;
    inputs_.push_back(Piece{nullptr, column.data.size(), arena_bytes_});
    input_of_.push_back(2 * c);
    arena_bytes_ = Align(arena_bytes_ + column.data.size(), 256);
    if (!column.validity.empty()) {
      inputs_.push_back(Piece{nullptr, column.validity.size(), arena_bytes_});
      input_of_.push_back(2 * c + 1);
      arena_bytes_ = Align(arena_bytes_ + column.validity.size(), 256);
    }
  }
  GPUJOIN_ASSIGN_OR_RETURN(arena_, Buffer(std::max<size_t>(arena_bytes_, 1), "plan input columns"));
  for (Piece& piece : inputs_) piece.device = arena_ + piece.at;
  size_t next = 0;
  for (size_t c = 0; c < table.columns.size(); ++c) {
    const PlanColumn& column = table.columns[c];
    PlanColumnRef ref{column.type, nullptr, nullptr};  // host only
    if (next < inputs_.size() && input_of_[next] == 2 * c) {
      ref.data = inputs_[next++].device;
      if (next < inputs_.size() && input_of_[next] == 2 * c + 1) {
        ref.validity = inputs_[next++].device;
      }
    }
    columns_.push_back(ref);
  }
  const size_t at = input.steps;
  GPUJOIN_ASSIGN_OR_RETURN(live_, Buffer(rows, "plan live rows"));
  const size_t counter_bytes = std::max<size_t>(at, 1) * sizeof(PlanStepCounters);
  GPUJOIN_ASSIGN_OR_RETURN(uint8_t * counters, Buffer(counter_bytes, "plan step counters"));
  counters_ = reinterpret_cast<PlanStepCounters*>(counters);
  calls_.push_back({"plan live rows", [live = live_, rows](cudaStream_t s) {
                      return cudaMemsetAsync(live, 1, rows, s);
                    }});
  calls_.push_back({"plan step counters", [counters, counter_bytes](cudaStream_t s) {
                      return cudaMemsetAsync(counters, 0, counter_bytes, s);
                    }});
  results_.push_back(Piece{counters, counter_bytes, 0});
  for (size_t i = 0; i < at; ++i) {
    const bool lookup = std::holds_alternative<PlanLookupStep>(plan.steps[i]);
    lookups_.push_back(lookup);
    GPUJOIN_RETURN_IF_ERROR(lookup ? LayLookup(input, i) : LayFilter(input, i, ctx));
  }
  if (input.aggregate) {
    GPUJOIN_RETURN_IF_ERROR(LayGroups(input));
  } else {
    // A row plan: the live rows and every column the steps made.
    results_.push_back(Piece{live_, rows, 0});
    for (size_t k = input_columns_; k < columns_.size(); ++k) {
      const PlanColumnRef& ref = columns_[k];
      auto* data = static_cast<uint8_t*>(const_cast<void*>(ref.data));
      const size_t width = ref.type == ColumnType::kBool ? 1 : ColumnWidth(ref.type);
      results_.push_back(Piece{data, rows * width, 0});
      if (ref.validity != nullptr) {
        results_.push_back(Piece{const_cast<uint8_t*>(ref.validity), BitmapBytes(rows), 0});
      }
    }
  }
  for (Piece& r : results_) {
    r.at = result_bytes_;
    result_bytes_ = Align(result_bytes_ + r.bytes, 16);
  }
  return absl::OkStatus();
}

absl::Status PlanProgram::LayLookup(const DevicePlanInput& input, size_t i) {
  const auto& step = std::get<PlanLookupStep>(input.plan->steps[i]);
  const uint64_t rows = shape_.rows;
  const std::string where = StepName(i, "lookup");
  GPUJOIN_ASSIGN_OR_RETURN(const CudaHashIndex* index, IndexOf(input, step, i));
  const PlanColumnRef key = columns_[step.key_columns[0]];
  const bool wide = index->key_type() == KeyType::kUint64;
  const size_t word = wide ? 8 : 4;
  const void* keys = key.data;
  if (key.type != (wide ? ColumnType::kUint64 : ColumnType::kUint32) || key.validity != nullptr) {
    GPUJOIN_ASSIGN_OR_RETURN(uint8_t * words, Buffer(rows * word, "plan key words"));
    calls_.push_back({where, [key, rows, words, wide](cudaStream_t s) {
                        return wide ? PlanKeyWords<uint64_t>(key, rows,
                                                             reinterpret_cast<uint64_t*>(words), s)
                                    : PlanKeyWords<uint32_t>(key, rows,
                                                             reinterpret_cast<uint32_t*>(words), s);
                      }});
    keys = words;
  }
  GPUJOIN_ASSIGN_OR_RETURN(uint8_t * values, Buffer(rows * 4, "plan lookup values"));
  GPUJOIN_ASSIGN_OR_RETURN(uint8_t * found, Buffer(rows, "plan lookup found"));
  GPUJOIN_ASSIGN_OR_RETURN(uint8_t * probes, Buffer(rows * 4, "plan lookup probes"));
  GPUJOIN_ASSIGN_OR_RETURN(uint8_t * slots, Buffer(rows * 4, "plan lookup slots"));
  GPUJOIN_ASSIGN_OR_RETURN(uint8_t * stats, Buffer(sizeof(DeviceQueryStats), "plan lookup stats"));
  const uint32_t bound = index->spec().probe_bound();
  auto* v = reinterpret_cast<uint32_t*>(values);
  auto* p = reinterpret_cast<uint32_t*>(probes);
  auto* sl = reinterpret_cast<uint32_t*>(slots);
  auto* st = reinterpret_cast<DeviceQueryStats*>(stats);
  std::function<cudaError_t(cudaStream_t)> probe;
  if (wide) {
    probe = [t = index->table<uint64_t>(), k = static_cast<const uint64_t*>(keys), rows, bound, v,
             found, p, sl, st](cudaStream_t s) {
      return LookupKeysSlots(t, k, rows, bound, v, found, p, sl, st, s);
    };
  } else {
    probe = [t = index->table<uint32_t>(), k = static_cast<const uint32_t*>(keys), rows, bound, v,
             found, p, sl, st](cudaStream_t s) {
      return LookupKeysSlots(t, k, rows, bound, v, found, p, sl, st, s);
    };
  }
  calls_.push_back({where, [st](cudaStream_t s) {
                      return cudaMemsetAsync(st, 0, sizeof(DeviceQueryStats), s);
                    }});
  calls_.push_back({where, std::move(probe)});
  calls_.push_back({where, [found, p, rows, kind = step.kind, live = live_,
                            counters = counters_ + i](cudaStream_t s) {
                      return PlanLookupOutcome(found, p, rows, kind, live, counters, s);
                    }});
  // The selected payload, gathered by slot (null where missing), then found.
  const std::vector<uint32_t>& select = input.gathered[i];
  const size_t null_bytes = std::max<size_t>(select.size(), 1) * sizeof(unsigned long long);
  GPUJOIN_ASSIGN_OR_RETURN(uint8_t * null_counts, Buffer(null_bytes, "plan gather null counts"));
  std::vector<FixedGather> gathers;
  for (size_t k = 0; k < select.size(); ++k) {
    const std::optional<StoredColumn> stored = index->payload_column(select[k]);
    if (!stored.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": the index holds no payload column ", select[k]));
    }
    FixedGather g;
    g.column = *stored;
    GPUJOIN_ASSIGN_OR_RETURN(uint8_t * data,
                             Buffer(rows * ColumnWidth(stored->type), "plan gathered values"));
    GPUJOIN_ASSIGN_OR_RETURN(uint8_t * validity,
                             Buffer(BitmapBytes(rows), "plan gathered validity"));
    g.data = data;
    g.validity = validity;
    g.null_count = reinterpret_cast<unsigned long long*>(null_counts) + k;
    gathers.push_back(g);
    columns_.push_back(PlanColumnRef{stored->type, data, validity});
  }
  if (!gathers.empty()) {
    calls_.push_back({where, [null_counts, null_bytes](cudaStream_t s) {
                        return cudaMemsetAsync(null_counts, 0, null_bytes, s);
                      }});
    calls_.push_back({where, [gathers = std::move(gathers), sl, rows](cudaStream_t s) {
                        return GatherFixedColumns(gathers, GatherRows{sl, rows, nullptr}, s);
                      }});
  }
  columns_.push_back(PlanColumnRef{ColumnType::kBool, found, nullptr});
  return absl::OkStatus();
}

absl::Status PlanProgram::LayFilter(const DevicePlanInput& input, size_t i, StreamContext& ctx) {
  std::vector<PlanFilterOp> ops;
  std::vector<PlanFilterLiteral> literals;
  Emit(std::get<PlanFilterStep>(input.plan->steps[i]).where, &ops, &literals);
  // The program, its literals and the columns it reads go up once.
  const auto upload = [&](const void* data, size_t bytes, const char* what) -> absl::StatusOr<uint8_t*> {
    GPUJOIN_ASSIGN_OR_RETURN(uint8_t * d, Buffer(std::max<size_t>(bytes, 1), what));
    if (bytes > 0) {
      const HostRange range{data, bytes};
      GPUJOIN_RETURN_IF_ERROR(ctx.Upload(d, std::span<const HostRange>(&range, 1), what));
    }
    return d;
  };
  GPUJOIN_ASSIGN_OR_RETURN(uint8_t * d_ops,
                           upload(ops.data(), ops.size() * sizeof(PlanFilterOp), "plan filter"));
  GPUJOIN_ASSIGN_OR_RETURN(
      uint8_t * d_literals,
      upload(literals.data(), literals.size() * sizeof(PlanFilterLiteral), "plan literals"));
  GPUJOIN_ASSIGN_OR_RETURN(
      uint8_t * d_columns,
      upload(columns_.data(), columns_.size() * sizeof(PlanColumnRef), "plan columns"));
  calls_.push_back(
      {StepName(i, "filter"),
       [columns = reinterpret_cast<const PlanColumnRef*>(d_columns),
        program = reinterpret_cast<const PlanFilterOp*>(d_ops),
        count = static_cast<uint32_t>(ops.size()),
        lits = reinterpret_cast<const PlanFilterLiteral*>(d_literals), rows = shape_.rows,
        live = live_, counters = counters_ + i](cudaStream_t s) {
         return PlanFilter(columns, program, count, lits, rows, live, counters, s);
       }});
  return absl::OkStatus();
}

absl::Status PlanProgram::LayGroups(const DevicePlanInput& input) {
  // Group keys: a table of at most twice the rows (or the group limit) slots.
  const uint64_t rows = shape_.rows;
  const auto& agg = std::get<PlanAggregateStep>(input.plan->steps[input.steps]);
  PlanGroupColumns group;
  group.count = static_cast<uint32_t>(agg.group_by.size());
  group.value_bits = input.layout.value_bits;
  for (size_t j = 0; j < agg.group_by.size(); ++j) {
    group.columns[j] = columns_[agg.group_by[j]];
    group.bits[j] = input.layout.bits[j];
  }
  capacity_ = NextPowerOfTwo(std::max<uint64_t>(64, 2 * (std::min(rows, input.max_groups) + 1)));
  prefetched_ = std::min<uint64_t>(capacity_, kPrefetchedGroups);
  GPUJOIN_ASSIGN_OR_RETURN(uint8_t * keys, Buffer(capacity_ * 8, "plan group table"));
  GPUJOIN_ASSIGN_OR_RETURN(uint8_t * firsts, Buffer(capacity_ * 4, "plan group first rows"));
  GPUJOIN_ASSIGN_OR_RETURN(uint8_t * slot_of_row, Buffer(rows * 4, "plan group slots"));
  GPUJOIN_ASSIGN_OR_RETURN(uint8_t * flags, Buffer(kFlagsBytes, "plan group flags"));
  GPUJOIN_ASSIGN_OR_RETURN(uint8_t * out_keys, Buffer(capacity_ * 8, "plan groups"));
  GPUJOIN_ASSIGN_OR_RETURN(uint8_t * out_firsts, Buffer(capacity_ * 4, "plan groups' rows"));
  GPUJOIN_ASSIGN_OR_RETURN(uint8_t * entry_slots, Buffer(capacity_ * 4, "plan groups' slots"));
  slot_of_row_ = reinterpret_cast<uint32_t*>(slot_of_row);
  entry_slots_ = reinterpret_cast<uint32_t*>(entry_slots);
  group_keys_ = reinterpret_cast<unsigned long long*>(out_keys);
  group_firsts_ = reinterpret_cast<uint32_t*>(out_firsts);
  const char* where = "plan aggregate (group keys)";
  const uint64_t capacity = capacity_;
  calls_.push_back({where, [keys, firsts, flags, capacity](cudaStream_t s) {
                      cudaError_t e = cudaMemsetAsync(keys, 0xff, capacity * 8, s);
                      if (e == cudaSuccess) e = cudaMemsetAsync(firsts, 0xff, capacity * 4, s);
                      if (e == cudaSuccess) e = cudaMemsetAsync(flags, 0, kFlagsBytes, s);
                      return e;
                    }});
  auto* full = reinterpret_cast<unsigned int*>(flags);
  calls_.push_back(
      {where, [group, live = live_, rows, keys, firsts, capacity, max = input.max_groups,
               slots = slot_of_row_, full](cudaStream_t s) {
         return PlanGroupKeys(group, live, rows, reinterpret_cast<unsigned long long*>(keys),
                              reinterpret_cast<uint32_t*>(firsts), capacity, max, slots, full,
                              reinterpret_cast<unsigned long long*>(full + 2), s);
       }});
  calls_.push_back(
      {where, [keys, firsts, capacity, out_keys = group_keys_, out_firsts = group_firsts_,
               entries = entry_slots_, full](cudaStream_t s) {
         return PlanCollectGroups(reinterpret_cast<const unsigned long long*>(keys),
                                  reinterpret_cast<const uint32_t*>(firsts), capacity, out_keys,
                                  out_firsts, entries, full + 1, s);
       }});
  results_.push_back(Piece{flags, 2 * sizeof(unsigned int), 0});
  results_.push_back(Piece{out_keys, prefetched_ * 8, 0});
  results_.push_back(Piece{out_firsts, prefetched_ * 4, 0});
  return absl::OkStatus();
}

}  // namespace gpujoin::engine::detail
