#include "image/http.h"

#include <algorithm>
#include <cctype>
#include <memory>
#include <mutex>

#include "core/strings.h"
#include "image/curl_api.h"

namespace berth {

const CurlApi& curl_api() {
  static const CurlApi api;
  return api;
}

namespace {

void global_init_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_api().global_init(CURL_GLOBAL_DEFAULT); });
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
  curl_api().easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
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
  void operator()(CURL* c) const { curl_api().easy_cleanup(c); }
};
struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_api().slist_free_all(l); }
};

}  // namespace

std::string HttpResponse::header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? std::string() : it->second;
}

Result<HttpResponse> http_perform(const HttpRequest& req) {
  global_init_once();
  std::unique_ptr<CURL, CurlDeleter> curl(curl_api().easy_init());
  if (!curl) return make_error(req.method, req.url, "cannot create a curl handle");
  CURL* c = curl.get();

  Transfer t{&req, c, {}, std::nullopt, false};
  char errbuf[CURL_ERROR_SIZE] = {0};
  std::unique_ptr<curl_slist, SlistDeleter> hdrs;
  for (const auto& h : req.headers) {
    // Appending returns the list head (new only for the first item), or NULL
    // leaving the list intact.
    curl_slist* head = curl_api().slist_append(hdrs.get(), h.c_str());
    if (!head) return make_error(req.method, req.url, "out of memory building headers");
    if (head != hdrs.get()) hdrs.reset(head);
  }

  curl_api().easy_setopt(c, CURLOPT_URL, req.url.c_str());
  curl_api().easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_api().easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_api().easy_setopt(c, CURLOPT_USERAGENT, "berth");
  curl_api().easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  if (hdrs) curl_api().easy_setopt(c, CURLOPT_HTTPHEADER, hdrs.get());
  curl_api().easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_api().easy_setopt(c, CURLOPT_HEADERDATA, &t);
  curl_api().easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_api().easy_setopt(c, CURLOPT_WRITEDATA, &t);
  curl_api().easy_setopt(c, CURLOPT_CONNECTTIMEOUT, req.connect_timeout_s);
  if (req.low_speed_time_s > 0 && req.low_speed_limit > 0) {
    curl_api().easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, req.low_speed_limit);
    curl_api().easy_setopt(c, CURLOPT_LOW_SPEED_TIME, req.low_speed_time_s);
  }
  if (req.timeout_ms > 0) curl_api().easy_setopt(c, CURLOPT_TIMEOUT_MS, req.timeout_ms);
  if (!req.ca_file.empty()) curl_api().easy_setopt(c, CURLOPT_CAINFO, req.ca_file.c_str());
  if (req.method != "GET") {
    if (req.method == "POST") {
      curl_api().easy_setopt(c, CURLOPT_POST, 1L);
    } else {
      curl_api().easy_setopt(c, CURLOPT_CUSTOMREQUEST, std::string(req.method.word()).c_str());
    }
    curl_api().easy_setopt(c, CURLOPT_POSTFIELDS, req.post_body.c_str());
    curl_api().easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(req.post_body.size()));
  }

  CURLcode rc = curl_api().easy_perform(c);
  if (t.sink_error) return std::move(*t.sink_error);
  if (t.too_large) {
    return make_error(req.method, req.url,
                      "response larger than " + std::to_string(req.max_body) + " bytes");
  }
  if (rc == CURLE_OPERATION_TIMEDOUT && req.timeout_ms > 0) {
    // curl says "timed out" for both limits: the low-speed one cannot fire before its window
    // has passed, and curl stops for the whole-request one within a few ms of it.
    curl_off_t total_us = 0;
    curl_api().easy_getinfo(c, CURLINFO_TOTAL_TIME_T, &total_us);
    long long ms = static_cast<long long>(total_us) / 1000;
    if (ms < req.low_speed_time_s * 1000LL || ms + 200 >= req.timeout_ms)
      return make_error(req.method, req.url, "the deadline passed before the transfer ended");
  }
  if (rc == CURLE_OPERATION_TIMEDOUT && req.low_speed_time_s > 0)
    return make_error(req.method, req.url,
                      "slower than " + std::to_string(req.low_speed_limit) + " bytes/s for " +
                          std::to_string(req.low_speed_time_s) + " s",
                      ErrorCode::kNetwork);  // a transfer failure: pull retries it, resuming
  if (rc != CURLE_OK) {
    std::string msg = errbuf[0] ? errbuf : curl_api().easy_strerror(rc);
    while (!msg.empty() && msg.back() == '\n') msg.pop_back();
    return make_error(req.method, req.url, msg, ErrorCode::kNetwork);
  }
  curl_api().easy_getinfo(c, CURLINFO_RESPONSE_CODE, &t.resp.status);
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

}  // namespace berth
