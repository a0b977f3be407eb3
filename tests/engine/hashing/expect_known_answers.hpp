// One check of the checked-in known answers (known_answers.hpp), shared by the
// host, device and backend hash tests so that each only says how it hashes.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "hash_test_util.hpp"
#include "known_answers.hpp"

namespace gpujoin::engine::testing {

/// Hashes every known-answer case with `hash` (callable as
/// `absl::StatusOr<HashOutput>(const std::vector<HashColumn>&, HashBits)`) at 32 and
/// 64 bits and expects the checked-in answer: the row count, then per row the
/// validity and the hash (0 for a null row). Fails the current test otherwise.
template <typename Hash>
void ExpectKnownAnswers(Hash hash) {
  for (const auto& ka : KnownAnswerCases()) {
    for (HashBits bits : {HashBits::k32, HashBits::k64}) {
      SCOPED_TRACE(ka.name + (bits == HashBits::k32 ? " hash32" : " hash64"));
      const absl::StatusOr<HashOutput> out = hash(Views(ka.columns), bits);
      ASSERT_TRUE(out.ok()) << out.status();
      std::vector<std::optional<uint64_t>> expected(ka.expected64);
      if (bits == HashBits::k32) expected.assign(ka.expected32.begin(), ka.expected32.end());
      ASSERT_EQ(out->rows, expected.size());
      for (size_t r = 0; r < expected.size(); ++r) {
        EXPECT_EQ(out->Valid(r), expected[r].has_value()) << "row " << r;
        EXPECT_EQ(out->hashes[r], expected[r].value_or(0)) << "row " << r;
      }
    }
  }
}

}  // namespace gpujoin::engine::testing
