// Small status helpers. Abseil 20220623 (Debian 12) has no ABSL_ASSIGN_OR_RETURN,
// so the engine, server and client share these two macros. They live in the
// header-only `gpujoin_common` library (Abseil status only), so that the client
// needs no engine headers.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define GPUJOIN_STATUS_CONCAT_INNER_(a, b) a##b
#define GPUJOIN_STATUS_CONCAT_(a, b) GPUJOIN_STATUS_CONCAT_INNER_(a, b)

/// Evaluates an absl::Status expression and returns it from the enclosing
/// function when it is not OK.
#define GPUJOIN_RETURN_IF_ERROR(expr)                  \
  do {                                                 \
    ::absl::Status gpujoin_status_ = (expr);           \
    if (!gpujoin_status_.ok()) return gpujoin_status_; \
  } while (0)

/// `GPUJOIN_ASSIGN_OR_RETURN(auto x, MakeX());` assigns the value of an
/// absl::StatusOr expression, or returns its status from the enclosing function.
#define GPUJOIN_ASSIGN_OR_RETURN(lhs, expr) \
  GPUJOIN_ASSIGN_OR_RETURN_IMPL_(GPUJOIN_STATUS_CONCAT_(gpujoin_statusor_, __LINE__), lhs, expr)

#define GPUJOIN_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return std::move(tmp).status();       \
  lhs = std::move(tmp).value()
