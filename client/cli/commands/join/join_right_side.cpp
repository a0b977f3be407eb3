// gpujoin join, the right side: an ad-hoc join's temporary index, uploaded from
// the right file, or the resident index a join names (join_steps.hpp).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "columns/payload.hpp"
#include "commands/join/join_steps.hpp"
#include "output/progress.hpp"

namespace gpujoin::cli {
namespace {

// The payload name of the right file's column `c` in an ad-hoc join's
// temporary index (file column names need not be valid payload names).
std::string RightColumnName(size_t c) { return absl::StrCat("c", c); }

// The chunks of the temporary index's build: one per right batch, its keys and
// its other columns as payload. The next batch is read when the next chunk is
// asked for (a chunk borrows its batch).
class RightChunks {
 public:
  RightChunks(const JoinOptions& o, JoinInputs& in, const JoinTarget& t,
              const client::IndexSpec& spec, std::vector<size_t> payload_cols)
      : o_(o),
        in_(in),
        t_(t),
        spec_(spec),
        payload_cols_(std::move(payload_cols)),
        batch_(std::move(in.right_first)),
        have_(in.right_more) {}

  std::optional<client::BuildChunk> Next() {
    if (!first_call_ && have_) {
      auto more = in_.right->Next(&batch_);
      if (!more.ok()) {
        input_error_ = more.status();
        return std::nullopt;
      }
      have_ = *more;
    }
    auto chunk = Chunk();
    first_call_ = false;
    return chunk;
  }

  /// The input error that ended the chunks early (OK otherwise).
  const absl::Status& input_error() const { return input_error_; }

 private:
  std::optional<client::BuildChunk> Chunk() {
    if (!have_) return std::nullopt;
    if (t_.right_plan) return WithKeys(ReadKeys(batch_, *t_.right_plan));
    std::optional<KeyVector> plain = in_.right_tracker.PlainKeys(batch_, o_.right_col, t_.key_kind);
    // Past the first batch only 64-bit keys need the tracker (a negative key
    // after one above 2^63 - 1); KeyColumn names a key too wide for uint32.
    if (!plain && o_.flag == KeyKind::kAuto && !first_call_ && t_.key_kind != KeyKind::kU32) {
      auto seen = in_.right_tracker.Observe(batch_, o_.right_col);
      if (!seen.ok()) {
        input_error_ = seen.status();
        return std::nullopt;
      }
    }
    return WithKeys(plain ? absl::StatusOr<KeyVector>(*std::move(plain))
                          : KeyColumn(batch_, o_.right_col, t_.key_kind));
  }

  // The chunk of the batch with keys `k` and the other columns as payload.
  std::optional<client::BuildChunk> WithKeys(absl::StatusOr<KeyVector> k) {
    if (!k.ok()) {
      input_error_ =
          absl::Status(k.status().code(),
                       absl::StrCat(k.status().message(), first_call_ ? t_.why : t_.why_later));
      return std::nullopt;
    }
    keys_ = *std::move(k);
    payload_.clear();
    client::BuildChunk chunk;
    chunk.keys = keys_.keys();
    for (size_t i = 0; i < payload_cols_.size(); ++i) {
      client::Column col(spec_.payload[i].name, client::ColumnType::kBinary);
      for (const Row& r : batch_.rows) {
        const Cell& cell = r.cells[payload_cols_[i]];
        if (cell) {
          const absl::Status st = col.AppendString(*cell);
          if (!st.ok()) {
            input_error_ =
                absl::InvalidArgumentError(absl::StrCat(batch_.source, ": ", st.message()));
            return std::nullopt;
          }
        } else {
          col.AppendNull();
        }
      }
      payload_.push_back(std::move(col));
    }
    for (const auto& col : payload_) chunk.payload.push_back(col.view());
    return chunk;
  }

