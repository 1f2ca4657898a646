#include "image/http.h"

// The type-checking macros would hide the functions; calls go through CurlApi below.
#define CURL_DISABLE_TYPECHECK
#include <curl/curl.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <mutex>

#include "core/dynlib.h"
#include "core/strings.h"

namespace berth {

namespace {

/// The libcurl and libcrypto functions used here, resolved on first use (see core/dynlib.h).
struct CurlApi {
  decltype(&::curl_global_init) global_init;
  decltype(&::curl_easy_init) easy_init;
  decltype(&::curl_easy_cleanup) easy_cleanup;
  decltype(&::curl_easy_setopt) easy_setopt;
  decltype(&::curl_easy_getinfo) easy_getinfo;
  decltype(&::curl_easy_perform) easy_perform;
  decltype(&::curl_easy_strerror) easy_strerror;
  decltype(&::curl_slist_append) slist_append;
  decltype(&::curl_slist_free_all) slist_free_all;
  decltype(&::EVP_EncodeBlock) encode_block;
  decltype(&::EVP_DecodeBlock) decode_block;
};

const CurlApi& api() {
  static const CurlApi a = [] {
    LazyLibrary& c = libcurl();
    LazyLibrary& k = libcrypto();
    return CurlApi{c.get(&::curl_global_init, "curl_global_init"),
                   c.get(&::curl_easy_init, "curl_easy_init"),
                   c.get(&::curl_easy_cleanup, "curl_easy_cleanup"),
                   c.get(&::curl_easy_setopt, "curl_easy_setopt"),
                   c.get(&::curl_easy_getinfo, "curl_easy_getinfo"),
                   c.get(&::curl_easy_perform, "curl_easy_perform"),
                   c.get(&::curl_easy_strerror, "curl_easy_strerror"),
                   c.get(&::curl_slist_append, "curl_slist_append"),
                   c.get(&::curl_slist_free_all, "curl_slist_free_all"),
                   k.get(&::EVP_EncodeBlock, "EVP_EncodeBlock"),
                   k.get(&::EVP_DecodeBlock, "EVP_DecodeBlock")};
  }();
  return a;
}

void global_init_once() {
  static std::once_flag once;
  std::call_once(once, [] { api().global_init(CURL_GLOBAL_DEFAULT); });
}

struct Transfer {
  const HttpRequest* req;
  CURL* curl;
  HttpResponse resp;
  std::optional<Error> sink_error;
  bool too_large = false;
};

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::string_view line(data, size * n);
  if (line.starts_with("HTTP/")) {
    t->resp.headers.clear();  // a new response (100-continue): keep only the last
    return size * n;
  }
  auto colon = line.find(':');
  if (colon == std::string_view::npos) return size * n;
  t->resp.headers[lower(line.substr(0, colon))] = std::string(trim(line.substr(colon + 1)));
  return size * n;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t len = size * n;
  long status = 0;
  api().easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
  t->resp.status = status;
  if (t->req->sink && status >= 200 && status < 300) {
    Status st = t->req->sink(t->resp, data, len);
    if (!st.ok()) {
      t->sink_error = std::move(st).error();
      return 0;  // makes curl abort with CURLE_WRITE_ERROR
    }
    return len;
  }
  if (t->resp.body.size() + len > t->req->max_body) {
    t->too_large = true;
    return 0;
  }
  t->resp.body.append(data, len);
  return len;
}

struct CurlDeleter {
  void operator()(CURL* c) const { api().easy_cleanup(c); }
};
struct SlistDeleter {
  void operator()(curl_slist* l) const { api().slist_free_all(l); }
};

}  // namespace

std::string HttpResponse::header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? std::string() : it->second;
}

