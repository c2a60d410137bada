// serve/: the request parser, the batcher, the metrics text and the bearer token, without a server.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "serve/bearer_token.h"
#include "serve/classifier.h"
#include "serve/predict_batcher.h"
#include "serve/serve_metrics.h"
#include "serve/serve_request.h"
#include "train/models/mlp.h"

using namespace slurm_train;

namespace {

const RequestLimits kLimits{/*inputs=*/3, /*max_rows=*/4, /*max_tokens=*/100};

// The status and message of the RequestError `f` throws.
template <typename F>
std::pair<int, std::string> refusal(F&& f) {
  try {
    f();
  } catch (const RequestError& e) {
    return {e.status, e.what()};
  }
  FAIL("no RequestError");
  return {};
}

}  // namespace

TEST_CASE("serve request: /predict rows of the model's inputs, as float32") {
  const PredictRequest r = parse_predict_request(R"({"data": [[0, 255, 1.5], [-2, 3e2, 7]]})", kLimits);
  CHECK(r.rows == 2);
  CHECK(r.data == std::vector<float>{0, 255, 1.5f, -2, 300, 7});
}

TEST_CASE("serve request: /predict refusals name the field, the value and what was expected") {
  const auto predict = [](const char* body) { return refusal([&] { parse_predict_request(body, kLimits); }); };
  CHECK(predict("{\"data\": [[1, 2, 3]").second.find("not JSON") != std::string::npos);
  CHECK(predict("[1, 2, 3]") == std::pair<int, std::string>(400, "the body is an array; expected a JSON object"));
  CHECK(predict(R"({"rows": []})").second.find("unknown field \"rows\"") != std::string::npos);
  CHECK(predict(R"({})").second.find("no \"data\"") != std::string::npos);
  CHECK(predict(R"({"data": []})").second == "\"data\" has no rows; expected 1 or more");
  CHECK(predict(R"({"data": [[1, 2]]})").second == "data[0] has 2 numbers; the model takes 3 inputs");
  CHECK(predict(R"({"data": [[1, 2, 3], 4]})").second == "data[1] is a number; expected an array of 3 numbers");
  CHECK(predict(R"({"data": [[1, "2", 3]]})").second == "data[0][1] is a string; expected a number");
  CHECK(predict(R"({"data": [[1, 2, 1e999]]})").second.find("1e999") != std::string::npos);
  CHECK(predict(R"({"data": [[1, 2, 1e39]]})").second.find("float32") != std::string::npos);
  CHECK(predict(R"({"data": [[1, 2, NaN]]})").first == 400);
  const auto [status, message] = predict(R"({"data": [[1,2,3],[1,2,3],[1,2,3],[1,2,3],[1,2,3]]})");
  CHECK(status == 413);
  CHECK(message == "\"data\" has 5 rows; at most 4 a request (serve --max-rows)");
}

TEST_CASE("serve request: /generate fields, defaults and bounds") {
  const GenerateRequest d = parse_generate_request(R"({"prompt": "Hi"})", kLimits);
  CHECK(d.prompt == "Hi");
  CHECK(d.options.tokens == 100);  // sample's 256, bounded by the limit
  CHECK(parse_generate_request(R"({"prompt": ""})", RequestLimits{0, 1, 1000}).options.tokens ==
        SampleOptions{}.tokens);
  const GenerateRequest r = parse_generate_request(
      R"({"prompt": "a\u00e9", "tokens": 100, "temperature": 0, "seed": 18446744073709551615, "top_k": 5})", kLimits);
  CHECK(r.prompt == "a\xc3\xa9");
  CHECK(r.options.tokens == 100);
  CHECK(r.options.temperature == 0);
  CHECK(r.options.seed == 18446744073709551615ull);
  CHECK(r.options.top_k == 5);
  const auto generate = [](const char* body) { return refusal([&] { parse_generate_request(body, kLimits); }); };
  CHECK(generate(R"({"prompt": "a", "tokens": 101})") ==
        std::pair<int, std::string>(413, "\"tokens\" is 101; at most 100 a request (serve --max-tokens)"));
  CHECK(generate(R"({"prompt": "a", "tokens": -1})").second.find("\"tokens\" is -1") != std::string::npos);
  CHECK(generate(R"({"prompt": "a", "tokens": 2.5})").first == 400);
  CHECK(generate(R"({"prompt": "a", "temperature": -1})").second.find("temperature") != std::string::npos);
  CHECK(generate(R"({"prompt": 5})").second == "\"prompt\" is a number; expected a string");
  CHECK(generate(R"({"prompt": "a", "temprature": 1})").second.find("unknown field \"temprature\"") !=
        std::string::npos);
  CHECK(generate(R"({"prompt": "a", "top_k": 257})").first == 400);
}

