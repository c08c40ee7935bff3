// Brown corpus preparation on a small hand-written raw sample: tags, spacing, split, idempotence.
#include "data/brown.h"

#include <gtest/gtest.h>

#include "framework/error.h"
#include "support/errors.h"
#include "support/temp_dir.h"

namespace tf::data {
namespace {

using tf::testing::read_file;
using tf::testing::TempDir;
using tf::testing::write_file;

TEST(BrownSentence, StripsTagsAndRebuildsSpacing) {
  // The first sentence of ca01, as the raw corpus writes it.
  EXPECT_EQ(brown_sentence("\tThe/at Fulton/np-tl County/nn-tl Grand/jj-tl Jury/nn-tl said/vbd Friday/nr an/at "
                           "investigation/nn of/in Atlanta's/np$ recent/jj primary/nn election/nn produced/vbd "
                           "``/`` no/at evidence/nn ''/'' that/cs any/dti irregularities/nns took/vbd place/nn ./."),
            "The Fulton County Grand Jury said Friday an investigation of Atlanta's recent primary election "
            "produced \"no evidence\" that any irregularities took place.");
  EXPECT_EQ(brown_sentence("``/`` Only/rb a/at relative/jj handful/nn ''/'' ,/, the/at jury/nn said/vbd ;/. ;/."),
            "\"Only a relative handful\", the jury said;");
}

TEST(BrownSentence, CollapsesDoubledPunctuation) {
  EXPECT_EQ(brown_sentence("Is/bez it/pps ?/. ?/."), "Is it?");
  EXPECT_EQ(brown_sentence("Go/vb !/. !/."), "Go!");
  EXPECT_EQ(brown_sentence("Mrs./np Davis/np 3/cd ,/, ,/, Mrs./np Hicks/np ./. ./."), "Mrs. Davis 3, Mrs. Hicks.");
  EXPECT_EQ(brown_sentence("won/vbn by/in Ivan/np Allen/np Jr./np ./."), "won by Ivan Allen Jr.");
  EXPECT_EQ(brown_sentence("at/in 7:30/cd p.m./rb ./."), "at 7:30 p.m.");
  EXPECT_EQ(brown_sentence("Is/bez it/pps Jr./np ?/."), "Is it Jr.?");
}

TEST(BrownSentence, TagAfterTheLastSlash) {
  EXPECT_EQ(brown_sentence("about/rb 1/2/cd of/in it/ppo ./."), "about 1/2 of it.");
}

TEST(BrownSentence, BracketsCliticsQuotesAndDashes) {
  EXPECT_EQ(brown_sentence("(/( see/vb page/nn 3/cd )/) :/: it/pps do/do n't/* matter/vb"),
            "(see page 3): it don't matter");
  EXPECT_EQ(brown_sentence("John/np 's/$ dog/nn 'll/md bark/vb"), "John's dog'll bark");
  EXPECT_EQ(brown_sentence("getting/vbg more/ap '/' pro/jj '/' letters/nns ./."), "getting more 'pro' letters.");
  // A ' followed by no word closes an inner quotation, before the outer closing quote.
  EXPECT_EQ(brown_sentence("``/`` See/vb Jim/np '/' ''/'' ,/, he/pps says/vbz ./."), "\"See Jim'\", he says.");
  EXPECT_EQ(brown_sentence("It/pps was/bedz --/-- as/cs ever/rb --/-- late/jj ./."), "It was -- as ever -- late.");
  EXPECT_EQ(brown_sentence("   \t  "), "");
}

// Twelve one-sentence documents ca01..ca12 (plus a file that is not a document).
void write_sample(const std::filesystem::path& raw) {
  for (int d = 1; d <= 12; ++d) {
    const std::string name = (d < 10 ? "ca0" : "ca") + std::to_string(d);
    write_file(raw / name, "\n\n\tDocument/nn " + std::to_string(d) + "/cd begins/vbz ./.\n\n\n\tIt/pps ends/vbz ?/. ?/.\n");
  }
  write_file(raw / "README", "not/at a/at document/nn");
}

std::string expected_document(int d) { return "Document " + std::to_string(d) + " begins.\nIt ends?\n"; }

TEST(PrepareBrown, SplitsEveryTenthDocumentToValidation) {
  TempDir dir;
  write_sample(dir / "raw");
  const BrownSplits s = prepare_brown(dir / "raw", dir / "out");
  EXPECT_TRUE(s.rebuilt);
  EXPECT_EQ(s.train_documents, 11);
  EXPECT_EQ(s.val_documents, 1);
  std::string train;
  for (int d = 1; d <= 12; ++d)
    if (d != 10) {
      if (!train.empty()) train += '\n';  // a blank line between documents
      train += expected_document(d);
    }
  EXPECT_EQ(read_file(s.train), train);
  EXPECT_EQ(read_file(s.val), expected_document(10));  // index 9 in sorted order: ca10
}

TEST(PrepareBrown, IsIdempotentAndRebuildsWhenRawIsNewer) {
  TempDir dir;
  write_sample(dir / "raw");
  ASSERT_TRUE(prepare_brown(dir / "raw", dir / "out").rebuilt);
  const std::string first = read_file(dir / "out/train.txt");
  EXPECT_FALSE(prepare_brown(dir / "raw", dir / "out").rebuilt);

  const auto later = std::filesystem::last_write_time(dir / "out/train.txt") + std::chrono::seconds(5);
  write_file(dir / "raw/ca03", "Changed/vbn ./.\n");
  std::filesystem::last_write_time(dir / "raw/ca03", later);
  ASSERT_TRUE(prepare_brown(dir / "raw", dir / "out").rebuilt);
  const std::string second = read_file(dir / "out/train.txt");
  EXPECT_NE(second, first);
  EXPECT_NE(second.find("\nChanged.\n"), std::string::npos);
}

TEST(PrepareBrown, MissingCorpusPointsToSetup) {
  TempDir dir;
  for (const auto& raw : {dir / "absent", dir.path()}) {  // no folder; a folder without documents
    testing::expect_error<InputError>([&] { prepare_brown(raw, dir / "out"); }, "scripts/setup.sh --corpus");
  }
}

}  // namespace
}  // namespace tf::data
