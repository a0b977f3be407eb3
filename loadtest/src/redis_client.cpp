#include "redis_client.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gpujoin::loadtest {
namespace {

using Clock = std::chrono::steady_clock;

// `line` as a whole base-10 int64 ("-1", "42"), or nullopt.
std::optional<int64_t> ParseInteger(std::string_view line) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), v);
  if (line.empty() || ec != std::errc() || end != line.data() + line.size()) return std::nullopt;
  return v;
}

// Up to 32 bytes of `s`, printable, for messages.
std::string Excerpt(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 32)) {
    if (c >= 0x20 && c < 0x7f) {
      out.push_back(c);
    } else {
      absl::StrAppend(&out, absl::StrFormat("\\x%02x", static_cast<unsigned char>(c)));
    }
  }
  return s.size() > 32 ? out + "..." : out;
}

int RemainingMs(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 1 << 30));
}

std::string Errno(int err) { return std::strerror(err); }

}  // namespace

const char* RespTypeName(RespReply::Type type) {
  switch (type) {
    case RespReply::Type::kSimpleString:
      return "simple string";
    case RespReply::Type::kError:
      return "error";
    case RespReply::Type::kInteger:
      return "integer";
    case RespReply::Type::kBulkString:
      return "bulk string";
    case RespReply::Type::kNil:
      return "nil";
    case RespReply::Type::kArray:
      return "array";
  }
  return "?";
}

void RespParser::Feed(std::string_view bytes) {
  // Drop consumed bytes before growing, so the buffer holds one partial reply.
  if (pos_ > 0 && (pos_ == buf_.size() || pos_ >= buf_.size() / 2)) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  buf_.append(bytes.data(), bytes.size());
}

absl::Status RespParser::ReplyTooLarge() const {
  return absl::ResourceExhaustedError(
      absl::StrCat("RESP reply of more than ", limits_.max_reply_bytes, " bytes of strings"));
}

absl::Status RespParser::Fail(absl::Status status) {
  failed_ = status;
  return status;
}

absl::StatusOr<std::optional<RespReply>> RespParser::Next() {
  if (!failed_.ok()) return failed_;
  for (;;) {
    const std::string_view rest(buf_.data() + pos_, buf_.size() - pos_);
    if (rest.empty()) return std::nullopt;
    // Only the first max_line_bytes + CRLF are searched: a longer line is an error,
    // not a reason to buffer more.
    const size_t crlf = rest.substr(0, limits_.max_line_bytes + 3).find("\r\n");
    if (crlf == std::string_view::npos) {
      if (rest.size() > limits_.max_line_bytes + 2) {
        return Fail(absl::ResourceExhaustedError(absl::StrCat(
            "RESP line longer than ", limits_.max_line_bytes, " bytes: ", Excerpt(rest))));
      }
      return std::nullopt;
    }
    const char type = rest[0];
    const std::string_view line = rest.substr(1, crlf - 1);
    size_t consumed = crlf + 2;
    RespReply value;
    switch (type) {
      case '+':
      case '-':
        value.type = type == '+' ? RespReply::Type::kSimpleString : RespReply::Type::kError;
        if (line.size() > limits_.max_reply_bytes - reply_bytes_) return Fail(ReplyTooLarge());
        value.str.assign(line);
        reply_bytes_ += line.size();
        break;
      case ':': {
        const auto v = ParseInteger(line);
        if (!v)
          return Fail(absl::InternalError(absl::StrCat("bad RESP integer '", Excerpt(line), "'")));
        value.type = RespReply::Type::kInteger;
        value.integer = *v;
        break;
      }
      case '$': {
        const auto len = ParseInteger(line);
        if (!len || *len < -1) {
          return Fail(absl::InternalError(
              absl::StrCat("bad RESP bulk string length '", Excerpt(line), "'")));
        }
        if (*len == -1) break;  // the nil bulk string
        if (static_cast<uint64_t>(*len) > limits_.max_bulk_bytes) {
          return Fail(absl::ResourceExhaustedError(absl::StrCat("RESP bulk string of ", *len,
                                                                " bytes, above the limit of ",
                                                                limits_.max_bulk_bytes)));
        }
        const size_t n = static_cast<size_t>(*len);
        if (n > limits_.max_reply_bytes - reply_bytes_) return Fail(ReplyTooLarge());
        if (rest.size() < consumed + n + 2) return std::nullopt;  // resumes at this header
        if (rest.substr(consumed + n, 2) != "\r\n") {
          return Fail(absl::InternalError(
              absl::StrCat("RESP bulk string of length ", n, " is not followed by CRLF")));
        }
        value.type = RespReply::Type::kBulkString;
        value.str.assign(rest.substr(consumed, n));
        consumed += n + 2;
        reply_bytes_ += n;
        break;
      }
      case '*': {
        const auto count = ParseInteger(line);
        if (!count || *count < -1) {
          return Fail(
              absl::InternalError(absl::StrCat("bad RESP array length '", Excerpt(line), "'")));
        }
        if (*count == -1) break;  // the nil array
        if (static_cast<uint64_t>(*count) > limits_.max_elements - reply_elements_) {
          return Fail(absl::ResourceExhaustedError(
              absl::StrCat("RESP array of ", *count,
                           " elements; the reply would pass the limit of ", limits_.max_elements)));
        }
        value.type = RespReply::Type::kArray;
        if (*count > 0) {
          if (stack_.size() >= limits_.max_depth) {
            return Fail(absl::ResourceExhaustedError(
                absl::StrCat("RESP arrays nested deeper than ", limits_.max_depth)));
          }
          reply_elements_ += static_cast<size_t>(*count);
          pos_ += consumed;
          // Reserve by what the bytes can hold, not by what the peer declares.
          value.elements.reserve(std::min<size_t>(static_cast<size_t>(*count), 4096));
          stack_.push_back(Frame{std::move(value), *count});
          continue;
        }
        break;
      }
      default:
        return Fail(absl::InternalError(
            absl::StrCat("unexpected RESP type byte in '", Excerpt(rest), "'")));
    }
    pos_ += consumed;
    // Completes the open arrays this value fills.
    bool done = true;
    while (!stack_.empty()) {
      Frame& f = stack_.back();
      f.reply.elements.push_back(std::move(value));
      if (--f.remaining > 0) {
        done = false;
        break;
      }
      value = std::move(f.reply);
      stack_.pop_back();
    }
    if (!done) continue;
    reply_elements_ = 0;
    reply_bytes_ = 0;
    return value;
  }
}

