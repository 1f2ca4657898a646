// Admission, queueing and request deadlines of berthd's connections (gateway/connections.h).
#include "gateway/connections.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

namespace berth::gateway {
namespace {

using Clock = std::chrono::steady_clock;

thread_local bool timed_out = false;

/// The numeric address of a socket's peer (getpeername) or own end (getsockname), and its port.
std::pair<std::string, int> address_of(socket_t sock, bool peer) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  auto* sa = reinterpret_cast<sockaddr*>(&ss);
  if ((peer ? ::getpeername(sock, sa, &len) : ::getsockname(sock, sa, &len)) != 0) return {"", 0};
  char text[INET6_ADDRSTRLEN] = "";
  int port = 0;
  if (ss.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
    port = ntohs(in->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
    port = ntohs(in6->sin6_port);
  }
  return {text, port};
}

/// Waits until `sock` is readable (or closed) for at most `ms`; false on timeout or error.
bool wait_for(socket_t sock, short events, int64_t ms) {
  pollfd p{sock, events, 0};
  for (;;) {
    int n = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(ms, 0)));
    if (n < 0 && errno == EINTR) continue;
    return n > 0;
  }
}

/// A short answer of berthd's JSON error form, for a connection closed right after.
std::string answer_text(int status, const char* reason, const std::string& message) {
  std::string body =
      "{\"error\":{\"status\":" + std::to_string(status) + ",\"message\":\"" + message + "\"}}\n";
  return "HTTP/1.1 " + std::to_string(status) + " " + reason +
         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
}

