// gpujoin join: ad hoc (temporary index from the right file) or against a
// resident index (NAME, or --right index:NAME, which appends its payload columns).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "columns.hpp"
#include "commands.hpp"
#include "payload.hpp"
#include "progress.hpp"

namespace gpujoin::cli {
namespace {

// `--right index:NAME` names a resident index.
constexpr std::string_view kIndexPrefix = "index:";

// Drops a temporary index when the ad-hoc join ends, whatever happens.
class TempIndex {
 public:
  TempIndex(client::Client* c, std::string name) : c_(c), name_(std::move(name)) {}
  ~TempIndex() {
    if (armed_) (void)c_->DropIndex(name_);
  }
  void Arm() { armed_ = true; }
  const std::string& name() const { return name_; }

 private:
  client::Client* c_;
  std::string name_;
  bool armed_ = false;
};

}  // namespace

int CmdJoin(const Globals& g, const JoinArgs& a) {
  // --right index:NAME names a resident index instead of a file; the join then
  // writes the left rows with the index's payload columns (or --select).
  std::string name = a.name;
  std::string right_file = a.right;
  bool payload_join = false;
  if (a.right.rfind(kIndexPrefix, 0) == 0) {
    if (!a.name.empty()) {
      UsageFail("join: give the index as NAME or as --right index:NAME, not both");
    }
    name = a.right.substr(kIndexPrefix.size());
    if (name.empty()) UsageFail("join: --right index: needs an index name (index:NAME)");
    right_file.clear();
    payload_join = true;
  }
  if (a.select && name.empty()) {
    UsageFail("join: --select needs a resident index (NAME or --right index:NAME)");
  }
  std::string left_col = a.on, right_col = a.on;
  if (const size_t eq = a.on.find('='); eq != std::string::npos) {
    left_col = a.on.substr(0, eq);
    right_col = a.on.substr(eq + 1);
    if (left_col.empty() || right_col.empty()) {
      UsageFail(absl::StrCat("join: --on '", a.on, "' must be COL or LEFTCOL=RIGHTCOL"));
    }
    if (!name.empty()) {
      UsageFail(
          "join: --on LEFTCOL=RIGHTCOL is for ad-hoc joins; a resident index already has "
          "its keys (use --on LEFTCOL)");
    }
  }
  if (name.empty() && right_file.empty()) {
    UsageFail(
        "join: give --right FILE (ad-hoc join), --right index:NAME or an index NAME (resident "
        "join)");
  }
  const KeyKind flag = InputOrDie(ParseKeyKind(a.key_type));
  Table left = Load(g, a.left);
  // Each side's own type first, so that a bad cell is an input error before any call.
  const KeyKind left_kind =
      flag == KeyKind::kAuto ? InputOrDie(InferKeyKind(left, left_col)) : flag;
  std::optional<Table> right;
  KeyKind right_kind = flag;
  if (!right_file.empty()) {
    right = Load(g, right_file);
    if (name.empty() && flag == KeyKind::kAuto) {
      right_kind = InputOrDie(InferKeyKind(*right, right_col));
    }
  }
  if (left.rows.size() > std::numeric_limits<uint32_t>::max()) {
    UsageFail(absl::StrCat(left.source, ": too many rows for uint32 row IDs"));
  }

  auto c = Connect(g);
  KeyVector left_keys, right_keys;
  std::vector<std::string> select;
  if (name.empty()) {
    // Ad hoc: both sides as the wider of their types.
    const KeyKind kind = flag == KeyKind::kAuto ? WiderKeyKind(left_kind, right_kind) : flag;
    const std::string why =
        flag == KeyKind::kAuto && left_kind != right_kind
            ? absl::StrCat(" (the join's key type is ", std::string(KeyKindTypeName(kind)),
                           ", the wider of both sides)")
            : std::string();
    auto with_why = [&](absl::StatusOr<KeyVector> k) -> absl::StatusOr<KeyVector> {
      if (k.ok() || why.empty()) return k;
      return absl::Status(k.status().code(), absl::StrCat(k.status().message(), why));
    };
    left_keys = InputOrDie(with_why(KeyColumn(left, left_col, kind)));
    right_keys = InputOrDie(with_why(KeyColumn(*right, right_col, kind)));
  } else {
    const client::IndexInfo info = RpcOrDie(c->DescribeIndex(name), absl::StrCat("join ", name));
    const KeyKind kind = InputOrDie(KindForIndex(flag, left_kind, info.key_type, name));
    left_keys = InputOrDie(ForIndex(KeyColumn(left, left_col, kind), info));
    if (a.select) {
      select = SelectedColumns(*a.select, info, "join");
    } else if (payload_join) {
      for (const auto& p : info.payload) select.push_back(p.name);
    }
  }
  const client::Keys left_column = left_keys.keys();
  std::string index = name;
  std::optional<TempIndex> temp;
  uint64_t right_duplicates = 0;
  if (name.empty()) {
    // Ad-hoc: a temporary index from the right file's keys to its row numbers.
    index = absl::StrCat("gpujoin-cli-tmp-", getpid(), "-",
                         std::chrono::steady_clock::now().time_since_epoch().count());
    temp.emplace(c.get(), index);
    client::IndexSpec spec;
    spec.name = index;
    spec.expected_rows = right_keys.size();
    spec.key_type = WireKeyType(right_keys.kind);
    ProgressBar bar("upload " + right->source, ProgressEnabled(g));
    temp->Arm();
    client::IndexInfo info =
        RpcOrDie(c->BuildIndexFromColumns(spec, right_keys.keys(), {}, g.batch_rows,
                                          [&](const client::Progress& p) {
                                            bar.Update(p.rows_sent, p.total_rows, p.bytes_sent);
                                          }),
                 "join: building the temporary index");
    bar.Done();
    if (info.statistics.overflow_rows > 0) {
      RpcFail(absl::InternalError(absl::StrCat(info.statistics.overflow_rows,
                                               " right keys overflowed the temporary index")),
              "join");
    }
    right_duplicates = info.statistics.duplicate_rows;
  }

  // Pairs in left order; --capacity bounds the total.
  const uint64_t cap_total = a.capacity;
  uint64_t required = 0;
  bool overflow = false;
  client::QueryStatistics stats;
  uint64_t version = 0;
  std::vector<uint32_t> left_rows, right_rows;
  std::vector<client::Column> gathered;  // the selected columns, aligned with the pairs
  size_t pos = 0;
  bool sent_any = false;  // an empty left file still runs one (empty) batch
  ProgressBar bar("join " + left.source, ProgressEnabled(g));
  uint64_t answered = 0;
  absl::Status st = c->Join(
      index,
      [&]() -> std::optional<client::JoinBatch> {
        if (pos >= left_column.size() && sent_any) return std::nullopt;
        sent_any = true;
        const size_t n = std::min(g.batch_rows, left_column.size() - pos);
        client::JoinBatch b;
        client::JoinLeft l;
        l.keys = left_column.subspan(pos, n);
        l.first_left_row = static_cast<uint32_t>(pos);
        l.capacity = cap_total ? std::min<uint64_t>(cap_total, n) : 0;
        b.lefts.push_back(l);
        b.select = select;
        pos += n;
        return b;
      },
      [&](client::JoinResult&& r) -> absl::Status {
        if (!r.error.ok()) return r.error;
        version = r.index_version;
        for (auto& jp : r.results) {
          required += jp.count;
          overflow = overflow || jp.overflow;
          stats.Merge(jp.statistics);
          size_t take = jp.left_rows.size();
          if (cap_total) take = std::min<uint64_t>(take, cap_total - left_rows.size());
          left_rows.insert(left_rows.end(), jp.left_rows.begin(), jp.left_rows.begin() + take);
          right_rows.insert(right_rows.end(), jp.right_rows.begin(), jp.right_rows.begin() + take);
          if (jp.columns.size() != select.size()) {
            return absl::InternalError(absl::StrCat("the server answered ", jp.columns.size(),
                                                    " columns for ", select.size(), " selected"));
          }
          for (size_t k = 0; k < jp.columns.size(); ++k) {
            if (gathered.size() <= k) gathered.emplace_back(jp.columns[k].name, jp.columns[k].type);
            absl::Status appended = gathered[k].AppendRows(jp.columns[k].view().Slice(0, take));
            if (!appended.ok()) return appended;
          }
          answered += jp.statistics.found + jp.statistics.missing;
        }
        bar.Update(answered, left_column.size(), answered * left_column.key_bytes());
        return absl::OkStatus();
      },
      Streaming(g));
  bar.Done();
  if (!st.ok()) RpcFail(st, absl::StrCat("join ", name.empty() ? left.source : name));
  if (cap_total && required > cap_total) overflow = true;

  // The output rows: the left row, then the right file's row (resident join
  // with --right FILE, ad hoc) or the pair's row numbers (resident join
  // without), then the gathered columns; a payload join has left rows and
  // gathered columns only.
  ResultTable out;
  std::function<void(size_t, std::vector<Cell>*)> cells_of;
  if (payload_join) {
    out = StartFrom(left);
    cells_of = [&](size_t k, std::vector<Cell>* row) { *row = left.rows[left_rows[k]].cells; };
  } else if (right) {
    out = StartFrom(left);
    for (const auto& h : right->header) out.AddColumn(h, ColumnKind::kString);
    // Check before writing anything: a resident index's values must be rows of --right.
    for (size_t k = 0; k < left_rows.size(); ++k) {
      if (right_rows[k] >= right->rows.size()) {
        UsageFail(absl::StrCat("join: index ", name, " returned value ", right_rows[k],
                               ", which is not a row of ", right->source, " (", right->rows.size(),
                               " rows)"));
      }
    }
    cells_of = [&](size_t k, std::vector<Cell>* row) {
      *row = left.rows[left_rows[k]].cells;
      const auto& rc = right->rows[right_rows[k]].cells;
      row->insert(row->end(), rc.begin(), rc.end());
    };
  } else {
    out.AddColumn("left_row", ColumnKind::kNumber);
    out.AddColumn("right_row", ColumnKind::kNumber);
    cells_of = [&](size_t k, std::vector<Cell>* row) {
      row->emplace_back(std::to_string(left_rows[k]));
      row->emplace_back(std::to_string(right_rows[k]));
    };
  }
  for (const auto& col : gathered) out.AddColumn(col.name, KindOf(col.type));
  out.SetGenerator(left_rows.size(), [&](size_t k, std::vector<Cell>* row) {
    cells_of(k, row);
    for (const auto& col : gathered) row->push_back(CellOf(col, k));
  });
  Note(g, absl::StrCat("join: ", left_rows.size(), " rows written, required ", required,
                       cap_total ? absl::StrCat(", capacity ", cap_total) : std::string(),
                       ", overflow ", overflow ? "YES (output truncated)" : "no", "; ",
                       StatsLine(stats)));
  if (right_duplicates > 0) {
    Note(g, absl::StrCat("join: note: ", right->source, " has ", right_duplicates,
                         " rows with a repeated key; each left row joins the first right row "
                         "with its key"));
  }
  Json summary{{"required", required},
               {"written", left_rows.size()},
               {"overflow", overflow},
               {"statistics", StatsJson(stats)},
               {"right_duplicate_rows", right_duplicates}};
  if (cap_total) summary["capacity"] = cap_total;
  if (!name.empty()) {
    summary["index"] = name;
    summary["index_version"] = version;
  }
  if (!select.empty()) summary["select"] = select;
  EmitRows(g, std::move(summary), out, a.out);
  return kExitOk;
}

}  // namespace gpujoin::cli
