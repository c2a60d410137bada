// serve/http_server.h on the loopback address: each limit answers its status, whatever the framing,
// and the server goes on; stop() ends serve() once the request in flight is answered.
#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "serve/http_server.h"

using namespace slurm_train;

namespace {

// A connection to the server on 127.0.0.1:port.
int connect_loopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  return fd;
}

// A raw client: sends `request` (in one piece) and reads until the server closes, or until
// `until` is in what was read.
std::string round_trip(int port, const std::string& request, const std::string& until = "") {
  const int fd = connect_loopback(port);
  timeval timeout{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  std::size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // refused before the end: the answer is read below
    sent += static_cast<std::size_t>(n);
  }
  std::string got;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) break;
    got.append(buffer, static_cast<std::size_t>(n));
    if (!until.empty() && got.find(until) != std::string::npos) break;
  }
  ::close(fd);
  return got;
}

int status_of(const std::string& answer) {
  return answer.rfind("HTTP/1.1 ", 0) == 0 ? std::stoi(answer.substr(9, 3)) : 0;
}

struct Running {
  explicit Running(HttpLimits limits)
      : server(
            limits,
            [this](const HttpRequest& r) {
              ++handled;
              if (r.path == "/slow") std::this_thread::sleep_for(std::chrono::milliseconds(300));
              return HttpResponse{200, "text/plain", r.method + " " + r.path + " " + std::to_string(r.body.size()), {}};
            },
            [](const HttpRequest& r, int status, const std::string& why) {
              return HttpResponse{status, "text/plain", why + " [" + r.path + "]", {}};
            }) {
    port = server.bind("127.0.0.1", 0);
    thread = std::thread([this] { server.serve(); });
  }
  ~Running() {
    server.stop();
    thread.join();
  }
  std::atomic<int> handled{0};
  HttpServer server;
  int port = 0;
  std::thread thread;
};

}  // namespace

TEST_CASE("http server: answers, keeps a connection alive, and refuses each limit with its status") {
  HttpLimits limits;
  limits.body_bytes = 1000;
  limits.header_fields = 10;
  limits.header_bytes = 2048;
  Running s(limits);
  // Two requests on one connection, the second after the first's answer.
  const std::string two = round_trip(s.port,
                                     "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
                                     "GET /b?q=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  CHECK(two.find("POST /a 3") != std::string::npos);
  CHECK(two.find("GET /b 0") != std::string::npos);
  // A body with a length over the limit: 413 before it is read.
  const std::string too_long = round_trip(s.port, "POST /c HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n");
  CHECK(status_of(too_long) == 413);
  CHECK(too_long.find("[/c]") != std::string::npos);
  // Chunked, over the limit as it goes.
  std::string chunked = "POST /d HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 20; ++i) chunked += "64\r\n" + std::string(100, 'x') + "\r\n";
  chunked += "0\r\n\r\n";
  CHECK(status_of(round_trip(s.port, chunked)) == 413);
  // Chunked within the limit is taken.
  CHECK(round_trip(s.port,
                   "POST /e HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                   "3\r\nabc\r\n0\r\n\r\n")
            .find("POST /e 3") != std::string::npos);
  CHECK(status_of(round_trip(
            s.port, "POST /f HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\nContent-Length: 1\r\n\r\nx")) == 415);
  CHECK(status_of(round_trip(s.port, "POST /g HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n")) ==
        501);
  std::string fields = "GET /h HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 11; ++i) fields += "X-" + std::to_string(i) + ": 1\r\n";
  CHECK(status_of(round_trip(s.port, fields + "\r\n")) == 431);
  CHECK(status_of(round_trip(s.port, "GET /i HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(4000, 'y') + "\r\n\r\n")) ==
        431);
  CHECK(status_of(round_trip(s.port, "NOT HTTP\r\n\r\n")) == 400);
  // Expect: 100-continue is answered before the body is sent.
  CHECK(round_trip(s.port,
                   "POST /j HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\nConnection: "
                   "close\r\n\r\nok")
            .rfind("HTTP/1.1 100 Continue\r\n\r\n", 0) == 0);
  CHECK(status_of(round_trip(s.port, "GET /k HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")) == 200);
}

TEST_CASE("http server: beyond the workers and the queue, 503; connections from one address beyond the limit, 429") {
  HttpLimits limits;
  limits.workers = 1;
  limits.queue = 0;
  limits.per_source = 2;
  Running s(limits);
  std::thread slow([&] { round_trip(s.port, "GET /slow HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); });
  while (s.handled == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const std::string busy = round_trip(s.port, "GET /l HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  CHECK(status_of(busy) == 503);
  CHECK(busy.find("Retry-After: 1") != std::string::npos);
  slow.join();
  // Two connections held open (idle); the third from the same address is refused at once.
  const int first = connect_loopback(s.port), second = connect_loopback(s.port);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // both admitted before the third
  CHECK(status_of(round_trip(s.port, "GET /m HTTP/1.1\r\nHost: x\r\n\r\n")) == 429);
  ::close(first);
  ::close(second);
}
