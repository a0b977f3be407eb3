// Validation of HashNode (shared by every backend) and the CPU row hash: flat
// columns through the fused per-row path of row_hash.hpp, nested and dictionary
// columns through one recursive column-wise hasher (HashTree) whose leaves are
// the same per-value functions.
#include "hashing/hash_host.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"
#include "hashing/row_hash.hpp"

namespace gpujoin::engine::detail {

namespace {

// Physical rows offset .. offset + length - 1 must be addressable; the limit keeps
// every later byte computation (rows * 16, bits) free of overflow.
constexpr uint64_t kMaxRows = uint64_t{1} << 56;

// True when a + b overflows or exceeds `limit`.
bool RangeExceeds(uint64_t a, uint64_t b, uint64_t limit) { return a > limit || b > limit - a; }

std::string TypeName(ColumnType t) { return std::string(ColumnTypeName(t)); }

// Offsets (int32 or int64) of a binary or list column: entries offset .. offset +
// length must exist, be non-negative, non-decreasing and end at most at `limit`
// (`limit_what` names it in the message). Entries outside are not read.
template <typename O>
absl::Status CheckOffsets(const std::string& name, std::span<const O> offsets,
                          const std::string& field, const HashColumn& c, uint64_t limit,
                          const std::string& limit_what, const std::string& unit) {
  if (c.length == 0) return absl::OkStatus();
  const uint64_t end_row = c.offset + c.length;
  if (offsets.size() < end_row + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": ", field, " has ", offsets.size(), " entries, needs at least ",
                     end_row + 1, " (offset ", c.offset, " + length ", c.length, " + 1)"));
  }
  const O first = offsets[c.offset];
  if (first < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": ", field, "[", c.offset, "] is negative (", first, ")"));
  }
  for (uint64_t r = c.offset; r < end_row; ++r) {
    if (offsets[r + 1] < offsets[r]) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": ", field, " decrease at row ", r - c.offset, ": ", field, "[", r,
                       "] = ", offsets[r], " > ", field, "[", r + 1, "] = ", offsets[r + 1]));
    }
  }
  const O last = offsets[end_row];
  if (static_cast<uint64_t>(last) > limit) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", field, "[", end_row, "] = ", last,
                                                   " is past the end of ", limit_what, " (", limit,
                                                   " ", unit, ")"));
  }
  return absl::OkStatus();
}

// Validates one column tree. `name` is how messages name this column ("node 0
// (hash): column 1 (struct)" at the top, "node 0 (hash): columns[1].children[0]
// (int32)" below); `path` is its wire path ("columns[1]", ...). Every column is
// checked over its own rows [offset, offset + length), children over their whole
// length, whatever part of them the parent reads.
class TreeValidator {
 public:
  explicit TreeValidator(std::string_view where) : where_(where) {}

