#include "serve/model_server.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <condition_variable>
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

HttpResponse error_response(int status, std::string_view message) { return {status, kJson, error_body(message), {}}; }

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
        decoders(std::move(model.decoders)),
        served(model.classifier ? "/predict" : "/generate"),
        other(model.classifier ? "/generate" : "/predict"),
        http(
            options.http, [this](const HttpRequest& req) { return handle(req); },
            [this](const HttpRequest& req, int status, const std::string& why) { return refused(req, status, why); },
            [this](HttpRequest& req) {
              if (batcher && req.method == "POST" && req.path == served)
                req.context = std::make_shared<PredictBatcher::Arrival>(*batcher);
            }) {
    if (model.classifier) {
      options.limits.inputs = model.classifier->inputs();
      batcher = std::make_unique<PredictBatcher>(
          model.classifier->inputs(), model.classifier->classes(), options.batching,
          [this](const float* x, int rows, int* classes, float* p) { model.classifier->predict(x, rows, classes, p); },
          [this](int rows) { metrics.batch(rows); });
    }
  }

  HttpResponse handle(const HttpRequest& req);
  HttpResponse route(const HttpRequest& req);
  HttpResponse refused(const HttpRequest& req, int status, const std::string& why);
  HttpResponse predict(const HttpRequest& req);
  HttpResponse generate(const HttpRequest& req);
  HttpResponse health();

  ServeOptions options;
  ServedModel model;
  ServeMetrics metrics;
  DecoderPool decoders;
  std::unique_ptr<PredictBatcher> batcher;
  const std::string served, other;
  const Clock::time_point started = Clock::now();
  HttpServer http;  // last: its workers stop before what they use goes
};

HttpResponse ModelServer::Impl::handle(const HttpRequest& req) {
  const Clock::time_point t0 = Clock::now();
  metrics.request_started();
  HttpResponse res;
  try {
    res = route(req);
  } catch (const RequestError& e) {
    res = error_response(e.status, e.what());
  } catch (const std::exception& e) {
    std::cerr << fmt::format("slurm-train serve: {} {}: {}\n", req.method, req.path, e.what());
    res = error_response(500, fmt::format("the server failed: {}", e.what()));
  }
  metrics.request_finished(req.path, res.status, std::chrono::duration<double>(Clock::now() - t0).count());
  return res;
}

HttpResponse ModelServer::Impl::refused(const HttpRequest& req, int status, const std::string& why) {
  metrics.request_finished(req.path, status, -1);
  return error_response(status, why);
}

HttpResponse ModelServer::Impl::route(const HttpRequest& req) {
  if (!options.token.empty() && !bearer_token_matches(req.header("Authorization"), options.token)) {
    HttpResponse res = error_response(
        401, req.has_header("Authorization")
                 ? "the Authorization header does not carry this service's bearer token"
                 : "no Authorization header: this service needs \"Authorization: Bearer TOKEN\" (the token is in "
                   "the file serve printed at its start)");
    res.headers.emplace_back("WWW-Authenticate", R"(Bearer realm="slurm-train serve")");
    return res;
  }
  const auto only = [&](const char* allowed) {
    HttpResponse res =
        error_response(405, fmt::format("{} {}: this path answers {} only", req.method, req.path, allowed));
    res.headers.emplace_back("Allow", allowed);
    return res;
  };
  if (req.path == served) {
    if (req.method != "POST") return only("POST");
    return batcher ? predict(req) : generate(req);
  }
  if (req.path == "/health" || req.path == "/metrics") {
    if (req.method != "GET") return only("GET");
    if (req.path == "/health") return health();
    return {200, "text/plain; version=0.0.4; charset=utf-8", metrics.prometheus(), {}};
  }
  if (req.path == other)
    return error_response(404, fmt::format("no {} here: this service serves a {} model, which answers POST {}", other,
                                           model.kind, served));
  return error_response(
      404, fmt::format("no {} here; the paths are POST {}, GET /health and GET /metrics", req.path, served));
}

HttpResponse ModelServer::Impl::predict(const HttpRequest& req) {
  // Announced as on its way when it was read (the server's on_read), so that a batch waits for it.
  auto* announced = static_cast<PredictBatcher::Arrival*>(req.context.get());
  std::optional<PredictBatcher::Arrival> here;
  if (!announced) announced = &here.emplace(*batcher);
  PredictRequest r = parse_predict_request(req.body, options.limits);
  const PredictAnswer a = batcher->predict(*announced, std::move(r.data), r.rows);
  return {200, kJson, predict_body(a, model.classifier->classes()), {}};
}

HttpResponse ModelServer::Impl::generate(const HttpRequest& req) {
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
  return {200, kJson, body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), {}};
}

HttpResponse ModelServer::Impl::health() {
  nlohmann::json body{
      {"status", "ok"},         {"model", model.kind},
      {"file", model.file},     {"step", model.step},
      {"device", model.device}, {"uptime_seconds", std::chrono::duration<double>(Clock::now() - started).count()}};
  if (model.classifier) {
    body["inputs"] = model.classifier->inputs();
    body["classes"] = model.classifier->classes();
  }
  return {200, kJson, body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), {}};
}

ModelServer::ModelServer(ServeOptions options, ServedModel model)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(model))) {}

ModelServer::~ModelServer() = default;

int ModelServer::bind() { return impl_->http.bind(impl_->options.host, impl_->options.port); }

void ModelServer::serve() { impl_->http.serve(); }

void ModelServer::stop() { impl_->http.stop(); }

}  // namespace slurm_train
