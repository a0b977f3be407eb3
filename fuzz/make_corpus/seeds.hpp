// fuzz_make_corpus: the seed corpus of every fuzz target, one file per
// target's seed set (make_corpus/<target>.cpp); this header holds the writer
// and the request builders several seed sets share.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "fuzz_support.hpp"
#include "wire/column_codec.hpp"

namespace gpujoin::fuzz::corpus {

namespace fs = std::filesystem;

/// Writes seed files DIR/<target>/<name> and counts them.
class Writer {
 public:
  explicit Writer(fs::path root) : root_(std::move(root)) {}

  void Put(const std::string& target, const std::string& name, const std::string& bytes) {
    const fs::path dir = root_ / target;
    fs::create_directories(dir);
    std::ofstream out(dir / name, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    FUZZ_CHECK(out.good(), "cannot write " + (dir / name).string());
    ++count_;
  }
  int count() const { return count_; }

 private:
  fs::path root_;
  int count_ = 0;
};

/// The little-endian packed bytes of a uint32 or float column.
inline std::string Packed(const std::vector<uint32_t>& v) { return server::PackColumn<uint32_t>(v); }

inline std::string PackedF(const std::vector<float>& v) { return server::PackColumn<float>(v); }

/// Sets `c` to `keys`, packed or (as_values) as repeated values.
inline void SetKeys64(v1::U64Column* c, const std::vector<uint64_t>& keys, bool as_values = false) {
  if (as_values) {
    for (uint64_t k : keys) c->mutable_values()->add_v(k);
  } else {
    *c->mutable_packed() = server::PackColumn<uint64_t>(keys);
  }
}

inline void SetKeys(v1::U32Column* c, const std::vector<uint32_t>& keys, bool as_values = false) {
  if (as_values) {
    auto* list = c->mutable_values();
    for (uint32_t k : keys) list->add_v(k);
  } else {
    *c->mutable_packed() = Packed(keys);
  }
}

/// A lookup request of uint32 keys, batch 17.
inline v1::LookupRequest Lookup(const std::string& index, const std::vector<uint32_t>& keys,
                         bool probes = false, uint64_t max_probes = 0) {
  v1::LookupRequest r;
  r.set_index(index);
  SetKeys(r.mutable_keys(), keys);
  r.set_want_probes(probes);
  r.set_max_probe_count(max_probes);
  r.set_batch_id(17);
  return r;
}

/// `messages` framed as the stream targets read them (AppendFrame each).
inline std::string Frames(const std::vector<std::string>& messages) {
  std::string out;
  for (const std::string& m : messages) AppendFrame(m, &out);
  return out;
}

// The seed sets, one per target.
void ColumnCodec(Writer& w);
void LookupWire(Writer& w);
void LookupTarget(Writer& w);
void JoinTarget(Writer& w);
void AggregateTarget(Writer& w);
void HashTarget(Writer& w);
void BuildTarget(Writer& w);
void GraphTarget(Writer& w);
void DataFilesTarget(Writer& w);

}  // namespace gpujoin::fuzz::corpus
