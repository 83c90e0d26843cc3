// Text corpora and the byte-level tokenizer, on small fixture files in each published
// format (tests/data/), including bad input: a missing file, an empty one, invalid UTF-8
// and invalid EUC-JP each fail with the file and what is wrong.
#include "harness/text_data.h"

#include <catch2/catch.hpp>

namespace seqbench::text {
namespace {

const std::string kData = std::string(SEQBENCH_SOURCE_DIR) + "/tests/data/";

std::vector<std::string> Decoded(const Corpus& corpus) {
  std::vector<std::string> texts;
  for (const auto& sequence : corpus.sequences) texts.push_back(Decode(sequence));
  return texts;
}

TEST_CASE("byte-level tokens round-trip UTF-8 and name the special tokens", "[text]") {
  const std::string text = "Héllo ✓ 漢字";
  const auto ids = Encode(text);
  CHECK(ids.size() == text.size());  // one id per byte
  CHECK(*std::max_element(ids.begin(), ids.end()) < 256);
  CHECK(Decode(ids) == text);
  CHECK(Decode({kEn, 'a', kJa, 'b', kEos, kPad}) == "<en>a<ja>b<eos><pad>");
  CHECK(kVocabularySize == 260);
  CHECK_THROWS_WITH(Encode(std::string("ok \xff\xfe"), "input"),
                    Catch::Contains("input: invalid UTF-8 sequence at byte 3"));
  CHECK_THROWS_WITH(Encode(std::string("cut \xe2\x9c"), "input"),
                    Catch::Contains("input: incomplete UTF-8 sequence at byte 4"));
}

TEST_CASE("fortunes: one sequence per quotation, index files ignored", "[text]") {
  const Corpus corpus = LoadFortunes(kData + "fortunes");
  CHECK(Decoded(corpus) == std::vector<std::string>{"Héllo wörld ✓<eos>", "A quote.<eos>",
                                                    "Second,\n  a multi-line quote.<eos>"});
}

TEST_CASE("edict: EUC-JP entries become <en> glosses <ja> headword", "[text]") {
  const Corpus corpus = LoadEdict(kData + "edict.euc");
  CHECK(Decoded(corpus) == std::vector<std::string>{"<en> Chinese characters; kanji <ja> 漢字<eos>",
                                                    "<en> cat <ja> 猫<eos>",
                                                    "<en> apple <ja> 林檎<eos>"});
}

TEST_CASE("Rotten Tomatoes and DailyDialog in their published formats", "[text]") {
  CHECK(Decoded(LoadRottenTomatoes(kData + "rt")) ==
        std::vector<std::string>{"a gripping , funny film .<eos>", "the best of the year .<eos>",
                                 "tedious and overlong .<eos>"});
  CHECK(
      Decoded(LoadDailyDialog(kData + "dialogues_text.txt")) ==
      std::vector<std::string>{"Hi there .\nHello !<eos>", "How are you ?\nFine , thanks .<eos>"});
}

TEST_CASE("bad input fails with the file and what is wrong", "[text]") {
  CHECK_THROWS_WITH(LoadDailyDialog(kData + "bad/missing.txt"),
                    Catch::Contains("bad/missing.txt: cannot open"));
  CHECK_THROWS_WITH(LoadDailyDialog(kData + "bad/empty.txt"),
                    Catch::Contains("bad/empty.txt: is empty"));
  CHECK_THROWS_WITH(LoadDailyDialog(kData + "bad/invalid_utf8.txt"),
                    Catch::Contains("bad/invalid_utf8.txt: invalid UTF-8 sequence at byte 3"));
  CHECK_THROWS_WITH(LoadEdict(kData + "bad/invalid.euc"),
                    Catch::Contains("bad/invalid.euc: invalid EUC-JP sequence at byte 2"));
  CHECK_THROWS_WITH(LoadFortunes(kData + "bad/empty.txt"), Catch::Contains("is not a directory"));
  CHECK_THROWS_WITH(LoadRottenTomatoes(kData + "bad"),
                    Catch::Contains("rt-polarity.pos: cannot open"));
  CHECK_THROWS_WITH(LoadEdict(kData + "dialogues_text.txt"),
                    Catch::Contains("holds no text in the expected format"));
}

}  // namespace
}  // namespace seqbench::text
