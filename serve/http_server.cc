#include "serve/http_server.h"

#include <fmt/format.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>

namespace slurm_train {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

namespace {

std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
}

// A header's value as an error message quotes it: short, printable.
std::string shown(std::string_view value) {
  std::string out;
  for (char c : value.substr(0, 40)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return value.size() > 40 ? out + "..." : out;
}

// How long a refused connection may take to read its answer, and how long the rest of its
// request is read and dropped after it: a client that sends its whole body before it reads
// (most do) would otherwise get a reset instead of the answer.
constexpr double kRefusalSeconds = 1;

}  // namespace

std::string HttpRequest::header(std::string_view name) const {
  for (const auto& [key, value] : headers)
    if (beast::iequals(key, name)) return value;
  return {};
}

bool HttpRequest::has_header(std::string_view name) const {
  for (const auto& field : headers)
    if (beast::iequals(field.first, name)) return true;
  return false;
}

class HttpSession;

struct HttpServer::Impl {
  Impl(HttpLimits l, Handler h, Refuser r, Reader on)
      : limits(l),
        handle(std::move(h)),
        refuse(std::move(r)),
        on_read(std::move(on)),
        acceptor(net::make_strand(ioc)),
        retry(acceptor.get_executor()),
        workers(static_cast<std::size_t>(l.workers)) {}

  void accept();
  void admit(tcp::socket socket);
  void forget(HttpSession* session, const std::string& source, bool counted);
  void close_idle_sessions();

  const HttpLimits limits;
  const Handler handle;
  const Refuser refuse;
  const Reader on_read;
  std::atomic<int> pending{0};  // requests handled or waiting for a worker
  std::atomic<bool> stopping{false};
  std::mutex mutex;  // guards the three below
  int open = 0;
  std::map<std::string, int> by_source;
  std::map<HttpSession*, std::weak_ptr<HttpSession>> sessions;
  // Destroyed first, with the sessions their handlers hold (which forget themselves above).
  net::io_context ioc{1};
  tcp::acceptor acceptor;
  net::steady_timer retry;  // accepting again after the process ran out of descriptors
  net::thread_pool workers;
};

// One connection: its requests read, handed to a worker, answered, one at a time.
class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(tcp::socket socket, HttpServer::Impl* server, std::string source, bool counted)
      : socket_(std::move(socket)),
        timer_(socket_.get_executor()),
        buffer_(server->limits.header_bytes + (64 << 10)),
        server_(server),
        source_(std::move(source)),
        counted_(counted) {}
  ~HttpSession() { server_->forget(this, source_, counted_); }

  void start() { wait_for_request(); }

  // A connection over a limit: its answer at once, without reading its request.
  void refuse_connection(int status, const std::string& why) {
    request_.source = source_;
    refuse(status, why);
  }

  // Idle: waiting for a request of which no byte has come.
  void close_if_idle() {
    if (state_ == State::idle && !request_started()) close();
  }

  net::any_io_executor executor() { return socket_.get_executor(); }

 private:
  enum class State { idle, reading, handling, writing, closing };

  const HttpLimits& limits() const { return server_->limits; }

  // The connection is closed when the timer fires: whatever was pending fails and ends the session.
  void arm(double s) {
    timer_.expires_after(seconds(s));
    timer_.async_wait([self = shared_from_this()](error_code ec) {
      if (!ec) self->close();
    });
  }

  void close() {
    state_ = State::closing;
    error_code ec;
    timer_.cancel();
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
  }

  bool request_started() const { return buffer_.size() > 0 || (parser_ && parser_->got_some()); }

