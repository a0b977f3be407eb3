#include "fuzz_support.hpp"

#include <algorithm>
#include <atomic>

#include "absl/strings/str_cat.h"
#include "gpujoin/engine/detail/slot_hash.hpp"
#include "gpujoin/testing/lookup_contract.hpp"
#include "wire/column_codec.hpp"

namespace gpujoin::fuzz {
Harness::Harness(uint64_t budget_bytes, server::ServerConfig config)
    : budget_bytes_(budget_bytes), config_(std::move(config)) {
  engine::BackendOptions options;
  options.cpu_threads = 1;
  auto backend = engine::CreateBackend(engine::BackendKind::kCpu, options);
  FUZZ_CHECK(backend.ok(), Describe(backend.status()));
  backend_ = std::move(*backend);
  backend_info_ = backend_->Info();  // reads /proc: once, not per input
  Reset();
}

void Harness::Reset() {
  if (ops_ != nullptr) {
    for (const auto& v : registry_->List()) {
      v1::DropIndexRequest request;
      request.set_name(v->name);
      v1::DropIndexResponse response;
      const absl::Status dropped = ops_->DropIndex(request, &response);
      FUZZ_CHECK(dropped.ok(), Describe(dropped));
    }
  }
  ops_.reset();
  registry_ = std::make_unique<server::IndexRegistry>();
  budget_ = std::make_unique<server::MemoryBudget>(budget_bytes_);
  staging_ = std::make_unique<server::MemoryBudget>(
      config_.max_staged_bytes != 0 ? config_.max_staged_bytes : budget_bytes_,
      "host staging budget", "--max-staged-bytes");
  MakeOps(nullptr);
}

void Harness::AttachSnapshots(server::SnapshotStore* snapshots) { MakeOps(snapshots); }

void Harness::MakeOps(server::SnapshotStore* snapshots) {
  server::ServiceState state;
  state.backend = backend_.get();
  state.backend_info = backend_info_;
  state.registry = registry_.get();
  state.budget = budget_.get();
  state.staging = staging_.get();
  state.metrics = &metrics_;
  state.config = config_;
  state.snapshots = snapshots;
  ops_ = std::make_unique<server::Operations>(std::move(state));
}

template <typename Key>
std::shared_ptr<const server::IndexVersion> Harness::Build(
    const std::string& name, uint32_t capacity, uint32_t max_probe_count, uint32_t first_value,
    const std::vector<Key>& keys, bool keep_all) {
  constexpr bool kWide = sizeof(Key) == 8;
  server::BuildSession session(ops_.get());
  v1::BuildIndexRequest spec;
  spec.mutable_spec()->set_name(name);
  spec.mutable_spec()->set_capacity(capacity);
  spec.mutable_spec()->set_max_probe_count(max_probe_count);
  spec.mutable_spec()->set_first_value(first_value);
  spec.mutable_spec()->set_key_type(kWide ? v1::KEY_TYPE_UINT64 : v1::KEY_TYPE_UINT32);
  if (keep_all) spec.mutable_spec()->set_duplicates(v1::DUPLICATE_POLICY_KEEP_ALL);
  absl::Status s = session.Add(std::move(spec));
  FUZZ_CHECK(s.ok(), Describe(s));
  v1::BuildIndexRequest chunk;
  if constexpr (kWide) {
    *chunk.mutable_chunk()->mutable_keys64()->mutable_packed() = server::PackColumn<Key>(keys);
  } else {
    *chunk.mutable_chunk()->mutable_keys()->mutable_packed() = server::PackColumn<Key>(keys);
  }
  s = session.Add(std::move(chunk));
  FUZZ_CHECK(s.ok(), Describe(s));
  std::atomic<bool> cancelled{false};
  auto built = session.Finish(cancelled);
  FUZZ_CHECK(built.ok(), Describe(built.status()));
  return *built;
}

template std::shared_ptr<const server::IndexVersion> Harness::Build<uint32_t>(
    const std::string&, uint32_t, uint32_t, uint32_t, const std::vector<uint32_t>&, bool);
template std::shared_ptr<const server::IndexVersion> Harness::Build<uint64_t>(
    const std::string&, uint32_t, uint32_t, uint32_t, const std::vector<uint64_t>&, bool);

std::shared_ptr<const server::IndexVersion> Harness::BuildColumns(
    const std::string& name, uint32_t capacity, uint32_t first_value, const KeySchemaModel& schema,
    const KeyRowList& rows, bool keep_all) {
  server::BuildSession session(ops_.get());
  v1::BuildIndexRequest spec;
  v1::IndexSpec& s = *spec.mutable_spec();
  s.set_name(name);
  s.set_capacity(capacity);
  s.set_first_value(first_value);
  s.set_key_type(v1::KEY_TYPE_COLUMNS);
  for (size_t i = 0; i < schema.size(); ++i) {
    v1::KeyColumnSpec& c = *s.add_key_columns();
    c.set_name(schema.names[i]);
    c.set_type(schema.types[i]);
  }
  if (keep_all) s.set_duplicates(v1::DUPLICATE_POLICY_KEEP_ALL);
  absl::Status status = session.Add(std::move(spec));
  FUZZ_CHECK(status.ok(), Describe(status));
  // Two chunks, the first with names and the second without: the staged rows
  // of both make one build.
  const size_t half = rows.size() / 2;
  for (const auto& [begin, end] : {std::pair{size_t{0}, half}, std::pair{half, rows.size()}}) {
    v1::BuildIndexRequest chunk;
    AppendKeyColumns(schema, KeyRowList(rows.begin() + begin, rows.begin() + end),
                     /*named=*/begin == 0, chunk.mutable_chunk()->mutable_key_columns());
    status = session.Add(std::move(chunk));
    FUZZ_CHECK(status.ok(), Describe(status));
  }
  std::atomic<bool> cancelled{false};
  auto built = session.Finish(cancelled);
  FUZZ_CHECK(built.ok(), Describe(built.status()));
  return *built;
}

namespace {

uint32_t Home(engine::KeyType type, uint64_t key, uint32_t capacity) {
  return type == engine::KeyType::kUint64
             ? engine::detail::HomeSlot(key, capacity)
             : engine::detail::HomeSlot(static_cast<uint32_t>(key), capacity);
}

bool ComesFirst(engine::KeyType type, uint64_t resident, uint64_t key, uint32_t displacement,
                uint32_t pos, uint32_t capacity) {
  if (type == engine::KeyType::kUint64) {
    return engine::detail::ResidentComesFirst(resident, key, displacement, pos, capacity);
  }
  return engine::detail::ResidentComesFirst(
      static_cast<uint32_t>(resident), static_cast<uint32_t>(key), displacement, pos, capacity);
}

}  // namespace

uint64_t ReferenceIndex::empty_key() const {
  return key_type == engine::KeyType::kUint64 ? engine::kEmptyKey64 : engine::kEmptyKey;
}

const ReferenceIndex::Entry* ReferenceIndex::Find(uint64_t key, uint64_t max_probe_count) const {
  if (key == empty_key()) return nullptr;
  auto it = entries.find(key);
  if (it == entries.end()) return nullptr;
  const uint64_t bound = max_probe_count == 0 ? probe_bound : max_probe_count;
  return it->second.probes <= bound ? &it->second : nullptr;
}

uint32_t ReferenceIndex::Probes(uint64_t key, uint64_t max_probe_count) const {
  const uint32_t bound =
      max_probe_count == 0 ? probe_bound : static_cast<uint32_t>(max_probe_count);
  if (key_type == engine::KeyType::kUint64) {
    return gpujoin::testing::ProbeContract(
               capacity, [&](uint32_t slot) { return slots[slot]; }, key, bound)
        .probes;
  }
  return gpujoin::testing::ProbeContract(
             capacity, [&](uint32_t slot) { return static_cast<uint32_t>(slots[slot]); },
             static_cast<uint32_t>(key), bound)
      .probes;
}

std::vector<uint32_t> ReferenceIndex::Matches(uint64_t key, const Entry& e) const {
  const auto it = groups.find(key);
  return it == groups.end() ? std::vector<uint32_t>{e.value} : it->second;
}

ReferenceIndex ReadReference(const engine::HashIndex& index) {
  ReferenceIndex ref;
  ref.key_type = index.key_type();
  ref.capacity = index.spec().capacity;
  ref.probe_bound = index.spec().probe_bound();
  ref.build_overflowed = index.build_statistics().overflow_rows != 0;
  std::vector<uint32_t> values;
  if (ref.key_type == engine::KeyType::kUint64) {
    auto snapshot = index.Snapshot64();
    FUZZ_CHECK(snapshot.ok(), Describe(snapshot.status()));
    ref.slots = std::move(snapshot->keys);
    values = std::move(snapshot->values);
  } else {
    auto snapshot = index.Snapshot();
    FUZZ_CHECK(snapshot.ok(), Describe(snapshot.status()));
    ref.slots.assign(snapshot->keys.begin(), snapshot->keys.end());
    values = std::move(snapshot->values);
  }
  const uint32_t cap = ref.capacity;
  FUZZ_CHECK(ref.slots.size() == cap && values.size() == cap,
             absl::StrCat("snapshot of ", ref.slots.size(), " keys and ", values.size(),
                          " values for capacity ", cap));
  uint64_t occupied = 0;
  for (uint32_t pos = 0; pos < cap; ++pos) {
    const uint64_t key = ref.slots[pos];
    if (key == ref.empty_key()) continue;
    ++occupied;
    const uint32_t displacement = (pos - Home(ref.key_type, key, cap)) & (cap - 1u);
    FUZZ_CHECK(displacement < ref.probe_bound,
               absl::StrCat("key ", key, " at slot ", pos, " is ", displacement,
                            " slots from its home; the probe bound is ", ref.probe_bound));
    // A key that is not at its home passed the slot before it: that slot is
    // occupied by a key that comes first in Robin Hood order.
    if (displacement > 0) {
      const uint32_t before = (pos - 1u) & (cap - 1u);
      const uint64_t resident = ref.slots[before];
      FUZZ_CHECK(resident != ref.empty_key() &&
                     ComesFirst(ref.key_type, resident, key, displacement - 1, before, cap),
                 absl::StrCat("key ", key, " at slot ", pos, " (displacement ", displacement,
                              ") follows slot ", before, " holding ", resident,
                              ", which does not come first"));
    }
    const bool inserted =
        ref.entries.emplace(key, ReferenceIndex::Entry{values[pos], displacement + 1}).second;
    FUZZ_CHECK(inserted, absl::StrCat("key ", key, " is in the table twice"));
  }
  FUZZ_CHECK(occupied == index.build_statistics().unique_keys,
             absl::StrCat(occupied, " occupied slots but unique_keys = ",
                          index.build_statistics().unique_keys));
  return ref;
}

bool ValidColumnName(std::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  for (char c : name) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

bool ValidIndexName(std::string_view name) {
  return ValidColumnName(name) && name != "." && name != "..";
}

std::vector<uint32_t> QueryFixtureKeys() {
  std::vector<uint32_t> keys;
  for (uint32_t k = 0; k < 32; ++k) keys.push_back(k);
  for (uint32_t k = 1000; k < 1008; ++k) keys.push_back(k);
  keys.push_back(5);
  keys.push_back(0xfffffffeu);
  keys.push_back(0x80000000u);
  return keys;
}

std::vector<uint32_t> QueryFixtureKeysMulti() {
  std::vector<uint32_t> keys = QueryFixtureKeys();
  for (uint32_t k : {3u, 1000u, 3u, 0xfffffffeu, 17u, 3u, 1000u, 0xffffffffu}) keys.push_back(k);
  return keys;
}

std::vector<uint64_t> QueryFixtureKeys64() {
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 16; ++k) keys.push_back(k);
  for (uint64_t k = 0; k < 8; ++k) keys.push_back((k + 1) << 32 | 3);  // only high bits differ
  keys.push_back(0xffffffffu);
  keys.push_back(uint64_t{1} << 63);
  keys.push_back(engine::kEmptyKey64 - 1);
  keys.push_back(7);  // a duplicate
  return keys;
}

namespace {

std::string Le32(uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); }
std::string Le64(uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }

}  // namespace