  absl::Status Check(const HashColumn& c, const std::string& name, const std::string& path,
                     uint32_t depth) {
    if (!IsKnownColumnType(c.type)) {
      return Invalid(name, absl::StrCat("unknown column type ", static_cast<int>(c.type)));
    }
    if (depth > kMaxHashNestingDepth) {
      return Invalid(name, absl::StrCat("nesting is deeper than ", kMaxHashNestingDepth,
                                        " levels (at ", path, ")"));
    }
    if (RangeExceeds(c.offset, c.length, kMaxRows)) {
      return Invalid(
          name, absl::StrCat("offset ", c.offset, " + length ", c.length, " exceeds 2^56 rows"));
    }
    const uint64_t end_row = c.offset + c.length;
    const int want_children = ChildCount(c.type);
    if (want_children >= 0 && c.children.size() != static_cast<size_t>(want_children)) {
      return Invalid(name, absl::StrCat("has ", c.children.size(), " children, ", TypeName(c.type),
                                        " takes ", want_children));
    }
    if (c.byte_width != 0 && c.type != ColumnType::kFixedSizeBinary &&
        c.type != ColumnType::kFixedSizeList) {
      return Invalid(name, absl::StrCat("byte_width is ", c.byte_width,
                                        "; only fixed_size_binary and fixed_size_list take one"));
    }
    const bool takes_offsets =
        IsBinaryType(c.type) || c.type == ColumnType::kList || c.type == ColumnType::kMap;
    const bool takes_large = IsLargeBinaryType(c.type) || c.type == ColumnType::kLargeList;
    if (!takes_offsets && !c.offsets.empty()) {
      return Invalid(name, absl::StrCat(FixedWidth(c.type) != 0 ? "offsets must be empty for a "
                                                                  "fixed-width column, got "
                                                                : "offsets must be empty, got ",
                                        c.offsets.size()));
    }
    if (!takes_large && !c.large_offsets.empty()) {
      return Invalid(name, absl::StrCat("large_offsets must be empty, got ", c.large_offsets.size(),
                                        " (only large_binary, large_string and large_list)"));
    }
    const bool takes_data = c.type != ColumnType::kNull && c.type != ColumnType::kStruct &&
                            c.type != ColumnType::kList && c.type != ColumnType::kLargeList &&
                            c.type != ColumnType::kFixedSizeList && c.type != ColumnType::kMap;
    if (!takes_data && !c.data.empty()) {
      return Invalid(name, absl::StrCat("data must be empty, got ", c.data.size(), " bytes"));
    }
    if (!c.validity.empty() && c.validity.size() < BitmapBytes(end_row)) {
      return Invalid(name,
                     absl::StrCat("validity has ", c.validity.size(), " bytes, needs at least ",
                                  BitmapBytes(end_row), " for bits up to offset ", c.offset,
                                  " + length ", c.length));
    }

    // Children first: the parent's checks below use their lengths.
    for (size_t j = 0; j < c.children.size(); ++j) {
      const HashColumn& child = c.children[j];
      // Types without buffers (null, struct{}, fixed_size_binary(0)) can declare
      // any length at no cost to the sender; this bounds the work they cause.
      child_rows_ += child.length;
      if (child.length > kMaxHashChildRows || child_rows_ > kMaxHashChildRows) {
        return Invalid(name, absl::StrCat("the children of this node's columns have more than ",
                                          kMaxHashChildRows, " rows in all (at ", path,
                                          ".children[", j, "], ", child.length, " rows)"));
      }
      const std::string child_path = absl::StrCat(path, ".children[", j, "]");
      const std::string child_name =
          absl::StrCat(where_, ": ", child_path, " (", TypeName(child.type), ")");
      GPUJOIN_RETURN_IF_ERROR(Check(child, child_name, child_path, depth + 1));
    }

    switch (c.type) {
      case ColumnType::kNull:
        return absl::OkStatus();
      case ColumnType::kBool:
        return NeedData(
            c, name, BitmapBytes(end_row),
            absl::StrCat("a bitmap of offset ", c.offset, " + length ", c.length, " bits"));
      case ColumnType::kBinary:
      case ColumnType::kString:
        return CheckOffsets<int32_t>(name, c.offsets, "offsets", c, c.data.size(), "data", "bytes");
      case ColumnType::kLargeBinary:
      case ColumnType::kLargeString:
        return CheckOffsets<int64_t>(name, c.large_offsets, "large_offsets", c, c.data.size(),
                                     "data", "bytes");
      case ColumnType::kFixedSizeBinary:
        return NeedWidth(c, name, c.byte_width);
      case ColumnType::kDictionary:
        return CheckDictionary(c, name, path);
      case ColumnType::kStruct:
        for (size_t j = 0; j < c.children.size(); ++j) {
          if (c.children[j].length < end_row) {
            return Invalid(
                name, absl::StrCat("field ", path, ".children[", j, "] has ", c.children[j].length,
                                   " rows, needs at least ", end_row, " (the struct's offset ",
                                   c.offset, " + length ", c.length, ")"));
          }
        }
        return absl::OkStatus();
      case ColumnType::kList:
      case ColumnType::kMap: {
        uint64_t limit = c.children[0].length;
        if (c.type == ColumnType::kMap) limit = std::min(limit, c.children[1].length);
        return CheckOffsets<int32_t>(
            name, c.offsets, "offsets", c, limit,
            absl::StrCat(
                path, c.type == ColumnType::kMap ? ".children (keys and items)" : ".children[0]"),
            "rows");
      }
      case ColumnType::kLargeList:
        return CheckOffsets<int64_t>(name, c.large_offsets, "large_offsets", c,
                                     c.children[0].length, absl::StrCat(path, ".children[0]"),
                                     "rows");
      case ColumnType::kFixedSizeList: {
        const uint64_t size = c.byte_width;
        if (size != 0 && end_row > c.children[0].length / size) {
          return Invalid(name, absl::StrCat(path, ".children[0] has ", c.children[0].length,
                                            " rows, needs at least (offset ", c.offset,
                                            " + length ", c.length, ") * list size ", size));
        }
        return absl::OkStatus();
      }
      default:
        return NeedWidth(c, name, FixedWidth(c.type));
    }
  }

