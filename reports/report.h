// Renders one stored run: Markdown tables in the seed's shape (one per mode, dtype and
// device, with speedup, throughput and correctness), CSV and JSON with every field
// (report.cc), and Google Benchmark's JSON format so that its tools/compare.py can read a
// seqbench run (gbench_json.cc). What the numbers mean (speedup, roofline, warnings) is
// defined once in reports/run_facts.h; these only lay them out. Columns and fields are
// documented in reports/README.md.
//
// Thread-safety: pure functions over their arguments.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "reports/run_facts.h"
#include "results/records.h"

namespace seqbench {

// Markdown tables of a benchmark run, one per mode, dtype and device. The Speedup
// column is Speedup() over the run's baseline (run.baseline) on the same workload, or,
// where the baseline did not run that workload, on the group's first baseline case.
std::string RenderMarkdown(const RunRecord& run, const std::vector<CaseRecord>& cases);
std::string RenderCsv(const RunRecord& run, const std::vector<CaseRecord>& cases);
std::string RenderJson(const RunRecord& run, const std::vector<CaseRecord>& cases);
std::string RenderGbenchJson(const RunRecord& run, const std::vector<CaseRecord>& cases);

// RunWarnings as a Markdown list under a bold title; "" when there is none.
std::string RenderWarnings(const std::vector<std::string>& warnings);

// report --phases: each case's wall time by phase (kCasePhases, stored as phase_<name>_s),
// the timed samples inside the timed loop, what no phase covers ("other": the case's
// bookkeeping), and the samples' share of the case; a total row last. Cases stored before
// phases were recorded show "–".
std::string RenderPhaseTable(const RunRecord& run, const std::vector<CaseRecord>& cases);

}  // namespace seqbench
