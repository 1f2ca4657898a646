// The libcurl functions Berth uses, resolved on first use (see core/dynlib.h). Internal to
// src/image: only the HTTP client (image/http.cc) includes it.
#pragma once

// The type-checking macros would hide the functions; calls go through CurlApi.
#define CURL_DISABLE_TYPECHECK
#include <curl/curl.h>

#include "core/dynlib.h"

namespace berth {

/// The functions, each resolved by its own name when the struct is built.
struct CurlApi {
  BERTH_LAZY_FUNCTION(libcurl(), global_init, curl_global_init);
  BERTH_LAZY_FUNCTION(libcurl(), easy_init, curl_easy_init);
  BERTH_LAZY_FUNCTION(libcurl(), easy_cleanup, curl_easy_cleanup);
  BERTH_LAZY_FUNCTION(libcurl(), easy_setopt, curl_easy_setopt);
  BERTH_LAZY_FUNCTION(libcurl(), easy_getinfo, curl_easy_getinfo);
  BERTH_LAZY_FUNCTION(libcurl(), easy_perform, curl_easy_perform);
  BERTH_LAZY_FUNCTION(libcurl(), easy_strerror, curl_easy_strerror);
  BERTH_LAZY_FUNCTION(libcurl(), slist_append, curl_slist_append);
  BERTH_LAZY_FUNCTION(libcurl(), slist_free_all, curl_slist_free_all);
};

/// The functions, loading libcurl the first time.
const CurlApi& curl_api();

}  // namespace berth
