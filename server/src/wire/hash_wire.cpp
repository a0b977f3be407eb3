#include "wire/hash_wire.hpp"

#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"

namespace gpujoin::server {
namespace {

using engine::ColumnType;

// How a wire type lays out its buffers.
enum class Layout {
  kFixed,            // `width` bytes per row in data
  kBool,             // one bit per row in data
  kBinary,           // int32 offsets into data
  kLargeBinary,      // int64 offsets into data
  kFixedSizeBinary,  // byte_width bytes per row in data
  kDictionary,       // index_type indices in data; children[0] the dictionary
  kStruct,           // children: the fields
  kList,             // int32 offsets into children[0]
  kLargeList,        // int64 offsets into children[0]
  kFixedSizeList,    // byte_width rows of children[0] per row
  kMap,              // int32 offsets into children[0] (keys) and children[1] (items)
  kNull,             // no buffers at all
};

struct WireType {
  ColumnType type;
  Layout layout;
  uint32_t width = 0;  // kFixed: bytes per value
};

// The engine type and layout of a wire type; nullopt for values that are not column types.
std::optional<WireType> Classify(int type) {
  switch (type) {
    case v1::COLUMN_TYPE_UINT32:
      return WireType{ColumnType::kUint32, Layout::kFixed, 4};
    case v1::COLUMN_TYPE_INT32:
      return WireType{ColumnType::kInt32, Layout::kFixed, 4};
    case v1::COLUMN_TYPE_UINT64:
      return WireType{ColumnType::kUint64, Layout::kFixed, 8};
    case v1::COLUMN_TYPE_INT64:
      return WireType{ColumnType::kInt64, Layout::kFixed, 8};
    case v1::COLUMN_TYPE_FLOAT32:
      return WireType{ColumnType::kFloat32, Layout::kFixed, 4};
    case v1::COLUMN_TYPE_FLOAT64:
      return WireType{ColumnType::kFloat64, Layout::kFixed, 8};
    case v1::COLUMN_TYPE_BINARY:
      return WireType{ColumnType::kBinary, Layout::kBinary};
    case v1::COLUMN_TYPE_BOOL:
      return WireType{ColumnType::kBool, Layout::kBool};
    case v1::COLUMN_TYPE_STRING:
      return WireType{ColumnType::kString, Layout::kBinary};
    case v1::COLUMN_TYPE_INT8:
      return WireType{ColumnType::kInt8, Layout::kFixed, 1};
    case v1::COLUMN_TYPE_UINT8:
      return WireType{ColumnType::kUint8, Layout::kFixed, 1};
    case v1::COLUMN_TYPE_INT16:
      return WireType{ColumnType::kInt16, Layout::kFixed, 2};
    case v1::COLUMN_TYPE_UINT16:
      return WireType{ColumnType::kUint16, Layout::kFixed, 2};
    case v1::COLUMN_TYPE_FLOAT16:
      return WireType{ColumnType::kFloat16, Layout::kFixed, 2};
    case v1::COLUMN_TYPE_DECIMAL128:
      return WireType{ColumnType::kDecimal128, Layout::kFixed, 16};
    case v1::COLUMN_TYPE_FIXED_SIZE_BINARY:
      return WireType{ColumnType::kFixedSizeBinary, Layout::kFixedSizeBinary};
    case v1::COLUMN_TYPE_LARGE_BINARY:
      return WireType{ColumnType::kLargeBinary, Layout::kLargeBinary};
    case v1::COLUMN_TYPE_LARGE_STRING:
      return WireType{ColumnType::kLargeString, Layout::kLargeBinary};
    case v1::COLUMN_TYPE_DICTIONARY:
      return WireType{ColumnType::kDictionary, Layout::kDictionary};
    case v1::COLUMN_TYPE_STRUCT:
      return WireType{ColumnType::kStruct, Layout::kStruct};
    case v1::COLUMN_TYPE_LIST:
      return WireType{ColumnType::kList, Layout::kList};
    case v1::COLUMN_TYPE_LARGE_LIST:
      return WireType{ColumnType::kLargeList, Layout::kLargeList};
    case v1::COLUMN_TYPE_FIXED_SIZE_LIST:
      return WireType{ColumnType::kFixedSizeList, Layout::kFixedSizeList};
    case v1::COLUMN_TYPE_MAP:
      return WireType{ColumnType::kMap, Layout::kMap};
    case v1::COLUMN_TYPE_NULL:
      return WireType{ColumnType::kNull, Layout::kNull};
    default:
      return std::nullopt;
  }
}

// The engine type and byte width of a dictionary's index type.
std::optional<std::pair<ColumnType, uint32_t>> IndexType(int type) {
  switch (type) {
    case v1::COLUMN_TYPE_UNSPECIFIED:
    case v1::COLUMN_TYPE_INT32:
      return std::pair{ColumnType::kInt32, 4u};
    case v1::COLUMN_TYPE_INT8:
      return std::pair{ColumnType::kInt8, 1u};
    case v1::COLUMN_TYPE_UINT8:
      return std::pair{ColumnType::kUint8, 1u};
    case v1::COLUMN_TYPE_INT16:
      return std::pair{ColumnType::kInt16, 2u};
    case v1::COLUMN_TYPE_UINT16:
      return std::pair{ColumnType::kUint16, 2u};
    case v1::COLUMN_TYPE_UINT32:
      return std::pair{ColumnType::kUint32, 4u};
    case v1::COLUMN_TYPE_INT64:
      return std::pair{ColumnType::kInt64, 8u};
    case v1::COLUMN_TYPE_UINT64:
      return std::pair{ColumnType::kUint64, 8u};
    default:
      return std::nullopt;
  }
}

// Index `i` of a dictionary's little-endian index buffer as a signed 128-bit
// value (so uint64 indices above INT64_MAX stay out of range rather than wrap).
__int128 IndexAt(const std::string& data, ColumnType type, uint64_t i) {
  const char* p = data.data();
  switch (type) {
    case ColumnType::kInt8:
      return static_cast<int8_t>(p[i]);
    case ColumnType::kUint8:
      return static_cast<uint8_t>(p[i]);
    case ColumnType::kInt16: {
      int16_t v;
      std::memcpy(&v, p + i * 2, 2);
      return v;
    }
    case ColumnType::kUint16: {
      uint16_t v;
      std::memcpy(&v, p + i * 2, 2);
      return v;
    }
    case ColumnType::kInt32: {
      int32_t v;
      std::memcpy(&v, p + i * 4, 4);
      return v;
    }
    case ColumnType::kUint32: {
      uint32_t v;
      std::memcpy(&v, p + i * 4, 4);
      return v;
    }
    case ColumnType::kInt64: {
      int64_t v;
      std::memcpy(&v, p + i * 8, 8);
      return v;
    }
    default: {
      uint64_t v;
      std::memcpy(&v, p + i * 8, 8);
      return v;
    }
  }
}

std::string TypeName(int type) { return WireColumnTypeName(type); }

absl::Status Invalid(const std::string& path, const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(path, field, ": ", what));
}

const char* ChildrenWanted(Layout layout) {
  switch (layout) {
    case Layout::kDictionary:
      return "1 (the dictionary)";
    case Layout::kList:
    case Layout::kLargeList:
    case Layout::kFixedSizeList:
      return "1 (the values)";
    case Layout::kMap:
      return "2 (the keys, then the items)";
    default:
      return "none";
  }
}

int ChildCount(Layout layout) {
  switch (layout) {
    case Layout::kDictionary:
    case Layout::kList:
    case Layout::kLargeList:
    case Layout::kFixedSizeList:
      return 1;
    case Layout::kMap:
      return 2;
    default:
      return 0;
  }
}

class Decoder {
 public:
  explicit Decoder(DecodedHashColumns* out) : out_(out) {}

