// Shared libraries loaded on first use.
//
// libcurl, libarchive and libcrypto bring some 40 libraries with them; loading and relocating
// them took about 9 ms of every start, which `berth run` on an existing container (no network,
// no unpacking) must not pay. Code that needs one of them resolves its functions through a
// LazyLibrary the first time it runs instead of linking the library.
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

  /// symbol() cast to the function-pointer type of `fn`, e.g. get(&curl_easy_init, "...").
  template <class Fn>
  Fn* get(Fn* /*type only*/, const char* name) {
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

}  // namespace berth
