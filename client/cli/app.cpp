#include "app.hpp"

#include <CLI/CLI.hpp>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "commands.hpp"

namespace gpujoin::cli {
namespace {

// The arguments of every command, which parsing fills; the callback of the
// command given sets the runner to it.
struct CommandArgs {
  std::string health_service;
  BuildArgs build;
  MutateArgs upsert, del;
  std::string describe_name, drop_name;
  std::string save_name, save_file, load_name, load_file;
  bool load_replace = false;
  std::string rm_file;
  LookupArgs lookup;
  JoinArgs join;
  AggArgs agg;
  HashArgs hash;
  QueryArgs query;
};
using Runner = std::function<int()>;

// The options every command takes.
void AddGlobalOptions(CLI::App& app, Globals& g) {
  app.add_option("--server", g.server, "server address host:port")
      ->envname("GPUJOIN_SERVER")
      ->capture_default_str();
  app.add_option("--token", g.token, "bearer token")->envname("GPUJOIN_TOKEN");
  app.add_option("--token-file", g.token_file,
                 "file holding the bearer token (takes precedence over --token)");
  app.add_option("--tls-ca", g.tls_ca,
                 "PEM file of the CA that signs the server certificate (enables TLS)");
  app.add_option("--tls-server-name", g.tls_server_name,
                 "name to check against the server certificate (default: from --server)");
  app.add_option("--tls-client-cert", g.tls_client_cert,
                 "PEM certificate chain to present to a server that requires client "
                 "certificates (mutual TLS); with --tls-client-key and --tls-ca");
  app.add_option("--tls-client-key", g.tls_client_key, "PEM private key of --tls-client-cert");
  app.add_option("--timeout", g.timeout_s, "deadline of each call in seconds (0 = none)")
      ->capture_default_str();
  app.add_flag("--json", g.json, "machine-readable JSON output on stdout");
  app.add_flag("-q,--quiet", g.quiet, "no progress bars or notes");
  app.add_option("--format", g.input_format, "input format: auto, csv, tsv, jsonl, u32, u64, i64")
      ->capture_default_str();
  app.add_option("--batch-rows", g.batch_rows, "rows per request in streams and uploads")
      ->check(CLI::Range(size_t{1}, size_t{1} << 22))
      ->capture_default_str();
  app.add_option("--in-flight", g.in_flight, "batches in flight per stream")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
}

// --key-type of the commands that read keys (docs/cli.md, "Key types"); the
// command parses it (ParseKeyTypeFlag) before it reads anything.
void AddKeyType(CLI::App* cmd, std::string& value) {
  cmd->add_option("--key-type", value,
                  "auto (from the data: negative -> i64, above 2^32-1 -> u64, else u32; "
                  "text -> a string key), u32, u64, i64, str, or types per key column "
                  "(id:i64,sku:str; i32, i64, u32, u64, str, bin)")
      ->capture_default_str();
}

// health, info.
void AddServerCommands(CLI::App& app, const Globals& g, CommandArgs& args, Runner& run) {
  auto* health = app.add_subcommand("health", "check the server's grpc.health.v1 status");
  health->add_option("--service", args.health_service,
                     "service to check (default: the whole server; gpujoin.v1.GpuJoin)");
  health->callback([&] { run = [&] { return CmdHealth(g, args.health_service); }; });

  auto* info = app.add_subcommand("info", "server version, backend, device and memory");
  info->callback([&] { run = [&] { return CmdInfo(g); }; });
}

// index build|upsert|delete|ls|describe|drop|save|load|files|rm-file.
void AddIndexCommands(CLI::App& app, const Globals& g, CommandArgs& args, Runner& run) {
  auto* index = app.add_subcommand("index", "manage resident indexes");
  index->require_subcommand(1);
  auto* build = index->add_subcommand("build", "build (or --replace) an index from a file");
  build->add_option("NAME", args.build.name, "index name")->required();
  build
      ->add_option("--from", args.build.from,
                   "input file (CSV/TSV/JSONL/.u32/.u64/.i64, - = stdin)")
      ->required();
  build->add_option("--key", args.build.key,
                    "key column, or columns a,b (a composite key); integers or strings, see "
                    "--key-type; default for .u32/.u64/.i64: key");
  AddKeyType(build, args.build.key_type);
  auto* val = build->add_option("--value", args.build.value, "value column (uint32)");
  build->add_flag("--row-ids", args.build.row_ids, "values are row numbers (the default)")
      ->excludes(val);
  build->add_option("--first-row", args.build.first_row, "value of the first row with --row-ids");
  auto* cap = build->add_option("--capacity", args.build.capacity, "table slots, a power of two");
  build
      ->add_option("--load-factor", args.build.load_factor,
                   "target load factor when the server picks the capacity (default 0.5)")
      ->excludes(cap);
  build->add_option("--max-probes", args.build.max_probes, "probe bound per key (0 = capacity)");
  build->add_flag("--replace", args.build.replace, "atomically replace a live index of that name");
  build->add_option("--columns", args.build.columns,
                    "payload columns stored beside the index (default: every column but the key "
                    "and --value)");
  build->add_option("--schema", args.build.schema,
                    "payload types, e.g. a:i64,b:f64,c:str (i32 u32 i64 u64 f32 f64 bool str bin; "
                    "default: inferred from the data)");
  build->add_flag("--no-payload", args.build.no_payload, "store no payload columns");
  build
      ->add_option("--duplicates", args.build.duplicates,
                   "rows of a repeated key: lowest_row (the first row wins) or keep_all (every "
                   "row is kept: one-to-many joins)")
      ->check(CLI::IsMember({"lowest_row", "keep_all"}))
      ->capture_default_str();
  build->add_flag("--wait-durable", args.build.wait_durable,
                  "answer only once the index's snapshot is written and fsync'd (a server with "
                  "--data-dir; fails if the write fails)");
  build->add_option("--max-load-factor", args.build.max_load_factor,
                    "load factor past which `index upsert` grows the table (0 < f <= 1; default "
                    "the server's, 0.8)");
  build
      ->add_option("--placement", args.build.placement,
                   "through gpujoin-router or gpujoind --devices: partitioned (each shard holds "
                   "its keys) or replicated (every shard holds every row; a lookup or join batch "
                   "runs whole on one of them)")
      ->check(CLI::IsMember({"partitioned", "replicated"}))
      ->capture_default_str();
  build->callback([&] { run = [&] { return CmdIndexBuild(g, args.build); }; });

  auto* upsert = index->add_subcommand(
      "upsert", "insert or update rows of a live index from a file (its other columns: payload)");
  upsert->add_option("NAME", args.upsert.name, "index name")->required();
  upsert
      ->add_option("--from", args.upsert.from,
                   "input file (CSV/TSV/JSONL/.u32/.u64/.i64, - = stdin)")
      ->required();
  upsert->add_option("--key", args.upsert.key,
                     "key column, or columns a,b (one per key column of the index); see "
                     "--key-type; default for .u32/.u64/.i64: key");
  AddKeyType(upsert, args.upsert.key_type);
  upsert->add_option("--value", args.upsert.value,
                     "value column (uint32): required for an index built with --value, refused "
                     "for a row-ID index (its new rows get the next row IDs)");
  upsert->callback([&] { run = [&] { return CmdIndexUpsert(g, args.upsert); }; });

  auto* del = index->add_subcommand("delete", "delete the keys of a file from a live index");
  del->add_option("NAME", args.del.name, "index name")->required();
  del->add_option("--from", args.del.from, "input file (CSV/TSV/JSONL/.u32/.u64/.i64, - = stdin)")
      ->required();
  del->add_option("--key", args.del.key,
                  "key column, or columns a,b (one per key column of the index); see --key-type; "
                  "default for .u32/.u64/.i64: key");
  AddKeyType(del, args.del.key_type);
  del->callback([&] { run = [&] { return CmdIndexDelete(g, args.del); }; });

  auto* ls = index->add_subcommand("ls", "list resident indexes");
  ls->callback([&] { run = [&] { return CmdIndexLs(g); }; });

  auto* describe = index->add_subcommand("describe", "show one index");
  describe->add_option("NAME", args.describe_name, "index name")->required();
  describe->callback([&] { run = [&] { return CmdIndexDescribe(g, args.describe_name); }; });

  auto* drop = index->add_subcommand("drop", "drop an index and free its memory");
  drop->add_option("NAME", args.drop_name, "index name")->required();
  drop->callback([&] { run = [&] { return CmdIndexDrop(g, args.drop_name); }; });
  auto* save = index->add_subcommand(
      "save", "write an index to a snapshot file under the server's --data-dir");
  save->add_option("NAME", args.save_name, "index name")->required();
  save->add_option("--file", args.save_file,
                   "file name under --data-dir (default NAME.gjsnap, the one loaded at start)");
  save->callback([&] { run = [&] { return CmdIndexSave(g, args.save_name, args.save_file); }; });
  auto* load = index->add_subcommand(
      "load", "load an index from a snapshot file under the server's --data-dir");
  load->add_option("NAME", args.load_name, "index name")->required();
  load->add_option("--file", args.load_file, "file name under --data-dir (default NAME.gjsnap)");
  load->add_flag("--replace", args.load_replace, "replace a live index of that name");
  load->callback([&] {
    run = [&] { return CmdIndexLoad(g, args.load_name, args.load_file, args.load_replace); };
  });
  auto* files = index->add_subcommand(
      "files", "list the snapshots and copies under the server's --data-dir, with their sizes");
  files->callback([&] { run = [&] { return CmdIndexFiles(g); }; });
  auto* rm = index->add_subcommand(
      "rm-file", "delete a copy (or the snapshot of an index that is not live) under --data-dir");
  rm->add_option("FILE", args.rm_file, "file name, as `gpujoin index files` lists it")->required();
  rm->callback([&] { run = [&] { return CmdIndexRmFile(g, args.rm_file); }; });
}

// lookup, join, agg and hash: the commands that stream a file.
void AddQueryCommands(CLI::App& app, const Globals& g, CommandArgs& args, Runner& run) {
  auto* lookup = app.add_subcommand(
      "lookup", "append each row's matched value, a found flag and --select payload columns");
  lookup->add_option("NAME", args.lookup.name, "index name")->required();
  lookup->add_option("--from", args.lookup.from, "input file")->required();
  lookup->add_option("--key", args.lookup.key,
                     "key column, or columns a,b (one per key column of the index); see "
                     "--key-type; default for .u32/.u64/.i64: key");
  AddKeyType(lookup, args.lookup.key_type);
  lookup->add_option("--select", args.lookup.select,
                     "payload columns of the index to append, e.g. type,site");
  lookup->add_option("--out", args.lookup.out, "output file (.csv, .tsv, .jsonl; default stdout)");
  lookup->add_option("--max-probes", args.lookup.max_probes,
                     "probe bound of this lookup (0 = the index's; at most its capacity): a key "
                     "further from its home slot is not found");
  lookup->callback([&] { run = [&] { return CmdLookup(g, args.lookup); }; });

  auto* join = app.add_subcommand(
      "join",
      "inner, left, semi or anti join: ad hoc (--left/--right) or against a resident index (NAME "
      "--left)");
  join->add_option("NAME", args.join.name, "resident index (omit for an ad-hoc join)");
  join->add_option("--left", args.join.left, "left (probe) file")->required();
  join->add_option("--right", args.join.right,
                   "right (build) file, or index:NAME to join a resident index and append its "
                   "payload columns");
  join->add_option("--select", args.join.select,
                   "payload columns to append (resident joins; with --right index:NAME default "
                   "all)");
  join->add_option("--on", args.join.on,
                   "join column: COL or LEFTCOL=RIGHTCOL; several for a composite key: a,b or "
                   "a=x,b=y")
      ->required();
  AddKeyType(join, args.join.key_type);
  join->add_option("--out", args.join.out, "output file (.csv, .tsv, .jsonl; default stdout)");
  join->add_option("--capacity", args.join.capacity, "most output rows (0 = no bound)");
  join->add_option("--how", args.join.how,
                   "inner (matching pairs), left (every left row; unmatched with empty right "
                   "cells), semi (left rows with a match, once) or anti (left rows without one)")
      ->check(CLI::IsMember({"inner", "left", "semi", "anti"}))
      ->capture_default_str();
  join->add_option("--right-duplicates", args.join.right_duplicates,
                   "ad hoc: rows of a repeated right key: keep_all (default: each joins, as in "
                   "SQL) or lowest_row (only the first joins)")
      ->check(CLI::IsMember({"lowest_row", "keep_all"}));
  join->add_option("--max-probes", args.join.max_probes,
                   "probe bound of this join (0 = the index's; at most its capacity): a key "
                   "further from its home slot does not match");
  join->callback([&] { run = [&] { return CmdJoin(g, args.join); }; });

  auto* agg = app.add_subcommand("agg", "grouped count/sum/min/max/mean");
  agg->add_option("--from", args.agg.from, "input file")->required();
  agg->add_option("--group", args.agg.group, "group column (dense uint32, or any labels)")
      ->required();
  agg->add_option("--op", args.agg.op, "count, sum, min, max or mean")->required();
  agg->add_option("--value", args.agg.value, "value column for sum/min/max/mean");
  agg->add_option("--value-type", args.agg.value_type,
                  "auto (integers: exact int64 sums, uint64 above INT64_MAX; decimals: "
                  "float64), float32 (the reference path), float64, int32, int64, uint32 or "
                  "uint64")
      ->capture_default_str();
  agg->add_option("--where-mask", args.agg.where_mask,
                  "include only rows where this column is nonzero/true");
  agg->add_option("--out", args.agg.out, "output file (.csv, .tsv, .jsonl; default stdout)");
  agg->callback([&] { run = [&] { return CmdAgg(g, args.agg); }; });

  auto* hash = app.add_subcommand("hash", "append a row hash of one or more columns");
  hash->add_option("--from", args.hash.from, "input file")->required();
  hash->add_option("--cols", args.hash.cols,
                   "columns a,b[:type] (types: uint32 int32 uint64 int64 "
                   "float32 float64 string)")
      ->required();
  hash->add_option("--bits", args.hash.bits, "32 or 64")->capture_default_str();
  hash->add_option("--out", args.hash.out, "output file (.csv, .tsv, .jsonl; default stdout)");
  hash->callback([&] { run = [&] { return CmdHash(g, args.hash); }; });
}

// query: a plan the server runs on a file's rows in one round trip.
void AddQueryPlanCommand(CLI::App& app, const Globals& g, CommandArgs& args, Runner& run) {
  auto* query = app.add_subcommand(
      "query",
      "run a plan on a file's rows in one round trip: lookups, --where, --group-by/--agg, "
      "--project, --limit (in that order)");
  QueryArgs& q = args.query;
  query->add_option("--from", q.from, "input file")->required();
  // --lookup and the flags that apply to the --lookup before it keep their
  // command-line order: each occurrence is recorded as it is parsed.
  auto ordered = [&q](const char* flag) {
    return [&q, flag](const std::string& value) { q.lookups.push_back({flag, value}); };
  };
  query
      ->add_option_function<std::string>(
          "--lookup", ordered("--lookup"),
          "INDEX:COL looks the key in column COL up in index INDEX; INDEX:COL1,COL2 a composite "
          "key (in the index's order); INDEX:KEY=COL,... names each key column; bare INDEX: the "
          "columns named as the index's key columns. Repeatable")
      ->trigger_on_parse();
  query
      ->add_option_function<std::string>(
          "--select", ordered("--select"),
          "payload columns the --lookup before it adds (default: all; '' for none)")
      ->trigger_on_parse();
  query
      ->add_option_function<std::string>("--prefix", ordered("--prefix"),
                                         "prefix of the columns the --lookup before it adds")
      ->trigger_on_parse();
  query
      ->add_option_function<std::string>(
          "--how", ordered("--how"),
          "join kind of the --lookup before it: inner (default; rows with a match), left (every "
          "row), semi (rows with a match, once) or anti (rows without one)")
      ->trigger_on_parse();
  query
      ->add_option_function<std::string>(
          "--where", [&q](const std::string& expr) { q.where.push_back(expr); },
          "keep the rows where EXPR is true, e.g. 'latency_ms > 2 and type is not null' (the "
          "server's filter grammar; repeatable: each is a step)")
      ->trigger_on_parse();
  query->add_option("--group-by", q.group_by, "group by these columns (a,b)");
  query->add_option("--agg", q.agg,
                    "measures: count(), count(col), sum(col), min(col), max(col), mean(col) or "
                    "avg(col), each optionally 'as NAME' (default with --group-by: count())");
  query->add_option("--project", q.project, "keep these columns in this order, a,b=new_name");
  query->add_option("--limit", q.limit, "keep the first N result rows");
  query->add_option("--schema", q.schema,
                    "types of input columns, e.g. sensor_id:u64,site:str (i32 u32 i64 u64 f32 f64 "
                    "bool str bin; default: from the lookups' keys, else inferred from the first "
                    "batch)");
  query->add_option("--out", q.out, "output file (.csv, .tsv, .jsonl; default stdout)");
  query->callback([&] { run = [&] { return CmdQuery(g, args.query); }; });
}

}  // namespace

int RunCli(int argc, char** argv) {
  CLI::App app{
      "gpujoin: command-line client of the gpujoind GPU hash-index service.\n"
      "Exit codes: 0 ok, 1 server/RPC error, 2 usage or input error."};
  app.name("gpujoin");
  app.set_version_flag("--version", "gpujoin " GPUJOIN_VERSION);
  app.require_subcommand(1);
  app.fallthrough(true);
  Globals g;
  AddGlobalOptions(app, g);
  CommandArgs args;
  Runner run;
  AddServerCommands(app, g, args, run);
  AddIndexCommands(app, g, args, run);
  AddQueryCommands(app, g, args, run);
  AddQueryPlanCommand(app, g, args, run);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
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
  InstallSigintHandler();
  try {
    return run();
  } catch (const CliError& e) {
    std::cout.flush();
    if (Interrupted()) {
      std::cerr << "gpujoin: interrupted\n";
      return 130;
    }
    std::cerr << "gpujoin: " << e.message << '\n';
    return e.code;
  }
}

}  // namespace gpujoin::cli
