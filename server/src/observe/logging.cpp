#include "gpujoin/server/logging.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"

namespace gpujoin::server {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::mutex g_mu;
thread_local std::string t_prefix;
}  // namespace

void SetThreadLogPrefix(std::string_view prefix) { t_prefix = std::string(prefix); }

absl::StatusOr<LogLevel> ParseLogLevel(std::string_view name) {
  if (name == "debug") return LogLevel::kDebug;
  if (name == "info") return LogLevel::kInfo;
  if (name == "warning" || name == "warn") return LogLevel::kWarning;
  if (name == "error") return LogLevel::kError;
  return absl::InvalidArgumentError(absl::StrCat(
      "log-level: expected debug, info, warning or error, got \"", std::string(name), "\""));
}

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }

bool LogEnabled(LogLevel level) { return static_cast<int>(level) >= g_level.load(); }

void Log(LogLevel level, std::string_view message) {
  if (!LogEnabled(level)) return;
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const int millis = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char stamp[32];
  std::snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, millis);
  static constexpr char kLetters[] = {'D', 'I', 'W', 'E'};
  std::lock_guard<std::mutex> lock(g_mu);
  std::fprintf(stderr, "%s %c %s%.*s\n", stamp, kLetters[static_cast<int>(level)],
               t_prefix.c_str(), static_cast<int>(message.size()), message.data());
  std::fflush(stderr);
}

}  // namespace gpujoin::server
