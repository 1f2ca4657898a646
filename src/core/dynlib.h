// Shared libraries loaded on first use.
//
// libcurl, libarchive and libcrypto bring some 40 libraries with them; loading and relocating
// them took about 9 ms of every start, which `berth run` on an existing container (no network,
// no unpacking) must not pay. Code that needs one of them resolves its functions through a
// LazyLibrary the first time it runs instead of linking the library.
//
// Each library's functions are listed once, in one header per library (core/crypto_api.h,
// image/curl_api.h, image/archive_api.h, image/sqfs_api.h), as the members of a struct declared
// with BERTH_LAZY_FUNCTION: the member's type and the symbol's name come from the same token, so a
// function can be neither bound under another's name nor called through the wrong type.
#pragma once

namespace berth {

class LazyLibrary {
 public:
  /// `soname` as dlopen takes it ("libcurl.so.4"); `package` names the Debian package that
  /// provides it, for the error message.
  constexpr LazyLibrary(const char* soname, const char* package)
      : soname_(soname), package_(package) {}

  /// The address of `symbol`, loading the library on first use. A missing library or symbol
  /// is an installation fault that no caller can work around: it prints one line naming the
  /// library and the package and exits with status 125.
  void* symbol(const char* name);

  /// Whether the library can be loaded (loading it now): for a library Berth can do without,
  /// whose API struct is then never built. Does not exit.
  bool available();

  /// symbol() as a pointer to the function type `Fn`; used through BERTH_LAZY_FUNCTION.
  template <class Fn>
  Fn* get(const char* name) {
    return reinterpret_cast<Fn*>(symbol(name));
  }

 private:
  const char* soname_;
  const char* package_;
  void* handle_ = nullptr;
};

/// The libraries Berth loads this way (Debian 12 sonames).
LazyLibrary& libcrypto();
LazyLibrary& libcurl();
LazyLibrary& libarchive();
/// squashfs-tools-ng's library: `berth squash` and reading a squashfs file (image/sqfs_api.h).
LazyLibrary& libsquashfs();
/// Intel's ISA-L, for its gzip decompressor (image/inflate.h); optional: see available().
LazyLibrary& libisal();

}  // namespace berth

/// Declares `field`, a member of a lazily bound API struct: a pointer with exactly the type of the
/// C function `sym`, resolved by the name "sym" from `lib` (a LazyLibrary&) when the struct is
/// constructed. decltype does not reference the symbol, so no build type links the library.
/// (`field` and `sym` are names, which parentheses would break: hence the NOLINT.)
#define BERTH_LAZY_FUNCTION(lib, field, sym) \
  decltype(&::sym) field = (lib).get<decltype(::sym)>(#sym)  // NOLINT(bugprone-macro-parentheses)
