// What every gpujoin command shares: the global options, the error exits
// (exit code + one line), connecting, reading inputs, and emitting results.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "app.hpp"
#include "gpujoin/client/client.hpp"
#include "input/table.hpp"
#include "input/table_reader.hpp"
#include "output/output.hpp"

namespace gpujoin::cli {

/// JSON documents keep their keys in insertion order.
using Json = nlohmann::ordered_json;

/// Thrown to end a command with an exit code and a one-line message.
struct CliError {
  int code;
  std::string message;
};

/// Ends the command with exit code 2 (usage or input error).
[[noreturn]] void UsageFail(std::string message);

/// Ends the command with exit code 1: "WHAT: GRPC_CODE: server message".
[[noreturn]] void RpcFail(const absl::Status& s, std::string_view what);

/// The value, or RpcFail with the status.
template <typename T>
T RpcOrDie(absl::StatusOr<T> v, std::string_view what) {
  if (!v.ok()) RpcFail(v.status(), what);
  return *std::move(v);
}

/// The value, or UsageFail with the status message (which names the position).
template <typename T>
T InputOrDie(absl::StatusOr<T> v) {
  if (!v.ok()) UsageFail(std::string(v.status().message()));
  return *std::move(v);
}

/// Installs the SIGINT handler: the first Ctrl-C sets Interrupted() (streams
/// stop between batches), a second exits with 130 at once.
void InstallSigintHandler();
/// True after a Ctrl-C.
bool Interrupted();

/// The global options (see docs/cli.md).
struct Globals {
  std::string server = "127.0.0.1:50051";
  std::string token;
  std::string token_file;
  std::string tls_ca;
  std::string tls_server_name;
  std::string tls_client_cert;
  std::string tls_client_key;
  double timeout_s = 0;
  bool json = false;
  bool quiet = false;
  std::string input_format = "auto";
  size_t batch_rows = 1 << 16;
  int in_flight = 4;
};

/// A client for the global options; bad options (token file, CA file) UsageFail.
std::unique_ptr<client::Client> Connect(const Globals& g);

/// Stream options from the globals, cancelled by Ctrl-C.
client::StreamOptions Streaming(const Globals& g);

/// Reads an input file in the --format; UsageFail on errors.
Table Load(const Globals& g, const std::string& path);

/// Opens an input file for reading in batches of --batch-rows rows in the
/// --format; UsageFail on errors (a bad header, an unsupported format).
std::unique_ptr<TableReader> OpenInput(const Globals& g, const std::string& path);

/// Copies standard input, as it is, to a new temporary file (for a command
/// that reads its input twice); its path, or INVALID_ARGUMENT on an I/O error.
absl::StatusOr<std::string> SpoolStdin();

/// The key columns `flag` names (--key: one column, or several separated by
/// commas, returned as given), or "key" for a .u32/.u64/.i64 file when it is
/// empty; UsageFail naming `option` (in `command`) for a text file without it,
/// or when the file lacks one of them.
std::string KeyColumnOf(const std::string& flag, const TableReader& input,
                        std::string_view command, std::string_view option = "--key");

/// UsageFail unless `input` has column `name` (the message lists the columns).
void RequireColumn(const TableReader& input, std::string_view name);

/// The rendering kinds of a batch's input columns (JSON Lines numbers stay numbers).
std::vector<ColumnKind> InputKinds(const Table& batch);

/// Progress bars only on a terminal, and not with --quiet or --json.
bool ProgressEnabled(const Globals& g);

/// A note line on stderr unless --quiet or --json.
void Note(const Globals& g, const std::string& line);

/// printf("%.*f").
std::string Fixed(double v, int digits);

/// "12.34%" of part/whole, "n/a" for an empty whole.
std::string Percent(uint64_t part, uint64_t whole);

/// Emits a row result: with --json one JSON document on stdout (`summary` plus
/// the rows inline, unless `out` is given); else the rows go to `out`, or to
/// stdout (aligned on a terminal for at most 200 rows, CSV otherwise).
void EmitRows(const Globals& g, Json summary, const ResultTable& rows, const std::string& out);

/// A result table starting with the columns of input table `t` (kinds from its cells).
ResultTable StartFrom(const Table& t);

/// Build statistics (of a build, or of an index after a mutation) as JSON.
Json BuildStatsJson(const client::BuildStatistics& s);

/// Query statistics as JSON / as one human line.
Json StatsJson(const client::QueryStatistics& s);
std::string StatsLine(const client::QueryStatistics& s);

}  // namespace gpujoin::cli
