// The values of `gpujoin agg`: the value type --value-type auto infers from the
// data, value columns converted to the stream's type, and typed result words
// spelled as cells.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpujoin/client/client.hpp"
#include "input/table.hpp"

namespace gpujoin::cli {

/// Decimal text as a double (spaces around and a leading '+' allowed);
/// nullopt for anything else.
std::optional<double> ParseF64Text(std::string_view s);

/// Whether a cell is null or only spaces and tabs (a missing value).
bool BlankCell(const Cell& c);

/// The type `--value-type auto` gives column `col`: int64 when every non-null
/// cell is an integer that fits it, uint64 when they all fit uint64 and one is
/// above INT64_MAX, else float64 (decimal text, as DuckDB and pandas read it;
/// float32, the reference path, only when asked for).
std::string InferValueType(const Table& t, size_t col);

/// Column `col` as values of V (double, int32_t, int64_t, uint32_t or
/// uint64_t); a null cell is 0 with its row masked out (`present` 0). A cell
/// that is not a V is a usage error (CliError) naming its position and `type`.
template <typename V>
std::vector<V> TypedValues(const Table& t, size_t col, std::string_view type,
                           std::vector<uint32_t>& present);

/// The cell of one typed result word (null for NaN).
Cell TypedCell(client::ColumnType type, uint64_t word);

}  // namespace gpujoin::cli