  // Decodes `c` (at `path`, `depth` levels deep) and, recursively, its children.
  absl::StatusOr<engine::HashColumn> Decode(const v1::HashColumn& c, const std::string& path,
                                            uint32_t depth) {
    GPUJOIN_RETURN_IF_ERROR(CheckSize(c, path, depth));
    const std::optional<WireType> wire = Classify(c.type());
    if (!wire) {
      return Invalid(path, ".type", absl::StrCat(TypeName(c.type()), " is not a column type"));
    }
    engine::HashColumn hc;
    hc.type = wire->type;
    hc.offset = c.offset();
    hc.length = c.length();
    hc.data = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(c.data().data()),
                                       c.data().size());
    GPUJOIN_RETURN_IF_ERROR(CheckUnusedFields(c, path, wire->layout));
    GPUJOIN_RETURN_IF_ERROR(TakeValidity(c, path, wire->layout, &hc));
    // Children first: a parent's offsets and indices are checked against their rows.
    for (int k = 0; k < c.children_size(); ++k) {
      GPUJOIN_ASSIGN_OR_RETURN(
          engine::HashColumn child,
          Decode(c.children(k), absl::StrCat(path, ".children[", k, "]"), depth + 1));
      hc.children.push_back(std::move(child));
    }
    GPUJOIN_RETURN_IF_ERROR(CheckBuffers(c, path, *wire, hc));
    return hc;
  }

