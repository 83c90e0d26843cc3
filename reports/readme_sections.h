// What one README section shows: the latest complete run of the section's suite that has
// cases matching its filters, rendered as that run's tables or as a plot file beside the
// README. The command line only reads and writes the README (reports/readme.h parses
// the markers); this picks the run and renders it.
//
// Thread-safety: reads the store; plot sections run gnuplot. One thread at a time per
// Store.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "reports/readme.h"
#include "results/store.h"

namespace seqbench {

// Section attributes that are not workload filters.
bool IsSectionAttribute(const std::string& name);

struct SelectedRun {
  RunRecord run;
  std::vector<CaseRecord> cases;  // those the section's filters and pipelines= select
};

// The newest complete run of suite `suite` with at least one selected case. Throws
// ReadmeError naming the suite when there is none, or for an unknown pipelines= name.
SelectedRun SelectRunForSection(const Store& store, const ReadmeSection& section);

// Where a plot section's file= may be written: relative, ending in .svg, inside
// `readme_dir` after `..` and symlinks are resolved, and not an existing file other than an
// SVG seqbench wrote. Returns the resolved path; throws ReadmeError otherwise.
std::string ResolvePlotFile(const std::string& readme_dir, const std::string& file);

// The section's new content: Markdown tables, or the image link of a plot written to
// `readme_dir`/file=. Throws ReadmeError for a section that cannot be rendered.
std::string RenderReadmeSection(const Store& store, const ReadmeSection& section,
                                const std::string& readme_dir);

}  // namespace seqbench
