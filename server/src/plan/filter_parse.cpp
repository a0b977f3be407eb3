#include "plan/filter_parse.hpp"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <optional>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gpujoin/common/status_macros.hpp"

namespace gpujoin::server {
namespace {

using engine::ColumnType;
using engine::CompareOp;
using engine::PlanExpr;
using engine::PlanLiteral;

struct Token {
  enum class Kind { kEnd, kName, kQuotedName, kInteger, kFloat, kString, kSymbol };
  Kind kind = Kind::kEnd;
  std::string text;  // names and symbols as written; strings unquoted
  size_t position = 0;  // 0-based
};

class Parser {
 public:
  Parser(std::string_view text, std::span<const std::string> names,
         std::span<const ColumnType> types, std::string_view field)
      : text_(text), names_(names), types_(types), field_(field) {}

  absl::StatusOr<PlanExpr> Parse() {
    GPUJOIN_RETURN_IF_ERROR(Tokenize());
    GPUJOIN_ASSIGN_OR_RETURN(PlanExpr e, Or(0));
    if (Peek().kind != Token::Kind::kEnd) return Error(Peek(), "expected `and`, `or` or the end");
    return e;
  }

 private:
  absl::Status Error(const Token& at, std::string_view what) const {
    const std::string near = at.kind == Token::Kind::kEnd ? "the end" : absl::StrCat("`", at.text, "`");
    return absl::InvalidArgumentError(absl::StrCat(field_, ": ", std::string(what), " at character ",
                                                   at.position + 1, " (", near, ") of \"",
                                                   std::string(text_), "\""));
  }

  absl::Status Tokenize() {
    size_t i = 0;
    const size_t n = text_.size();
    while (true) {
      while (i < n && std::isspace(static_cast<unsigned char>(text_[i]))) ++i;
      Token t;
      t.position = i;
      if (i >= n) {
        tokens_.push_back(t);
        return absl::OkStatus();
      }
      const char c = text_[i];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t j = i;
        while (j < n && (std::isalnum(static_cast<unsigned char>(text_[j])) || text_[j] == '_' ||
                         text_[j] == '.')) {
          ++j;
        }
        t.kind = Token::Kind::kName;
        t.text = std::string(text_.substr(i, j - i));
        i = j;
      } else if (c == '\'' || c == '"') {
        // 'string' or "name"; a doubled quote stands for one.
        size_t j = i + 1;
        std::string value;
        bool closed = false;
        while (j < n) {
          if (text_[j] == c) {
            if (j + 1 < n && text_[j + 1] == c) {
              value.push_back(c);
              j += 2;
              continue;
            }
            closed = true;
            ++j;
            break;
          }
          value.push_back(text_[j++]);
        }
        if (!closed) {
          t.text = std::string(1, c);
          return Error(t, c == '\'' ? "unterminated string" : "unterminated quoted name");
        }
        t.kind = c == '\'' ? Token::Kind::kString : Token::Kind::kQuotedName;
        t.text = std::move(value);
        i = j;
      } else if (std::isdigit(static_cast<unsigned char>(c)) ||
                 ((c == '-' || c == '+' || c == '.') && i + 1 < n &&
                  (std::isdigit(static_cast<unsigned char>(text_[i + 1])) || text_[i + 1] == '.'))) {
        size_t j = i + 1;
        bool real = c == '.';
        while (j < n) {
          const char d = text_[j];
          if (std::isdigit(static_cast<unsigned char>(d))) {
            ++j;
          } else if (d == '.' || d == 'e' || d == 'E') {
            real = true;
            ++j;
            if ((d == 'e' || d == 'E') && j < n && (text_[j] == '-' || text_[j] == '+')) ++j;
          } else {
            break;
          }
        }
        t.kind = real ? Token::Kind::kFloat : Token::Kind::kInteger;
        t.text = std::string(text_.substr(i, j - i));
        i = j;
      } else {
        static constexpr std::string_view kTwo[] = {"<=", ">=", "!=", "<>", "=="};
        t.kind = Token::Kind::kSymbol;
        bool two = false;
        for (std::string_view s : kTwo) {
          if (text_.substr(i, 2) == s) {
            t.text = std::string(s);
            i += 2;
            two = true;
            break;
          }
        }
        if (!two) {
          if (std::string_view("=<>(),").find(c) == std::string_view::npos) {
            t.text = std::string(1, c);
            return Error(t, "unexpected character");
          }
          t.text = std::string(1, c);
          ++i;
        }
      }
      tokens_.push_back(std::move(t));
    }
  }