 private:
  // The request's bounds: columns counted over every child, nesting depth, rows.
  absl::Status CheckSize(const v1::HashColumn& c, const std::string& path, uint32_t depth) {
    if (++nodes_ > kMaxHashNodes) {
      return Invalid(path, "",
                     absl::StrCat("the request has more than ", kMaxHashNodes,
                                  " columns counting every child; at most ", kMaxHashNodes,
                                  " are hashed in one request"));
    }
    if (depth > kMaxHashDepth) {
      return Invalid(path, "",
                     absl::StrCat("nested ", depth, " levels deep; at most ", kMaxHashDepth,
                                  " levels are hashed"));
    }
    if (c.offset() > kMaxHashRows || c.length() > kMaxHashRows) {
      return Invalid(path, "",
                     absl::StrCat("offset ", c.offset(), " + length ", c.length(),
                                  " is out of range (at most 2^40 rows each)"));
    }
    return absl::OkStatus();
  }

  // Fields the type does not use must be empty, so a mislabelled column is
  // refused instead of half-read; the children must be as many as it takes.
  static absl::Status CheckUnusedFields(const v1::HashColumn& c, const std::string& path,
                                        Layout layout) {
    const std::string type = TypeName(c.type());
    if (c.byte_width() != 0 && layout != Layout::kFixedSizeBinary &&
        layout != Layout::kFixedSizeList) {
      return Invalid(path, ".byte_width",
                     absl::StrCat(c.byte_width(), " is set for a ", type,
                                  " column (only FIXED_SIZE_BINARY and FIXED_SIZE_LIST take it)"));
    }
    if (c.index_type() != v1::COLUMN_TYPE_UNSPECIFIED && layout != Layout::kDictionary) {
      return Invalid(path, ".index_type",
                     absl::StrCat(TypeName(c.index_type()), " is set for a ", type,
                                  " column (only DICTIONARY takes it)"));
    }
    const bool has_data = layout == Layout::kFixed || layout == Layout::kBool ||
                          layout == Layout::kBinary || layout == Layout::kLargeBinary ||
                          layout == Layout::kFixedSizeBinary || layout == Layout::kDictionary;
    if (!has_data && !c.data().empty()) {
      return Invalid(path, ".data",
                     absl::StrCat("set (", c.data().size(), " bytes) for a ", type,
                                  " column, which has no value buffer"));
    }
    const bool has_offsets = layout == Layout::kBinary || layout == Layout::kLargeBinary ||
                             layout == Layout::kList || layout == Layout::kLargeList ||
                             layout == Layout::kMap;
    if (!has_offsets && !c.offsets().empty()) {
      return Invalid(
          path, ".offsets",
          layout == Layout::kFixed
              ? absl::StrCat("set (", c.offsets().size(), " bytes) for a fixed-width column")
              : absl::StrCat("set (", c.offsets().size(), " bytes) for a ", type,
                             " column, which has no offsets"));
    }
    if (layout == Layout::kStruct) {
      // A struct takes any number of fields.
    } else if (c.children_size() != ChildCount(layout)) {
      return Invalid(path, ".children",
                     absl::StrCat(c.children_size(), " children for a ", type, " column; it takes ",
                                  ChildrenWanted(layout)));
    }
    return absl::OkStatus();
  }

  // The validity bitmap: none for a null column, else empty or covering
  // offset + length rows (then viewed by `hc`).
  static absl::Status TakeValidity(const v1::HashColumn& c, const std::string& path, Layout layout,
                                   engine::HashColumn* hc) {
    const uint64_t end = c.offset() + c.length();
    if (layout == Layout::kNull) {
      if (!c.validity().empty()) {
        return Invalid(
            path, ".validity",
            absl::StrCat("set (", c.validity().size(),
                         " bytes) for a COLUMN_TYPE_NULL column, whose rows are all null"));
      }
    } else if (!c.validity().empty()) {
      const uint64_t need = (end + 7) / 8;
      if (c.validity().size() < need) {
        return Invalid(path, ".validity",
                       absl::StrCat(c.validity().size(), " bytes, need ceil((offset ", c.offset(),
                                    " + length ", c.length(), ") / 8) = ", need));
      }
      hc->validity = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(c.validity().data()),
                                             c.validity().size());
    }

