#include "input/table_reader.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <future>
#include <mutex>
#include <thread>
#include <type_traits>
#include <variant>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "input/input_stream.hpp"

namespace gpujoin::cli {
namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  if (s.size() < suffix.size()) return false;
  for (size_t i = 0; i < suffix.size(); ++i) {
    char a = s[s.size() - suffix.size() + i];
    if (a >= 'A' && a <= 'Z') a = static_cast<char>(a - 'A' + 'a');
    if (a != suffix[i]) return false;
  }
  return true;
}

// The format an extension names; kAuto for none.
InputFormat FormatOfExtension(std::string_view path) {
  if (EndsWith(path, ".u32")) return InputFormat::kU32;
  if (EndsWith(path, ".u64")) return InputFormat::kU64;
  if (EndsWith(path, ".i64")) return InputFormat::kI64;
  if (EndsWith(path, ".jsonl") || EndsWith(path, ".ndjson")) return InputFormat::kJsonLines;
  if (EndsWith(path, ".tsv") || EndsWith(path, ".tab")) return InputFormat::kTsv;
  if (EndsWith(path, ".csv")) return InputFormat::kCsv;
  return InputFormat::kAuto;
}

// Sniff: a JSON object, else a tab-separated header without commas is TSV.
InputFormat SniffFormat(std::string_view data) {
  const size_t first = data.find_first_not_of(" \t\r\n\xEF\xBB\xBF");
  const size_t eol = data.find('\n');
  const std::string_view head = data.substr(0, eol == std::string_view::npos ? data.size() : eol);
  if (first != std::string_view::npos && data[first] == '{') return InputFormat::kJsonLines;
  if (head.find('\t') != std::string_view::npos && head.find(',') == std::string_view::npos) {
    return InputFormat::kTsv;
  }
  return InputFormat::kCsv;
}

bool IsBinary(InputFormat f) {
  return f == InputFormat::kU32 || f == InputFormat::kU64 || f == InputFormat::kI64;
}

size_t BinaryWidth(InputFormat f) { return f == InputFormat::kU32 ? 4 : 8; }

const char* BinaryName(InputFormat f) {
  return f == InputFormat::kU32 ? "u32" : f == InputFormat::kU64 ? "u64" : "i64";
}
const char* BinaryType(InputFormat f) {
  return f == InputFormat::kU32 ? "uint32" : f == InputFormat::kU64 ? "uint64" : "int64";
}

// One parsed piece of text, in file order.
struct Piece {
  std::variant<detail::DelimitedRecords, detail::JsonRecords> records;
  absl::Status read_error;  // the producer's (read or decompression) error, after the records
};

}  // namespace

