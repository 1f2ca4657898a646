// One error type for all of Berth, printed once by main.
//
// An Error names the operation that failed ("open", "GET", "unpack"), the
// subject it failed on (a path or URL), the errno or HTTP status, a detail
// message, an optional hint, and a chain of context added by callers on the
// way up. Errors are made only through the helpers below so that errno
// cannot be forgotten: sys_error() reads errno itself.
#pragma once

#include <cerrno>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace berth {

struct Error {
  std::string op;                    ///< the failing operation, e.g. "open", "GET"
  std::string subject;               ///< the path, URL or name it acted on
  int sys_errno = 0;                 ///< errno, 0 when not a system call failure
  int http_status = 0;               ///< HTTP status, 0 when not an HTTP failure
  std::string detail;                ///< what went wrong, in words
  std::string hint;                  ///< what the user can do about it, may be empty
  std::vector<std::string> context;  ///< outermost last: "pull alpine:3", ...

  /// One line: "context: op subject: detail (strerror / HTTP n)".
  std::string message() const;
  /// Adds an outer layer of context ("pulling alpine:latest").
  Error with_context(std::string ctx) &&;
  Error with_hint(std::string h) &&;
};

/// An error from a failed system call; reads errno now.
Error sys_error(std::string op, std::string subject);
/// An error from a failed system call with an explicit errno value.
Error sys_error(std::string op, std::string subject, int err);
/// An error with no errno: bad input, failed check, protocol violation.
Error make_error(std::string op, std::string subject, std::string detail);
/// An error from an HTTP exchange.
Error http_error(std::string op, std::string url, int status, std::string detail);

/// Result<T>: a T or an Error. Result<void> carries only success or an Error.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}
  Result(Error e) : v_(std::in_place_index<1>, std::move(e)) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const& { return std::get<1>(v_); }
  Error&& error() && { return std::get<1>(std::move(v_)); }

  /// Adds context to the error, if any, and passes the result on.
  Result with_context(std::string ctx) && {
    if (!ok()) return std::move(*this).error().with_context(std::move(ctx));
    return std::move(*this);
  }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error e) : err_(std::move(e)), failed_(true) {}

  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const Error& error() const& { return err_; }
  Error&& error() && { return std::move(err_); }

  Result with_context(std::string ctx) && {
    if (failed_) return std::move(err_).with_context(std::move(ctx));
    return {};
  }

 private:
  Error err_;
  bool failed_ = false;
};

using Status = Result<void>;

}  // namespace berth

/// Evaluates a Result expression; on error returns the error from the
/// enclosing function, else yields the value (GNU statement expression,
/// supported by GCC and Clang).
#define BERTH_TRY(expr)                                          \
  ({                                                             \
    auto berth_try_r_ = (expr);                                  \
    if (!berth_try_r_.ok()) return std::move(berth_try_r_).error(); \
    std::move(berth_try_r_).value();                             \
  })

/// Evaluates a Status expression; on error returns it from the enclosing function.
#define BERTH_CHECK(expr)                                        \
  do {                                                           \
    auto berth_check_r_ = (expr);                                \
    if (!berth_check_r_.ok()) return std::move(berth_check_r_).error(); \
  } while (0)