 private:
  static absl::Status Invalid(const std::string& name, const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", what));
  }

  static absl::Status NeedData(const HashColumn& c, const std::string& name, uint64_t need,
                               const std::string& why) {
    if (c.data.size() < need) {
      return Invalid(name, absl::StrCat("data has ", c.data.size(), " bytes, needs at least ", need,
                                        " (", why, ")"));
    }
    return absl::OkStatus();
  }

  // Fixed-width values of `width` bytes (0 allowed: no data is read).
  static absl::Status NeedWidth(const HashColumn& c, const std::string& name, uint64_t width) {
    const uint64_t end_row = c.offset + c.length;
    if (width != 0 && end_row > UINT64_MAX / width) {
      return Invalid(name, absl::StrCat("(offset ", c.offset, " + length ", c.length, ") * ", width,
                                        " bytes overflows"));
    }
    if (c.data.size() < end_row * width) {
      return Invalid(name, absl::StrCat("data has ", c.data.size(), " bytes, needs at least ",
                                        end_row * width, " (offset ", c.offset, " + length ",
                                        c.length, ") * ", width, " bytes"));
    }
    return absl::OkStatus();
  }

  // Indices of the index type, every valid one within the dictionary's rows; the
  // dictionary holds a flat type (Arrow: a dictionary of nested values is not
  // implemented) or null.
  absl::Status CheckDictionary(const HashColumn& c, const std::string& name,
                               const std::string& path) {
    if (!IsDictionaryIndexType(c.index_type)) {
      return Invalid(name, absl::StrCat("index_type ", TypeName(c.index_type),
                                        " is not an integer type (int8 .. uint64)"));
    }
    const HashColumn& dict = c.children[0];
    if (!IsFlatHashType(dict.type)) {
      return Invalid(name, absl::StrCat("dictionary values (", path, ".children[0]) of type ",
                                        TypeName(dict.type),
                                        " are not supported: values must be a flat type"));
    }
    GPUJOIN_RETURN_IF_ERROR(NeedWidth(c, name, FixedWidth(c.index_type)));
    for (uint64_t r = 0; r < c.length; ++r) {
      const uint64_t physical = c.offset + r;
      if (!c.validity.empty() && !BitmapBit(c.validity.data(), physical)) continue;
      const int64_t index = LoadIndex(c.data.data(), c.index_type, physical);
      const bool unsigned_past = c.index_type == ColumnType::kUint64 && index < 0;
      if (index < 0 || static_cast<uint64_t>(index) >= dict.length) {
        return Invalid(name, absl::StrCat("index ",
                                          unsigned_past ? absl::StrCat(static_cast<uint64_t>(index))
                                                        : absl::StrCat(index),
                                          " at row ", r, " is outside the dictionary ", path,
                                          ".children[0] (", dict.length, " rows)"));
      }
    }
    return absl::OkStatus();
  }

  std::string where_;
  uint64_t child_rows_ = 0;
};

// Hashes rows [first, first + rows) of flat columns; `first` is a multiple of 8.
template <typename H>
void HashRowRange(const std::vector<HashView>& views, uint64_t first, uint64_t rows, H* out,
                  uint8_t* out_validity) {
  const uint32_t n = static_cast<uint32_t>(views.size());
  const uint64_t end = first + rows;
  uint64_t row = first;
  // Eight rows per output validity byte; the last byte's unused high bits are 0.
  for (uint64_t byte = first / 8; row < end; ++byte) {
    uint8_t bits = 0;
    for (int b = 0; b < 8 && row < end; ++b, ++row) {
      if (HashRow<H>(views.data(), n, row, out + row)) bits |= static_cast<uint8_t>(1u << b);
    }
    out_validity[byte] = bits;
  }
}

