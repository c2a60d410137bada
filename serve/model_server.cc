#include "serve/model_server.h"

#include <fmt/format.h>
#include <httplib.h>
#include <openssl/evp.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>

#include "serve/bearer_token.h"
#include "serve/serve_metrics.h"

namespace slurm_train {

namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kJson = "application/json";

// When the request this thread answers was routed: httplib runs a request's routing, handler
// and logger on one thread.
thread_local std::optional<Clock::time_point> t_routed;

void answer_error(httplib::Response& res, int status, std::string_view message) {
  res.status = status;
  res.set_content(error_body(message), kJson);
}

std::string base64(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

// The decoders, lent one request at a time.
class DecoderPool {
 public:
  explicit DecoderPool(std::vector<std::unique_ptr<GptDecoder>> decoders) : all_(std::move(decoders)) {
    for (auto& d : all_) free_.push_back(d.get());
  }
  bool empty() const { return all_.empty(); }
  const GptConfig& config() const { return all_.front()->config(); }
  template <typename F>
  auto with_decoder(F&& f) {
    GptDecoder* d;
    {
      std::unique_lock lock(mutex_);
      available_.wait(lock, [&] { return !free_.empty(); });
      d = free_.back();
      free_.pop_back();
    }
    struct Return {
      DecoderPool& pool;
      GptDecoder* d;
      ~Return() {
        {
          std::lock_guard lock(pool.mutex_);
          pool.free_.push_back(d);
        }
        pool.available_.notify_one();
      }
    } give_back{*this, d};
    return f(*d);
  }

 private:
  std::vector<std::unique_ptr<GptDecoder>> all_;
  std::vector<GptDecoder*> free_;
  std::mutex mutex_;
  std::condition_variable available_;
};

std::string predict_body(const PredictAnswer& a, int classes) {
  fmt::memory_buffer out;
  fmt::format_to(std::back_inserter(out), R"({{"prediction":[{}],"probabilities":[)", fmt::join(a.classes, ","));
  const std::size_t rows = a.classes.size();
  for (std::size_t r = 0; r < rows; ++r) {
    if (r) out.push_back(',');
    const auto first = a.probabilities.begin() + static_cast<std::ptrdiff_t>(r * classes);
    fmt::format_to(std::back_inserter(out), "[{}]", fmt::join(first, first + classes, ","));
  }
  fmt::format_to(std::back_inserter(out), "]}}");
  return fmt::to_string(out);
}

}  // namespace

struct ModelServer::Impl {
  Impl(ServeOptions o, ServedModel m)
      : options(std::move(o)),
        model(std::move(m)),
        metrics(model.kind, model.file, model.step),
        decoders(std::move(model.decoders)) {
    if (model.classifier) {
      options.limits.inputs = model.classifier->inputs();
      batcher = std::make_unique<PredictBatcher>(
          model.classifier->inputs(), model.classifier->classes(), options.batching,
          [this](const float* x, int rows, int* classes, float* p) { model.classifier->predict(x, rows, classes, p); },
          [this](int rows) { metrics.batch(rows); });
    }
    setup();
  }

  void setup();
  void predict(const httplib::Request& req, httplib::Response& res);
  void generate(const httplib::Request& req, httplib::Response& res);
  void health(httplib::Response& res);

