#include "launcher/gnuplot_text.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "launcher/gnuplot_skeleton.h"
#include "launcher/subprocess.h"
#include "test/unit/test_support.h"

using namespace slurm_train;
using namespace std::string_literals;
using slurm_train::testing::check_refused;
using slurm_train::testing::TempDir;

namespace {

// A name that, quoted by doubling quotes alone, ends its statement and runs a command.
const std::string kNewlinePayload = "lr-0.1\nprint system(\"touch /tmp/x\")\n";

}  // namespace

TEST_CASE("gnuplot text: control bytes become U+FFFD and quotes are doubled, inside single quotes") {
  CHECK(gnuplot_text("lr-0.001") == "'lr-0.001'");
  CHECK(gnuplot_text("it's") == "'it''s'");
  CHECK(gnuplot_text("") == "''");
  CHECK(gnuplot_text("a\nb\rc\td\0e\x7f"
                     "f\x1bg"s) ==
        "'a\xEF\xBF\xBD"
        "b\xEF\xBF\xBD"
        "c\xEF\xBF\xBD"
        "d\xEF\xBF\xBD"
        "e\xEF\xBF\xBD"
        "f\xEF\xBF\xBD"
        "g'");
  // Backquotes, @ and backslashes are plain text inside single quotes; UTF-8 stays as it is.
  CHECK(gnuplot_text("`id` @m a\\") == "'`id` @m a\\'");
  CHECK(gnuplot_text("r\xC3\xA9sum\xC3\xA9") == "'r\xC3\xA9sum\xC3\xA9'");
}

TEST_CASE("gnuplot text: a name with a newline and a command stays one string of one statement") {
  const std::string literal = gnuplot_text(kNewlinePayload);
  for (char c : literal) CHECK(static_cast<unsigned char>(c) >= 0x20);
  CHECK(gnuplot_skeleton("set title " + literal + "\n") == "set title ''\n");
}

TEST_CASE("gnuplot text: a path with a control character is refused, naming it and the byte") {
  check_refused<std::runtime_error>([] { gnuplot_path("the output path (-o)", "a\nb.png"); },
                                    "the output path (-o) 'a\\x0ab.png' holds a control character (byte 1 is \\x0a)");
  check_refused<std::runtime_error>([] { gnuplot_path("the plot data file", "/t/r\0.tsv"s); },
                                    "the plot data file '/t/r\\x00.tsv' holds a control character (byte 4 is \\x00)");
  check_refused<std::runtime_error>([] { gnuplot_path("the output path (-o)", "x\x7f"); }, "(byte 1 is \\x7f)");
  check_refused<std::runtime_error>([] { gnuplot_path("the output path (-o)", ""); },
                                    "the output path (-o) is empty: expected a file's path");
}

TEST_CASE("gnuplot text: a relative path starts with ./, so that gnuplot opens no pipe, home or special file") {
  CHECK(gnuplot_path("p", "/tmp/run0.tsv") == "'/tmp/run0.tsv'");
  CHECK(gnuplot_path("p", "curves.png") == "'./curves.png'");
  CHECK(gnuplot_path("p", "|touch x") == "'./|touch x'");
  CHECK(gnuplot_path("p", "< touch x") == "'./< touch x'");
  CHECK(gnuplot_path("p", "~/c.png") == "'./~/c.png'");
  CHECK(gnuplot_path("p", "-") == "'./-'");
  CHECK(gnuplot_path("p", "it's.png") == "'./it''s.png'");
}

TEST_CASE("gnuplot text: the real gnuplot prints each hostile text back as one line and runs none of its commands") {
  TempDir dir;
  const std::string marker = dir.path + "/ran";
  const std::string touch = "system(\"touch " + marker + "\")";
  const std::vector<std::string> texts = {
      "a\n" + touch + "\n",
      "a'\n" + touch + "\n'",
      "a\\\n" + touch,
      "a\r\n" + touch,
      "a\0'; "s + touch,
      "`touch " + marker + "`",
      "@m",
      "a\\",
      std::string(4096, 'x') + "\n" + touch,
  };
  // print writes to stderr unless told; run_process reads stdout.
  std::string script = "set print '-'\nm = '" + touch + "'\n";
  for (const auto& t : texts) script += "print " + gnuplot_text(t) + "\n";
  script += "print 'end'\n";
  const std::string path = dir.path + "/texts.gp";
  std::ofstream(path) << script;
  const ProcessResult r = run_process({"gnuplot", path}, "gnuplot-nox");
  CHECK_FALSE(std::filesystem::exists(marker));
  REQUIRE(r.exit_code == 0);
  std::string expected;
  for (const auto& t : texts) {
    std::string shown = gnuplot_text(t);
    shown = shown.substr(1, shown.size() - 2);
    for (std::size_t q = shown.find("''"); q != std::string::npos; q = shown.find("''", q + 1)) shown.erase(q, 1);
    expected += shown + "\n";
  }
  CHECK(r.out == expected + "end\n");
}