TEST_CASE(
    "serve request: a body nested deeper than 32 levels is refused before it is parsed; values are named by type") {
  const auto nested = [](int depth, const char* open, const char* close) {
    std::string body = "{\"data\": ";
    for (int i = 0; i < depth; ++i) body += open;
    for (int i = 0; i < depth; ++i) body += close;
    return body + "}";
  };
  const auto predict = [](const std::string& body) { return refusal([&] { parse_predict_request(body, kLimits); }); };
  // The object around "data" is the first level.
  CHECK(predict(nested(32, "[", "]")) ==
        std::pair<int, std::string>(400, "the body nests arrays and objects deeper than 32 levels; a request needs 3"));
  CHECK(predict(nested(31, "[", "]")).second.find("deeper") == std::string::npos);
  CHECK(predict(nested(100000, "[{\"a\":", "}]")).second.find("deeper than 32 levels") != std::string::npos);
  // Brackets inside strings are text, not levels.
  CHECK(predict(R"({"data": [["[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", 2, 3]]})").second ==
        "data[0][0] is a string; expected a number");
  // A value in a message: its type and size, never its rendering.
  const auto generate = [](const std::string& body) { return refusal([&] { parse_generate_request(body, kLimits); }); };
  CHECK(generate(R"({"prompt": "a", "tokens": [[1], [2], [3]]})").second ==
        "\"tokens\" is an array of 3 values; expected a whole number from 0 to 100");
  CHECK(generate(R"({"prompt": "a", "temperature": {"a": [1]}})").second ==
        "\"temperature\" is an object of 1 field; expected a finite number of at least 0 (0: greedy)");
  CHECK(generate(R"({"prompt": "a", "temperature": ")" + std::string(5000, 'x') + "\"}").second.size() < 200);
}

TEST_CASE("serve request: an error body is JSON even for bytes that are not UTF-8") {
  CHECK(error_body("bad \"x\"") == R"({"error":"bad \"x\""})");
  CHECK(error_body("\xff") == "{\"error\":\"\xef\xbf\xbd\"}");
}