class TableReader::Impl {
 public:
  Impl(std::string source, std::unique_ptr<InputStream> stream, InputFormat format,
       const Options& options)
      : source_(std::move(source)),
        stream_(std::move(stream)),
        format_(format),
        options_(options),
        delimited_(source_),
        json_(source_) {
    threads_ =
        options.threads > 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency());
    total_bytes_ = stream_->total_bytes();
  }

  ~Impl() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (producer_.joinable()) producer_.join();
  }

  // Reads the first block (format sniffing, the compressed-content check) and,
  // for text, starts the producer and reads the header or the first batch.
  absl::Status Start(std::string_view path, bool compressed) {
    std::string first;
    if (!IsBinary(format_) || compressed) {
      first.resize(64 << 10);
      size_t got = 0;
      while (got < first.size()) {
        auto r = stream_->Read(first.data() + got, first.size() - got);
        if (!r.ok()) return r.status();
        if (*r == 0) {
          eof_at_start_ = true;
          break;
        }
        got += *r;
      }
      first.resize(got);
      if (compressed) {
        const std::string bad = UnsupportedFormat(WithoutCompressionExtension(path), first);
        if (!bad.empty() && !IsBinary(format_)) {
          return absl::InvalidArgumentError(
              absl::StrCat(source_, ": unsupported format: ", bad, " (convert to CSV or JSONL)"));
        }
      }
      if (format_ == InputFormat::kAuto) format_ = SniffFormat(first);
    }
    if (IsBinary(format_)) {
      binary_carry_ = std::move(first);
      header_ = {"key"};
      return absl::OkStatus();
    }
    if (first.size() >= 3 && std::string_view(first).substr(0, 3) == "\xEF\xBB\xBF") {
      first.erase(0, 3);
    }
    producer_ =
        std::thread([this, carry = std::move(first)]() mutable { Produce(std::move(carry)); });
    if (format_ == InputFormat::kJsonLines) {
      // The first batch's keys are the columns.
      auto more = NextText(&first_batch_);
      if (!more.ok()) return more.status();
      have_first_batch_ = *more;
      json_.Freeze();
      header_ = json_.header();
      return absl::OkStatus();
    }
    while (!delimited_.have_header()) {
      auto got = NextPiece();
      if (!got.ok()) return got.status();
      if (!*got) break;
    }
    absl::Status st = delimited_.Finish();
    if (!st.ok()) return st;
    header_ = delimited_.header();
    return absl::OkStatus();
  }

  absl::StatusOr<bool> Next(Table* batch) {
    if (have_first_batch_) {
      have_first_batch_ = false;
      *batch = std::move(first_batch_);
      rows_read_ += batch->rows.size();
      return true;
    }
    absl::StatusOr<bool> more = IsBinary(format_) ? NextBinary(batch) : NextText(batch);
    if (more.ok() && *more) rows_read_ += batch->rows.size();
    return more;
  }

  Table EmptyTable() const {
    Table t = Start();
    t.header = header_;
    if (format_ == InputFormat::kJsonLines) json_.FinishBatch(&t);
    return t;
  }

  const std::string& source() const { return source_; }
  InputFormat format() const { return format_; }
  const std::vector<std::string>& header() const { return header_; }
  uint64_t bytes_read() const { return bytes_read_.load(std::memory_order_relaxed); }
  uint64_t total_bytes() const { return total_bytes_; }
  uint64_t rows_read() const { return rows_read_; }
  std::vector<std::string> TakeNotes() { return json_.TakeNotes(); }

 private:
  Table Start() const {
    Table t;
    t.source = source_;
    t.format = format_;
    t.binary_rows = IsBinary(format_);
    return t;
  }

  // ------------------------------------------------------------ binary

  absl::StatusOr<bool> NextBinary(Table* batch) {
    const size_t width = BinaryWidth(format_);
    const size_t want_rows = std::min<size_t>(options_.batch_rows, size_t{1} << 20);
    *batch = Start();
    batch->header = {"key"};
    header_ = batch->header;
    for (;;) {
      // Whole values of the carry first.
      const size_t have = binary_carry_.size() / width;
      const size_t take = std::min(have, options_.batch_rows - batch->rows.size());
      batch->rows.reserve(batch->rows.size() + take);
      for (size_t r = 0; r < take; ++r) {
        const auto* p = reinterpret_cast<const unsigned char*>(binary_carry_.data()) + width * r;
        uint64_t bits = 0;
        for (size_t b = 0; b < width; ++b) bits |= static_cast<uint64_t>(p[b]) << (8 * b);
        std::string text;
        if (format_ == InputFormat::kU32) {
          text = std::to_string(static_cast<uint32_t>(bits));
        } else if (format_ == InputFormat::kU64) {
          text = std::to_string(bits);
        } else {
          text = std::to_string(static_cast<int64_t>(bits));
        }
        batch->rows.push_back(Row{++binary_rows_, {std::move(text)}});
      }
      binary_carry_.erase(0, take * width);
      if (batch->rows.size() >= options_.batch_rows) return true;
      if (binary_eof_) {
        if (!binary_carry_.empty()) {
          const uint64_t size = binary_rows_ * width + binary_carry_.size();
          return absl::InvalidArgumentError(absl::StrCat(
              source_, ": size ", size, " bytes is not a multiple of ", width, " (.",
              BinaryName(format_), " files hold little-endian ", BinaryType(format_), " values)"));
        }
        return !batch->rows.empty();
      }
      const size_t at = binary_carry_.size();
      binary_carry_.resize(at + want_rows * width);
      auto r = stream_->Read(binary_carry_.data() + at, want_rows * width);
      if (!r.ok()) return r.status();
      binary_carry_.resize(at + *r);
      bytes_read_.store(stream_->bytes_consumed(), std::memory_order_relaxed);
      if (*r == 0) binary_eof_ = true;
    }
  }

  // ------------------------------------------------------------ text

  // The reader thread: reads blocks, cuts them after the last record boundary
  // (a newline outside quotes; JSON Lines: any newline) and hands each piece
  // to a parser task, at most threads_ + 1 pieces ahead of the consumer.
  void Produce(std::string carry) {
    const bool json = format_ == InputFormat::kJsonLines;
    const char delimiter = format_ == InputFormat::kTsv ? '\t' : ',';
    bool eof = eof_at_start_;
    bool in_quotes = false;
    size_t scanned = 0;   // carry[0, scanned) is scanned
    size_t boundary = 0;  // just after the last boundary newline in carry[0, scanned)
    uint64_t line = 1;
    absl::Status read_error;
    bytes_read_.store(stream_->bytes_consumed(), std::memory_order_relaxed);
    // Scans carry[scanned, end) for boundaries, stopping at the first one at
    // or past a piece's size (the pieces stay near piece_bytes). Pieces of
    // narrow rows are made smaller, to about 7/8 of a batch's rows by the last
    // piece's bytes per line, so that a batch can take whole pieces (NextText).
    const size_t max_piece = std::max<size_t>(1, options_.piece_bytes);
    size_t piece = max_piece;
    auto scan = [&] {
      const char* p = carry.data();
      const size_t end = carry.size();
      if (json) {
        const size_t from = std::max(scanned, piece - 1);
        if (from < end) {
          const void* nl = std::memchr(p + from, '\n', end - from);
          if (nl != nullptr) {
            boundary = static_cast<size_t>(static_cast<const char*>(nl) - p) + 1;
            scanned = boundary;
            return;
          }
        }
        if (scanned < end) {
          const void* nl = memrchr(p + scanned, '\n', end - scanned);
          if (nl != nullptr) boundary = static_cast<size_t>(static_cast<const char*>(nl) - p) + 1;
        }
        scanned = end;
        return;
      }
      // Jump from quote to quote: outside quotes every newline is a boundary.
      size_t i = scanned;
      while (i < end) {
        const void* qp = std::memchr(p + i, '"', end - i);
        const size_t q =
            qp != nullptr ? static_cast<size_t>(static_cast<const char*>(qp) - p) : end;
        if (!in_quotes && q > i) {
          const size_t from = std::max(i, piece - 1);
          if (from < q) {
            const void* nl = std::memchr(p + from, '\n', q - from);
            if (nl != nullptr) {
              boundary = static_cast<size_t>(static_cast<const char*>(nl) - p) + 1;
              scanned = boundary;
              return;
            }
          }
          const void* last = memrchr(p + i, '\n', std::min(from, q) - i);
          if (last != nullptr)
            boundary = static_cast<size_t>(static_cast<const char*>(last) - p) + 1;
        }
        if (q == end) break;
        in_quotes = !in_quotes;
        i = q + 1;
      }
      scanned = end;
    };
    scan();
    for (;;) {
      // Fill to a piece's size, or beyond while no boundary is found.
      while (!eof && (carry.size() < piece || boundary == 0)) {
        const size_t at = carry.size();
        const size_t want = piece;
        carry.resize(at + want);
        auto r = stream_->Read(carry.data() + at, want);
        if (!r.ok()) {
          carry.resize(at);
          read_error = r.status();
          eof = true;
          break;
        }
        carry.resize(at + *r);
        bytes_read_.store(stream_->bytes_consumed(), std::memory_order_relaxed);
        if (*r == 0) eof = true;
        scan();
        if (stopping()) return;
      }
      const size_t cut = boundary > 0 ? boundary : eof ? carry.size() : 0;
      if (cut > 0 || !read_error.ok()) {
        std::string text = carry.substr(0, cut);
        const uint64_t first_line = line;
        const auto lines = static_cast<uint64_t>(std::count(text.begin(), text.end(), '\n'));
        line += lines;
        if (lines > 0 && options_.batch_rows != SIZE_MAX) {
          const double per_line = static_cast<double>(text.size()) / static_cast<double>(lines);
          const double rows = static_cast<double>(options_.batch_rows) * 7 / 8;
          piece = static_cast<size_t>(std::clamp(
              rows * per_line, static_cast<double>(std::min<size_t>(max_piece, 64 << 10)),
              static_cast<double>(max_piece)));
        }
        carry.erase(0, cut);
        scanned -= cut;
        boundary = 0;
        scan();
        if (!Submit(std::move(text), first_line, json, delimiter, read_error)) return;
      }
      if (eof && carry.empty()) break;
      if (!read_error.ok()) break;
    }
    std::lock_guard<std::mutex> lock(mu_);
    produced_all_ = true;
    cv_.notify_all();
  }

  bool stopping() {
    std::lock_guard<std::mutex> lock(mu_);
    return stop_;
  }

  // Queues a parser task for `text`; false when the reader is closing.
  bool Submit(std::string text, uint64_t first_line, bool json, char delimiter,
              absl::Status read_error) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return stop_ || pending_.size() < static_cast<size_t>(threads_) + 1; });
    if (stop_) return false;
    const std::string* source = &source_;
    pending_.push_back(std::async(
        std::launch::async, [source, json, delimiter, first_line,
                             read_error = std::move(read_error), text = std::move(text)]() {
          Piece p;
          if (json) {
            p.records = detail::ParseJsonRecords(text, *source, first_line);
          } else {
            p.records = detail::ParseDelimitedRecords(text, delimiter, *source, first_line);
          }
          p.read_error = read_error;
          return p;
        }));
    cv_.notify_all();
    return true;
  }

  // Assembles the next piece's rows into rows_ (JSON: into json_rows_);
  // false when every piece was taken.
  absl::StatusOr<bool> NextPiece() {
    std::future<Piece> f;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return !pending_.empty() || produced_all_; });
      if (pending_.empty()) return false;
      f = std::move(pending_.front());
      pending_.pop_front();
    }
    cv_.notify_all();
    Piece p = f.get();
    absl::Status st;
    if (auto* d = std::get_if<detail::DelimitedRecords>(&p.records)) {
      st = delimited_.Add(std::move(*d), &rows_);
    } else {
      st = json_.Add(std::move(std::get<detail::JsonRecords>(p.records)), &json_table_);
      for (Row& r : json_table_.rows) rows_.push_back(std::move(r));
      json_table_.rows.clear();
    }
    if (!st.ok()) return st;
    if (!p.read_error.ok()) return p.read_error;
    return true;
  }

  absl::StatusOr<bool> NextText(Table* batch) {
    *batch = Start();
    if (format_ == InputFormat::kJsonLines) json_.BeginBatch();
    for (;;) {
      if (rows_pos_ < rows_.size()) {
        const size_t take =
            std::min(rows_.size() - rows_pos_, options_.batch_rows - batch->rows.size());
        if (batch->rows.empty() && rows_pos_ == 0 && take == rows_.size()) {
          batch->rows = std::move(rows_);
          rows_.clear();
        } else if (take < rows_.size() && rows_pos_ == 0 && !batch->rows.empty() &&
                   handed_out_ > 0 && format_ != InputFormat::kJsonLines) {
          // Past the first batch (whose rows decide an inferred key type) a
          // batch ends before a piece that does not fit it whole: the next
          // takes the piece's rows without moving them one by one. JSON Lines
          // counts cell kinds per batch as pieces arrive, so it fills batches.
          break;
        } else {
          const size_t want = batch->rows.size() + take;
          if (batch->rows.capacity() < want) {
            batch->rows.reserve(std::max(want, 2 * batch->rows.capacity()));
          }
          for (size_t i = 0; i < take; ++i) batch->rows.push_back(std::move(rows_[rows_pos_ + i]));
          rows_pos_ += take;
        }
        if (rows_pos_ >= rows_.size()) {
          rows_.clear();
          rows_pos_ = 0;
        }
        if (batch->rows.size() >= options_.batch_rows) break;
        continue;
      }
      auto got = NextPiece();
      if (!got.ok()) return got.status();
      if (!*got) break;
    }
    if (format_ == InputFormat::kJsonLines) {
      // Rows made before a key was first seen get its null.
      const size_t width = json_.header().size();
      for (Row& r : batch->rows) {
        if (r.cells.size() < width) r.cells.resize(width);
      }
      json_.FinishBatch(batch);
    } else {
      batch->header = header_;
    }
    if (!batch->rows.empty()) ++handed_out_;
    return !batch->rows.empty();
  }

  std::string source_;
  std::unique_ptr<InputStream> stream_;
  InputFormat format_;
  Options options_;
  int threads_ = 1;
  uint64_t total_bytes_ = 0;
  std::atomic<uint64_t> bytes_read_{0};
  uint64_t rows_read_ = 0;
  std::vector<std::string> header_;

  // binary
  std::string binary_carry_;
  uint64_t binary_rows_ = 0;
  bool binary_eof_ = false;

  // text: the producer and the pieces it queued
  bool eof_at_start_ = false;
  std::thread producer_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::future<Piece>> pending_;
  bool produced_all_ = false;
  bool stop_ = false;
  // the consumer's rows not yet handed out
  detail::DelimitedAssembler delimited_;
  detail::JsonAssembler json_;
  Table json_table_;
  std::vector<Row> rows_;
  size_t rows_pos_ = 0;
  uint64_t handed_out_ = 0;  // text batches made
  Table first_batch_;
  bool have_first_batch_ = false;
};

