// libFuzzer target: the bodies any client may send to `slurm-train serve` (POST /predict and
// /generate). A body is refused only with RequestError, with a 4xx status; a body taken holds
// what the limits allow: rows of exactly `inputs` finite float32 numbers, at most max_rows of
// them, and at most max_tokens tokens.
#include <cmath>

#include "serve/serve_request.h"
#include "test/fuzz/fuzz_support.h"

using namespace slurm_train;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const RequestLimits limits{/*inputs=*/4, /*max_rows=*/8, /*max_tokens=*/64};
  const auto refused_cleanly = [](const RequestError& e) {
    if (e.status < 400 || e.status > 499 || std::string_view(e.what()).empty()) std::abort();
  };
  try {
    const PredictRequest r = parse_predict_request(body, limits);
    if (r.rows < 1 || r.rows > limits.max_rows || r.data.size() != static_cast<std::size_t>(r.rows * limits.inputs))
      std::abort();
    for (float x : r.data)
      if (!std::isfinite(x)) std::abort();
  } catch (const RequestError& e) {
    refused_cleanly(e);
  }
  try {
    const GenerateRequest r = parse_generate_request(body, limits);
    if (r.options.tokens < 0 || r.options.tokens > limits.max_tokens || r.options.top_k < 0 ||
        !std::isfinite(r.options.temperature) || r.options.temperature < 0)
      std::abort();
  } catch (const RequestError& e) {
    refused_cleanly(e);
  }
  // The error body of any message is JSON (bytes that are not UTF-8 replaced), never an exception.
  (void)error_body(body);
  return 0;
}
