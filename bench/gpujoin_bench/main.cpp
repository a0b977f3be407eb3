// gpujoin-bench: throughput of the CUDA backend's kernels on device-resident data.
//
// Prints one table: the device-to-device copy bandwidth (the ceiling, bytes read +
// written) measured in this run, then the rows of each benchmark family with keys
// (rows) per second and the fraction of the copy bandwidth their bytes represent.
// Every figure is the median of --reps repetitions timed with CUDA events after a
// warm-up. Every output is poisoned before each timed variant and checked
// afterwards; a failed check prints FAIL in its row and makes the exit status
// nonzero. Each family's file states its byte model (what "of copy" counts).
//
// This file is the runner: flags, the list of families, --only, the table.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <regex>
#include <string>

#include "context.hpp"
#include "families.hpp"

namespace gpujoin::bench {
namespace {

struct Benchmark {
  const char* name;
  const char* what;
  bool in_profile;  // runs under --profile
  void (*run)(BenchContext&);
};

// In the order they run. The copy row always runs: every "of copy" figure
// divides by its rate.
constexpr Benchmark kBenchmarks[] = {
    {"copy", "device-to-device copy, the ceiling (always runs)", true, RunCopy},
    {"build", "uint32 builds: each path, generated ids and explicit values, hot keys", true,
     RunBuild},
    {"lookup", "uint32 lookups, all hits and 50% miss; + gather of two payload columns", true,
     RunLookup},
    {"join", "uint32 inner joins (pairs); + gather of two payload columns per pair", false,
     RunJoin},
    {"multi_value", "keep_all builds, count+scan+scatter joins, semi and anti joins", false,
     RunMultiValue},
    {"u64", "64-bit key builds and lookups", true, RunU64},
    {"keys", "key schemas: 16- and 32-byte string and (uint32, uint32) builds and lookups", false,
     RunKeyColumns},
    {"aggregate", "float32 grouped count and mean on each path, 16 to 200000 groups", false,
     RunAggregate},
    {"aggregate_int64", "exact int64 grouped sum, 16 and 256 groups", false, RunAggregateInt64},
    {"hash", "row hashing: int64 (hash64, hash32), 16-byte strings (hash64)", false, RunHash},
    {"devices", "2^26-key lookups on every GPU: partitioned and replicated against one", false,
     RunDevices},
};

// --only=core, the name of the old first section, still selects its rows.
constexpr const char* kCoreRegex = "^(build|lookup|join)$";

void Usage() {
  std::printf(
      "usage: gpujoin-bench [--list] [--only REGEX | --only=REGEX] [--reps=N (>=5, default 7)]\n"
      "  [--quick (1/16 sizes)] [--profile] [--groups=N]\n"
      "  --list: the benchmark names, one a line, then exit (needs no GPU)\n"
      "  --only: the copy row and the benchmarks whose names REGEX matches (a search,\n"
      "    as std::regex_search); core = ^(build|lookup|join)$\n"
      "  --groups=N: group aggregation: only the rows of N groups, one of 16, 256,\n"
      "    4097, 65536, 200000\n"
      "  --profile: for Nsight Compute; one repetition, only the direct and tile builds\n"
      "    and the lookups, no joins or aggregation\n");
}

struct Flags {
  BenchOptions options;
  bool list = false;
  std::string only;
};

// Parses argv into `flags`; false on an unknown flag.
bool Parse(int argc, char** argv, Flags& flags) {
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (std::strcmp(a, "--quick") == 0)
      flags.options.quick = true;
    else if (std::strcmp(a, "--profile") == 0)
      flags.options.profile = true;
    else if (std::strcmp(a, "--list") == 0)
      flags.list = true;
    else if (std::strcmp(a, "--only") == 0 && i + 1 < argc)
      flags.only = argv[++i];
    else if (std::strncmp(a, "--only=", 7) == 0)
      flags.only = a + 7;
    else if (std::strncmp(a, "--groups=", 9) == 0)
      flags.options.agg_groups = uint32_t(std::strtoul(a + 9, nullptr, 10));
    else if (std::strncmp(a, "--reps=", 7) == 0)
      flags.options.reps = std::max(5, std::atoi(a + 7));
    else
      return false;
  }
  if (flags.only == "core") flags.only = kCoreRegex;
  if (flags.options.profile) flags.options.reps = 1;
  return true;
}

void PrintTable(const BenchContext& ctx, const cudaDeviceProp& prop) {
  std::printf("\ngpujoin-bench on %s (%d SMs), median of %d reps after warm-up%s\n", prop.name,
              prop.multiProcessorCount, ctx.options.reps,
              ctx.options.quick ? " [--quick sizes]" : "");
  std::printf("%-52s %12s %10s %12s %9s %8s  %-18s %s\n", "operation", "rows", "ms", "Grows/s",
              "GB/s", "of copy", "target", "met");
  int met = 0, missed = 0;
  for (const Row& r : ctx.rows) {
    const double rate = r.n / (r.ms * 1e-3);
    const double bps = r.bytes / (r.ms * 1e-3);
    const double frac = bps / ctx.copy_bps;
    std::string verdict;
    if (r.target_kind != 0) {
      bool ok = false;
      if (r.target_kind == 1) ok = rate >= r.target_value;
      if (r.target_kind == 2) ok = frac >= r.target_value;
      if (r.target_kind == 3) ok = rate >= r.target_value * r.reference_rate;
      verdict = ok ? "yes" : "NO";
      (ok ? met : missed)++;
    }
    std::printf("%-52s %12.0f %10.3f %12.2f %9.0f %7.0f%%  %-18s %s\n", r.name.c_str(), r.n, r.ms,
                rate / 1e9, bps / 1e9, frac * 100, r.target.c_str(), verdict.c_str());
  }
  std::printf(
      "\nbuild phases, ms (median of %d; direct: clear | insert | finalise; "
      "tiles: words and their sort by tile | starts, reduction of large tiles, tile sort, "
      "carries, placement | fallback launches, idle unless the build fell back)\n",
      ctx.options.reps);
  std::printf("%-44s %9s %9s %9s %9s\n", "build", "phase 1", "phase 2", "phase 3", "total");
  for (const PhaseTimes& p : ctx.phases)
    std::printf("%-44s %9.3f %9.3f %9.3f %9.3f\n", p.name.c_str(), p.phase[0], p.phase[1],
                p.phase[2], p.total);
  std::printf("targets met: %d, missed: %d; output checks failed: %d\n", met, missed, ctx.failures);
}

int Main(int argc, char** argv) {
  Flags flags;
  if (!Parse(argc, argv, flags)) {
    Usage();
    return 2;
  }
  if (flags.list) {
    for (const Benchmark& b : kBenchmarks) std::printf("%-16s %s\n", b.name, b.what);
    return 0;
  }
  std::regex only;
  try {
    only = std::regex(flags.only.empty() ? "." : flags.only);
  } catch (const std::regex_error& e) {
    std::fprintf(stderr, "gpujoin-bench: --only %s: %s\n", flags.only.c_str(), e.what());
    return 2;
  }
  bool any = false;
  for (const Benchmark& b : kBenchmarks) any |= std::regex_search(b.name, only);
  if (!any) {
    std::fprintf(stderr, "gpujoin-bench: --only %s matches no benchmark (see --list)\n",
                 flags.only.c_str());
    return 2;
  }
  int devices = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "gpujoin-bench: no CUDA device (%s); --list works without one\n",
                 e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    return 2;
  }
  BenchContext ctx;
  ctx.options = flags.options;
  ctx.shift = ctx.options.quick ? 4 : 0;
  const int device = 0;
  CHECK_CUDA(cudaSetDevice(device));
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, device));
  CHECK_CUDA(cudaStreamCreateWithFlags(&ctx.stream, cudaStreamNonBlocking));
  // The memory pool keeps freed transient buffers as in the CUDA backend
  // (cuda_backend.cpp): a build's buffer is recycled instead of being mapped
  // again on every repetition.
  CHECK_CUDA(gd::KeepTransientMemory(device));
  for (const Benchmark& b : kBenchmarks) {
    const bool selected = b.run == RunCopy || std::regex_search(b.name, only);
    if (selected && (b.in_profile || !ctx.options.profile)) b.run(ctx);
  }
  PrintTable(ctx, prop);
  CHECK_CUDA(cudaStreamDestroy(ctx.stream));
  return ctx.failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace gpujoin::bench

int main(int argc, char** argv) { return gpujoin::bench::Main(argc, argv); }
