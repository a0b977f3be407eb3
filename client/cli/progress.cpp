#include "progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "output.hpp"

namespace gpujoin::cli {
namespace {

std::string Count(double v) {
  char buf[32];
  if (v >= 1e9) {
    std::snprintf(buf, sizeof(buf), "%.2fG", v / 1e9);
  } else if (v >= 1e6) {
    std::snprintf(buf, sizeof(buf), "%.2fM", v / 1e6);
  } else if (v >= 1e4) {
    std::snprintf(buf, sizeof(buf), "%.1fk", v / 1e3);
  } else {
    std::snprintf(buf, sizeof(buf), "%.0f", v);
  }
  return buf;
}

}  // namespace

bool StderrIsTerminal() { return isatty(STDERR_FILENO) == 1; }
bool StdoutIsTerminal() { return isatty(STDOUT_FILENO) == 1; }

ProgressBar::ProgressBar(std::string label, bool enabled)
    : label_(std::move(label)), enabled_(enabled), start_(std::chrono::steady_clock::now()) {}

ProgressBar::~ProgressBar() { Done(); }

std::string ProgressBar::Render(const std::string& label, uint64_t rows, uint64_t total_rows,
                                uint64_t bytes, double seconds) {
  std::string line = label + " ";
  if (total_rows > 0) {
    const double f = std::min(1.0, static_cast<double>(rows) / static_cast<double>(total_rows));
    const int width = 24;
    const int filled = static_cast<int>(f * width);
    line += "[" + std::string(filled, '=') + std::string(width - filled, ' ') + "] ";
    char pct[16];
    std::snprintf(pct, sizeof(pct), "%3.0f%% ", f * 100);
    line += pct;
    line += Count(static_cast<double>(rows)) + "/" + Count(static_cast<double>(total_rows)) +
            " rows";
  } else {
    line += Count(static_cast<double>(rows)) + " rows";
  }
  line += ", " + FormatBytes(static_cast<double>(bytes));
  if (seconds > 0) {
    const double rate = static_cast<double>(rows) / seconds;
    line += ", " + Count(rate) + " rows/s";
    if (total_rows > rows && rate > 0) {
      char eta[32];
      std::snprintf(eta, sizeof(eta), ", ETA %.0fs", static_cast<double>(total_rows - rows) / rate);
      line += eta;
    }
  }
  return line;
}

std::string ProgressBar::RenderInput(const std::string& label, uint64_t rows, uint64_t bytes,
                                     uint64_t total_bytes, double seconds) {
  std::string line = label + " ";
  if (total_bytes > 0) {
    const double f = std::min(1.0, static_cast<double>(bytes) / static_cast<double>(total_bytes));
    const int width = 24;
    const int filled = static_cast<int>(f * width);
    line += "[" + std::string(filled, '=') + std::string(width - filled, ' ') + "] ";
    char pct[16];
    std::snprintf(pct, sizeof(pct), "%3.0f%% ", f * 100);
    line += pct;
    line += FormatBytes(static_cast<double>(bytes)) + "/" +
            FormatBytes(static_cast<double>(total_bytes));
  } else {
    line += FormatBytes(static_cast<double>(bytes));
  }
  line += ", " + Count(static_cast<double>(rows)) + " rows";
  if (seconds > 0) {
    line += ", " + Count(static_cast<double>(rows) / seconds) + " rows/s, " +
            FormatBytes(static_cast<double>(bytes) / seconds) + "/s";
    if (total_bytes > bytes && bytes > 0) {
      char eta[32];
      std::snprintf(eta, sizeof(eta), ", ETA %.0fs",
                    static_cast<double>(total_bytes - bytes) * seconds / static_cast<double>(bytes));
      line += eta;
    }
  }
  return line;
}

void ProgressBar::UpdateInput(uint64_t rows, uint64_t bytes, uint64_t total_bytes) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  const double seconds = std::chrono::duration<double>(now - start_).count();
  std::string line = RenderInput(label_, rows, bytes, total_bytes, seconds);
  std::fprintf(stderr, "\r\033[K%s", line.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::Update(uint64_t rows, uint64_t total_rows, uint64_t bytes) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - last_draw_ < std::chrono::milliseconds(100) && rows < total_rows) return;
  last_draw_ = now;
  const double seconds = std::chrono::duration<double>(now - start_).count();
  std::string line = Render(label_, rows, total_rows, bytes, seconds);
  std::fprintf(stderr, "\r\033[K%s", line.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::Done() {
  if (!enabled_ || !drawn_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace gpujoin::cli