  // The next request is read at once (one event-loop round a request, not two); the timer first
  // allows idle_seconds for its first byte, then, once a byte has come, the rest of
  // request_seconds for the whole of it.
  void wait_for_request() {
    if (server_->stopping) return close();
    state_ = State::idle;
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(limits().header_bytes));
    parser_->body_limit(static_cast<std::uint64_t>(limits().body_bytes));
    request_ = HttpRequest{};
    request_.source = source_;
    deadline_ = std::chrono::steady_clock::now() + seconds(std::max(limits().request_seconds, limits().idle_seconds));
    timer_.expires_after(seconds(limits().idle_seconds));
    timer_.async_wait([self = shared_from_this()](error_code ec) {
      if (ec || self->state_ != State::idle) return;
      if (!self->request_started()) return self->close();
      self->reading();
    });
    http::async_read_header(socket_, buffer_, *parser_,
                            [self = shared_from_this()](error_code ec, std::size_t) { self->on_header(ec); });
  }

  // A request has begun: it has until deadline_ to be read whole.
  void reading() {
    state_ = State::reading;
    timer_.expires_at(deadline_);
    timer_.async_wait([self = shared_from_this()](error_code ec) {
      if (!ec) self->close();
    });
  }

  // The method and path, for the answer's and the metrics' sake, once the header is read.
  void take_request_line() {
    const auto& h = parser_->get();
    request_.method = std::string(h.method_string());
    request_.target = std::string(h.target());
    request_.path = request_.target.substr(0, request_.target.find('?'));
  }

  void on_header(error_code ec) {
    if (ec) return on_read_error(ec);
    if (state_ == State::idle) reading();
    take_request_line();
    const auto& h = parser_->get();
    const auto fields = static_cast<std::size_t>(std::distance(h.begin(), h.end()));
    if (fields > limits().header_fields)
      return refuse(431, fmt::format("the request has {} header fields; at most {}", fields, limits().header_fields));
    if (const auto coding = h[http::field::content_encoding]; !coding.empty() && !beast::iequals(coding, "identity"))
      return refuse(415,
                    fmt::format("Content-Encoding {}: this service takes a body as it is, not encoded", shown(coding)));
    if (const auto framing = h[http::field::transfer_encoding]; !framing.empty() && !beast::iequals(framing, "chunked"))
      return refuse(
          501, fmt::format("Transfer-Encoding {}: this service takes chunked or a Content-Length", shown(framing)));
    const auto expect = h[http::field::expect];
    if (!expect.empty() && !beast::iequals(expect, "100-continue"))
      return refuse(417, fmt::format("Expect {}: this service knows 100-continue only", shown(expect)));
    if (expect.empty() || parser_->is_done()) return read_body();
    auto go_on = std::make_shared<http::response<http::empty_body>>(http::status::continue_, h.version());
    http::async_write(socket_, *go_on, [self = shared_from_this(), go_on](error_code e, std::size_t) {
      if (e) return self->close();
      self->read_body();
    });
  }

  void read_body() {
    if (parser_->is_done()) return on_body({});
    http::async_read(socket_, buffer_, *parser_,
                     [self = shared_from_this()](error_code ec, std::size_t) { self->on_body(ec); });
  }

  void on_read_error(error_code ec) {
    // The request line is kept as soon as it is read: a Content-Length over the limit is found
    // before the header is done.
    if (!parser_->get().target().empty()) take_request_line();
    if (ec == http::error::header_limit || (ec == http::error::buffer_overflow && !parser_->is_header_done()))
      return refuse(431, fmt::format("the request line and headers are over {} bytes", limits().header_bytes));
    if (ec == http::error::body_limit || ec == http::error::buffer_overflow)
      return refuse(413, fmt::format("the body is over {} bytes (serve --max-body)", limits().body_bytes));
    // The other parse errors say what was wrong with the request; the connection's end, its
    // deadline passing (the timer closed it) or a reset leave no one to answer.
    if (ec.category() == http::make_error_code(http::error::bad_method).category() &&
        ec != http::error::end_of_stream && ec != http::error::partial_message && parser_->got_some())
      return refuse(400, fmt::format("not an HTTP/1.1 request this service can read: {}", ec.message()));
    close();
  }

  void on_body(error_code ec) {
    if (ec) return on_read_error(ec);
    timer_.cancel();
    auto& m = parser_->get();
    for (const auto& field : m) request_.headers.emplace_back(field.name_string(), field.value());
    request_.body = std::move(m.body());
    version_ = m.version();
    keep_alive_ = m.keep_alive();
    parser_.reset();
    const int most = limits().workers + limits().queue;
    if (server_->pending.fetch_add(1) >= most) {
      --server_->pending;
      return refuse(503, fmt::format("busy: {} requests are being answered or waiting; try again", most),
                    {{"Retry-After", "1"}});
    }
    state_ = State::handling;
    if (server_->on_read) server_->on_read(request_);
    // The guard keeps the event loop running until the answer is posted back to it.
    net::post(server_->workers, [self = shared_from_this(), guard = net::make_work_guard(server_->ioc)]() mutable {
      HttpResponse r;
      try {
        r = self->server_->handle(self->request_);
      } catch (const std::exception& e) {
        r = self->server_->refuse(self->request_, 500, fmt::format("the server failed: {}", e.what()));
      }
      self->request_.context.reset();
      --self->server_->pending;
      // Written from this thread: nothing else of the connection is pending while it is handled,
      // and the answer goes out without waiting for the event loop to wake (its completion runs
      // there).
      self->write(std::move(r), false);
    });
  }

  void refuse(int status, const std::string& why, std::vector<std::pair<std::string, std::string>> headers = {}) {
    HttpResponse r = server_->refuse(request_, status, why);
    for (auto& h : headers) r.headers.push_back(std::move(h));
    keep_alive_ = false;
    write(std::move(r), true);
  }

  void write(HttpResponse r, bool refused) {
    auto res = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(r.status),
                                                                   version_ ? version_ : 11);
    res->set(http::field::server, "slurm-train");
    if (!r.content_type.empty()) res->set(http::field::content_type, r.content_type);
    for (const auto& [name, value] : r.headers) res->set(name, value);
    res->body() = std::move(r.body);
    res->keep_alive(keep_alive_ && !server_->stopping);
    res->prepare_payload();
    state_ = State::writing;
    arm(refused ? kRefusalSeconds : limits().request_seconds);  // a client that does not read its answer
    http::async_write(socket_, *res, [self = shared_from_this(), res, refused](error_code ec, std::size_t) {
      if (ec) return self->close();
      if (refused) return self->drain();
      if (!res->keep_alive()) return self->close();
      self->timer_.cancel();
      self->wait_for_request();
    });
  }

  // After a refusal: no more answers; what the client still sends is read and dropped for a
  // moment, so that its answer is not lost to a reset.
  void drain() {
    error_code ec;
    socket_.shutdown(tcp::socket::shutdown_send, ec);
    state_ = State::closing;
    arm(kRefusalSeconds);
    drain_some();
  }

  void drain_some() {
    socket_.async_read_some(net::buffer(discard_), [self = shared_from_this()](error_code ec, std::size_t) {
      if (ec) return self->close();
      self->drain_some();
    });
  }

  tcp::socket socket_;
  net::steady_timer timer_;
  beast::flat_buffer buffer_;
  HttpServer::Impl* const server_;
  const std::string source_;
  const bool counted_;
  std::optional<http::request_parser<http::string_body>> parser_;
  HttpRequest request_;
  std::atomic<State> state_ = State::idle;  // read by stop()'s close_if_idle while a worker answers
  std::chrono::steady_clock::time_point deadline_;
  unsigned version_ = 11;
  bool keep_alive_ = false;
  std::array<char, 16 << 10> discard_;
};