  ServeOptions options;
  ServedModel model;
  ServeMetrics metrics;
  DecoderPool decoders;
  std::unique_ptr<PredictBatcher> batcher;
  httplib::Server server;
  const Clock::time_point started = Clock::now();
};

void ModelServer::Impl::setup() {
  const int threads = options.connections;
  server.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<std::size_t>(threads)); };
  server.set_payload_max_length(options.max_body);
  server.set_keep_alive_max_count(100000);
  server.set_keep_alive_timeout(5);
  server.set_read_timeout(30);
  server.set_write_timeout(30);
  server.set_tcp_nodelay(true);

  server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    t_routed = Clock::now();
    metrics.request_started();
    if (options.token.empty() || bearer_token_matches(req.get_header_value("Authorization"), options.token))
      return httplib::Server::HandlerResponse::Unhandled;
    res.set_header("WWW-Authenticate", R"(Bearer realm="slurm-train serve")");
    answer_error(
        res, 401,
        req.has_header("Authorization")
            ? "the Authorization header does not carry this service's bearer token"
            : "no Authorization header: this service needs \"Authorization: Bearer TOKEN\" (serve --token-file)");
    return httplib::Server::HandlerResponse::Handled;
  });
  server.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    const double seconds = t_routed ? std::chrono::duration<double>(Clock::now() - *t_routed).count() : -1.0;
    t_routed.reset();
    metrics.request_finished(req.path, res.status, seconds);
  });
  server.set_error_handler(
      httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        switch (res.status) {
          case 404:
            answer_error(res, 404,
                         fmt::format("no {} here; the paths are POST {}, GET /health and GET /metrics", req.path,
                                     model.classifier ? "/predict" : "/generate"));
            break;
          case 413:
            answer_error(res, 413, fmt::format("the body is over {} bytes (serve --max-body)", options.max_body));
            break;
          case 400:
            if (req.method != "GET" && req.method != "POST" && req.method != "PUT" && req.method != "PATCH" &&
                req.method != "DELETE" && req.method != "HEAD" && req.method != "OPTIONS") {
              answer_error(res, 405, fmt::format("method {}: this service answers GET and POST", req.method));
              break;
            }
            [[fallthrough]];
          default:
            answer_error(
                res, res.status,
                fmt::format("the request was refused (HTTP {}): not a request this service understands", res.status));
        }
        return httplib::Server::HandlerResponse::Handled;
      }));
  server.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    std::cerr << fmt::format("slurm-train serve: {} {}: {}\n", req.method, req.path, what);
    answer_error(res, 500, fmt::format("the server failed: {}", what));
  });

  const std::string served = model.classifier ? "/predict" : "/generate";
  server.Post(served, [this](const httplib::Request& req, httplib::Response& res) {
    try {
      if (batcher)
        predict(req, res);
      else
        generate(req, res);
    } catch (const RequestError& e) {
      answer_error(res, e.status, e.what());
    }
  });
  server.Get("/health", [this](const httplib::Request&, httplib::Response& res) { health(res); });
  server.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.prometheus(), "text/plain; version=0.0.4; charset=utf-8");
  });
  // The other model's path, and the wrong methods on ours: said as such, not a bare 404.
  const std::string other = model.classifier ? "/generate" : "/predict";
  server.Post(other, [this, other](const httplib::Request&, httplib::Response& res) {
    answer_error(res, 404,
                 fmt::format("no {} here: this service serves a {} model, which answers POST {}", other, model.kind,
                             model.classifier ? "/predict" : "/generate"));
  });
  const auto wrong_method = [](std::string allowed) {
    return [allowed](const httplib::Request& req, httplib::Response& res) {
      res.set_header("Allow", allowed);
      answer_error(res, 405, fmt::format("{} {}: this path answers {} only", req.method, req.path, allowed));
    };
  };
  for (const std::string& path : {served, std::string("/health"), std::string("/metrics")}) {
    const std::string allowed = path == served ? "POST" : "GET";
    if (allowed == "POST")
      server.Get(path, wrong_method(allowed));
    else
      server.Post(path, wrong_method(allowed));
    server.Put(path, wrong_method(allowed));
    server.Patch(path, wrong_method(allowed));
    server.Delete(path, wrong_method(allowed));
  }
}

void ModelServer::Impl::predict(const httplib::Request& req, httplib::Response& res) {
  PredictBatcher::Arrival arrival(*batcher);
  PredictRequest r = parse_predict_request(req.body, options.limits);
  const PredictAnswer a = batcher->predict(arrival, std::move(r.data), r.rows);
  res.set_content(predict_body(a, model.classifier->classes()), kJson);
}

void ModelServer::Impl::generate(const httplib::Request& req, httplib::Response& res) {
  const GenerateRequest r = parse_generate_request(req.body, options.limits);
  try {
    check_sample_inputs(decoders.config(), r.options);
  } catch (const std::invalid_argument& e) {
    throw RequestError(400, e.what());
  }
  const std::string text = decoders.with_decoder([&](GptDecoder& d) { return sample_text(d, r.prompt, r.options); });
  metrics.generated(r.options.tokens);
  const nlohmann::json body{{"text", text},
                            {"base64", base64(text)},
                            {"tokens", r.options.tokens},
                            {"temperature", r.options.temperature},
                            {"top_k", r.options.top_k},
                            {"seed", r.options.seed}};
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), kJson);
}

void ModelServer::Impl::health(httplib::Response& res) {
  nlohmann::json body{
      {"status", "ok"},         {"model", model.kind},
      {"file", model.file},     {"step", model.step},
      {"device", model.device}, {"uptime_seconds", std::chrono::duration<double>(Clock::now() - started).count()}};
  if (model.classifier) {
    body["inputs"] = model.classifier->inputs();
    body["classes"] = model.classifier->classes();
  }
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), kJson);
}

ModelServer::ModelServer(ServeOptions options, ServedModel model)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(model))) {}

ModelServer::~ModelServer() = default;

int ModelServer::bind() {
  const ServeOptions& o = impl_->options;
  errno = 0;
  int port = o.port;
  const bool bound =
      o.port == 0 ? (port = impl_->server.bind_to_any_port(o.host)) > 0 : impl_->server.bind_to_port(o.host, o.port);
  if (!bound) {
    const int e = errno;
    throw std::runtime_error(fmt::format("cannot listen on {}:{}: {}", o.host, o.port,
                                         e ? std::strerror(e) : "not an address of this node, or the port is taken"));
  }
  return port;
}

void ModelServer::serve() { impl_->server.listen_after_bind(); }

void ModelServer::stop() { impl_->server.stop(); }

}  // namespace slurm_train
