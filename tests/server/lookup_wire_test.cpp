// The Lookup bytes path (lookup_wire.hpp) against protobuf: randomly generated
// LookupRequests (fields in any order, unknown fields, every way of giving or
// mis-giving keys of either width to a uint32 and a uint64 index, truncations),
// split into slices of random sizes. The scan must
// accept exactly the plain packed-keys requests and then agree with protobuf's
// parse field by field; Operations::LookupPacked must then give the same status
// (code and text) and, serialised, the same response bytes as Operations::Lookup
// on the protobuf message, gathered payload columns (`select`) and match counts
// (`want_match_counts`, on a lowest_row and a keep_all index) included. (The host
// buffers themselves: tests/engine/host_buffer_test.cpp.)
#include "wire/lookup_wire.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <string>
#include <vector>

#include "ops/operations.hpp"
#include "payload_model.hpp"
#include "test_util.hpp"

namespace gpujoin::server {
namespace {

std::string Flatten(const std::vector<grpc::Slice>& slices) {
  std::string out;
  for (const grpc::Slice& s : slices)
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  return Flatten(slices);
}

// `bytes` cut into slices of random sizes (empty slices included).
std::vector<grpc::Slice> RandomSlices(const std::string& bytes, std::mt19937_64& rng) {
  std::vector<grpc::Slice> slices;
  size_t at = 0;
  while (at < bytes.size()) {
    const size_t kind = rng() % 8;
    size_t n = kind == 0 ? 0 : kind < 4 ? 1 + rng() % 7 : 1 + rng() % 300;
    n = std::min(n, bytes.size() - at);
    slices.emplace_back(bytes.data() + at, n);
    at += n;
  }
  if (rng() % 2 == 0) slices.emplace_back(std::string());
  return slices;
}

void AppendVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

std::string LengthDelimited(uint32_t field, const std::string& payload) {
  std::string out;
  AppendVarint((uint64_t{field} << 3) | 2, &out);
  AppendVarint(payload.size(), &out);
  return out + payload;
}

// One generated request and what the scan should say about it.
struct Generated {
  std::string bytes;
  bool expect_fast = false;
  bool malformed = false;  // truncated: only consistency is checked
};

class LookupWireTest : public testing::OperationsFixture {
 protected:
  void SetUp() override {
    ServerConfig config;
    // Small, so that large batches hit the response-size check.
    config.max_message_bytes = 8 << 10;
    MakeOperations(std::move(config));

    BuildSession session(ops_.get());
    v1::BuildIndexRequest spec;
    spec.mutable_spec()->set_name("x");
    spec.mutable_spec()->set_capacity(256);
    spec.mutable_spec()->set_first_value(7);
    v1::BuildIndexRequest chunk;
    for (uint32_t i = 0; i < 100; ++i) index_keys_.push_back(i * 2654435761u);
    *chunk.mutable_chunk()->mutable_keys()->mutable_packed() = PackColumn<uint32_t>(index_keys_);
    // Payload columns of four layouts, with nulls, for the requests' `select`.
    std::mt19937_64 payload_rng(7);
    for (const auto& [name, type] :
         std::vector<std::pair<std::string, v1::ColumnType>>{{"n", v1::COLUMN_TYPE_INT64},
                                                             {"s", v1::COLUMN_TYPE_STRING},
                                                             {"b", v1::COLUMN_TYPE_BOOL},
                                                             {"f", v1::COLUMN_TYPE_FLOAT32}}) {
      auto* p = spec.mutable_spec()->add_payload();
      p->set_name(name);
      p->set_type(type);
      *chunk.mutable_chunk()->add_payload() = testing::WireChunk(
          testing::ModelColumn{name, type, testing::RandomCells(type, 100, payload_rng)}, 0, 100);
    }
    ASSERT_TRUE(session.Add(std::move(spec)).ok());
    ASSERT_TRUE(session.Add(std::move(chunk)).ok());
    std::atomic<bool> cancelled{false};
    ASSERT_TRUE(session.Finish(cancelled).ok());

    // "x64": a uint64 index whose keys differ from each other only above bit 31.
    BuildSession wide(ops_.get());
    v1::BuildIndexRequest wide_spec;
    wide_spec.mutable_spec()->set_name("x64");
    wide_spec.mutable_spec()->set_capacity(256);
    wide_spec.mutable_spec()->set_key_type(v1::KEY_TYPE_UINT64);
    ASSERT_TRUE(wide.Add(std::move(wide_spec)).ok());
    for (uint64_t i = 0; i < 100; ++i) index_keys64_.push_back((i << 33) | 12345);
    v1::BuildIndexRequest wide_chunk;
    *wide_chunk.mutable_chunk()->mutable_keys64()->mutable_packed() =
        PackColumn<uint64_t>(index_keys64_);
    ASSERT_TRUE(wide.Add(std::move(wide_chunk)).ok());
    ASSERT_TRUE(wide.Finish(cancelled).ok());

    // "xm": a keep_all index of the same keys, each 1 to 4 times (match counts).
    BuildSession multi(ops_.get());
    v1::BuildIndexRequest multi_spec;
    multi_spec.mutable_spec()->set_name("xm");
    multi_spec.mutable_spec()->set_capacity(256);
    multi_spec.mutable_spec()->set_duplicates(v1::DUPLICATE_POLICY_KEEP_ALL);
    ASSERT_TRUE(multi.Add(std::move(multi_spec)).ok());
    std::vector<uint32_t> repeated;
    for (size_t i = 0; i < index_keys_.size(); ++i) {
      for (size_t n = 0; n <= i % 4; ++n) repeated.push_back(index_keys_[i]);
    }
    std::shuffle(repeated.begin(), repeated.end(), payload_rng);
    v1::BuildIndexRequest multi_chunk;
    *multi_chunk.mutable_chunk()->mutable_keys()->mutable_packed() = PackColumn<uint32_t>(repeated);
    ASSERT_TRUE(multi.Add(std::move(multi_chunk)).ok());
    ASSERT_TRUE(multi.Finish(cancelled).ok());
  }