absl::StatusOr<std::unique_ptr<TableReader>> TableReader::Open(const std::string& path,
                                                               const Options& options) {
  const std::string source = path == "-" ? "<stdin>" : path;
  InputFormat format = options.format;
  if (format == InputFormat::kAuto) format = FormatOfExtension(WithoutCompressionExtension(path));
  // A raw key file's first bytes may be anything: no magic-byte checks.
  auto stream = InputStream::Open(path, /*sniff=*/!IsBinary(format));
  if (!stream.ok()) return stream.status();
  const bool decompressing = (*stream)->compression() != Compression::kNone;
  auto impl = std::make_unique<Impl>(source, *std::move(stream), format, options);
  absl::Status st = impl->Start(path, decompressing);
  if (!st.ok()) return st;
  return std::unique_ptr<TableReader>(new TableReader(std::move(impl)));
}

TableReader::TableReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TableReader::~TableReader() = default;

const std::string& TableReader::source() const { return impl_->source(); }
InputFormat TableReader::format() const { return impl_->format(); }
const std::vector<std::string>& TableReader::header() const { return impl_->header(); }
absl::StatusOr<bool> TableReader::Next(Table* batch) { return impl_->Next(batch); }
Table TableReader::EmptyTable() const { return impl_->EmptyTable(); }
uint64_t TableReader::bytes_read() const { return impl_->bytes_read(); }
uint64_t TableReader::total_bytes() const { return impl_->total_bytes(); }
uint64_t TableReader::rows_read() const { return impl_->rows_read(); }
std::vector<std::string> TableReader::TakeNotes() { return impl_->TakeNotes(); }

}  // namespace gpujoin::cli
