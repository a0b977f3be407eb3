// gpujoin index build|ls|describe|drop|save|load, with the build health verdict.
#include <algorithm>
#include <memory>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "columns/columns.hpp"
#include "columns/key_columns.hpp"
#include "columns/payload.hpp"
#include "commands.hpp"
#include "output/progress.hpp"

namespace gpujoin::cli {
namespace {

Json IndexJson(const client::IndexInfo& i) {
  Json payload = Json::array();
  for (const auto& p : i.payload) {
    payload.push_back(Json{{"name", p.name},
                           {"type", std::string(client::ColumnTypeName(p.type))},
                           {"null_count", p.null_count},
                           {"bytes", p.bytes}});
  }
  Json j{{"name", i.name},
         {"version", i.version},
         {"rows", i.rows},
         {"capacity", i.capacity},
         {"max_probe_count", i.max_probe_count},
         {"first_value", i.first_value},
         {"explicit_values", i.explicit_values},
         {"batch_mode", i.batch_mode},
         {"statistics", BuildStatsJson(i.statistics)},
         {"durable_version", i.durable_version},
         {"load_factor", i.load_factor},
         {"device_bytes", i.device_bytes},
         {"build_seconds", i.build_seconds},
         {"backend", i.backend},
         {"built_unix_millis", i.built_unix_millis},
         {"key_type", std::string(client::KeyTypeName(i.key_type))},
         {"payload", std::move(payload)},
         {"payload_bytes", i.payload_bytes},
         {"duplicates", std::string(client::DuplicatePolicyName(i.duplicates))},
         {"mutation_sequence", i.mutation_sequence},
         {"max_load_factor", i.max_load_factor},
         {"next_row_id", i.next_row_id},
         {"rehashes", i.rehashes},
         {"placement", i.replicated ? "replicated" : "partitioned"}};
  if (i.key_type == client::KeyType::kColumns) {
    Json keys = Json::array();
    for (const auto& k : i.key_columns) {
      keys.push_back(Json{{"name", k.name}, {"type", std::string(client::ColumnTypeName(k.type))}});
    }
    j["key_columns"] = std::move(keys);
  }
  return j;
}

// "columns (sku:str)" for a key schema, else the key word ("uint32").
std::string KeysText(const client::IndexInfo& i) {
  if (i.key_type != client::KeyType::kColumns) return std::string(client::KeyTypeName(i.key_type));
  KeyPlan plan;
  plan.kind = KeyKind::kColumns;
  for (const auto& k : i.key_columns) {
    plan.columns.push_back(k.name);
    plan.types.push_back(k.type);
  }
  return absl::StrCat("columns (", plan.TypesText(), ")");
}

// The reserved key of an index of `type`, spelled for people; `kind`, when known
// (a build from this CLI), says whether 64-bit keys are signed.
std::string ReservedKey(client::KeyType type, std::optional<KeyKind> kind) {
  if (type == client::KeyType::kUint32) return "4294967295 (0xffffffff)";
  if (kind == KeyKind::kI64) return "-1 (0xffffffffffffffff)";
  if (kind == KeyKind::kU64) return "18446744073709551615 (0xffffffffffffffff)";
  return "18446744073709551615 (0xffffffffffffffff, -1 as int64)";
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

Verdict Judge(const client::IndexInfo& i, std::optional<KeyKind> kind = std::nullopt) {
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
  if (s.duplicate_rows > 0 && i.duplicates == client::DuplicatePolicy::kKeepAll) {
    note(absl::StrCat(s.duplicate_rows,
                      " duplicate-key rows, all kept (keep_all); the largest key ", "has ",
                      s.max_group_rows, " rows"));
  } else if (s.duplicate_rows > 0) {
    note(absl::StrCat(s.duplicate_rows,
                      " duplicate-key rows: for each key the lowest source row's value wins"));
  }
  if (s.invalid_rows > 0 && i.key_type == client::KeyType::kColumns) {
    note(absl::StrCat(s.invalid_rows, " rows have a null key column and were skipped"));
  } else if (s.invalid_rows > 0) {
    note(absl::StrCat(s.invalid_rows, " rows hold the reserved key ", ReservedKey(i.key_type, kind),
                      " and were skipped"));
  }
  return v;
}

void PrintIndex(std::ostream& os, const client::IndexInfo& i) {
  const auto& s = i.statistics;
  os << "index        " << i.name << " (version " << i.version << ", " << i.backend << ")\n";
  os << "rows         " << i.rows << "\n";
  os << "keys         " << KeysText(i) << "\n";
  os << "unique keys  " << s.unique_keys << "\n";
  os << "duplicates   " << s.duplicate_rows << "\n";
  if (i.duplicates == client::DuplicatePolicy::kKeepAll) {
    os << "policy       keep_all (every row kept), largest group " << s.max_group_rows
       << (s.max_group_rows == 1 ? " row\n" : " rows\n");
  } else {
    os << "policy       lowest_row (the first row of a key wins)\n";
  }
  if (i.replicated) os << "placement    replicated (every shard holds every row)\n";
  os << "overflow     " << s.overflow_rows << "\n";
  os << "invalid      " << s.invalid_rows << "\n";
  os << "capacity     " << i.capacity << " slots, load factor " << Fixed(i.load_factor, 3) << "\n";
  os << "probes       avg " << Fixed(AverageProbes(i), 2) << ", max " << s.max_probes << " (bound "
     << i.max_probe_count << ")\n";
  os << "values       "
     << (i.explicit_values ? std::string("explicit") : absl::StrCat("row IDs from ", i.first_value))
     << "\n";
  os << "memory       " << FormatBytes(static_cast<double>(i.device_bytes)) << "\n";
  if (i.durable_version != 0) {
    os << "durable      version " << i.durable_version
       << (i.durable_version == i.version ? " (in its snapshot)\n"
                                          : " in its snapshot; a restart serves that one\n");
  }
  if (i.mutation_sequence != 0 || i.rehashes != 0) {
    os << "mutations    sequence " << i.mutation_sequence << " (batches applied since the build)";
    if (i.rehashes != 0) os << ", " << i.rehashes << (i.rehashes == 1 ? " rehash" : " rehashes");
    if (!i.explicit_values) os << ", next row ID " << i.next_row_id;
    os << "\n";
  }
  if (i.payload.empty()) {
    os << "payload      none\n";
  } else {
    os << "payload      " << i.payload.size()
       << (i.payload.size() == 1 ? " column, " : " columns, ")
       << FormatBytes(static_cast<double>(i.payload_bytes)) << "\n";
    for (const auto& p : i.payload) {
      // Names under the labels' width line up with the values above.
      os << "  " << p.name << std::string(p.name.size() < 11 ? 11 - p.name.size() : 1, ' ')
         << SchemaTypeName(p.type) << ", " << p.null_count
         << (p.null_count == 1 ? " null, " : " nulls, ")
         << FormatBytes(static_cast<double>(p.bytes)) << "\n";
    }
  }
  os << "build time   " << Fixed(i.build_seconds * 1000, 3) << " ms\n";
}

// Options of index build that exclude each other or are out of range: UsageFail.
void CheckBuildOptions(const BuildArgs& a) {
  if (!a.value.empty() && a.row_ids)
    UsageFail("index build: --value and --row-ids exclude each other");
  if (a.first_row != 0 && !a.value.empty()) UsageFail("index build: --first-row needs --row-ids");
  if (a.capacity != 0 && a.load_factor != 0) {
    UsageFail("index build: --capacity and --load-factor exclude each other");
  }
  if (a.capacity != 0 && (a.capacity & (a.capacity - 1)) != 0) {
    UsageFail(absl::StrCat("index build: --capacity must be a power of two, got ", a.capacity));
  }
  if (a.max_load_factor < 0 || a.max_load_factor > 1) {
    UsageFail(absl::StrCat("index build: --max-load-factor must be in (0, 1], got ",
                           Fixed(a.max_load_factor, 3)));
  }
  if (a.load_factor < 0 || a.load_factor > 1) {
    UsageFail(absl::StrCat("index build: --load-factor must be in (0, 1], got ",
                           Fixed(a.load_factor, 3)));
  }
}

// What a build says: the index, its source and its health verdict (--json: one
// document; --quiet: the warnings only, on stderr).
void ReportBuild(const Globals& g, const BuildArgs& a, TableReader& input, const KeyPlan& key,
                 const PayloadPlan& plan, const client::IndexInfo& info) {
  const KeyKind key_kind = key.kind;
  for (const std::string& note : input.TakeNotes()) Note(g, note);
  const std::string& source_name = input.source();
  Verdict v = Judge(info, key_kind);
  if (g.json) {
    std::cout << Json{{"index", IndexJson(info)},
                      {"source", source_name},
                      {"key_kind", std::string(KeyKindName(key_kind))},
                      {"schema", FormatSchema(plan.schema)},
                      {"health", Json{{"verdict", v.level}, {"messages", v.messages}}}}
                     .dump(2)
              << '\n';
    return;
  }
  if (!g.quiet) {
    std::vector<std::string> types;
    for (client::ColumnType t : key.types) types.emplace_back(client::ColumnTypeName(t));
    std::cout << "built from " << source_name << " (key " << absl::StrJoin(key.columns, ",")
              << " as "
              << (key_kind == KeyKind::kColumns ? absl::StrJoin(types, ",")
                                                : std::string(KeyKindTypeName(key_kind)))
              << ", values "
              << (a.value.empty() ? absl::StrCat("row IDs from ", a.first_row)
                                  : absl::StrCat("column ", a.value))
              << ")\n";
    if (!plan.schema.empty()) std::cout << "schema       " << FormatSchema(plan.schema) << "\n";
    PrintIndex(std::cout, info);
    std::cout << "health       " << v.level << "\n";
    for (const auto& m : v.messages) std::cout << "  " << v.level << ": " << m << "\n";
  } else if (v.level == "warning") {
    for (const auto& m : v.messages) std::cerr << "gpujoin: warning: " << m << "\n";
  }
}

// A chunk that abandons the build with `error` (BuildChunk::error).
client::BuildChunk Abandon(const absl::Status& error) {
  client::BuildChunk chunk;
  chunk.error = error;
  return chunk;
}

}  // namespace

int CmdIndexBuild(const Globals& g, const BuildArgs& a) {
  CheckBuildOptions(a);
  const KeyTypeFlag flag = InputOrDie(ParseKeyTypeFlag(a.key_type));
  std::unique_ptr<TableReader> input = OpenInput(g, a.from);
  const std::string key = KeyColumnOf(a.key, *input, "index build");
  if (!a.value.empty()) RequireColumn(*input, a.value);
  // The first batch decides an inferred key type and the inferred payload
  // types; the second tells whether the file is larger than one batch.
  Table batch, next;
  bool have = InputOrDie(input->Next(&batch));
  if (!have) batch = input->EmptyTable();
  bool have_next = have && InputOrDie(input->Next(&next));
  const KeyPlan key_plan = InputOrDie(PlanKey(batch, SplitKeyColumns(key), flag));
  const PayloadPlan plan =
      InputOrDie(PlanPayload(batch, key, a.value, a.columns, a.schema, a.no_payload));
  const uint64_t first_rows = batch.rows.size();
  const std::string later_key = absl::StrCat(
      " (the key type was inferred from the first ", first_rows, " rows; give --key-type)");

  auto c = Connect(g);
  client::IndexSpec spec;
  spec.name = a.name;
  spec.capacity = a.capacity;
  if (a.capacity == 0) {
    // A file of one batch gives its rows; a larger one is sized by the server
    // from the rows it receives.
    spec.expected_rows = have_next ? 0 : batch.rows.size();
    spec.target_load_factor = a.load_factor;
  }
  spec.max_probe_count = a.max_probes;
  spec.first_value = a.first_row;
  spec.explicit_values = !a.value.empty();
  spec.replace = a.replace;
  spec.wait_durable = a.wait_durable;
  spec.max_load_factor = a.max_load_factor;
  spec.replicated = a.placement == "replicated";
  spec.key_type = WireKeyType(key_plan.kind);
  if (key_plan.kind == KeyKind::kColumns) spec.key_columns = key_plan.Schema();
  spec.duplicates = InputOrDie(client::ParseDuplicatePolicy(a.duplicates));
  for (const auto& e : plan.schema) spec.payload.push_back({e.name, e.type});

  // One chunk per batch: its keys, values and payload; the next batch is read
  // when the next chunk is asked for (the chunk borrows this one). A bad input
  // batch abandons the whole build (nothing is built from the rows before it).
  absl::Status input_error;
  KeyVector keys;
  std::vector<uint32_t> values;
  std::vector<client::Column> payload;
  bool first_chunk = true;
  auto source = [&]() -> std::optional<client::BuildChunk> {
    if (!first_chunk) {
      if (!have_next) return std::nullopt;
      batch = std::move(next);
      next = Table();
      auto more = input->Next(&next);
      if (!more.ok()) {
        input_error = more.status();
        return Abandon(input_error);
      }
      have_next = *more;
    }
    const bool later = !first_chunk;
    first_chunk = false;
    auto k = ReadKeys(batch, key_plan);
    if (!k.ok()) {
      input_error = absl::Status(k.status().code(), absl::StrCat(k.status().message(),
                                                                 later && flag.kind == KeyKind::kAuto
                                                                     ? later_key
                                                                     : std::string()));
      return Abandon(input_error);
    }
    keys = *std::move(k);
    values.clear();
    if (!a.value.empty()) {
      auto v = U32ValueColumn(batch, a.value);
      if (!v.ok()) {
        input_error = v.status();
        return Abandon(input_error);
      }
      values = *std::move(v);
    }
    payload.clear();
    for (size_t i = 0; i < plan.columns.size(); ++i) {
      auto col = PayloadColumn(batch, plan.columns[i], plan.schema[i], plan.from_schema[i]);
      if (!col.ok()) {
        input_error = col.status();
        if (later && !plan.from_schema[i]) {
          input_error = absl::Status(
              col.status().code(),
              absl::StrCat(col.status().message(), " (the type was inferred from the first ",
                           first_rows, " rows; give --schema ", plan.schema[i].name, ":TYPE)"));
        }
        return Abandon(input_error);
      }
      payload.push_back(*std::move(col));
    }
    client::BuildChunk chunk;
    chunk.keys = keys.keys();
    chunk.values = values;
    for (const auto& p : payload) chunk.payload.push_back(p.view());
    return chunk;
  };
  ProgressBar bar("upload " + a.name, ProgressEnabled(g));
  absl::StatusOr<client::IndexInfo> built = c->BuildIndex(
      spec, source,
      [&](const client::Progress& p) {
        bar.UpdateInput(p.rows_sent, input->bytes_read(), input->total_bytes());
      });
  bar.Done();
  if (!input_error.ok()) UsageFail(std::string(input_error.message()));
  if (!built.ok() && built.status().code() == absl::StatusCode::kAlreadyExists) {
    // The server names its field; the CLI's word for it is --replace.
    throw CliError{kExitRpc, absl::StrCat("index build ", a.name, ": ALREADY_EXISTS: index '",
                                          a.name,
                                          "' already exists; give --replace to rebuild it")};
  }
  client::IndexInfo info = RpcOrDie(std::move(built), absl::StrCat("index build ", a.name));
  ReportBuild(g, a, *input, key_plan, plan, info);
  return kExitOk;
}

int CmdIndexLs(const Globals& g) {
  auto c = Connect(g);
  std::vector<client::IndexInfo> list = RpcOrDie(c->ListIndexes(), "index ls");
  std::sort(list.begin(), list.end(), [](const auto& x, const auto& y) { return x.name < y.name; });
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
  t.AddColumn("key_type", ColumnKind::kString);
  t.AddColumn("duplicates", ColumnKind::kString);
  for (const auto& i : list) {
    t.rows.push_back({i.name, std::to_string(i.version), std::to_string(i.rows),
                      std::to_string(i.statistics.unique_keys), std::to_string(i.capacity),
                      Fixed(i.load_factor, 3), std::to_string(i.statistics.overflow_rows),
                      std::to_string(i.statistics.max_probes), std::to_string(i.device_bytes),
                      i.backend, std::string(client::KeyTypeName(i.key_type)),
                      std::string(client::DuplicatePolicyName(i.duplicates))});
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

int CmdIndexSave(const Globals& g, const std::string& name, const std::string& file) {
  auto c = Connect(g);
  client::SaveResult r = RpcOrDie(c->SaveIndex(name, file), absl::StrCat("index save ", name));
  if (g.json) {
    std::cout << Json{{"saved", name},
                      {"file", r.file},
                      {"bytes", r.bytes},
                      {"version", r.version},
                      {"seconds", r.seconds}}
                     .dump(2)
              << '\n';
  } else if (!g.quiet) {
    std::cout << "saved index " << name << " (version " << r.version << ") to " << r.file << " ("
              << FormatBytes(static_cast<double>(r.bytes)) << ")\n";
  }
  return kExitOk;
}

int CmdIndexLoad(const Globals& g, const std::string& name, const std::string& file,
                 bool replace) {
  auto c = Connect(g);
  client::IndexInfo info =
      RpcOrDie(c->LoadIndex(name, file, replace), absl::StrCat("index load ", name));
  if (g.json) {
    std::cout << Json{{"loaded", name},
                      {"file", file.empty() ? name + ".gjsnap" : file},
                      {"index", IndexJson(info)}}
                     .dump(2)
              << '\n';
  } else if (!g.quiet) {
    std::cout << "loaded index " << name << " (version " << info.version << ") from "
              << (file.empty() ? name + ".gjsnap" : file) << "\n";
  }
  return kExitOk;
}

int CmdIndexFiles(const Globals& g) {
  auto c = Connect(g);
  client::DataFiles files = RpcOrDie(c->ListFiles(), "index files");
  auto limit = [](uint64_t bytes) {
    return bytes == 0 ? std::string("no limit") : FormatBytes(static_cast<double>(bytes));
  };
  if (g.json) {
    Json a = Json::array();
    for (const auto& f : files.files) {
      a.push_back(Json{{"file", f.file},
                       {"bytes", f.bytes},
                       {"modified_unix_millis", f.modified_unix_millis},
                       {"index", f.index},
                       {"live", f.live}});
    }
    std::cout << Json{{"files", a},
                      {"snapshot_bytes", files.snapshot_bytes},
                      {"copy_bytes", files.copy_bytes},
                      {"max_copy_bytes", files.max_copy_bytes},
                      {"max_snapshot_bytes", files.max_snapshot_bytes}}
                     .dump(2)
              << '\n';
    return kExitOk;
  }
  ResultTable t;
  t.AddColumn("file", ColumnKind::kString);
  t.AddColumn("bytes", ColumnKind::kNumber);
  t.AddColumn("kind", ColumnKind::kString);
  t.AddColumn("index", ColumnKind::kString);
  for (const auto& f : files.files) {
    const std::string kind =
        f.index.empty() ? "copy" : (f.live ? "snapshot" : "snapshot (not live)");
    t.rows.push_back({f.file, std::to_string(f.bytes), kind, f.index});
  }
  EmitRows(g, Json::object(), t, "");
  if (!g.quiet) {
    std::cerr << "snapshots " << FormatBytes(static_cast<double>(files.snapshot_bytes))
              << ", copies " << FormatBytes(static_cast<double>(files.copy_bytes)) << " of "
              << limit(files.max_copy_bytes) << " (--max-copy-bytes); data dir limit "
              << limit(files.max_snapshot_bytes) << "\n";
  }
  return kExitOk;
}

int CmdIndexRmFile(const Globals& g, const std::string& file) {
  auto c = Connect(g);
  const uint64_t bytes = RpcOrDie(c->DeleteFile(file), absl::StrCat("index rm-file ", file));
  if (g.json) {
    std::cout << Json{{"deleted", file}, {"bytes", bytes}}.dump(2) << '\n';
  } else if (!g.quiet) {
    std::cout << "deleted " << file << " (" << FormatBytes(static_cast<double>(bytes)) << ")\n";
  }
  return kExitOk;
}

}  // namespace gpujoin::cli