  const JoinOptions& o_;
  JoinInputs& in_;
  const JoinTarget& t_;
  const client::IndexSpec& spec_;
  const std::vector<size_t> payload_cols_;
  Table batch_;
  bool have_;
  bool first_call_ = true;
  KeyVector keys_;
  std::vector<client::Column> payload_;
  absl::Status input_error_;
};

}  // namespace

JoinTarget BuildTemporaryIndex(const Globals& g, const JoinArgs& a, const JoinOptions& o,
                               JoinInputs& in, client::Client* c, std::optional<TempIndex>* temp) {
  JoinTarget t;
  const KeyKind flag = o.flag;
  // Ad hoc: both sides as the wider of their types.
  t.key_kind = flag == KeyKind::kAuto ? WiderKeyKind(in.left_kind, in.right_kind) : flag;
  if (in.left_kind == KeyKind::kColumns || in.right_kind == KeyKind::kColumns ||
      o.left_cols.size() > 1) {
    // String and composite keys: key columns of the wider type per column.
    auto plans = InputOrDie(JoinKeyPlans(in.left_plan, in.right_plan));
    t.key_kind = KeyKind::kColumns;
    t.left_plan = std::move(plans.first);
    t.right_plan = std::move(plans.second);
    if (t.left_plan->types != in.left_plan.types || t.right_plan->types != in.right_plan.types) {
      t.why = absl::StrCat(" (the join's key is ", t.left_plan->TypesText(),
                           ", the wider of both sides)");
    }
  } else if (flag == KeyKind::kAuto && in.left_kind != in.right_kind) {
    t.why = absl::StrCat(" (the join's key type is ", std::string(KeyKindTypeName(t.key_kind)),
                         ", the wider of both sides)");
  }
  // Past the first batch the inferred type may be too narrow: say where it came from.
  t.why_later = flag == KeyKind::kAuto
                    ? absl::StrCat(t.why, " (the key type comes from each side's first ",
                                   g.batch_rows, " rows; give --key-type)")
                    : t.why;
  // The temporary index maps the right keys to their rows and keeps the right
  // file's other columns as payload, which the join gathers per pair: the
  // right file is never held here.
  t.policy = InputOrDie(RightDuplicatePolicy(a.right_duplicates));
  t.index = absl::StrCat("gpujoin-cli-tmp-", getpid(), "-",
                         std::chrono::steady_clock::now().time_since_epoch().count());
  temp->emplace(c, t.index);
  client::IndexSpec spec;
  spec.name = t.index;
  spec.key_type = WireKeyType(t.key_kind);
  if (t.right_plan) {
    // The temporary index's own key column names (file column names need not
    // be valid names); the key columns travel by position.
    for (size_t i = 0; i < t.right_plan->types.size(); ++i) {
      spec.key_columns.push_back({absl::StrCat("k", i), t.right_plan->types[i]});
    }
  }
  spec.duplicates = t.policy;
  const std::vector<std::string>& rh = in.right->header();
  std::vector<size_t> payload_cols;
  for (size_t col = 0; col < rh.size(); ++col) {
    if (std::find(o.right_cols.begin(), o.right_cols.end(), rh[col]) != o.right_cols.end()) {
      continue;
    }
    payload_cols.push_back(col);
    spec.payload.push_back({RightColumnName(col), client::ColumnType::kBinary});
    t.select.push_back(RightColumnName(col));
    t.select_kinds.push_back(ColumnKind::kString);
    t.select_names.push_back(rh[col]);
  }
  RightChunks chunks(o, in, t, spec, std::move(payload_cols));
  ProgressBar bar("upload " + in.right->source(), ProgressEnabled(g));
  (*temp)->Arm();
  absl::StatusOr<client::IndexInfo> built = c->BuildIndex(
      spec, [&] { return chunks.Next(); },
      [&](const client::Progress& p) {
        bar.UpdateInput(p.rows_sent, in.right->bytes_read(), in.right->total_bytes());
      });
  bar.Done();
  if (!chunks.input_error().ok()) UsageFail(std::string(chunks.input_error().message()));
  const client::IndexInfo info = RpcOrDie(std::move(built), "join: building the temporary index");
  if (info.statistics.overflow_rows > 0) {
    RpcFail(absl::InternalError(absl::StrCat(info.statistics.overflow_rows,
                                             " right keys overflowed the temporary index")),
            "join");
  }
  t.right_duplicates = info.statistics.duplicate_rows;
  t.max_group_rows = std::max<uint64_t>(1, info.statistics.max_group_rows);
  return t;
}

JoinTarget DescribeResidentIndex(const JoinArgs& a, const JoinOptions& o, const JoinInputs& in,
                                 client::Client* c) {
  JoinTarget t;
  t.index = o.name;
  const client::IndexInfo info = RpcOrDie(c->DescribeIndex(o.name), absl::StrCat("join ", o.name));
  t.policy = info.duplicates;
  t.max_group_rows = std::max<uint64_t>(1, info.statistics.max_group_rows);
  t.left_plan = InputOrDie(PlanForIndex(o.left_col, o.key_type, info, "--on"));
  if (t.left_plan) {
    t.key_kind = KeyKind::kColumns;
  } else {
    // Left cells that are no integers are named by the integer parse, which
    // says the index's key type.
    const KeyKind data = in.left_kind == KeyKind::kColumns ? KeyKind::kU32 : in.left_kind;
    t.key_kind = InputOrDie(KindForIndex(o.flag, data, info.key_type, o.name));
  }
  if (a.select) {
    t.select = SelectedColumns(*a.select, info, "join");
  } else if (o.payload_join) {
    for (const auto& p : info.payload) t.select.push_back(p.name);
  }
  for (const std::string& s : t.select) {
    for (const auto& p : info.payload) {
      if (p.name == s) t.select_kinds.push_back(KindOf(p.type));
    }
  }
  t.select_names = t.select;
  return t;
}

}  // namespace gpujoin::cli
