// Fuzz target: the column decoders of server/src/wire/column_codec.cpp.
//
// Input: one mode byte, then bytes used three ways: (1) as packed column bytes,
// placed at the misalignment the mode byte picks, for DecodePackedBytes of uint32,
// uint64, int32 and float; (2) parsed as a U32Column, U64Column and F32Column
// message for DecodeU32Column / DecodeU64Column / DecodeF32Column with every
// presence; (3) parsed as a LookupRequest (a message with both key columns) for
// DecodeKeyColumns and TakeKeys of both key words. Checked: a decode
// succeeds exactly when the documented rules allow it (INVALID_ARGUMENT naming
// the field otherwise); a decoded column holds exactly the request's values;
// aligned packed bytes are borrowed, unaligned ones copied to aligned storage;
// PackColumn / UnpackColumn / PackedOutput round-trip.
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fuzz_check.hpp"
#include "wire/column_codec.hpp"

namespace gpujoin::fuzz {
namespace {

using server::DecodedColumn;
using server::Presence;

template <typename T>
std::string TypeName() {
  if constexpr (std::is_same_v<T, uint32_t>) return "uint32";
  if constexpr (std::is_same_v<T, uint64_t>) return "uint64";
  if constexpr (std::is_same_v<T, int32_t>) return "int32";
  return "float";
}

// `column` holds exactly the values in `bytes` (compared bitwise: floats may be NaN).
template <typename T>
void CheckHolds(const DecodedColumn<T>& column, std::string_view bytes, const std::string& what) {
  FUZZ_CHECK(column.present(), what + ": decoded column is not present");
  FUZZ_CHECK(column.size() * sizeof(T) == bytes.size(),
             absl::StrCat(what, ": ", column.size(), " values from ", bytes.size(), " bytes"));
  FUZZ_CHECK(column.size() == column.span().size(), what + ": size() and span() disagree");
  if (!bytes.empty()) {
    FUZZ_CHECK(reinterpret_cast<uintptr_t>(column.span().data()) % alignof(T) == 0,
               what + ": decoded values are not aligned");
    FUZZ_CHECK(std::memcmp(column.span().data(), bytes.data(), bytes.size()) == 0,
               what + ": decoded values differ from the bytes");
  }
}

template <typename T>
void CheckPacked(std::string_view bytes) {
  const std::string what = absl::StrCat(
      "DecodePackedBytes<", TypeName<T>(), ">(", bytes.size(),
      " bytes at address mod 8 = ", reinterpret_cast<uintptr_t>(bytes.data()) % 8, ")");
  auto decoded = server::DecodePackedBytes<T>(bytes, "col.packed");
  if (bytes.size() % sizeof(T) != 0) {
    FUZZ_CHECK(!decoded.ok(), what + ": a length that is not a multiple of the width decoded");
    FUZZ_CHECK(decoded.status().code() == absl::StatusCode::kInvalidArgument &&
                   MessageHas(decoded.status(), "col.packed: byte length"),
               what + ": " + Describe(decoded.status()));
    return;
  }
  FUZZ_CHECK(decoded.ok(), what + ": " + Describe(decoded.status()));
  CheckHolds(*decoded, bytes, what);
  const bool aligned = reinterpret_cast<uintptr_t>(bytes.data()) % alignof(T) == 0;
  if (!bytes.empty()) {
    const bool borrowed = reinterpret_cast<const char*>(decoded->span().data()) == bytes.data();
    FUZZ_CHECK(borrowed == aligned,
               absl::StrCat(what, aligned ? ": aligned bytes were copied"
                                          : ": unaligned bytes were borrowed"));
  }
  // A move keeps the view valid (owned storage moves with it).
  DecodedColumn<T> moved = std::move(*decoded);
  CheckHolds(moved, bytes, what + " after a move");
  // Round trips.
  FUZZ_CHECK(server::PackColumn<T>(moved.span()) == bytes, what + ": PackColumn differs");
  const std::vector<T> unpacked = server::UnpackColumn<T>(std::string(bytes));
  FUZZ_CHECK(
      unpacked.size() == moved.size() &&
          (unpacked.empty() || std::memcmp(unpacked.data(), bytes.data(), bytes.size()) == 0),
      what + ": UnpackColumn differs");
}

// DecodeU32Column / DecodeF32Column against the documented rules, for one
// parsed column, has_<column>() and presence.
template <typename T, typename Column, typename Decode>
void CheckColumn(const Column& column, bool has_column, Presence presence, Decode decode) {
  const std::string what =
      absl::StrCat("Decode<", TypeName<T>(), ">Column(has=", has_column,
                   presence == Presence::kRequired ? ", required" : ", optional", ", packed ",
                   column.packed().size(), " bytes, values ",
                   column.has_values() ? absl::StrCat(column.values().v_size()) : "unset", ")");
  auto decoded = decode(has_column, column, "batches[3].keys", presence);
  const bool has_packed = has_column && !column.packed().empty();
  const bool has_values = has_column && column.has_values();
  auto expect_error = [&](std::string_view text) {
    FUZZ_CHECK(!decoded.ok(), what + ": decoded, expected an error naming " + std::string(text));
    FUZZ_CHECK(decoded.status().code() == absl::StatusCode::kInvalidArgument &&
                   MessageHas(decoded.status(), text),
               what + ": " + Describe(decoded.status()));
  };
  if (has_packed && has_values) return expect_error("batches[3].keys: both");
  if (!has_packed && !has_values) {
    if (presence == Presence::kRequired) return expect_error("batches[3].keys: neither");
    FUZZ_CHECK(decoded.ok() && !decoded->present() && decoded->size() == 0,
               what + ": an absent optional column " +
                   (decoded.ok() ? "decoded as present" : Describe(decoded.status())));
    return;
  }
  if (has_packed) {
    if (column.packed().size() % sizeof(T) != 0) {
      return expect_error("batches[3].keys.packed: byte length");
    }
    FUZZ_CHECK(decoded.ok(), what + ": " + Describe(decoded.status()));
    CheckHolds(*decoded, column.packed(), what);
    return;
  }
  FUZZ_CHECK(decoded.ok(), what + ": " + Describe(decoded.status()));
  const auto& v = column.values().v();
  CheckHolds(*decoded,
             std::string_view(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T)), what);
}

template <typename T, typename Column, typename Decode>
void CheckParsedColumn(std::string_view bytes, Decode decode) {
  Column column;
  if (!column.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return;
  for (bool has : {false, true}) {
    for (Presence p : {Presence::kRequired, Presence::kOptional}) {
      CheckColumn<T>(column, has, p, decode);
    }
  }
}

// DecodeKeyColumns and TakeKeys (both key words, required and optional) on a
// message that carries keys: the two columns decode as optional ones; the
// column of the other width is refused naming it; a required column of the
// index's width must be set; the taken column holds its values.
void CheckKeyColumns(std::string_view bytes) {
  v1::LookupRequest request;
  if (!request.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return;
  auto decodes = [](bool has, const auto& c, size_t width) {
    return !has || ((c.packed().empty() || !c.has_values()) && c.packed().size() % width == 0);
  };
  auto present = [](bool has, const auto& c) {
    return has && (!c.packed().empty() || c.has_values());
  };
  auto columns = server::DecodeKeyColumns(request, "batches[1].");
  const bool ok = decodes(request.has_keys(), request.keys(), 4) &&
                  decodes(request.has_keys64(), request.keys64(), 8);
  FUZZ_CHECK(columns.ok() == ok, "DecodeKeyColumns: " + Describe(columns.status()));
  if (!ok) {
    FUZZ_CHECK(columns.status().code() == absl::StatusCode::kInvalidArgument &&
                   MessageHas(columns.status(), "batches[1].keys"),
               "DecodeKeyColumns: " + Describe(columns.status()));
    return;
  }
  const bool narrow = present(request.has_keys(), request.keys());
  const bool wide = present(request.has_keys64(), request.keys64());
  for (bool take_wide : {false, true}) {
    for (server::Presence p : {server::Presence::kRequired, server::Presence::kOptional}) {
      auto copy = server::DecodeKeyColumns(request, "batches[1].");
      const std::string what =
          absl::StrCat("TakeKeys<", take_wide ? "uint64" : "uint32", ">(",
                       p == server::Presence::kRequired ? "required" : "optional", ", keys ",
                       narrow, ", keys64 ", wide, ")");
      auto check = [&](const auto& taken, bool present_here, const std::string& bytes_here) {
        if (take_wide ? narrow : wide) {
          FUZZ_CHECK(!taken.ok() && taken.status().code() == absl::StatusCode::kInvalidArgument &&
                         MessageHas(taken.status(),
                                    take_wide ? "batches[1].keys: index \"ix\" has uint64"
                                              : "batches[1].keys64: index \"ix\" has uint32"),
                     what + ": " + Describe(taken.status()));
          return;
        }
        if (!present_here && p == server::Presence::kRequired) {
          FUZZ_CHECK(!taken.ok() && MessageHas(taken.status(), "neither"),
                     what + ": " + Describe(taken.status()));
          return;
        }
        FUZZ_CHECK(taken.ok(), what + ": " + Describe(taken.status()));
        if (!present_here) {
          FUZZ_CHECK(!taken->present(), what + ": an absent column came back present");
          return;
        }
        CheckHolds(*taken, bytes_here, what);
      };
      if (take_wide) {
        const auto& c = request.keys64();
        const std::string values =
            c.packed().empty() ? std::string(reinterpret_cast<const char*>(c.values().v().data()),
                                             c.values().v_size() * 8)
                               : c.packed();
        check(server::TakeKeys<uint64_t>(*copy, "batches[1].", "ix", p), wide, values);
      } else {
        const auto& c = request.keys();
        const std::string values =
            c.packed().empty() ? std::string(reinterpret_cast<const char*>(c.values().v().data()),
                                             c.values().v_size() * 4)
                               : c.packed();
        check(server::TakeKeys<uint32_t>(*copy, "batches[1].", "ix", p), narrow, values);
      }
    }
  }
}

// PackedOutput writes in place (or through scratch) and Finish(rows) truncates.
void CheckPackedOutput(std::string_view bytes, uint8_t mode) {
  const size_t rows = std::min<size_t>(bytes.size() / 4, 256);
  const size_t keep = rows == 0 ? 0 : mode % (rows + 1);
  std::string dest = "stale contents";
  server::PackedOutput<uint32_t> out(&dest, rows);
  FUZZ_CHECK(out.span().size() == rows,
             absl::StrCat("PackedOutput span of ", out.span().size(), " for ", rows, " rows"));
  if (rows != 0) std::memcpy(out.span().data(), bytes.data(), rows * 4);
  out.Finish(keep);
  FUZZ_CHECK(dest == bytes.substr(0, keep * 4),
             absl::StrCat("PackedOutput of ", rows, " rows finished at ", keep, " holds ",
                          dest.size(), " bytes, not the values written"));
}

}  // namespace
}  // namespace gpujoin::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpujoin;
  using namespace gpujoin::fuzz;
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const std::string_view rest = AsView(data + 1, size - 1);

  // Packed bytes at misalignment 0..7 inside an 8-byte aligned buffer.
  const size_t shift = mode & 7;
  std::vector<uint64_t> storage((shift + rest.size()) / 8 + 1);
  char* base = reinterpret_cast<char*>(storage.data()) + shift;
  if (!rest.empty()) std::memcpy(base, rest.data(), rest.size());
  const std::string_view placed(base, rest.size());
  CheckPacked<uint32_t>(placed);
  CheckPacked<int32_t>(placed);
  CheckPacked<float>(placed);
  CheckPacked<uint64_t>(placed);

  CheckParsedColumn<uint32_t, v1::U32Column>(rest, server::DecodeU32Column);
  CheckParsedColumn<uint64_t, v1::U64Column>(rest, server::DecodeU64Column);
  CheckParsedColumn<float, v1::F32Column>(rest, server::DecodeF32Column);
  CheckKeyColumns(rest);
  CheckPackedOutput(rest, mode);
  return 0;
}