std::vector<FixtureKeyIndex> QueryFixtureKeyIndexes() {
  std::vector<FixtureKeyIndex> out;
  FixtureKeyIndex s{"s", {{"sku"}, {v1::COLUMN_TYPE_STRING}}, {}, 32, 700, false};
  for (std::string k :
       {std::string(), std::string("a"), std::string("A"), std::string("abc"),
        std::string("\xd0\xba\xd0\xbb\xd1\x8e\xd1\x87"), std::string("a\0b", 3),
        std::string("\xc3\xa9"), std::string("\xf0\x9f\x99\x82"), std::string("a")}) {
    s.rows.push_back(KeyTuple{k});
  }
  s.rows.push_back(std::nullopt);
  for (int i = 0; i < 16; ++i) s.rows.push_back(KeyTuple{absl::StrCat("sku-", 1000 + i)});
  out.push_back(std::move(s));

  FixtureKeyIndex c{"c",
                    {{"tenant", "name", "n"},
                     {v1::COLUMN_TYPE_INT64, v1::COLUMN_TYPE_STRING, v1::COLUMN_TYPE_INT32}},
                    {},
                    32,
                    900,
                    false};
  const int64_t tenants[] = {1, 2, -1};
  const char* names[] = {"", "x", "xy"};
  const int32_t ns[] = {0, 7};
  for (int i = 0; i < 18; ++i) {
    c.rows.push_back(KeyTuple{Le64(static_cast<uint64_t>(tenants[i % 3])), names[(i / 3) % 3],
                              Le32(static_cast<uint32_t>(ns[i / 9]))});
  }
  c.rows.insert(c.rows.begin() + 5, std::nullopt);
  c.rows.push_back(c.rows[4]);  // a duplicate
  out.push_back(std::move(c));

  FixtureKeyIndex cm{
      "cm",
      {{"u", "b", "w"}, {v1::COLUMN_TYPE_UINT32, v1::COLUMN_TYPE_BINARY, v1::COLUMN_TYPE_UINT64}},
      {},
      32,
      1100,
      true};
  const uint32_t us[] = {0, 0xffffffffu};
  const std::string bs[] = {std::string(), std::string("\xff\0", 2), std::string("\xc3")};
  const uint64_t ws[] = {0, ~uint64_t{0}};
  for (int i = 0; i < 12; ++i) {
    cm.rows.push_back(KeyTuple{Le32(us[i % 2]), bs[(i / 2) % 3], Le64(ws[i / 6])});
  }
  for (int r : {0, 5, 0, 0, 5}) cm.rows.push_back(cm.rows[r]);  // groups of 4 and 3
  cm.rows.insert(cm.rows.begin() + 3, std::nullopt);
  out.push_back(std::move(cm));
  return out;
}

