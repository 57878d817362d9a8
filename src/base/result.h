// Result<T>: a value or an Error for failures that are expected (hostile files, bad input).
// Bugs use LM_CHECK instead. Error messages are complete sentences a user can act on.
#pragma once

#include <string>
#include <utility>
#include <variant>

#include "base/check.h"

namespace lm {

struct Error {
  std::string message;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}      // NOLINT: implicit by design
  Result(Error error) : state_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    LM_CHECK_MSG(ok(), "value() on an error Result");
    return std::get<0>(state_);
  }
  const T& value() const& {
    LM_CHECK_MSG(ok(), "value() on an error Result");
    return std::get<0>(state_);
  }
  T&& value() && {
    LM_CHECK_MSG(ok(), "value() on an error Result");
    return std::get<0>(std::move(state_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const& {
    LM_CHECK_MSG(!ok(), "error() on an ok Result");
    return std::get<1>(state_);
  }
  Error&& error() && {
    LM_CHECK_MSG(!ok(), "error() on an ok Result");
    return std::get<1>(std::move(state_));
  }

 private:
  std::variant<T, Error> state_;
};

// Result<void>: success or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT: implicit by design
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const& {
    LM_CHECK_MSG(!ok_, "error() on an ok Status");
    return error_;
  }
  Error&& error() && {
    LM_CHECK_MSG(!ok_, "error() on an ok Status");
    return std::move(error_);
  }

 private:
  Error error_;
  bool ok_ = true;
};

}  // namespace lm

// Propagates the error of a Result/Status expression out of the enclosing function.
#define LM_RETURN_IF_ERROR(expr)                                \
  do {                                                          \
    auto&& lm_status_ = (expr);                                 \
    if (!lm_status_.ok()) return std::move(lm_status_).error(); \
  } while (0)

#define LM_CONCAT_INNER(a, b) a##b
#define LM_CONCAT(a, b) LM_CONCAT_INNER(a, b)
// LM_ASSIGN_OR_RETURN(auto x, expr): binds the value of a Result or returns its error.
#define LM_ASSIGN_OR_RETURN(decl, expr) \
  LM_ASSIGN_OR_RETURN_IMPL(LM_CONCAT(lm_result_, __COUNTER__), decl, expr)
#define LM_ASSIGN_OR_RETURN_IMPL(tmp, decl, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return std::move(tmp).error();   \
  decl = std::move(tmp).value()
