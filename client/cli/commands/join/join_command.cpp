// gpujoin join: ad hoc (temporary index from the right file) or against a
// resident index (NAME, or --right index:NAME, which appends its payload columns).
// CmdJoin runs the steps of join_steps.hpp; this file holds the stream of left
// batches and the summary.
#include <algorithm>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "batch_queue.hpp"
#include "commands/join/join_steps.hpp"
#include "output/progress.hpp"

namespace gpujoin::cli {
namespace {

// What the stream of left batches adds up to.
struct JoinTotals {
  uint64_t required = 0;  // the pairs there are
  bool overflow = false;  // some were not written
  uint64_t version = 0;   // the index version that answered
  client::QueryStatistics stats;
};

// Pairs in left order, then right row order, batch by batch as the answers
// arrive. A batch asks for every pair it can have (rows x the largest group of
// a multi-value index), or for what --capacity leaves.
class JoinStream {
 public:
  JoinStream(const Globals& g, const JoinArgs& a, const JoinOptions& o, JoinInputs& in,
             const JoinTarget& t, client::Client* c, JoinPairWriter& writer)
      : g_(g),
        a_(a),
        o_(o),
        in_(in),
        t_(t),
        c_(c),
        writer_(writer),
        grows_((o.kind == client::JoinKind::kInner || o.kind == client::JoinKind::kLeftOuter) &&
               t.policy == client::DuplicatePolicy::kKeepAll),
        key_kind_(t.key_kind),
        pending_first_(std::move(in.left_first)),
        have_first_(in.left_more) {}

  // Runs the join; UsageFail on bad input, RpcFail when a call fails.
  JoinTotals Run() {
    ProgressBar bar("join " + in_.left->source(), ProgressEnabled(g_));
    bar_ = &bar;
    const absl::Status st = c_->Join(
        t_.index, [this] { return NextBatch(); },
        [this](client::JoinResult&& r) { return OnResult(std::move(r)); }, Streaming(g_));
    bar.Done();
    bar_ = nullptr;
    if (!queue_.error().ok()) UsageFail(std::string(queue_.error().message()));
    if (!st.ok()) {
      if (st.code() == absl::StatusCode::kInvalidArgument &&
          absl::StrContains(st.message(), "is not a row of")) {
        UsageFail(std::string(st.message()));
      }
      RpcFail(st, absl::StrCat("join ", o_.name.empty() ? in_.left->source() : o_.name));
    }
    if (writer_.truncated()) totals_.overflow = true;
    if (a_.capacity && totals_.required > writer_.written()) totals_.overflow = true;
    return totals_;
  }

 private:
  // The next left batch as a request (nullopt at the end or on an input
  // error, which the queue keeps).
  std::optional<client::JoinBatch> NextBatch() {
    auto p = std::make_unique<JoinPending>();
    std::optional<KeyVector> plain;
    if (have_first_) {
      p->rows = std::move(pending_first_);
      have_first_ = false;
    } else {
      if (next_row_ == 0 && !in_.left_more) return std::nullopt;
      auto more = in_.left->Next(&p->rows);
      if (!more.ok()) {
        queue_.SetError(more.status());
        return std::nullopt;
      }
      if (!*more) return std::nullopt;
      if (!t_.left_plan) plain = in_.left_tracker.PlainKeys(p->rows, o_.left_col, key_kind_);
      if (!t_.left_plan && !plain && o_.flag == KeyKind::kAuto && key_kind_ != KeyKind::kU32) {
        auto seen = in_.left_tracker.Observe(p->rows, o_.left_col);
        if (!seen.ok()) {
          queue_.SetError(seen.status());
          return std::nullopt;
        }
        if (!o_.name.empty()) {
          // A uint64 index: int64 once the left side has a negative key.
          key_kind_ =
              KindForIndex(o_.flag, *seen, WireKeyType(key_kind_), o_.name).value_or(key_kind_);
        }
      }
    }
    const size_t n = p->rows.rows.size();
    if (next_row_ + n > std::numeric_limits<uint32_t>::max()) {
      queue_.SetError(absl::InvalidArgumentError(
          absl::StrCat(p->rows.source, ": too many rows for uint32 row IDs")));
      return std::nullopt;
    }
    auto keys = t_.left_plan ? ReadKeys(p->rows, *t_.left_plan)
                : plain      ? absl::StatusOr<KeyVector>(*std::move(plain))
                             : KeyColumn(p->rows, o_.left_col, key_kind_);
    if (!keys.ok()) {
      queue_.SetError(absl::Status(keys.status().code(),
                                   absl::StrCat(keys.status().message(), KeyErrorNote())));
      return std::nullopt;
    }
    p->keys = *std::move(keys);
    p->first_row = static_cast<uint32_t>(next_row_);
    first_left_ = false;
    next_row_ += n;
    p->capacity = grows_ ? n * t_.max_group_rows : 0;
    if (a_.capacity) {
      const uint64_t natural = p->capacity ? p->capacity : n;
      p->capacity = std::min(natural, a_.capacity);
      p->count_only = writer_.written() >= a_.capacity;
    }
    client::JoinBatch batch;
    client::JoinLeft l;
    l.keys = p->keys.keys();
    l.first_left_row = p->first_row;
    l.capacity = p->capacity;
    l.count_only = p->count_only;
    batch.lefts.push_back(l);
    batch.select = p->count_only ? std::vector<std::string>{} : t_.select;
    batch.kind = o_.kind;
    batch.max_probe_count = a_.max_probes;
    queue_.Push(std::move(p));
    return batch;
  }

