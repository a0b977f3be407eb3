// Request messages (key-schema columns and specs included) and the BuildIndex
// and GetServerInfo calls for the server tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "wire/column_codec.hpp"
#include "gpujoin/v1/gpujoin.grpc.pb.h"
#include "gpujoin/v1/gpujoin.pb.h"
#include "grpcpp/grpcpp.h"

namespace gpujoin::server::testing {

/// The optional IndexSpec fields SpecMsg sets (zero, false: the server's default).
struct SpecFields {
  uint64_t first_value = 0;
  bool replace = false;
  uint64_t max_probe_count = 0;
};

/// A spec message for a plain index `name` of `capacity` slots, e.g.
/// `SpecMsg("t", 256, {.first_value = 10, .replace = true})`.
inline v1::BuildIndexRequest SpecMsg(const std::string& name, uint64_t capacity,
                                     const SpecFields& fields = {}) {
  v1::BuildIndexRequest r;
  auto* s = r.mutable_spec();
  s->set_name(name);
  s->set_capacity(capacity);
  s->set_first_value(fields.first_value);
  s->set_replace(fields.replace);
  s->set_max_probe_count(fields.max_probe_count);
  return r;
}

/// A chunk message carrying `keys` as a packed column.
inline v1::BuildIndexRequest ChunkMsg(const std::vector<uint32_t>& keys) {
  v1::BuildIndexRequest r;
  *r.mutable_chunk()->mutable_keys()->mutable_packed() = PackColumn<uint32_t>(keys);
  return r;
}

/// A lookup of `keys` (a packed column) in index `index`, batch `batch_id`.
inline v1::LookupRequest LookupMsg(const std::string& index, const std::vector<uint32_t>& keys,
                                   uint64_t batch_id = 0) {
  v1::LookupRequest r;
  r.set_index(index);
  r.set_batch_id(batch_id);
  *r.mutable_keys()->mutable_packed() = PackColumn<uint32_t>(keys);
  return r;
}

/// first, first + 1, ..., first + n - 1.
inline std::vector<uint32_t> Iota(uint32_t n, uint32_t first = 1) {
  std::vector<uint32_t> v(n);
  for (uint32_t i = 0; i < n; ++i) v[i] = first + i;
  return v;
}

/// `message` serialised, then `field` = `value` appended as a raw varint (the
/// last occurrence of a scalar wins), parsed back: what a client with a wider
/// field type, or a hand-made message, sends.
template <typename Message>
Message WithVarint(const Message& message, int field, uint64_t value) {
  std::string bytes = message.SerializeAsString();
  for (uint64_t v : {uint64_t(field) << 3, value}) {
    while (v >= 0x80) {
      bytes.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    bytes.push_back(static_cast<char>(v));
  }
  Message out;
  EXPECT_TRUE(out.ParseFromString(bytes));
  return out;
}

/// One BuildIndex call: `messages` in order (stopping at the first failed
/// write), then the half-close; the call's status (the response in `response`).
inline grpc::Status Build(v1::GpuJoin::Stub& stub,
                          const std::vector<v1::BuildIndexRequest>& messages,
                          v1::BuildIndexResponse* response = nullptr,
                          const std::string& token = "") {
  grpc::ClientContext ctx;
  if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
  v1::BuildIndexResponse ignored;
  auto writer = stub.BuildIndex(&ctx, response == nullptr ? &ignored : response);
  for (const auto& m : messages) {
    if (!writer->Write(m)) break;
  }
  writer->WritesDone();
  return writer->Finish();
}

// ----------------------------------------------------- key schemas (kColumns)

/// A cell of a key column: nullopt = null.
using Str = std::optional<std::string>;
using I64 = std::optional<int64_t>;

/// A STRING (or BINARY) Column of `rows` (nullopt = null).
inline v1::Column StrCol(const std::vector<Str>& rows,
                         v1::ColumnType type = v1::COLUMN_TYPE_STRING) {
  v1::Column c;
  c.set_type(type);
  c.set_length(rows.size());
  std::vector<int32_t> offsets = {0};
  std::string validity((rows.size() + 7) / 8, '\0');
  bool nulls = false;
  for (size_t r = 0; r < rows.size(); ++r) {
    if (rows[r]) {
      c.mutable_data()->append(*rows[r]);
      validity[r / 8] |= static_cast<char>(1 << (r % 8));
    } else {
      nulls = true;
    }
    offsets.push_back(static_cast<int32_t>(c.data().size()));
  }
  *c.mutable_offsets() = PackColumn<int32_t>(offsets);
  if (nulls) *c.mutable_validity() = validity;
  return c;
}

/// An INT64 Column of `rows` (nullopt = null).
inline v1::Column I64Col(const std::vector<I64>& rows) {
  v1::Column c;
  c.set_type(v1::COLUMN_TYPE_INT64);
  c.set_length(rows.size());
  std::vector<int64_t> values;
  std::string validity((rows.size() + 7) / 8, '\0');
  bool nulls = false;
  for (size_t r = 0; r < rows.size(); ++r) {
    values.push_back(rows[r].value_or(0));
    if (rows[r]) {
      validity[r / 8] |= static_cast<char>(1 << (r % 8));
    } else {
      nulls = true;
    }
  }
  *c.mutable_data() = PackColumn<int64_t>(values);
  if (nulls) *c.mutable_validity() = validity;
  return c;
}

/// A key column of a key schema: its name and type.
struct KeyCol {
  std::string name;
  v1::ColumnType type;
};

/// The spec of a key-schema index `name` keyed by `keys`.
inline v1::BuildIndexRequest KeySpec(const std::string& name, const std::vector<KeyCol>& keys,
                                     uint64_t capacity = 1024) {
  v1::BuildIndexRequest r;
  auto* s = r.mutable_spec();
  s->set_name(name);
  s->set_capacity(capacity);
  s->set_key_type(v1::KEY_TYPE_COLUMNS);
  for (const KeyCol& k : keys) {
    auto* c = s->add_key_columns();
    c->set_name(k.name);
    c->set_type(k.type);
  }
  return r;
}

/// A chunk message carrying `keys`, one Column per key column.
inline v1::BuildIndexRequest KeyChunk(std::vector<v1::Column> keys) {
  v1::BuildIndexRequest r;
  for (auto& k : keys) *r.mutable_chunk()->add_key_columns() = std::move(k);
  return r;
}

/// A lookup of `keys` (one Column per key column) in index `index`.
inline v1::LookupRequest KeyLookup(const std::string& index, std::vector<v1::Column> keys) {
  v1::LookupRequest r;
  r.set_index(index);
  for (auto& k : keys) *r.add_key_columns() = std::move(k);
  return r;
}

/// GetServerInfo's answer (a failed call is a test failure and an empty answer).
inline v1::GetServerInfoResponse Info(v1::GpuJoin::Stub& stub) {
  grpc::ClientContext ctx;
  v1::GetServerInfoResponse info;
  EXPECT_TRUE(stub.GetServerInfo(&ctx, v1::GetServerInfoRequest(), &info).ok());
  return info;
}

}  // namespace gpujoin::server::testing
