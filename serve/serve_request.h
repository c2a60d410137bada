// The bodies `slurm-train serve` accepts, parsed and checked before anything runs: outside input
// from any client, so every value is checked and every refusal is a RequestError that carries the
// HTTP status and a message naming the field, the value and what was expected.
//
//   POST /predict   {"data": [[F numbers], ...]}   1 to limits.max_rows rows of the model's F
//                   inputs, each finite and within float32's range (the raw features: the
//                   model's own normalisation is applied by the server)
//   POST /generate  {"prompt": "text", "tokens": N, "temperature": T, "seed": S, "top_k": K}
//                   every field but "prompt" optional (defaults as `slurm-train sample`'s;
//                   N's bounded by limits.max_tokens); N at most limits.max_tokens
// Unknown fields are refused too: a misspelt "temprature" silently ignored would be a wrong answer.
// A body nested deeper than kMostJsonDepth is refused before it is parsed.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "train/models/gpt_sampler.h"

namespace slurm_train {

// A request refused: `status` is the HTTP status to answer (400, 413, ...).
struct RequestError : std::runtime_error {
  RequestError(int status, const std::string& message) : std::runtime_error(message), status(status) {}
  int status;
};

// Levels of arrays and objects a body may nest: a request needs 3 ({"data": [[...]]}).
constexpr int kMostJsonDepth = 32;

struct RequestLimits {
  int inputs = 0;         // the classifier's features per row
  int max_rows = 1024;    // rows in one /predict
  int max_tokens = 1024;  // tokens one /generate may ask for
};

struct PredictRequest {
  int rows = 0;
  std::vector<float> data;  // [rows, inputs], row-major
};

struct GenerateRequest {
  std::string prompt;  // bytes
  SampleOptions options;
};

PredictRequest parse_predict_request(std::string_view body, const RequestLimits& limits);
GenerateRequest parse_generate_request(std::string_view body, const RequestLimits& limits);

// {"error": MESSAGE} with the message JSON-escaped (bytes that are not UTF-8 replaced).
std::string error_body(std::string_view message);

}  // namespace slurm_train
