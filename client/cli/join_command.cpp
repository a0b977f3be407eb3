// gpujoin join: ad hoc (temporary index from the right file) or against a
// resident index (NAME, or --right index:NAME, which appends its payload columns).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "batch_queue.hpp"
#include "columns.hpp"
#include "commands.hpp"
#include "join_rows.hpp"
#include "payload.hpp"
#include "progress.hpp"
#include "row_writer.hpp"

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

namespace {

// One left batch on its way: its rows wait for the answer to its keys.
struct JoinPending {
  Table rows;
  KeyVector keys;
  uint32_t first_row = 0;  // the batch's first left row (its row ID)
  uint64_t capacity = 0;   // the pairs asked for (0: one per left row)
  bool count_only = false;
};

// The payload name of the right file's column `c` in an ad-hoc join's
// temporary index (file column names need not be valid payload names).
std::string RightColumnName(size_t c) { return absl::StrCat("c", c); }

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
  std::unique_ptr<TableReader> left = OpenInput(g, a.left);
  RequireColumn(*left, left_col);
  // The right side: streamed into the temporary index of an ad-hoc join; read
  // whole for a resident join (its values are rows of the file).
  std::unique_ptr<TableReader> right_input;
  std::optional<Table> right_table;
  if (!right_file.empty() && name.empty()) {
    right_input = OpenInput(g, right_file);
    RequireColumn(*right_input, right_col);
  } else if (!right_file.empty()) {
    right_table = Load(g, right_file);
  }
  // Each side's first batch decides an inferred key type, so that a bad cell
  // there is an input error before any call.
  Table left_first, right_first;
  const bool left_more = InputOrDie(left->Next(&left_first));
  KeyKindTracker left_tracker, right_tracker;
  KeyKind left_kind =
      flag == KeyKind::kAuto ? InputOrDie(left_tracker.Observe(left_first, left_col)) : flag;
  bool right_more = false;
  KeyKind right_kind = flag;
  if (right_input) {
    right_more = InputOrDie(right_input->Next(&right_first));
    if (flag == KeyKind::kAuto)
      right_kind = InputOrDie(right_tracker.Observe(right_first, right_col));
  }

