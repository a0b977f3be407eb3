// gpujoin-mutate-bench: the cost of one Mutate batch in the engine, on either
// backend. Builds an index of --keys distinct uint64 keys (explicit values, one
// int64 payload column) at load factor 0.25, then applies --repeat batches of
// --batch upsert rows, half updates of present keys and half new keys (kept
// below max_load_factor 0.8), the way the server does: Backend::MutateInPlace
// first, else MutationRebuild (export, merge on the host, build into a table
// of the same capacity on the backend). Prints, per batch, which path ran and
// its wall time (the median), in ms and upsert rows/s; then checks a sample
// of lookups of the last batch's keys.
//
//   gpujoin-mutate-bench [--backend cpu|cuda|auto] [--keys N] [--batch B] [--repeat R]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/graph.hpp"
#include "gpujoin/engine/mutation.hpp"

namespace {

using namespace gpujoin::engine;
using Clock = std::chrono::steady_clock;

double Ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

[[noreturn]] void Die(const std::string& what, const absl::Status& s) {
  std::fprintf(stderr, "gpujoin-mutate-bench: %s: %s\n", what.c_str(), s.ToString().c_str());
  std::exit(1);
}

uint64_t KeyOf(uint64_t i) { return i * 0x9e3779b97f4a7c15ull + 1; }

}  // namespace

int main(int argc, char** argv) {
  std::string backend_name = "auto";
  uint64_t keys = uint64_t{1} << 24, batch_rows = uint64_t{1} << 20;
  int repeat = 5;
  for (int i = 1; i < argc; ++i) {
    auto next = [&](const char* flag) -> const char* {
      if (std::strcmp(argv[i], flag) == 0 && i + 1 < argc) return argv[++i];
      return nullptr;
    };
    if (const char* v = next("--backend")) {
      backend_name = v;
    } else if (const char* v = next("--keys")) {
      keys = std::strtoull(v, nullptr, 10);
    } else if (const char* v = next("--batch")) {
      batch_rows = std::strtoull(v, nullptr, 10);
    } else if (const char* v = next("--repeat")) {
      repeat = std::atoi(v);
    } else {
      std::fprintf(stderr,
                   "usage: gpujoin-mutate-bench [--backend cpu|cuda|auto] [--keys N] "
                   "[--batch B] [--repeat R]\n");
      return 2;
    }
  }
  auto kind = ParseBackendKind(backend_name);
  if (!kind.ok()) Die("--backend", kind.status());
  auto backend = CreateBackend(*kind);
  if (!backend.ok()) Die("backend", backend.status());
  Backend& b = **backend;

  HashIndexSpec spec;
  spec.key_type = KeyType::kUint64;
  auto capacity = CapacityForRows(keys, 0.25);
  if (!capacity.ok()) Die("--keys", capacity.status());
  spec.capacity = *capacity;
  spec.max_probe_count = 64;
  std::unique_ptr<HashIndex> index;
  {
    auto created = b.CreateIndex(spec);
    if (!created.ok()) Die("create", created.status());
    index = std::move(*created);
    std::vector<uint64_t> k(keys);
    std::vector<uint32_t> v(keys);
    std::vector<int64_t> p(keys);
    for (uint64_t i = 0; i < keys; ++i) {
      k[i] = KeyOf(i);
      v[i] = uint32_t(i);
      p[i] = int64_t(i) * 3;
    }
    BuildIndexNode64 node;
    node.index = index.get();
    node.keys = {std::span<const uint64_t>(k)};
    node.values = ChunkedU32{std::span<const uint32_t>(v)};
    node.payload = {ColumnView{ColumnType::kInt64, keys, std::as_bytes(std::span(p)), {}, {}}};
    CommandGraph g;
    g.Add(std::move(node));
    const auto t0 = Clock::now();
    if (auto s = b.Run(g); !s.ok()) Die("build", s);
    std::printf("backend %s (%s): %llu keys in %u slots built in %.1f ms\n",
                std::string(BackendKindName(b.Info().kind)).c_str(), b.Info().device_name.c_str(),
                (unsigned long long)keys, spec.capacity, Ms(t0, Clock::now()));
  }

  uint64_t next_new = keys;
  std::vector<double> times;
  std::string path;
  std::vector<uint64_t> last_keys;
  std::vector<uint32_t> last_values;
  for (int r = 0; r < repeat; ++r) {
    std::vector<uint64_t> k(batch_rows);
    std::vector<uint32_t> v(batch_rows);
    std::vector<int64_t> p(batch_rows);
    for (uint64_t i = 0; i < batch_rows; ++i) {
      k[i] = i % 2 == 0 ? KeyOf((i * 7919 + r) % keys) : KeyOf(next_new++);
      v[i] = uint32_t(r * 1000003 + i);
      p[i] = -int64_t(i);
    }
    MutationBatchT<uint64_t> batch;
    batch.upsert_keys = {std::span<const uint64_t>(k)};
    batch.values = {std::span<const uint32_t>(v)};
    batch.payload = {ColumnView{ColumnType::kInt64, batch_rows, std::as_bytes(std::span(p)), {}, {}}};
    const auto t0 = Clock::now();
    auto in_place = b.MutateInPlace(*index, batch, 0.8);
    if (!in_place.ok()) Die("in place", in_place.status());
    if (in_place->applied) {
      path = "in place";
    } else {
      auto merged = MutationRebuild::Prepare(b, *index, batch);
      if (!merged.ok()) Die("merge", merged.status());
      auto target = b.CreateIndex(index->spec());
      if (!target.ok()) Die("create", target.status());
      if (auto s = (*merged)->BuildInto(b, target->get(), nullptr); !s.ok()) Die("build", s);
      index = std::move(*target);
      path = "rebuild";
    }
    times.push_back(Ms(t0, Clock::now()));
    last_keys = std::move(k);
    last_values = std::move(v);
  }
  std::sort(times.begin(), times.end());
  const double median = times[times.size() / 2];
  std::printf("batch of %llu upsert rows (half updates, half new keys), %s: median %.2f ms "
              "(min %.2f, max %.2f) over %d batches = %.3g upsert rows/s\n",
              (unsigned long long)batch_rows, path.c_str(), median, times.front(), times.back(),
              repeat, double(batch_rows) / (median / 1e3));

  // The last batch's keys answer its values (the last occurrence of each).
  const uint64_t sample = std::min<uint64_t>(batch_rows, 100000);
  std::vector<uint32_t> values(sample);
  LookupNode64 lookup;
  lookup.index = index.get();
  lookup.keys = {std::span<const uint64_t>(last_keys.data(), sample)};
  lookup.values = values;
  CommandGraph g;
  g.Add(std::move(lookup));
  if (auto s = b.Run(g); !s.ok()) Die("lookup", s);
  for (uint64_t i = 0; i < sample; ++i) {
    if (values[i] != last_values[i]) {
      std::fprintf(stderr, "gpujoin-mutate-bench: key %llu answers %u, not %u\n",
                   (unsigned long long)i, values[i], last_values[i]);
      return 1;
    }
  }
  std::printf("checked %llu lookups of the last batch\n", (unsigned long long)sample);
  return 0;
}