// Column-wise hash of any column tree: HashTree<H>::Rows(c, first, rows, ...)
// writes the hash (0 where null) and validity (0/1) of logical rows [first,
// first + rows) of `c`. Nested types recurse into the child rows they address,
// hashing each needed child range once.
template <typename H>
struct HashTree {
  using Hashes = std::vector<H>;
  using Valid = std::vector<uint8_t>;

  static void Rows(const HashColumn& c, uint64_t first, uint64_t rows, H* hash, uint8_t* valid) {
    if (rows == 0) return;
    if (IsFlatHashType(c.type)) {
      const HashView v = HostView(c);
      for (uint64_t i = 0; i < rows; ++i) {
        valid[i] = ColumnRowValid(v, first + i) ? 1 : 0;
        hash[i] = valid[i] ? ColumnValueHash<H>(v, first + i) : 0;
      }
      return;
    }
    for (uint64_t i = 0; i < rows; ++i) {
      valid[i] = c.validity.empty() || BitmapBit(c.validity.data(), c.offset + first + i);
    }
    switch (c.type) {
      case ColumnType::kDictionary:
        return Dictionary(c, first, rows, hash, valid);
      case ColumnType::kStruct:
        return Struct(c, first, rows, hash, valid);
      case ColumnType::kFixedSizeList: {
        const uint64_t base = c.offset + first, size = c.byte_width;
        return FoldRows(
            c, [&](uint64_t i) { return (base + i) * size; }, rows, hash, valid);
      }
      case ColumnType::kLargeList: {
        const int64_t* o = c.large_offsets.data() + c.offset + first;
        return FoldRows(
            c, [&](uint64_t i) { return static_cast<uint64_t>(o[i]); }, rows, hash, valid);
      }
      default: {  // kList, kMap
        const int32_t* o = c.offsets.data() + c.offset + first;
        return FoldRows(
            c, [&](uint64_t i) { return static_cast<uint64_t>(o[i]); }, rows, hash, valid);
      }
    }
  }

  static H Fold(const H* hashes, const uint8_t* valid, uint64_t n) {
    ListFold<H> fold;
    for (uint64_t j = 0; j < n; ++j) fold.Add(valid[j] != 0, hashes[j]);
    return fold.Finish();
  }

  // Decodes each valid index and hashes the dictionary entry it names (a null
  // entry nulls the row), so equal values hash alike whatever the dictionary.
  static void Dictionary(const HashColumn& c, uint64_t first, uint64_t rows, H* hash,
                         uint8_t* valid) {
    const HashView dict = HostView(c.children[0]);
    for (uint64_t i = 0; i < rows; ++i) {
      hash[i] = 0;
      if (!valid[i]) continue;
      const auto index =
          static_cast<uint64_t>(LoadIndex(c.data.data(), c.index_type, c.offset + first + i));
      valid[i] = ColumnRowValid(dict, index) ? 1 : 0;
      if (valid[i]) hash[i] = ColumnValueHash<H>(dict, index);
    }
  }

  // Fields combine like the columns of a composite key; a null field (its own
  // validity as computed here, so at any depth) nulls the row.
  static void Struct(const HashColumn& c, uint64_t first, uint64_t rows, H* hash, uint8_t* valid) {
    if (c.children.empty()) {
      for (uint64_t i = 0; i < rows; ++i) hash[i] = valid[i] ? HashOfBytes<H>(nullptr, 0) : 0;
      return;
    }
    Hashes fh(rows);
    Valid fv(rows);
    for (size_t j = 0; j < c.children.size(); ++j) {
      Rows(c.children[j], c.offset + first, rows, fh.data(), fv.data());
      for (uint64_t i = 0; i < rows; ++i) {
        hash[i] = j == 0 ? fh[i] : CombineHash(hash[i], fh[i]);
        valid[i] &= fv[i];
      }
    }
    for (uint64_t i = 0; i < rows; ++i) {
      if (!valid[i]) hash[i] = 0;
    }
  }

