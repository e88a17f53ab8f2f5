// Early-return helpers for absl::Status / absl::StatusOr, used on both sides of the plugin
// boundary (exceptions never cross it; errors travel as values).
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define TESTBED_CONCAT_INNER_(a, b) a##b
#define TESTBED_CONCAT_(a, b) TESTBED_CONCAT_INNER_(a, b)

// Returns from the enclosing function when `expr` (an absl::Status) is not OK.
#define TESTBED_RETURN_IF_ERROR(expr)                 \
  do {                                                \
    if (::absl::Status _tb_status = (expr); !_tb_status.ok()) { \
      return _tb_status;                              \
    }                                                 \
  } while (false)

// `TESTBED_ASSIGN_OR_RETURN(auto x, MakeX());` declares x from a StatusOr or returns its error.
#define TESTBED_ASSIGN_OR_RETURN(lhs, rexpr) \
  TESTBED_ASSIGN_OR_RETURN_IMPL_(TESTBED_CONCAT_(_tb_statusor_, __LINE__), lhs, rexpr)

#define TESTBED_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                   \
  if (!tmp.ok()) {                                      \
    return std::move(tmp).status();                     \
  }                                                     \
  lhs = std::move(tmp).value()