/// Writes `text` without waiting: a client that cannot take these few bytes at once gets the
/// close alone (best effort).
void answer_now(socket_t sock, const std::string& text) {
  (void)::send(sock, text.data(), text.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
}

/// One connection's socket as cpp-httplib reads and writes it: reads buffered (the library
/// reads a request's lines a byte at a time), each read bounded by the read timeout and by the
/// request's deadline; past the deadline the request is answered 408 and every later read and
/// write fails, so that the library gives up on the connection.
class DeadlineStream : public httplib::Stream {
 public:
  /// `ssl`: the connection's TLS session (its socket non-blocking), or nullptr.
  DeadlineStream(socket_t sock, SSL* ssl, int64_t read_timeout_ms, int64_t write_timeout_ms)
      : sock_(sock),
        ssl_(ssl),
        read_timeout_ms_(read_timeout_ms),
        write_timeout_ms_(write_timeout_ms) {}

  void set_deadline(Clock::time_point deadline) { deadline_ = deadline; }
  bool expired() const { return expired_; }
  /// Whether bytes already read (here or in the TLS session) wait to be taken.
  bool buffered() const { return begin_ < end_ || (ssl_ != nullptr && SSL_pending(ssl_) > 0); }

  bool is_readable() const override { return buffered() || wait_readable(); }
  bool is_writable() const override {
    return !expired_ && wait_for(sock_, POLLOUT, write_timeout_ms_);
  }
  ssize_t read(char* ptr, size_t size) override {
    if (expired_) return -1;
    if (begin_ == end_) {
      ssize_t n = receive();
      if (n <= 0) return n;
      begin_ = 0;
      end_ = static_cast<size_t>(n);
    }
    size_t n = std::min(size, end_ - begin_);
    std::memcpy(ptr, buf_ + begin_, n);
    begin_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    return expired_ ? -1 : send_all(ptr, size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    std::tie(ip, port) = address_of(sock_, true);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    std::tie(ip, port) = address_of(sock_, false);
  }
  socket_t socket() const override { return sock_; }

 private:
  /// Waits for bytes until the read timeout or the deadline, whichever comes first; at the
  /// deadline, answers 408 once and fails from then on.
  bool wait_readable() const {
    if (expired_) return false;
    // Checked before waiting too: a client trickling bytes never lets the wait time out.
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
    int64_t ms = std::min<int64_t>(read_timeout_ms_, left.count());
    if (ms > 0 && wait_for(sock_, POLLIN, ms) && Clock::now() < deadline_) return true;
    if (Clock::now() >= deadline_) {
      expired_ = true;
      timed_out = true;
      std::string text =
          answer_text(408, "Request Timeout",
                      "the request did not arrive within [connections] request_timeout_s");
      if (ssl_ == nullptr)
        answer_now(sock_, text);
      else
        (void)const_cast<DeadlineStream*>(this)->send_all(text.data(), text.size());
    }
    return false;
  }

  /// Reads what has arrived into buf_ (waiting as wait_readable does): its size, 0 at the end
  /// of the stream, -1 on error or timeout.
  ssize_t receive() {
    for (;;) {
      if (ssl_ == nullptr || SSL_pending(ssl_) == 0)
        if (!wait_readable()) return -1;
      if (ssl_ == nullptr) {
        ssize_t n = ::recv(sock_, buf_, sizeof(buf_), 0);
        if (n < 0 && errno == EINTR) continue;
        return n;
      }
      int n = SSL_read(ssl_, buf_, sizeof(buf_));
      if (n > 0) return n;
      int err = SSL_get_error(ssl_, n);
      if (err == SSL_ERROR_ZERO_RETURN) return 0;
      // A record not complete yet, or a renegotiation's write: wait and try again.
      if (err == SSL_ERROR_WANT_READ) continue;
      if (err == SSL_ERROR_WANT_WRITE && wait_for(sock_, POLLOUT, write_timeout_ms_)) continue;
      return -1;
    }
  }

  /// Writes all of `size` bytes, each wait for the socket at most the write timeout.
  ssize_t send_all(const char* ptr, size_t size) {
    size_t done = 0;
    while (done < size) {
      if (!wait_for(sock_, POLLOUT, write_timeout_ms_)) return -1;
      if (ssl_ == nullptr) {
        ssize_t n = ::send(sock_, ptr + done, size - done, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        done += static_cast<size_t>(n);
        continue;
      }
      int n = SSL_write(ssl_, ptr + done, static_cast<int>(size - done));
      if (n > 0) {
        done += static_cast<size_t>(n);
        continue;
      }
      int err = SSL_get_error(ssl_, n);
      if (err == SSL_ERROR_WANT_WRITE) continue;
      if (err == SSL_ERROR_WANT_READ && wait_for(sock_, POLLIN, write_timeout_ms_)) continue;
      return -1;
    }
    return static_cast<ssize_t>(size);
  }

  socket_t sock_;
  SSL* ssl_;
  int64_t read_timeout_ms_, write_timeout_ms_;
  Clock::time_point deadline_ = Clock::time_point::max();
  mutable bool expired_ = false;
  char buf_[CPPHTTPLIB_RECV_BUFSIZ];
  size_t begin_ = 0, end_ = 0;
};

}  // namespace

bool request_timed_out() {
  return timed_out;
}

/// The task queue cpp-httplib's accept loop hands each connection to: runs the hand-over at
/// once, on the accept thread (process_and_close_socket then admits or refuses it), and owns
/// the worker threads for as long as the loop runs.
class GuardedServer::Queue : public httplib::TaskQueue {
 public:
  explicit Queue(GuardedServer& server) : server_(server) { server_.start_workers(); }
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override { server_.stop_workers(); }

 private:
  GuardedServer& server_;
};

GuardedServer::GuardedServer(const ConnectionsConfig& limits, int workers, const std::string& cert,
                             const std::string& key)
    : limits_(limits), workers_(workers) {
  new_task_queue = [this] { return new Queue(*this); };
  set_keep_alive_timeout(limits_.idle_timeout_s);
  if (cert.empty()) return;
  // As cpp-httplib's SSLServer: TLS 1.2 at least, no compression or renegotiation.
  tls_ = SSL_CTX_new(TLS_server_method());
  valid_ = tls_ != nullptr && SSL_CTX_set_min_proto_version(tls_, TLS1_2_VERSION) == 1 &&
           SSL_CTX_use_certificate_chain_file(tls_, cert.c_str()) == 1 &&
           SSL_CTX_use_PrivateKey_file(tls_, key.c_str(), SSL_FILETYPE_PEM) == 1 &&
           SSL_CTX_check_private_key(tls_) == 1;
  if (tls_ != nullptr) SSL_CTX_set_options(tls_, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
}

GuardedServer::~GuardedServer() {
  stop_workers();
  if (tls_ != nullptr) SSL_CTX_free(tls_);
}

bool GuardedServer::is_valid() const {
  return valid_;
}

int GuardedServer::open_from(const std::string& address) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = open_.find(address);
  return it == open_.end() ? 0 : it->second;
}

void GuardedServer::start_workers() {
  std::lock_guard<std::mutex> lock(mu_);
  stopping_ = false;
  for (int i = 0; i < workers_; ++i) threads_.emplace_back([this] { work(); });
}

void GuardedServer::stop_workers() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (const Waiting& w : waiting_) {
      ::close(w.sock);
      --open_[w.address];
    }
    waiting_.clear();
    // Idle connections wake up and end; a request being handled still gets its answer.
    for (socket_t s : serving_) ::shutdown(s, SHUT_RD);
    threads.swap(threads_);
  }
  cv_.notify_all();
  for (std::thread& t : threads) t.join();
}

