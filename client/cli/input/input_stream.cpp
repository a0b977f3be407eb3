#include "input/input_stream.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gpujoin::cli {
namespace {

bool EndsWithNoCase(std::string_view s, std::string_view suffix) {
  if (s.size() < suffix.size()) return false;
  for (size_t i = 0; i < suffix.size(); ++i) {
    char a = s[s.size() - suffix.size() + i];
    if (a >= 'A' && a <= 'Z') a = static_cast<char>(a - 'A' + 'a');
    if (a != suffix[i]) return false;
  }
  return true;
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.substr(0, prefix.size()) == prefix;
}

constexpr size_t kBlock = 1 << 20;

// The raw bytes of a file descriptor, with the first bytes kept for sniffing.
class RawFile {
 public:
  RawFile(int fd, bool owned, std::string source) : fd_(fd), owned_(owned), source_(source) {}
  ~RawFile() {
    if (owned_) ::close(fd_);
  }
  const std::string& source() const { return source_; }

  // Reads up to n bytes (the peeked ones first); 0 at the end.
  absl::StatusOr<size_t> Read(char* buf, size_t n) {
    if (peek_pos_ < peek_.size()) {
      const size_t k = std::min(n, peek_.size() - peek_pos_);
      std::memcpy(buf, peek_.data() + peek_pos_, k);
      peek_pos_ += k;
      if (peek_pos_ == peek_.size()) {
        peek_.clear();
        peek_.shrink_to_fit();
        peek_pos_ = 0;
      }
      return k;
    }
    for (;;) {
      const ssize_t r = ::read(fd_, buf, n);
      if (r >= 0) return static_cast<size_t>(r);
      if (errno == EINTR) continue;
      return absl::InvalidArgumentError(
          absl::StrCat(source_, ": read error: ", std::strerror(errno)));
    }
  }

  // The first up to `n` bytes, without consuming them.
  absl::StatusOr<std::string_view> Peek(size_t n) {
    while (peek_.size() < n) {
      const size_t at = peek_.size();
      peek_.resize(n);
      const ssize_t r = ::read(fd_, peek_.data() + at, n - at);
      if (r < 0 && errno == EINTR) {
        peek_.resize(at);
        continue;
      }
      if (r < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(source_, ": read error: ", std::strerror(errno)));
      }
      peek_.resize(at + static_cast<size_t>(r));
      if (r == 0) break;
    }
    return std::string_view(peek_.data(), std::min(n, peek_.size()));
  }

 private:
  int fd_;
  bool owned_;
  std::string source_;
  std::vector<char> peek_;
  size_t peek_pos_ = 0;
};

class PlainStream final : public InputStream {
 public:
  PlainStream(std::unique_ptr<RawFile> f, uint64_t total) : f_(std::move(f)) { total_ = total; }
  absl::StatusOr<size_t> Read(char* buf, size_t n) override {
    auto r = f_->Read(buf, n);
    if (r.ok()) consumed_ += *r;
    return r;
  }

 private:
  std::unique_ptr<RawFile> f_;
};

// gzip (and zlib) members one after another, as gunzip reads them.
class GzipStream final : public InputStream {
 public:
  GzipStream(std::unique_ptr<RawFile> f, uint64_t total) : f_(std::move(f)), in_(kBlock) {
    total_ = total;
    compression_ = Compression::kGzip;
    std::memset(&z_, 0, sizeof(z_));
    ok_ = inflateInit2(&z_, 15 + 32) == Z_OK;  // 32: detect the gzip or zlib header
  }
  ~GzipStream() override { inflateEnd(&z_); }

  absl::StatusOr<size_t> Read(char* buf, size_t n) override {
    if (!ok_) return absl::InternalError(absl::StrCat(f_->source(), ": zlib did not initialise"));
    z_.next_out = reinterpret_cast<Bytef*>(buf);
    z_.avail_out = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    while (z_.avail_out > 0) {
      if (z_.avail_in == 0 && !eof_) {
        auto r = f_->Read(in_.data(), in_.size());
        if (!r.ok()) return r.status();
        consumed_ += *r;
        if (*r == 0) {
          eof_ = true;
        } else {
          z_.next_in = reinterpret_cast<Bytef*>(in_.data());
          z_.avail_in = static_cast<uInt>(*r);
        }
      }
      if (z_.avail_in == 0 && eof_) {
        if (in_member_) {
          return absl::InvalidArgumentError(
              absl::StrCat(f_->source(), ": gzip data ends in the middle of a member (truncated)"));
        }
        break;
      }
      in_member_ = true;
      const int rc = inflate(&z_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        in_member_ = false;
        inflateReset(&z_);  // a next member may follow
        continue;
      }
      if (rc != Z_OK && rc != Z_BUF_ERROR) {
        return absl::InvalidArgumentError(absl::StrCat(
            f_->source(), ": not valid gzip data (", z_.msg ? z_.msg : "inflate failed", ")"));
      }
    }
    return n - z_.avail_out;
  }

 private:
  std::unique_ptr<RawFile> f_;
  std::vector<char> in_;
  z_stream z_;
  bool ok_ = false;
  bool eof_ = false;
  bool in_member_ = false;
};