  // Child rows hashed at once by a list fold: bounds the temporaries of each
  // nesting level whatever the lists' lengths.
  static constexpr uint64_t kChunk = uint64_t{1} << 14;

  // kList, kLargeList, kFixedSizeList (values = children[0]) and kMap (keys and
  // items folded separately over the same bounds, then combined): row i's
  // elements are child rows [begin_of(i), begin_of(i + 1)). Only the row's own
  // validity nulls it; null rows' elements are never hashed. Consecutive valid
  // rows are hashed together while their elements fit a chunk; a longer row is
  // folded chunk by chunk.
  template <typename BeginOf>
  static void FoldRows(const HashColumn& c, BeginOf begin_of, uint64_t rows, H* hash,
                       const uint8_t* valid) {
    const size_t folds = c.type == ColumnType::kMap ? 2 : 1;
    Hashes ch[2];
    Valid cv[2];
    uint64_t i = 0;
    while (i < rows) {
      if (!valid[i]) {
        hash[i++] = 0;
        continue;
      }
      const uint64_t b0 = begin_of(i);
      uint64_t j = i + 1;
      while (j < rows && valid[j] && begin_of(j + 1) - b0 <= kChunk) ++j;
      const uint64_t n = begin_of(j) - b0;
      for (size_t k = 0; k < folds; ++k) {
        ch[k].resize(std::min(n, kChunk));
        cv[k].resize(std::min(n, kChunk));
      }
      if (n <= kChunk) {
        for (size_t k = 0; k < folds; ++k) Rows(c.children[k], b0, n, ch[k].data(), cv[k].data());
        for (uint64_t r = i; r < j; ++r) {
          const uint64_t b = begin_of(r) - b0, e = begin_of(r + 1) - b0;
          hash[r] = Fold(ch[0].data() + b, cv[0].data() + b, e - b);
          if (folds == 2)
            hash[r] = CombineHash(hash[r], Fold(ch[1].data() + b, cv[1].data() + b, e - b));
        }
      } else {  // j == i + 1: one row longer than a chunk
        ListFold<H> fold[2];
        for (uint64_t s = 0; s < n; s += kChunk) {
          const uint64_t m = std::min(kChunk, n - s);
          for (size_t k = 0; k < folds; ++k) {
            Rows(c.children[k], b0 + s, m, ch[k].data(), cv[k].data());
            for (uint64_t x = 0; x < m; ++x) fold[k].Add(cv[k][x] != 0, ch[k][x]);
          }
        }
        hash[i] = fold[0].Finish();
        if (folds == 2) hash[i] = CombineHash(hash[i], fold[1].Finish());
      }
      i = j;
    }
  }
};

// Rows [first, first + rows) of a node with a nested or dictionary column, in
// blocks so the temporaries stay small; `first` is a multiple of 8.
template <typename H>
void HashTreeRange(const HashNode& node, uint64_t first, uint64_t rows, H* out,
                   uint8_t* out_validity) {
  constexpr uint64_t kBlock = 4096;  // a multiple of 8: blocks own whole validity bytes
  std::vector<H> h(kBlock), ch(kBlock);
  std::vector<uint8_t> v(kBlock), cv(kBlock);
  for (uint64_t b = first; b < first + rows; b += kBlock) {
    const uint64_t n = std::min(kBlock, first + rows - b);
    for (size_t j = 0; j < node.columns.size(); ++j) {
      HashTree<H>::Rows(node.columns[j], b, n, ch.data(), cv.data());
      for (uint64_t i = 0; i < n; ++i) {
        h[i] = j == 0 ? ch[i] : CombineHash(h[i], ch[i]);
        v[i] = j == 0 ? cv[i] : (v[i] & cv[i]);
      }
    }
    for (uint64_t i = 0; i < n; i += 8) {
      uint8_t bits = 0;
      for (uint64_t k = i; k < std::min(n, i + 8); ++k) {
        out[b + k] = v[k] ? h[k] : 0;
        bits |= static_cast<uint8_t>(v[k] << (k - i));
      }
      out_validity[(b + i) / 8] = bits;
    }
  }
}

}  // namespace