bool GuardedServer::process_and_close_socket(socket_t sock) {
  std::string address = address_of(sock, true).first;
  {
    std::lock_guard<std::mutex> lock(mu_);
    int& open = open_[address];
    if (open >= limits_.max_per_address) {
      if (open == 0) open_.erase(address);
      refuse(sock, "per_address",
             "too many connections from " + address + " ([connections] max_per_address)");
      return false;
    }
    if (static_cast<int64_t>(waiting_.size()) >= limits_.max_queued || stopping_) {
      if (open == 0) open_.erase(address);
      refuse(sock, "queue_full", "berthd is busy: try again later ([connections] max_queued)");
      return false;
    }
    ++open;
    waiting_.push_back({sock, address});
  }
  cv_.notify_one();
  return true;
}

void GuardedServer::refuse(socket_t sock, const char* reason, const std::string& message) {
  // With TLS there is no session yet to answer in: the close alone.
  if (tls_ == nullptr) answer_now(sock, answer_text(503, "Service Unavailable", message));
  // The answer, then a FIN; what the client has sent is read away first, since closing over
  // unread bytes resets the connection and may lose the answer.
  ::shutdown(sock, SHUT_WR);
  char sink[4096];
  for (int i = 0; i < 16 && ::recv(sock, sink, sizeof(sink), MSG_DONTWAIT) > 0; ++i) {
  }
  ::close(sock);
  if (on_refused) on_refused(reason);
}

void GuardedServer::work() {
  for (;;) {
    Waiting w;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !waiting_.empty(); });
      if (waiting_.empty()) return;  // stopping
      w = std::move(waiting_.front());
      waiting_.pop_front();
      serving_.insert(w.sock);
    }
    serve(w.sock);
    {
      std::lock_guard<std::mutex> lock(mu_);
      serving_.erase(w.sock);
      if (--open_[w.address] <= 0) open_.erase(w.address);
      // Closed under the lock: stop_workers() never shuts down a number reused meanwhile.
      ::shutdown(w.sock, SHUT_RDWR);
      ::close(w.sock);
    }
  }
}

void GuardedServer::serve(socket_t sock) {
  const int64_t read_ms = read_timeout_sec_ * 1000 + read_timeout_usec_ / 1000;
  const int64_t write_ms = write_timeout_sec_ * 1000 + write_timeout_usec_ / 1000;
  const int64_t idle_ms = limits_.idle_timeout_s * 1000;
  // TLS: the handshake, non-blocking, within one request's deadline.
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl(nullptr, &SSL_free);
  if (tls_ != nullptr) {
    ssl.reset(SSL_new(tls_));
    if (!ssl || ::fcntl(sock, F_SETFL, ::fcntl(sock, F_GETFL) | O_NONBLOCK) != 0 ||
        SSL_set_fd(ssl.get(), sock) != 1)
      return;
    auto deadline = Clock::now() + std::chrono::seconds(limits_.request_timeout_s);
    for (;;) {
      int r = SSL_accept(ssl.get());
      if (r == 1) break;
      int err = SSL_get_error(ssl.get(), r);
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      int64_t ms = std::min<int64_t>(read_ms, left.count());
      if (ms <= 0 || (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) ||
          !wait_for(sock, err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, ms)) {
        ERR_clear_error();
        return;
      }
    }
  }
  DeadlineStream strm(sock, ssl.get(), read_ms, write_ms);
  struct Goodbye {  // a TLS close_notify, best effort, whichever way serving ends
    SSL* ssl;
    ~Goodbye() {
      if (ssl != nullptr) (void)SSL_shutdown(ssl);
      ERR_clear_error();
    }
  } goodbye{ssl.get()};
  for (size_t left = keep_alive_max_count_; left > 0; --left) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
    }
    // The next request's first byte, within idle_timeout_s; its rest within the deadline.
    if (!strm.buffered() && !wait_for(sock, POLLIN, idle_ms)) return;
    strm.set_deadline(Clock::now() + std::chrono::seconds(limits_.request_timeout_s));
    timed_out = false;
    if (on_request) on_request();
    bool closed = false;
    if (!process_request(strm, left == 1, closed, nullptr) || closed || strm.expired()) return;
  }
}

}  // namespace berth::gateway