namespace {

server::ServerConfig QueryConfig() {
  server::ServerConfig config;
  config.max_message_bytes = 8 << 10;
  config.max_aggregate_groups = 1024;
  return config;
}

}  // namespace

QueryFixture::QueryFixture() : harness_(1 << 20, QueryConfig()) {
  x_ = harness_.Build<uint32_t>("x", 64, 0, 100, QueryFixtureKeys());
  std::vector<uint32_t> tight_keys;
  for (uint32_t k = 0; k < 16; ++k) tight_keys.push_back(k * 3 + 1);
  tight_ = harness_.Build<uint32_t>("tight", 16, 2, 7, tight_keys);
  x64_ = harness_.Build<uint64_t>("x64", 64, 0, 500, QueryFixtureKeys64());
  const std::vector<uint32_t> multi = QueryFixtureKeysMulti();
  xm_ = harness_.Build<uint32_t>("xm", 64, 0, 300, multi, /*keep_all=*/true);
  x_ref_ = ReadReference(*x_->index);
  tight_ref_ = ReadReference(*tight_->index);
  x64_ref_ = ReadReference(*x64_->index);
  xm_ref_ = ReadReference(*xm_->index);
  // xm's groups: every valid row of each key, in source order (no overflow).
  uint64_t largest = 0;
  for (uint32_t r = 0; r < multi.size(); ++r) {
    if (multi[r] == engine::kEmptyKey) continue;
    std::vector<uint32_t>& group = xm_ref_.groups[multi[r]];
    group.push_back(300 + r);
    largest = std::max<uint64_t>(largest, group.size());
  }
  for (const auto& [key, group] : xm_ref_.groups) {
    FUZZ_CHECK(xm_ref_.entries.count(key) == 1 && xm_ref_.entries.at(key).value == group.front(),
               absl::StrCat("fixture index xm: key ", key, " is not its group's first row"));
  }
  FUZZ_CHECK(!xm_ref_.build_overflowed && xm_ref_.entries.size() == xm_ref_.groups.size() &&
                 xm_->index->build_statistics().max_group_rows == largest,
             "fixture index xm overflowed or reports another largest group");
  FUZZ_CHECK(!x_ref_.build_overflowed && x_ref_.entries.size() == QueryFixtureKeys().size() - 1,
             "fixture index x overflowed");
  FUZZ_CHECK(tight_ref_.build_overflowed, "fixture index tight did not overflow");
  for (FixtureKeyIndex& k : QueryFixtureKeyIndexes()) {
    auto version =
        harness_.BuildColumns(k.name, k.capacity, k.first_value, k.schema, k.rows, k.keep_all);
    std::vector<uint32_t> values;
    for (uint32_t r = 0; r < k.rows.size(); ++r) values.push_back(k.first_value + r);
    ColumnReference ref =
        ReadColumnReference(harness_.backend(), *version->index, std::move(k.schema),
                            std::move(k.rows), std::move(values));
    FUZZ_CHECK(!ref.build_overflowed, "fixture index " + k.name + " overflowed");
    columns_.emplace(k.name, std::pair{std::move(version), std::move(ref)});
  }
  FUZZ_CHECK(
      !x64_ref_.build_overflowed && x64_ref_.entries.size() == QueryFixtureKeys64().size() - 1,
      "fixture index x64 overflowed");
}

std::pair<const server::IndexVersion*, const ReferenceIndex*> QueryFixture::Find(
    const std::string& name) const {
  if (name == "x") return {x_.get(), &x_ref_};
  if (name == "tight") return {tight_.get(), &tight_ref_};
  if (name == "x64") return {x64_.get(), &x64_ref_};
  if (name == "xm") return {xm_.get(), &xm_ref_};
  return {nullptr, nullptr};
}

std::pair<const server::IndexVersion*, const ColumnReference*> QueryFixture::FindColumns(
    const std::string& name) const {
  const auto it = columns_.find(name);
  if (it == columns_.end()) return {nullptr, nullptr};
  return {it->second.first.get(), &it->second.second};
}

uint64_t QueryFixture::response_limit() const {
  const uint64_t max = harness_.config().max_message_bytes;
  return max - std::min<uint64_t>(4096, max / 2);
}

}  // namespace gpujoin::fuzz
