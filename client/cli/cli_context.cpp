#include "cli_context.hpp"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "columns/key_columns.hpp"
#include "output/progress.hpp"
#include "output/row_writer.hpp"

namespace gpujoin::cli {
namespace {

std::atomic<bool> g_interrupted{false};

extern "C" void OnSigint(int) {
  if (g_interrupted.exchange(true)) _exit(130);
}

std::string TrimLine(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  while (!s.empty() && s.front() == ' ') s.erase(s.begin());
  return s;
}

}  // namespace

void UsageFail(std::string message) { throw CliError{kExitUsage, std::move(message)}; }

void RpcFail(const absl::Status& s, std::string_view what) {
  throw CliError{kExitRpc, absl::StrCat(std::string(what), ": ", absl::StatusCodeToString(s.code()),
                                        ": ", std::string(s.message()))};
}

void InstallSigintHandler() { std::signal(SIGINT, OnSigint); }
bool Interrupted() { return g_interrupted.load(); }

std::unique_ptr<client::Client> Connect(const Globals& g) {
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
  o.tls_client_cert_file = g.tls_client_cert;
  o.tls_client_key_file = g.tls_client_key;
  if (g.timeout_s < 0) UsageFail("--timeout must not be negative");
  o.deadline = std::chrono::milliseconds(static_cast<int64_t>(g.timeout_s * 1000));
  // The server's default message limit: a join answer it splits into messages
  // (continuation) arrives in parts of up to this size.
  o.max_message_bytes = 256 << 20;
  auto c = client::Client::Connect(o);
  if (!c.ok()) UsageFail(std::string(c.status().message()));
  return *std::move(c);
}

client::StreamOptions Streaming(const Globals& g) {
  client::StreamOptions s;
  s.max_in_flight = g.in_flight;
  s.cancelled = [] { return Interrupted(); };
  return s;
}

Table Load(const Globals& g, const std::string& path) {
  InputFormat f = InputOrDie(ParseInputFormat(g.input_format));
  return InputOrDie(ReadTable(path, f));
}

std::unique_ptr<TableReader> OpenInput(const Globals& g, const std::string& path) {
  TableReader::Options o;
  o.format = InputOrDie(ParseInputFormat(g.input_format));
  o.batch_rows = g.batch_rows;
  return InputOrDie(TableReader::Open(path, o));
}

absl::StatusOr<std::string> SpoolStdin() {
  const char* dir = std::getenv("TMPDIR");
  std::string path = absl::StrCat(dir != nullptr && *dir ? dir : "/tmp", "/gpujoin-stdin-XXXXXX");
  const int fd = ::mkstemp(path.data());
  if (fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("<stdin>: cannot make a temporary file in ", path, ": ", std::strerror(errno)));
  }
  std::vector<char> buf(1 << 20);
  for (;;) {
    const ssize_t r = ::read(STDIN_FILENO, buf.data(), buf.size());
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      ::close(fd);
      std::remove(path.c_str());
      return absl::InvalidArgumentError(absl::StrCat("<stdin>: read error: ", std::strerror(errno)));
    }
    if (r == 0) break;
    for (ssize_t done = 0; done < r;) {
      const ssize_t w = ::write(fd, buf.data() + done, static_cast<size_t>(r - done));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        ::close(fd);
        std::remove(path.c_str());
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": write error: ", std::strerror(errno)));
      }
      done += w;
    }
  }
  ::close(fd);
  return path;
}

std::string KeyColumnOf(const std::string& flag, const TableReader& input,
                        std::string_view command, std::string_view option) {
  std::string key = flag;
  if (key.empty()) {
    const InputFormat f = input.format();
    if (f != InputFormat::kU32 && f != InputFormat::kU64 && f != InputFormat::kI64) {
      UsageFail(absl::StrCat(std::string(command), ": ", std::string(option), " COL is required for ",
                             input.source(),
                             " (only .u32, .u64 and .i64 files have a default key column)"));
    }
    key = "key";
  }
  for (const std::string& name : SplitKeyColumns(key)) RequireColumn(input, name);
  return key;
}

void RequireColumn(const TableReader& input, std::string_view name) {
  (void)InputOrDie(input.EmptyTable().Column(name));
}

std::vector<ColumnKind> InputKinds(const Table& batch) {
  std::vector<ColumnKind> kinds(batch.header.size(), ColumnKind::kString);
  for (size_t c = 0; c < batch.cell_kinds.size() && c < kinds.size(); ++c) {
    kinds[c] = KindOfCells(batch.cell_kinds[c]);
  }
  return kinds;
}

bool ProgressEnabled(const Globals& g) { return !g.quiet && !g.json && StderrIsTerminal(); }

void Note(const Globals& g, const std::string& line) {
  if (!g.quiet && !g.json) std::cerr << line << '\n';
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

std::string Percent(uint64_t part, uint64_t whole) {
  return whole ? Fixed(100.0 * static_cast<double>(part) / static_cast<double>(whole), 2) + "%"
               : "n/a";
}

void EmitRows(const Globals& g, Json summary, const ResultTable& rows, const std::string& out) {
  RowWriter w(g, out);
  w.Begin(rows);
  w.WriteAll(rows);
  w.Finish(std::move(summary));
}

ResultTable StartFrom(const Table& t) {
  ResultTable r;
  const std::vector<ColumnKind> kinds = InputKinds(t);
  for (size_t c = 0; c < t.header.size(); ++c) r.AddColumn(t.header[c], kinds[c]);
  return r;
}

Json BuildStatsJson(const client::BuildStatistics& s) {
  return Json{{"unique_keys", s.unique_keys},      {"duplicate_rows", s.duplicate_rows},
              {"overflow_rows", s.overflow_rows},  {"invalid_rows", s.invalid_rows},
              {"total_probes", s.total_probes},    {"max_probes", s.max_probes},
              {"max_group_rows", s.max_group_rows}};
}

Json StatsJson(const client::QueryStatistics& s) {
  return Json{{"found", s.found},
              {"missing", s.missing},
              {"total_probes", s.total_probes},
              {"max_probes", s.max_probes}};
}

std::string StatsLine(const client::QueryStatistics& s) {
  const uint64_t n = s.found + s.missing;
  return absl::StrCat(s.found, " of ", n, " keys found (", Percent(s.found, n), "), avg probes ",
                      n ? Fixed(static_cast<double>(s.total_probes) / static_cast<double>(n), 2)
                        : std::string("0"),
                      ", max ", s.max_probes);
}

}  // namespace gpujoin::cli
