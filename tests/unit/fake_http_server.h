// A tiny HTTP/1.1 server on 127.0.0.1 for tests: one thread, one request per
// connection, answers from a handler. Good enough to play a registry, a token
// service or a storage backend that a registry redirects to.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace berth::testing {

struct FakeRequest {
  std::string method, target;                  ///< target: path and query
  std::map<std::string, std::string> headers;  ///< names lowercased
  std::string body;
  std::string header(const std::string& n) const {
    auto it = headers.find(n);
    return it == headers.end() ? "" : it->second;
  }
};

struct FakeResponse {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

class FakeHttpServer {
 public:
  using Handler = std::function<FakeResponse(const FakeRequest&)>;

  explicit FakeHttpServer(Handler h) : handler_(std::move(h)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 16) != 0) {
      std::perror("FakeHttpServer: bind or listen on 127.0.0.1");  // no server, no test
      std::abort();
    }
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { loop(); });
  }
  ~FakeHttpServer() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }

  int port() const { return port_; }
  std::string host() const { return "127.0.0.1:" + std::to_string(port_); }
  std::vector<FakeRequest> requests() {
    std::lock_guard l(mu_);
    return requests_;
  }

 private:
  void loop() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      serve(c);
      ::close(c);
    }
  }

  void serve(int c) {
    std::string in;
    char buf[4096];
    size_t head_end;
    while ((head_end = in.find("\r\n\r\n")) == std::string::npos) {
      ssize_t n = ::read(c, buf, sizeof buf);
      if (n <= 0) return;
      in.append(buf, static_cast<size_t>(n));
    }
    FakeRequest req;
    std::string head = in.substr(0, head_end);
    size_t eol = head.find("\r\n");
    std::string first = head.substr(0, eol);
    req.method = first.substr(0, first.find(' '));
    req.target = first.substr(req.method.size() + 1, first.rfind(' ') - req.method.size() - 1);
    size_t pos = eol == std::string::npos ? head.size() : eol + 2;
    while (pos < head.size()) {
      size_t e = head.find("\r\n", pos);
      if (e == std::string::npos) e = head.size();
      std::string line = head.substr(pos, e - pos);
      size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = line.substr(0, colon);
        for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        size_t v = line.find_first_not_of(' ', colon + 1);
        req.headers[name] = v == std::string::npos ? "" : line.substr(v);
      }
      pos = e + 2;
    }
    req.body = in.substr(head_end + 4);
    size_t want =
        req.headers.count("content-length") ? std::stoul(req.headers["content-length"]) : 0;
    while (req.body.size() < want) {
      ssize_t n = ::read(c, buf, sizeof buf);
      if (n <= 0) break;
      req.body.append(buf, static_cast<size_t>(n));
    }
    {
      std::lock_guard l(mu_);
      requests_.push_back(req);
    }
    FakeResponse r = handler_(req);
    std::string out = "HTTP/1.1 " + std::to_string(r.status) + " X\r\n";
    for (auto& [k, v] : r.headers) out.append(k).append(": ").append(v).append("\r\n");
    out += "Content-Length: " + std::to_string(r.body.size()) + "\r\nConnection: close\r\n\r\n";
    out += r.body;
    size_t off = 0;
    while (off < out.size()) {
      ssize_t n = ::write(c, out.data() + off, out.size() - off);
      if (n <= 0) return;
      off += static_cast<size_t>(n);
    }
  }

  Handler handler_;
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<FakeRequest> requests_;
  std::thread thread_;
};

}  // namespace berth::testing