  // Appended to a left key error: why the keys have the type they have.
  std::string KeyErrorNote() const {
    if (o_.name.empty()) return first_left_ ? t_.why : t_.why_later;
    if (t_.left_plan) {
      return absl::StrCat("; index '", o_.name, "' is keyed by ", t_.left_plan->TypesText());
    }
    return absl::StrCat("; index '", o_.name, "' has ",
                        std::string(client::KeyTypeName(WireKeyType(key_kind_))), " keys");
  }

  // The answer to the oldest batch on its way: its pairs written as rows.
  absl::Status OnResult(client::JoinResult&& r) {
    std::unique_ptr<JoinPending> p = queue_.Pop();
    if (p == nullptr) return absl::InternalError("an answer without a batch");
    if (!r.error.ok()) return r.error;
    if (r.results.size() != 1) return absl::InternalError("not one result for one left batch");
    client::JoinPairs& pairs = r.results[0];
    totals_.version = r.index_version;
    if (!a_.capacity && !p->count_only && pairs.count > pairs.left_rows.size()) {
      // More pairs than the batch was sized for (the index was rebuilt since,
      // or the server cut a large answer): count first, then ask for exactly
      // that many, in several requests if need be.
      client::QueryAllOptions q;
      q.batch_rows = p->keys.size();
      q.select = t_.select;
      q.kind = o_.kind;
      q.max_probe_count = a_.max_probes;
      q.stream = Streaming(g_);
      auto again = c_->JoinAll(t_.index, p->keys.keys(), q);
      if (!again.ok()) return again.status();
      for (uint32_t& lr : again->left_rows) lr += p->first_row;
      pairs = *std::move(again);
    }
    totals_.required += pairs.count;
    if (pairs.overflow) totals_.overflow = true;
    totals_.stats.Merge(pairs.statistics);
    if (!p->count_only) {
      absl::Status st = writer_.Write(*p, pairs);
      if (!st.ok()) return st;
    }
    bar_->UpdateInput(in_.left->rows_read(), in_.left->bytes_read(), in_.left->total_bytes());
    return absl::OkStatus();
  }

  const Globals& g_;
  const JoinArgs& a_;
  const JoinOptions& o_;
  JoinInputs& in_;
  const JoinTarget& t_;
  client::Client* c_;
  JoinPairWriter& writer_;
  const bool grows_;
  KeyKind key_kind_;  // a uint64 index's keys turn int64 at the first negative left key
  BatchQueue<JoinPending> queue_;
  Table pending_first_;
  bool have_first_;
  uint64_t next_row_ = 0;
  bool first_left_ = true;
  ProgressBar* bar_ = nullptr;
  JoinTotals totals_;
};

// The notes on stderr and the summary that ends the output.
void FinishJoin(const Globals& g, const JoinArgs& a, const JoinOptions& o, JoinInputs& in,
                const JoinTarget& t, const JoinTotals& totals, uint64_t written, RowWriter& out) {
  for (const std::string& note : in.left->TakeNotes()) Note(g, note);
  // An inner join keeps the summary's first words; other kinds say which they are.
  const std::string what = o.kind == client::JoinKind::kInner
                               ? std::string("join")
                               : absl::StrCat("join (", std::string(JoinHowName(o.kind)), ")");
  Note(g, absl::StrCat(what, ": ", written, " rows written, required ", totals.required,
                       a.capacity ? absl::StrCat(", capacity ", a.capacity) : std::string(),
                       ", overflow ", totals.overflow ? "YES (output truncated)" : "no", "; ",
                       StatsLine(totals.stats)));
  if (t.right_duplicates > 0 && t.policy == client::DuplicatePolicy::kLowestRow) {
    Note(g, absl::StrCat("join: note: ", in.right->source(), " has ", t.right_duplicates,
                         " rows with a repeated key; each left row joins the first right row "
                         "with its key (--right-duplicates lowest_row)"));
  }
  Json summary{{"how", std::string(JoinHowName(o.kind))},
               {"required", totals.required},
               {"written", written},
               {"overflow", totals.overflow},
               {"statistics", StatsJson(totals.stats)},
               {"right_duplicate_rows", t.right_duplicates},
               {"duplicates", std::string(client::DuplicatePolicyName(t.policy))}};
  if (a.capacity) summary["capacity"] = a.capacity;
  if (!o.name.empty()) {
    summary["index"] = o.name;
    summary["index_version"] = totals.version;
  }
  if (!t.select.empty() && !o.name.empty()) summary["select"] = t.select;
  out.Finish(std::move(summary));
}

}  // namespace

int CmdJoin(const Globals& g, const JoinArgs& a) {
  const JoinOptions o = ParseJoinOptions(a);
  JoinInputs in;
  OpenJoinInputs(g, a, o, &in);
  auto c = Connect(g);
  std::optional<TempIndex> temp;  // an ad-hoc join's index, dropped on the way out
  const JoinTarget t = o.name.empty() ? BuildTemporaryIndex(g, a, o, in, c.get(), &temp)
                                      : DescribeResidentIndex(a, o, in, c.get());
  // A pair without a match has empty right cells.
  const JoinRowShape shape = JoinShapeOf(o, in);
  std::vector<size_t> right_cols;
  RowWriter out(g, a.out);
  out.Begin(JoinOutputColumns(shape, o, in, t, &right_cols));
  JoinPairWriter writer(out, shape, in.right_table ? &*in.right_table : nullptr,
                        std::move(right_cols), o.name, a.capacity);
  const JoinTotals totals = JoinStream(g, a, o, in, t, c.get(), writer).Run();
  FinishJoin(g, a, o, in, t, totals, writer.written(), out);
  return kExitOk;
}

}  // namespace gpujoin::cli