void HttpServer::Impl::accept() {
  acceptor.async_accept(net::make_strand(ioc), [self = this](error_code ec, tcp::socket socket) {
    if (self->stopping || !self->acceptor.is_open()) return;
    if (ec) {
      // Out of descriptors (or a connection gone before it was taken): try again shortly rather
      // than spin.
      self->retry.expires_after(std::chrono::milliseconds(100));
      self->retry.async_wait([self](error_code e) {
        if (!e) self->accept();
      });
      return;
    }
    self->admit(std::move(socket));
    self->accept();
  });
}

void HttpServer::Impl::admit(tcp::socket socket) {
  error_code ec;
  const tcp::endpoint peer = socket.remote_endpoint(ec);
  if (ec) return;
  net::ip::address address = peer.address();
  if (address.is_v6() && address.to_v6().is_v4_mapped())
    address = net::ip::make_address_v4(net::ip::v4_mapped, address.to_v6());
  const std::string source = address.to_string();
  socket.set_option(tcp::no_delay(true), ec);
  int status = 0;
  std::string why;
  {
    std::lock_guard lock(mutex);
    if (open >= limits.connections) {
      status = 503;
      why = fmt::format("busy: {} connections are open, the most this service takes (serve --connections)", open);
    } else if (by_source[source] >= limits.per_source) {
      status = 429;
      why = fmt::format("{} has {} connections open, the most one address may have (serve --connections-per-source)",
                        source, by_source[source]);
    } else {
      ++open;
      ++by_source[source];
    }
    if (status && by_source[source] == 0) by_source.erase(source);
  }
  // A refused connection is not counted: it is answered and closed within about a second.
  auto session = std::make_shared<HttpSession>(std::move(socket), this, source, status == 0);
  {
    std::lock_guard lock(mutex);
    sessions[session.get()] = session;
  }
  net::post(session->executor(), [session, status, why] {
    if (status)
      session->refuse_connection(status, why);
    else
      session->start();
  });
}