// zstd frames one after another.
class ZstdStream final : public InputStream {
 public:
  ZstdStream(std::unique_ptr<RawFile> f, uint64_t total)
      : f_(std::move(f)), in_(ZSTD_DStreamInSize()), d_(ZSTD_createDStream()) {
    total_ = total;
    compression_ = Compression::kZstd;
  }
  ~ZstdStream() override { ZSTD_freeDStream(d_); }

  absl::StatusOr<size_t> Read(char* buf, size_t n) override {
    ZSTD_outBuffer out{buf, n, 0};
    while (out.pos < out.size) {
      if (input_.pos == input_.size && !eof_) {
        auto r = f_->Read(in_.data(), in_.size());
        if (!r.ok()) return r.status();
        consumed_ += *r;
        if (*r == 0) {
          eof_ = true;
        } else {
          input_ = ZSTD_inBuffer{in_.data(), *r, 0};
        }
      }
      if (input_.pos == input_.size && eof_) {
        if (in_frame_) {
          return absl::InvalidArgumentError(
              absl::StrCat(f_->source(), ": zstd data ends in the middle of a frame (truncated)"));
        }
        break;
      }
      const size_t rc = ZSTD_decompressStream(d_, &out, &input_);
      if (ZSTD_isError(rc)) {
        return absl::InvalidArgumentError(absl::StrCat(f_->source(), ": not valid zstd data (",
                                                       ZSTD_getErrorName(rc), ")"));
      }
      in_frame_ = rc != 0;
    }
    return out.pos;
  }

 private:
  std::unique_ptr<RawFile> f_;
  std::vector<char> in_;
  ZSTD_DStream* d_;
  ZSTD_inBuffer input_{nullptr, 0, 0};
  bool eof_ = false;
  bool in_frame_ = false;
};

}  // namespace

std::string_view CompressionName(Compression c) {
  switch (c) {
    case Compression::kNone:
      return "none";
    case Compression::kGzip:
      return "gzip";
    case Compression::kZstd:
      return "zstd";
  }
  return "?";
}

std::string UnsupportedFormat(std::string_view path, std::string_view head) {
  struct Known {
    const char* name;
    std::string_view magic;
    std::initializer_list<const char*> extensions;
  };
  static const Known kKnown[] = {
      {"parquet", std::string_view("PAR1", 4), {".parquet", ".pq"}},
      {"arrow", std::string_view("ARROW1", 6), {".arrow", ".feather", ".ipc", ".arrows"}},
      {"orc", std::string_view("ORC", 3), {".orc"}},
      {"avro", std::string_view("Obj\x01", 4), {".avro"}},
      {"xlsx", std::string_view("PK\x03\x04", 4), {".xlsx", ".xls", ".zip", ".ods"}},
      {"bzip2", std::string_view("BZh", 3), {".bz2"}},
      {"xz", std::string_view("\xFD" "7zXZ", 5), {".xz"}},
      {"lz4", std::string_view("\x04\x22\x4D\x18", 4), {".lz4"}},
  };
  for (const Known& k : kKnown) {
    for (const char* e : k.extensions) {
      if (EndsWithNoCase(path, e)) return k.name;
    }
  }
  for (const Known& k : kKnown) {
    if (StartsWith(head, k.magic)) return k.name;
  }
  return "";
}

std::string_view WithoutCompressionExtension(std::string_view path) {
  for (std::string_view e : {".gz", ".gzip", ".zst", ".zstd"}) {
    if (EndsWithNoCase(path, e)) return path.substr(0, path.size() - e.size());
  }
  return path;
}

absl::StatusOr<std::unique_ptr<InputStream>> InputStream::Open(const std::string& path,
                                                               bool sniff) {
  const bool is_stdin = path == "-";
  const std::string source = is_stdin ? "<stdin>" : path;
  int fd = STDIN_FILENO;
  if (!is_stdin) {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
    }
  }
  uint64_t total = 0;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) total = static_cast<uint64_t>(st.st_size);
  auto raw = std::make_unique<RawFile>(fd, !is_stdin, source);

  Compression c = Compression::kNone;
  if (EndsWithNoCase(path, ".gz") || EndsWithNoCase(path, ".gzip")) c = Compression::kGzip;
  if (EndsWithNoCase(path, ".zst") || EndsWithNoCase(path, ".zstd")) c = Compression::kZstd;
  if (sniff || c != Compression::kNone) {
    auto head = raw->Peek(8);
    if (!head.ok()) return head.status();
    if (c == Compression::kNone) {
      if (StartsWith(*head, "\x1f\x8b")) c = Compression::kGzip;
      if (StartsWith(*head, std::string_view("\x28\xb5\x2f\xfd", 4))) c = Compression::kZstd;
    }
    if (c == Compression::kNone) {
      const std::string bad = UnsupportedFormat(path, *head);
      if (!bad.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(source, ": unsupported format: ", bad, " (convert to CSV or JSONL)"));
      }
    }
  }
  std::unique_ptr<InputStream> s;
  switch (c) {
    case Compression::kGzip:
      s = std::make_unique<GzipStream>(std::move(raw), total);
      break;
    case Compression::kZstd:
      s = std::make_unique<ZstdStream>(std::move(raw), total);
      break;
    case Compression::kNone:
      s = std::make_unique<PlainStream>(std::move(raw), total);
      break;
  }
  return s;
}

}  // namespace gpujoin::cli