  const Token& Peek() const { return tokens_[pos_]; }
  const Token& Next() { return tokens_[pos_ < tokens_.size() - 1 ? pos_++ : pos_]; }
  bool IsKeyword(const Token& t, std::string_view word) const {
    return t.kind == Token::Kind::kName && absl::EqualsIgnoreCase(t.text, absl::string_view(word.data(), word.size()));
  }
  bool IsSymbol(const Token& t, std::string_view s) const {
    return t.kind == Token::Kind::kSymbol && t.text == s;
  }

  absl::Status Count(const Token& at) {
    if (++nodes_ > kMaxFilterNodes) {
      return Error(at, absl::StrCat("more than ", kMaxFilterNodes, " terms"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<PlanExpr> Combine(PlanExpr::Kind kind, std::string_view word, int depth,
                                   absl::StatusOr<PlanExpr> (Parser::*sub)(int)) {
    GPUJOIN_ASSIGN_OR_RETURN(PlanExpr first, (this->*sub)(depth));
    if (!IsKeyword(Peek(), word)) return first;
    PlanExpr e;
    e.kind = kind;
    e.children.push_back(std::move(first));
    while (IsKeyword(Peek(), word)) {
      GPUJOIN_RETURN_IF_ERROR(Count(Next()));
      GPUJOIN_ASSIGN_OR_RETURN(PlanExpr next, (this->*sub)(depth));
      e.children.push_back(std::move(next));
    }
    return e;
  }

  absl::StatusOr<PlanExpr> Or(int depth) {
    return Combine(PlanExpr::Kind::kOr, "or", depth, &Parser::And);
  }
  absl::StatusOr<PlanExpr> And(int depth) {
    return Combine(PlanExpr::Kind::kAnd, "and", depth, &Parser::Not);
  }

  absl::StatusOr<PlanExpr> Not(int depth) {
    if (depth > 64) return Error(Peek(), "nesting deeper than 64");
    if (IsKeyword(Peek(), "not")) {
      GPUJOIN_RETURN_IF_ERROR(Count(Next()));
      PlanExpr e;
      e.kind = PlanExpr::Kind::kNot;
      GPUJOIN_ASSIGN_OR_RETURN(PlanExpr child, Not(depth + 1));
      e.children.push_back(std::move(child));
      return e;
    }
    return Primary(depth);
  }

  absl::StatusOr<PlanExpr> Primary(int depth) {
    const Token& t = Peek();
    if (IsSymbol(t, "(")) {
      Next();
      GPUJOIN_ASSIGN_OR_RETURN(PlanExpr e, Or(depth + 1));
      if (!IsSymbol(Peek(), ")")) return Error(Peek(), "expected `)`");
      Next();
      return e;
    }
    if (t.kind != Token::Kind::kName && t.kind != Token::Kind::kQuotedName) {
      return Error(t, "expected a column name, `not` or `(`");
    }
    if (t.kind == Token::Kind::kName &&
        (IsKeyword(t, "and") || IsKeyword(t, "or") || IsKeyword(t, "in") || IsKeyword(t, "is") ||
         IsKeyword(t, "null") || IsKeyword(t, "true") || IsKeyword(t, "false"))) {
      return Error(t, "expected a column name");
    }
    const Token name = Next();
    GPUJOIN_RETURN_IF_ERROR(Count(name));
    uint32_t column = 0;
    bool known = false;
    for (size_t i = 0; i < names_.size(); ++i) {
      if (names_[i] == name.text) {
        column = static_cast<uint32_t>(i);
        known = true;
        break;
      }
    }
    if (!known) {
      return Error(name, absl::StrCat("unknown column \"", name.text, "\" (the step sees: ",
                                      absl::StrJoin(names_, ", "), ")"));
    }
    PlanExpr e;
    e.column = column;
    const Token& op = Peek();
    if (IsKeyword(op, "is")) {
      Next();
      bool negate = false;
      if (IsKeyword(Peek(), "not")) {
        Next();
        negate = true;
      }
      if (!IsKeyword(Peek(), "null")) return Error(Peek(), "expected `null` after `is`");
      Next();
      e.kind = negate ? PlanExpr::Kind::kIsNotNull : PlanExpr::Kind::kIsNull;
      return e;
    }
    bool negate_in = false;
    if (IsKeyword(op, "not")) {
      Next();
      if (!IsKeyword(Peek(), "in")) return Error(Peek(), "expected `in` after `not`");
      negate_in = true;
    }
    if (IsKeyword(Peek(), "in")) {
      Next();
      if (!IsSymbol(Peek(), "(")) return Error(Peek(), "expected `(` after `in`");
      Next();
      e.kind = negate_in ? PlanExpr::Kind::kNotIn : PlanExpr::Kind::kIn;
      while (true) {
        GPUJOIN_ASSIGN_OR_RETURN(PlanLiteral lit, Literal(column));
        e.literals.push_back(std::move(lit));
        GPUJOIN_RETURN_IF_ERROR(Count(Peek()));
        if (IsSymbol(Peek(), ",")) {
          Next();
          continue;
        }
        if (IsSymbol(Peek(), ")")) {
          Next();
          break;
        }
        return Error(Peek(), "expected `,` or `)` in the list");
      }
      return e;
    }
    static constexpr std::pair<std::string_view, CompareOp> kOps[] = {
        {"=", CompareOp::kEq},  {"==", CompareOp::kEq}, {"!=", CompareOp::kNe},
        {"<>", CompareOp::kNe}, {"<", CompareOp::kLt},  {"<=", CompareOp::kLe},
        {">", CompareOp::kGt},  {">=", CompareOp::kGe}};
    for (const auto& [symbol, cmp] : kOps) {
      if (IsSymbol(op, symbol)) {
        Next();
        e.kind = PlanExpr::Kind::kCompare;
        e.op = cmp;
        GPUJOIN_ASSIGN_OR_RETURN(PlanLiteral lit, Literal(column));
        e.literals.push_back(std::move(lit));
        return e;
      }
    }
    return Error(op, "expected a comparison (= != < <= > >=), `is`, `in` or `not in`");
  }

  absl::StatusOr<PlanLiteral> Literal(uint32_t column) {
    const Token t = Next();
    PlanLiteral lit;
    const ColumnType type = types_[column];
    const std::string type_name(engine::ColumnTypeName(type));
    auto mismatch = [&](std::string_view kind) {
      return Error(t, absl::StrCat("column \"", names_[column], "\" (", type_name,
                                   ") cannot be compared with ", std::string(kind)));
    };
    switch (t.kind) {
      case Token::Kind::kInteger: {
        if (!engine::IsNumericType(type)) {
          return mismatch("a number");
        }
        const bool negative = t.text[0] == '-';
        const std::string digits = (t.text[0] == '-' || t.text[0] == '+') ? t.text.substr(1) : t.text;
        unsigned __int128 v = 0;
        for (char d : digits) {
          v = v * 10 + static_cast<unsigned>(d - '0');
          if (v > (static_cast<unsigned __int128>(1) << 64)) {
            return Error(t, "an integer outside the 64-bit range");
          }
        }
        if ((!negative && v > std::numeric_limits<uint64_t>::max()) ||
            (negative && v > (static_cast<unsigned __int128>(1) << 63))) {
          return Error(t, "an integer outside the 64-bit range");
        }
        lit.kind = PlanLiteral::Kind::kInteger;
        lit.integer = negative ? -static_cast<__int128>(v) : static_cast<__int128>(v);
        return lit;
      }
      case Token::Kind::kFloat: {
        if (!engine::IsNumericType(type)) {
          return mismatch("a number");
        }
        errno = 0;
        char* end = nullptr;
        lit.real = std::strtod(t.text.c_str(), &end);
        if (end != t.text.c_str() + t.text.size()) return Error(t, "a malformed number");
        lit.kind = PlanLiteral::Kind::kFloat;
        return lit;
      }
      case Token::Kind::kString:
        if (type != ColumnType::kString && type != ColumnType::kBinary) return mismatch("a string");
        lit.kind = PlanLiteral::Kind::kString;
        lit.text = t.text;
        return lit;
      case Token::Kind::kName:
        if (IsKeyword(t, "true") || IsKeyword(t, "false")) {
          if (type != ColumnType::kBool) return mismatch("a boolean");
          lit.kind = PlanLiteral::Kind::kBool;
          lit.boolean = IsKeyword(t, "true");
          return lit;
        }
        if (IsKeyword(t, "null")) {
          return Error(t, "a comparison with null is never true; use `is null` or `is not null`");
        }
        return Error(t, "expected a literal (a number, a 'string', true or false)");
      default:
        return Error(t, "expected a literal (a number, a 'string', true or false)");
    }
  }

  std::string_view text_;
  std::span<const std::string> names_;
  std::span<const ColumnType> types_;
  std::string field_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  size_t nodes_ = 0;
};

}  // namespace

absl::StatusOr<engine::PlanExpr> ParseFilter(std::string_view text,
                                             std::span<const std::string> names,
                                             std::span<const engine::ColumnType> types,
                                             std::string_view field) {
  return Parser(text, names, types, field).Parse();
}

}  // namespace gpujoin::server
