#include "app.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "columns.hpp"
#include "gpujoin/client/client.hpp"
#include "hash_columns.hpp"
#include "output.hpp"
#include "progress.hpp"
#include "table.hpp"

namespace gpujoin::cli {
namespace {

using Json = nlohmann::ordered_json;
using client::Client;

// ---------------------------------------------------------------- errors

/// Ends a command with an exit code and a one-line message.
struct CliError {
  int code;
  std::string message;
};

[[noreturn]] void UsageFail(std::string message) { throw CliError{kExitUsage, std::move(message)}; }

[[noreturn]] void RpcFail(const absl::Status& s, std::string_view what) {
  throw CliError{kExitRpc, absl::StrCat(std::string(what), ": ", absl::StatusCodeToString(s.code()),
                                        ": ", std::string(s.message()))};
}

// A client-side status from the client library (never sent) is a usage/input
// problem; anything the server or the transport said is an RPC failure.
template <typename T>
T RpcOrDie(absl::StatusOr<T> v, std::string_view what) {
  if (!v.ok()) RpcFail(v.status(), what);
  return *std::move(v);
}

template <typename T>
T InputOrDie(absl::StatusOr<T> v) {
  if (!v.ok()) UsageFail(std::string(v.status().message()));
  return *std::move(v);
}

std::atomic<bool> g_interrupted{false};

// The first Ctrl-C asks running streams to stop (so an ad-hoc join still drops
// its temporary index); a second one exits at once.
extern "C" void OnSigint(int) {
  if (g_interrupted.exchange(true)) _exit(130);
}

// ---------------------------------------------------------------- options

struct Globals {
  std::string server = "127.0.0.1:50051";
  std::string token;
  std::string token_file;
  std::string tls_ca;
  std::string tls_server_name;
  double timeout_s = 0;
  bool json = false;
  bool quiet = false;
  std::string input_format = "auto";
  size_t batch_rows = 1 << 16;
  int in_flight = 4;
};

std::string TrimLine(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  while (!s.empty() && s.front() == ' ') s.erase(s.begin());
  return s;
}

std::unique_ptr<Client> Connect(const Globals& g) {
  client::ConnectOptions o;
  o.address = g.server;
  o.token = g.token;
  if (!g.token_file.empty()) {
    std::ifstream in(g.token_file);
    if (!in) UsageFail(absl::StrCat(g.token_file, ": cannot read the token file"));
    std::stringstream ss;
    ss << in.rdbuf();
    o.token = TrimLine(ss.str());
    if (o.token.empty()) UsageFail(absl::StrCat(g.token_file, ": the token file is empty"));
  }
  o.tls_ca_file = g.tls_ca;
  o.tls_server_name = g.tls_server_name;
  if (g.timeout_s < 0) UsageFail("--timeout must not be negative");
  o.deadline = std::chrono::milliseconds(static_cast<int64_t>(g.timeout_s * 1000));
  auto c = Client::Connect(o);
  if (!c.ok()) UsageFail(std::string(c.status().message()));
  return *std::move(c);
}

client::StreamOptions Streaming(const Globals& g) {
  client::StreamOptions s;
  s.max_in_flight = g.in_flight;
  s.cancelled = [] { return g_interrupted.load(); };
  return s;
}

Table Load(const Globals& g, const std::string& path) {
  InputFormat f = InputOrDie(ParseInputFormat(g.input_format));
  return InputOrDie(ReadTable(path, f));
}

bool ProgressEnabled(const Globals& g) { return !g.quiet && !g.json && StderrIsTerminal(); }

// Human-readable notes go to stderr unless --quiet or --json.
void Note(const Globals& g, const std::string& line) {
  if (!g.quiet && !g.json) std::cerr << line << '\n';
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

// Emits a row result: with --json one JSON document on stdout (rows inline
// unless --out), else the rows to --out or stdout (aligned on a terminal for
// small results, CSV otherwise).
void EmitRows(const Globals& g, Json summary, const ResultTable& rows, const std::string& out) {
  std::string error;
  if (!out.empty()) {
    if (!WriteResultFile(out, rows, &error)) UsageFail(error);
  }
  if (g.json) {
    if (out.empty()) {
      summary["columns"] = rows.columns;
      summary["rows"] = RowsToJson(rows);
    } else {
      summary["out"] = out;
      summary["rows_written"] = rows.rows.size();
    }
    std::cout << summary.dump(2) << '\n';
    return;
  }
  if (out.empty()) {
    if (StdoutIsTerminal() && rows.rows.size() <= 200) {
      WriteAligned(std::cout, rows);
    } else {
      WriteDelimited(std::cout, rows, ',');
    }
    std::cout.flush();
    if (!std::cout) UsageFail("<stdout>: write failed");
  }
}

Json StatsJson(const client::QueryStatistics& s) {
  return Json{{"found", s.found},
              {"missing", s.missing},
              {"total_probes", s.total_probes},
              {"max_probes", s.max_probes}};
}

Json IndexJson(const client::IndexInfo& i) {
  const auto& s = i.statistics;
  return Json{{"name", i.name},
              {"version", i.version},
              {"rows", i.rows},
              {"capacity", i.capacity},
              {"max_probe_count", i.max_probe_count},
              {"first_value", i.first_value},
              {"explicit_values", i.explicit_values},
              {"batch_mode", i.batch_mode},
              {"statistics",
               Json{{"unique_keys", s.unique_keys},
                    {"duplicate_rows", s.duplicate_rows},
                    {"overflow_rows", s.overflow_rows},
                    {"invalid_rows", s.invalid_rows},
                    {"total_probes", s.total_probes},
                    {"max_probes", s.max_probes}}},
              {"load_factor", i.load_factor},
              {"device_bytes", i.device_bytes},
              {"build_seconds", i.build_seconds},
              {"backend", i.backend},
              {"built_unix_millis", i.built_unix_millis}};
}

// The health verdict of a build: warnings for lost keys and slow probing,
// notes for expected-but-noteworthy facts.
struct Verdict {
  std::string level = "ok";  // ok | note | warning
  std::vector<std::string> messages;
};

double AverageProbes(const client::IndexInfo& i) {
  const auto& s = i.statistics;
  const uint64_t probed = i.rows - std::min(i.rows, s.invalid_rows);
  return probed ? static_cast<double>(s.total_probes) / static_cast<double>(probed) : 0.0;
}

Verdict Judge(const client::IndexInfo& i) {
  Verdict v;
  const auto& s = i.statistics;
  auto warn = [&](std::string m) {
    v.level = "warning";
    v.messages.push_back(std::move(m));
  };
  auto note = [&](std::string m) {
    if (v.level == "ok") v.level = "note";
    v.messages.push_back(std::move(m));
  };
  if (s.overflow_rows > 0) {
    warn(absl::StrCat(s.overflow_rows,
                      " rows overflowed: their keys found no slot within the probe bound and are "
                      "NOT in the index; rebuild with a larger --capacity or --max-probes"));
  }
  const double avg = AverageProbes(i);
  if (avg > 4.0) {
    warn(absl::StrCat("high average probe count ", Fixed(avg, 2),
                      " per row; a lower load factor (larger --capacity) makes lookups faster"));
  }
  if (i.load_factor > 0.9) {
    warn(absl::StrCat("load factor ", Fixed(i.load_factor, 2), " is above 0.9"));
  }
  if (s.duplicate_rows > 0) {
    note(absl::StrCat(s.duplicate_rows,
                      " duplicate-key rows: for each key the lowest source row's value wins"));
  }
  if (s.invalid_rows > 0) {
    note(absl::StrCat(s.invalid_rows,
                      " rows hold the reserved key 4294967295 (0xffffffff) and were skipped"));
  }
  return v;
}

void PrintIndex(std::ostream& os, const client::IndexInfo& i) {
  const auto& s = i.statistics;
  os << "index        " << i.name << " (version " << i.version << ", " << i.backend << ")\n";
  os << "rows         " << i.rows << "\n";
  os << "unique keys  " << s.unique_keys << "\n";
  os << "duplicates   " << s.duplicate_rows << "\n";
  os << "overflow     " << s.overflow_rows << "\n";
  os << "invalid      " << s.invalid_rows << "\n";
  os << "capacity     " << i.capacity << " slots, load factor " << Fixed(i.load_factor, 3)
     << "\n";
  os << "probes       avg " << Fixed(AverageProbes(i), 2) << ", max " << s.max_probes
     << " (bound " << i.max_probe_count << ")\n";
  os << "values       "
     << (i.explicit_values ? std::string("explicit")
                           : absl::StrCat("row IDs from ", i.first_value))
     << "\n";
  os << "memory       " << FormatBytes(static_cast<double>(i.device_bytes)) << "\n";
  os << "build time   " << Fixed(i.build_seconds * 1000, 3) << " ms\n";
}

// ---------------------------------------------------------------- commands

int CmdHealth(const Globals& g, const std::string& service) {
  auto c = Connect(g);
  client::HealthState st = RpcOrDie(c->Health(service), "health");
  const std::string name(client::HealthStateName(st));
  if (g.json) {
    std::cout << Json{{"server", g.server}, {"service", service}, {"status", name}}.dump(2)
              << '\n';
  } else {
    std::cout << name << '\n';
  }
  if (st != client::HealthState::kServing) {
    if (!g.json) std::cerr << "gpujoin: health: server " << g.server << " is " << name << '\n';
    return kExitRpc;
  }
  return kExitOk;
}

int CmdInfo(const Globals& g) {
  auto c = Connect(g);
  client::ServerInfo i = RpcOrDie(c->GetServerInfo(), "info");
  if (g.json) {
    std::cout << Json{{"server", g.server},
                      {"version", i.version},
                      {"backend", i.backend},
                      {"device_name", i.device_name},
                      {"device_memory_total_bytes", i.device_memory_total_bytes},
                      {"device_memory_used_bytes", i.device_memory_used_bytes},
                      {"device_memory_budget_bytes", i.device_memory_budget_bytes},
                      {"max_message_bytes", i.max_message_bytes},
                      {"max_inflight_batches_per_stream", i.max_inflight_batches_per_stream},
                      {"max_inflight_batches", i.max_inflight_batches},
                      {"index_count", i.index_count},
                      {"serving", i.serving}}
                     .dump(2)
              << '\n';
    return kExitOk;
  }
  std::cout << "server       " << g.server << "\n"
            << "version      " << i.version << "\n"
            << "backend      " << i.backend << "\n"
            << "device       " << (i.device_name.empty() ? "-" : i.device_name) << "\n"
            << "memory       " << FormatBytes(static_cast<double>(i.device_memory_used_bytes))
            << " used by indexes, budget "
            << FormatBytes(static_cast<double>(i.device_memory_budget_bytes)) << ", device total "
            << FormatBytes(static_cast<double>(i.device_memory_total_bytes)) << "\n"
            << "indexes      " << i.index_count << "\n"
            << "limits       max message "
            << FormatBytes(static_cast<double>(i.max_message_bytes)) << ", in-flight batches "
            << i.max_inflight_batches_per_stream << " per stream / " << i.max_inflight_batches
            << " total\n"
            << "serving      " << (i.serving ? "yes" : "no") << "\n";
  return kExitOk;
}

struct BuildArgs {
  std::string name, from, key, value;
  bool row_ids = false;
  uint32_t first_row = 0;
  uint32_t capacity = 0;
  double load_factor = 0;
  uint32_t max_probes = 0;
  bool replace = false;
};

int CmdIndexBuild(const Globals& g, const BuildArgs& a) {
  if (!a.value.empty() && a.row_ids) UsageFail("index build: --value and --row-ids exclude each other");
  if (a.first_row != 0 && !a.value.empty()) UsageFail("index build: --first-row needs --row-ids");
  if (a.capacity != 0 && a.load_factor != 0) {
    UsageFail("index build: --capacity and --load-factor exclude each other");
  }
  if (a.capacity != 0 && (a.capacity & (a.capacity - 1)) != 0) {
    UsageFail(absl::StrCat("index build: --capacity must be a power of two, got ", a.capacity));
  }
  if (a.load_factor < 0 || a.load_factor > 1) {
    UsageFail(absl::StrCat("index build: --load-factor must be in (0, 1], got ",
                           Fixed(a.load_factor, 3)));
  }
  Table t = Load(g, a.from);
  std::vector<uint32_t> keys = InputOrDie(KeyColumn(t, a.key));
  std::vector<uint32_t> values;
  if (!a.value.empty()) values = InputOrDie(KeyColumn(t, a.value));

  auto c = Connect(g);
  client::IndexSpec spec;
  spec.name = a.name;
  spec.capacity = a.capacity;
  if (a.capacity == 0) {
    spec.expected_rows = keys.size();
    spec.target_load_factor = a.load_factor;
  }
  spec.max_probe_count = a.max_probes;
  spec.first_value = a.first_row;
  spec.explicit_values = !a.value.empty();
  spec.replace = a.replace;
  ProgressBar bar("upload " + a.name, ProgressEnabled(g));
  client::IndexInfo info = RpcOrDie(
      c->BuildIndexFromColumns(spec, keys, values, g.batch_rows,
                               [&](const client::Progress& p) {
                                 bar.Update(p.rows_sent, p.total_rows, p.bytes_sent);
                               }),
      absl::StrCat("index build ", a.name));
  bar.Done();
  Verdict v = Judge(info);
  if (g.json) {
    std::cout << Json{{"index", IndexJson(info)},
                      {"source", t.source},
                      {"health", Json{{"verdict", v.level}, {"messages", v.messages}}}}
                     .dump(2)
              << '\n';
    return kExitOk;
  }
  if (!g.quiet) {
    std::cout << "built from " << t.source << " (key " << a.key << ", values "
              << (a.value.empty() ? absl::StrCat("row IDs from ", a.first_row)
                                  : absl::StrCat("column ", a.value))
              << ")\n";
    PrintIndex(std::cout, info);
    std::cout << "health       " << v.level << "\n";
    for (const auto& m : v.messages) std::cout << "  " << v.level << ": " << m << "\n";
  } else if (v.level == "warning") {
    for (const auto& m : v.messages) std::cerr << "gpujoin: warning: " << m << "\n";
  }
  return kExitOk;
}

int CmdIndexLs(const Globals& g) {
  auto c = Connect(g);
  std::vector<client::IndexInfo> list = RpcOrDie(c->ListIndexes(), "index ls");
  std::sort(list.begin(), list.end(),
            [](const auto& x, const auto& y) { return x.name < y.name; });
  if (g.json) {
    Json a = Json::array();
    for (const auto& i : list) a.push_back(IndexJson(i));
    std::cout << Json{{"indexes", a}}.dump(2) << '\n';
    return kExitOk;
  }
  ResultTable t;
  t.AddColumn("name", ColumnKind::kString);
  t.AddColumn("version", ColumnKind::kNumber);
  t.AddColumn("rows", ColumnKind::kNumber);
  t.AddColumn("unique_keys", ColumnKind::kNumber);
  t.AddColumn("capacity", ColumnKind::kNumber);
  t.AddColumn("load_factor", ColumnKind::kNumber);
  t.AddColumn("overflow_rows", ColumnKind::kNumber);
  t.AddColumn("max_probes", ColumnKind::kNumber);
  t.AddColumn("device_bytes", ColumnKind::kNumber);
  t.AddColumn("backend", ColumnKind::kString);
  for (const auto& i : list) {
    t.rows.push_back({i.name, std::to_string(i.version), std::to_string(i.rows),
                      std::to_string(i.statistics.unique_keys), std::to_string(i.capacity),
                      Fixed(i.load_factor, 3), std::to_string(i.statistics.overflow_rows),
                      std::to_string(i.statistics.max_probes), std::to_string(i.device_bytes),
                      i.backend});
  }
  EmitRows(g, Json::object(), t, "");
  return kExitOk;
}

int CmdIndexDescribe(const Globals& g, const std::string& name) {
  auto c = Connect(g);
  client::IndexInfo info = RpcOrDie(c->DescribeIndex(name), absl::StrCat("index describe ", name));
  Verdict v = Judge(info);
  if (g.json) {
    std::cout << Json{{"index", IndexJson(info)},
                      {"health", Json{{"verdict", v.level}, {"messages", v.messages}}}}
                     .dump(2)
              << '\n';
    return kExitOk;
  }
  PrintIndex(std::cout, info);
  std::cout << "health       " << v.level << "\n";
  for (const auto& m : v.messages) std::cout << "  " << v.level << ": " << m << "\n";
  return kExitOk;
}

int CmdIndexDrop(const Globals& g, const std::string& name) {
  auto c = Connect(g);
  client::DropResult r = RpcOrDie(c->DropIndex(name), absl::StrCat("index drop ", name));
  if (g.json) {
    std::cout << Json{{"dropped", name},
                      {"dropped_version", r.dropped_version},
                      {"freed_bytes", r.freed_bytes}}
                     .dump(2)
              << '\n';
  } else if (!g.quiet) {
    std::cout << "dropped index " << name << " (version " << r.dropped_version << ", freed "
              << FormatBytes(static_cast<double>(r.freed_bytes)) << ")\n";
  }
  return kExitOk;
}

// Copies the input table's header and kinds into a result table.
ResultTable StartFrom(const Table& t) {
  ResultTable r;
  for (const auto& h : t.header) r.AddColumn(h, ColumnKind::kString);
  return r;
}

std::string Percent(uint64_t part, uint64_t whole) {
  return whole ? Fixed(100.0 * static_cast<double>(part) / static_cast<double>(whole), 2) + "%"
               : "n/a";
}

std::string StatsLine(const client::QueryStatistics& s) {
  const uint64_t n = s.found + s.missing;
  return absl::StrCat(s.found, " of ", n, " keys found (", Percent(s.found, n), "), avg probes ",
                      n ? Fixed(static_cast<double>(s.total_probes) / static_cast<double>(n), 2)
                        : std::string("0"),
                      ", max ", s.max_probes);
}

struct LookupArgs {
  std::string name, from, key, out;
};

int CmdLookup(const Globals& g, const LookupArgs& a) {
  Table t = Load(g, a.from);
  std::vector<uint32_t> keys = InputOrDie(KeyColumn(t, a.key));
  auto c = Connect(g);
  ProgressBar bar("lookup " + a.name, ProgressEnabled(g));
  client::LookupResult r = RpcOrDie(
      c->LookupAll(a.name, keys, g.batch_rows, Streaming(g),
                   [&](const client::Progress& p) {
                     bar.Update(p.rows_sent, p.total_rows, p.rows_sent * 4);
                   }),
      absl::StrCat("lookup ", a.name));
  bar.Done();
  ResultTable out = StartFrom(t);
  out.AddColumn("value", ColumnKind::kNumber);
  out.AddColumn("found", ColumnKind::kBool);
  out.rows.reserve(t.rows.size());
  for (size_t i = 0; i < t.rows.size(); ++i) {
    std::vector<Cell> row = t.rows[i].cells;
    const bool found = r.found[i] != 0;
    row.emplace_back(found ? Cell(std::to_string(r.values[i])) : std::nullopt);
    row.emplace_back(found ? "true" : "false");
    out.rows.push_back(std::move(row));
  }
  Note(g, absl::StrCat("lookup ", a.name, " (version ", r.index_version, "): ",
                       StatsLine(r.statistics)));
  EmitRows(g,
           Json{{"index", a.name},
                {"index_version", r.index_version},
                {"statistics", StatsJson(r.statistics)}},
           out, a.out);
  return kExitOk;
}

struct JoinArgs {
  std::string name, left, right, on, out;
  uint64_t capacity = 0;
};

// Drops a temporary index when the ad-hoc join ends, whatever happens.
class TempIndex {
 public:
  TempIndex(Client* c, std::string name) : c_(c), name_(std::move(name)) {}
  ~TempIndex() {
    if (armed_) (void)c_->DropIndex(name_);
  }
  void Arm() { armed_ = true; }
  const std::string& name() const { return name_; }

 private:
  Client* c_;
  std::string name_;
  bool armed_ = false;
};

int CmdJoin(const Globals& g, const JoinArgs& a) {
  std::string left_col = a.on, right_col = a.on;
  if (const size_t eq = a.on.find('='); eq != std::string::npos) {
    left_col = a.on.substr(0, eq);
    right_col = a.on.substr(eq + 1);
    if (left_col.empty() || right_col.empty()) {
      UsageFail(absl::StrCat("join: --on '", a.on, "' must be COL or LEFTCOL=RIGHTCOL"));
    }
    if (!a.name.empty()) {
      UsageFail("join: --on LEFTCOL=RIGHTCOL is for ad-hoc joins; a resident index already has "
                "its keys (use --on LEFTCOL)");
    }
  }
  if (a.name.empty() && a.right.empty()) {
    UsageFail("join: give --right FILE (ad-hoc join) or an index NAME (resident join)");
  }
  Table left = Load(g, a.left);
  std::vector<uint32_t> left_keys = InputOrDie(KeyColumn(left, left_col));
  std::optional<Table> right;
  std::vector<uint32_t> right_keys;
  if (!a.right.empty()) {
    right = Load(g, a.right);
    if (a.name.empty()) right_keys = InputOrDie(KeyColumn(*right, right_col));
  }
  if (left_keys.size() > std::numeric_limits<uint32_t>::max()) {
    UsageFail(absl::StrCat(left.source, ": too many rows for uint32 row IDs"));
  }

  auto c = Connect(g);
  std::string index = a.name;
  std::optional<TempIndex> temp;
  uint64_t right_duplicates = 0;
  if (a.name.empty()) {
    // Ad-hoc: a temporary index from the right file's keys to its row numbers.
    index = absl::StrCat("gpujoin-cli-tmp-", getpid(), "-",
                         std::chrono::steady_clock::now().time_since_epoch().count());
    temp.emplace(c.get(), index);
    client::IndexSpec spec;
    spec.name = index;
    spec.expected_rows = right_keys.size();
    ProgressBar bar("upload " + right->source, ProgressEnabled(g));
    temp->Arm();
    client::IndexInfo info = RpcOrDie(
        c->BuildIndexFromColumns(spec, right_keys, {}, g.batch_rows,
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
  size_t pos = 0;
  bool sent_any = false;  // an empty left file still runs one (empty) batch
  ProgressBar bar("join " + left.source, ProgressEnabled(g));
  uint64_t answered = 0;
  absl::Status st = c->Join(
      index,
      [&]() -> std::optional<client::JoinBatch> {
        if (pos >= left_keys.size() && sent_any) return std::nullopt;
        sent_any = true;
        const size_t n = std::min(g.batch_rows, left_keys.size() - pos);
        client::JoinBatch b;
        client::JoinLeft l;
        l.keys = std::span<const uint32_t>(left_keys).subspan(pos, n);
        l.first_left_row = static_cast<uint32_t>(pos);
        l.capacity = cap_total ? std::min<uint64_t>(cap_total, n) : 0;
        b.lefts.push_back(l);
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
          for (size_t k = 0; k < jp.left_rows.size(); ++k) {
            if (cap_total && left_rows.size() >= cap_total) break;
            left_rows.push_back(jp.left_rows[k]);
            right_rows.push_back(jp.right_rows[k]);
          }
          answered += jp.statistics.found + jp.statistics.missing;
        }
        bar.Update(answered, left_keys.size(), answered * 4);
        return absl::OkStatus();
      },
      Streaming(g));
  bar.Done();
  if (!st.ok()) RpcFail(st, absl::StrCat("join ", a.name.empty() ? left.source : a.name));
  if (cap_total && required > cap_total) overflow = true;

  ResultTable out;
  if (right) {
    out = StartFrom(left);
    for (const auto& h : right->header) out.AddColumn(h, ColumnKind::kString);
    out.rows.reserve(left_rows.size());
    for (size_t k = 0; k < left_rows.size(); ++k) {
      if (right_rows[k] >= right->rows.size()) {
        UsageFail(absl::StrCat("join: index ", a.name, " returned value ", right_rows[k],
                               ", which is not a row of ", right->source, " (",
                               right->rows.size(), " rows)"));
      }
      std::vector<Cell> row = left.rows[left_rows[k]].cells;
      const auto& rc = right->rows[right_rows[k]].cells;
      row.insert(row.end(), rc.begin(), rc.end());
      out.rows.push_back(std::move(row));
    }
  } else {
    out.AddColumn("left_row", ColumnKind::kNumber);
    out.AddColumn("right_row", ColumnKind::kNumber);
    for (size_t k = 0; k < left_rows.size(); ++k) {
      out.rows.push_back({std::to_string(left_rows[k]), std::to_string(right_rows[k])});
    }
  }
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
  if (!a.name.empty()) {
    summary["index"] = a.name;
    summary["index_version"] = version;
  }
  EmitRows(g, std::move(summary), out, a.out);
  return kExitOk;
}

struct AggArgs {
  std::string from, group, op, value, where_mask, out;
};

int CmdAgg(const Globals& g, const AggArgs& a) {
  auto op_or = client::ParseAggregateOp(a.op);
  if (!op_or.ok()) UsageFail(absl::StrCat("agg: --op: ", std::string(op_or.status().message())));
  const client::AggregateOp op = *op_or;
  if (op == client::AggregateOp::kCount && !a.value.empty()) {
    UsageFail("agg: --value is not used by --op count");
  }
  if (op != client::AggregateOp::kCount && a.value.empty()) {
    UsageFail(absl::StrCat("agg: --op ", a.op, " needs --value COL"));
  }
  Table t = Load(g, a.from);
  GroupEncoding groups = InputOrDie(EncodeGroups(t, a.group));
  std::vector<float> values;
  if (!a.value.empty()) values = InputOrDie(ValueColumn(t, a.value));
  std::vector<uint32_t> mask;
  bool any_null_group =
      std::find(groups.present.begin(), groups.present.end(), 0u) != groups.present.end();
  if (!a.where_mask.empty()) {
    mask = InputOrDie(MaskColumn(t, a.where_mask));
    for (size_t i = 0; i < mask.size(); ++i) mask[i] &= groups.present[i];
  } else if (any_null_group) {
    mask = groups.present;  // rows without a group label take no part
  }

  auto c = Connect(g);
  client::AggregateSpec spec{op, groups.groups};
  ProgressBar bar("agg " + t.source, ProgressEnabled(g));
  client::AggregateResult r = RpcOrDie(
      c->AggregateAll(spec, groups.codes, values, mask, g.batch_rows, Streaming(g),
                      [&](const client::Progress& p) {
                        bar.Update(p.rows_sent, p.total_rows, p.bytes_sent);
                      }),
      "agg");
  bar.Done();
  const bool is_count = op == client::AggregateOp::kCount;
  if (is_count ? r.total_counts.size() != groups.groups : r.total_values.size() != groups.groups) {
    RpcFail(absl::InternalError(absl::StrCat("server returned ",
                                             is_count ? r.total_counts.size() : r.total_values.size(),
                                             " groups, expected ", groups.groups)),
            "agg");
  }
  ResultTable out;
  out.AddColumn(a.group, ColumnKind::kString);
  out.AddColumn(is_count ? std::string("count") : absl::StrCat(a.op, "_", a.value),
                ColumnKind::kNumber);
  for (uint32_t code : groups.order) {
    Cell v;
    if (is_count) {
      v = std::to_string(r.total_counts[code]);
    } else if (!std::isnan(r.total_values[code])) {
      v = FormatFloat(r.total_values[code]);
    }  // NaN (no contributing rows) stays null
    out.rows.push_back({groups.labels[code], std::move(v)});
  }
  Note(g, absl::StrCat("agg: ", a.op, " over ", t.rows.size(), " rows into ", groups.order.size(),
                       " groups", groups.dictionary ? " (labels dictionary-encoded locally)" : ""));
  EmitRows(g,
           Json{{"op", a.op},
                {"group", a.group},
                {"groups", groups.order.size()},
                {"dictionary_encoded", groups.dictionary},
                {"input_rows", t.rows.size()}},
           out, a.out);
  return kExitOk;
}

struct HashArgs {
  std::string from, cols, out;
  uint32_t bits = 64;
};

int CmdHash(const Globals& g, const HashArgs& a) {
  if (a.bits != 32 && a.bits != 64) UsageFail(absl::StrCat("hash: --bits must be 32 or 64"));
  Table t = Load(g, a.from);
  std::vector<std::string> specs = absl::StrSplit(a.cols, ',', absl::SkipEmpty());
  if (specs.empty()) UsageFail("hash: --cols needs at least one column");
  std::vector<HashInput> inputs;
  for (const auto& s : specs) inputs.push_back(InputOrDie(BuildHashInput(t, s)));
  std::vector<client::HashColumn> cols;
  for (const auto& in : inputs) cols.push_back(in.View());

  auto c = Connect(g);
  ProgressBar bar("hash " + t.source, ProgressEnabled(g));
  client::HashResult r = RpcOrDie(
      c->HashAll(cols, a.bits, g.batch_rows, Streaming(g),
                 [&](const client::Progress& p) {
                   bar.Update(p.rows_sent, p.total_rows, p.bytes_sent);
                 }),
      "hash");
  bar.Done();
  ResultTable out = StartFrom(t);
  out.AddColumn("hash", ColumnKind::kNumber);
  for (size_t i = 0; i < t.rows.size(); ++i) {
    std::vector<Cell> row = t.rows[i].cells;
    row.emplace_back(r.Valid(i) ? Cell(std::to_string(r.hashes[i])) : std::nullopt);
    out.rows.push_back(std::move(row));
  }
  Json types = Json::object();
  for (const auto& in : inputs) types[in.name] = std::string(HashTypeName(in.type));
  Note(g, absl::StrCat("hash: ", t.rows.size(), " rows, ", r.null_count, " null, ", a.bits,
                       "-bit"));
  EmitRows(g, Json{{"bits", a.bits}, {"column_types", types}, {"null_rows", r.null_count}}, out,
           a.out);
  return kExitOk;
}

}  // namespace

int RunCli(int argc, char** argv) {
  CLI::App app{
      "gpujoin: command-line client of the gpujoind GPU hash-index service.\n"
      "Exit codes: 0 ok, 1 server/RPC error, 2 usage or input error."};
  app.name("gpujoin");
  app.require_subcommand(1);
  app.fallthrough(true);
  Globals g;
  app.add_option("--server", g.server, "server address host:port")
      ->envname("GPUJOIN_SERVER")
      ->capture_default_str();
  auto* tok = app.add_option("--token", g.token, "bearer token")->envname("GPUJOIN_TOKEN");
  app.add_option("--token-file", g.token_file, "file holding the bearer token")
      ->excludes(tok);
  app.add_option("--tls-ca", g.tls_ca, "PEM file of the CA that signs the server certificate (enables TLS)");
  app.add_option("--tls-server-name", g.tls_server_name,
                 "name to check against the server certificate (default: from --server)");
  app.add_option("--timeout", g.timeout_s, "deadline of each call in seconds (0 = none)")
      ->capture_default_str();
  app.add_flag("--json", g.json, "machine-readable JSON output on stdout");
  app.add_flag("-q,--quiet", g.quiet, "no progress bars or notes");
  app.add_option("--format", g.input_format, "input format: auto, csv, tsv, jsonl, u32")
      ->capture_default_str();
  app.add_option("--batch-rows", g.batch_rows, "rows per request in streams and uploads")
      ->check(CLI::Range(size_t{1}, size_t{1} << 24))
      ->capture_default_str();
  app.add_option("--in-flight", g.in_flight, "batches in flight per stream")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();

  std::function<int()> run;

  auto* health = app.add_subcommand("health", "check the server's grpc.health.v1 status");
  std::string health_service;
  health->add_option("--service", health_service,
                     "service to check (default: the whole server; gpujoin.v1.GpuJoin)");
  health->callback([&] { run = [&] { return CmdHealth(g, health_service); }; });

  auto* info = app.add_subcommand("info", "server version, backend, device and memory");
  info->callback([&] { run = [&] { return CmdInfo(g); }; });

  auto* index = app.add_subcommand("index", "manage resident indexes");
  index->require_subcommand(1);
  BuildArgs ba;
  auto* build = index->add_subcommand("build", "build (or --replace) an index from a file");
  build->add_option("NAME", ba.name, "index name")->required();
  build->add_option("--from", ba.from, "input file (CSV/TSV/JSONL/.u32, - = stdin)")->required();
  build->add_option("--key", ba.key, "key column (uint32)")->required();
  auto* val = build->add_option("--value", ba.value, "value column (uint32)");
  build->add_flag("--row-ids", ba.row_ids, "values are row numbers (the default)")->excludes(val);
  build->add_option("--first-row", ba.first_row, "value of the first row with --row-ids");
  auto* cap = build->add_option("--capacity", ba.capacity, "table slots, a power of two");
  build->add_option("--load-factor", ba.load_factor,
                    "target load factor when the server picks the capacity (default 0.5)")
      ->excludes(cap);
  build->add_option("--max-probes", ba.max_probes, "probe bound per key (0 = capacity)");
  build->add_flag("--replace", ba.replace, "atomically replace a live index of that name");
  build->callback([&] { run = [&] { return CmdIndexBuild(g, ba); }; });

  auto* ls = index->add_subcommand("ls", "list resident indexes");
  ls->callback([&] { run = [&] { return CmdIndexLs(g); }; });

  std::string describe_name, drop_name;
  auto* describe = index->add_subcommand("describe", "show one index");
  describe->add_option("NAME", describe_name, "index name")->required();
  describe->callback([&] { run = [&] { return CmdIndexDescribe(g, describe_name); }; });

  auto* drop = index->add_subcommand("drop", "drop an index and free its memory");
  drop->add_option("NAME", drop_name, "index name")->required();
  drop->callback([&] { run = [&] { return CmdIndexDrop(g, drop_name); }; });

  LookupArgs la;
  auto* lookup = app.add_subcommand("lookup", "append each row's matched value and a found flag");
  lookup->add_option("NAME", la.name, "index name")->required();
  lookup->add_option("--from", la.from, "input file")->required();
  lookup->add_option("--key", la.key, "key column (uint32)")->required();
  lookup->add_option("--out", la.out, "output file (.csv, .tsv, .jsonl; default stdout)");
  lookup->callback([&] { run = [&] { return CmdLookup(g, la); }; });

  JoinArgs ja;
  auto* join = app.add_subcommand(
      "join", "inner join: ad hoc (--left/--right) or against a resident index (NAME --left)");
  join->add_option("NAME", ja.name, "resident index (omit for an ad-hoc join)");
  join->add_option("--left", ja.left, "left (probe) file")->required();
  join->add_option("--right", ja.right, "right (build) file");
  join->add_option("--on", ja.on, "join column: COL or LEFTCOL=RIGHTCOL (uint32)")->required();
  join->add_option("--out", ja.out, "output file (.csv, .tsv, .jsonl; default stdout)");
  join->add_option("--capacity", ja.capacity, "most output rows (0 = no bound)");
  join->callback([&] { run = [&] { return CmdJoin(g, ja); }; });

  AggArgs aa;
  auto* agg = app.add_subcommand("agg", "grouped count/sum/min/max/mean");
  agg->add_option("--from", aa.from, "input file")->required();
  agg->add_option("--group", aa.group, "group column (dense uint32, or any labels)")->required();
  agg->add_option("--op", aa.op, "count, sum, min, max or mean")->required();
  agg->add_option("--value", aa.value, "value column (float) for sum/min/max/mean");
  agg->add_option("--where-mask", aa.where_mask, "include only rows where this column is nonzero/true");
  agg->add_option("--out", aa.out, "output file (.csv, .tsv, .jsonl; default stdout)");
  agg->callback([&] { run = [&] { return CmdAgg(g, aa); }; });

  HashArgs ha;
  auto* hash = app.add_subcommand("hash", "append a row hash of one or more columns");
  hash->add_option("--from", ha.from, "input file")->required();
  hash->add_option("--cols", ha.cols, "columns a,b[:type] (types: uint32 int32 uint64 int64 "
                                     "float32 float64 string)")
      ->required();
  hash->add_option("--bits", ha.bits, "32 or 64")->capture_default_str();
  hash->add_option("--out", ha.out, "output file (.csv, .tsv, .jsonl; default stdout)");
  hash->callback([&] { run = [&] { return CmdHash(g, ha); }; });

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // With fallthrough, a misspelled command surfaces as "a subcommand is
    // required"; name the word instead.
    const std::vector<std::string> extra = app.remaining();
    if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr && !extra.empty() &&
        app.get_subcommands().empty()) {
      std::cerr << "gpujoin: unknown command '" << extra.front() << "' (see gpujoin --help)\n";
      return kExitUsage;
    }
    std::cerr << "gpujoin: " << e.what() << " (see gpujoin --help)\n";
    return kExitUsage;
  }
  if (!run) {
    std::cerr << "gpujoin: no command given (see gpujoin --help)\n";
    return kExitUsage;
  }
  std::signal(SIGINT, OnSigint);
  try {
    return run();
  } catch (const CliError& e) {
    std::cout.flush();
    if (g_interrupted.load()) {
      std::cerr << "gpujoin: interrupted\n";
      return 130;
    }
    std::cerr << "gpujoin: " << e.message << '\n';
    return e.code;
  }
}

}  // namespace gpujoin::cli
