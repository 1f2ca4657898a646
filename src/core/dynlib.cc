#include "core/dynlib.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <mutex>

namespace berth {

namespace {
std::mutex g_load_mutex;  // layers download on several threads; dlopen once per library

[[noreturn]] void fail(const char* what, const char* soname, const char* package) {
  // Printed here, not by main: this is a broken installation found deep in a call that has no
  // error path (a hash update, a curl option), and nothing can go on without it.
  std::fprintf(stderr, "berth: error: %s %s: %s\nberth: hint: install the Debian package %s\n",
               what, soname, dlerror(), package);
  std::fflush(stderr);
  _exit(125);
}
}  // namespace

void* LazyLibrary::symbol(const char* name) {
  std::lock_guard<std::mutex> hold(g_load_mutex);
  if (!handle_) {
    handle_ = dlopen(soname_, RTLD_NOW | RTLD_LOCAL);
    if (!handle_) fail("load", soname_, package_);
  }
  void* sym = dlsym(handle_, name);
  if (!sym) fail("find symbol in", soname_, package_);
  return sym;
}

bool LazyLibrary::available() {
  std::lock_guard<std::mutex> hold(g_load_mutex);
  if (!handle_) handle_ = dlopen(soname_, RTLD_NOW | RTLD_LOCAL);
  return handle_ != nullptr;
}

LazyLibrary& libcrypto() {
  static LazyLibrary lib("libcrypto.so.3", "libssl3");
  return lib;
}

LazyLibrary& libcurl() {
  static LazyLibrary lib("libcurl.so.4", "libcurl4");
  return lib;
}

LazyLibrary& libarchive() {
  static LazyLibrary lib("libarchive.so.13", "libarchive13");
  return lib;
}

LazyLibrary& libsquashfs() {
  static LazyLibrary lib("libsquashfs.so.1", "libsquashfs1");
  return lib;
}

LazyLibrary& libisal() {
  static LazyLibrary lib("libisal.so.2", "libisal2");
  return lib;
}

}  // namespace berth