TEST_CASE("predict batcher: requests that arrive together run as one batch, each gets its own rows") {
  std::vector<int> batches;
  std::mutex m;
  std::atomic<bool> release{false};
  // The model: class = the row's first input; the first batch waits until every request is queued.
  PredictBatcher batcher(
      2, 3, BatchingOptions{64, std::chrono::milliseconds(500)},
      [&](const float* x, int rows, int* classes, float* p) {
        while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        for (int r = 0; r < rows; ++r) {
          classes[r] = static_cast<int>(x[2 * r]);
          for (int c = 0; c < 3; ++c) p[3 * r + c] = x[2 * r + 1];
        }
      },
      [&](int rows) {
        std::lock_guard lock(m);
        batches.push_back(rows);
      });
  std::vector<std::thread> clients;
  std::vector<PredictAnswer> answers(8);
  for (int i = 0; i < 8; ++i)
    clients.emplace_back([&, i] {
      PredictBatcher::Arrival arrival(batcher);
      answers[i] = batcher.predict(arrival, {static_cast<float>(i), 10.0f * i, static_cast<float>(i), 1}, 2);
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  release = true;
  for (auto& t : clients) t.join();
  for (int i = 0; i < 8; ++i) {
    CHECK(answers[i].classes == std::vector<int>{i, i});
    CHECK(answers[i].probabilities.size() == 6);
    CHECK(answers[i].probabilities[0] == 10.0f * i);
    CHECK(answers[i].probabilities[3] == 1.0f);
  }
  // The first batch may have started with the first request alone; the rest came together.
  CHECK(std::accumulate(batches.begin(), batches.end(), 0) == 16);
  CHECK(batches.size() <= 2);
}

TEST_CASE("predict batcher: a lone request does not wait for the batch wait, and the rows bound holds") {
  std::vector<int> batches;
  PredictBatcher batcher(
      1, 1, BatchingOptions{3, std::chrono::seconds(10)},
      [](const float* x, int rows, int* classes, float* p) {
        for (int r = 0; r < rows; ++r) classes[r] = static_cast<int>(x[r]), p[r] = 1;
      },
      [&](int rows) { batches.push_back(rows); });
  const auto started = std::chrono::steady_clock::now();
  PredictBatcher::Arrival arrival(batcher);
  const PredictAnswer a = batcher.predict(arrival, {4, 5, 6, 7, 8}, 5);  // over the bound: runs alone
  CHECK(a.classes == std::vector<int>{4, 5, 6, 7, 8});
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
  CHECK(batches == std::vector<int>{5});
}

TEST_CASE("predict batcher: the model's exception reaches every request of its batch") {
  PredictBatcher batcher(1, 1, BatchingOptions{},
                         [](const float*, int, int*, float*) { throw std::runtime_error("model broke"); });
  PredictBatcher::Arrival arrival(batcher);
  CHECK_THROWS_WITH(batcher.predict(arrival, {1}, 1), "model broke");
}

TEST_CASE("classifier: normalisation, argmax of the first of equals, softmax rows summing to 1") {
  // 2 inputs -> 3 classes, identity: logits = W x + b.
  ModelLayout layout = mlp_model_layout(mlp_layout(MlpShape{2, {}, 3}));
  std::vector<float> params{1, 0, 0, 1, 1, 1,  // W [3, 2]
                            0, 0, 0};          // b
  ModelRecipe recipe;
  recipe.activation = "identity";
  recipe.input_scale = 0.5;
  recipe.mean = 1;
  recipe.inv_stddev = 2;
  Classifier c(layout, params, recipe, 1);
  const std::vector<float> raw{4, 2, 2, 2};  // x = (raw * 0.5 - 1) * 2: (2, 0) and (0, 0)
  int classes[2];
  float p[6];
  c.predict(raw.data(), 2, classes, p);
  CHECK(classes[0] == 0);  // logits (2, 0, 2): the first of equals
  CHECK(classes[1] == 0);  // all zero
  CHECK(p[0] == doctest::Approx(std::exp(2.0) / (2 * std::exp(2.0) + 1)));
  CHECK(p[3] == doctest::Approx(1.0 / 3));
  CHECK(p[0] + p[1] + p[2] == doctest::Approx(1.0));
  CHECK_THROWS_AS(Classifier(layout, std::vector<float>(5), recipe, 1), std::invalid_argument);
}

TEST_CASE("serve metrics: counters by path and status, histograms, unknown paths as other") {
  ServeMetrics m("mlp", "/m \"x\".h5", 40);
  m.request_started();
  m.request_finished("/predict", 200, 0.003);
  m.request_started();
  m.request_finished("/no/such/path", 404, 0.0001);
  m.request_finished("/predict", 413, -1);  // refused before routing: counted, not timed
  m.batch(3);
  m.generated(120);
  m.generated(7);
  const std::string text = m.prometheus();
  CHECK(text.find("slurm_train_serve_model_info{kind=\"mlp\",file=\"/m \\\"x\\\".h5\",step=\"40\"} 1") !=
        std::string::npos);
  CHECK(text.find("slurm_train_serve_requests_total{path=\"/predict\",status=\"200\"} 1\n") != std::string::npos);
  CHECK(text.find("slurm_train_serve_requests_total{path=\"/predict\",status=\"413\"} 1\n") != std::string::npos);
  CHECK(text.find("slurm_train_serve_requests_total{path=\"other\",status=\"404\"} 1\n") != std::string::npos);
  CHECK(text.find("slurm_train_serve_request_seconds_bucket{path=\"/predict\",le=\"0.0025\"} 0\n") !=
        std::string::npos);
  CHECK(text.find("slurm_train_serve_request_seconds_bucket{path=\"/predict\",le=\"0.005\"} 1\n") != std::string::npos);
  CHECK(text.find("slurm_train_serve_request_seconds_count{path=\"/predict\"} 1\n") != std::string::npos);
  CHECK(text.find("slurm_train_serve_batch_rows_bucket{le=\"2\"} 0\n") != std::string::npos);
  CHECK(text.find("slurm_train_serve_batch_rows_bucket{le=\"4\"} 1\n") != std::string::npos);
  CHECK(text.find("slurm_train_serve_requests_in_flight 0\n") != std::string::npos);
  CHECK(text.find("slurm_train_serve_generated_tokens_total 127\n") != std::string::npos);
}

TEST_CASE("bearer token: only the owner's file, only the exact token") {
  char dir[] = "/tmp/serve-token-XXXXXX";
  REQUIRE(mkdtemp(dir));
  const std::string path = std::string(dir) + "/token";
  std::ofstream(path) << "  s3cret-Token  \nignored\n";
  REQUIRE(chmod(path.c_str(), 0644) == 0);
  CHECK_THROWS_WITH(read_token_file(path), doctest::Contains("mode 0644"));
  REQUIRE(chmod(path.c_str(), 0600) == 0);
  CHECK(read_token_file(path) == "s3cret-Token");
  std::ofstream(path) << "\n";
  CHECK_THROWS_WITH(read_token_file(path), doctest::Contains("empty"));
  CHECK_THROWS_WITH(read_token_file(std::string(dir)), doctest::Contains("not a regular file"));
  CHECK(bearer_token_matches("Bearer s3cret", "s3cret"));
  CHECK_FALSE(bearer_token_matches("Bearer s3creT", "s3cret"));
  CHECK_FALSE(bearer_token_matches("Bearer s3cret2", "s3cret"));
  CHECK_FALSE(bearer_token_matches("s3cret", "s3cret"));
  CHECK_FALSE(bearer_token_matches("", "s3cret"));
  std::remove(path.c_str());
  rmdir(dir);
}

TEST_CASE("bearer token made by serve: random, mode 0600 in a private folder, never over a file or a link") {
  char home[] = "/tmp/serve-home-XXXXXX";
  REQUIRE(mkdtemp(home));
  const std::string folder = std::string(home) + "/.slurm-train/serve";
  const TokenFile a = make_token_file(folder, "a.token");
  const TokenFile b = make_token_file(folder, "b.token");
  CHECK(a.path == folder + "/a.token");
  CHECK(a.token.size() == 64);
  CHECK(a.token != b.token);
  CHECK(read_token_file(a.path) == a.token);
  struct stat st {};
  REQUIRE(stat(folder.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  REQUIRE(stat(a.path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  // An existing file or a planted link is not written through.
  CHECK_THROWS_WITH(make_token_file(folder, "a.token"), doctest::Contains("File exists"));
  REQUIRE(symlink("/tmp/elsewhere", (folder + "/c.token").c_str()) == 0);
  CHECK_THROWS_WITH(make_token_file(folder, "c.token"), doctest::Contains("File exists"));
  // A folder others may read, or a link in its place, is refused.
  REQUIRE(chmod(folder.c_str(), 0755) == 0);
  CHECK_THROWS_WITH(make_token_file(folder, "d.token"), doctest::Contains("mode 0755"));
  REQUIRE(chmod(folder.c_str(), 0700) == 0);
  const std::string linked = std::string(home) + "/linked";
  REQUIRE(symlink(folder.c_str(), linked.c_str()) == 0);
  CHECK_THROWS_WITH(make_token_file(linked, "e.token"), doctest::Contains("cannot open the folder"));
  REQUIRE(std::system(("rm -rf " + std::string(home)).c_str()) == 0);
}
