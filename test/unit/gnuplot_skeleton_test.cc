#include "launcher/gnuplot_skeleton.h"

#include <doctest/doctest.h>

#include <string>

using namespace slurm_train;
using namespace std::string_literals;

TEST_CASE("gnuplot skeleton: one statement a line, string text blanked, comments and blank statements left out") {
  CHECK(gnuplot_skeleton("set title 'loss'\nplot 'a.tsv' u 1:2 t 'x', \"b\" u 1:3\n") ==
        "set title ''\nplot '' u 1:2 t '', \"\" u 1:3\n");
  CHECK(gnuplot_skeleton("  set grid ; ;unset key # a comment; print 1\n\n") == "set grid\nunset key\n");
  CHECK(gnuplot_skeleton("print 1#2") == "print 1\n");
  CHECK(gnuplot_skeleton("") == "");
}

TEST_CASE("gnuplot skeleton: quotes inside strings are read as gnuplot reads them") {
  // '' is a quote inside a single-quoted string, never its end.
  CHECK(gnuplot_skeleton("print 'a'';print 1'") == "print ''\n");
  // A backslash escapes a double quote inside a double-quoted string, and nothing in a single-quoted one.
  CHECK(gnuplot_skeleton("print \"a\\\";print 1\"") == "print \"\"\n");
  CHECK(gnuplot_skeleton("print 'a\\';print 1") == "print ''\nprint 1\n");
  // '#' and ';' are text inside strings.
  CHECK(gnuplot_skeleton("set title 'a # b; c'") == "set title ''\n");
}

TEST_CASE("gnuplot skeleton: a line end ends a string and its statement, unless a backslash joins the next line") {
  CHECK(gnuplot_skeleton("set title 'a\nprint system(\"id\")\n'") == "set title '\nprint system(\"\")\n'\n");
  CHECK(gnuplot_skeleton("print 'a\\\nb'; print 2") == "print ''\nprint 2\n");
  CHECK(gnuplot_skeleton("print 1 \\\r\n+ 2\r\n") == "print 1 + 2\n");
  // A comment that ends in a backslash swallows the next line.
  CHECK(gnuplot_skeleton("# note \\\nprint 1\nprint 2\n") == "print 2\n");
}

TEST_CASE("gnuplot skeleton: a NUL cuts its line") {
  CHECK(gnuplot_skeleton("print 'a\0'; print 1\nprint 2\n"s) == "print '\nprint 2\n");
  // The cut line has no backslash at its end any more: no join.
  CHECK(gnuplot_skeleton("print 1\0 \\\n+ 2\n"s) == "print 1\n+ 2\n");
}

TEST_CASE("gnuplot skeleton: backquotes in double-quoted strings stay, so that a command substitution shows") {
  CHECK(gnuplot_skeleton("set title \"a`id`b\"") == "set title \"``\"\n");
  CHECK(gnuplot_skeleton("set title \"a\\`id`\"") == "set title \"``\"\n");
  CHECK(gnuplot_skeleton("set title 'a`id`b'") == "set title ''\n");
  CHECK(gnuplot_skeleton("print `id` @macro") == "print `id` @macro\n");
}
