// gpujoin-snapshot-bench: the restore rate of an index snapshot on
// either backend. Builds an index of --keys distinct uint32 keys at load factor
// 0.5 with two payload columns (int64, float64), exports it and writes its
// snapshot file (the background write's path: export, write, fsync), reads the
// file once to warm the page cache, then times --repeat restores (open and
// verify the header, read and checksum every section, import into the
// backend) and reports the best as GB/s of file bytes, beside the build rate
// (what a restore from source rows would cost at least). A sample of lookups
// with gathered payload is compared between the built and the restored index.
//
//   gpujoin-snapshot-bench [--backend cpu|cuda|auto] [--keys N] [--dir DIR] [--repeat R]
//                          [--threads T]
//
// --threads: the threads that read and checksum the file's 4 MiB blocks
// (SnapshotReader::ReadImage); default the host's hardware concurrency, what
// gpujoind uses to restore one index.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/graph.hpp"
#include "storage/snapshot_format.hpp"
#include "storage/snapshot_reader.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using gpujoin::engine::Backend;
using gpujoin::engine::BackendKind;
using gpujoin::engine::ColumnType;
using gpujoin::engine::ColumnView;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "gpujoin-snapshot-bench: %s\n", what.c_str());
  std::exit(1);
}

// Lookup values and both gathered columns for `keys`.
std::vector<uint8_t> Answers(Backend& backend, const gpujoin::engine::HashIndex& index,
                             const std::vector<uint32_t>& keys) {
  const size_t n = keys.size();
  std::vector<uint32_t> values(n);
  std::vector<std::byte> a(n * 8), b(n * 8);
  std::vector<uint8_t> va((n + 7) / 8), vb((n + 7) / 8);
  gpujoin::engine::LookupNode node;
  node.index = &index;
  node.keys = {std::span<const uint32_t>(keys)};
  node.values = values;
  node.gather = {gpujoin::engine::GatherOutput{.column = 0, .data = a, .validity = va},
                 gpujoin::engine::GatherOutput{.column = 1, .data = b, .validity = vb}};
  gpujoin::engine::CommandGraph graph;
  graph.Add(node);
  if (absl::Status s = backend.Run(graph); !s.ok()) Die(std::string(s.message()));
  std::vector<uint8_t> out(reinterpret_cast<uint8_t*>(values.data()),
                           reinterpret_cast<uint8_t*>(values.data() + n));
  out.insert(out.end(), reinterpret_cast<uint8_t*>(a.data()),
             reinterpret_cast<uint8_t*>(a.data() + a.size()));
  out.insert(out.end(), reinterpret_cast<uint8_t*>(b.data()),
             reinterpret_cast<uint8_t*>(b.data() + b.size()));
  out.insert(out.end(), va.begin(), va.end());
  out.insert(out.end(), vb.begin(), vb.end());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string backend_name = "auto", dir = "/tmp";
  uint64_t keys_n = uint64_t{1} << 26;
  int repeat = 3;
  unsigned threads = std::thread::hardware_concurrency();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) Die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--backend") {
      backend_name = next();
    } else if (a == "--keys") {
      keys_n = std::strtoull(next().c_str(), nullptr, 0);
    } else if (a == "--dir") {
      dir = next();
    } else if (a == "--repeat") {
      repeat = std::atoi(next().c_str());
    } else if (a == "--threads") {
      threads = unsigned(std::strtoul(next().c_str(), nullptr, 0));
    } else {
      Die("unknown argument " + a +
          " (usage: [--backend cpu|cuda|auto] [--keys N] [--dir DIR] [--repeat R] [--threads T])");
    }
  }
  auto kind = gpujoin::engine::ParseBackendKind(backend_name);
  if (!kind.ok()) Die(std::string(kind.status().message()));
  auto backend_or = gpujoin::engine::CreateBackend(*kind);
  if (!backend_or.ok()) Die(std::string(backend_or.status().message()));
  Backend& backend = **backend_or;
  const auto info = backend.Info();
  const bool cuda = info.kind == BackendKind::kCuda;

  auto capacity = gpujoin::engine::CapacityForRows(keys_n, 0.5);
  if (!capacity.ok()) Die(std::string(capacity.status().message()));
  gpujoin::engine::HashIndexSpec spec;
  spec.capacity = *capacity;
  threads = std::max(1u, threads);
  std::printf(
      "backend=%s device=\"%s\" keys=%llu capacity=%u payload=int64,float64 read_threads=%u\n",
      std::string(gpujoin::engine::BackendKindName(info.kind)).c_str(), info.device_name.c_str(),
      (unsigned long long)keys_n, spec.capacity, threads);

  // Distinct keys: an odd multiplier is a bijection of uint32 (skip the reserved key).
  std::vector<uint32_t> keys(keys_n);
  std::vector<int64_t> p0(keys_n);
  std::vector<double> p1(keys_n);
  for (uint64_t i = 0; i < keys_n; ++i) {
    uint32_t k = uint32_t(i * 2654435761u + 12345u);
    if (k == 0xffffffffu) k = uint32_t(keys_n * 2654435761u + 12345u);
    keys[i] = k;
    p0[i] = int64_t(i) * 7;
    p1[i] = double(i) / 3;
  }
  std::unique_ptr<gpujoin::engine::HashIndex> index;
  double build_seconds = 0;
  {
    auto created = backend.CreateIndex(spec);
    if (!created.ok()) Die(std::string(created.status().message()));
    index = std::move(*created);
    gpujoin::engine::CommandGraph graph;
    gpujoin::engine::BuildIndexNode node;
    node.index = index.get();
    node.keys = {std::span<const uint32_t>(keys)};
    node.payload = {
        ColumnView{ColumnType::kInt64, keys_n, std::as_bytes(std::span<const int64_t>(p0)), {}, {}},
        ColumnView{
            ColumnType::kFloat64, keys_n, std::as_bytes(std::span<const double>(p1)), {}, {}}};
    graph.Add(node);
    const auto t = Clock::now();
    if (absl::Status s = backend.Run(graph); !s.ok()) Die(std::string(s.message()));
    build_seconds = Since(t);
  }
  std::vector<uint32_t> sample;
  for (uint64_t i = 0; i < 100000; ++i) sample.push_back(keys[(i * 7919) % keys_n] + (i % 5 == 0));
  p0.clear();
  p0.shrink_to_fit();
  p1.clear();
  p1.shrink_to_fit();
  keys.clear();
  keys.shrink_to_fit();
  const std::vector<uint8_t> before = Answers(backend, *index, sample);
  std::printf("build from source rows: %.3f s (%.1f Mkeys/s)\n", build_seconds,
              keys_n / build_seconds / 1e6);

  const std::string path = dir + "/gpujoin-snapshot-bench.gjsnap";
  uint64_t file_bytes = 0;
  {
    const auto t = Clock::now();
    auto image = backend.ExportIndex(*index);
    if (!image.ok()) Die(std::string(image.status().message()));
    const double export_seconds = Since(t);
    gpujoin::server::SnapshotMeta meta;
    meta.name = "bench";
    meta.source_backend = info.kind;
    meta.payload_names = {"a", "b"};
    const int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
    if (fd < 0) Die("cannot create " + path);
    const auto w = Clock::now();
    if (absl::Status s = gpujoin::server::WriteSnapshot(fd, meta, *image); !s.ok()) {
      Die(std::string(s.message()));
    }
    ::fsync(fd);
    ::close(fd);
    const double write_seconds = Since(w);
    file_bytes = gpujoin::server::SnapshotFileBytes(meta, *image);
    std::printf("export: %.3f s (%.2f GB/s); write + fsync: %.3f s (%.2f GB/s); file %.3f GB\n",
                export_seconds, image->bytes() / export_seconds / 1e9, write_seconds,
                file_bytes / write_seconds / 1e9, file_bytes / 1e9);
  }
  index.reset();  // the restores below must not share memory with it

  double best = 1e30, best_read = 0, best_import = 0;
  std::vector<uint8_t> after;
  for (int r = 0; r <= repeat; ++r) {  // r = 0 warms the page cache
    const auto t = Clock::now();
    auto reader = gpujoin::server::SnapshotReader::Open(path);
    if (!reader.ok()) Die(std::string(reader.status().message()));
    auto image = reader->ReadImage(threads);
    if (!image.ok()) Die(std::string(image.status().message()));
    const double read_seconds = Since(t);
    const auto ti = Clock::now();
    auto restored = backend.ImportIndex(*image);
    if (!restored.ok()) Die(std::string(restored.status().message()));
    const double import_seconds = Since(ti);
    const double total = Since(t);
    if (r > 0 && total < best) {
      best = total;
      best_read = read_seconds;
      best_import = import_seconds;
    }
    if (r == repeat) after = Answers(backend, **restored, sample);
  }
  std::printf(
      "restore (warm page cache, best of %d): read + verify %.3f s, import %.3f s, total %.3f s "
      "= %.2f GB/s into %s memory (%.1f x the build rate)\n",
      repeat, best_read, best_import, best, file_bytes / best / 1e9, cuda ? "device" : "host",
      build_seconds / best);
  std::printf("check: %zu lookups with payload %s\n", sample.size(),
              before == after ? "identical" : "DIFFER");
  ::unlink(path.c_str());
  return before == after ? 0 : 1;
}
