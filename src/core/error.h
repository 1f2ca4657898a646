// One error type for all of Berth, printed once by main.
//
// An Error names the operation that failed ("open", "GET", "unpack"), the
// subject it failed on (a path or URL), the errno or HTTP status, a detail
// message, an optional hint, and a chain of context added by callers on the
// way up. Errors are made only through the helpers below so that errno
// cannot be forgotten: sys_error() reads errno itself.
//
// Code that decides what to do about an error branches on its `code` (and on
// sys_errno / http_status), never on the words of its message: those are for
// people and may change.
#pragma once

#include <cerrno>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace berth {

/// What kind of failure an Error is, for the callers that act on it. A small fixed set: add a
/// code only when some caller needs to tell it apart.
enum class ErrorCode : uint8_t {
  kOther,         ///< none of the below
  kNotFound,      ///< no such file, image or container (ENOENT, ENOTDIR, ESRCH)
  kExists,        ///< already there (EEXIST, ENOTEMPTY)
  kPermission,    ///< not allowed (EACCES, EPERM, EROFS)
  kBusy,          ///< held by someone else for now (EBUSY, EAGAIN, ETXTBSY)
  kUnsupported,   ///< this host, kernel or engine cannot (ENOSYS, EOPNOTSUPP)
  kInvalidInput,  ///< an argument, reference or document that is not well formed
  kIntegrity,     ///< content that does not match its digest or its declared size
  kNetwork,       ///< a transfer that broke off without an HTTP status: worth another attempt
  kHttp,          ///< the server answered with an error status (see http_status)
  kCancelled,     ///< stopped on purpose, because another part of the work failed
};

/// The code for an errno value: the errno facts above, else kOther.
ErrorCode code_for_errno(int err);

/// The operations an Error may name: one fixed vocabulary, listed once, here. Each word is
/// printed as it is ("open /x: ..."); the list is grouped by the layer that mostly uses it.
/// A new kind of operation is added here, in its group.
// clang-format off
inline constexpr std::string_view kOpWords[] = {
    "",  // no operation: a default-constructed Error only
    // System calls and file work (core, and every layer's use of the file system). "exec:" is
    // followed by the quoted program name, as a shell says it: exec: "foo": not found.
    "bind", "chdir", "chmod", "clone", "close", "copy", "create", "dup", "dup2", "exec", "exec:",
    "flock", "fork", "fsync", "link", "mkdir", "mkdtemp", "mkfifo", "mmap", "mount", "open",
    "opendir", "pipe", "pivot_root", "read", "readdir", "readlink", "remove", "rename", "seek",
    "sethostname", "stat", "symlink", "truncate", "unlink", "unshare", "wait", "walk", "write",
    // Reading what users and files say.
    "parse", "parse YAML", "parse config", "parse index", "parse manifest", "parse platform",
    "parse reference", "parse requirement", "parse WWW-Authenticate", "read config",
    "read env file", "read environment",
    // HTTP and registries (image).
    "DELETE", "GET", "HEAD", "POST", "PUT", "authenticate", "download", "login", "logout",
    "manifest inspect", "pull", "read credentials", "search",
    // The image store and image archives (image).
    "central store", "check digest", "check image record", "commit blob", "decompress", "export",
    "find image", "gc", "image config", "image prune", "import", "load", "open store", "protect",
    "read blob", "read image index", "replace image", "restart blob", "rewrite symlink", "rmi",
    "save", "select platform", "squash", "tag", "unpack", "unpack layer", "unprotect", "verify",
    "write blob",
    // Squashfs images (site).
    "mount squashfs", "read image metadata", "read squashfs",
    // Containers and engines (runtime).
    "bind home", "change", "kill", "logs", "setns", "start", "template", "chdir to working directory", "create mount target",
    "set the parent death signal",
    "create working directory", "detach old root", "device edit", "drop capability", "engine",
    "env", "find container", "make mounts private", "map subordinate IDs", "name", "oci", "open bind source",
    "open mount", "open mount target", "probe", "read container", "remount read-only", "rm",
    "rmname", "root emulation", "run", "stop", "system df", "top", "update the loader cache: ldconfig", "user", "volume", "workdir",
    // Devices.
    "--device", "CDI", "CDI spec", "cdi generate", "check requirement", "device", "device node", "gpu info",
    "gpu stats", "read NVML",
    "inject GPUs", "mount source", "parse ld.so.cache", "read ELF", "select GPUs",
    "ib info", "inject MPI", "select HCAs",
    // The site policy (site).
    "registry",
    // The job gateway (gateway/, berthd).
    "listen", "map identity", "read JWKS", "discover issuer", "verify token", "read accounting",
    "estimate start",
    // The udocker command line (cli/udocker.h).
    "setup", "udocker",
};
// clang-format on