  auto c = Connect(g);
  std::vector<std::string> select;
  std::vector<ColumnKind> select_kinds;
  std::vector<std::string> select_names;  // the output names of the gathered columns
  client::DuplicatePolicy policy = client::DuplicatePolicy::kLowestRow;
  uint64_t max_group_rows = 1;
  KeyKind key_kind = flag;
  std::string why;        // appended to a key error: why the keys have the type they have
  std::string why_later;  // the same past the first batch
  std::string index = name;
  std::optional<TempIndex> temp;
  uint64_t right_duplicates = 0;
  if (name.empty()) {
    // Ad hoc: both sides as the wider of their types.
    key_kind = flag == KeyKind::kAuto ? WiderKeyKind(left_kind, right_kind) : flag;
    if (flag == KeyKind::kAuto && left_kind != right_kind) {
      why = absl::StrCat(" (the join's key type is ", std::string(KeyKindTypeName(key_kind)),
                         ", the wider of both sides)");
    }
    // Past the first batch the inferred type may be too narrow: say where it came from.
    why_later = flag == KeyKind::kAuto
                    ? absl::StrCat(why, " (the key type comes from each side's first ",
                                   g.batch_rows, " rows; give --key-type)")
                    : why;
    // The temporary index maps the right keys to their rows and keeps the right
    // file's other columns as payload, which the join gathers per pair: the
    // right file is never held here.
    policy = InputOrDie(RightDuplicatePolicy(a.right_duplicates));
    index = absl::StrCat("gpujoin-cli-tmp-", getpid(), "-",
                         std::chrono::steady_clock::now().time_since_epoch().count());
    temp.emplace(c.get(), index);
    client::IndexSpec spec;
    spec.name = index;
    spec.key_type = WireKeyType(key_kind);
    spec.duplicates = policy;
    const std::vector<std::string>& rh = right_input->header();
    std::vector<size_t> payload_cols;
    for (size_t col = 0; col < rh.size(); ++col) {
      if (rh[col] == right_col) continue;
      payload_cols.push_back(col);
      spec.payload.push_back({RightColumnName(col), client::ColumnType::kBinary});
      select.push_back(RightColumnName(col));
      select_kinds.push_back(ColumnKind::kString);
      select_names.push_back(rh[col]);
    }
    // Each chunk is one right batch: keys and its other columns.
    Table batch = std::move(right_first);
    bool have = right_more;
    KeyVector keys;
    std::vector<client::Column> payload;
    absl::Status input_error;
    bool first_call = true;
    auto next_chunk = [&]() -> std::optional<client::BuildChunk> {
      if (!have) return std::nullopt;
      std::optional<KeyVector> plain = right_tracker.PlainKeys(batch, right_col, key_kind);
      // Past the first batch only 64-bit keys need the tracker (a negative key
      // after one above 2^63 - 1); KeyColumn names a key too wide for uint32.
      if (!plain && flag == KeyKind::kAuto && !first_call && key_kind != KeyKind::kU32) {
        auto seen = right_tracker.Observe(batch, right_col);
        if (!seen.ok()) {
          input_error = seen.status();
          return std::nullopt;
        }
      }
      auto k = plain ? absl::StatusOr<KeyVector>(*std::move(plain))
                     : KeyColumn(batch, right_col, key_kind);
      if (!k.ok()) {
        input_error = absl::Status(
            k.status().code(), absl::StrCat(k.status().message(), first_call ? why : why_later));
        return std::nullopt;
      }
      keys = *std::move(k);
      payload.clear();
      client::BuildChunk chunk;
      chunk.keys = keys.keys();
      for (size_t i = 0; i < payload_cols.size(); ++i) {
        client::Column col(spec.payload[i].name, client::ColumnType::kBinary);
        for (const Row& r : batch.rows) {
          const Cell& cell = r.cells[payload_cols[i]];
          if (cell) {
            const absl::Status st = col.AppendString(*cell);
            if (!st.ok()) {
              input_error =
                  absl::InvalidArgumentError(absl::StrCat(batch.source, ": ", st.message()));
              return std::nullopt;
            }
          } else {
            col.AppendNull();
          }
        }
        payload.push_back(std::move(col));
      }
      for (const auto& col : payload) chunk.payload.push_back(col.view());
      // The next batch is read after this chunk is sent (the chunk borrows this one).
      return chunk;
    };
    // The chunk source reads the next batch when asked for the next chunk.
    auto source = [&]() -> std::optional<client::BuildChunk> {
      if (!first_call && have) {
        auto more = right_input->Next(&batch);
        if (!more.ok()) {
          input_error = more.status();
          return std::nullopt;
        }
        have = *more;
      }
      auto chunk = next_chunk();
      first_call = false;
      return chunk;
    };
    ProgressBar bar("upload " + right_input->source(), ProgressEnabled(g));
    temp->Arm();
    absl::StatusOr<client::IndexInfo> built =
        c->BuildIndex(spec, source, [&](const client::Progress& p) {
          bar.UpdateInput(p.rows_sent, right_input->bytes_read(), right_input->total_bytes());
        });
    bar.Done();
    if (!input_error.ok()) UsageFail(std::string(input_error.message()));
    const client::IndexInfo info = RpcOrDie(std::move(built), "join: building the temporary index");
    if (info.statistics.overflow_rows > 0) {
      RpcFail(absl::InternalError(absl::StrCat(info.statistics.overflow_rows,
                                               " right keys overflowed the temporary index")),
              "join");
    }
    right_duplicates = info.statistics.duplicate_rows;
    max_group_rows = std::max<uint64_t>(1, info.statistics.max_group_rows);
  } else {
    const client::IndexInfo info = RpcOrDie(c->DescribeIndex(name), absl::StrCat("join ", name));
    policy = info.duplicates;
    max_group_rows = std::max<uint64_t>(1, info.statistics.max_group_rows);
    key_kind = InputOrDie(KindForIndex(flag, left_kind, info.key_type, name));
    if (a.select) {
      select = SelectedColumns(*a.select, info, "join");
    } else if (payload_join) {
      for (const auto& p : info.payload) select.push_back(p.name);
    }
    for (const std::string& s : select) {
      for (const auto& p : info.payload) {
        if (p.name == s) select_kinds.push_back(KindOf(p.type));
      }
    }
    select_names = select;
  }

