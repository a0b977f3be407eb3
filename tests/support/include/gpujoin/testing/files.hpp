// Whole files as byte strings, for tests that read an output back or damage a
// file on purpose. Header only (the C++ library).
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace gpujoin::testing {

/// The whole file at `path`, as bytes ("" when it cannot be read).
inline std::string Slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Makes `bytes` the whole file at `path` (created, or truncated first).
inline void Spill(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

}  // namespace gpujoin::testing
