// SVG plots of a run through gnuplot: one line per variant, a metric against a workload
// field (e.g. runtime against seq_len), log axes where the data spans a decade or more,
// and labelled axes with units.
//
// Thread-safety: BuildGnuplotScript() is pure; RenderPlot() runs a gnuplot process.
#pragma once

#include <string>
#include <vector>

#include "results/records.h"

namespace seqbench {

struct PlotRequest {
  std::string x = "seq_len";  // seq_len | batch | layers | memory (activation bytes: one
                              // line per registered variant across its options)
  std::string y = "runtime";  // runtime | memory | tokens_per_s | speedup | recompute
  std::string over;           // y = speedup: median runtime of this variant / the case's,
                              // on the same workload; x = layers also draws the ideal
                              // wavefront speedup L*T/(T+L-1)
  std::string title;
  std::string output;  // the .svg file
};

// One line per variant and per other workload field (e.g. batch, width) that varies.
// Throws std::invalid_argument for an unknown x or y, or when no case has the metric.
std::string BuildGnuplotScript(const std::vector<CaseRecord>& cases, const PlotRequest& request);

// Runs gnuplot on the script; throws std::runtime_error with gnuplot's exit status or a
// hint to install gnuplot-nox.
void RenderPlot(const std::vector<CaseRecord>& cases, const PlotRequest& request);

// The start every seqbench plot shares: an SVG terminal, the title, the axis labels, a grid
// and the key outside on the right. No output file: RunGnuplot() names it.
std::string GnuplotPreamble(const std::string& title, const std::string& x_label,
                            const std::string& y_label);
// `text` as a gnuplot string that gnuplot takes as data only: single-quoted (no backquote
// command substitution, no escapes), ' doubled, control characters (a newline would start
// a new command) turned into spaces.
std::string GnuplotQuoted(const std::string& text);
// Runs gnuplot itself (no shell) on the script, with its output going to a temporary file
// beside `output`; stamps the SVG with kSeqbenchSvgStamp and renames it over `output`, so
// that a failed plot leaves `output` as it was. Throws std::runtime_error on failure.
void RunGnuplot(const std::string& script, const std::string& output);

// The comment every SVG seqbench writes carries, by which `readme` recognises the files it
// may overwrite.
inline constexpr const char* kSeqbenchSvgStamp = "<!-- written by seqbench -->";
// Whether the file at `path` is an SVG that seqbench wrote (it carries the stamp).
bool IsSeqbenchSvg(const std::string& path);

}  // namespace seqbench
