// The HTTP/1.1 layer of `slurm-train serve`: Boost.Beast's parser on Boost.Asio, every resource a
// client can make it hold bounded, whatever way the request is sent.
//
//   the request line and headers   at most limits.header_bytes (431), at most limits.header_fields
//                                  fields (431)
//   the body                       at most limits.body_bytes, with a Content-Length or chunked
//                                  (413, refused as the limit is passed, not after); a
//                                  Content-Encoding other than identity is refused (415), so that
//                                  nothing is inflated; a Transfer-Encoding other than chunked (501)
//   time                           a request has limits.request_seconds from its first byte to its
//                                  last; a kept-alive connection limits.idle_seconds for its next
//                                  first byte; then it is closed (a slow sender holds no thread:
//                                  connections wait on one event loop)
//   connections                    at most limits.connections open (503), limits.per_source from
//                                  one address (429); both answered at once and closed
//   work                           limits.workers requests handled at once (a thread each), at
//                                  most limits.queue read and waiting for one (503 above)
// So the memory requests can hold is bounded by connections x body_bytes.
//
// Why Beast rather than cpp-httplib: Debian's cpp-httplib (0.11) bounds a body only when it has a
// Content-Length, inflates gzip bodies without a limit, and bounds neither the header's size nor
// its field count; each of its connections holds a thread for as long as the client trickles.
// Beast (Debian's Boost 1.81) has header and body limits for every framing, and Asio lets a
// connection wait without a thread.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace slurm_train {

struct HttpLimits {
  std::size_t header_bytes = 16 << 10;
  std::size_t header_fields = 100;
  std::size_t body_bytes = 8 << 20;
  double request_seconds = 30;
  double idle_seconds = 5;
  int connections = 128;
  int per_source = 32;
  int workers = 64;
  int queue = 128;
};

struct HttpRequest {
  std::string method, target, path;  // path: the target without its query
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::string source;  // the client's address
  // What the server's `on_read` attached to the request; released when it has been handled.
  std::shared_ptr<void> context;
  // The first value of the header `name` (case-insensitive), or "".
  std::string header(std::string_view name) const;
  bool has_header(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type, body;
  std::vector<std::pair<std::string, std::string>> headers;
};

class HttpSession;

class HttpServer {
 public:
  // handle: a whole request's answer, on a worker thread; it must not throw.
  // refuse: the answer to a request the server refuses itself (status and why), on any of its
  //   threads (a handler that threw is a 500 through it); `request` holds what was read of it (the method and path when
  //   the header was read, else nothing). The connection is closed after it.
  // on_read (may be empty): a request read whole and taken, on the event loop's thread, before
  //   it waits for a worker: serve's batcher counts the /predict requests on their way from here,
  //   so that a batch waits for them.
  using Handler = std::function<HttpResponse(const HttpRequest&)>;
  using Refuser = std::function<HttpResponse(const HttpRequest& request, int status, const std::string& why)>;
  using Reader = std::function<void(HttpRequest&)>;

  HttpServer(HttpLimits limits, Handler handle, Refuser refuse, Reader on_read = {});
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Listens on host:port (0: any free port) and returns the port. Throws std::runtime_error
  // naming the address and why.
  int bind(const std::string& host, int port);
  // Serves until stop(); returns once every request that was being read or handled has been
  // answered.
  void serve();
  // From any thread: stops accepting, closes idle connections, lets serve() finish.
  void stop();

 private:
  friend class HttpSession;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace slurm_train
