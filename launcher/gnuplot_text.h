// Text and paths as gnuplot string literals that cannot end their statement: what `plot` puts
// into its script (run names, the title, the PNG it writes, the data files it reads) reaches
// gnuplot as data, never as a command. What gnuplot 5.4 does with a single-quoted string, as
// tried with gnuplot-nox:
//   - a newline ends the statement, string or not: the next line is a command of its own;
//   - a NUL cuts the line: what follows it on that line is dropped unread;
//   - a backslash before a line end joins the next line, inside a string too;
//   - a CR before a line end is dropped; elsewhere it stays in the string;
//   - '' is a quote inside the string; backslash is no escape there;
//   - backquotes (command substitution) and @ (macros) are left alone, where a double-quoted
//     string runs `...`: so every literal here is single-quoted;
//   - a string of 2 MB is read whole: no length ends one early.
#pragma once

#include <string>
#include <string_view>

namespace slurm_train {

// `text` as a single-quoted literal to show: each control byte (below 0x20, and 0x7f) as U+FFFD,
// which shows that something unprintable was there; each ' doubled.
std::string gnuplot_text(std::string_view text);

// `path` as a single-quoted literal of a file gnuplot opens or writes. A path with a control
// byte is refused (std::runtime_error naming `what`, the path and the byte): replacing it would
// open another file. A relative path is given as ./path: gnuplot reads a leading '|' or '<' as
// a command to run, a leading '~' as the home folder, and '-', '+' or '' as no file at all.
std::string gnuplot_path(std::string_view what, std::string_view path);

}  // namespace slurm_train