void RespCommandBuffer::Begin(size_t args) { absl::StrAppend(&buf_, "*", args, "\r\n"); }

void RespCommandBuffer::Arg(std::string_view arg) {
  absl::StrAppend(&buf_, "$", arg.size(), "\r\n");
  buf_.append(arg.data(), arg.size());
  buf_.append("\r\n");
}

void RespCommandBuffer::Arg(uint64_t value) {
  char digits[20];
  auto [end, ec] = std::to_chars(digits, digits + sizeof digits, value);
  Arg(std::string_view(digits, static_cast<size_t>(end - digits)));
}

void RespCommandBuffer::Command(std::initializer_list<std::string_view> args) {
  Begin(args.size());
  for (std::string_view a : args) Arg(a);
}

absl::Status SplitHostPort(std::string_view address, std::string_view option, std::string* host,
                           std::string* port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == address.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(option), ": '", std::string(address), "' is not host:port"));
  }
  std::string_view h = address.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  const std::string_view p = address.substr(colon + 1);
  if (!std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(option), ": '", std::string(address), "' has no numeric port"));
  }
  host->assign(h);
  port->assign(p);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<RedisConnection>> RedisConnection::Connect(
    std::string_view address, const RedisOptions& options) {
  std::string host, port;
  if (absl::Status s = SplitHostPort(address, "redis address", &host, &port); !s.ok()) return s;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    return absl::UnavailableError(absl::StrCat("redis ", std::string(address), ": cannot resolve '",
                                               host, "': ", gai_strerror(rc)));
  }
  const auto deadline = Clock::now() + options.connect_timeout;
  std::string last_error = "no address";
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    const int fd =
        socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) {
      last_error = Errno(errno);
      continue;
    }
    int err = 0;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        pollfd p{fd, POLLOUT, 0};
        int n;
        do {
          n = poll(&p, 1, RemainingMs(deadline));
        } while (n < 0 && errno == EINTR);
        socklen_t len = sizeof err;
        if (n == 0) {
          err = ETIMEDOUT;
        } else if (n < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
          err = errno;
        }
      }
    }
    if (err != 0) {
      last_error = Errno(err);
      close(fd);
      if (err == ETIMEDOUT) break;
      continue;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    freeaddrinfo(res);
    return std::unique_ptr<RedisConnection>(new RedisConnection(fd, std::string(address), options));
  }
  freeaddrinfo(res);
  return absl::UnavailableError(
      absl::StrCat("cannot connect to redis at ", std::string(address), ": ", last_error));
}

RedisConnection::RedisConnection(int fd, std::string address, const RedisOptions& options)
    : fd_(fd),
      address_(std::move(address)),
      options_(options),
      parser_(options.limits),
      read_buf_(64 << 10) {}

RedisConnection::~RedisConnection() { close(fd_); }

void RedisConnection::Shutdown() { shutdown(fd_, SHUT_RDWR); }

absl::Status RedisConnection::Flush() {
  const std::string_view data = pending_.data();
  const auto deadline = Clock::now() + options_.io_timeout;
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      return absl::UnavailableError(
          absl::StrCat("writing to redis at ", address_, ": ", Errno(errno)));
    }
    pollfd p{fd_, POLLOUT, 0};
    const int r = poll(&p, 1, RemainingMs(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) {
      return absl::DeadlineExceededError(absl::StrCat("redis at ", address_, " took no bytes for ",
                                                      options_.io_timeout.count(), " ms"));
    }
  }
  pending_.Clear();
  return absl::OkStatus();
}

absl::StatusOr<RespReply> RedisConnection::Read() {
  const auto deadline = Clock::now() + options_.io_timeout;
  for (;;) {
    auto next = parser_.Next();
    if (!next.ok()) {
      return absl::Status(next.status().code(),
                          absl::StrCat("redis at ", address_, ": ", next.status().message()));
    }
    if (next->has_value()) return std::move(**next);
    const ssize_t n = recv(fd_, read_buf_.data(), read_buf_.size(), 0);
    if (n > 0) {
      parser_.Feed(std::string_view(read_buf_.data(), static_cast<size_t>(n)));
      continue;
    }
    if (n == 0) {
      return absl::UnavailableError(absl::StrCat("redis at ", address_, " closed the connection"));
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return absl::UnavailableError(
          absl::StrCat("reading from redis at ", address_, ": ", Errno(errno)));
    }
    pollfd p{fd_, POLLIN, 0};
    const int r = poll(&p, 1, RemainingMs(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) {
      return absl::DeadlineExceededError(absl::StrCat("no reply from redis at ", address_, " in ",
                                                      options_.io_timeout.count(), " ms"));
    }
  }
}

absl::StatusOr<RespReply> RedisConnection::Call(std::initializer_list<std::string_view> args) {
  pending_.Command(args);
  if (absl::Status s = Flush(); !s.ok()) return s;
  return Read();
}

}  // namespace gpujoin::loadtest
