#include "serve/serve_request.h"

#include <fmt/format.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>

namespace slurm_train {

namespace {

using Json = nlohmann::json;

RequestError bad(const std::string& message) { return RequestError(400, message); }

// A value as the message quotes it: short, never more than a line, and made without walking
// into it (an array or object is named by its size: rendering it would recurse as deep as the
// client nested it).
std::string shown(const Json& v) {
  if (v.is_array()) return fmt::format("an array of {} value{}", v.size(), v.size() == 1 ? "" : "s");
  if (v.is_object()) return fmt::format("an object of {} field{}", v.size(), v.size() == 1 ? "" : "s");
  Json scalar = v;
  if (v.is_string() && v.get_ref<const std::string&>().size() > 40)
    scalar = v.get_ref<const std::string&>().substr(0, 40);
  std::string text = scalar.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

// Whether the body nests arrays and objects deeper than `most`: a scan of its brackets outside
// strings, which stops at the first level too deep, before any tree is built.
bool nested_deeper_than(std::string_view body, int most) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : body) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > most) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

const char* type_of(const Json& v) {
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  if (v.is_boolean()) return "a boolean";
  return "null";
}

Json parse_object(std::string_view body) {
  if (nested_deeper_than(body, kMostJsonDepth))
    throw bad(
        fmt::format("the body nests arrays and objects deeper than {} levels; a request needs 3", kMostJsonDepth));
  Json j;
  try {
    j = Json::parse(body.begin(), body.end());
  } catch (const Json::exception& e) {
    // nlohmann's message after its "[json.exception.parse_error.101] " tag names the place (or
    // the number out of double's range).
    std::string what = e.what();
    if (const auto end = what.find("] "); end != std::string::npos) what = what.substr(end + 2);
    throw bad(fmt::format("the body is not JSON: {}", what));
  }
  if (!j.is_object()) throw bad(fmt::format("the body is {}; expected a JSON object", type_of(j)));
  return j;
}

void refuse_unknown_fields(const Json& j, std::initializer_list<std::string_view> known, std::string_view path) {
  for (const auto& [key, value] : j.items()) {
    bool found = false;
    for (std::string_view k : known) found = found || key == k;
    if (!found)
      throw bad(fmt::format("unknown field \"{}\" for {}; the fields are {}", key, path, fmt::join(known, ", ")));
  }
}

template <typename T>
T whole_number(const Json& v, std::string_view name, T most) {
  if (!v.is_number_integer())
    throw bad(fmt::format("\"{}\" is {}; expected a whole number from 0 to {}", name,
                          v.is_structured() ? shown(v) : fmt::format("{} ({})", shown(v), type_of(v)), most));
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(most))
      throw bad(fmt::format("\"{}\" is {}; expected a whole number from 0 to {}", name, u, most));
    return static_cast<T>(u);
  }
  throw bad(fmt::format("\"{}\" is {}; expected a whole number from 0 to {}", name, v.get<std::int64_t>(), most));
}

}  // namespace

PredictRequest parse_predict_request(std::string_view body, const RequestLimits& limits) {
  const Json j = parse_object(body);
  refuse_unknown_fields(j, {"data"}, "/predict");
  const auto data = j.find("data");
  if (data == j.end()) throw bad(R"(no "data": expected {"data": [[numbers], ...]}, one array of numbers a row)");
  if (!data->is_array())
    throw bad(fmt::format("\"data\" is {}; expected an array of rows, each an array of {} numbers", type_of(*data),
                          limits.inputs));
  if (data->empty()) throw bad("\"data\" has no rows; expected 1 or more");
  if (data->size() > static_cast<std::size_t>(limits.max_rows))
    throw RequestError(413, fmt::format("\"data\" has {} rows; at most {} a request (serve --max-rows)", data->size(),
                                        limits.max_rows));
  PredictRequest r;
  r.rows = static_cast<int>(data->size());
  r.data.resize(static_cast<std::size_t>(r.rows) * static_cast<std::size_t>(limits.inputs));
  float* out = r.data.data();
  for (std::size_t i = 0; i < data->size(); ++i) {
    const Json& row = (*data)[i];
    if (!row.is_array())
      throw bad(fmt::format("data[{}] is {}; expected an array of {} numbers", i, type_of(row), limits.inputs));
    if (row.size() != static_cast<std::size_t>(limits.inputs))
      throw bad(fmt::format("data[{}] has {} numbers; the model takes {} inputs", i, row.size(), limits.inputs));
    for (std::size_t k = 0; k < row.size(); ++k) {
      const Json& v = row[k];
      if (!v.is_number()) throw bad(fmt::format("data[{}][{}] is {}; expected a number", i, k, type_of(v)));
      const double x = v.get<double>();
      if (!std::isfinite(x) || std::fabs(x) > FLT_MAX)
        throw bad(fmt::format("data[{}][{}] is {}; expected a finite number within float32's range", i, k, shown(v)));
      *out++ = static_cast<float>(x);
    }
  }
  return r;
}

GenerateRequest parse_generate_request(std::string_view body, const RequestLimits& limits) {
  const Json j = parse_object(body);
  refuse_unknown_fields(j, {"prompt", "tokens", "temperature", "seed", "top_k"}, "/generate");
  GenerateRequest r;
  r.options.tokens = std::min(r.options.tokens, limits.max_tokens);
  const auto prompt = j.find("prompt");
  if (prompt == j.end()) throw bad(R"(no "prompt": expected {"prompt": "text", "tokens": N, ...})");
  if (!prompt->is_string()) throw bad(fmt::format("\"prompt\" is {}; expected a string", type_of(*prompt)));
  r.prompt = prompt->get<std::string>();
  if (const auto t = j.find("tokens"); t != j.end()) {
    if (t->is_number_unsigned() && t->get<std::uint64_t>() > static_cast<std::uint64_t>(limits.max_tokens))
      throw RequestError(413, fmt::format("\"tokens\" is {}; at most {} a request (serve --max-tokens)",
                                          t->get<std::uint64_t>(), limits.max_tokens));
    r.options.tokens = whole_number<int>(*t, "tokens", limits.max_tokens);
  }
  if (const auto t = j.find("temperature"); t != j.end()) {
    if (!t->is_number() || !std::isfinite(t->get<double>()) || t->get<double>() < 0)
      throw bad(fmt::format("\"temperature\" is {}; expected a finite number of at least 0 (0: greedy)", shown(*t)));
    r.options.temperature = t->get<double>();
  }
  if (const auto s = j.find("seed"); s != j.end())
    r.options.seed = whole_number<std::uint64_t>(*s, "seed", std::numeric_limits<std::uint64_t>::max());
  if (const auto k = j.find("top_k"); k != j.end()) r.options.top_k = whole_number<int>(*k, "top_k", 256);
  return r;
}

std::string error_body(std::string_view message) {
  return Json{{"error", std::string(message)}}.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace slurm_train
