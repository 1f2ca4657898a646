// berthd's connections: who gets a worker thread, and for how long a request may take to arrive.
//
// cpp-httplib 0.11 gives each accepted connection a worker for as long as it lasts, reads a
// request with a timeout per read (not per request) and queues connections without bound: a
// client sending its headers a byte every few seconds holds a worker for ever, and a few hundred
// such connections leave none for anyone else. GuardedServer replaces the library's connection
// handling (its accept loop is kept): on the accept thread, a connection is admitted only while
// its client address has fewer than max_per_address open and fewer than max_queued wait for a
// worker, else it is answered 503 and closed at once; on the worker, each request's headers and
// body must arrive within request_timeout_s of its first byte (else 408 and the connection is
// closed), and an idle connection is closed after idle_timeout_s. With a certificate it speaks
// TLS itself (OpenSSL, as cpp-httplib's SSLServer does), the handshake within the deadline too.
#pragma once

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gateway/config.h"

namespace berth::gateway {

/// Whether the request being served on this thread ran past request_timeout_s (answered 408).
bool request_timed_out();

/// A cpp-httplib server whose connections are admitted, queued and served as above.
class GuardedServer : public httplib::Server {
 public:
  /// `workers` threads serve connections while listen_after_bind() runs; with `cert` and
  /// `key` (PEM files), over TLS.
  GuardedServer(const ConnectionsConfig& limits, int workers, const std::string& cert = "",
                const std::string& key = "");
  ~GuardedServer() override;
  /// False when the certificate and key given cannot be loaded.
  bool is_valid() const override;

  /// Called on the worker thread before each request is read: resets per-request state.
  std::function<void()> on_request;
  /// Called on the accept thread for each connection refused: "per_address" or "queue_full".
  std::function<void(const char* reason)> on_refused;

  /// Connections open (admitted and not yet closed) from `address`, for tests.
  int open_from(const std::string& address) const;

 private:
  class Queue;
  friend class Queue;
  struct Waiting {
    socket_t sock;
    std::string address;
  };

  // Called by cpp-httplib's accept loop, through Queue::enqueue, on the accept thread.
  bool process_and_close_socket(socket_t sock) override;
  void refuse(socket_t sock, const char* reason, const std::string& message);
  void work();
  void serve(socket_t sock);
  void start_workers();
  void stop_workers();

  ConnectionsConfig limits_;
  int workers_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Waiting> waiting_;
  std::map<std::string, int> open_;  ///< per client address: queued or being served
  std::set<socket_t> serving_;       ///< shut down by stop_workers()
  bool stopping_ = false;
  std::vector<std::thread> threads_;
  SSL_CTX* tls_ = nullptr;  ///< with a certificate
  bool valid_ = true;
};

}  // namespace berth::gateway
