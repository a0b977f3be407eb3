// Minimal leveled logging for gpujoind: one line per message on stderr, with a
// UTC timestamp and a level letter. Thread-safe.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"

namespace gpujoin::server {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

/// Parses "debug" | "info" | "warning" (or "warn") | "error".
absl::StatusOr<LogLevel> ParseLogLevel(std::string_view name);

/// Messages below `level` are dropped. Default: kInfo.
void SetLogLevel(LogLevel level);
bool LogEnabled(LogLevel level);

/// Writes one line "2026-01-01T00:00:00.000Z I message" to stderr (flushed),
/// the calling thread's prefix (SetThreadLogPrefix) before the message.
void Log(LogLevel level, std::string_view message);

/// Text put before every message this thread logs ("" = none): a device
/// group's part, "device 1: ", on the thread that starts it.
void SetThreadLogPrefix(std::string_view prefix);

inline void LogDebug(std::string_view m) { Log(LogLevel::kDebug, m); }
inline void LogInfo(std::string_view m) { Log(LogLevel::kInfo, m); }
inline void LogWarning(std::string_view m) { Log(LogLevel::kWarning, m); }
inline void LogError(std::string_view m) { Log(LogLevel::kError, m); }

}  // namespace gpujoin::server
