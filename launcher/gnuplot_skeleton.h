// A gnuplot script's skeleton: its statements as gnuplot 5.4 splits them, one a line, each
// string literal's text blanked and comments left out. Two scripts with the same skeleton run
// the same commands on possibly other text: `plot` compares its script with the one its
// template gives on placeholder text, so that no run name, title or path can add a command
// (launcher/gnuplot_text.h quotes them; this is the check that the quoting held).
//
// Read as gnuplot reads a script (tried with gnuplot 5.4):
//   - a line is cut at a NUL; a CR before its end is dropped; a backslash at its end (after
//     that) joins the next line, inside a string or a comment too;
//   - outside strings, ';' ends a statement and '#' starts a comment to the line's end;
//   - '...' is a string in which '' is a quote; "..." one in which a backslash escapes the next
//     character; a string still open at the line's end ends there;
//   - backquotes in a double-quoted string run a command: they are kept in its skeleton, so that
//     a script with one never matches a template without (one after a backslash too).
#pragma once

#include <string>
#include <string_view>

namespace slurm_train {

std::string gnuplot_skeleton(std::string_view script);

}  // namespace slurm_train
