#include "output/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "output/output.hpp"

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

// "[====      ]  42% " for a fraction done in [0, 1].
std::string Bar(double fraction) {
  const double f = std::min(1.0, fraction);
  constexpr int kWidth = 24;
  const int filled = static_cast<int>(f * kWidth);
  char pct[16];
  std::snprintf(pct, sizeof(pct), "%3.0f%% ", f * 100);
  return "[" + std::string(filled, '=') + std::string(kWidth - filled, ' ') + "] " + pct;
}

std::string Eta(double seconds_left) {
  char eta[32];
  std::snprintf(eta, sizeof(eta), ", ETA %.0fs", seconds_left);
  return eta;
}

}  // namespace

bool StderrIsTerminal() { return isatty(STDERR_FILENO) == 1; }
bool StdoutIsTerminal() { return isatty(STDOUT_FILENO) == 1; }

ProgressBar::ProgressBar(std::string label, bool enabled)
    : label_(std::move(label)), enabled_(enabled), start_(std::chrono::steady_clock::now()) {}

ProgressBar::~ProgressBar() { Done(); }

std::string ProgressBar::Render(const std::string& label, uint64_t rows, uint64_t total_rows,
                                uint64_t bytes, double seconds) {
  const double r = static_cast<double>(rows);
  const double total = static_cast<double>(total_rows);
  std::string line = label + " ";
  if (total_rows > 0) {
    line += Bar(r / total) + Count(r) + "/" + Count(total) + " rows";
  } else {
    line += Count(r) + " rows";
  }
  line += ", " + FormatBytes(static_cast<double>(bytes));
  if (seconds > 0) {
    const double rate = r / seconds;
    line += ", " + Count(rate) + " rows/s";
    if (total_rows > rows && rate > 0) line += Eta((total - r) / rate);
  }
  return line;
}

std::string ProgressBar::RenderInput(const std::string& label, uint64_t rows, uint64_t bytes,
                                     uint64_t total_bytes, double seconds) {
  const double b = static_cast<double>(bytes);
  const double total = static_cast<double>(total_bytes);
  std::string line = label + " ";
  if (total_bytes > 0) {
    line += Bar(b / total) + FormatBytes(b) + "/" + FormatBytes(total);
  } else {
    line += FormatBytes(b);
  }
  line += ", " + Count(static_cast<double>(rows)) + " rows";
  if (seconds > 0) {
    line += ", " + Count(static_cast<double>(rows) / seconds) + " rows/s, " +
            FormatBytes(b / seconds) + "/s";
    if (total_bytes > bytes && bytes > 0) line += Eta((total - b) * seconds / b);
  }
  return line;
}

void ProgressBar::Draw(const std::string& line, std::chrono::steady_clock::time_point now) {
  last_draw_ = now;
  std::fprintf(stderr, "\r\033[K%s", line.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::UpdateInput(uint64_t rows, uint64_t bytes, uint64_t total_bytes) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  Draw(RenderInput(label_, rows, bytes, total_bytes,
                   std::chrono::duration<double>(now - start_).count()),
       now);
}

void ProgressBar::Update(uint64_t rows, uint64_t total_rows, uint64_t bytes) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - last_draw_ < std::chrono::milliseconds(100) && rows < total_rows) return;
  Draw(Render(label_, rows, total_rows, bytes, std::chrono::duration<double>(now - start_).count()),
       now);
}

void ProgressBar::Done() {
  if (!enabled_ || !drawn_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace gpujoin::cli