  std::vector<uint64_t> RandomKeys64(size_t rows, std::mt19937_64& rng) {
    std::vector<uint64_t> keys(rows);
    for (auto& k : keys) {
      const uint64_t r = rng() % 10;
      k = r < 6   ? index_keys64_[rng() % index_keys64_.size()]
          : r < 7 ? ~uint64_t{0}
          : r < 8 ? index_keys64_[rng() % index_keys64_.size()] & 0xffffffffu  // low word only
                  : rng();
    }
    return keys;
  }

  std::vector<uint32_t> RandomKeys(size_t rows, std::mt19937_64& rng) {
    std::vector<uint32_t> keys(rows);
    for (auto& k : keys) {
      const uint64_t r = rng() % 10;
      k = r < 6 ? index_keys_[rng() % index_keys_.size()] : r < 7 ? 0xffffffffu : uint32_t(rng());
    }
    return keys;
  }

  Generated Generate(std::mt19937_64& rng) {
    Generated g;
    std::vector<std::string> pieces;
    auto field = [&](auto set) {
      v1::LookupRequest m;
      set(m);
      const std::string s = m.SerializeAsString();
      if (!s.empty()) pieces.push_back(s);
    };
    static const char* kNames[] = {"x", "x", "x64", "x64", "xm", "missing", "bad name!", ""};
    const char* index = rng() % 8 != 0 ? kNames[rng() % 8] : nullptr;
    if (index != nullptr) field([&](auto& m) { m.set_index(index); });
    if (rng() % 2) field([&](auto& m) { m.set_want_probes(true); });
    if (rng() % 2) field([&](auto& m) { m.set_want_match_counts(true); });
    if (rng() % 3 == 0) {
      static const uint32_t kBounds[] = {1, 3, 256, 257, 100000};
      const uint32_t bound = kBounds[rng() % 5];
      field([&](auto& m) { m.set_max_probe_count(bound); });
    }
    if (rng() % 2) {
      const uint64_t id = rng();
      field([&](auto& m) { m.set_batch_id(id); });
    }
    // Payload columns to gather (index "x" has n, s, b and f; "zz" is unknown,
    // a repeat is refused).
    const bool payload = index != nullptr && std::string(index) == "x";
    for (uint64_t n = payload && rng() % 2 == 0 ? 1 + rng() % 3 : 0; n > 0; --n) {
      static const char* kColumns[] = {"n", "s", "b", "f", "n", "s", "zz"};
      const char* column = kColumns[rng() % 7];
      field([&](auto& m) { m.add_select(column); });
    }
    // Rows: mostly small, sometimes past the 8 KiB response limit.
    const size_t rows = rng() % 5 == 0 ? 1500 + rng() % 2000 : 1 + rng() % 200;
    const std::string packed = PackColumn<uint32_t>(RandomKeys(rows, rng));
    auto keys_values = [&](size_t n) {
      v1::U32Column c;
      for (uint32_t k : RandomKeys(n, rng)) c.mutable_values()->add_v(k);
      return c.SerializeAsString();
    };
    const std::string packed64 = PackColumn<uint64_t>(RandomKeys64(rows, rng));
    auto keys64_values = [&](size_t n) {
      v1::U64Column c;
      for (uint64_t k : RandomKeys64(n, rng)) c.mutable_values()->add_v(k);
      return c.SerializeAsString();
    };
    switch (rng() % 15) {
      case 0:
      case 1:
      case 2:
      case 3:  // the fast path: one keys field holding one packed field
        pieces.push_back(LengthDelimited(2, LengthDelimited(1, packed)));
        g.expect_fast = true;
        break;
      case 4:  // packed of a length that is not whole rows
        pieces.push_back(
            LengthDelimited(2, LengthDelimited(1, packed.substr(0, 4 * rows - 1 - rng() % 3))));
        break;
      case 5:  // keys as a values list (possibly empty: zero rows)
        pieces.push_back(LengthDelimited(2, keys_values(rng() % 3 == 0 ? 0 : 1 + rng() % 50)));
        break;
      case 6:  // both packed and values
        pieces.push_back(LengthDelimited(2, LengthDelimited(1, packed) + keys_values(3)));
        break;
      case 7:  // keys field repeated (protobuf merges; the scan leaves it to protobuf)
        pieces.push_back(LengthDelimited(2, LengthDelimited(1, packed)));
        pieces.push_back(LengthDelimited(2, LengthDelimited(1, packed.substr(0, 8))));
        break;
      case 8:  // empty keys message, or an explicitly empty packed field
        pieces.push_back(LengthDelimited(2, rng() % 2 ? std::string() : LengthDelimited(1, "")));
        break;
      case 9: {  // an unknown field inside keys
        std::string inner = LengthDelimited(1, packed);
        inner += '\x18';  // field 3, varint
        inner += '\x05';
        pieces.push_back(LengthDelimited(2, inner));
        break;
      }
      case 10:
      case 11:  // the fast path with 64-bit keys: one keys64 field holding one packed field
        pieces.push_back(LengthDelimited(6, LengthDelimited(1, packed64)));
        g.expect_fast = true;
        break;
      case 12:  // keys64 packed of a length that is not whole 8-byte rows
        pieces.push_back(
            LengthDelimited(6, LengthDelimited(1, packed64.substr(0, 8 * rows - 1 - rng() % 7))));
        break;
      case 13:  // keys64 as a values list (possibly empty)
        pieces.push_back(LengthDelimited(6, keys64_values(rng() % 3 == 0 ? 0 : 1 + rng() % 50)));
        break;
      case 14:  // both keys and keys64 (the wrong width for one of the indexes)
        pieces.push_back(LengthDelimited(2, LengthDelimited(1, packed)));
        pieces.push_back(LengthDelimited(6, LengthDelimited(1, packed64)));
        break;
    }
    // Unknown top-level fields of every wire type.
    for (uint64_t u = rng() % 4; u > 0; --u) {
      std::string f;
      switch (rng() % 4) {
        case 0:
          AppendVarint((9 << 3) | 0, &f);
          AppendVarint(rng(), &f);
          break;
        case 1:
          f = LengthDelimited(10, std::string(rng() % 20, 'u'));
          break;
        case 2:
          AppendVarint((11 << 3) | 5, &f);
          f += std::string(4, '\x11');
          break;
        case 3:
          AppendVarint((123456 << 3) | 1, &f);
          f += std::string(8, '\x22');
          break;
      }
      pieces.push_back(f);
    }
    std::shuffle(pieces.begin(), pieces.end(), rng);
    for (const auto& p : pieces) g.bytes += p;
    if (rng() % 12 == 0 && !g.bytes.empty()) {
      g.bytes.resize(rng() % g.bytes.size());
      g.malformed = true;
    } else if (rng() % 40 == 0) {
      g.bytes += '\x07';  // field 0, wire type 7: never valid
      g.malformed = true;
      g.expect_fast = false;
    }
    return g;
  }