namespace error_internal {
/// Not constexpr on purpose: an Op made from a word missing from kOpWords calls it, which fails
/// the build with this name in the message.
void op_word_not_in_kOpWords();
}  // namespace error_internal

/// An operation word from kOpWords. A string literal converts to an Op at compile time, so
/// `make_error("open", ...)` reads as before, and a word outside the list does not build.
class Op {
 public:
  constexpr Op() = default;
  /// The Op of `word`, which must be in kOpWords (checked at compile time).
  consteval Op(const char* word) : index_(index_of(word)) {}  // NOLINT: implicit on purpose

  /// The word, as printed.
  constexpr std::string_view word() const { return kOpWords[index_]; }
  friend constexpr bool operator==(Op a, Op b) { return a.index_ == b.index_; }

 private:
  static consteval uint16_t index_of(std::string_view word) {
    for (size_t i = 0; i < std::size(kOpWords); ++i)
      if (kOpWords[i] == word) return static_cast<uint16_t>(i);
    error_internal::op_word_not_in_kOpWords();
    return 0;
  }
  uint16_t index_ = 0;
};

struct Error {
  Op op;                               ///< the failing operation, e.g. "open", "GET"
  std::string subject;                 ///< the path, URL or name it acted on
  int sys_errno = 0;                   ///< errno, 0 when not a system call failure
  int http_status = 0;                 ///< HTTP status, 0 when not an HTTP failure
  ErrorCode code = ErrorCode::kOther;  ///< what kind of failure, for callers to branch on
  std::string detail;                  ///< what went wrong, in words
  std::string hint;                    ///< what the user can do about it, may be empty
  std::vector<std::string> context;    ///< outermost last: "pull alpine:3", ...

  /// One line: "context: op subject: detail (strerror / HTTP n)".
  std::string message() const;
  /// Adds an outer layer of context ("pulling alpine:latest").
  Error with_context(std::string ctx) &&;
  /// Sets the hint printed under the message.
  Error with_hint(std::string h) &&;
};

/// An error from a failed system call; reads errno now; its code follows errno.
Error sys_error(Op op, std::string subject);
/// An error from a failed system call with an explicit errno value; its code follows errno.
Error sys_error(Op op, std::string subject, int err);
/// An error with no errno: bad input, failed check, protocol violation.
Error make_error(Op op, std::string subject, std::string detail,
                 ErrorCode code = ErrorCode::kOther);
/// An error from an HTTP exchange (code kHttp).
Error http_error(Op op, std::string url, int status, std::string detail);

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
#define BERTH_TRY(expr)                                             \
  ({                                                                \
    auto berth_try_r_ = (expr);                                     \
    if (!berth_try_r_.ok()) return std::move(berth_try_r_).error(); \
    std::move(berth_try_r_).value();                                \
  })

/// Evaluates a Status expression; on error returns it from the enclosing function.
#define BERTH_CHECK(expr)                                               \
  do {                                                                  \
    auto berth_check_r_ = (expr);                                       \
    if (!berth_check_r_.ok()) return std::move(berth_check_r_).error(); \
  } while (0)
