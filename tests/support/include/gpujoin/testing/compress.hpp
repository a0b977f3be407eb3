// gzip and zstd framing of test inputs (what `gzip` and `zstd` write), for the
// CLI's compressed-input tests. Header only: include it from a test that links
// zlib and libzstd.
#pragma once

#include <gtest/gtest.h>
#include <zlib.h>
#include <zstd.h>

#include <string>

namespace gpujoin::testing {

/// `in` as one gzip member (deflate level 6); a zlib failure is a test failure.
inline std::string Gzip(const std::string& in) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, in.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

/// `in` as one zstd frame (level 3); a zstd failure is a test failure.
inline std::string Zstd(const std::string& in) {
  std::string out(ZSTD_compressBound(in.size()), '\0');
  const size_t n = ZSTD_compress(out.data(), out.size(), in.data(), in.size(), 3);
  EXPECT_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

}  // namespace gpujoin::testing
