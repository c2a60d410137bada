// The HTTP/1.1 service of `slurm-train serve` (on serve/http_server.h, which bounds what a client can make it hold):
//   POST /predict    a classifier's classes and probabilities (serve_request.h), batched
//                    (predict_batcher.h)
//   POST /generate   a GPT's text, as `slurm-train sample` generates it for the same seed
//   GET  /health     {"status": "ok", ...} with the model served
//   GET  /metrics    Prometheus' text format (serve_metrics.h)
// Every refusal is a 4xx with a JSON body {"error": "..."} that says what was wrong; the service
// goes on. With a token, every request without it is answered 401.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "serve/classifier.h"
#include "serve/http_server.h"
#include "serve/predict_batcher.h"
#include "serve/serve_request.h"
#include "train/models/gpt_sampler.h"

namespace slurm_train {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port
  HttpLimits http;
  RequestLimits limits;
  BatchingOptions batching;
  std::string token;  // empty: no authentication (serve --no-auth)
};

// What is served: a classifier, or GPT decoders (one text generated at a time by each).
struct ServedModel {
  std::string file, kind, device;
  std::uint64_t step = 0;  // the training step of a checkpoint; 0 for a model file
  std::unique_ptr<Classifier> classifier;
  std::vector<std::unique_ptr<GptDecoder>> decoders;
};

class ModelServer {
 public:
  ModelServer(ServeOptions options, ServedModel model);
  ~ModelServer();
  ModelServer(const ModelServer&) = delete;
  ModelServer& operator=(const ModelServer&) = delete;

  // Binds options.host and options.port and returns the port. Throws std::runtime_error naming
  // the address and why (in use, not an address of this node).
  int bind();
  // Answers requests until stop(); returns after every request in flight has been answered.
  void serve();
  // From any thread (the signal handling one): stops accepting, lets serve() finish.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace slurm_train