  // The output columns: the left row, then the right file's row without its
  // key (ad hoc: gathered from the temporary index; resident join with --right
  // FILE: the row the pair's value names), or the pair's row numbers (resident
  // join without), then the gathered columns. A pair without a match has empty
  // right cells.
  const JoinRowShape shape = payload_join   ? JoinRowShape::kLeftOnly
                             : right_table  ? JoinRowShape::kRightFile
                             : name.empty() ? JoinRowShape::kLeftOnly
                                            : JoinRowShape::kRowNumbers;
  ResultTable columns;
  std::vector<size_t> right_cols;  // kRightFile: the right file's columns written
  if (shape == JoinRowShape::kRowNumbers) {
    columns.AddColumn("left_row", ColumnKind::kNumber);
    columns.AddColumn("right_row", ColumnKind::kNumber);
  } else {
    columns = StartFrom(left_first.header.empty() ? left->EmptyTable() : left_first);
    if (shape == JoinRowShape::kRightFile) {
      for (size_t col = 0; col < right_table->header.size(); ++col) {
        if (right_table->header[col] == right_col) continue;
        right_cols.push_back(col);
        columns.AddColumn(right_table->header[col], ColumnKind::kString);
      }
    }
  }
  for (size_t i = 0; i < select.size(); ++i) columns.AddColumn(select_names[i], select_kinds[i]);
  RowWriter out(g, a.out);
  out.Begin(columns);

  // Pairs in left order, then right row order, batch by batch as the answers
  // arrive. A batch asks for every pair it can have (rows x the largest group
  // of a multi-value index), or for what --capacity leaves.
  const uint64_t cap_total = a.capacity;
  const bool grows = (kind == client::JoinKind::kInner || kind == client::JoinKind::kLeftOuter) &&
                     policy == client::DuplicatePolicy::kKeepAll;
  std::atomic<uint64_t> written{0};
  BatchQueue<JoinPending> queue;
  Table pending_first = std::move(left_first);
  bool have_first = left_more;
  uint64_t next_row = 0;
  bool first_left = true;
  auto source = [&]() -> std::optional<client::JoinBatch> {
    auto p = std::make_unique<JoinPending>();
    std::optional<KeyVector> plain;
    if (have_first) {
      p->rows = std::move(pending_first);
      have_first = false;
    } else {
      if (next_row == 0 && !left_more) return std::nullopt;
      auto more = left->Next(&p->rows);
      if (!more.ok()) {
        queue.SetError(more.status());
        return std::nullopt;
      }
      if (!*more) return std::nullopt;
      plain = left_tracker.PlainKeys(p->rows, left_col, key_kind);
      if (!plain && flag == KeyKind::kAuto && key_kind != KeyKind::kU32) {
        auto seen = left_tracker.Observe(p->rows, left_col);
        if (!seen.ok()) {
          queue.SetError(seen.status());
          return std::nullopt;
        }
        if (!name.empty()) {
          // A uint64 index: int64 once the left side has a negative key.
          key_kind = KindForIndex(flag, *seen, WireKeyType(key_kind), name).value_or(key_kind);
        }
      }
    }
    const size_t n = p->rows.rows.size();
    if (next_row + n > std::numeric_limits<uint32_t>::max()) {
      queue.SetError(absl::InvalidArgumentError(
          absl::StrCat(p->rows.source, ": too many rows for uint32 row IDs")));
      return std::nullopt;
    }
    auto keys = plain ? absl::StatusOr<KeyVector>(*std::move(plain))
                      : KeyColumn(p->rows, left_col, key_kind);
    if (!keys.ok()) {
      queue.SetError(absl::Status(
          keys.status().code(),
          absl::StrCat(keys.status().message(),
                       name.empty()
                           ? (first_left ? why : why_later)
                           : absl::StrCat("; index '", name, "' has ",
                                          std::string(client::KeyTypeName(WireKeyType(key_kind))),
                                          " keys"))));
      return std::nullopt;
    }
    p->keys = *std::move(keys);
    p->first_row = static_cast<uint32_t>(next_row);
    first_left = false;
    next_row += n;
    p->capacity = grows ? n * max_group_rows : 0;
    if (cap_total) {
      const uint64_t natural = p->capacity ? p->capacity : n;
      p->capacity = std::min(natural, cap_total);
      p->count_only = written.load() >= cap_total;
    }
    client::JoinBatch batch;
    client::JoinLeft l;
    l.keys = p->keys.keys();
    l.first_left_row = p->first_row;
    l.capacity = p->capacity;
    l.count_only = p->count_only;
    batch.lefts.push_back(l);
    batch.select = p->count_only ? std::vector<std::string>{} : select;
    batch.kind = kind;
    batch.max_probe_count = a.max_probes;
    queue.Push(std::move(p));
    return batch;
  };

