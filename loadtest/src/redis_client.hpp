// A small RESP2 client for the load tester's Redis target: commands encoded as
// arrays of bulk strings into a buffer, one TCP connection with a connect
// timeout and per-operation I/O timeouts, and a resumable reply parser whose
// every read is bounded (RespLimits), so that a broken peer cannot make the
// tool allocate without bound. No dependency beyond POSIX sockets.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpujoin::loadtest {

/// One RESP2 reply.
struct RespReply {
  enum class Type { kSimpleString, kError, kInteger, kBulkString, kNil, kArray };
  Type type = Type::kNil;
  std::string str;                  ///< simple string, error or bulk string
  int64_t integer = 0;              ///< integer
  std::vector<RespReply> elements;  ///< array

  bool is_nil() const { return type == Type::kNil; }
};

/// "simple string", "error", "integer", "bulk string", "nil", "array".
const char* RespTypeName(RespReply::Type type);

/// Bounds on one reply; a reply past any of them is a protocol error.
struct RespLimits {
  size_t max_bulk_bytes = size_t{1} << 20;    ///< one bulk string's declared length
  size_t max_line_bytes = size_t{64} << 10;   ///< a simple string, error, integer or header line
  size_t max_elements = size_t{1} << 20;      ///< array elements of one reply, all levels together
  size_t max_reply_bytes = size_t{64} << 20;  ///< string bytes of one reply, all elements together
  size_t max_depth = 8;                       ///< nesting of arrays
};

/// Parses RESP2 replies (+, -, :, $, * and the nil bulk string and array) from
/// bytes fed in pieces of any size; a reply split across reads is resumed where
/// the bytes stopped. Holds at most one partial reply: the caller feeds more only
/// after Next() answered nullopt, so the buffer stays within the limits plus one
/// read.
class RespParser {
 public:
  explicit RespParser(RespLimits limits = {}) : limits_(limits) {}

  /// Appends received bytes (copied).
  void Feed(std::string_view bytes);

  /// The next whole reply; nullopt when more bytes are needed. INTERNAL on a
  /// protocol violation (an unknown type byte, a malformed or negative length or
  /// integer, a bulk string not followed by CRLF) and RESOURCE_EXHAUSTED past a
  /// limit, naming the offending value; after an error the parser stays failed
  /// (the connection is unusable).
  absl::StatusOr<std::optional<RespReply>> Next();

  /// Bytes received and not yet consumed by a whole reply.
  size_t buffered() const { return buf_.size() - pos_; }

 private:
  // An array whose elements are still arriving.
  struct Frame {
    RespReply reply;
    int64_t remaining = 0;
  };
  absl::Status Fail(absl::Status status);
  absl::Status ReplyTooLarge() const;

  RespLimits limits_;
  std::string buf_;
  size_t pos_ = 0;             // first unconsumed byte of buf_
  std::vector<Frame> stack_;   // open arrays of the reply being parsed, outermost first
  size_t reply_elements_ = 0;  // array elements declared so far in this reply
  size_t reply_bytes_ = 0;     // string bytes so far in this reply
  absl::Status failed_;
};

/// Commands as RESP2 arrays of bulk strings, appended to a buffer.
class RespCommandBuffer {
 public:
  /// Starts a command of `args` arguments (the command name counts); exactly that
  /// many Arg() calls must follow.
  void Begin(size_t args);
  void Arg(std::string_view arg);
  /// `value` as decimal text.
  void Arg(uint64_t value);
  /// A whole command.
  void Command(std::initializer_list<std::string_view> args);

  std::string_view data() const { return buf_; }
  size_t size() const { return buf_.size(); }
  void Clear() { buf_.clear(); }

 private:
  std::string buf_;
};

/// How a RedisConnection connects and waits.
struct RedisOptions {
  std::chrono::milliseconds connect_timeout{5000};
  /// Longest wait for one Flush() to complete or one Read() to receive a reply.
  std::chrono::milliseconds io_timeout{30000};
  RespLimits limits;
};

/// One TCP connection to a Redis server. Commands are appended to pending() and
/// sent by Flush(); Read() returns replies in order. One thread may append and
/// flush while another reads (a pipelined stream); Shutdown() may be called from
/// either to wake the other. Errors: UNAVAILABLE (connect failed, connection
/// closed or reset), DEADLINE_EXCEEDED (a timeout of RedisOptions), INTERNAL /
/// RESOURCE_EXHAUSTED (RespParser), each naming the address.
class RedisConnection {
 public:
  /// Connects to `address` ("host:port"; host a name or an IPv4/IPv6 literal,
  /// brackets allowed) with TCP_NODELAY. INVALID_ARGUMENT for an address
  /// without a port.
  static absl::StatusOr<std::unique_ptr<RedisConnection>> Connect(std::string_view address,
                                                                  const RedisOptions& options = {});
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  /// Commands not yet sent.
  RespCommandBuffer& pending() { return pending_; }
  /// Sends pending() whole and clears it.
  absl::Status Flush();
  /// Blocks for the next reply (an error reply is a reply, not an error status).
  absl::StatusOr<RespReply> Read();
  /// Sends one command and reads its reply; pending() must be empty or hold
  /// only commands whose replies the caller does not want before this one.
  absl::StatusOr<RespReply> Call(std::initializer_list<std::string_view> args);
  /// Shuts the socket down both ways: a blocked Flush() or Read() returns.
  void Shutdown();

  const std::string& address() const { return address_; }

 private:
  RedisConnection(int fd, std::string address, const RedisOptions& options);

  int fd_;
  std::string address_;
  RedisOptions options_;
  RespCommandBuffer pending_;
  RespParser parser_;
  std::vector<char> read_buf_;
};

/// Splits "host:port" (or "[v6]:port"); INVALID_ARGUMENT naming `option` otherwise.
absl::Status SplitHostPort(std::string_view address, std::string_view option, std::string* host,
                           std::string* port);

}  // namespace gpujoin::loadtest
