// bench/gateway's load client: N clients, each a thread with one keep-alive HTTP/1.1
// connection, send the same request back to back for a fixed time (or a fixed number of
// requests in all), and the whole run's throughput and latency percentiles are printed as one
// JSON line. Written for the benchmark because the load tools of Debian 12 at hand cannot send
// a header that differs per request (an Idempotency-Key), and Python's threads cannot drive 64
// clients at the rate of the servers measured.
//
// Usage: gateway_load URL PATH [--method GET|POST] [--clients N] [--seconds S]
//                     [--requests N] [--header 'Name: value']... [--body TEXT]
//                     [--idempotency PREFIX]
// --idempotency gives each request the header Idempotency-Key: PREFIX-CLIENT-I.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Options {
  std::string url, path, method = "GET", body, idempotency;
  int clients = 64;
  double seconds = 10;
  long requests = 0;  // 0: no limit but the time
  httplib::Headers headers;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "gateway_load: %s\n", why);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  if (argc < 3) usage("usage: gateway_load URL PATH [options] (see the source's header)");
  Options o;
  o.url = argv[1];
  o.path = argv[2];
  for (int i = 3; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) usage(("option " + a + " needs a value").c_str());
    std::string v = argv[++i];
    if (a == "--method")
      o.method = v;
    else if (a == "--clients")
      o.clients = std::atoi(v.c_str());
    else if (a == "--seconds")
      o.seconds = std::atof(v.c_str());
    else if (a == "--requests")
      o.requests = std::atol(v.c_str());
    else if (a == "--body")
      o.body = v;
    else if (a == "--idempotency")
      o.idempotency = v;
    else if (a == "--header") {
      size_t colon = v.find(':');
      if (colon == std::string::npos) usage(("a header is 'Name: value': " + v).c_str());
      size_t start = v.find_first_not_of(' ', colon + 1);
      o.headers.emplace(v.substr(0, colon), start == std::string::npos ? "" : v.substr(start));
    } else {
      usage(("unknown option " + a).c_str());
    }
  }
  if (o.method != "GET" && o.method != "POST") usage("--method is GET or POST");
  if (o.clients < 1 || o.clients > 4096) usage("--clients is 1 to 4096");
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  std::atomic<long> issued{0}, errors{0};
  std::mutex mu;
  std::vector<double> all;  // latencies in ms
  std::string first_error;
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const auto end =
      start + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(o.seconds));
  std::vector<std::thread> threads;
  for (int c = 0; c < o.clients; ++c) {
    threads.emplace_back([&, c] {
      httplib::Client client(o.url);
      client.set_keep_alive(true);
      client.set_tcp_nodelay(true);
      client.set_connection_timeout(30);
      client.set_read_timeout(60);
      std::vector<double> mine;
      for (long i = 0;; ++i) {
        if (clock::now() >= end) break;
        if (o.requests > 0 && issued.fetch_add(1) >= o.requests) break;
        httplib::Headers h = o.headers;
        if (!o.idempotency.empty())
          h.emplace("Idempotency-Key",
                    o.idempotency + "-" + std::to_string(c) + "-" + std::to_string(i));
        auto t = clock::now();
        httplib::Result r = o.method == "GET" ? client.Get(o.path, h)
                                              : client.Post(o.path, h, o.body, "application/json");
        double ms = std::chrono::duration<double, std::milli>(clock::now() - t).count();
        if (!r || r->status / 100 != 2) {
          ++errors;
          std::fprintf(
              stderr, "gateway_load: client %d, request %ld, at %.3f s: %s\n", c, i,
              std::chrono::duration<double>(t - start).count(),
              !r ? httplib::to_string(r.error()).c_str() : std::to_string(r->status).c_str());
          std::lock_guard<std::mutex> lock(mu);
          if (first_error.empty())
            first_error = !r ? httplib::to_string(r.error())
                             : std::to_string(r->status) + " " + r->body.substr(0, 200);
          continue;
        }
        mine.push_back(ms);
      }
      std::lock_guard<std::mutex> lock(mu);
      all.insert(all.end(), mine.begin(), mine.end());
    });
  }
  for (std::thread& t : threads) t.join();
  double seconds = std::chrono::duration<double>(clock::now() - start).count();
  std::sort(all.begin(), all.end());
  auto pct = [&](double p) {
    if (all.empty()) return 0.0;
    size_t i = static_cast<size_t>(p * static_cast<double>(all.size() - 1) + 0.5);
    return all[std::min(i, all.size() - 1)];
  };
  std::string err;
  for (char ch : first_error)
    if (ch != '"' && ch != '\\' && static_cast<unsigned char>(ch) >= 0x20) err.push_back(ch);
  std::printf(
      "{\"ok\": %zu, \"errors\": %ld, \"seconds\": %.3f, \"rps\": %.1f, \"p50_ms\": %.3f, "
      "\"p99_ms\": %.3f, \"first_error\": \"%s\"}\n",
      all.size(), errors.load(), seconds, static_cast<double>(all.size()) / seconds, pct(0.50),
      pct(0.99), err.c_str());
  return 0;
}
