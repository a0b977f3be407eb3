// gpujoin join: ad hoc (temporary index from the right file) or against a
// resident index (NAME, or --right index:NAME, which appends its payload columns).
#include <unistd.h>

#include <chrono>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "columns.hpp"
#include "commands.hpp"
#include "join_rows.hpp"
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
  const client::JoinKind kind = InputOrDie(ParseJoinHow(a.how));
  if (!a.right_duplicates.empty() && !name.empty()) {
    UsageFail(absl::StrCat("join: --right-duplicates is for ad-hoc joins; index '", name,
                           "' has its own policy (index build --duplicates)"));
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
  client::DuplicatePolicy index_policy = client::DuplicatePolicy::kLowestRow;
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
    index_policy = info.duplicates;
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
  client::DuplicatePolicy policy = client::DuplicatePolicy::kLowestRow;
  if (name.empty()) {
    // Ad-hoc: a temporary index from the right file's keys to its row numbers.
    policy = InputOrDie(RightDuplicatePolicy(a.right_duplicates));
    index = absl::StrCat("gpujoin-cli-tmp-", getpid(), "-",
                         std::chrono::steady_clock::now().time_since_epoch().count());
    temp.emplace(c.get(), index);
    client::IndexSpec spec;
    spec.name = index;
    spec.expected_rows = right_keys.size();
    spec.key_type = WireKeyType(right_keys.kind);
    spec.duplicates = policy;
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
  } else {
    policy = index_policy;
  }

  // Pairs in left order, then right row order. JoinAll asks a multi-value index
  // for the count first and then for exactly that many pairs; --capacity
  // bounds the pairs kept over all batches.
  const uint64_t cap_total = a.capacity;
  ProgressBar bar("join " + left.source, ProgressEnabled(g));
  client::QueryAllOptions options;
  options.batch_rows = g.batch_rows;
  options.select = select;
  options.max_pairs = cap_total;
  options.kind = kind;
  options.stream = Streaming(g);
  options.progress = [&](const client::Progress& p) {
    bar.Update(p.rows_sent, p.total_rows, p.rows_sent * left_column.key_bytes());
  };
  absl::StatusOr<client::JoinPairs> joined = c->JoinAll(index, left_column, options);
  bar.Done();
  if (!joined.ok()) {
    RpcFail(joined.status(), absl::StrCat("join ", name.empty() ? left.source : name));
  }
  client::JoinPairs& pairs = *joined;
  if (pairs.columns.size() != select.size()) {
    RpcFail(absl::InternalError(absl::StrCat("the server answered ", pairs.columns.size(),
                                             " columns for ", select.size(), " selected")),
            "join");
  }

  // The output rows: the left row, then the right file's row (resident join
  // with --right FILE, ad hoc) or the pair's row numbers (resident join
  // without), then the gathered columns; a payload join has left rows and
  // gathered columns only. A pair without a match has empty right cells.
  const JoinRowShape shape = payload_join ? JoinRowShape::kLeftOnly
                             : right      ? JoinRowShape::kRightFile
                                          : JoinRowShape::kRowNumbers;
  const uint64_t written = pairs.left_rows.size();
  absl::StatusOr<ResultTable> rows =
      JoinRowsTable(left, right ? &*right : nullptr, shape, name, std::move(pairs.left_rows),
                    std::move(pairs.right_rows), std::move(pairs.columns));
  if (!rows.ok()) UsageFail(std::string(rows.status().message()));
  const ResultTable& out = *rows;
  // An inner join keeps the summary's first words; other kinds say which they are.
  const std::string what = kind == client::JoinKind::kInner
                               ? std::string("join")
                               : absl::StrCat("join (", std::string(JoinHowName(kind)), ")");
  Note(g, absl::StrCat(what, ": ", written, " rows written, required ", pairs.count,
                       cap_total ? absl::StrCat(", capacity ", cap_total) : std::string(),
                       ", overflow ", pairs.overflow ? "YES (output truncated)" : "no", "; ",
                       StatsLine(pairs.statistics)));
  if (right_duplicates > 0 && policy == client::DuplicatePolicy::kLowestRow) {
    Note(g, absl::StrCat("join: note: ", right->source, " has ", right_duplicates,
                         " rows with a repeated key; each left row joins the first right row "
                         "with its key (--right-duplicates lowest_row)"));
  }
  Json summary{{"how", std::string(JoinHowName(kind))},
               {"required", pairs.count},
               {"written", written},
               {"overflow", pairs.overflow},
               {"statistics", StatsJson(pairs.statistics)},
               {"right_duplicate_rows", right_duplicates},
               {"duplicates", std::string(client::DuplicatePolicyName(policy))}};
  if (cap_total) summary["capacity"] = cap_total;
  if (!name.empty()) {
    summary["index"] = name;
    summary["index_version"] = pairs.index_version;
  }
  if (!select.empty()) summary["select"] = select;
  EmitRows(g, std::move(summary), out, a.out);
  return kExitOk;
}

}  // namespace gpujoin::cli