    return absl::OkStatus();
  }

  // The value buffer, offsets and children's rows the layout needs, given the
  // decoded children in `hc` (which gets the offsets and widths).
  absl::Status CheckBuffers(const v1::HashColumn& c, const std::string& path,
                            const WireType& wire, engine::HashColumn& hc) {
    const Layout layout = wire.layout;
    const uint64_t end = c.offset() + c.length();
    switch (layout) {
      case Layout::kFixed:
        GPUJOIN_RETURN_IF_ERROR(CheckData(c, path, wire.width));
        break;
      case Layout::kFixedSizeBinary:
        hc.byte_width = c.byte_width();
        GPUJOIN_RETURN_IF_ERROR(CheckData(c, path, c.byte_width()));
        break;
      case Layout::kBool:
        if (c.data().size() < (end + 7) / 8) {
          return Invalid(path, ".data",
                         absl::StrCat(c.data().size(), " bytes, need ceil((offset ", c.offset(),
                                      " + length ", c.length(), ") / 8) = ", (end + 7) / 8));
        }
        break;
      case Layout::kBinary: {
        GPUJOIN_ASSIGN_OR_RETURN(
            auto offsets,
            CheckOffsets<int32_t>(c, path, c.data().size(), absl::StrCat(path, ".data"), "bytes"));
        hc.offsets = offsets;
        break;
      }
      case Layout::kLargeBinary: {
        GPUJOIN_ASSIGN_OR_RETURN(
            auto offsets,
            CheckOffsets<int64_t>(c, path, c.data().size(), absl::StrCat(path, ".data"), "bytes"));
        hc.large_offsets = offsets;
        break;
      }
      case Layout::kList:
      case Layout::kMap: {
        // A map's keys and items share its offsets: both must hold the rows.
        uint64_t rows = hc.children[0].length;
        int shortest = 0;
        if (layout == Layout::kMap && hc.children[1].length < rows) {
          rows = hc.children[1].length;
          shortest = 1;
        }
        GPUJOIN_ASSIGN_OR_RETURN(
            auto offsets,
            CheckOffsets<int32_t>(c, path, rows,
                                  absl::StrCat(path, ".children[", shortest, "].length"), "rows"));
        hc.offsets = offsets;
        break;
      }
      case Layout::kLargeList: {
        GPUJOIN_ASSIGN_OR_RETURN(
            auto offsets, CheckOffsets<int64_t>(c, path, hc.children[0].length,
                                                absl::StrCat(path, ".children[0].length"), "rows"));
        hc.large_offsets = offsets;
        break;
      }
      case Layout::kFixedSizeList: {
        hc.byte_width = c.byte_width();
        const unsigned __int128 need = static_cast<unsigned __int128>(end) * c.byte_width();
        if (hc.children[0].length < need) {
          return Invalid(path, ".children[0].length",
                         absl::StrCat(hc.children[0].length, " rows, need (offset ", c.offset(),
                                      " + length ", c.length(), ") * list size (byte_width) ",
                                      c.byte_width(), " = ", static_cast<uint64_t>(need)));
        }
        break;
      }
      case Layout::kStruct:
        for (int k = 0; k < c.children_size(); ++k) {
          if (hc.children[k].length < end) {
            return Invalid(path, absl::StrCat(".children[", k, "].length"),
                           absl::StrCat(hc.children[k].length, " rows, but the struct addresses",
                                        " field rows up to offset ", c.offset(), " + length ",
                                        c.length(), " = ", end));
          }
        }
        break;
      case Layout::kDictionary:
        return CheckDictionary(c, path, hc);
      case Layout::kNull:
        break;
    }
    return absl::OkStatus();
  }

  // A dictionary's index type, and every non-null index inside the dictionary
  // (hc.children[0]).
  static absl::Status CheckDictionary(const v1::HashColumn& c, const std::string& path,
                                      engine::HashColumn& hc) {
    const uint64_t end = c.offset() + c.length();
    const auto index = IndexType(c.index_type());
    if (!index) {
      return Invalid(path, ".index_type",
                     absl::StrCat(TypeName(c.index_type()),
                                  " is not an index type (INT8, UINT8, INT16, UINT16, INT32, "
                                  "UINT32, INT64 or UINT64; UNSPECIFIED is INT32)"));
    }
    hc.index_type = index->first;
    GPUJOIN_RETURN_IF_ERROR(CheckData(c, path, index->second));
    // Null rows' indices are not read (Arrow leaves them undefined).
    const uint64_t entries = hc.children[0].length;
    for (uint64_t i = c.offset(); i < end; ++i) {
      if (!c.validity().empty() && !BitSet(c.validity(), i)) continue;
      const __int128 v = IndexAt(c.data(), index->first, i);
      if (v < 0 || static_cast<unsigned __int128>(v) >= entries) {
        return Invalid(path, absl::StrCat(".data[", i, "]"),
                       absl::StrCat("index ",
                                    v < 0 ? absl::StrCat(static_cast<int64_t>(v))
                                          : absl::StrCat(static_cast<uint64_t>(v)),
                                    " (row ", i - c.offset(), ") is outside the dictionary ",
                                    path, ".children[0] of ", entries, " rows"));
      }
    }
    return absl::OkStatus();
  }

  // `data` holds (offset + length) * width bytes.
  static absl::Status CheckData(const v1::HashColumn& c, const std::string& path, uint64_t width) {
    const unsigned __int128 need = static_cast<unsigned __int128>(c.offset() + c.length()) * width;
    if (c.data().size() < need) {
      return Invalid(
          path, ".data",
          absl::StrCat(c.data().size(), " bytes, need (offset ", c.offset(), " + length ",
                       c.length(), ") * ", width, " = ", static_cast<uint64_t>(need)));
    }
    return absl::OkStatus();
  }

  // Decodes `c.offsets` as T and checks the entries [offset, offset + length]:
  // present, the first non-negative, non-decreasing, the last at most `limit`
  // (`limit_name`'s size in `unit`). Offsets outside those entries are not read.
  template <typename T>
  absl::StatusOr<std::span<const T>> CheckOffsets(const v1::HashColumn& c, const std::string& path,
                                                  uint64_t limit, const std::string& limit_name,
                                                  const char* unit) {
    const std::string field = absl::StrCat(path, ".offsets");
    GPUJOIN_ASSIGN_OR_RETURN(DecodedColumn<T> decoded, DecodePackedBytes<T>(c.offsets(), field));
    const std::span<const T> o = decoded.span();
    if constexpr (sizeof(T) == 4) {
      out_->offsets32.push_back(std::move(decoded));
    } else {
      out_->offsets64.push_back(std::move(decoded));
    }
    const uint64_t end = c.offset() + c.length();
    if (o.size() < end + 1) {
      return Invalid(field, "",
                     absl::StrCat(o.size(), " offsets (", sizeof(T) * 8, "-bit), need offset ",
                                  c.offset(), " + length ", c.length(), " + 1 = ", end + 1));
    }
    T prev = o[c.offset()];
    if (prev < 0) {
      return Invalid(field, absl::StrCat("[", c.offset(), "]"), absl::StrCat(prev, " is negative"));
    }
    if (static_cast<uint64_t>(prev) > limit) {
      return Invalid(field, absl::StrCat("[", c.offset(), "]"),
                     absl::StrCat(prev, " is beyond ", limit_name, " (", limit, " ", unit, ")"));
    }
    for (uint64_t r = c.offset() + 1; r <= end; ++r) {
      const T v = o[r];
      if (v < prev) {
        return Invalid(field, absl::StrCat("[", r, "]"),
                       absl::StrCat(v, " is below the previous offset ", prev));
      }
      if (static_cast<uint64_t>(v) > limit) {
        return Invalid(field, absl::StrCat("[", r, "]"),
                       absl::StrCat(v, " is beyond ", limit_name, " (", limit, " ", unit, ")"));
      }
      prev = v;
    }
    return o;
  }

  DecodedHashColumns* out_;
  uint64_t nodes_ = 0;
};

}  // namespace

absl::StatusOr<DecodedHashColumns> DecodeHashColumns(const v1::HashRequest& request) {
  if (request.columns_size() == 0) {
    return absl::InvalidArgumentError("columns: at least one column is required");
  }
  DecodedHashColumns out;
  out.rows = request.columns(0).length();
  // Top-level lengths first, so the commonest mistake is named before any buffer.
  for (int i = 0; i < request.columns_size(); ++i) {
    if (request.columns(i).length() != out.rows) {
      return absl::InvalidArgumentError(absl::StrCat("columns[", i,
                                                     "].length: ", request.columns(i).length(),
                                                     " differs from columns[0].length ", out.rows));
    }
  }
  Decoder decoder(&out);
  for (int i = 0; i < request.columns_size(); ++i) {
    GPUJOIN_ASSIGN_OR_RETURN(
        engine::HashColumn c,
        decoder.Decode(request.columns(i), absl::StrCat("columns[", i, "]"), 1));
    out.columns.push_back(std::move(c));
  }
  return out;
}

}  // namespace gpujoin::server