  ProgressBar bar("join " + left->source(), ProgressEnabled(g));
  uint64_t required = 0;
  bool overflow = false;
  uint64_t version = 0;
  client::QueryStatistics stats;
  // Rows are views of the batch's cells, the right file's and the gathered
  // columns' bytes: nothing is copied until the writer's buffer.
  std::vector<CellView> row;
  std::vector<std::string> scratch;  // numbers spelled for the row (one per gathered column)
  std::string left_number, right_number;
  const size_t right_width = right_cols.size();
  const auto view = [](const Cell& c) { return c ? CellView(*c) : std::nullopt; };
  auto write_pairs = [&](JoinPending& p, const client::JoinPairs& pairs) -> absl::Status {
    const size_t n = pairs.left_rows.size();
    if (pairs.right_rows.size() != n) return absl::InternalError("pairs of unequal length");
    for (const auto& col : pairs.columns) {
      if (col.length != n) return absl::InternalError("a gathered column of the wrong length");
    }
    if (shape != JoinRowShape::kRowNumbers) out.SetLeadingKinds(InputKinds(p.rows));
    scratch.resize(pairs.columns.size());
    for (size_t k = 0; k < n; ++k) {
      if (cap_total && written.load() >= cap_total) {
        overflow = true;
        break;
      }
      const uint32_t lr = pairs.left_rows[k];
      const uint32_t rr = pairs.right_rows[k];
      const bool matched = rr != client::kNoMatch;
      row.clear();
      if (shape == JoinRowShape::kRowNumbers) {
        left_number = std::to_string(lr);
        row.emplace_back(left_number);
        if (matched) {
          right_number = std::to_string(rr);
          row.emplace_back(right_number);
        } else {
          row.emplace_back(std::nullopt);
        }
      } else {
        if (lr < p.first_row || lr - p.first_row >= p.rows.rows.size()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "join: left row ", lr, " is not a row of this batch of ", p.rows.source));
        }
        for (const Cell& cell : p.rows.rows[lr - p.first_row].cells) row.push_back(view(cell));
        if (shape == JoinRowShape::kRightFile) {
          if (matched && rr >= right_table->rows.size()) {
            return absl::InvalidArgumentError(absl::StrCat(
                "join: index ", name, " returned value ", rr, ", which is not a row of ",
                right_table->source, " (", right_table->rows.size(), " rows)"));
          }
          if (matched) {
            const auto& rc = right_table->rows[rr].cells;
            for (size_t col : right_cols) row.push_back(view(rc[col]));
          } else {
            row.insert(row.end(), right_width, std::nullopt);
          }
        }
      }
      for (size_t ci = 0; ci < pairs.columns.size(); ++ci) {
        row.push_back(CellViewOf(pairs.columns[ci], k, &scratch[ci]));
      }
      out.Write(row);
      written.fetch_add(1);
    }
    return absl::OkStatus();
  };
  auto sink = [&](client::JoinResult&& r) -> absl::Status {
    std::unique_ptr<JoinPending> p = queue.Pop();
    if (p == nullptr) return absl::InternalError("an answer without a batch");
    if (!r.error.ok()) return r.error;
    if (r.results.size() != 1) return absl::InternalError("not one result for one left batch");
    client::JoinPairs& pairs = r.results[0];
    version = r.index_version;
    if (!cap_total && !p->count_only && pairs.count > pairs.left_rows.size()) {
      // More pairs than the batch was sized for (the index was rebuilt since,
      // or the server cut a large answer): count first, then ask for exactly
      // that many, in several requests if need be.
      client::QueryAllOptions o;
      o.batch_rows = p->keys.size();
      o.select = select;
      o.kind = kind;
      o.max_probe_count = a.max_probes;
      o.stream = Streaming(g);
      auto again = c->JoinAll(index, p->keys.keys(), o);
      if (!again.ok()) return again.status();
      for (uint32_t& lr : again->left_rows) lr += p->first_row;
      pairs = *std::move(again);
    }
    required += pairs.count;
    if (pairs.overflow) overflow = true;
    stats.Merge(pairs.statistics);
    if (!p->count_only) {
      absl::Status st = write_pairs(*p, pairs);
      if (!st.ok()) return st;
    }
    bar.UpdateInput(left->rows_read(), left->bytes_read(), left->total_bytes());
    return absl::OkStatus();
  };
  const absl::Status st = c->Join(index, source, sink, Streaming(g));
  bar.Done();
  if (!queue.error().ok()) UsageFail(std::string(queue.error().message()));
  if (!st.ok()) {
    if (st.code() == absl::StatusCode::kInvalidArgument &&
        absl::StrContains(st.message(), "is not a row of")) {
      UsageFail(std::string(st.message()));
    }
    RpcFail(st, absl::StrCat("join ", name.empty() ? left->source() : name));
  }
  if (cap_total && required > written.load()) overflow = true;
  for (const std::string& note : left->TakeNotes()) Note(g, note);
  // An inner join keeps the summary's first words; other kinds say which they are.
  const std::string what = kind == client::JoinKind::kInner
                               ? std::string("join")
                               : absl::StrCat("join (", std::string(JoinHowName(kind)), ")");
  Note(g, absl::StrCat(what, ": ", written.load(), " rows written, required ", required,
                       cap_total ? absl::StrCat(", capacity ", cap_total) : std::string(),
                       ", overflow ", overflow ? "YES (output truncated)" : "no", "; ",
                       StatsLine(stats)));
  if (right_duplicates > 0 && policy == client::DuplicatePolicy::kLowestRow) {
    Note(g, absl::StrCat("join: note: ", right_input->source(), " has ", right_duplicates,
                         " rows with a repeated key; each left row joins the first right row "
                         "with its key (--right-duplicates lowest_row)"));
  }
  Json summary{{"how", std::string(JoinHowName(kind))},
               {"required", required},
               {"written", written.load()},
               {"overflow", overflow},
               {"statistics", StatsJson(stats)},
               {"right_duplicate_rows", right_duplicates},
               {"duplicates", std::string(client::DuplicatePolicyName(policy))}};
  if (cap_total) summary["capacity"] = cap_total;
  if (!name.empty()) {
    summary["index"] = name;
    summary["index_version"] = version;
  }
  if (!select.empty() && !name.empty()) summary["select"] = select;
  out.Finish(std::move(summary));
  return kExitOk;
}

}  // namespace gpujoin::cli
