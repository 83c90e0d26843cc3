// Renders one stored run: Markdown tables in the seed's shape (one per mode, dtype and
// device, with speedup, throughput and correctness), CSV and JSON with every field, and
// Google Benchmark's JSON format so that its tools/compare.py can read a seqbench run.
// Columns and fields are documented in reports/README.md.
//
// Thread-safety: pure functions over their arguments.
#pragma once

#include <string>
#include <vector>

#include "results/store.h"

namespace seqbench {

// `baseline` is the suite's baseline variant name, the reference of the speedup column.
std::string RenderMarkdown(const RunRecord& run, const std::vector<CaseRecord>& cases,
                           const std::string& baseline);
std::string RenderCsv(const RunRecord& run, const std::vector<CaseRecord>& cases);
std::string RenderJson(const RunRecord& run, const std::vector<CaseRecord>& cases);
std::string RenderGbenchJson(const RunRecord& run, const std::vector<CaseRecord>& cases);

// "mode=train B=32 T=256 min_len=128 ..." without the variant: what a case ran on.
std::string WorkloadLabel(const CaseRecord& record);
// Cases on the same workload compare directly (speedup, expectations, compare).
bool SameWorkload(const CaseRecord& a, const CaseRecord& b);
std::string EnvironmentValue(const RunRecord& run, const std::string& key);
// The median of repetition samples (the mean of the middle two for an even count).
double SampleMedian(std::vector<double> samples);
// A workload field of a case as text (mode, dtype, device, batch, seq_len, min_len,
// generate_tokens, layers, width), or "" for another name: what `where` filters match.
std::string CaseField(const CaseRecord& c, const std::string& name);

}  // namespace seqbench