void HttpServer::Impl::forget(HttpSession* session, const std::string& source, bool counted) {
  std::lock_guard lock(mutex);
  sessions.erase(session);
  if (!counted) return;
  --open;
  if (--by_source[source] == 0) by_source.erase(source);
}

void HttpServer::Impl::close_idle_sessions() {
  std::vector<std::shared_ptr<HttpSession>> live;
  {
    std::lock_guard lock(mutex);
    for (const auto& entry : sessions)
      if (auto s = entry.second.lock()) live.push_back(std::move(s));
  }
  for (auto& s : live) net::post(s->executor(), [s] { s->close_if_idle(); });
}

HttpServer::HttpServer(HttpLimits limits, Handler handle, Refuser refuse, Reader on_read)
    : impl_(std::make_unique<Impl>(limits, std::move(handle), std::move(refuse), std::move(on_read))) {}

HttpServer::~HttpServer() { impl_->workers.join(); }

int HttpServer::bind(const std::string& host, int port) {
  const auto fail = [&](const error_code& ec) {
    return std::runtime_error(fmt::format("cannot listen on {}:{}: {}", host, port, ec.message()));
  };
  error_code ec;
  tcp::resolver resolver(impl_->ioc);
  const auto found =
      resolver.resolve(host, std::to_string(port), tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec) throw fail(ec);
  if (found.empty()) throw std::runtime_error(fmt::format("cannot listen on {}:{}: no such address", host, port));
  const tcp::endpoint at = found.begin()->endpoint();
  tcp::acceptor& a = impl_->acceptor;
  if (a.open(at.protocol(), ec)) throw fail(ec);
  if (a.set_option(net::socket_base::reuse_address(true), ec)) throw fail(ec);
  if (a.bind(at, ec)) throw fail(ec);
  if (a.listen(net::socket_base::max_listen_connections, ec)) throw fail(ec);
  const tcp::endpoint bound = a.local_endpoint(ec);
  if (ec) throw fail(ec);
  return bound.port();
}

void HttpServer::serve() {
  net::post(impl_->acceptor.get_executor(), [impl = impl_.get()] { impl->accept(); });
  // One thread does every connection's I/O: it never waits on a client, and the work is the
  // workers'.
  for (;;) {
    try {
      impl_->ioc.run();
      break;
    } catch (const std::exception& e) {
      std::cerr << fmt::format("slurm-train serve: the connection loop failed: {}; going on\n", e.what());
    }
  }
  impl_->workers.join();
}

void HttpServer::stop() {
  net::post(impl_->acceptor.get_executor(), [impl = impl_.get()] {
    impl->stopping = true;
    error_code ec;
    impl->acceptor.close(ec);
    impl->retry.cancel();
    impl->close_idle_sessions();
  });
}

}  // namespace slurm_train