  std::vector<uint32_t> index_keys_;
  std::vector<uint64_t> index_keys64_;
};

TEST_F(LookupWireTest, AgreesWithProtobufOnRandomRequests) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  int fast = 0, fast_ok = 0, fast_wide_ok = 0, fast_errors = 0, protobuf_path = 0, gathered = 0;
  int counted = 0, counted_multi = 0;
  // The generator covers both paths, both widths and both outcomes; rare kinds
  // (a gather, a keep_all key matching twice) get more requests until each is
  // seen often enough, at most 20000 in all.
  auto covered = [&] {
    return fast_ok > 50 && fast_wide_ok > 20 && fast_errors > 50 && protobuf_path > 300 &&
           gathered > 10 && counted > 30 && counted_multi > 5;
  };
  int requests = 0;
  for (int i = 0; i < 20000 && (i < 1500 || !covered()); ++i, ++requests) {
    SCOPED_TRACE(::testing::Message() << "request " << i);
    const Generated g = Generate(rng);
    const auto slices = RandomSlices(g.bytes, rng);
    ASSERT_EQ(Flatten(slices), g.bytes);
    v1::LookupRequest full;
    const bool parsed = full.ParseFromString(g.bytes);
    const std::optional<LookupWire> wire = ScanLookupRequest(slices);
    if (!g.malformed) {
      ASSERT_TRUE(parsed);
      ASSERT_EQ(wire.has_value(), g.expect_fast);
    }
    if (!wire) {
      ++protobuf_path;
      continue;
    }
    ++fast;
    ASSERT_TRUE(parsed) << "the scan accepted bytes protobuf rejects";
    // Every other field as protobuf parsed it (unknown fields included, in order).
    const bool wide = wire->key_type == engine::KeyType::kUint64;
    const std::string& sent = wide ? full.keys64().packed() : full.keys().packed();
    v1::LookupRequest others = full;
    if (wide) {
      others.clear_keys64();
    } else {
      others.clear_keys();
    }
    EXPECT_EQ(wire->fields.SerializeAsString(), others.SerializeAsString());
    ASSERT_EQ(wire->rows() * (wide ? 8 : 4), sent.size());
    std::string copied(wire->keys_bytes, '\0');
    wire->CopyKeys(reinterpret_cast<uint8_t*>(copied.data()));
    EXPECT_EQ(copied, sent);

    // Same outcome as the protobuf path, byte for byte.
    v1::LookupResponse expected;
    const absl::Status want = ops_->Lookup(full, &expected);
    PackedLookupResult result;
    const absl::Status got = ops_->LookupPacked(
        wire->fields, wire->key_type, wire->rows(), [&](uint8_t* dst) { wire->CopyKeys(dst); },
        &result);
    ASSERT_EQ(got.code(), want.code()) << got << " vs " << want;
    EXPECT_EQ(got.message(), want.message());
    if (!want.ok()) {
      ++fast_errors;
      continue;
    }
    ++fast_ok;
    if (wide) ++fast_wide_ok;
    if (expected.columns_size() > 0) ++gathered;
    if (!expected.match_counts().empty()) {
      ++counted;
      // keep_all: some key of "xm" matches more than once.
      const auto counts = UnpackColumn<uint32_t>(expected.match_counts());
      if (full.index() == "xm" && *std::max_element(counts.begin(), counts.end()) > 1) {
        ++counted_multi;
      }
    }
    expected.set_batch_id(full.batch_id());
    EXPECT_EQ(Flatten(SerializeLookupResponse(full.batch_id(), std::move(result))),
              expected.SerializeAsString());
  }
  SCOPED_TRACE(::testing::Message() << requests << " requests");
  EXPECT_GT(fast_ok, 50);
  EXPECT_GT(fast_wide_ok, 20);
  EXPECT_GT(fast_errors, 50);
  EXPECT_GT(protobuf_path, 300);
  EXPECT_GT(gathered, 10);
  EXPECT_GT(counted, 30);
  EXPECT_GT(counted_multi, 5);
  EXPECT_EQ(fast, fast_ok + fast_errors);
}

TEST_F(LookupWireTest, ResponseBuffersStayAliveUntilTheLastSliceIsReleased) {
  v1::LookupRequest req;
  req.set_index("x");
  req.set_batch_id(42);
  req.set_want_probes(true);
  req.add_select("s");  // gathered columns are slices of their own buffers
  req.add_select("b");
  const std::vector<uint32_t> keys = {index_keys_[3], 5, index_keys_[9]};
  *req.mutable_keys()->mutable_packed() = PackColumn<uint32_t>(keys);
  const std::string bytes = req.SerializeAsString();
  const grpc::Slice one(bytes.data(), bytes.size());
  const grpc::ByteBuffer received(&one, 1);
  const auto wire = ScanLookupRequest(received);
  ASSERT_TRUE(wire.has_value());
  EXPECT_EQ(wire->rows(), 3u);
  EXPECT_EQ(wire->fields.batch_id(), 42u);
  PackedLookupResult result;
  ASSERT_TRUE(ops_->LookupPacked(
                      wire->fields, wire->key_type, wire->rows(),
                      [&](uint8_t* dst) { wire->CopyKeys(dst); }, &result)
                  .ok());
  std::string expected;
  {
    v1::LookupResponse r;
    ASSERT_TRUE(ops_->Lookup(req, &r).ok());
    r.set_batch_id(42);
    expected = r.SerializeAsString();
  }
  grpc::ByteBuffer copy;
  {
    grpc::ByteBuffer response = SerializeLookupResponse(42, std::move(result));
    copy = response;  // a second reference to the same slices
  }
  // The first buffer is gone; the slices of the copy still read the outputs.
  EXPECT_EQ(Flatten(copy), expected);
  v1::LookupResponse decoded;
  ASSERT_TRUE(decoded.ParseFromString(Flatten(copy)));
  EXPECT_EQ(UnpackColumn<uint32_t>(decoded.values()), (std::vector<uint32_t>{10, 0xffffffffu, 16}));
  EXPECT_EQ(decoded.found(), std::string("\1\0\1", 3));
  ASSERT_EQ(decoded.columns_size(), 2);
  EXPECT_EQ(decoded.columns(0).name(), "s");
  EXPECT_EQ(decoded.columns(0).length(), 3u);
  EXPECT_GE(decoded.columns(0).null_count(), 1u);  // the missing key
  EXPECT_EQ(decoded.columns(1).name(), "b");
}

// Found by fuzz_lookup_wire: protobuf reads a tag or a length as a varint of at
// most 5 bytes and fails on a longer encoding, even of a small value; the scan
// read up to 10 and so accepted, as a fast-path lookup, requests that protobuf
// (and so the service's ordinary path) rejects as unparseable.
TEST_F(LookupWireTest, TagsAndLengthsLongerThanProtobufReadsAreLeftToProtobuf) {
  const std::string keys = PackColumn<uint32_t>(std::vector<uint32_t>{index_keys_[0]});
  const std::string packed = "\x0a\x04" + keys;  // U32Column.packed, 4 bytes
  const std::string index = "\x0a\x01x";         // LookupRequest.index = "x"
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"keys tag in 6 bytes", index + std::string("\x92\x80\x80\x80\x80\x00\x06", 7) + packed},
      {"keys length in 6 bytes", index + std::string("\x12\x86\x80\x80\x80\x80\x00", 7) + packed},
      {"packed tag in 6 bytes",
       index + std::string("\x12\x0a\x8a\x80\x80\x80\x80\x00\x04", 9) + keys},
      {"packed length in 6 bytes",
       index + std::string("\x12\x0a\x0a\x84\x80\x80\x80\x80\x00", 9) + keys},
      {"index length in 6 bytes",
       std::string("\x0a\x81\x80\x80\x80\x80\x00x\x12\x06", 10) + packed},
  };
  for (const auto& [what, bytes] : cases) {
    SCOPED_TRACE(what);
    v1::LookupRequest parsed;
    EXPECT_FALSE(parsed.ParseFromString(bytes)) << "protobuf parses it; the case is wrong";
    const grpc::Slice one(bytes.data(), bytes.size());
    EXPECT_FALSE(ScanLookupRequest(std::vector<grpc::Slice>{one}).has_value());
  }
  // The same request with minimal encodings, and with every tag and length in
  // 5 bytes (which protobuf reads), takes the fast path.
  const std::string five("\x80\x80\x80\x00", 4);  // continues a varint to 5 bytes
  const std::string plain = index + "\x12\x06" + packed;
  const std::string longest =
      index + "\x92" + five + "\x8e" + five + "\x8a" + five + "\x84" + five + keys;
  for (const std::string& bytes : {plain, longest}) {
    v1::LookupRequest parsed;
    ASSERT_TRUE(parsed.ParseFromString(bytes));
    const grpc::Slice one(bytes.data(), bytes.size());
    const auto wire = ScanLookupRequest(std::vector<grpc::Slice>{one});
    ASSERT_TRUE(wire.has_value());
    EXPECT_EQ(wire->rows(), 1u);
    EXPECT_EQ(wire->fields.index(), "x");
  }
}

}  // namespace
}  // namespace gpujoin::server
