#include "output/row_writer.hpp"

#include <cstring>
#include <iostream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "output/progress.hpp"

namespace gpujoin::cli {
namespace {

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

constexpr size_t kFlushBytes = 1 << 20;
constexpr uint64_t kAlignedMaxRows = 200;

}  // namespace

ColumnKind KindOfCells(CellKind kind) {
  return kind == CellKind::kText ? ColumnKind::kString : ColumnKind::kJson;
}

RowWriter::RowWriter(const Globals& g, const std::string& out) {
  if (!out.empty()) {
    json_summary_ = g.json;
    if (EndsWith(out, ".jsonl") || EndsWith(out, ".ndjson")) {
      mode_ = Mode::kJsonLines;
    } else if (EndsWith(out, ".tsv")) {
      mode_ = Mode::kTsv;
    } else {
      mode_ = Mode::kCsv;
    }
    if (out == "-") {
      file_ = stdout;
    } else {
      file_ = std::fopen(out.c_str(), "wb");
      if (file_ == nullptr) UsageFail(out + ": cannot open for writing");
      owns_file_ = true;
      path_ = out;
    }
    return;
  }
  file_ = stdout;
  if (g.json) {
    mode_ = Mode::kJsonDocument;
  } else if (StdoutIsTerminal()) {
    mode_ = Mode::kAligned;
  } else {
    mode_ = Mode::kCsv;
  }
}

RowWriter::~RowWriter() {
  if (owns_file_ && file_ != nullptr) {
    std::fclose(file_);
    if (!finished_) std::remove(path_.c_str());
  }
}

void RowWriter::Begin(std::vector<std::string> columns, std::vector<ColumnKind> kinds) {
  columns_ = std::move(columns);
  kinds_ = std::move(kinds);
  switch (mode_) {
    case Mode::kCsv:
    case Mode::kTsv: {
      std::vector<Cell> header(columns_.begin(), columns_.end());
      AppendDelimited(header, mode_ == Mode::kTsv ? '\t' : ',');
      break;
    }
    case Mode::kJsonDocument:
      buf_ += "{\n  \"columns\": ";
      buf_ += Json(columns_).dump();
      buf_ += ",\n  \"rows\": [";
      break;
    case Mode::kJsonLines:
    case Mode::kAligned:
      break;
  }
}

void RowWriter::SetLeadingKinds(const std::vector<ColumnKind>& kinds) {
  for (size_t c = 0; c < kinds.size() && c < kinds_.size(); ++c) kinds_[c] = kinds[c];
}

template <class Cells>
void RowWriter::AppendDelimited(const Cells& row, char delimiter) {
  for (size_t c = 0; c < row.size(); ++c) {
    if (c) buf_.push_back(delimiter);
    const auto& cell = row[c];
    if (!cell) continue;
    const std::string_view s = *cell;
    bool quote = s.empty() || s.front() == ' ' || s.back() == ' ';
    if (!quote) {
      for (char ch : s) {
        if (ch == delimiter || ch == '"' || ch == '\n' || ch == '\r') {
          quote = true;
          break;
        }
      }
    }
    if (!quote) {
      buf_ += s;
      continue;
    }
    buf_.push_back('"');
    for (char ch : s) {
      if (ch == '"') buf_.push_back('"');
      buf_.push_back(ch);
    }
    buf_.push_back('"');
  }
  buf_.push_back('\n');
}

void RowWriter::AppendJsonObject(const std::vector<Cell>& row) {
  Json o = Json::object();
  for (size_t c = 0; c < columns_.size() && c < row.size(); ++c) {
    o[columns_[c]] = CellToJson(row[c], kinds_[c]);
  }
  buf_ += o.dump();
}

void RowWriter::Write(const std::vector<Cell>& row) {
  switch (mode_) {
    case Mode::kCsv:
      AppendDelimited(row, ',');
      break;
    case Mode::kTsv:
      AppendDelimited(row, '\t');
      break;
    case Mode::kJsonLines:
      AppendJsonObject(row);
      buf_.push_back('\n');
      break;
    case Mode::kJsonDocument:
      buf_ += rows_ == 0 ? "\n    " : ",\n    ";
      AppendJsonObject(row);
      break;
    case Mode::kAligned:
      held_.push_back(row);
      if (held_.size() > kAlignedMaxRows) SpillAligned();
      break;
  }
  ++rows_;
  if (buf_.size() >= kFlushBytes) Flush();
}

void RowWriter::Write(const std::vector<CellView>& row) {
  if (mode_ == Mode::kCsv || mode_ == Mode::kTsv) {
    AppendDelimited(row, mode_ == Mode::kTsv ? '\t' : ',');
    ++rows_;
    if (buf_.size() >= kFlushBytes) Flush();
    return;
  }
  std::vector<Cell> cells;
  cells.reserve(row.size());
  for (const CellView& v : row) cells.push_back(v ? Cell(std::string(*v)) : std::nullopt);
  Write(cells);
}

void RowWriter::WriteAll(const ResultTable& t) {
  t.ForEachRow([&](const std::vector<Cell>& row) { Write(row); });
}

void RowWriter::SpillAligned() {
  mode_ = Mode::kCsv;
  std::vector<Cell> header(columns_.begin(), columns_.end());
  AppendDelimited(header, ',');
  for (const auto& row : held_) AppendDelimited(row, ',');
  held_.clear();
  held_.shrink_to_fit();
}

void RowWriter::Flush() {
  if (buf_.empty()) return;
  std::fwrite(buf_.data(), 1, buf_.size(), file_);
  buf_.clear();
}

void RowWriter::Finish(Json summary) {
  if (mode_ == Mode::kAligned) {
    ResultTable t;
    t.columns = columns_;
    t.kinds = kinds_;
    t.rows = std::move(held_);
    std::ostringstream os;
    WriteAligned(os, t);
    buf_ += os.str();
  }
  if (mode_ == Mode::kJsonDocument) {
    buf_ += rows_ == 0 ? "]" : "\n  ]";
    for (auto it = summary.begin(); it != summary.end(); ++it) {
      buf_ += ",\n  ";
      buf_ += Json(it.key()).dump();
      buf_ += ": ";
      buf_ += absl::StrReplaceAll(it.value().dump(2), {{"\n", "\n  "}});
    }
    buf_ += "\n}\n";
  }
  Flush();
  std::fflush(file_);
  const bool failed = std::ferror(file_) != 0;
  if (owns_file_) {
    const bool close_failed = std::fclose(file_) != 0;
    file_ = nullptr;
    if (failed || close_failed) UsageFail(path_ + ": write failed");
  } else if (failed) {
    UsageFail("<stdout>: write failed");
  }
  finished_ = true;
  if (json_summary_) {
    summary["out"] = path_.empty() ? std::string("-") : path_;
    summary["rows_written"] = rows_;
    std::cout << summary.dump(2) << '\n';
    std::cout.flush();
    if (!std::cout) UsageFail("<stdout>: write failed");
  }
}

}  // namespace gpujoin::cli