Result<HttpResponse> http_perform(const HttpRequest& req) {
  global_init_once();
  std::unique_ptr<CURL, CurlDeleter> curl(api().easy_init());
  if (!curl) return make_error(req.method, req.url, "cannot create a curl handle");
  CURL* c = curl.get();

  Transfer t{&req, c, {}, std::nullopt, false};
  char errbuf[CURL_ERROR_SIZE] = {0};
  std::unique_ptr<curl_slist, SlistDeleter> hdrs;
  for (const auto& h : req.headers) {
    // Appending returns the list head (new only for the first item), or NULL
    // leaving the list intact.
    curl_slist* head = api().slist_append(hdrs.get(), h.c_str());
    if (!head) return make_error(req.method, req.url, "out of memory building headers");
    if (head != hdrs.get()) hdrs.reset(head);
  }

  api().easy_setopt(c, CURLOPT_URL, req.url.c_str());
  api().easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  api().easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  api().easy_setopt(c, CURLOPT_USERAGENT, "berth");
  api().easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  if (hdrs) api().easy_setopt(c, CURLOPT_HTTPHEADER, hdrs.get());
  api().easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  api().easy_setopt(c, CURLOPT_HEADERDATA, &t);
  api().easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  api().easy_setopt(c, CURLOPT_WRITEDATA, &t);
  api().easy_setopt(c, CURLOPT_CONNECTTIMEOUT, req.connect_timeout_s);
  if (req.low_speed_time_s > 0 && req.low_speed_limit > 0) {
    api().easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, req.low_speed_limit);
    api().easy_setopt(c, CURLOPT_LOW_SPEED_TIME, req.low_speed_time_s);
  }
  if (req.timeout_ms > 0) api().easy_setopt(c, CURLOPT_TIMEOUT_MS, req.timeout_ms);
  if (!req.ca_file.empty()) api().easy_setopt(c, CURLOPT_CAINFO, req.ca_file.c_str());
  if (req.method != "GET") {
    if (req.method == "POST") {
      api().easy_setopt(c, CURLOPT_POST, 1L);
    } else {
      api().easy_setopt(c, CURLOPT_CUSTOMREQUEST, req.method.c_str());
    }
    api().easy_setopt(c, CURLOPT_POSTFIELDS, req.post_body.c_str());
    api().easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(req.post_body.size()));
  }

  CURLcode rc = api().easy_perform(c);
  if (t.sink_error) return std::move(*t.sink_error);
  if (t.too_large) {
    return make_error(req.method, req.url,
                      "response larger than " + std::to_string(req.max_body) + " bytes");
  }
  if (rc == CURLE_OPERATION_TIMEDOUT && req.timeout_ms > 0) {
    // curl says "timed out" for both limits: the low-speed one cannot fire before its window
    // has passed, and curl stops for the whole-request one within a few ms of it.
    curl_off_t total_us = 0;
    api().easy_getinfo(c, CURLINFO_TOTAL_TIME_T, &total_us);
    long long ms = static_cast<long long>(total_us) / 1000;
    if (ms < req.low_speed_time_s * 1000LL || ms + 200 >= req.timeout_ms)
      return make_error(req.method, req.url, "the deadline passed before the transfer ended");
  }
  if (rc == CURLE_OPERATION_TIMEDOUT && req.low_speed_time_s > 0)
    return make_error(req.method, req.url,
                      "slower than " + std::to_string(req.low_speed_limit) + " bytes/s for " +
                          std::to_string(req.low_speed_time_s) + " s");
  if (rc != CURLE_OK) {
    std::string msg = errbuf[0] ? errbuf : api().easy_strerror(rc);
    while (!msg.empty() && msg.back() == '\n') msg.pop_back();
    return make_error(req.method, req.url, msg);
  }
  api().easy_getinfo(c, CURLINFO_RESPONSE_CODE, &t.resp.status);
  return std::move(t.resp);
}

std::string url_escape(std::string_view s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char ch : s) {
    if (std::isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
      out += static_cast<char>(ch);
    } else {
      out += '%';
      out += hex[ch >> 4];
      out += hex[ch & 15];
    }
  }
  return out;
}

std::string base64_encode(std::string_view data) {
  std::string out(4 * ((data.size() + 2) / 3) + 1, '\0');
  int n = api().encode_block(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(data.data()),
                          static_cast<int>(data.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  std::string in;
  for (char ch : text) {
    if (!std::isspace(static_cast<unsigned char>(ch))) in += ch;
  }
  while (in.size() % 4 != 0) in += '=';  // some writers drop the padding
  size_t pad = 0;
  for (size_t i = in.size(); i > 0 && in[i - 1] == '=' && pad < 2; --i) ++pad;
  for (size_t i = 0; i < in.size() - pad; ++i) {
    char ch = in[i];
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '+' && ch != '/') {
      return std::nullopt;
    }
  }
  if (in.empty()) return std::string();
  std::string out(in.size() / 4 * 3, '\0');
  int n = api().decode_block(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(in.data()),
                          static_cast<int>(in.size()));
  if (n < 0) return std::nullopt;
  // EVP_DecodeBlock counts the padding as zero bytes; drop them.
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

}  // namespace berth
