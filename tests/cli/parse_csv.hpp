// Comma-separated test tables for the CLI unit tests.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <utility>

#include "input/table.hpp"

namespace gpujoin::cli::testing {

/// `text` parsed as a comma-separated table with a header row, named `source`
/// in messages (e.g. "t.csv:3: ..."); a parse error is a test failure.
inline Table Csv(std::string_view text, std::string source = "t.csv") {
  auto t = ParseDelimited(text, ',', std::move(source));
  EXPECT_TRUE(t.ok()) << t.status();
  return *std::move(t);
}

}  // namespace gpujoin::cli::testing
