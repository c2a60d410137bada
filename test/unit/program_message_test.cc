#include "launcher/program_message.h"

#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "launcher/program_pipe.h"

#include <fcntl.h>
#include <unistd.h>

#include <vector>

using slurm_train::parse_program_message;
using slurm_train::ProgramDone;
using slurm_train::ProgramMetrics;

TEST_CASE("program message: a step with figures, null as NaN, by name") {
  const auto m = parse_program_message(R"({"step": 120, "metrics": {"loss": 0.41, "acc": null, "lr": 3}})");
  const auto& figures = std::get<ProgramMetrics>(m);
  CHECK(figures.step == 120);
  REQUIRE(figures.values.size() == 3);
  CHECK(figures.values[0].first == "acc");
  CHECK(std::isnan(figures.values[0].second));
  CHECK(figures.values[1] == std::pair<std::string, double>("loss", 0.41));
  CHECK(figures.values[2] == std::pair<std::string, double>("lr", 3.0));
  CHECK(std::get<ProgramMetrics>(parse_program_message(R"({"step": 0})")).values.empty());
  CHECK(std::holds_alternative<ProgramDone>(parse_program_message(R"({"done": true})")));
}

TEST_CASE("program message: every bad line is refused saying what was wrong") {
  auto refused = [](const std::string& line) {
    try {
      parse_program_message(line);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK(refused("not json") == "'not json': expected a JSON object");
  CHECK(refused("[1, 2]") == "'[1, 2]': expected a JSON object");
  CHECK(refused(R"({"step": -1})").find("expected \"step\", a whole number >= 0") != std::string::npos);
  CHECK(refused(R"({"step": 1.5})").find("a whole number") != std::string::npos);
  CHECK(refused(R"({"metrics": {}})").find("expected \"step\"") != std::string::npos);
  CHECK(refused(R"({"step": 1, "extra": 2})").find("unknown field \"extra\"") != std::string::npos);
  CHECK(refused(R"({"step": 1, "metrics": [1]})").find("\"metrics\" to be an object") != std::string::npos);
  CHECK(refused(R"({"step": 1, "metrics": {"loss": "x"}})") == "metric 'loss': expected a number or null, got \"x\"");
  CHECK(refused(R"({"step": 1, "metrics": {"loss": true}})").find("expected a number or null") != std::string::npos);
  CHECK(refused(R"({"step": 1, "metrics": {"bad name": 1}})").find("metric name 'bad name'") != std::string::npos);
  CHECK(refused(R"({"step": 1, "metrics": {"step": 1}})") ==
        "metric name 'step' is taken by the metrics file's own field");
  CHECK(refused(R"({"done": false})") == "'{\"done\": false}': expected {\"done\": true} alone");
  CHECK(refused(R"({"done": true, "step": 1})").find("alone") != std::string::npos);
  std::string many = R"({"step": 1, "metrics": {)";
  for (int i = 0; i < 65; ++i) many += (i ? "," : "") + std::string("\"m") + std::to_string(i) + "\": 1";
  CHECK(refused(many + "}}") == "65 metrics in one line (at most 64)");
  CHECK(refused(std::string(slurm_train::kMaxProgramLine + 1, ' ')).find("a line of 16385 bytes") == 0);
}

TEST_CASE("program message: metric names") {
  CHECK(slurm_train::metric_name_problem("loss").empty());
  CHECK(slurm_train::metric_name_problem("_eval/test.loss-2").empty());
  CHECK(!slurm_train::metric_name_problem("").empty());
  CHECK(!slurm_train::metric_name_problem("2loss").empty());
  CHECK(!slurm_train::metric_name_problem("a b").empty());
  CHECK(!slurm_train::metric_name_problem("lo\"ss").empty());
  CHECK(!slurm_train::metric_name_problem(std::string(65, 'a')).empty());
  CHECK(slurm_train::metric_name_problem(std::string(64, 'a')).empty());
  CHECK(!slurm_train::metric_name_problem("run").empty());
}

TEST_CASE("program pipe: lines in order across writes and reopenings; a line too long is skipped whole") {
  slurm_train::ProgramPipe pipe("/tmp/program-pipe-test.");
  std::vector<std::string> lines;
  std::vector<std::size_t> too_long;
  auto read = [&] {
    pipe.read_lines([&](std::string_view l) { lines.emplace_back(l); }, [&](std::size_t n) { too_long.push_back(n); });
  };
  auto write = [&](const std::string& text) {
    const int fd = ::open(pipe.path().c_str(), O_WRONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    REQUIRE(::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
    ::close(fd);
  };
  read();  // nothing yet: does not block
  CHECK(lines.empty());
  write("one\ntw");
  read();
  write("o\n\nthree");
  read();
  CHECK(lines == std::vector<std::string>{"one", "two", ""});
  write("\n" + std::string(slurm_train::kMaxProgramLine + 10, 'x'));
  read();
  write("xx\nfour\n");
  read();
  CHECK(lines == std::vector<std::string>{"one", "two", "", "three", "four"});
  CHECK(too_long == std::vector<std::size_t>{slurm_train::kMaxProgramLine + 12});
  const std::string path = pipe.path();
  pipe.remove();
  CHECK(::access(path.c_str(), F_OK) != 0);
}
