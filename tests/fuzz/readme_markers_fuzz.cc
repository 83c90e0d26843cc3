// libFuzzer target for the README marker parser (reports/readme.h), the one parser of
// user-written text that needs no LibTorch. Properties checked on every input, beyond "no
// crash, no sanitizer report": a rejected file throws ReadmeError only (anything else
// escapes and libFuzzer reports it); what an accepted file is rewritten to is accepted
// again and is a fixed point of the same rewrite.
// Built and run by tests/fuzz/run_fuzzers (clang with -fsanitize=fuzzer,address).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "reports/readme.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  // Each section renders a text derived from its attributes (not its line, which moves
  // when an earlier section changes length), markers' look-alikes excluded.
  const seqbench::SectionRenderer render = [](const seqbench::ReadmeSection& section) {
    std::string content = "section:";
    for (const auto& [name, value] : section.attributes) content += " " + name + "=" + value;
    std::string safe;
    for (const char c : content) safe += (c == '<' || c == '>' || c == '\n') ? '_' : c;
    return safe + "\n";
  };
  std::string once;
  try {
    once = seqbench::RewriteReadme(text, "fuzz.md", render);
  } catch (const seqbench::ReadmeError&) {
    return 0;  // refused, with a message: fine
  }
  // Rendering the same attributes again changes nothing.
  std::string twice;
  try {
    twice = seqbench::RewriteReadme(once, "fuzz.md", render);
  } catch (const seqbench::ReadmeError&) {
    std::abort();  // what seqbench wrote, it must read back
  }
  if (twice != once) std::abort();
  return 0;
}