HashView HostView(const HashColumn& c) {
  HashView v;
  v.type = c.type;
  v.data = c.data.data();
  v.offsets = c.offsets.empty() ? nullptr : c.offsets.data();
  v.large_offsets = c.large_offsets.empty() ? nullptr : c.large_offsets.data();
  v.validity = c.validity.empty() ? nullptr : c.validity.data();
  v.value_offset = c.offset;
  v.validity_bit_offset = c.offset;
  v.data_base = 0;
  v.byte_width = c.byte_width;
  v.index_type = c.index_type;
  return v;
}

absl::Status ValidateHashColumns(std::span<const HashColumn> columns, std::string_view where) {
  if (columns.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(where), ": columns: at least one column is required"));
  }
  const uint64_t rows = columns[0].length;
  TreeValidator validator(where);
  for (size_t i = 0; i < columns.size(); ++i) {
    const HashColumn& c = columns[i];
    if (!IsKnownColumnType(c.type)) {
      return absl::InvalidArgumentError(absl::StrCat(
          std::string(where), ": column ", i, ": unknown column type ", static_cast<int>(c.type)));
    }
    const std::string name =
        absl::StrCat(std::string(where), ": column ", i, " (", TypeName(c.type), ")");
    if (c.length != rows) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": has ", c.length,
                                                     " rows but column 0 has ", rows,
                                                     "; all columns must have the same length"));
    }
    GPUJOIN_RETURN_IF_ERROR(validator.Check(c, name, absl::StrCat("columns[", i, "]"), 1));
  }
  return absl::OkStatus();
}

absl::Status ValidateHashNode(const HashNode& node, std::string_view where) {
  GPUJOIN_RETURN_IF_ERROR(ValidateHashColumns(node.columns, where));
  const uint64_t rows = node.columns[0].length;
  switch (node.bits) {
    case HashBits::k32:
      if (node.out32.size() != rows) {
        return absl::InvalidArgumentError(
            absl::StrCat(std::string(where), ": out32 has ", node.out32.size(),
                         " elements, needs one per row (", rows, ") for 32-bit hashes"));
      }
      break;
    case HashBits::k64:
      if (node.out64.size() != rows) {
        return absl::InvalidArgumentError(
            absl::StrCat(std::string(where), ": out64 has ", node.out64.size(),
                         " elements, needs one per row (", rows, ") for 64-bit hashes"));
      }
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(where), ": bits: unknown value ", static_cast<int>(node.bits)));
  }
  if (node.out_validity.size() != BitmapBytes(rows)) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(where), ": out_validity has ",
                                                   node.out_validity.size(), " bytes, needs ceil(",
                                                   rows, " / 8) = ", BitmapBytes(rows)));
  }
  return absl::OkStatus();
}

bool IsFlatHashNode(const HashNode& node) {
  return std::all_of(node.columns.begin(), node.columns.end(),
                     [](const HashColumn& c) { return IsFlatHashType(c.type); });
}

void HashRowsHost(const HashNode& node) {
  HashRowsHost(node, 0, node.columns.empty() ? 0 : node.columns[0].length);
}

void HashRowsHost(const HashNode& node, uint64_t first_row, uint64_t rows) {
  if (rows == 0) return;
  if (!IsFlatHashNode(node)) {
    if (node.bits == HashBits::k32) {
      HashTreeRange<uint32_t>(node, first_row, rows, node.out32.data(), node.out_validity.data());
    } else {
      HashTreeRange<uint64_t>(node, first_row, rows, node.out64.data(), node.out_validity.data());
    }
    return;
  }
  std::vector<HashView> views;
  views.reserve(node.columns.size());
  for (const HashColumn& c : node.columns) views.push_back(HostView(c));
  if (node.bits == HashBits::k32) {
    HashRowRange<uint32_t>(views, first_row, rows, node.out32.data(), node.out_validity.data());
  } else {
    HashRowRange<uint64_t>(views, first_row, rows, node.out64.data(), node.out_validity.data());
  }
}

}  // namespace gpujoin::engine::detail
